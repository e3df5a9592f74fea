from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import torch
from engine_fixtures import collect, tiny_model

import engine.scheduler as scheduler_module
from engine import (
    DoneFrame,
    EngineError,
    EngineOverloaded,
    Frame,
    GenerationRequest,
    InfillRequest,
    LoadedModel,
    QueuedFrame,
    Scheduler,
    StepFrame,
    TextEngine,
)
from engine.channel import FrameChannel


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


@pytest.fixture
async def scheduler(loaded: LoadedModel) -> AsyncIterator[Scheduler]:
    engine = Scheduler(loaded, batch_window_s=0.05)
    yield engine
    await engine.close()


@pytest.fixture
def batch_sizes(loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch size of every run of the denoising loop during the test (each run reads its prompts once)."""
    sizes: list[int] = []
    prefill = loaded.denoiser.prefill

    def spy(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        sizes.append(input_ids.shape[0])
        return prefill(input_ids, attention_mask)

    monkeypatch.setattr(loaded.denoiser, "prefill", spy)
    return sizes


@pytest.fixture
def decoder_passes(loaded: LoadedModel) -> Iterator[list[int]]:
    """A one-element list counting denoising forward passes as they happen."""
    count = [0]
    handle = loaded.model.model.decoder.register_forward_hook(lambda *args: count.__setitem__(0, count[0] + 1))
    yield count
    handle.remove()


LONG = GenerationRequest(prompt="long", max_canvases=8, max_steps=40, stability_threshold=40, stop_at_eos=False)


def final(frames: list[Any]) -> DoneFrame:
    assert isinstance(frames[-1], DoneFrame)
    return frames[-1]


def test_the_scheduler_is_a_text_engine(scheduler: Scheduler, loaded: LoadedModel) -> None:
    engine: TextEngine = scheduler
    assert engine.model_id == loaded.model_id


async def test_a_stream_gives_drafts_then_the_final_text(scheduler: Scheduler) -> None:
    frames = await collect(scheduler.stream(GenerationRequest(prompt="Hash table", max_steps=3, stop_at_eos=False)))
    assert [type(frame).__name__ for frame in frames] == ["StepFrame"] * 3 + ["CanvasFrame", "DoneFrame"]
    assert final(frames).text == frames[-2].text


async def test_the_same_request_gives_the_same_text(scheduler: Scheduler) -> None:
    request = GenerationRequest(prompt="Hash table", max_canvases=2, max_steps=3, seed=11, stop_at_eos=False)
    first = final(await collect(scheduler.stream(request)))
    assert final(await collect(scheduler.stream(request))).text == first.text


async def test_requests_that_arrive_together_share_one_generate_call(
    loaded: LoadedModel, batch_sizes: list[int]
) -> None:
    one = GenerationRequest(prompt="Hash table", max_steps=3, stop_at_eos=False)
    two = GenerationRequest(prompt="Linked list and array", max_steps=3, stop_at_eos=False)
    # a window far longer than the two submits take (it ends as soon as the batch is full): a stalled event loop
    # between them cannot split the batch
    scheduler = Scheduler(loaded, max_batch=2, batch_window_s=10)
    try:
        frames = await asyncio.gather(collect(scheduler.stream(one)), collect(scheduler.stream(two)))
    finally:
        await scheduler.close()
    assert batch_sizes == [2]
    assert {frame.variant for frame in frames[0] + frames[1]} == {0}  # each caller sees only its own row
    assert final(frames[0]).text != final(frames[1]).text


async def test_requests_with_different_settings_run_separately(scheduler: Scheduler, batch_sizes: list[int]) -> None:
    await asyncio.gather(
        collect(scheduler.stream(GenerationRequest(prompt="a", max_steps=2))),
        collect(scheduler.stream(GenerationRequest(prompt="b", max_steps=3))),
    )
    assert batch_sizes == [1, 1]


async def test_variants_stream_side_by_side_and_differ(scheduler: Scheduler, batch_sizes: list[int]) -> None:
    request = GenerationRequest(prompt="Hash table", max_steps=3, seed=5, stop_at_eos=False)
    frames = await collect(scheduler.stream_variants(request, 3))
    assert batch_sizes == [3]
    done = sorted((frame for frame in frames if isinstance(frame, DoneFrame)), key=lambda frame: frame.variant)
    assert [frame.variant for frame in done] == [0, 1, 2]
    assert len({frame.text for frame in done}) == 3
    again = await collect(scheduler.stream_variants(request, 3))
    assert sorted((frame.variant, frame.text) for frame in again if isinstance(frame, DoneFrame)) == [
        (frame.variant, frame.text) for frame in done
    ]


async def test_a_single_variant_is_the_plain_request(scheduler: Scheduler) -> None:
    request = GenerationRequest(prompt="Hash table", max_steps=3, seed=5, stop_at_eos=False)
    alone = final(await collect(scheduler.stream(request)))
    assert final(await collect(scheduler.stream_variants(request, 1))).text == alone.text


async def test_infill_keeps_both_sides(scheduler: Scheduler) -> None:
    request = InfillRequest(
        GenerationRequest(prompt="Edit", max_steps=3), before="<p>Hash ", after=" table</p>", region_tokens=5
    )
    done = final(await collect(scheduler.infill(request)))
    assert done.text.startswith("<p>Hash ") and done.text.endswith(" table</p>")


async def test_a_full_queue_refuses_at_once(loaded: LoadedModel) -> None:
    engine = Scheduler(loaded, max_queue=1, max_batch=1)
    running = engine.stream(LONG)
    assert engine.requests == (0, 0)
    await anext(running)  # the worker is busy with it
    queued = asyncio.ensure_future(anext(engine.stream(LONG)))
    await asyncio.sleep(0)  # now it waits in the queue
    assert engine.requests == (1, 1)  # as /_genui/metrics says them: waiting, running
    with pytest.raises(EngineOverloaded) as refused:
        await anext(engine.stream(LONG))
    assert refused.value.retry_after >= 1
    engine.max_queue = 2  # genui serve --queue sets it on the engine loaded: a later request reads it
    second = asyncio.ensure_future(anext(engine.stream(LONG)))
    await asyncio.sleep(0)
    assert not second.done()  # it waits in line too
    second.cancel()
    queued.cancel()
    await running.aclose()
    await engine.close()


@pytest.mark.parametrize(
    "too_long",
    [
        GenerationRequest(prompt="hash " * 600),
        GenerationRequest(prompt="x", max_tokens=32, opening="<p>" + "word " * 40),
        GenerationRequest(prompt="x", max_tokens=64, opening="<p>", gaps=("</p>", "</p>", "</p>")),
    ],
)
async def test_a_request_too_long_for_the_model_is_refused_before_it_queues(
    loaded: LoadedModel, too_long: GenerationRequest
) -> None:
    """It took a place in the queue, and behind a full one was told to come back, only to fail in the worker later
    (an engine user's walkthrough)."""
    engine = Scheduler(loaded, max_queue=1, max_batch=1)
    running = engine.stream(LONG)
    await anext(running)
    queued = asyncio.ensure_future(anext(engine.stream(LONG)))
    await asyncio.sleep(0)  # the queue is full
    assert not engine.fits(too_long)
    with pytest.raises(EngineError, match="positions|no room") as refused:
        await anext(engine.stream(too_long))
    assert not isinstance(refused.value, EngineOverloaded)
    queued.cancel()
    await running.aclose()
    await engine.close()


async def test_cancelling_a_stream_stops_denoising_within_a_step(
    scheduler: Scheduler, decoder_passes: list[int]
) -> None:
    stream = scheduler.stream(LONG)
    async for frame in stream:
        if isinstance(frame, StepFrame) and frame.step == 3:
            break
    await stream.aclose()
    at_cancel = decoder_passes[0]
    # The worker runs one request at a time: once this one-step request is done, the cancelled one has stopped.
    await collect(scheduler.stream(GenerationRequest(prompt="next", max_steps=1)))
    assert decoder_passes[0] - at_cancel <= 1 + 1  # the step in flight at cancel, and the next request's step
    assert decoder_passes[0] < 8 * 40 / 2


async def test_a_cancelled_task_stops_its_request(scheduler: Scheduler, decoder_passes: list[int]) -> None:
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in scheduler.stream(LONG):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    at_cancel = decoder_passes[0]
    await collect(scheduler.stream(GenerationRequest(prompt="next", max_steps=1)))
    assert decoder_passes[0] - at_cancel <= 2


async def test_a_failing_request_fails_alone_and_the_worker_lives_on(
    scheduler: Scheduler, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(loaded.model, "forward", broken)
    with pytest.raises(EngineError, match="out of memory"):
        await collect(scheduler.stream(GenerationRequest(prompt="x", max_steps=2)))
    monkeypatch.undo()
    assert isinstance(final(await collect(scheduler.stream(GenerationRequest(prompt="x", max_steps=2)))), DoneFrame)


async def test_a_batch_that_fails_at_once_says_nothing_of_how_long_a_batch_takes(
    scheduler: Scheduler, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full queue's Retry-After comes from the time batches take: one that failed in a millisecond would bring it
    down to its floor while the engine is as slow as ever."""
    typical = scheduler._batch_s

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(loaded.model, "forward", broken)
    for _ in range(3):
        with pytest.raises(EngineError, match="out of memory"):
            await collect(scheduler.stream(GenerationRequest(prompt="x", max_steps=2)))
    assert scheduler._batch_s == typical


async def test_pages_their_visitors_left_say_nothing_of_how_long_a_batch_takes(scheduler: Scheduler) -> None:
    """Every click away from a page being written cancels its run: the time until then, averaged in, brought a full
    queue's Retry-After down to its 1 s floor while pages took as long as ever (found by review: 30 s -> 1.66 s)."""
    scheduler._batch_s = typical = 30.0
    long = GenerationRequest(prompt="long", max_canvases=8, max_steps=40, stability_threshold=40, stop_at_eos=False)
    for _ in range(4):
        stream = scheduler.stream(long)
        await anext(stream)
        await stream.aclose()
        await asyncio.sleep(0.05)
    for _ in range(500):  # the last batch ends its step and leaves
        if not scheduler._running:
            break
        await asyncio.sleep(0.01)
    assert not scheduler._running and scheduler._batch_s == typical


async def test_a_full_queue_of_requests_that_run_alone_says_to_wait_for_each(loaded: LoadedModel) -> None:
    """Retry-After counted the queue as batches of ``max_batch`` requests, but openings with gaps, variations and
    edits run alone: four of them waiting take four batches, not one."""
    engine = Scheduler(loaded, max_queue=4, max_batch=4)
    running = engine.stream(LONG)
    await anext(running)  # the worker is busy
    engine._batch_s = 10.0
    for _ in range(4):
        engine._submit(scheduler_module._Job([GenerationRequest(prompt="x")], None, FrameChannel(1)))
    with pytest.raises(EngineOverloaded) as alone:
        engine._submit(scheduler_module._Job([GenerationRequest(prompt="x")], None, FrameChannel(1)))
    assert alone.value.retry_after == 50.0  # the batch running, then four alone
    engine._pending.clear()
    for _ in range(4):
        engine._submit(scheduler_module._Job([GenerationRequest(prompt="x")], "same", FrameChannel(1)))
    with pytest.raises(EngineOverloaded) as shared:
        engine._submit(scheduler_module._Job([GenerationRequest(prompt="x")], "same", FrameChannel(1)))
    assert shared.value.retry_after == 20.0  # the batch running, then one batch of the four
    engine._pending.clear()
    await running.aclose()
    await engine.close()


async def test_a_bad_request_in_a_batch_does_not_fail_its_neighbours(scheduler: Scheduler) -> None:
    good = GenerationRequest(prompt="short", max_steps=2)
    too_long = GenerationRequest(prompt="hash " * 600, max_steps=2)
    results = await asyncio.gather(
        collect(scheduler.stream(good)), collect(scheduler.stream(too_long)), return_exceptions=True
    )
    assert isinstance(final(results[0]), DoneFrame)  # type: ignore[arg-type]
    assert isinstance(results[1], EngineError) and "positions" in str(results[1])


@pytest.mark.parametrize(
    ("request_fields", "named"),
    [
        ({"t_min": 0.9, "t_max": 0.5}, "t_max"),
        ({"t_min": 0.0, "t_max": 1e-40}, "t_max"),  # every probability NaN, inside the batch
        ({"seed": 2**64}, "seed"),  # torch cannot take it: the whole batch failed with it
        ({"seed": 1.5}, "seed"),
        ({"stop_at_eos": "no"}, "stop_at_eos"),
        ({"stability_threshold": 1.5, "confidence_threshold": 0.5}, "stability_threshold"),
        ({"stability_threshold": "3", "confidence_threshold": 0.5}, "stability_threshold"),
        ({"stability_threshold": 2, "confidence_threshold": float("nan")}, "confidence_threshold"),
        ({"max_steps": 1025}, "max_steps"),  # held the worker, and the queue behind it, for as long as it asked
    ],
)
async def test_invalid_settings_fail_before_queueing(
    scheduler: Scheduler, request_fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(EngineError, match=named):
        await anext(scheduler.stream(GenerationRequest(prompt="x", **request_fields)))


async def test_a_huge_stability_threshold_runs_as_no_adaptive_stop_without_its_memory(scheduler: Scheduler) -> None:
    # its history was allocated whole: 10**12 steps of a canvas
    request = GenerationRequest(prompt="x", max_steps=3, stability_threshold=10**12, confidence_threshold=0.5)
    assert isinstance(final(await collect(scheduler.stream(request))), DoneFrame)


async def test_a_request_the_batching_cannot_compare_fails_alone_and_the_worker_lives_on(
    scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> int:
        monkeypatch.undo()  # once
        raise ValueError("truth value of an array is ambiguous")

    monkeypatch.setattr(Scheduler, "_rows_like", broken)
    with pytest.raises(EngineError, match="could not batch"):
        await collect(scheduler.stream(GenerationRequest(prompt="x", max_steps=2)))
    done = await asyncio.wait_for(collect(scheduler.stream(GenerationRequest(prompt="x", max_steps=2))), 30)
    assert isinstance(final(done), DoneFrame)


async def test_a_request_that_breaks_the_batching_after_leaving_the_queue_fails_and_the_next_is_written(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batching compares a request's key with the queue's after taking it from the queue: one that raised then
    was in neither the queue nor the batch, its stream waited for ever, and the request after it failed in its
    place (found by review)."""

    class Incomparable:
        def __eq__(self, other: object) -> bool:
            raise ValueError("truth value of an array is ambiguous")

        __hash__ = object.__hash__

    engine = Scheduler(loaded, max_batch=1)  # compared only once the first has left the queue
    running = engine.stream(LONG)
    await anext(running)  # the worker is busy: the next two wait in the queue
    real = scheduler_module.batch_key
    monkeypatch.setattr(
        scheduler_module, "batch_key", lambda request: Incomparable() if request.prompt == "bad" else real(request)
    )
    bad = asyncio.ensure_future(collect(engine.stream(GenerationRequest(prompt="bad", max_steps=2))))
    good = asyncio.ensure_future(collect(engine.stream(GenerationRequest(prompt="good", max_steps=2))))
    await asyncio.sleep(0.05)
    await running.aclose()
    with pytest.raises(EngineError, match="could not batch"):
        await asyncio.wait_for(bad, 30)
    assert isinstance(final(await asyncio.wait_for(good, 30)), DoneFrame)
    await engine.close()


async def test_closing_fails_waiting_requests_and_refuses_new_ones(loaded: LoadedModel) -> None:
    engine = Scheduler(loaded, max_batch=1)
    running = engine.stream(LONG)
    await anext(running)
    waiting = asyncio.ensure_future(collect(engine.stream(LONG)))
    await asyncio.sleep(0)
    await engine.close()
    with pytest.raises(EngineError, match="closed"):
        await waiting
    with pytest.raises(EngineError, match="closed"):
        await collect(running)
    with pytest.raises(EngineError, match="closed"):
        await anext(engine.stream(LONG))


async def test_a_stream_that_ended_is_not_failed_by_its_batch_failing_later(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests in one batch: the first writes its end of text in its first canvas and gets its DoneFrame; the
    second's next canvas then fails. The first stream ends with its DoneFrame, the second with the error."""
    denoiser = loaded.denoiser
    denoise = denoiser.denoise

    def ends_first_row(*args: Any) -> Any:
        logits = denoise(*args)
        logits[0, :, denoiser.eos_id] = 1e4
        return logits

    def out_of_memory(*args: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(denoiser, "denoise", ends_first_row)
    monkeypatch.setattr(denoiser, "commit", out_of_memory)
    engine = Scheduler(loaded, batch_window_s=0.3)

    async def frames(prompt: str) -> list[Any]:
        seen: list[Any] = []
        try:
            async for frame in engine.stream(GenerationRequest(prompt=prompt, max_canvases=2, max_steps=2)):
                seen.append(frame)
        except EngineError as err:
            seen.append(err)
        return seen

    try:
        first, second = await asyncio.gather(frames("a"), frames("b"))
    finally:
        await engine.close()
    assert isinstance(first[-1], DoneFrame)
    assert isinstance(second[-1], EngineError) and "out of memory" in str(second[-1])


async def test_a_stream_whose_page_is_out_ends_when_the_engine_closes() -> None:
    """Scheduler.close fails a running job, then cancels it; the worker's close of the channel comes after that and
    is dropped. A stream whose DoneFrame is out ends there (it waited for ever), and one that is not whole fails."""
    whole, cut = FrameChannel(rows=1), FrameChannel(rows=2)
    page = DoneFrame(text="x", canvases=(), tokens_per_forward=1.0, ttff_s=0.0, seconds=0.0)
    for channel in (whole, cut):
        channel.send(page)
        channel.fail(EngineError("the engine has closed"))
        channel.cancel()
        channel.close()  # the worker's, too late
    assert await asyncio.wait_for(collect_frames(whole), 5) == [page]
    with pytest.raises(EngineError, match="closed"):
        await asyncio.wait_for(collect_frames(cut), 5)


async def collect_frames(channel: FrameChannel) -> list[Any]:
    return [frame async for frame in channel.frames()]


async def test_a_request_cancelled_while_it_waits_in_the_queue_is_never_computed(
    loaded: LoadedModel, batch_sizes: list[int]
) -> None:
    """One batch at a time: the second request waits behind a long first one, and its caller leaves meanwhile. Only
    the first and a third request are computed (each run of the loop reads its prompts once)."""
    scheduler = Scheduler(loaded, max_batch=1)
    try:
        started = asyncio.Event()

        async def first() -> None:
            async for _ in scheduler.stream(dataclasses.replace(LONG, max_canvases=2)):
                started.set()

        running = asyncio.create_task(first())
        await started.wait()
        waiting = asyncio.create_task(collect(scheduler.stream(GenerationRequest(prompt="queued", max_steps=1))))
        await asyncio.sleep(0.05)  # it is queued now
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await running
        await collect(scheduler.stream(GenerationRequest(prompt="third", max_steps=1)))
    finally:
        await scheduler.close()
    assert batch_sizes == [1, 1]


async def test_a_worker_that_stops_fails_every_request_waiting_and_refuses_new_ones(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the worker's loop lets through ends the worker: nobody may be left waiting for it."""
    engine = Scheduler(loaded, max_batch=1)
    running = engine.stream(LONG)
    await anext(running)
    waiting = asyncio.ensure_future(collect(engine.stream(LONG)))
    await asyncio.sleep(0.05)

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise SystemExit("the worker's loop broke")

    monkeypatch.setattr(loaded.model, "forward", gone)
    for stream in (waiting, collect(running)):
        with pytest.raises(EngineError, match="engine stopped .*restart genui"):
            await asyncio.wait_for(stream, 30)
    monkeypatch.undo()
    assert engine.failure is not None and "SystemExit" in engine.failure
    with pytest.raises(EngineError, match="engine stopped"):
        await anext(engine.stream(LONG))
    await asyncio.wait_for(engine.close(), 30)


async def test_the_worker_frees_its_threads_outside_the_lock_requests_queue_under(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Freeing OpenMP's team joins its threads; a request submitted meanwhile (on the event loop) must not wait."""
    engine = Scheduler(loaded)
    free: list[bool] = []

    def release() -> bool:
        other = threading.Thread(
            target=lambda: free.append(engine._lock.acquire(timeout=1) and not engine._lock.release())
        )
        other.start()
        other.join()
        return True

    monkeypatch.setattr("engine.scheduler.release_openmp_threads", release)
    await collect(engine.stream(GenerationRequest(prompt="x", max_steps=2)))
    await asyncio.sleep(0.1)  # the worker goes idle
    await engine.close()
    assert free and all(free)


async def test_a_batch_whose_planning_stops_the_worker_fails_its_callers(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BaseException before _run's own try (planning a batch of two) must still reach the batch's callers."""
    engine = Scheduler(loaded, batch_window_s=0.3)

    def gone(*args: Any) -> bool:
        raise SystemExit("the worker's planning broke")

    monkeypatch.setattr(Scheduler, "_plans_alone", gone)
    request = GenerationRequest(prompt="x", max_steps=2)
    both = await asyncio.wait_for(
        asyncio.gather(collect(engine.stream(request)), collect(engine.stream(request)), return_exceptions=True), 30
    )
    assert all(isinstance(result, EngineError) and "engine stopped" in str(result) for result in both), both
    await asyncio.wait_for(engine.close(), 30)


@pytest.mark.parametrize("window", [math.nan, math.inf, -1.0])
def test_a_batch_window_that_is_no_finite_time_is_refused(loaded: LoadedModel, window: float) -> None:
    """NaN spun the worker for ever and inf failed every batched request as "could not batch" (an engine user's
    walkthrough)."""
    with pytest.raises(ValueError, match="batch_window_s a finite number"):
        Scheduler(loaded, batch_window_s=window)


@pytest.mark.parametrize("n", [0, 2.5, True, 17])
async def test_variants_of_no_whole_count_or_past_the_most_are_engine_errors(scheduler: Scheduler, n: object) -> None:
    """n=2.5 was a TypeError, n=0 a ValueError, and n=1000 would hold 12.6 GB of logits (an engine user's
    walkthrough)."""
    with pytest.raises(EngineError, match=r"n must be an integer from 1 to 16"):
        scheduler.stream_variants(GenerationRequest(prompt="x"), n)  # type: ignore[arg-type]


async def test_an_edit_with_gaps_is_refused_before_it_writes_them(scheduler: Scheduler) -> None:
    """Its gaps were written, their frames sent, and the result thrown away (an engine user's walkthrough)."""
    edit = InfillRequest(GenerationRequest(prompt="x", gaps=("</b>",)), before="<p>", after="</p>", region_tokens=4)
    with pytest.raises(EngineError, match="an in-place edit takes no gaps"):
        await anext(scheduler.infill(edit))


async def test_a_request_that_waits_is_told_its_place_in_line_as_it_moves_up(loaded: LoadedModel) -> None:
    """A page that waited for the engine said "Waiting for the model…" and nothing more, for a minute in a class."""
    engine = Scheduler(loaded, max_batch=1)
    try:
        requests = [GenerationRequest(prompt=f"page {n}", max_steps=2, stop_at_eos=False) for n in range(3)]
        first = engine.stream(requests[0])
        await anext(first)  # the worker writes it: the next two wait behind it
        waiting = [asyncio.ensure_future(collect(engine.stream(request))) for request in requests[1:]]
        await collect(first)
        second, third = await asyncio.gather(*waiting)
    finally:
        await engine.close()

    def places(frames: list[Frame]) -> list[int]:
        return [frame.ahead for frame in frames if isinstance(frame, QueuedFrame)]

    assert places(second) == [1, 0] and places(third) == [2, 1, 0]
    for frames in (second, third):  # told before its first step, never after
        told = max(index for index, frame in enumerate(frames) if isinstance(frame, QueuedFrame))
        assert not any(isinstance(frame, StepFrame) for frame in frames[:told])
        assert isinstance(frames[-1], DoneFrame)
