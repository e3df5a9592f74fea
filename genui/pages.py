"""The generation pipeline: routed page -> page cache -> prompt -> engine run, one run per page version.

A ``Job`` is one page of one site with its cache key: what a request needs to look the cache up. Only a miss renders
and fits the prompt (``Pages.prompt``) and starts a ``Generation``; a request for a page version already being
written joins that run, found by its cache key and version, so the page's stream or a client waiting for it builds
no prompt of its own.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from engine.frames import EngineError, EngineOverloaded, Frame, GenerationRequest, TextEngine
from genui.cache import counted
from genui.edits import (
    VARIANTS,
    EditingEngine,
    Infill,
    editing,
    fitted_before,
    model_text,
    region_tokens,
    reply_tokens,
    with_instruction,
)
from genui.generation import WHOLE, Generation, Splice, first_heading
from genui.limits import PostRate
from genui.metrics import Metrics
from genui.prompts import Parent, Post, PromptError
from genui.readahead import ReadAhead
from genui.routing import BadRequest, Location
from genui.runtime import SiteRuntime
from genui.sections import section
from genui.seen import Seen
from genui.sites import Route
from genui.store import PageKey, PageWithdrawn, Store, StoredPage, StoredPost, VersionTaken, when_free
from genui.variations import Variations, VariationSets, wait_cancelled
from genui.words import WORDS, Refusal

log = logging.getLogger("genui")
cache_log = logging.getLogger("genui.cache")  # shown by genui serve (genui.logs)

# SiteRuntime is re-exported: lab/ imports it from here.
__all__ = ["EngineLoading", "Job", "NoSuchVersion", "Pages", "Prompt", "SiteRuntime", "TooManyRuns"]


R = TypeVar("R", Generation, Variations)

BUSY = "This page is being written right now; try again when it is finished."
INLINE_POSTS = (
    '<ol class="genui-postlist genui-inline">'  # where a thread's readers' posts begin (templates/parts.html)
)

POSTS_IN_PROMPT = 20  # newest posts a thread's prompt carries; all of them are still shown
CUT = " …"  # ends a post cut to the length the model can read
LOADING_RETRY_S = 5.0  # what a request answered while the model loads is told to wait before it asks again
UNREACHED_RETRY_S = 15.0  # the same, while the model's weights could not be fetched and genui tries again (genui.app)
UNCLAIMED_S = 10.0  # a run nobody comes to watch (a page asked for, its stream never opened) stops after this
DRAIN_S = 8.0  # seconds a stopping server gives the pages under way to finish: within docker stop's 10 s
STARTED_KEPT = 4096  # page versions whose runs this server started: a waiting client may start one again
# What a run writes: a whole page, a thread's replies in place, one section, or a thread before its readers' posts
# anew (a Regenerate's, its conversation kept); each started again only as what it was.
Run = Literal["whole", "replies", "rewrite", "regenerate"]
REWRITE_STOPPED = "The rewrite of a section stopped before it was finished: nothing changed."
REGENERATE_STOPPED = "The thread's new version stopped before it was finished: nothing changed."


class EngineLoading(EngineOverloaded):
    """The app answers before its model has loaded: a page asked for meanwhile is refused, to be asked again.
    ``unreached``: why the last try could not fetch its weights (no network), while genui tries again (genui.app)."""

    def __init__(self, unreached: str | None = None) -> None:
        said = f"the model's weights could not be fetched ({unreached}); genui tries again" if unreached else ""
        EngineError.__init__(self, said or "the model is still loading")
        self.unreached = unreached
        self.retry_after = UNREACHED_RETRY_S if unreached else LOADING_RETRY_S


# An app mounted in another ASGI app whose lifespan does not run it (Starlette runs no mounted app's own): it loads no
# model, and keeps no notes of pages shown nor closes its cache at shutdown (an embedding developer's review).
NOT_STARTED = (
    "genui's app has not started: an app that mounts it must run its lifespan (docs/framework.md, \"In another ASGI"
    ' app")'
)


class TooManyRuns(Refusal):
    """A client asked for another page to be written while ``limit`` of its own were still being written: a 429
    with Retry-After, so that one client (a crawler, a script, a tab-happy visitor) cannot take the engine from all
    the others."""

    def __init__(self, limit: int) -> None:
        seconds = math.ceil(LOADING_RETRY_S)
        said = "too_many_runs_one" if limit == 1 else "too_many_runs"
        retry = {"Retry-After": str(seconds)}
        super().__init__(429, "too_many_heading", said, retry, later=f"{said}_later", n=limit, seconds=seconds)


class RouteTooLong(EngineError):
    """A route's own prompt and opening, at its shortest address, are longer than the model reads: every page of the
    route fails so (a 500 naming the fix for its developer, logged, and logged for each such route once the model
    loads), where another route's pages are written."""


def too_long(runtime: SiteRuntime, route: Route, fix: str) -> str:
    return f"site {runtime.site.name}: the prompt and opening for {route.pattern} are too long at any address: {fix}"


