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
import sys
from pathlib import Path

__all__ = ["openmp_runtimes", "release_openmp_threads"]

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
