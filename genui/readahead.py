"""Reading ahead: while no visitor waits for the engine, write the pages the newest page shown links to.

A page takes seconds to write on a laptop's CPU, and a visitor spends longer than that reading one. So once a
visitor is shown a page, the first few pages it links to that are not stored yet are written one at a time, in the
order the page shows them (the model's links, then the site's navigation below them), each as the click would write
it (the same prompt, parent and seed: the same page), and stored. A click on one of them is then a cache hit, served
whole at once.

Reading ahead never keeps a visitor waiting. It starts a page only while no other run is under way, and when a
visitor's run starts it leaves the page it is writing, whose run stops within one denoising step (unless a visitor
opened that very page and watches it land), to start it again once the engine is free. Only the newest page shown
says what to read ahead: a visitor who moves on takes it along.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from engine.frames import EngineError
from genui.navigation import sections
from genui.routing import BadRequest
from genui.store import PageKey, StoredPage

if TYPE_CHECKING:
    from genui.generation import Generation
    from genui.pages import Job, Pages

log = logging.getLogger("genui")

IDLE_CHECK_S = 1.0  # how often a reader kept waiting looks again (variations end without telling it)


class _Links(HTMLParser):
    """The targets of genui's navigation links (``hx-get``) in a finished page, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        url = dict(attrs).get("hx-get")
        if tag == "a" and url:
            self.urls.append(url)


def linked_urls(html: str) -> list[str]:
    """The served URLs a finished page links to with genui's navigation, first first, each once."""
    parser = _Links()
    parser.feed(html)
    parser.close()
    return list(dict.fromkeys(parser.urls))


def reading_list(pages: Pages, job: Job, html: str, links: int) -> list[Job]:
    """The first ``links`` pages a page's ``html`` links to, as the page shows them: the model's links, then the
    site's navigation below the page; other pages of cached routes only, each once, each with the page as its
    parent, as a click on the link would have it. Stored pages count too, so that showing a page again never
    reaches further down its links."""
    runtime = job.runtime
    seen: set[PageKey] = {job.key}
    listed: list[Job] = []

    def shown_links() -> Iterator[str]:
        yield from linked_urls(html)
        for section in sections(runtime, job.location, pages.store, job.key.model):  # the navigation below the page
            yield from (link.url for link in section.links)

    for url in shown_links():
        if len(listed) == links:
            break
        if not url.startswith(runtime.mount + "/"):
            continue
        try:
            location = runtime.locate(url.removeprefix(runtime.mount).partition("#")[0])
        except BadRequest:
            continue
        if location is None or location.route.cache == "none":
            continue
        linked = pages.job(runtime, location, parent_url=job.location.url)
        if linked.key not in seen:
            seen.add(linked.key)
            listed.append(linked)
    return listed


class ReadAhead:
    """Writes the first ``links`` pages linked from the newest page shown, one at a time, while the engine is idle."""

    def __init__(self, pages: Pages, links: int) -> None:
        if links < 0:
            raise ValueError(f"links must be 0 (off) or more, got {links}")
        self.pages, self.links = pages, links
        self._queue: deque[Job] = deque()
        self._wake = asyncio.Event()
        self._current: Generation | None = None  # the run this reader started and is watching
        self._watching: asyncio.Task[StoredPage] | None = None
        self._adopted = False  # a visitor opened the page being read ahead: its links come next
        self._task: asyncio.Task[None] | None = None

    def shown(self, job: Job, page: StoredPage) -> None:
        """A visitor was shown ``page``: read ahead the pages it links to, instead of what was queued before."""
        if not self.links:
            return
        listed = reading_list(self.pages, job, page.html, self.links)
        self._queue = deque(linked for linked in listed if not self.pages.versions(linked))
        self._ensure_running()
        self._wake.set()

    def opened(self, generation: Generation) -> None:
        """A visitor opened a page being written: if it is the one read ahead, its links are read ahead next."""
        if generation is self._current:
            self._adopted = True

    def started(self, generation: Generation) -> None:
        """A run started: a visitor's makes the reader give way (it starts again when the engine is free)."""
        if generation is not self._current:
            self.give_way()

    def give_way(self) -> None:
        """Stop watching the page being read ahead; it goes back to the front of the queue."""
        if self._watching is not None and not self._watching.done() and not self._adopted:
            self._watching.cancel()

    def ended(self) -> None:
        """A visitor's run ended: the engine may be free."""
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the reader's own task ----------------------------------------------------------------------------------

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while True:
            self._wake.clear()
            if self._queue and not self.pages.busy():
                job = self._queue.popleft()
                with contextlib.suppress(EngineError, BadRequest):  # a page that cannot be written is skipped
                    await self._read(job)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_CHECK_S if self._queue else None)

    async def _read(self, job: Job) -> None:
        if self.pages.versions(job) or self.pages.running(job, 1) is not None:
            return  # stored or being written meanwhile
        self._current, self._adopted = None, False
        try:
            self._current = self.pages.generation(job, 1, ahead=True)
            self._watching = asyncio.ensure_future(self._current.result())
            try:
                page = await self._watching
            except asyncio.CancelledError:
                if (task := asyncio.current_task()) is not None and task.cancelling():
                    raise  # the reader itself is closing (the run loses its watcher with it)
                self._queue.appendleft(job)  # it gave way: again when the engine is free
                return
            log.info("read ahead %s (%.1f s)", job.url, page.seconds)
            if self._adopted:
                self.shown(job, page)
        finally:
            self._current, self._watching = None, None