def how_to_fit(engine: TextEngine, request: GenerationRequest) -> str:
    """What a site's developer changes so that ``request``, which the engine does not fit, fits: a page longer than
    the model reads with no prompt at all wants fewer tokens, or another model (the model's context is short); an
    opening that fills the page's tokens by itself, more of them; a prompt and page longer than the model reads, a
    shorter prompt or fewer tokens."""
    bare = replace(request, prompt="", opening="", gaps=())
    if not engine.fits(bare):  # the model's context is shorter than the page itself: no site edit but fewer tokens
        return (
            f"the page's {request.max_tokens} tokens, written in whole canvases, are more than the model"
            f" ({engine.model_id}) can read with no prompt at all; lower model.tokens (site.toml), or run a model that"
            " reads more"
        )
    if (request.opening or request.gaps) and not engine.fits(replace(request, prompt="")):
        return (
            f"the opening leaves the model no room in the page's {request.max_tokens} tokens; raise model.tokens, or"
            " shorten the route's opening (site.toml)"
        )
    return (
        "they are longer than the model can read; shorten the route's templates or the site's brief, or lower"
        " model.tokens (site.toml)"
    )


PARENTS_KEPT = 4096  # pages whose first parent is kept for a request of them that names none (Pages._parents)


class ServerStopping(Exception):
    """The server is stopping (SIGTERM): a request still waiting for a page is answered now, to ask again later."""


class StillWriting(Exception):
    """A request waiting for a page (a wait URL) has waited WAIT_ANSWER_S: it is answered, to ask again at once, before
    a reverse proxy that has heard nothing cuts it (nginx's 504 after 60 s); the run waits for it meanwhile."""


class NoSuchVersion(LookupError):
    """``?v=N`` names a version of a page that is neither stored nor being written."""

    def __init__(self, version: int, stopped: str = "") -> None:
        super().__init__(stopped or WORDS["no_version"].format(n=version))
        self.version, self.stopped = version, stopped  # stopped: why the run writing it ended unstored


@dataclass(frozen=True, slots=True)
class Job:
    """One page of one site as asked for: its location, its cache key and the posts it shows.

    Readers' posts are not part of the key: a reply adds a version of the thread (its replies appended in place)."""

    runtime: SiteRuntime
    location: Location
    key: PageKey
    posts: tuple[StoredPost, ...]
    parent_url: str | None = None  # site-relative URL of the page the click came from, as the client named it
    client: str | None = None  # who asked (the client's address), whose runs count against runs_per_client
    # the site-relative URL of the page on screen that this request's answer replaces (an htmx click), whose run, if
    # the client's, ends as the answer lands: not counted against the client's runs meanwhile
    leaving: str | None = None

    @property
    def cached(self) -> bool:
        return self.location.route.cache != "none"

    @property
    def url(self) -> str:
        """The page's served URL."""
        return self.runtime.url(self.location.url)


