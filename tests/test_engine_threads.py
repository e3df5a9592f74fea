from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from engine_fixtures import collect, tiny_model

import engine.autoregressive
import engine.scheduler
from engine import AutoregressiveEngine, GenerationRequest, LoadedModel, Scheduler
from engine.threads import ThreadShare, openmp_runtimes

ROOT = Path(__file__).resolve().parents[1]

# A thread that has run a parallel op keeps its OpenMP team (here one worker thread); released, the team goes.
_TEAM = """
import os, threading, torch
from engine.threads import release_openmp_threads
tasks = lambda: len(os.listdir("/proc/self/task"))
torch.set_num_threads(2)
def parallel_op():
    torch.randn(2_000_000).exp_().sum()
parallel_op()
kept = tasks()
released = release_openmp_threads()
after = tasks()
parallel_op()
print(kept, after, tasks(), released)
"""


async def eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within a second: a worker thread releases its team just after its last frame."""
    for _ in range(100):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def record_releases(module: object, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that call ``module``'s release_openmp_threads, in order."""
    calls: list[str] = []
    monkeypatch.setattr(module, "release_openmp_threads", lambda: calls.append(threading.current_thread().name))
    return calls


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp is the Linux wheels' OpenMP")
def test_torch_runs_on_a_libgomp_the_engine_finds() -> None:
    assert openmp_runtimes(), "torch's libgomp was not found in /proc/self/maps: engine.threads would do nothing"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp is the Linux wheels' OpenMP")
def test_releasing_frees_the_calling_threads_team_and_the_next_op_builds_one() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _TEAM], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    kept, after, again, released = int(out[0]), int(out[1]), int(out[2]), out[3]
    assert released == "True"
    assert after == kept - 1  # the team's one worker thread exited
    assert again == kept  # and the next parallel op started a new team


async def test_the_scheduler_releases_the_loading_threads_team_and_its_own_when_idle(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_releases(engine.scheduler, monkeypatch)
    scheduler = Scheduler(loaded)
    try:
        assert calls[0] == threading.current_thread().name  # before the worker starts computing
        assert await collect(scheduler.stream(GenerationRequest(prompt="a page", max_steps=2)))
        assert await eventually(lambda: calls.count("genui-engine") >= 2)  # idle before the page, and after it
    finally:
        await scheduler.close()


async def test_the_autoregressive_engine_releases_its_team_after_each_request(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_releases(engine.autoregressive, monkeypatch)
    baseline = AutoregressiveEngine(loaded)
    try:
        assert calls == [threading.current_thread().name]
        await collect(baseline.stream(GenerationRequest(prompt="a page")))
        await collect(baseline.stream(GenerationRequest(prompt="another")))
        assert await eventually(lambda: len(calls) == 3)
        assert all(name.startswith("genui-autoregressive") for name in calls[1:])
    finally:
        await baseline.close()


class _Machine:
    """Fake clocks for ThreadShare: each step takes ``step_s[threads]`` of wall clock, of which the worker's thread
    is given a CPU for ``given`` of it."""

    def __init__(self, step_s: dict[int, float], given: float) -> None:
        self.step_s, self.given = step_s, given
        self.wall = self.cpu = 0.0
        self.threads = 2
        self.share = ThreadShare(2, clocks=(lambda: self.wall, lambda: self.cpu), set_threads=self._set)

    def _set(self, threads: int) -> None:
        self.threads = threads

    def steps(self, count: int) -> list[int]:
        """The threads each of ``count`` steps ran with."""
        ran = []
        for _ in range(count):
            ran.append(self.threads)
            self.wall += self.step_s[self.threads]
            self.cpu += self.step_s[self.threads] * self.given
            self.share.step()
        return ran


def test_a_worker_given_its_cpus_keeps_every_thread() -> None:
    machine = _Machine({2: 0.06, 1: 0.1}, given=0.98)
    machine.share.start()
    assert machine.steps(200) == [2] * 200


def test_with_a_cpu_taken_the_worker_computes_with_fewer_threads_while_they_are_faster() -> None:
    """A busy process beside a 2-core team: its steps take ten times as long, and one thread is faster. Every
    ``probe_s`` the whole team is tried for one step, and kept once the other process has gone."""
    machine = _Machine({2: 1.0, 1: 0.12}, given=0.6)
    machine.share.start()
    assert machine.steps(7) == [2, 2, 2, 2, 1, 1, 1]  # the batch's first step (its prompt) uncounted, three to see
    # it, three to try one thread
    ran = machine.steps(100)  # 12 s: one probe of the whole team, refused
    assert ran.count(2) == 1 and ran[-1] == 1
    machine.step_s, machine.given = {2: 0.06, 1: 0.1}, 0.98  # the other process ends
    assert machine.steps(200)[-100:] == [2] * 100


def test_a_cpu_partly_taken_keeps_the_team_where_it_is_still_faster() -> None:
    """A browser drawing the page takes some of a CPU: the worker is given less, but one thread would be slower. The
    trial is undone, and not tried again for ``probe_s``."""
    machine = _Machine({2: 0.08, 1: 0.1}, given=0.6)
    machine.share.start()
    ran = machine.steps(100)  # 8 s
    assert ran[:10] == [2, 2, 2, 2, 1, 1, 1, 2, 2, 2] and ran.count(1) == 3


def test_a_trial_cut_short_by_the_batchs_end_is_undone() -> None:
    machine = _Machine({2: 1.0, 1: 0.12}, given=0.6)
    machine.share.start()
    assert machine.steps(5) == [2, 2, 2, 2, 1]
    machine.share.start()  # the next batch: its steps may cost another time
    assert machine.threads == 2


def test_an_idle_worker_gives_the_process_its_threads_back_and_takes_its_own_count_again() -> None:
    """torch's count is the process's: a thread computing for the first time starts with it. Between batches it is
    all of them again; the next batch goes on with the count the worker found faster."""
    machine = _Machine({2: 1.0, 1: 0.12}, given=0.6)
    machine.share.start()
    machine.steps(7)
    assert machine.threads == 1
    machine.share.idle()
    assert machine.threads == 2
    machine.share.start()
    assert machine.threads == 1
