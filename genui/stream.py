"""The live stream: a WebSocket per page being written, pushing each denoising frame as an HTML fragment.

The page's placeholder (``parts.live``) carries ``ws-connect="/_genui/ws?site=..&url=..&v=..[&from=..]"``. Messages
go one way, server to client, each a few top-level elements whose ids the htmx ws extension swaps them into:

- a frame: ``#genui-progress`` ("canvas i of n, step k") and ``#genui-draft`` (the page so far, sanitised as a
  draft: finished canvases plus the current canvas's draft);
- the end: ``#genui-toolbar`` (the version switcher) and ``#genui-content`` (the finished page). It replaces the
  placeholder, the element holding ``ws-connect``, so the client closes its side as the page lands;
- a failure: ``#genui-content`` saying why.

Then the server closes with 1000. Several sockets watching the same page version share one generation; when the
last one goes away before the end, the generation is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math

from starlette.websockets import WebSocket, WebSocketDisconnect

from engine.frames import EngineError, EngineOverloaded
from genui.pages import Job
from genui.routing import VERSION_KEY, BadRequest
from genui.store import StoredPage
from genui.views import Views, is_number, same_origin

POLICY_VIOLATION = 1008  # WebSocket close code: refused before the handshake (another site's page)
INTERNAL_ERROR = 1011  # WebSocket close code: the server hit a bug
log = logging.getLogger("genui")


class Stream:
    """The WebSocket endpoint (``serve``)."""

    def __init__(self, views: Views, draft_interval: float = 0.1) -> None:
        self.views = views
        self.draft_interval = draft_interval  # seconds between two drafts sent to one socket

    async def serve(self, websocket: WebSocket) -> None:
        if not same_origin(websocket):
            await websocket.close(code=POLICY_VIOLATION)
            return
        await websocket.accept()
        pump = asyncio.ensure_future(self._pump(websocket))
        gone = asyncio.ensure_future(_closed(websocket))
        try:
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, gone):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        ended = pump.done() and not pump.cancelled()
        error = pump.exception() if ended else None
        if error is not None and not isinstance(error, WebSocketDisconnect | OSError):  # OSError: uvicorn's disconnect
            # A bug: log it, and close rather than leave the client waiting on an open socket for ever.
            log.error("stream %s failed", websocket.url.query, exc_info=error)
        if ended and gone.cancelled():  # cancelled above: the client was still there when the pump ended
            # It closes its side as soon as the final page lands, so it may be gone by now all the same.
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await websocket.close(code=1000 if error is None else INTERNAL_ERROR)

    async def _pump(self, websocket: WebSocket) -> None:
        views, pages = self.views, self.views.pages
        params = websocket.query_params
        runtime = pages.sites.get(params.get("site", ""))
        if runtime is None:
            await websocket.send_text(views.shell.part("failed", "This site does not exist.", None))
            return
        raw_version = params.get(VERSION_KEY, "")
        try:
            location = runtime.locate(params.get("url", "/"))
        except BadRequest as err:
            await websocket.send_text(views.shell.part("failed", str(err), None))
            return
        if location is None or (raw_version and not is_number(raw_version, 7)):
            await websocket.send_text(views.shell.part("failed", "No page lives at this address.", None))
            return
        try:
            job = pages.job(runtime, location, params.get("from"))
        except BadRequest as err:
            await websocket.send_text(views.shell.part("failed", str(err), None))
            return
        retry = runtime.url(location.url)
        version = int(raw_version) if raw_version else None
        page = pages.page(job, version)
        if page is None:
            versions = pages.versions(job)
            if version not in (None, versions + 1):
                await websocket.send_text(views.shell.part("failed", f"There is no version {version}.", retry))
                return
            page = await self._watch(websocket, job, version or versions + 1)
            if page is None:
                return
        await websocket.send_text(self._final(job, page))

    async def _watch(self, websocket: WebSocket, job: Job, version: int) -> StoredPage | None:
        """Send every snapshot of the generation; its page at the end, or None after a failure message."""
        shell = self.views.shell
        generation = self.views.pages.generation(job, version)
        async with contextlib.aclosing(generation.watch(self.draft_interval)) as snapshots:
            async for snapshot in snapshots:
                if snapshot.page is not None:
                    return snapshot.page
                if snapshot.error is not None:
                    retry = job.runtime.url(job.location.url)
                    await websocket.send_text(shell.part("failed", _reason(snapshot.error), retry))
                    return None
                if snapshot.step or snapshot.html:
                    await websocket.send_text(shell.part("frame", snapshot))
        return None  # pragma: no cover - watch() always ends with a page or an error

    def _final(self, job: Job, page: StoredPage) -> str:
        context = self.views.page_context(job, page, page.version)
        shell = self.views.shell
        return shell.part("toolbar", context["toolbar"]) + "\n" + shell.part("content", page, context["document_title"])


def _reason(error: EngineError) -> str:
    if isinstance(error, EngineOverloaded):
        return f"The model is busy. Try again in {math.ceil(error.retry_after)} s."
    return f"The page could not be written: {error}"


async def _closed(websocket: WebSocket) -> None:
    while (await websocket.receive())["type"] != "websocket.disconnect":
        pass