def _carried_between(source: PageKey, key: PageKey) -> str:
    """Where a thread was carried from and to, as the log says it: another model, or an earlier config."""
    if source.model != key.model:
        return f"model {source.model} to this model"
    return "an earlier config of its site to this config"


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
        read_ahead: int = 0,
        runs_per_client: int = 0,
        posts_per_minute: int = 0,
    ) -> None:
        if runs_per_client < 0:
            raise ValueError(f"runs_per_client must be 0 (no limit) or more, got {runs_per_client}")
        self.sites = {runtime.site.name: runtime for runtime in runtimes}
        self.runs_per_client = runs_per_client  # runs one client may have under way at once (0: no limit)
        self.post_rate = PostRate(posts_per_minute)  # readers' posts one client may store a minute (0: no limit)
        # the page each page was first asked from (its parent), for a request of it that names none: Back or Forward
        # to a page left unfinished loads it again with no Referer, and it was written with no parent
        self._parents: OrderedDict[PageKey, str] = OrderedDict()
        # set as the server begins to stop: requests waiting for a page (no-script clients' wait URL) answer at once
        self.stopping = asyncio.Event()
        # whether visitors may write a page's next version (Regenerate, a rewrite, variations): create_app(edits=)
        self.edits = True
        # the path every URL of the server is under ("" or "/demo": create_app(base_path=), genui serve --base-path)
        self.base = runtimes[0].base if runtimes else ""
        self._clients: dict[Generation | Variations, str] = {}  # runs under way that a client started
        self.loading = False  # the app is loading its engine in the background (genui.app)
        self.started = False  # the app's lifespan has begun: it loads its engine, keeps its notes, closes the cache
        self.load_error: str | None = None  # why it did not load
        self.unreached: str | None = None  # while loading: why the last try could not reach its weights (genui.app)
        self.expected_model: str | None = None  # the id of the model loading, known before its weights (genui.app)
        self.config_errors: dict[str, str] = {}  # sites whose edited config failed to load (genui/reload.py)
        self.store = store
        self.engine = engine  # set at start-up when the app loads the default engine itself
        self.unclaimed_s = unclaimed_s
        self._running: dict[tuple[PageKey, int], Generation] = {}
        # A page of a route never cached, finished before the stream of the placeholder handed out for it connected:
        # held for that stream (until unclaimed_s passes), which would otherwise find nothing and write it again.
        self._held: dict[tuple[PageKey, int], Generation] = {}
        # the page versions runs were started for here and what each run was, newest last: a wait URL or a stream
        # may start the same run again
        self._started: OrderedDict[tuple[PageKey, int], Run] = OrderedDict()
        self._failed: dict[tuple[PageKey, int], EngineOverloaded] = {}  # of those, the ones refused by a busy engine
        self._ahead: set[Generation] = set()  # the runs under way that read ahead (genui/readahead.py)
        self._joined: set[Generation] = set()  # those of them a visitor came to: theirs in the metrics
        self.variations = VariationSets()
        self.reader = ReadAhead(self, read_ahead)  # pages linked from the newest page shown, written while idle
        self.seen = Seen(store)  # when each cached page was last shown (genui cache prune --unseen)
        self.metrics = Metrics(self)  # /_genui/metrics

    @property
    def model_id(self) -> str | None:
        """The model the page cache is keyed on: the engine's, or, while it loads, the one being loaded if known."""
        return self.engine.model_id if self.engine is not None else self.expected_model

    def status(self) -> str:
        """The server's state, as /_genui/health says it: ``ready`` to write pages; ``loading`` its model; ``failed``
        (the model did not load, the engine stopped for good, or the page cache's file was deleted or replaced);
        ``stopping``, once the server has begun to stop (a load balancer sends no one new to it)."""
        if self.stopping.is_set():
            return "stopping"
        if self.store.gone() is not None:  # what it would store is lost: the operator restarts
            return "failed"
        if self.engine is not None:
            return "ready" if getattr(self.engine, "failure", None) is None else "failed"
        return "loading" if self.loading else "failed"

    def loaded(self, engine: TextEngine) -> None:
        """The engine is ready: pages are written from now on, and reading ahead starts on what was listed."""
        self.engine, self.expected_model = engine, None
        self.reader.ended()

    def ready(self) -> TextEngine:
        """The engine, or the error every page that needs it gets: EngineLoading while it loads."""
        if self.engine is not None:
            return self.engine
        if self.loading:
            raise EngineLoading(self.unreached)
        if not self.started:
            raise EngineError(NOT_STARTED)
        raise EngineError(f"the model did not load: {self.load_error}" if self.load_error else "no model is loaded")

    def job(
        self,
        runtime: SiteRuntime,
        location: Location,
        parent_url: str | None = None,
        client: str | None = None,
        leaving: str | None = None,
    ) -> Job:
        """The job for a routed page. ``parent_url`` is the site-relative URL of the page the click came from;
        ``client`` who asked (None: genui itself), whose runs count against ``runs_per_client``; ``leaving`` the
        page on screen that the answer replaces (Job.leaving).

        While the model loads, a job can be had when its id is known (``expected_model``): pages already cached are
        shown then, and what needs the engine raises EngineLoading."""
        model = self.model_id
        if model is None:
            self.ready()  # raises: no engine, and no id to look the cache up with
        assert model is not None
        return self._job(runtime, location, model, parent_url, client, leaving)

    def reply_form(self, runtime: SiteRuntime, location: Location) -> Job:
        """A thread with its posts, to show a refused reply's form: the job, or before the model is named (when
        ``job`` raises) one whose key names no model, which no cached page has (a refused reply looks its thread up
        only where a model is named)."""
        return self._job(runtime, location, self.model_id or "", None, None)

    def _job(
        self,
        runtime: SiteRuntime,
        location: Location,
        model: str,
        parent_url: str | None,
        client: str | None,
        leaving: str | None = None,
    ) -> Job:
        site, route = runtime.site, location.route
        posts = tuple(self.store.posts(site.name, location.path)) if route.posts else ()
        key = runtime.page_key(location, model)
        if "parent" in route.context:
            if parent_url:
                self._parents.setdefault(key, parent_url)  # the first one asked from: the page as its click wrote it
                self._parents.move_to_end(key)
                while len(self._parents) > PARENTS_KEPT:
                    self._parents.popitem(last=False)
            else:
                parent_url = self._parents.get(key)
        return Job(runtime, location, key, posts, parent_url, client, leaving)

    def open(
        self, job: Job, version: int | None = None, *, write_next: bool = True, placeholder: bool = False
    ) -> StoredPage | Generation:
        """What to show for ``version`` of the page (None: the newest): the stored page, or the run writing it.

        A miss on the newest starts the next version (or joins the run writing it). An explicit ``version`` must be
        stored or one past the newest. The first version is written as the page's own URL would write it; a later
        one only where this server started a run for it before (Regenerate, a rewrite, a thread's replies) that
        ended unstored: the wait URL, the stream and the page's own URL with ``?v=N`` (Forward, or a reload, after
        leaving a Regenerate unfinished) write a whole page's version again, but no GET (a crawler, another site's
        ``<img>``) starts a version nobody asked to regenerate. ``write_next=False`` (a page's own URL with
        ``?v=N``) writes no first version: it only joins a run writing one. ``placeholder``:
        the caller hands out the run's placeholder, whose stream connects later (Generation.claim). Raises
        NoSuchVersion, and BadRequest when the prompt cannot fit the model.
        """
        shown = self._open(job, version, write_next, placeholder)
        if isinstance(shown, StoredPage):
            self.reader.shown(job, shown)
            self.seen.shown(job.key, shown.version)
        return shown

    def _open(self, job: Job, version: int | None, write_next: bool, placeholder: bool) -> StoredPage | Generation:
        newest = self.versions(job)
        if version is None and (splicing := self.running(job, newest + 1)) is not None and not splicing.splice.whole:
            if placeholder:
                splicing.claim()
            return splicing  # a thread's replies or a section being written in place: everyone watches it land
        page = self.page(job, version)
        if page is not None:
            return page
        held = self._held.pop((job.key, version or newest + 1), None)
        if not placeholder and held is not None:
            return held  # a page never cached, written before its stream came: that stream's
        # (handing out a placeholder, the page held for a stream that never came is dropped: the placeholder's stream
        # is to watch the run it names, which a held page would take the place of, that run left unwatched)
        if version is None:
            version = newest + 1
        elif version != newest + 1 or (
            self.running(job, version) is None
            and not ((write_next and newest == 0) or self._started.get((job.key, version)) == "whole")
        ):
            raise self._unwritten(job.key, version)
        return self.generation(job, version, placeholder=placeholder)

    def written_whole(self, job: Job, version: int) -> bool:
        """Whether this server started a run writing ``version`` of the page whole (a Regenerate's, a first visit's),
        which a GET of the version's own URL writes again when it ended unstored (``open``)."""
        return self._started.get((job.key, version)) == "whole"

    def _unwritten(self, key: PageKey, version: int) -> Exception:
        """What a request for ``version``, neither stored nor being written, is told. A rewrite whose run ended
        unstored is not written again as a whole page: its watchers (the ws extension reconnects when a socket drops)
        hear that it stopped, or that the engine was busy when it was."""
        run = self._started.get((key, version))
        if run not in ("rewrite", "regenerate"):
            return NoSuchVersion(version)
        # told once: a later request (the address the rewrite pushed, reloaded) hears that it stopped, not "busy,
        # try again" for ever about a version nothing will write
        stopped = REWRITE_STOPPED if run == "rewrite" else REGENERATE_STOPPED
        return self._failed.pop((key, version), None) or NoSuchVersion(version, stopped)

    def page(self, job: Job, version: int | None = None) -> StoredPage | None:
        """The cached page (its newest version when ``version`` is None), its links for the site's mount. A thread
        with readers' posts stored under an earlier config or model only is carried first (``versions``), so that
        a reply or a post waiting for one is answered onto its conversation at the first visit."""
        page = self.store.page(job.key, version) if job.cached else None
        if page is None and job.cached and job.location.route.posts and self.versions(job):  # carried just now
            page = self.store.page(job.key, version)
        return None if page is None else job.runtime.remounted(page)

    def versions(self, job: Job) -> int:
        """How many versions of the page are stored. A thread with readers' posts stored under an earlier config or
        model only is carried to this one first (Store.carry_thread): its conversation is not written again. While
        another process holds the cache, the "locked" sqlite3.OperationalError is raised (a 503 that asks again), not
        0: the thread written whole as this key's version 1 would never be carried, its conversation lost."""
        if not job.cached:
            return 0
        count = self.store.versions(job.key)
        if count == 0 and job.location.route.posts and (source := self.store.carried_from(job.key)) is not None:
            carried = self.store.carry_thread(job.key, wait=False)  # the event loop's: never the busy timeout
            if carried:
                cache_log.info(
                    "%s%s: its %d versions, with readers' posts, carried from %s (Regenerate writes its thread anew)",
                    job.runtime.site.name,
                    job.location.url,
                    carried,
                    _carried_between(source, job.key),
                )
            count = carried or self.store.versions(job.key)  # none: another process carried it meanwhile
        return count

    def generation(self, job: Job, version: int, *, ahead: bool = False, placeholder: bool = False) -> Generation:
        """The run writing ``version`` of the page: the one under way, or a new one (its prompt fitted first).
        ``ahead``: a run nobody asked for yet (reading ahead), which gives way to every other. ``placeholder``: the
        caller hands a run under way's placeholder out (a new run waits for its first watcher anyway)."""
        slot = (job.key, version)
        running = self._running.get(slot)
        if running is not None:
            self.reader.opened(running)  # a visitor joining the page read ahead
            if running in self._ahead:
                self._joined.add(running)
            if placeholder:
                running.claim()
            return running
        engine, prompt = self.ready(), self.prompt(job)
        # version n is seed n - 1; a page never stored is written afresh at each visit, so with a seed of its own: it
        # was seed 0 each time, the same text again at full cost (a hackathon team's game, whose fights were one)
        seed = version - 1 if job.cached else random.randrange(2**31)
        request = job.runtime.request(prompt.text, seed, prompt.opening)
        frames, canvases = (lambda: engine.stream(request)), self._canvases(job)
        return self._start(job, version, frames, prompt.parent, canvases, "whole", ahead=ahead)

    def regenerate(self, job: Job, *, placeholder: bool = False) -> Generation:
        """The run writing the page's next version anew (Regenerate): whole, or for a thread whose newest version
        answers readers' posts in place, its conversation kept. Written whole, such a thread lost which reply
        answers which post: every post was listed below it, none answered (a forum host's review). So only the
        thread before its first post is written anew, as its first version was (no post in its prompt), and the
        posts and replies the newest version shows after it follow byte for byte, answering what they answered."""
        found = self._conversation(job)
        if found is None:
            return self.generation(job, self.versions(job) + 1, placeholder=placeholder)
        newest, after = found
        version = newest.version + 1
        if (running := self._running.get((job.key, version))) is not None:
            if placeholder:
                running.claim()
            return running
        engine, prompt = self.ready(), self.prompt(replace(job, posts=()))
        request = job.runtime.request(prompt.text, version - 1, prompt.opening)
        splice = Splice(
            after=after,
            answered=newest.answered,
            replied=newest.replied,
            base=(newest.version, newest.created),
        )
        canvases = self._canvases(job)
        return self._start(job, version, lambda: engine.stream(request), prompt.parent, canvases, "regenerate", splice)

    def _conversation(self, job: Job) -> tuple[StoredPage, str] | None:
        """A thread's newest version and its conversation (its readers' posts answered in place, with the replies to
        them, from the first post on), or None for a page with none."""
        newest = self.page(job) if job.location.route.posts else None
        cut = -1 if newest is None else newest.html.find(INLINE_POSTS)
        return None if newest is None or cut < 0 else (newest, newest.html[cut:])

    def regenerating(self, job: Job, version: int) -> bool:
        """Whether the run writing ``version`` is a Regenerate's of a thread, its conversation kept: a second click
        joins it, as it joins one writing a whole page, where a rewrite or replies under way refuse it."""
        return self.running(job, version) is not None and self._started.get((job.key, version)) == "regenerate"

    def under_way(self) -> tuple[int, int]:
        """The runs under way: a visitor's (pages, replies, rewrites, sets of variations, a run read ahead that a
        visitor came to), and reading ahead."""
        ahead = sum(run in self._ahead and run not in self._joined for run in self._running.values())
        return len(self._running) - ahead + self.variations.writing, ahead

    def busy(self) -> bool:
        """Whether a visitor's run is under way (a page, a reply, a rewrite or variations): the engine is theirs."""
        return any(run not in self._ahead for run in self._running.values()) or self.variations.running

    def append(
        self, job: Job, shown: Callable[[Sequence[StoredPost]], str], *, placeholder: bool = False
    ) -> Generation | None:
        """The run adding a thread's replies to its readers' newest posts, in place: the next version is the newest
        one byte for byte, then the posts it has not shown yet (``shown(posts)``, genui's markup), then the replies.

        None when there is nothing to add to (no version stored yet), no post to answer, or an engine that cannot
        write in place. A run already writing the thread's next version is returned as it is (``placeholder``: its
        placeholder is handed out, as ``generation``'s): posts made meanwhile wait for the next reply.
        """
        engine = editing(self.engine)
        newest = self.page(job) if job.location.route.posts else None
        if engine is None or newest is None:
            return None
        version = newest.version + 1
        if (running := self.running(job, version)) is not None:
            if placeholder:
                running.claim()
            return running
        posts = [post for post in job.posts if post.id > newest.answered]
        if not posts:
            return None
        prompt = self.prompt(job)
        generation = job.runtime.request(prompt.text, version - 1)
        location = job.location
        opening = job.runtime.prompts.reply_opening(location.route, location.params, location.query)
        room = reply_tokens(engine, generation)
        before = fitted_before(engine, generation, model_text(newest.html, job.runtime.mount) + opening, room)
        # The model reads the thread, then the route's reply opening; the new version keeps the opening it wrote.
        infill = Infill(generation, before=before, after="", region_tokens=room)
        kept = before[: max(0, len(before) - len(opening))]  # what the model read of the stored thread
        base = (newest.version, newest.created)
        thread = newest.html + shown(posts)
        splice = Splice(thread, "", posts[-1].id, posts[-1].id, text_before=kept, base=base, replies=True)
        canvases = -(-room // engine.canvas_length)
        return self._start(job, version, lambda: engine.infill(infill), prompt.parent, canvases, "replies", splice)

    def waiting_replies(self, job: Job, shown: Callable[[Sequence[StoredPost]], str]) -> Generation | None:
        """The run answering a thread's readers' posts that the newest version was written before, when no run is
        answering them: posts made while the model loaded, or whose run failed or stopped unwatched. None when no
        post waits, a run is writing the thread's next version already, the engine is not ready, or a visitor's run
        is under way (the engine is theirs first)."""
        newest = self.page(job) if job.location.route.posts and self.engine is not None else None
        if newest is None or not self.waiting(job, newest) or self.running(job, newest.version + 1) is not None:
            return None
        if self.busy():  # a visitor's page goes first (a client at its limit has one): the thread is shown as stored
            return None
        return self.append(job, shown)

    @staticmethod
    def waiting(job: Job, page: StoredPage) -> list[StoredPost]:
        """The thread's posts that ``page`` was written before: no reply answers them yet."""
        return [post for post in job.posts if post.id > page.replied]

    def replies_again(
        self, job: Job, version: int | None, shown: Callable[[Sequence[StoredPost]], str]
    ) -> Generation | None:
        """The replies a live thread asks for (``version`` = newest + 1) when their run is gone (it failed, or nobody
        came to watch it): written again in place, not as a whole new version of the thread. None when that is not
        the case, or when neither this server started replies for that version nor a post waits for one: a GET (a
        crawler, another site's ``<img>``) does not answer posts the newest version already read."""
        if not job.location.route.posts or version is None or version != self.versions(job) + 1:
            return None
        started = self._started.get((job.key, version))
        if self.running(job, version) is not None or started in ("rewrite", "whole", "regenerate"):
            # a rewrite's version, or a thread's Regenerate's: its watchers hear that it stopped, not a replies run in
            # its place; a Regenerate's of a whole page: it is written again whole, as asked, not as the version
            # before with replies
            return None
        newest = self.page(job)
        if started != "replies" and (newest is None or not self.waiting(job, newest)):
            return None
        return self.append(job, shown)

    def rewrite(self, job: Job, version: int | None, number: int, said: str = "") -> Generation:
        """The run rewriting section ``number`` of a stored page version (the newest when None), optionally as a
        visitor asked (``said``); the new version keeps every other byte of that version."""
        engine = self._editor()
        page = self.page(job, version)
        if page is None:
            raise NoSuchVersion(version or 1)
        part = section(page.html, number)
        if part is None:
            raise BadRequest(f"this page has no section {number}")
        if number in job.runtime.pinned_sections(job.location):
            raise BadRequest(f"section {number} is the route's opening, which every version of the page keeps")
        slot = self.versions(job) + 1
        if self.running(job, slot) is not None:
            raise HTTPException(409, BUSY)
        prompt = self.prompt(job)
        generation = job.runtime.request(with_instruction(prompt.text, said), slot - 1)
        before_html, after_html = page.html[: part.start], page.html[part.end :]
        mount = job.runtime.mount
        before = fitted_before(engine, generation, model_text(before_html, mount))
        after = model_text(after_html, mount)
        section_text = model_text(page.html[part.start : part.end], mount)  # as the model reads it
        infill = Infill(generation, before, after, region_tokens(engine, section_text))
        splice = Splice(
            before_html,
            after_html,
            page.answered,
            page.replied,
            text_before=before,
            text_after=after,
            base=(page.version, page.created),
            exact=True,  # the visitor's rewrite or none: not another server's version shown as theirs
        )
        return self._start(job, slot, lambda: engine.infill(infill), prompt.parent, 1, "rewrite", splice)

    def vary(self, job: Job) -> Variations:
        """Start writing VARIANTS candidates of the page's next version side by side, in one batched call."""
        engine = self._editor()
        if not job.cached:
            raise HTTPException(404, "This page has no versions to choose between.")
        if not self.versions(job):  # its first version is the one a click writes (seed 0), not a choice of three
            raise HTTPException(404, "This page has not been written yet: open it first.")
        # A thread whose readers' posts are answered in place varies as Regenerate writes it anew: the thread before
        # its first post, as its first version was, the conversation after it kept (keep). Written whole, a kept
        # candidate listed every post below it, none answered (the forum host's review of session 70).
        conversation = self._conversation(job) is not None
        prompt = self.prompt(replace(job, posts=()) if conversation else job)
        request = job.runtime.request(prompt.text, self.versions(job), prompt.opening)
        url = job.location.url
        self.admit(job)
        self.reader.give_way()
        return self._count(
            job,
            self.variations.add(
                Variations(
                    job.runtime,
                    job.key,
                    url,
                    lambda: engine.stream_variants(request, VARIANTS),
                    VARIANTS,
                    self.unclaimed_s,
                    replied=job.posts[-1].id if job.posts else 0,
                    read=tuple(post.id for post in job.posts),
                    conversation=conversation,
                )
            ),
        )

    def candidates(self, runtime: SiteRuntime, set_id: str, client: str | None = None) -> tuple[Job, Variations]:
        """A remembered set of variations of one of ``runtime``'s pages, with that page's job; a 404 once it is
        gone (kept, forgotten, or never one of this site's)."""
        variations = self.variations.get(set_id)
        if variations is None or variations.key.site != runtime.site.name:
            raise HTTPException(404, "Those variations are gone; ask for new ones.")
        location = runtime.locate(variations.url)
        if location is None:  # pragma: no cover - the set was started for a page the router serves
            raise HTTPException(404, WORDS["no_page"])
        return self.job(runtime, location, client=client), variations

    async def keep(self, job: Job, set_id: str, index: int) -> StoredPage:
        """Store candidate ``index`` of a finished set of variations as the page's next version. While another
        process holds the page cache it tries again for up to BUSY_TIMEOUT_S (when_free), the server answering others
        meanwhile; then the "locked" error is raised (a 503), and the set stays to keep."""
        variations = self.variations.get(set_id)
        if variations is None or variations.key != job.key:
            raise HTTPException(404, "Those variations are gone; ask for new ones.")
        pages = variations.pages
        if pages is None and variations.finished:  # it failed or was cancelled: nothing to keep, now or later
            raise HTTPException(404, "Those variations were not all written; ask for new ones.")
        if pages is None:
            raise HTTPException(409, "Those variations are still being written.")
        if not 0 <= index < len(pages):
            raise BadRequest(f"there are {len(pages)} variations, numbered 1 to {len(pages)}")
        html = pages[index]

        def save() -> StoredPage:
            """One try, with no await between its checks and the write: another keep, a Regenerate or a thread's
            replies may have begun, or stored a version, while an earlier try waited for the cache."""
            if self.variations.get(set_id) is not variations:  # kept meanwhile (another tab, a form sent twice)
                raise HTTPException(404, "Those variations are gone; ask for new ones.")
            version = self.versions(job) + 1
            if self.running(job, version) is not None:
                raise HTTPException(409, BUSY)
            kept, answered, replied, base = html, 0, variations.replied, None
            found = self._conversation(job)
            # Candidates of the thread before its first post (asked for on a conversation, or before any post) take
            # the newest version's conversation as it is now; whole pages written from posts (asked for as a
            # thread's first replies were written) would drop one answered in place since, and a conversation set
            # has none to take once the thread is forgotten: either way, new variations
            if (found is None and variations.conversation) or (
                found is not None and variations.read and not variations.conversation
            ):
                raise HTTPException(409, "The thread's readers' posts changed meanwhile; ask for new variations.")
            if found is not None:  # the newest version's conversation now, byte for byte, after the thread
                newest, after = found
                kept, answered, replied = html + after, newest.answered, newest.replied
                base = (newest.version, newest.created)  # gone by the save: nothing kept (EarlierVersionsDeleted)
            return self.store.save_page(  # PageWithdrawn: a 409, and nothing kept
                job.key,
                version,
                version - 1,
                first_heading(kept),
                kept,
                variations.seconds,
                answered=answered,
                replied=replied,
                mount=job.runtime.mount,
                read=variations.read,
                wait=False,
                base=base,
                exact=True,  # the one the visitor chose, or a 409: not another server's version shown as theirs
            )

        try:
            page = await when_free(save)
        except VersionTaken:
            raise  # the set stays: keeping it again stores it as the version after that one
        except PageWithdrawn:
            self.variations.forget(set_id)
            raise
        # kept once: a second click must not store it again as yet another version (a page cache busy meanwhile, a
        # 503, leaves the set to keep once it is free; no await between the save and this, so no click between)
        self.variations.forget(set_id)
        page = job.runtime.remounted(page)  # the one stored: another process's, if it stored this version first
        self.reader.shown(job, page)
        return page

    async def restore(self, job: Job, asked: int) -> StoredPage:
        """Store version ``asked`` of the page again, byte for byte, as its next version: the newest, which its
        address shows. Not a thread's (its versions follow its readers' posts, answered in place). When ``asked`` is
        the newest already, or the newest is the same page (a second click), the newest is returned as it is."""
        if job.location.route.posts:
            raise HTTPException(409, "A thread's versions follow its readers' posts: one is not made the newest again.")

        def save() -> StoredPage:
            older, newest = self.store.page(job.key, asked), self.store.page(job.key)
            if older is None or newest is None:
                raise NoSuchVersion(asked)
            if newest.html == older.html:  # nothing to store: the same page again would be one more version of it
                return newest
            version = newest.version + 1
            if self.running(job, version) is not None:
                raise HTTPException(409, BUSY)
            return self.store.save_page(  # PageWithdrawn (the page forgotten meanwhile): a 409, nothing stored
                job.key,
                version,
                older.seed,
                older.title,
                older.html,
                older.seconds,
                mount=older.mount,
                wait=False,
                base=(older.version, older.created),
                exact=True,  # this text or nothing: not another server's version shown as the one made newest
            )

        page = job.runtime.remounted(await when_free(save))
        self.reader.shown(job, page)
        return page

    def _start(
        self,
        job: Job,
        version: int,
        frames: Callable[[], AsyncIterator[Frame]],
        parent: Parent | None,
        canvases: int | None,
        run: Run,
        splice: Splice = WHOLE,
        ahead: bool = False,
    ) -> Generation:
        if not ahead:
            self.admit(job)
        store = self.store if job.cached else None
        if splice.whole and job.posts:  # a thread written whole reads its newest posts: none of them waits any more
            splice = replace(splice, replied=job.posts[-1].id)
        if job.posts:  # the prompt holds them all: a version written from a post deleted meanwhile is not stored
            splice = replace(splice, read=tuple(post.id for post in job.posts))

        def ended(generation: Generation) -> None:
            self._ended(generation, job, "ahead" if ahead else run)

        running = Generation(
            job.runtime, job.key, version, frames, parent, canvases, store, ended, self.unclaimed_s, splice
        )
        running.holding = self.stopping.is_set  # a visitor's run outlives its stream as the server stops (close)
        self._running[(job.key, version)] = running
        if version > 1 and not ahead:  # a first version is written by any visit, no record needed
            self._started[(job.key, version)] = run
            self._started.move_to_end((job.key, version))
            while len(self._started) > STARTED_KEPT:
                self._failed.pop(self._started.popitem(last=False)[0], None)
        if ahead:
            self._ahead.add(running)
        else:
            self.reader.give_way()
        return self._count(job, running)

    def admit(self, job: Job) -> None:
        """Raise TooManyRuns when the client who asked for ``job`` already has ``runs_per_client`` runs under way:
        pages, replies, rewrites and sets of variations it started that have not ended. Joining a run someone else
        started costs nothing."""
        if not self.runs_per_client or job.client is None:
            return
        for run in [run for run in self._clients if run.finished]:
            del self._clients[run]
        if sum(who == job.client for who in self._clients.values()) < self.runs_per_client:
            return
        leaving = self._leaving(job)
        if leaving is None:
            raise TooManyRuns(self.runs_per_client)
        leaving.cancel()  # ended now, as the answer would end it: one run more than the limit was never under way

    def _leaving(self, job: Job) -> Generation | None:
        """The client's run writing the page that ``job``'s answer replaces on its screen, which nobody else watches
        and which ends as its socket closes (not a thread's replies, nor a page waiting to be kept): a click away
        from a page being written is not refused for it (--runs-per-client 1 refused every other click: a workshop
        host's review)."""
        if job.leaving is None:
            return None
        try:
            location = job.runtime.locate(job.leaving)
        except BadRequest:
            return None
        if location is None:
            return None
        for run, who in self._clients.items():
            if (
                who == job.client
                and isinstance(run, Generation)
                and run.watchers <= 1
                # the one watcher the client's own stream, or none yet: not another visitor's (a client at its limit,
                # its stream never opened, cancelled the page a visitor watched: an adversarial client's review)
                and run.watched_by_none_but(job.client)
                and not (run.keeping or run.splice.replies)
                and (run.key.site, run.key.path, run.key.query) == (job.key.site, location.path, location.query_string)
            ):
                return run
        return None

    def reply_starts_run(self, job: Job, whole_page_now: bool) -> bool:
        """Whether storing a reply to ``job``'s thread starts a run at once: its replies written in place, or (with
        ``whole_page_now``, an htmx post) the thread not written yet written whole. A plain post to a thread not
        written yet starts none: the 303's GET does."""
        if self.engine is None:
            return False
        newest = self.page(job)
        if newest is None:  # joining the run someone else started writing it costs nothing
            return whole_page_now and self.running(job, 1) is None
        return editing(self.engine) is not None and self.running(job, newest.version + 1) is None

    def _count(self, job: Job, run: R) -> R:
        if job.client is not None and self.runs_per_client:
            self._clients[run] = job.client
        return run

    def _canvases(self, job: Job) -> int | None:
        length = getattr(self.engine, "canvas_length", None)  # engines that say it let the progress line say "of N"
        return -(-job.runtime.site.model.tokens // length) if isinstance(length, int) and length > 0 else None

    def _editor(self) -> EditingEngine:
        engine = editing(self.ready())
        if engine is None:
            raise HTTPException(404, "This model cannot rewrite pages.")
        return engine

    def running(self, job: Job, version: int) -> Generation | None:
        """The run writing ``version`` of the page, if one is under way."""
        return self._running.get((job.key, version))

    async def close(self, drain_s: float | None = None) -> None:
        """Cancel every run under way (at shutdown). Where the server is stopping (SIGTERM), the runs visitors
        started are given up to ``drain_s`` seconds to finish and be stored first: a restart threw each away, a
        minute of the model's work on a CPU, and said nothing of it (an operator's review)."""
        drain_s = DRAIN_S if drain_s is None else drain_s
        await self.reader.close()
        self.seen.note()
        under_way = [generation for generation in self._running.values() if not generation.finished]
        if under_way and self.stopping.is_set() and drain_s > 0:
            await asyncio.wait([asyncio.ensure_future(generation.ended()) for generation in under_way], timeout=drain_s)
        tasks = [generation.cancel() for generation in list(self._running.values())]
        for task in tasks:
            await wait_cancelled(task)
        if under_way:
            stored = sum(1 for generation in under_way if generation.page is not None)
            cut = len(under_way) - stored
            (log.warning if cut else cache_log.info)(  # (a page cut short is work lost: a warning)
                "stopping: %s being written as the server began to stop: %d finished and stored first, %d cut short%s",
                counted(len(under_way), "page"),
                stored,
                cut,
                f" after {drain_s:g} s (each written again at its next visit)" if cut else "",
            )
        await self.variations.close()

    def misfit(self, runtime: SiteRuntime, route: Route) -> str | None:
        """None where ``route``'s own prompt and opening, at its shortest address (each parameter one letter, no
        query, parent or posts), fit what the model reads, else what is wrong and its fix; a route whose templates
        fail so is left to its pages to say."""
        engine = self.ready()
        shortest = {name: "x" for name in compile_path(route.pattern)[2]}
        try:
            prompt = runtime.prompts.render(route, shortest, {}, parent=None, posts=[])
            opening = runtime.prompts.opening(route, shortest, {}, parent=None, posts=[])
        except PromptError:
            return None
        request = runtime.request(prompt, 0, opening)
        return None if engine.fits(request) else too_long(runtime, route, how_to_fit(engine, request))

    def prompt(self, job: Job) -> Prompt:
        """The prompt with as many of the newest posts (at most POSTS_IN_PROMPT) as the model can read.

        Long replies must not make a thread unwritable: the oldest posts leave the prompt first (the page still
        shows them all); where the parent leaves no room for the newest post, the parent leaves instead, and as many
        of the newest as fit stay. Raises BadRequest when the URL's own text is already too long.
        """
        if job.location.blank:  # (a page's own address shows the bar's box instead: views.page)
            raise BadRequest(f"{job.url} asks for nothing: give its {job.location.route.asked!r} a value")
        engine, runtime, location = self.ready(), job.runtime, job.location
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
            if parent is None or texts(0, None) is None:
                if (wrong := self.misfit(runtime, route)) is not None:  # the site's own text: not the URL's
                    raise RouteTooLong(wrong)
                raise BadRequest("this address asks for a page longer than the model can read; shorten it")
            parent = None  # it goes before the newest posts: a post left out is marked read, and never answered
            if (whole := texts(most, None)) is not None:
                return whole
        elif parent is not None and most and texts(1, parent) is None and texts(1, None) is not None:
            parent = None  # the newest post fits without the parent, not beside it: the parent goes
            if (whole := texts(most, None)) is not None:
                return whole
        low, high = 0, most - 1  # texts(low) fits, texts(most) does not: the largest count that fits
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if texts(middle, parent) is not None else (low, middle - 1)
        if low == 0 and most:  # the newest post alone is longer than the model can read: it reads its beginning
            parent = None  # which the parent would shorten further
            newest, kept, longest = posts[-1], 0, len(posts[-1].text)  # its first `kept` characters fit
            while kept < longest:
                middle = (kept + longest + 1) // 2
                posts[-1] = Post(newest.user, newest.text[:middle].rstrip() + CUT)
                kept, longest = (middle, longest) if texts(1, parent) is not None else (kept, middle - 1)
            posts[-1] = Post(newest.user, newest.text[:kept].rstrip() + CUT)
            low = 1 if kept and texts(1, parent) is not None else 0
        fitted = texts(low, parent)
        assert fitted is not None
        return fitted

    def _ended(self, generation: Generation, job: Job, kind: Run | Literal["ahead"]) -> None:
        slot = (generation.key, generation.version)
        if self._running.get(slot) is not generation:
            return  # told already (a cancelled run tells twice)
        del self._running[slot]
        if generation in self._joined:  # read ahead, and a visitor came to it: a page's first version, as theirs is
            self._joined.discard(generation)
            kind = "whole"
        self.metrics.ended(generation, kind)
        if isinstance(generation.error, EngineOverloaded) and slot in self._started:
            self._failed[slot] = generation.error
        else:
            self._failed.pop(slot, None)
        if generation in self._ahead:
            self._ahead.discard(generation)
            return  # the reader reads on by itself
        page = generation.page
        if page is not None and not job.cached and generation.awaited:
            self._held[slot] = generation
            asyncio.get_running_loop().call_later(self.unclaimed_s, self._release, slot, generation)
        if page is not None:
            self.reader.shown(job, page)  # the page its visitor is about to see
        else:
            self.reader.ended()

    def _release(self, slot: tuple[PageKey, int], generation: Generation) -> None:
        if self._held.get(slot) is generation:  # not a later run's page, held since
            del self._held[slot]

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
