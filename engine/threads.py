"""OpenMP's worker threads, one team at a time.

torch's CPU kernels run on OpenMP (libgomp in the Linux wheels), and each thread that runs a parallel op keeps a
team of worker threads of its own until it exits. Once the teams together hold more threads than the process may use
CPUs, libgomp stops spin-waiting between parallel regions (a far shorter "throttled" spin), so every small op pays
for waking its team through the kernel. The engine loads a model in the caller's thread and computes in a
worker thread: two teams. On a 2-core machine that made a denoising step 99 ms against 58 ms, and a served page about
1.5 times slower than the same page run in the caller's thread (docs/benchmarks.md, session 36).

So the thread that loaded the model frees its team when an engine takes over, and an engine's worker frees its own
whenever it goes idle, so that two engines (a page and its autoregressive baseline) do not keep two teams. A freed
team costs nothing to rebuild: the thread's next parallel op starts one. Other OpenMP runtimes (LLVM's libomp,
Intel's) are left alone.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["ThreadShare", "openmp_runtimes", "release_openmp_threads"]

logger = logging.getLogger(__name__)

_PAUSE_HARD = 2  # omp_pause_hard (OpenMP 5.0): libgomp frees the calling thread's team


@functools.cache
def openmp_runtimes() -> tuple[ctypes.CDLL, ...]:
    """The libgomp copies this process has loaded (torch's, from wherever it came: matched by the file's path in
    /proc/self/maps, not by soname, which could find another copy), each with ``omp_pause_resource_all``; none on
    another OS or runtime. Looked up once, after torch."""
    if not sys.platform.startswith("linux"):
        return ()
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    paths = sorted({line.split()[-1] for line in maps.splitlines() if "/libgomp" in line.rsplit(None, 1)[-1]})
    found = []
    for path in paths:
        try:
            runtime = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(runtime, "omp_pause_resource_all"):
            runtime.omp_pause_resource_all.argtypes = [ctypes.c_int]
            runtime.omp_pause_resource_all.restype = ctypes.c_int
            found.append(runtime)
    return tuple(found)


def release_openmp_threads() -> bool:
    """Free the calling thread's OpenMP worker threads; its next parallel op starts a new team. True when a
    libgomp freed them (or had none to free)."""
    import torch  # noqa: F401  (torch loads its libgomp; looking before that would find none)

    runtimes = openmp_runtimes()
    return bool(runtimes) and all(runtime.omp_pause_resource_all(_PAUSE_HARD) == 0 for runtime in runtimes)


class ThreadShare:
    """The OpenMP threads the engine's worker computes with, fitted to the CPUs the machine gives it.

    libgomp's threads spin at the end of every parallel region until the whole team arrives. When another process (a
    build, a test run) wants one of the CPUs too, the thread it displaces arrives a scheduler's time slice late at
    every barrier: on a 2-core machine with one busy process beside it, a served wiki page took 44-63 s with 2
    threads and 5-15 s with this class, against 3-8 s with nothing beside it (docs/benchmarks.md, session 53).

    So the worker watches how much of each step's time its thread is given a CPU (its CPU clock against the wall
    clock: a computing or spinning thread is always on one). Below ``SHARE`` over ``window`` steps it tries one
    thread fewer for ``window`` steps, and keeps them only if its steps got faster by ``MARGIN``: a browser drawing
    the page takes some of a CPU too, and there the whole team is still faster. Every ``probe_s`` seconds with fewer
    it tries them all again for one step, and keeps them if that step is no slower. Made and called in the worker's
    thread (``clocks`` and ``set_threads`` are for tests); an explicit OMP_NUM_THREADS is the user's choice, and no
    ThreadShare is made then. torch's count is the process's, not the worker's alone (a thread that computes for the
    first time starts with it), so while the worker waits for work it is all of them again (``idle``).
    """

    SHARE = 0.8  # of a step's wall clock the worker's thread runs, below which a CPU may be taken
    MARGIN = 0.7  # a trial's steps must take at most this part of the steps before it to be kept

    def __init__(
        self,
        most: int,
        window: int = 3,
        probe_s: float = 10.0,
        clocks: tuple[Callable[[], float], Callable[[], float]] = (time.perf_counter, time.thread_time),
        set_threads: Callable[[int], None] | None = None,
    ) -> None:
        if set_threads is None:
            import torch

            set_threads = torch.set_num_threads
        self._wall, self._cpu = clocks  # the wall clock, and the calling thread's CPU clock
        self._set_threads = set_threads
        self.most = most
        self.now = most
        self.window = window
        self.probe_s = probe_s
        self._steps: list[tuple[float, float]] = []  # (wall, on-CPU) seconds of the steps at ``now`` threads
        self._mark = (0.0, 0.0)
        self._before = 0.0  # during a trial: the mean step before it, at the threads it left
        self._left = 0  # during a trial: the threads it left; 0 when none is under way
        self._next_trial = 0.0
        self._skip = False  # the next step is a batch's first

    def start(self) -> None:
        """A batch begins: the time spent waiting for one is no step, and its steps may cost another time. Its first
        step, which reads the prompt too, is not counted."""
        if self._left:  # a trial cut short by the batch's end is undone
            self.now, self._left = self._left, 0
        self._set(self.now)
        self._skip = True

    def idle(self) -> None:
        """The worker waits for work: torch's count, which is the process's (a thread that computes for the first
        time starts with it, another engine's worker included), goes back to all of them until the next batch."""
        self._set_threads(self.most)

    def step(self) -> None:
        """A denoising step ended."""
        wall, cpu = self._wall(), self._cpu()
        if not self._skip:
            self._steps.append((wall - self._mark[0], cpu - self._mark[1]))
        self._mark, self._skip = (wall, cpu), False
        if self._left:
            if len(self._steps) >= (1 if self.now == self.most else self.window):
                mean = sum(took for took, _ in self._steps) / len(self._steps)
                # fewer threads must be clearly faster; all of them again need only be as fast
                kept = mean <= (self.MARGIN if self.now < self.most else 1.0) * self._before
                logger.log(
                    logging.INFO if kept else logging.DEBUG,
                    "a step with %d threads took %.0f ms, with %d %.0f ms: computing with %d",
                    self._left,
                    1000 * self._before,
                    self.now,
                    1000 * mean,
                    self.now if kept else self._left,
                )
                if not kept:
                    self._set(self._left)
                self._left = 0
                self._next_trial = wall + self.probe_s
            return
        if len(self._steps) < self.window or wall < self._next_trial or self.most == 1:
            return
        latest = self._steps[-self.window :]
        if self.now == self.most:
            given = sum(on for _, on in latest) / max(sum(took for took, _ in latest), 1e-9)
            if given >= self.SHARE:
                return
        self._before = sum(took for took, _ in latest) / self.window
        self._left = self.now
        self._set(self.most - 1 if self.now == self.most else self.most)

    def _set(self, threads: int) -> None:
        self._set_threads(threads)
        self.now = threads
        self._steps.clear()
        self._mark = (self._wall(), self._cpu())
        if threads == self._left:
            self._left = 0
