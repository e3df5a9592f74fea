"""The generation pipeline: routed page -> page cache -> prompt -> engine run, one run per page version.

A ``Job`` is one page of one site with its cache key: what a request needs to look the cache up. Only a miss renders
and fits the prompt (``Pages.prompt``) and starts a ``Generation``; a request for a page version already being
written joins that run, found by its cache key and version, so the page's stream or a client waiting for it builds
no prompt of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from engine.frames import EngineError, TextEngine
from genui.generation import Generation
from genui.prompts import Parent, Post
from genui.routing import BadRequest, Location
from genui.runtime import SiteRuntime
from genui.store import PageKey, Store, StoredPage, StoredPost

# SiteRuntime is re-exported: lab/ imports it from here.
__all__ = ["Job", "NoSuchVersion", "Pages", "Prompt", "SiteRuntime"]

POSTS_IN_PROMPT = 20  # newest posts a thread's prompt carries; all of them are still shown
UNCLAIMED_S = 10.0  # a run nobody comes to watch (a page asked for, its stream never opened) stops after this


class NoSuchVersion(LookupError):
    """``?v=N`` names a version of a page that is neither stored nor being written."""

    def __init__(self, version: int) -> None:
        super().__init__(f"There is no version {version} of this page.")
        self.version = version


@dataclass(frozen=True, slots=True)
class Job:
    """One page of one site as asked for: its location, its cache key and the posts it shows."""

    runtime: SiteRuntime
    location: Location
    key: PageKey
    posts: tuple[StoredPost, ...]
    parent_url: str | None = None  # site-relative URL of the page the click came from, as the client named it

    @property
    def cached(self) -> bool:
        return self.location.route.cache != "none"

    @property
    def url(self) -> str:
        """The page's served URL."""
        return self.runtime.url(self.location.url)


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the model is given for a page: the prompt, the opening its text starts with, and the parent page used."""

    text: str
    opening: str
    parent: Parent | None


class Pages:
    """Everything between a routed URL and a finished page: jobs, the cache, and the generations under way."""

    def __init__(
        self,
        runtimes: list[SiteRuntime],
        store: Store,
        engine: TextEngine | None = None,
        unclaimed_s: float = UNCLAIMED_S,
    ) -> None:
        self.sites = {runtime.site.name: runtime for runtime in runtimes}
        self.store = store
        self.engine = engine  # set at start-up when the app loads the default engine itself
        self.unclaimed_s = unclaimed_s
        self._running: dict[tuple[PageKey, int], Generation] = {}

    def job(self, runtime: SiteRuntime, location: Location, parent_url: str | None = None) -> Job:
        """The job for a routed page. ``parent_url`` is the site-relative URL of the page the click came from."""
        if self.engine is None:
            raise EngineError("no engine is loaded")
        site, route = runtime.site, location.route
        posts = tuple(self.store.posts(site.name, location.path)) if route.posts else ()
        key = PageKey(
            site=site.name,
            path=location.path,
            query=location.query_string,
            model=self.engine.model_id,
            template=runtime.prompts.version(route),
            posts=posts[-1].id if posts else 0,
        )
        return Job(runtime, location, key, posts, parent_url)

    def open(self, job: Job, version: int | None = None, *, write_next: bool = True) -> StoredPage | Generation:
        """What to show for ``version`` of the page (None: the newest): the stored page, or the run writing it.

        A miss on the newest starts the next version (or joins the run writing it). An explicit ``version`` must be
        stored or one past the newest; ``write_next=False`` (a page's own URL with ``?v=N``) only joins a run
        already writing it, so a GET never starts a version nobody asked to regenerate. Raises NoSuchVersion, and
        BadRequest when the prompt cannot fit the model.
        """
        page = self.page(job, version)
        if page is not None:
            return page
        newest = self.versions(job)
        if version is None:
            version = newest + 1
        elif version != newest + 1 or (not write_next and self.running(job, version) is None):
            raise NoSuchVersion(version)
        return self.generation(job, version)

    def page(self, job: Job, version: int | None = None) -> StoredPage | None:
        """The cached page (its newest version when ``version`` is None)."""
        return self.store.page(job.key, version) if job.cached else None

    def versions(self, job: Job) -> int:
        return self.store.versions(job.key) if job.cached else 0

    def generation(self, job: Job, version: int) -> Generation:
        """The run writing ``version`` of the page: the one under way, or a new one (its prompt fitted first)."""
        assert self.engine is not None
        slot = (job.key, version)
        running = self._running.get(slot)
        if running is None:
            prompt = self.prompt(job)
            request = job.runtime.request(prompt.text, version - 1, prompt.opening)  # version n is seed n - 1
            store = self.store if job.cached else None
            running = Generation(
                job.runtime, job.key, version, request, prompt.parent, self.engine, store, self._ended, self.unclaimed_s
            )
            self._running[slot] = running
        return running

    def running(self, job: Job, version: int) -> Generation | None:
        """The run writing ``version`` of the page, if one is under way."""
        return self._running.get((job.key, version))

    async def close(self) -> None:
        """Cancel every run under way (at shutdown)."""
        tasks = [generation.cancel() for generation in list(self._running.values())]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def prompt(self, job: Job) -> Prompt:
        """The prompt with as many of the newest posts (at most POSTS_IN_PROMPT) as the model can read.

        Long replies must not make a thread unwritable: the oldest posts leave the prompt first (the page still
        shows them all), then the parent. Raises BadRequest when the URL's own text is already too long.
        """
        assert self.engine is not None
        engine, runtime, location = self.engine, job.runtime, job.location
        route, params, query = location.route, location.params, location.query
        parent = self._parent(runtime, job.parent_url, location) if "parent" in route.context else None
        posts = [Post(p.user, p.text) for p in job.posts]

        def texts(count: int, parent: Parent | None) -> Prompt | None:
            newest = posts[len(posts) - count :] if count else []
            prompt = runtime.prompts.render(route, params, query, parent=parent, posts=newest)
            opening = runtime.prompts.opening(route, params, query, parent=parent, posts=newest)
            return Prompt(prompt, opening, parent) if engine.fits(runtime.request(prompt, 0, opening)) else None

        most = min(len(posts), POSTS_IN_PROMPT)
        if (whole := texts(most, parent)) is not None:
            return whole
        if texts(0, parent) is None:
            if parent is None or (bare := texts(0, None)) is None:
                raise BadRequest("this address asks for a page longer than the model can read; shorten it")
            return bare
        low, high = 0, most - 1  # texts(low) fits, texts(most) does not: the largest count that fits
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if texts(middle, parent) is not None else (low, middle - 1)
        fitted = texts(low, parent)
        assert fitted is not None
        return fitted

    def _ended(self, generation: Generation) -> None:
        slot = (generation.key, generation.version)
        if self._running.get(slot) is generation:
            del self._running[slot]

    def _parent(self, runtime: SiteRuntime, parent_url: str | None, here: Location) -> Parent | None:
        if not parent_url:
            return None
        try:
            location = runtime.locate(parent_url)
        except BadRequest:
            return None
        if location is None or location.url == here.url:
            return None
        title = self.store.title(runtime.site.name, location.path, location.query_string)
        return Parent(location.url, title) if title else None
