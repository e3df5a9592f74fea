"""One engine run for one page version, shared by everyone watching it.

A run writes a whole page, or one part of a stored page (a ``Splice``: a rewritten section, a thread's new replies)
whose HTML before and after it is kept byte for byte. Whoever watches a ``Generation`` sees sanitised snapshots of
the page as it denoises, then the finished page (stored in the page cache unless its route says otherwise) or the
engine's error. When the last watcher leaves before the end, the run is cancelled and the engine's stream closed
with it, unless a visitor was handed the run's placeholder and their stream has not connected yet (``claim``: a
reload, a click on the page's own link); a run that nobody comes to watch at all (a page requested but its stream
never opened) is cancelled after ``unclaimed_s`` seconds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import re
import sqlite3
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from html.parser import HTMLParser

from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, QueuedFrame, StepFrame
from genui.claims import Claims
from genui.prompts import Parent
from genui.runtime import SiteRuntime
from genui.store import PageKey, PageWithdrawn, Store, StoredPage, is_busy, when_free

log = logging.getLogger("genui")
KEEP_WAIT_S = 30.0  # how long a written page waits to be kept while another process holds the page cache
KEEP_POLL_S = 0.25  # how often it tries meanwhile (each try without waiting, so the event loop is not held up)


class PageNotKept(EngineError):
    """A page was written, but another process held the page cache for ``KEEP_WAIT_S`` and it was not kept: a 503
    with Retry-After (genui.errors)."""


_H1_END = re.compile("</h1>", re.IGNORECASE)
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def first_heading(html: str) -> str:
    """The text of the first ``<h1>`` in ``html`` ("" when there is none): the page's title. Read up to the first
    ``</h1>`` only (a thread of 3,000 replies was parsed whole, 13.8 ms, at each of its replies runs: a load test)."""
    finder = _HeadingFinder()
    end = _H1_END.search(html)
    finder.feed(html if end is None else html[: end.end()])
    finder.close()
    # no bidi override, embedding or isolate: in the tab and in the site's lists of pages a title is text out of its
    # paragraph, and `Invoice<U+202E>fdp.exe` read `Invoiceexe.pdf` there (a security review)
    return " ".join(_BIDI_CONTROLS.sub("", "".join(finder.text)).split())


class _HeadingFinder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self._state = "before"  # before -> inside -> after

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h1" and self._state == "before":
            self._state = "inside"

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1" and self._state == "inside":
            self._state = "after"

    def handle_data(self, data: str) -> None:
        if self._state == "inside":
            self.text.append(data)


@dataclass(frozen=True, slots=True)
class Splice:
    """Where a run's text goes: between two pieces of a stored page's HTML, which the new version keeps byte for
    byte; ``WHOLE`` for a whole page. A splice with nothing before or after it (a page that is one section, rewritten)
    is still a splice: its run is a rewrite, which a Regenerate must not join, and it answers no post."""

    before: str = ""  # stored HTML kept before the written part
    after: str = ""  # and after it
    answered: int = 0  # the new version's StoredPage.answered
    replied: int = 0  # and its StoredPage.replied (at least ``answered``)
    text_before: str = ""  # what the engine's final text has before the written part (an infill's ``before``)
    text_after: str = ""  # and after it
    read: tuple[int, ...] = ()  # the ids of every reader post of the thread when the run began (its prompt holds them)
    whole: bool = False  # a run writing a whole page (``WHOLE``), not a part of one
    base: tuple[int, float] | None = None  # the stored version (its number and created) whose HTML it keeps
    exact: bool = False  # a visitor's own rewrite: stored as written, or not at all (store.VersionTaken)
    # a thread's replies to its readers' posts: written though every watcher leaves (a poster who went on to another
    # page left the post unanswered until someone opened the thread again, and waited for its replies)
    replies: bool = False

    def written(self, text: str) -> str:
        """The written part of the engine's final text."""
        if self.text_before and text.startswith(self.text_before):
            text = text[len(self.text_before) :]
        if self.text_after and text.endswith(self.text_after):
            text = text[: len(text) - len(self.text_after)]
        return text


WHOLE = Splice(whole=True)  # a run writing a whole page


@dataclass(frozen=True)
class Snapshot:
    """What a watcher sees of a generation: the page so far, sanitised; ``page`` or ``error`` once it has ended."""

    text: str = ""  # the model's text so far; sanitised into ``html`` only if a watcher shows it
    render: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    canvas: int = 1  # 1-based canvas being written
    step: int = 0  # denoising step within it; 0 before the first
    canvases: int | None = None  # canvases the page may take, when the engine says its canvas length
    ahead: int = 0  # before its first step: runs the engine writes or has waiting before this one (QueuedFrame)
    page: StoredPage | None = None
    error: EngineError | PageWithdrawn | None = None

    @property
    def finished(self) -> bool:
        return self.page is not None or self.error is not None

    @cached_property
    def html(self) -> str:
        # Lazy: a client waiting for the final page alone never has its drafts sanitised at all.
        return self.render(self.text) if self.render is not None and self.text else ""


