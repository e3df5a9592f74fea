"""The generation pipeline: URL -> prompt -> page cache -> engine -> sanitise -> links, one run per page version.

A ``Job`` is one page of one site, with everything its cache key and prompt depend on. ``Pages.generation`` joins
the run already writing that page version or starts one; whoever watches a ``Generation`` sees sanitised snapshots
of the page as it denoises. When the last watcher leaves before the end, the run is cancelled, and the engine's
stream is closed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from html.parser import HTMLParser
from urllib.parse import parse_qsl

from engine.frames import CanvasFrame, DoneFrame, EngineError, GenerationRequest, StepFrame, TextEngine
from genui.links import LinkRewriter
from genui.prompts import Parent, Post, PromptRenderer
from genui.routing import BadRequest, Location, SiteRouter
from genui.sanitize import sanitize_html
from genui.sites import Site
from genui.store import PageKey, Store, StoredPage, StoredPost

POSTS_IN_PROMPT = 20  # newest posts a thread's prompt carries; all of them are still shown
log = logging.getLogger("genui")


def first_heading(html: str) -> str:
    """The text of the first ``<h1>`` in ``html`` ("" when there is none): the page's title."""
    finder = _HeadingFinder()
    finder.feed(html)
    finder.close()
    return " ".join("".join(finder.text).split())


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
class SiteRuntime:
    """A site as served: its config, router, prompt renderer and the mount point its links are rewritten for."""

    site: Site
    mount: str  # "" when the site is served at /, else "/name"
    router: SiteRouter
    prompts: PromptRenderer
    links: LinkRewriter

    @classmethod
    def build(cls, site: Site, mount: str) -> SiteRuntime:
        router = SiteRouter(site)
        return cls(site, mount, router, PromptRenderer(site), LinkRewriter(mount, router.link_target))

    def locate(self, site_url: str) -> Location | None:
        """The page at a site-relative URL, query included (``/search?q=lisp``). Raises BadRequest if malformed."""
        path, _, query = site_url.partition("?")
        return self.router.resolve(path, parse_qsl(query, keep_blank_values=True))

    def url(self, site_url: str) -> str:
        """The served URL of a site-relative URL."""
        return self.mount + site_url

    def request(self, prompt: str, seed: int, opening: str = "") -> GenerationRequest:
        """What the engine is asked for one page of this site."""
        model = self.site.model
        return GenerationRequest(
            prompt=prompt,
            max_tokens=model.tokens,
            max_steps=model.steps,
            seed=seed,
            opening=opening,
            t_max=model.t_max,
            t_min=model.t_min,
            entropy_bound=model.entropy_bound,
        )

    def direct_request(self, location: Location, seed: int, opening: bool = True) -> GenerationRequest:
        """The request for a page opened directly, with no page it came from and no posts (``genui render``, the
        quality report); ``opening=False`` leaves out the route's opening, so the model writes the whole page."""
        route, params, query = location.route, location.params, location.query
        text = self.prompts.opening(route, params, query) if opening else ""
        return self.request(self.prompts.render(route, params, query), seed, text)

    def render(self, text: str, *, draft: bool = False) -> str:
        """Model text -> HTML fit for the page: sanitised, then links rewritten."""
        # No images from the model: a same-site <img src> is a GET the browser sends by itself, and every GET of a
        # site route may start a generation; nothing in the example sites needs one.
        if draft:
            return sanitize_html(text, allow_images=False, draft=True)  # drafts keep no link targets to rewrite
        return self.links(sanitize_html(text, allow_images=False))


@dataclass(frozen=True, slots=True)
class Job:
    """One page of one site, with everything its cache key and its prompt depend on."""

    runtime: SiteRuntime
    location: Location
    key: PageKey
    prompt: str
    posts: tuple[StoredPost, ...]
    parent: Parent | None
    opening: str = ""  # the route's opening, rendered: the page starts with it

    @property
    def cached(self) -> bool:
        return self.location.route.cache != "none"


