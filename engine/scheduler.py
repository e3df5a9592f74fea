"""The engine as a service: one worker thread owns the model; requests queue, micro-batch, stream and cancel.

Requests wait in a bounded queue (a full queue refuses at once with EngineOverloaded). The worker takes the oldest
request and, after a short window, every queued request with the same generation settings, up to ``max_batch``
rows, and runs them as one generate() call. Frames flow back per request through a FrameChannel. A consumer that
stops iterating cancels its request; a generate() call whose rows are all cancelled or finished is abandoned within
one denoising step. A failing request raises EngineError from its own stream and the worker carries on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType

import torch

from engine.channel import FrameChannel
from engine.frames import EngineError, EngineOverloaded, Frame, GenerationRequest, QueuedFrame
from engine.gaps import check_fits_with_gaps, fill_gaps, fits_with_gaps
from engine.generation import Plan, batch_key, plan_batch, run_plan, settings_for
from engine.infill import InfillRequest, plan_infill
from engine.loading import LoadedModel
from engine.streaming import GenerationCancelled, Row
from engine.threads import ThreadShare, release_openmp_threads

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Job:
    """One caller's request: one row per entry of ``requests`` (variations repeat the request)."""

    requests: list[GenerationRequest]
    key: Hashable | None  # jobs with equal keys may share one generate() call; None runs alone
    channel: FrameChannel
    infill: InfillRequest | None = None
    submitted: float = field(default_factory=time.perf_counter)
    told: int = 0  # the place in line its caller was last told (QueuedFrame): requests written or waiting before it

    def rows(self) -> list[Row]:
        return [
            Row(emit=self.channel.send, cancelled=self.channel.is_cancelled, variant=index, started=self.submitted)
            for index in range(len(self.requests))
        ]


MAX_VARIANTS = 16  # variants of one request in one batch: each holds a canvas of logits (64 x 49,152 floats, 12.6 MB)