class Generation:
    """One engine run for one page version, shared by everyone watching it."""

    def __init__(
        self,
        runtime: SiteRuntime,
        key: PageKey,
        version: int,
        frames: Callable[[], AsyncIterator[Frame]],  # starts the engine's run
        parent: Parent | None,
        canvases: int | None,  # canvases the run may take, when the engine says its canvas length
        store: Store | None,  # None: the route is not cached, the page is never stored
        on_end: Callable[[Generation], None],
        unclaimed_s: float,
        splice: Splice = WHOLE,
    ) -> None:
        self.runtime, self.key, self.version, self.parent, self.splice = runtime, key, version, parent, splice
        self._store, self._on_end = store, on_end
        self._snapshot = Snapshot(canvases=canvases, render=functools.partial(runtime.render, draft=True))
        self._changed = asyncio.Event()
        self._ended = asyncio.Event()
        self._watchers = 0
        self._watching: collections.Counter[str | None] = collections.Counter()  # the watchers' clients (addresses)
        self._claims = Claims(unclaimed_s, self._abandon)  # placeholders handed out whose watcher has not come yet
        self.awaited = False  # once ended: a placeholder handed out was still waiting for its watcher
        self._keeping = False  # written whole, waiting to be kept: kept though its watchers leave
        self.cancelled = False  # ended by cancel() (left unwatched, a server stopping), not by the engine
        # whether the run goes on unwatched for now: a server stopping lets it finish (Pages.close), though its
        # streams closed as the server stopped
        self.holding: Callable[[], bool] = lambda: False
        self.done: DoneFrame | None = None  # the engine's last frame, once written: its statistics (genui.metrics)
        self._task = asyncio.get_running_loop().create_task(self._run(frames))
        self.claim()  # whoever asked for the run watches it a round trip later

    @property
    def page(self) -> StoredPage | None:
        """The finished page, once there is one."""
        return self._snapshot.page

    @property
    def finished(self) -> bool:
        return self._snapshot.finished

    @property
    def error(self) -> EngineError | PageWithdrawn | None:
        """Why the run ended without a page, once it has."""
        return self._snapshot.error

    @property
    def watchers(self) -> int:
        """How many watch the run now."""
        return self._watchers

    @property
    def claimed(self) -> bool:
        """A placeholder handed out for the run still waits for its watcher (``claim``)."""
        return bool(self._claims)

    @property
    def keeping(self) -> bool:
        """Written whole, and waiting to be kept (another process holds the page cache): the engine is done with it."""
        return self._keeping

    @property
    def seed(self) -> int:
        return self.version - 1  # version 1 is seed 0; each regeneration the next seed

    def watched_by_none_but(self, client: str | None) -> bool:
        """Whether every watcher of the run now is ``client``'s (an address), as a page left by its own visitor is:
        none but the one leaving."""
        return all(who == client for who, count in self._watching.items() if count > 0)

    async def watch(
        self, interval: float = 0.0, heartbeat: float = 0.0, client: str | None = None
    ) -> AsyncGenerator[Snapshot, None]:
        """Snapshots until the end; a slow watcher skips to the newest. Close it (aclosing) when leaving early.

        ``interval`` seconds at least pass between two unfinished snapshots (the ones between are skipped), but the
        last one comes as soon as it is there: every shown draft costs a sanitiser pass and a browser swap, and a
        fast engine makes far more of them than anyone can watch. ``heartbeat``: where no new snapshot comes for as
        long (the run waits for the engine), the last one comes again, the same object. ``client``: the watcher's
        address (a visitor's stream), None for genui's own (reading ahead).
        """
        self._watchers += 1
        self._watching[client] += 1
        self._claims.fulfil()
        try:
            seen: Snapshot | None = None
            while True:
                snapshot, changed = self._snapshot, self._changed
                if snapshot is not seen:
                    seen = snapshot
                    yield snapshot
                    if interval > 0 and not snapshot.finished and (snapshot.step or snapshot.text):
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._ended.wait(), interval)
                        continue
                if snapshot.finished:
                    return
                if snapshot is self._snapshot:
                    if heartbeat <= 0:
                        await changed.wait()
                        continue
                    try:
                        async with asyncio.timeout(heartbeat):  # (in this task: wait_for's own let runs skip frames)
                            await changed.wait()
                    except TimeoutError:
                        yield snapshot
        finally:
            self._watchers -= 1
            self._watching[client] -= 1
            self._abandon()

    async def result(self) -> StoredPage:
        """Watch to the end: the stored page, or the engine's error raised."""
        async with contextlib.aclosing(self.watch()) as snapshots:
            async for snapshot in snapshots:
                if snapshot.error is not None:
                    raise snapshot.error
                if snapshot.page is not None:
                    return snapshot.page
        raise EngineError("the generation ended without a page")  # pragma: no cover - watch() always ends finished

    async def ended(self) -> None:
        """Wait until the run has ended, with its page or without."""
        await self._ended.wait()

    def cancel(self) -> asyncio.Task[None]:
        """Stop the run, whoever watches it; returns its task to await. Watchers see it end with an error."""
        self.cancelled = self.cancelled or not self._snapshot.finished
        self._on_end(self)
        self._fail(EngineError("the generation was cancelled"))  # also when the task is cancelled before it starts
        self._task.cancel()
        return self._task

    def claim(self, times: float = 1.0) -> None:
        """A visitor was handed the run's placeholder: its stream connects a round trip later, and the run waits for
        it up to ``unclaimed_s`` seconds (``times`` as long: a stream whose connection broke) though its last watcher
        leaves meanwhile (a reload closes the old page's stream before the new page's opens)."""
        if not self._snapshot.finished:
            self._claims.add(times)

    def _abandon(self) -> None:
        """Cancel the run when nobody watches it any more (or never came to), and no placeholder handed out waits for
        its watcher; not a thread's replies (``Splice.replies``), nor a page written whole waiting to be kept."""
        kept = self._keeping or self.splice.replies or self.holding()
        if self._watchers == 0 and not self._claims and not self._snapshot.finished and not kept:
            self.cancel()  # leaves the registry at once: a visitor arriving now must start a fresh run

    def _publish(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._changed.set()
        self._changed = asyncio.Event()
        if snapshot.finished:
            self._ended.set()

    def _fail(self, error: EngineError | PageWithdrawn) -> None:
        if not self._snapshot.finished:
            self._publish(replace(self._snapshot, error=error))

    async def _run(self, start: Callable[[], AsyncIterator[Frame]]) -> None:
        finished: dict[int, str] = {}  # canvas index -> final text
        frames: AsyncIterator[Frame] | None = None
        try:
            frames = start()
            async for frame in frames:
                if isinstance(frame, StepFrame):
                    stable = "".join(text for index, text in sorted(finished.items()) if index < frame.canvas)
                    text = stable + frame.text
                    self._publish(replace(self._snapshot, text=text, canvas=frame.canvas + 1, step=frame.step))
                elif isinstance(frame, CanvasFrame):
                    finished[frame.canvas] = frame.text
                    text = "".join(text for _, text in sorted(finished.items()))
                    if frame.steps == 0 and self._snapshot.text.startswith(text):
                        continue  # an opening's canvas, already shown with the gaps filled in it: no step back
                    self._publish(replace(self._snapshot, text=text, canvas=frame.canvas + 1, step=frame.steps))
                elif isinstance(frame, QueuedFrame):
                    if not (self._snapshot.step or self._snapshot.text) and frame.ahead != self._snapshot.ahead:
                        self._publish(replace(self._snapshot, ahead=frame.ahead))
                elif isinstance(frame, DoneFrame):
                    self.done = frame
                    self._publish(replace(self._snapshot, page=await self._finish(frame)))
                    return
            raise EngineError("the engine's stream ended without a final frame")
        except (EngineError, PageWithdrawn) as err:
            self._fail(err)
        except sqlite3.OperationalError as err:  # the page cache held by another process, or a disk full or failing
            url = self.runtime.url(self.key.path)
            if is_busy(err):
                log.warning("%s was written but not kept: the page cache was held for %g s (%s)", url, KEEP_WAIT_S, err)
                self._fail(PageNotKept(f"another process held the page cache for {KEEP_WAIT_S:g} s"))
            else:
                log.error("%s was written but could not be kept: %s", url, err)
                self._fail(EngineError(f"the page was written, but the page cache could not keep it ({err})"))
        except asyncio.CancelledError:
            self.cancelled = self.cancelled or not self._snapshot.finished
            self._fail(EngineError("the generation was cancelled"))
            raise
        except Exception as err:  # an engine bug must still end every watcher's wait
            log.exception("generation of %s failed", self.runtime.url(self.key.path))
            self._fail(EngineError(f"generation failed: {err}"))
        finally:
            self.awaited = self._claims.clear()
            close = getattr(frames, "aclose", None)  # None too when the engine refused at once
            if close is not None:
                await close()  # stops the engine's own loop within one step when we were cancelled
            self._on_end(self)

    async def _finish(self, done: DoneFrame) -> StoredPage:
        """The finished page, kept in the page cache. While another process holds the cache (genui cache prune
        --vacuum, a second server), it tries again every KEEP_POLL_S for up to KEEP_WAIT_S, each time without
        waiting on SQLite's busy timeout, so the server answers others meanwhile; a page written whole is kept
        though its watchers leave while it waits."""
        splice = self.splice
        page = self.runtime.page_of(self.key)  # whose route may follow links that no route serves
        html = splice.before + self.runtime.render(splice.written(done.text), on=page) + splice.after
        title = first_heading(html)
        if self._store is None:
            return StoredPage(self.key, self.version, self.seed, title, html, done.seconds, time.time())
        save = functools.partial(
            self._store.save_page,  # PageWithdrawn: the run fails, and its watchers are told why
            self.key,
            self.version,
            self.seed,
            title,
            html,
            done.seconds,
            splice.answered,
            splice.replied,
            mount=self.runtime.mount,
            read=splice.read,
            base=splice.base,
            exact=splice.exact,
        )
        self._keeping = True
        stored = await when_free(functools.partial(save, wait=False), KEEP_WAIT_S, KEEP_POLL_S)
        return self.runtime.remounted(stored)  # the one stored: another process's, if it stored this version first
