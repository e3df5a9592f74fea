"""Frames crossing from the model's worker thread to one asyncio consumer, and cancellation crossing back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator

from engine.frames import DoneFrame, EngineError, Frame

_CLOSED = object()


class FrameChannel:
    """A one-way queue of frames into the event loop that created it, plus a cancel flag the worker can poll.

    Create it inside the consumer's event loop; ``send``, ``fail`` and ``close`` may be called from any thread.
    ``rows``: the DoneFrames the stream ends with (one per variant); once they are all sent, the stream is whole and
    a failure of the batch it ran in (a later row's, the engine closing) is not its own: ``fail`` is ignored.
    """

    def __init__(self, rows: int = 1) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._cancelled = threading.Event()
        self._unfinished = rows

    def send(self, frame: Frame) -> None:
        if isinstance(frame, DoneFrame):
            self._unfinished -= 1
        self._put(frame)

    def fail(self, error: EngineError) -> None:
        # a stream already whole just ends (the worker's close may come too late: it drops all once cancelled)
        self._put(error if self._unfinished > 0 else _CLOSED)

    def close(self) -> None:
        self._put(_CLOSED)

    def cancel(self) -> None:
        self._cancelled.set()

    def is_cancelled(self) -> bool:
        return self._cancelled.is_set()

    async def frames(self) -> AsyncGenerator[Frame, None]:
        """Frames until the worker closes the channel; a failure is raised. Leaving early cancels the work."""
        try:
            while True:
                item = await self._queue.get()
                if item is _CLOSED:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item  # type: ignore[misc]
        finally:
            self.cancel()

    def _put(self, item: object) -> None:
        if self._cancelled.is_set():
            return
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the consumer's event loop has closed: nobody is listening
            self._cancelled.set()
