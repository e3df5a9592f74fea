"""What genui answers when a request cannot have its page: one mapping from an exception to a status, a heading
and a message, used by the app's exception handlers (an error page in the site's shell) and by the live stream (a
failure message in place of the page).

| exception | answer |
|---|---|
| ``BadRequest`` (malformed URL, version or form; a prompt the model cannot read) | 400 |
| ``PostRejected`` (a reader's post with a bad name or text) | 400 |
| ``NoSuchVersion`` | 404 |
| ``HTTPException`` (no such site or page, a foreign form, a form too large, ...) | its status |
| ``EngineLoading`` (the model is still loading) | 503 with ``Retry-After`` |
| ``EngineOverloaded`` | 503 with ``Retry-After`` |
| ``PageNotKept`` (a page written while another process held the page cache for 30 s) | 503 with ``Retry-After`` |
| ``EngineError`` | 503 |
| ``PageWithdrawn`` (a post or versions it was written from deleted; a chosen version stored first elsewhere) | 409 |
| ``PromptError`` (the site's prompt template failed on this page: its file, line and fix, and logged) | 500 |
| ``sqlite3.OperationalError`` "locked" (another process holding the page cache) | 503 with ``Retry-After`` |
| ``sqlite3.OperationalError`` "full", "disk I/O error" or "readonly" (``cannot_store``, and logged) | 503 |
| ``genui.store.FileGone`` (the file deleted or replaced while open; ``cannot_store``, and logged) | 503 |
| ``sqlite3.DatabaseError`` "malformed" (a damaged file, logged with the fix) | 503 |
| anything else (a bug) | 500 |
"""

from __future__ import annotations

import contextlib
import http
import logging
import math
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from engine.frames import EngineError, EngineOverloaded
from genui.generation import PageNotKept
from genui.pages import EngineLoading, NoSuchVersion, RouteTooLong, ServerStopping, StillWriting
from genui.prompts import PromptError
from genui.routing import BadRequest
from genui.screens import Screens, words_of
from genui.security import security_headers
from genui.store import (
    MAX_USER,
    USER_RULE,
    PageWithdrawn,
    PostRejected,
    ReadPostDeleted,
    VersionTaken,
    cannot_store,
    is_busy,
)
from genui.words import WORDS, Refusal, Words

Handler = Callable[[Request, Exception], Awaitable[Response]]
CACHE_BUSY_RETRY_S = 2  # seconds a request the page cache was too busy for is asked to wait
STOPPING_RETRY_S = 5  # seconds a request the stopping server could not wait for is asked to wait
STILL_WRITING_RETRY_S = 1  # seconds a wait URL answered before its page is written waits to ask again
log = logging.getLogger("genui")


@dataclass(frozen=True, slots=True)
class Problem:
    status_code: int
    heading: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    # the heading's and the message's keys among genui's words (genui/words.py), and the message's values: a site
    # says them in its own words (``said``); None: English only
    words: tuple[str, str, dict[str, object]] | None = None

    def said(self, words: Words) -> tuple[str, str]:
        """The heading and message in a site's words, where it has them for this problem."""
        if self.words is None:
            return self.heading, self.message
        heading, message, values = self.words
        return words.text(heading), words.text(message, **values)

    def english(self, words: Words) -> bool:
        """Whether its message is genui's English on a site in another language (a page marks it so)."""
        return words.foreign and (self.words is None or not words.says(self.words[1]))

    def shown(self, words: Words) -> tuple[Markup, Markup]:
        """The heading and message as HTML, as ``said``: genui's English, where the site has no words of its own for
        them, marked as English on a site in another language, so that a screen reader reads it in an English voice
        (a French site's "No such version" was read in French)."""
        if self.words is None:
            return words.english(self.heading), words.english(self.message)
        heading, message, values = self.words
        return words.say(heading), words.say(message, **values)


def _worded(
    status: int, heading: str, message: str, headers: dict[str, str] | None = None, **values: object
) -> Problem:
    """A problem whose heading and message are genui's words ``heading`` and ``message`` (their English here)."""
    english = Words()
    return Problem(
        status, english.text(heading), english.text(message, **values), headers or {}, (heading, message, values)
    )


