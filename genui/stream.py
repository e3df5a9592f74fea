"""The live stream: a WebSocket per page being written, pushing each denoising frame as an HTML fragment.

The page's placeholder (``parts.live``) carries ``ws-connect="/_genui/ws?site=..&url=..&v=..[&from=..]"``. Messages
go one way, server to client, each a few top-level elements whose ids the htmx ws extension swaps them into:

- a frame: ``#genui-progress`` ("canvas i of n, step k") and ``#genui-draft`` (the page so far, sanitised as a
  draft: finished canvases plus the current canvas's draft);
- the end: ``#genui-toolbar`` (the version switcher) and ``#genui-content`` (the finished page). It replaces the
  placeholder, the element holding ``ws-connect``, so the client closes its side as the page lands;
- a failure: ``#genui-content`` saying why.

A page written in place (a section rewritten, a thread's replies) streams the same way: its placeholder holds the
stored HTML around ``#genui-draft``, which the frames replace. A set of variations has a stream of its own
(``/_genui/ws/variations?site=..&id=..``): ``#genui-variant-1`` .. ``-n`` per frame, then ``#genui-content`` with the
finished candidates.

Then the server closes with 1000. The socket watches the run that the page's request started, found by the
page's cache key and version, so it renders no prompt of its own; it starts the run itself only when there is none
(the request's run has ended unwatched, or the socket was opened on its own). Several sockets watching the same
page version share one run; when the last one goes away before the end, the run is cancelled, unless its
connection broke (a close other than 1000 or 1001: a network drop is 1006, or 1005), when the run waits for the ws
extension's reconnect as it waits for a placeholder's stream (``Generation.claim``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from starlette.websockets import WebSocket, WebSocketDisconnect

from engine.frames import EngineError
from genui.errors import Problem, problem
from genui.generation import Generation
from genui.inputs import client_address, foreign_form, page_at, same_origin, site_named
from genui.pages import Job, NoSuchVersion, Pages, RouteTooLong, TooManyRuns
from genui.routing import versioned
from genui.screens import Screens, words_of
from genui.store import StoredPage
from genui.words import Words

POLICY_VIOLATION = 1008  # WebSocket close code: another site's page (the ws extension does not reconnect on it)
FOREIGN_SOCKET = (
    "This page came from another address than this server's (its Origin is not the Host the server was sent), so it "
    "cannot be written here. Behind a reverse proxy, pass the Host header on with its port (nginx: proxy_set_header "
    "Host $http_host; docs/security.md)."
)
BUG = "genui failed to write this page. The error is in the server's log."
WATCHED = "genui_watched"  # the run a stream watches (a Generation, or a set of Variations), on its websocket.state
GONE = "genui_gone"  # the task that reads the close code a stream's client leaves with, on its websocket.state
# A frame that cannot be sent waits this long for the client's close code: a page left closes its stream with 1000,
# and uvicorn queues that code before a send fails, but the task that reads it may not have run yet (a busy CPU)
CLOSE_READ_S = 0.5
NO_STATUS = 1005  # a close frame without a code, or (uvicorn's websockets) a connection that broke after its handshake
# the close codes of a visitor who left: a normal close (static/genui.js gives the ws extension's close this code), a
# page going away (a reload, a tab closed). Not 1005: uvicorn says it of a drop too, and a page whose connection
# dropped for a second was written again from its first step (a reader on a flaky network).
LEFT = frozenset({1000, 1001})
INVALID_DATA = 1007  # the close code of a socket whose client sent a text message that is no UTF-8
# Where nothing else is sent for as long (the run waits for the engine), the progress line is sent again: a page's
# connection that died with the browser never told (a laptop that slept, a NAT that forgot it) showed "Writing…" for
# ever, and static/genui.js opens a stream anew that has said nothing for four of these (a reader on a flaky network)
HEARTBEAT_S = 5.0
# A run whose stream's connection broke waits this many times unclaimed_s (10 s: 30 s) for the reconnect: a phone in
# a tunnel is offline for longer than a reload's round trip, and the page was written again from its first step
DROPPED = 3.0
log = logging.getLogger("genui")


class Stream:
    """The WebSocket endpoint (``serve``)."""

    def __init__(self, pages: Pages, screens: Screens, draft_interval: float = 0.1) -> None:
        self.pages, self.screens = pages, screens
        self.draft_interval = draft_interval  # seconds between two drafts sent to one socket

    async def serve(self, websocket: WebSocket) -> None:
        await self._serve(websocket, self._pump)

    async def serve_variations(self, websocket: WebSocket) -> None:
        """The stream of a set of variations (``?site=..&id=..``): every candidate's draft, side by side, then the
        finished candidates with their keep buttons."""
        await self._serve(websocket, self._pump_variations)

    async def _serve(self, websocket: WebSocket, pumping: Callable[[WebSocket], Awaitable[None]]) -> None:
        await websocket.accept()
        if not same_origin(websocket):
            foreign_form(websocket)  # logged where a proxy dropped the port (FOREIGN_SOCKET says the fix)
            # Said, then closed with 1008. Refused before the handshake, the browser would see 1006, on which the ws
            # extension reconnects for ever: behind a proxy that rewrites Host, every visitor's page would wait so.
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await websocket.send_text(self.screens.failed(FOREIGN_SOCKET, None))
                await websocket.close(code=POLICY_VIOLATION)
            self.pages.metrics.stream_ended("refused")
            return
        pump = asyncio.ensure_future(pumping(websocket))
        gone = asyncio.ensure_future(_closed(websocket))
        setattr(websocket.state, GONE, gone)
        try:
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
            watched = getattr(websocket.state, WATCHED, None)
            if gone.done() and not gone.cancelled() and gone.result() not in LEFT and watched is not None:
                # the connection broke, the visitor still on the page: the ws extension reconnects within a second
                # or two, and the run waits for that stream, as for a placeholder's, before it is left unwatched
                watched.claim(DROPPED)
        finally:
            for task in (pump, gone):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        ended = pump.done() and not pump.cancelled()
        error = pump.exception() if ended else None
        self.pages.metrics.stream_ended(_end(ended, error, gone))
        if error is not None and not isinstance(error, WebSocketDisconnect | OSError):  # OSError: uvicorn's disconnect
            # A bug: log it, and close rather than leave the client waiting on an open socket for ever.
            log.error("stream %s failed", websocket.url.query, exc_info=error)
        if ended and gone.cancelled():  # cancelled above: the client was still there when the pump ended
            # It closes its side as soon as the final page lands, so it may be gone by now all the same.
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                if error is not None:  # said in the page, and closed normally: htmx's ws extension reconnects on 1011
                    await websocket.send_text(self.screens.failed(BUG, None))
                await websocket.close(code=1000)

    async def _pump(self, websocket: WebSocket) -> None:
        job: Job | None = None
        url: str | None = None  # the page's own URL, once known
        whole = 0  # the later version a whole-page run was asked to write (a Regenerate's), once known
        words, site = Words(), ""  # the site's words and title, once known
        try:
            runtime = site_named(self.pages, websocket.query_params.get("site"))
            words, site = words_of(runtime), runtime.site.title
            location = runtime.locate(websocket.query_params.get("url", "/"))
            url = runtime.url(location.url) if location is not None else None
            job, version = page_at(self.pages, runtime, websocket)  # EngineLoading before the model is named
            replies = self.pages.replies_again(job, version, self.screens.inline_posts)
            if replies is None:
                whole = version or 0
            shown = replies or self.pages.open(job, version)
        except Exception as err:
            answer = problem(err)
            if answer is None:
                raise
            # A busy or loading model, a busy page cache, or a version that is not there: the page's own URL is worth
            # another try (after its Retry-After, as the GET's 503 asks again); a later version's run that could not
            # start, its own URL, which writes it (the page's URL would show the version before, the new one lost)
            worth = isinstance(err, NoSuchVersion | EngineError | TooManyRuns) or "Retry-After" in answer.headers
            worth = worth and not isinstance(err, RouteTooLong)  # the site's config: no try will do better
            later = job is not None and whole > 1 and self.pages.written_whole(job, whole)  # not a rewrite's
            again = versioned(url, whole) if url is not None and later and not isinstance(err, NoSuchVersion) else url
            retry = again if worth else None
            await _send(websocket, self._failed(answer, words, site, retry, answer.headers.get("Retry-After")))
            return
        page = shown if isinstance(shown, StoredPage) else await self._watch(websocket, job, shown)
        if page is not None:
            await _send(websocket, self.screens.final(job, page))

    async def _watch(self, websocket: WebSocket, job: Job, generation: Generation) -> StoredPage | None:
        """Send every snapshot of the generation; its page at the end, or None after a failure message."""
        setattr(websocket.state, WATCHED, generation)
        last = None  # the last snapshot seen: the same one again is a heartbeat
        last_ahead = 0  # the place in line last said
        async with contextlib.aclosing(generation.watch(self.draft_interval, HEARTBEAT_S, job.client)) as snapshots:
            async for snapshot in snapshots:
                if snapshot.page is not None:
                    return snapshot.page
                if snapshot.error is not None:
                    answer = problem(snapshot.error)
                    assert answer is not None
                    retry_after = answer.headers.get("Retry-After")
                    # a later version written whole (a Regenerate's) is written again at its own URL, where a try
                    # again may write it (the engine busy, the page cache); the page's URL shows the version before
                    # it, and a thread's replies, a rewrite, or a page withdrawn meanwhile are asked for there
                    again = generation.splice.whole and generation.version > 1 and job.cached
                    again = again and (isinstance(snapshot.error, EngineError) or "Retry-After" in answer.headers)
                    retry = versioned(job.url, generation.version) if again else job.url
                    # a thread's replies that could not be written: the thread stays on screen, the post with it
                    kept = generation.splice.before if generation.splice.replies else ""
                    site = job.runtime.site.title
                    await _send(websocket, self._failed(answer, words_of(job.runtime), site, retry, retry_after, kept))
                    return None
                drafted, again, last = bool(snapshot.step or snapshot.html), snapshot is last, snapshot
                if again:  # a heartbeat: the progress line again
                    message = self.screens.progress(job, snapshot if drafted else None, snapshot.ahead)
                elif drafted:
                    message = self.screens.frame(job, snapshot, not generation.splice.whole)
                elif snapshot.ahead or last_ahead:  # its place in the engine's line, as it moves up
                    message = self.screens.progress(job, None, snapshot.ahead)
                else:
                    continue  # waiting for the engine: the placeholder says so
                last_ahead = snapshot.ahead
                try:
                    await _send(websocket, message)
                except (WebSocketDisconnect, OSError):  # the connection broke under a frame, before its close
                    if await _broke(websocket):  # came: the run waits for the reconnect, as in _serve
                        generation.claim(DROPPED)
                    raise
        return None  # pragma: no cover - watch() always ends with a page or an error

    def _failed(
        self,
        answer: Problem,
        words: Words,
        site: str,
        retry: str | None,
        retry_after: str | None = None,
        kept: str = "",
    ) -> str:
        """A run that could not be written, said in the site's words with its heading, in place of the page (and
        above ``kept``, the stored HTML shown below it)."""
        heading, message = answer.shown(words)
        return self.screens.failed(message, retry, retry_after, words, heading=heading, site=site, kept=kept)

    async def _pump_variations(self, websocket: WebSocket) -> None:
        words, site = Words(), ""  # the site's words and title, once known
        try:
            runtime = site_named(self.pages, websocket.query_params.get("site"))
            words, site = words_of(runtime), runtime.site.title
            set_id = websocket.query_params.get("id", "")
            job, variations = self.pages.candidates(runtime, set_id, client_address(websocket))
        except Exception as err:
            answer = problem(err, asks_again=False)  # nothing asks for a set of variations again by itself
            if answer is None:
                raise
            await _send(websocket, self._failed(answer, words, site, None))
            return
        setattr(websocket.state, WATCHED, variations)
        async with contextlib.aclosing(variations.watch(self.draft_interval, HEARTBEAT_S)) as states:
            async for state in states:
                if state.error is not None:
                    answer = problem(state.error, asks_again=False)
                    assert answer is not None
                    await _send(websocket, self._failed(answer, words, site, job.url))
                    return
                if state.pages is not None:
                    await _send(websocket, self.screens.candidates_final(job, variations))
                    return
                try:
                    await _send(websocket, self.screens.candidates_frame(job, state))
                except (WebSocketDisconnect, OSError):  # as in _watch
                    if await _broke(websocket):
                        variations.claim(DROPPED)
                    raise


async def _send(websocket: WebSocket, text: str) -> None:
    """Send a message of the stream; a socket the server closed under it (uvicorn does, with 1007, on a message that
    is no UTF-8, and then refuses every send with a RuntimeError) is a disconnect, not a bug in the stream."""
    try:
        await websocket.send_text(text)
    except RuntimeError as closed:
        raise WebSocketDisconnect(INVALID_DATA) from closed


def _end(ended: bool, error: BaseException | None, gone: asyncio.Future[int]) -> str:
    """How a stream ended, as genui.metrics counts it."""
    if ended and error is None:
        return "sent"  # the page, or why it could not be written
    if error is not None and not isinstance(error, WebSocketDisconnect | OSError):
        return "error"
    left = gone.done() and not gone.cancelled() and gone.exception() is None and gone.result() in LEFT
    return "left" if left else "dropped"


async def _broke(websocket: WebSocket) -> bool:
    """Whether a stream whose frame could not be sent lost its connection, not its visitor: a page left closes its
    stream with 1000, and a frame sent after that failed too, so the run was held for a reconnect that never came
    (30 s of a busy engine's time; a test failed 1 run in 8 on a busy CPU)."""
    gone = getattr(websocket.state, GONE, None)
    if gone is None:
        return True
    try:
        code = await asyncio.wait_for(asyncio.shield(gone), CLOSE_READ_S)
    except (TimeoutError, WebSocketDisconnect, OSError, RuntimeError):
        return True
    return code not in LEFT


async def _closed(websocket: WebSocket) -> int:
    """The close code the client left with, once it has (1005: it gave none)."""
    while (message := await websocket.receive())["type"] != "websocket.disconnect":
        pass
    return int(message.get("code") or NO_STATUS)