class Scheduler:
    """A TextEngine over one loaded model: queueing, micro-batching, streaming, cancellation."""

    def __init__(
        self, loaded: LoadedModel, max_queue: int = 8, max_batch: int = 4, batch_window_s: float = 0.01
    ) -> None:
        if max_queue < 1 or max_batch < 1 or not 0 <= batch_window_s < math.inf:  # NaN too: it spun the worker
            raise ValueError("max_queue and max_batch must be >= 1 and batch_window_s a finite number >= 0")
        self.loaded = loaded
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self._pending: deque[_Job] = deque()
        self._running: list[_Job] = []
        self._closed = False
        self._failure: str | None = None  # why the worker stopped for good, if it did
        self._lock = threading.Condition()
        self._batch_s = 1.0  # moving average of one generate() call, for retry_after
        self._threads: ThreadShare | None = None  # the worker's, made in its thread
        self._worker = threading.Thread(target=self._work, name="genui-engine", daemon=True)
        release_openmp_threads()  # the model was loaded in this thread; the worker computes from now on
        self._worker.start()

    @property
    def model_id(self) -> str:
        return self.loaded.model_id

    @property
    def canvas_length(self) -> int:
        return self.loaded.canvas_length

    @property
    def failure(self) -> str | None:
        """Why the engine can write nothing more (its worker stopped), or None while it can."""
        return self._failure

    @property
    def requests(self) -> tuple[int, int]:
        """Jobs waiting in the queue, and jobs in the running batch (a set of variants is one), for a caller's
        metrics."""
        with self._lock:
            return len(self._pending), len(self._running)

    # -- the caller's side (event loop) -------------------------------------------------------------------------

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        """Frames for one request: StepFrames and a CanvasFrame per canvas, then one DoneFrame."""
        # An opening with gaps runs alone: its holes are written before its canvases (engine.gaps).
        return self._frames([request], key=None if request.gaps else batch_key(request))

    def fits(self, request: GenerationRequest) -> bool:
        return fits_with_gaps(self.loaded, request)

    def stream_variants(self, request: GenerationRequest, n: int) -> AsyncIterator[Frame]:
        """``n`` variants of one prompt from one batched generate() call; frames carry ``variant`` 0..n-1.

        Reproducible per (prompt, n, seed); a variant is not the same text as a lone request with that seed.
        """
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_VARIANTS:
            raise EngineError(f"n must be an integer from 1 to {MAX_VARIANTS}, got {n!r}")
        return self._frames([request] * n, key=None)

    def infill(self, request: InfillRequest) -> AsyncIterator[Frame]:
        """Frames of an in-place edit: drafts of the region, then a DoneFrame with before + region + after."""
        return self._frames([request.generation], key=None, infill=request)

    async def close(self) -> None:
        """Refuse new requests, fail queued ones, abandon the running batch and wait for the worker to stop."""
        with self._lock:
            self._closed = True
            for job in [*self._pending, *self._running]:
                job.channel.fail(EngineError("the engine has closed"))
                job.channel.cancel()
            self._pending.clear()
            self._lock.notify_all()
        await asyncio.to_thread(self._worker.join)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def _frames(
        self, requests: list[GenerationRequest], key: Hashable | None, infill: InfillRequest | None = None
    ) -> AsyncIterator[Frame]:
        settings = requests[0] if infill is None else dataclasses.replace(requests[0], max_canvases=1, max_tokens=None)
        settings_for(self.loaded, settings)  # a bad setting fails here, before it queues
        if infill is not None and infill.generation.gaps:  # they were written, and their frames sent, for nothing
            raise EngineError("an in-place edit takes no gaps: its text before and after it are its fixed text")
        if infill is None:
            check_fits_with_gaps(self.loaded, settings)  # as does one too long for the model
        job = _Job(requests=requests, key=key, channel=FrameChannel(len(requests)), infill=infill)
        self._submit(job)
        async with aclosing(job.channel.frames()) as frames:
            async for frame in frames:
                yield frame

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._failure is not None:
                raise EngineError(self._failure)
            if self._closed:
                raise EngineError("the engine has closed")
            self._drop_cancelled()
            if len(self._pending) >= self.max_queue:
                waits = 1 + self._batches_queued()  # the batch running, then the queue's
                raise EngineOverloaded(retry_after=max(1.0, self._batch_s * waits))
            self._pending.append(job)
            self._tell_places()
            self._lock.notify_all()

    def _tell_places(self) -> None:
        """Tell every request whose place in line changed where it is now (under the lock): the running batch's
        requests that they are next no more (0), each waiting one how many run or wait before it. A page that waited
        for the engine said "Waiting for the model…" and nothing else, for a minute in a class of 25."""
        for index, job in enumerate([*self._running, *self._pending]):
            place = 0 if index < len(self._running) else index
            if place != job.told:
                job.told = place
                job.channel.send(QueuedFrame(place))

    def _batches_queued(self) -> int:
        """How many batches the queue takes: requests that run alone (openings with gaps, variations, edits) one
        each, the others as many as fill ``max_batch`` rows of their kind (the same settings)."""
        rows: dict[Hashable, int] = {}
        alone = 0
        for job in self._pending:
            if job.key is None:
                alone += 1
            else:
                rows[job.key] = rows.get(job.key, 0) + len(job.requests)
        return alone + sum(math.ceil(count / self.max_batch) for count in rows.values())

    # -- the worker's side (its own thread) ---------------------------------------------------------------------

    def _work(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # what the loop lets through (a bug of its own, a SystemExit): nobody else answers
            self._stop(exc)

    def _stop(self, exc: BaseException) -> None:
        """The worker is gone: every request waiting or running fails, and so will every request from now on."""
        logger.critical("the engine's worker stopped", exc_info=exc)
        with self._lock:
            self._failure = _stopped(exc)
            for job in [*self._pending, *self._running]:
                job.channel.fail(EngineError(self._failure))
                job.channel.close()
            self._pending.clear()
            self._running = []

    def _serve(self) -> None:
        # fewer threads while another process holds a CPU (engine.threads); the user's OMP_NUM_THREADS is kept
        if self.loaded.device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            self._threads = ThreadShare(torch.get_num_threads())
        while True:
            try:
                batch = self._next_batch()
            except Exception:  # the worker must outlive any request: the one that broke the batching fails alone
                logger.exception("engine batching failed")
                self._fail_first()
                continue
            if batch is None:
                if self._threads is not None:
                    self._threads.idle()  # the engine has closed: the process's count as it was
                return
            started, worked = time.perf_counter(), False
            try:
                worked = self._run(batch)
            except Exception:  # the worker must outlive any request; _run already told the callers
                logger.exception("engine batch failed")
            with self._lock:  # not on a BaseException: _stop fails the batch's callers that _run had not told yet
                self._running = []
            if worked:  # a batch whose rows all left (before or during it), or that failed, says nothing of a batch
                self._batch_s = 0.8 * self._batch_s + 0.2 * (time.perf_counter() - started)

    def _next_batch(self) -> list[_Job] | None:
        with self._lock:
            windowed = idle = False
            while True:
                self._drop_cancelled()
                if self._closed:
                    return None
                if not self._pending:
                    if not idle:  # outside the lock: a request submitted meanwhile must not wait on OpenMP
                        idle = True
                        self._lock.release()
                        try:
                            self._idle()
                        finally:
                            self._lock.acquire()
                        continue
                    self._lock.wait()
                    continue
                first = self._pending[0]
                if first.key is None or self.max_batch == 1 or windowed:
                    break
                # Requests that arrive together (a burst of clicks, a page of fragments) share one call.
                windowed = True
                deadline = time.perf_counter() + self.batch_window_s
                while not self._closed and self._rows_like(first) < self.max_batch:
                    remaining = deadline - time.perf_counter()
                    if remaining <= 0:
                        break
                    self._lock.wait(remaining)
            batch = [self._pending.popleft()]
            self._running = batch  # from here on the batch's: _fail_first fails its first, _stop all of it
            rows = len(first.requests)
            if first.key is not None:
                for job in list(self._pending):
                    if job.key == first.key and rows + len(job.requests) <= self.max_batch:
                        self._pending.remove(job)
                        batch.append(job)
                        rows += len(job.requests)
            self._running = batch
            self._tell_places()
            return batch

    def _idle(self) -> None:
        release_openmp_threads()  # another engine's worker may compute meanwhile
        if self._threads is not None:
            self._threads.idle()

    def _fail_first(self) -> None:
        """Fail the request whose batching raised: the batch's first, if it had left the queue (the requests already
        put beside it go back to the queue's front), else the queue's first."""
        with self._lock:
            if self._running:
                job, others, self._running = self._running[0], self._running[1:], []
                self._pending.extendleft(reversed(others))
            else:
                job = self._pending.popleft() if self._pending else None
        if job is not None:
            job.channel.fail(EngineError("the engine could not batch this request"))
            job.channel.close()

    def _rows_like(self, first: _Job) -> int:
        return sum(len(job.requests) for job in self._pending if job.key == first.key)

    def _drop_cancelled(self) -> None:
        for job in [job for job in self._pending if job.channel.is_cancelled()]:
            self._pending.remove(job)

    def _run(self, batch: list[_Job]) -> bool:
        """Run a batch; whether it wrote anything (its steps say how long a batch takes)."""
        jobs = [job for job in batch if not job.channel.is_cancelled()]
        if len(jobs) > 1:
            jobs = [job for job in jobs if self._plans_alone(job)]  # a request that cannot be planned fails alone
        if not jobs:
            return False
        try:
            share = self._threads
            if share is not None:
                share.start()  # the openings' gaps are computed at the batch's thread count too
            for job in jobs:
                self._fill_gaps(job)
            run_plan(self.loaded, self._plan(jobs), None if share is None else share.step)
        except GenerationCancelled:  # every row left: the time until then says nothing of how long a batch takes
            return False
        except EngineError as exc:  # a request the model cannot take (too long for it): the caller says it
            logger.warning("generation failed for %d request(s): %s", len(jobs), exc)
            for job in jobs:
                job.channel.fail(exc)
            return False
        except Exception as exc:  # a bug: with its traceback
            logger.exception("generation failed for %d request(s)", len(jobs))
            error = EngineError(f"generation failed: {exc}")
            for job in jobs:
                job.channel.fail(error)
            return False
        except BaseException as exc:  # the worker stops (_work): its batch is told why, as the queue will be
            for job in jobs:
                job.channel.fail(EngineError(_stopped(exc)))
            raise
        finally:
            for job in jobs:
                job.channel.close()
        return True

    def _fill_gaps(self, job: _Job) -> None:
        """Write the holes of each of the job's openings (engine.gaps); variant i samples them from seed + i."""
        if any(request.gaps for request in job.requests):
            job.requests = [
                fill_gaps(
                    self.loaded,
                    dataclasses.replace(request, seed=request.seed + row.variant),
                    row.emit,
                    row.cancelled,
                    row.variant,
                )
                for request, row in zip(job.requests, job.rows(), strict=True)
            ]

    def _plans_alone(self, job: _Job) -> bool:
        try:
            self._plan([job])
        except Exception as exc:
            job.channel.fail(exc if isinstance(exc, EngineError) else EngineError(str(exc)))
            job.channel.close()
            return False
        return True

    def _plan(self, jobs: list[_Job]) -> Plan:
        rows = [row for job in jobs for row in job.rows()]
        if jobs[0].infill is not None:
            return plan_infill(self.loaded, jobs[0].infill, rows[0])
        return plan_batch(self.loaded, [request for job in jobs for request in job.requests], rows)


def _stopped(exc: BaseException) -> str:
    return f"the engine stopped ({type(exc).__name__}: {exc}); restart genui"