def problem(error: Exception, asks_again: bool = True) -> Problem | None:
    """How to answer ``error``; None for an exception that is a bug. ``asks_again``: the answer goes where the page
    would have, and asks again by itself after its Retry-After (a GET's, a stream's), so its message may say so; a
    form posted (Regenerate, Rewrite) is not sent again by itself."""
    if isinstance(error, BadRequest):
        return Problem(400, "Bad request", str(error))
    if isinstance(error, PostRejected) and str(error) == USER_RULE:  # the name's rule, as the form's hint says it
        return _worded(400, "reply_not_posted_heading", "user_rule", n=MAX_USER)
    if isinstance(error, PostRejected):
        return Problem(400, "Bad request", f"{error}.")
    if isinstance(error, NoSuchVersion):
        if error.stopped:  # a run that stopped: why
            return Problem(404, "No such version", error.stopped)
        return _worded(404, "no_version_heading", "no_version", n=error.version)
    if isinstance(error, EngineLoading):
        seconds = math.ceil(error.retry_after)
        said = "loading" if asks_again else "loading_later"
        if error.unreached:  # no network to fetch the weights from: the reason is the console's, and the health URL's
            said = "unreached" if asks_again else "unreached_later"
        return _worded(503, "loading_heading", said, {"Retry-After": str(seconds)}, seconds=seconds)
    if isinstance(error, EngineOverloaded):
        seconds = math.ceil(error.retry_after)
        said = "busy" if asks_again else "busy_later"
        return _worded(503, "busy_heading", said, {"Retry-After": str(seconds)}, seconds=seconds)
    if isinstance(error, PageNotKept):
        then = f"This page tries again in {CACHE_BUSY_RETRY_S} s." if asks_again else "Try again in a moment."
        message = f"The page was written, but {error}, so it was not kept. {then}"
        return Problem(503, "Busy", message, {"Retry-After": str(CACHE_BUSY_RETRY_S)})
    if isinstance(error, ServerStopping):  # a restart, most likely: the page's run is asked for again after it
        said = "restarting" if asks_again else "restarting_later"
        retry = {"Retry-After": str(STOPPING_RETRY_S)}
        return _worded(503, "restarting_heading", said, retry, seconds=STOPPING_RETRY_S)
    if isinstance(error, StillWriting):  # the same run goes on, and the request asked again joins it
        retry = {"Retry-After": str(STILL_WRITING_RETRY_S)}
        return _worded(503, "writing_heading", "still_writing", retry, seconds=STILL_WRITING_RETRY_S)
    if isinstance(error, RouteTooLong):  # the site's config, not a busy server: no use trying again
        log.error("%s", error)
        return Problem(500, "Site error", f"This page cannot be written: {error}")
    if isinstance(error, EngineError):
        return Problem(503, "Not available", f"The page could not be written: {error}")
    if isinstance(error, ReadPostDeleted):
        message = "A reader's post this page was written from has been deleted meanwhile, so it was not kept."
        return Problem(409, "Post deleted", message + " Open the page again.")
    if isinstance(error, PromptError):  # the site's bug, not the visitor's: its developer reads the log
        log.error("a prompt template failed: %s", error)
        return Problem(500, "Template error", f"This page's prompt template failed: {error.public}")
    if isinstance(error, sqlite3.OperationalError) and is_busy(error):
        # another process writes the page cache (genui cache prune --vacuum, a second server starting)
        message = f"The page cache is busy. Try again in {CACHE_BUSY_RETRY_S} s."
        return Problem(503, "Busy", message, {"Retry-After": str(CACHE_BUSY_RETRY_S)})
    if isinstance(error, sqlite3.OperationalError) and cannot_store(error):
        # the operator's to mend (a full disk, a file made read-only): said in the log, and to the visitor plainly
        log.error("the page cache cannot store anything: %s (%s)", error, error.sqlite_errorname)
        message = "The page cache cannot store anything now (its disk is full, or it cannot be written). Try later."
        return Problem(503, "Not stored", message)
    if isinstance(error, sqlite3.DatabaseError) and "malformed" in str(error):
        # a file damaged (a copy restored over it while served, a stale -wal replayed onto a backup): the operator's
        log.error(
            "the page cache is damaged (%s): stop genui, then restore a backup, or recover what it holds with sqlite3's"
            " .recover into a new file",
            error,
        )
        return Problem(503, "Damaged", "The page cache is damaged, and its operator has been told. Try later.")
    if isinstance(error, VersionTaken):
        message = "Another version of this page was stored meanwhile (a second server), so this one was not kept."
        return Problem(409, "Version taken", message + " Open the page again to see it.")
    if isinstance(error, PageWithdrawn):
        message = "This page's earlier versions were deleted while it was being written, so it was not kept."
        return Problem(409, "Versions deleted", message + " Open the page again.")
    if isinstance(error, HTTPException):
        if error.status_code == 404 and error.detail == WORDS["no_page"]:
            return _worded(404, "not_found_heading", "no_page", dict(error.headers or {}))
        if isinstance(error, Refusal):
            heading, message, values = error.words
            message = message if asks_again or error.later is None else error.later
            return _worded(error.status_code, heading, message, dict(error.headers or {}), **values)
        heading = http.HTTPStatus(error.status_code).phrase.capitalize()
        return Problem(error.status_code, heading, error.detail, dict(error.headers or {}))
    return None


def exception_handlers(screens: Screens) -> dict[type[Exception], Handler]:
    """Starlette exception handlers answering every exception with a page (the site's, when the endpoint has
    recorded one on ``request.state.runtime``)."""

    async def known(request: Request, error: Exception) -> Response:
        answer = problem(error, asks_again=request.scope.get("method") == "GET")  # as Screens.error asks again
        assert answer is not None
        runtime = getattr(request.state, "runtime", None)
        if runtime is None:
            return screens.error(request, None, answer.status_code, answer.heading, answer.message, answer.headers)
        heading, message = answer.shown(words_of(runtime))
        job = getattr(request.state, "job", None)  # the page a control was posted from (views._page_form)
        back = None if job is None else screens.varied(job)
        return screens.error(request, runtime, answer.status_code, heading, message, answer.headers, back=back)

    async def server_error(request: Request, error: Exception) -> Response:
        # Runs outside the middleware stack, so it adds the security headers itself.
        heading, message, headers = "Server error", "Something broke.", security_headers()
        runtime = getattr(request.state, "runtime", None)
        if runtime is not None:
            with contextlib.suppress(Exception):  # the bug may be in the site's own shell; then the plain page
                words = words_of(runtime)
                return screens.error(
                    request, runtime, 500, words.english(heading), words.english(message), headers=headers
                )
        return screens.error(request, None, 500, heading, message, headers=headers)

    async def database(request: Request, error: Exception) -> Response:
        if problem(error) is not None:  # busy: another process holds the page cache
            return await known(request, error)
        log.error("the page cache failed", exc_info=error)  # a bug, or a broken file: the server's log says which
        return await server_error(request, error)

    return {
        sqlite3.DatabaseError: database,  # OperationalError is one
        BadRequest: known,
        NoSuchVersion: known,
        EngineError: known,
        PageWithdrawn: known,
        PromptError: known,
        HTTPException: known,
        ServerStopping: known,
        StillWriting: known,
        Exception: server_error,
    }