@dataclass(frozen=True)
class Snapshot:
    """What a watcher sees of a generation: the page so far, sanitised; ``page`` or ``error`` once it has ended."""

    text: str = ""  # the model's text so far; sanitised into ``html`` only if a watcher shows it
    render: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    canvas: int = 1  # 1-based canvas being written
    step: int = 0  # denoising step within it; 0 before the first
    canvases: int | None = None  # canvases the page may take, when the engine says its canvas length
    page: StoredPage | None = None
    error: EngineError | None = None

    @property
    def finished(self) -> bool:
        return self.page is not None or self.error is not None

    @cached_property
    def html(self) -> str:
        # Lazy: a plain GET waits only for the final page, so its drafts are never sanitised at all.
        return self.render(self.text) if self.render is not None and self.text else ""


class Generation:
    """One engine run for one page version, shared by everyone watching it."""

    def __init__(
        self, job: Job, version: int, engine: TextEngine, store: Store, on_end: Callable[[Generation], None]
    ) -> None:
        self.job, self.version = job, version
        self._engine, self._store, self._on_end = engine, store, on_end
        length = getattr(engine, "canvas_length", None)  # engines that say it let the progress line say "of N"
        budget = job.runtime.site.model.tokens
        self._snapshot = Snapshot(
            canvases=-(-budget // length) if isinstance(length, int) and length > 0 else None,
            render=functools.partial(job.runtime.render, draft=True),
        )
        self._changed = asyncio.Event()
        self._ended = asyncio.Event()
        self._watchers = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def seed(self) -> int:
        return self.version - 1  # version 1 is seed 0; each regeneration the next seed

    async def watch(self, interval: float = 0.0) -> AsyncGenerator[Snapshot, None]:
        """Snapshots until the end; a slow watcher skips to the newest. Close it (aclosing) when leaving early.

        ``interval`` seconds at least pass between two unfinished snapshots (the ones between are skipped), but the
        last one comes as soon as it is there: every shown draft costs a sanitiser pass and a browser swap, and a
        fast engine makes far more of them than anyone can watch.
        """
        self._watchers += 1
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
                    await changed.wait()
        finally:
            self._watchers -= 1
            if self._watchers == 0 and not self._snapshot.finished:
                self._on_end(self)  # at once: a visitor arriving while the task winds down must start a fresh run
                self._task.cancel()

    async def result(self) -> StoredPage:
        """Watch to the end: the stored page, or the engine's error raised."""
        async with contextlib.aclosing(self.watch()) as snapshots:
            async for snapshot in snapshots:
                if snapshot.error is not None:
                    raise snapshot.error
                if snapshot.page is not None:
                    return snapshot.page
        raise EngineError("the generation ended without a page")  # pragma: no cover - watch() always ends finished

    def _publish(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._changed.set()
        self._changed = asyncio.Event()
        if snapshot.finished:
            self._ended.set()

    async def _run(self) -> None:
        job = self.job
        request = job.runtime.request(job.prompt, self.seed, job.opening)
        finished: dict[int, str] = {}  # canvas index -> final text
        frames = self._engine.stream(request)
        try:
            async for frame in frames:
                if isinstance(frame, StepFrame):
                    stable = "".join(text for index, text in sorted(finished.items()) if index < frame.canvas)
                    text = stable + frame.text
                    self._publish(replace(self._snapshot, text=text, canvas=frame.canvas + 1, step=frame.step))
                elif isinstance(frame, CanvasFrame):
                    finished[frame.canvas] = frame.text
                    text = "".join(text for _, text in sorted(finished.items()))
                    self._publish(replace(self._snapshot, text=text, canvas=frame.canvas + 1, step=frame.steps))
                elif isinstance(frame, DoneFrame):
                    self._publish(replace(self._snapshot, page=self._finish(frame)))
                    return
            raise EngineError("the engine's stream ended without a final frame")
        except EngineError as err:
            self._publish(replace(self._snapshot, error=err))
        except asyncio.CancelledError:
            self._publish(replace(self._snapshot, error=EngineError("the generation was cancelled")))
            raise
        except Exception as err:  # an engine bug must still end every watcher's wait
            log.exception("generation of %s failed", job.location.url)
            self._publish(replace(self._snapshot, error=EngineError(f"generation failed: {err}")))
        finally:
            close = getattr(frames, "aclose", None)
            if close is not None:
                await close()  # stops the engine's own loop within one step when we were cancelled
            self._on_end(self)

    def _finish(self, done: DoneFrame) -> StoredPage:
        html = self.job.runtime.render(done.text)
        title = first_heading(html)
        if not self.job.cached:
            return StoredPage(self.job.key, self.version, self.seed, title, html, done.seconds, time.time())
        return self._store.save_page(self.job.key, self.version, self.seed, title, html, done.seconds)


class Pages:
    """Everything between a routed URL and a finished page: jobs, the cache, and the generations under way."""

    def __init__(self, runtimes: list[SiteRuntime], store: Store, engine: TextEngine | None = None) -> None:
        self.sites = {runtime.site.name: runtime for runtime in runtimes}
        self.store = store
        self.engine = engine  # set at start-up when the app loads the default engine itself
        self._running: dict[tuple[PageKey, int], Generation] = {}

    def job(self, runtime: SiteRuntime, location: Location, parent_url: str | None = None) -> Job:
        """The job for a routed page. ``parent_url`` is the site-relative URL of the page the click came from."""
        if self.engine is None:
            raise EngineError("no engine is loaded")
        site, route = runtime.site, location.route
        posts = tuple(self.store.posts(site.name, location.path)) if route.posts else ()
        parent = self._parent(runtime, parent_url, location) if "parent" in route.context else None
        key = PageKey(
            site=site.name,
            path=location.path,
            query=location.query_string,
            model=self.engine.model_id,
            template=runtime.prompts.version(route),
            posts=posts[-1].id if posts else 0,
        )
        prompt, opening = self._fitted(runtime, location, parent, [Post(p.user, p.text) for p in posts])
        return Job(runtime, location, key, prompt, posts, parent, opening)

    def _fitted(
        self, runtime: SiteRuntime, location: Location, parent: Parent | None, posts: list[Post]
    ) -> tuple[str, str]:
        """The prompt and opening, with as many of the newest posts (at most POSTS_IN_PROMPT) as the model can read.

        Long replies must not make a thread unwritable: the oldest posts leave the prompt first (the page still
        shows them all), then the parent. Raises BadRequest when the URL's own text is already too long.
        """
        assert self.engine is not None
        engine, route, params, query = self.engine, location.route, location.params, location.query

        def texts(count: int, parent: Parent | None) -> tuple[str, str] | None:
            newest = posts[len(posts) - count :] if count else []
            prompt = runtime.prompts.render(route, params, query, parent=parent, posts=newest)
            opening = runtime.prompts.opening(route, params, query, parent=parent, posts=newest)
            return (prompt, opening) if engine.fits(runtime.request(prompt, 0, opening)) else None

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

    def page(self, job: Job, version: int | None = None) -> StoredPage | None:
        """The cached page (its newest version when ``version`` is None)."""
        return self.store.page(job.key, version) if job.cached else None

    def versions(self, job: Job) -> int:
        return self.store.versions(job.key) if job.cached else 0

    def generation(self, job: Job, version: int) -> Generation:
        """The run writing ``version`` of the page: the one under way, or a new one."""
        assert self.engine is not None
        slot = (job.key, version)
        running = self._running.get(slot)
        if running is None:
            running = Generation(job, version, self.engine, self.store, self._ended)
            self._running[slot] = running
        return running

    def running(self, job: Job, version: int) -> Generation | None:
        """The run writing ``version`` of the page, if one is under way."""
        return self._running.get((job.key, version))

    def _ended(self, generation: Generation) -> None:
        slot = (generation.job.key, generation.version)
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
