"""Reading ahead: while no visitor waits for the engine, write the pages the newest page shown links to.

A page takes seconds to write on a laptop's CPU, and a visitor spends longer than that reading one. So once a
visitor is shown a page, the first few pages it links to that are not stored yet are written one at a time, in the
order the page shows them (the model's links, then the site's navigation below them), each as the click would write
it (the same prompt, parent and seed: the page a click would write when its run has the engine to itself, as a
read-ahead run does; docs/engine.md, "Reproducibility and batching"), and stored. A click on one of them is then a
cache hit, served whole at once.

A link a visitor's pointer rests on, or their keyboard's focus reaches, is a better guess than document order: the
page's script says so (``/_genui/intent``), and that page is written next, before the rest of the list, the run read
ahead from the list giving way to it. Only the newest such hint is kept: the pointer has moved on from the others.

Reading ahead never keeps a visitor waiting. It starts a page only while no other run is under way, and when a
visitor's run starts it cancels the page it is writing (the engine's loop stops within one denoising step), to start
it again once the engine is free; unless a visitor opened that very page and watches it land, which makes the run
theirs. Only the newest page shown says what to read ahead: a visitor who moves on takes it along.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from engine.frames import EngineError
from genui.links import linked_urls
from genui.navigation import sections
from genui.routing import VERSION_KEY, BadRequest, Location, url_path, version
from genui.store import PageKey, PageWithdrawn, Store, StoredPage

if TYPE_CHECKING:
    from genui.generation import Generation
    from genui.pages import Job, Pages
    from genui.runtime import SiteRuntime

log = logging.getLogger("genui")

IDLE_CHECK_S = 1.0  # how often the reader looks again (variations end, and visitors leave, without telling it)


def linked_pages(pages: Pages, job: Job, html: str) -> Iterator[Job]:
    """The pages a page's ``html`` links to, as the page shows them: the model's links, then the site's navigation
    below the page; other pages of cached routes only, each once, each with the page as its parent, as a click on
    the link would have it."""
    for _, location in linked_locations(job, html, pages.store):
        yield pages.job(job.runtime, location, parent_url=job.location.url)


def linked_locations(job: Job, html: str, store: Store) -> Iterator[tuple[PageKey, Location]]:
    """``linked_pages``' pages, by their cache keys and locations: what a thread's posts are is not read (a job
    would load them)."""
    runtime = job.runtime
    seen: set[PageKey] = {job.key}

    def shown_links() -> Iterator[str]:
        yield from linked_urls(html)
        for section in sections(runtime, job.location, store, job.key.model):  # the navigation below the page
            yield from (link.url for link in section.links)

    for url in shown_links():
        if not url.startswith(runtime.mount + "/"):
            continue
        try:
            location = runtime.locate(url.removeprefix(runtime.mount).partition("#")[0])
        except BadRequest:
            continue
        if location is None or location.route.cache == "none" or location.blank:  # (a blank one: no page to write)
            continue
        key = runtime.page_key(location, job.key.model)
        if key not in seen:
            seen.add(key)
            yield key, location


def reading_list(pages: Pages, job: Job, html: str, links: int) -> list[Job]:
    """The first ``links`` of ``linked_pages``. Stored pages count too, so that showing a page again never reaches
    further down its links."""
    return list(itertools.islice(linked_pages(pages, job, html), links))


def front_pages(pages: Pages, links: int) -> list[Job]:
    """The first ``links`` sites' front pages (``/``), as the list of sites shows them, where a cached route serves
    one."""
    listed: list[Job] = []
    for runtime in pages.sites.values():
        location = runtime.locate("/")
        if location is not None and location.route.cache != "none" and len(listed) < links:
            listed.append(pages.job(runtime, location))
    return listed


class ReadAhead:
    """Writes the first ``links`` pages linked from the newest page shown, one at a time, while the engine is idle."""

    def __init__(self, pages: Pages, links: int) -> None:
        if links < 0:
            raise ValueError(f"links must be 0 (off) or more, got {links}")
        self.pages, self.links = pages, links
        self._queue: deque[Job] = deque()
        self._hint: Job | None = None  # the page a visitor's pointer rests on a link to: read ahead first
        self._hint_on: PageKey | None = None  # the page that link is on
        self._lists = 0  # how many times a page shown has replaced the queue
        self._wake = asyncio.Event()
        self._current: Generation | None = None  # the run this reader started and watches
        self._reading: Job | None = None  # and its page
        self._hinted = False  # the current run was started for a hint: a newer hint waits for it, not cancels it
        self._opened: float | None = None  # when a visitor opened the page being read ahead: it is theirs
        self._adopted = False  # a visitor opened it, and has been shown nothing newer since: its links come next
        self._yielded = False  # the current run was cancelled to give way: its page goes back to the queue
        self._task: asyncio.Task[None] | None = None
        self._check: asyncio.TimerHandle | None = None
        self._closed = False
        self._last: Generation | None = None  # the newest run read ahead, which close() waits for

    @property
    def reading(self) -> str | None:
        """The served URL of the page being read ahead, if one is."""
        run = self._current
        if run is None:
            return None
        return run.runtime.url(url_path(run.key.path) + (f"?{run.key.query}" if run.key.query else ""))

    def shown(self, job: Job, page: StoredPage) -> None:
        """A visitor was shown ``page``: read ahead the pages it links to, instead of what was queued before (and
        instead of the links of a page being read ahead that a visitor opened before). Never raises: reading ahead
        must not cost a visitor the page they asked for."""
        if self.links and not self._closed:
            self._list(lambda: reading_list(self.pages, job, page.html, self.links), job.url, job)

    def index_shown(self) -> None:
        """A visitor was shown the list of sites: read ahead the sites' front pages, in the order it lists them."""
        if self.links and not self._closed and self.pages.model_id is not None:
            self._list(lambda: front_pages(self.pages, self.links), "the list of sites")

    def hinted(self, job: Job) -> None:
        """A visitor's pointer rests on a link to ``job``'s page, or their keyboard's focus is on it: likely their
        next click. It is read ahead next, and a run read ahead from the list gives way to it (a run started for an
        earlier hint finishes first: a pointer crossing a page's links would otherwise cancel one run after another).
        Only a link on the stored page the hint names (``job.parent_url``, as a click names it) is one: a hint writes
        no page that a visitor could not have clicked through to. Never raises: a hint must cost the visitor nothing."""
        if not self.links or self._closed:
            return
        run = self._current
        try:
            if (run is None or run.key != job.key) and (self.pages.versions(job) or self.pages.running(job, 1)):
                return  # stored, or being written for a visitor (looked at first: the cheapest)
            on = self._shown_on(job)
            if on is None:
                return  # no page shown links there
            if run is not None and run.key == job.key:
                self._hinted = True  # the list's run is the hint's now: a newer hint waits for it
                return
        except BadRequest:
            return
        except Exception:
            log.exception("reading ahead %s on a hint failed", job.url)
            return
        self._hint, self._hint_on = job, on
        if run is not None and not self._hinted:
            self.give_way()
        self._start()

    def _shown_on(self, job: Job) -> PageKey | None:
        """The key of the stored page a hint's link is on, where that page (the version its URL names, else the
        newest) links to ``job``'s page; None where it does not, or is no stored page."""
        runtime, url = job.runtime, job.parent_url
        if url is None:
            return None
        location = runtime.locate(url)  # BadRequest: a malformed address
        if location is None:
            return None
        on = self.pages.job(runtime, location)
        page = self.pages.page(on, version(dict(parse_qsl(urlsplit(url).query)).get(VERSION_KEY)))  # BadRequest
        if page is None or all(key != job.key for key, _ in linked_locations(on, page.html, self.pages.store)):
            return None
        return on.key

    def _list(self, listing: Callable[[], list[Job]], shown: str, page: Job | None = None) -> None:
        if page is None or self._hint_on != page.key:
            self._hint = None  # about the links of a page no longer the newest shown (kept for a page just finished)
            # a run an older page's hint started gives way to this page's hints; one a hint on this very page started
            # (shown again: a reload, another visitor) is still waited for by the next hint on it
            self._hinted = False
        self._adopted = False  # the newest page shown is this one (the run stays the visitor's: self._opened)
        try:
            self._queue = deque(linked for linked in listing() if not self.pages.versions(linked))
        except Exception:
            log.exception("reading ahead from %s failed", shown)
            return
        self._lists += 1
        self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())
        self._wake.set()

    def opened(self, generation: Generation) -> None:
        """A visitor joined a run under way: if it is the one read ahead, it is theirs, and its links are read ahead
        next."""
        if generation is self._current:
            self._opened, self._adopted = time.monotonic(), True

    def give_way(self) -> None:
        """A visitor's run needs the engine: cancel the run read ahead, unless a visitor watches it or has just
        opened it (their watch starts a round trip later, with the page's WebSocket), or was handed its placeholder
        and their stream has not connected yet (it waits for them up to ``unclaimed_s``, as any run does); its page
        goes back to the front of the queue."""
        run, opened = self._current, self._opened
        if run is None or run.finished or run.watchers > 1 or run.claimed:  # the reader's own watch is one
            return
        if run.keeping:  # written, and waiting only for the page cache: the engine is free already
            return
        if opened is not None and time.monotonic() - opened < IDLE_CHECK_S:
            return  # _look tries again
        self._yielded = True
        run.cancel()  # the engine's loop stops within one step; the reader's watch ends with an error

    def site_reloaded(self, name: str, runtime: SiteRuntime) -> None:
        """Site ``name`` was loaded again (genui serve --reload) as ``runtime``: what was listed of it goes on under
        the new config where the edit left its page the same (its route's version), and is dropped where not, a page
        nobody will look up again; so is its run read ahead that no visitor watches. (Every reload dropped all of
        them: a stylesheet saved, and nothing was read ahead any more, with nothing in the log.)"""
        kept = [again for job in self._queue if (again := _again(job, name, runtime)) is not None]
        dropped = len(self._queue) - len(kept)
        self._queue = deque(kept)
        if self._hint is not None:
            self._hint = _again(self._hint, name, runtime)
        run, reading = self._current, self._reading
        unwatched = run is not None and not run.finished and run.watchers <= 1 and self._opened is None
        again = _again(reading, name, runtime) if reading is not None else None
        if run is not None and reading is not None and unwatched and again is None:
            run.cancel()  # not given way: the page is not listed again
            dropped += 1
        elif again is not None:
            self._reading = again  # listed again under the new config, should it give way
        if dropped:
            log.info("reading ahead: %d page(s) of site %s dropped, which the edit changed", dropped, name)

    def ended(self) -> None:
        """A visitor's run ended: the engine may be free."""
        self._wake.set()

    async def close(self) -> None:
        self._closed = True
        if self._check is not None:
            self._check.cancel()
        while self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                if (closing := asyncio.current_task()) is not None and closing.cancelling():
                    raise  # whoever is closing the reader was cancelled too
        if self._last is not None:  # its run may still be closing the engine's stream
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._last.cancel()

    # -- the reader's own task ----------------------------------------------------------------------------------

    async def _work(self) -> None:
        while not self._closed:
            self._wake.clear()
            if (self._hint or self._queue) and self.pages.engine is not None and not self.pages.busy():
                # (pages.loaded() wakes it once the engine is there)
                hinted, job = self._hint is not None, self._hint or self._queue.popleft()
                self._hint = None
                try:
                    await self._read(job, hinted)
                except (EngineError, BadRequest, PageWithdrawn):  # refused, too long, or withdrawn: skipped
                    pass
                except Exception:
                    log.exception("reading ahead %s failed", job.url)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(IDLE_CHECK_S if self._queue or self._hint else None):
                    await self._wake.wait()

    async def _read(self, job: Job, hinted: bool = False) -> None:
        if self.pages.sites.get(job.key.site) is not job.runtime:
            return  # listed before its site was loaded again (genui serve --reload): its prompt may be the old one
        if job.key.model != self.pages.model_id:
            return  # listed while the model loaded, under an id the model loaded did not have
        if self.pages.versions(job) or self.pages.running(job, 1) is not None:
            return  # stored or being written meanwhile
        run, lists = self.pages.generation(job, 1, ahead=True), self._lists
        self._current, self._last, self._yielded, self._hinted = run, run, False, hinted
        self._reading = job
        self._opened, self._adopted = None, False
        self._check = asyncio.get_running_loop().call_later(IDLE_CHECK_S, self._look)
        try:
            page = await run.result()  # watched from here on, before anything else runs
        except EngineError:
            if not self._yielded:
                raise
            job = self._reading or job  # under its site's config of now, where a reload kept it
            if self._lists == lists:  # unless a newer page shown says what to read now, again when the engine is free
                if hinted and self._hint is None:
                    self._hint = job  # still the newest hint
                else:
                    self._queue.appendleft(job)
            return
        finally:
            self._current, self._reading, self._hinted = None, None, False
            if self._check is not None:
                self._check.cancel()
        log.info("read ahead %s (%.1f s)", job.url, page.seconds)
        if self._adopted:  # a visitor opened it, and has been shown nothing newer since
            self.shown(job, page)

    def _look(self) -> None:
        """Give way to a visitor's run that is waiting, once no visitor watches the run read ahead (one who opened
        it may have left since the other run started)."""
        if self.pages.busy():
            self.give_way()
        if self._current is not None and not self._closed:
            self._check = asyncio.get_running_loop().call_later(IDLE_CHECK_S, self._look)


def _again(job: Job, name: str, runtime: SiteRuntime) -> Job | None:
    """``job`` under site ``name``'s new config (``runtime``) where its page is the same one, its route's version
    unchanged; None where it is not (or no route takes its URL now). A job of another site is as it was."""
    if job.key.site != name:
        return job
    try:
        location = runtime.locate(job.location.url)
    except BadRequest:
        return None
    if location is None or replace(runtime.page_key(location, job.key.model), posts=job.key.posts) != job.key:
        return None
    return replace(job, runtime=runtime, location=location)
