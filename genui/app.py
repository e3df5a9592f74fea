"""The genui web app: one or more sites behind a Starlette app.

Several sites are served under ``/{name}/`` behind an index page at ``/``; a single site is served at ``/``.
genui's own endpoints live under ``/_genui/`` (static files, site stylesheets, the live streams, the wait for a
finished page, regenerate, rewrite a section, variations and keeping one, the health check). With a base path
(``/demo``: genui serve --base-path, for a reverse proxy that serves genui beside other things on one host) every URL
the app writes is under it (``/demo/wiki/…``, ``/demo/_genui/…``), and it answers each with or without it: the proxy
may pass the path on as it is or cut the base path off.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import operator
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.frames import TextEngine
from engine.identity import ModelUnreachable
from genui.assets import ASSETS_PATH, Compressed, Revalidated
from genui.errors import exception_handlers
from genui.hosts import HostCheck, host_name
from genui.metrics import Counted
from genui.pages import UNCLAIMED_S, Pages
from genui.reload import SiteReloader
from genui.resources import bundled, data_dir
from genui.routing import base_path_of
from genui.runtime import SiteRuntime
from genui.screens import (
    HEALTH_PATH,
    INTENT_PATH,
    KEEP_PATH,
    LIVE_PATH,
    METRICS_PATH,
    NEWS_PATH,
    REGENERATE_PATH,
    RESTORE_PATH,
    REWRITE_PATH,
    VARIATIONS_PATH,
    VARIATIONS_WS_PATH,
    WAIT_PATH,
    WS_PATH,
    Screens,
)
from genui.security import security_headers
from genui.shell import Shell
from genui.sites import Problems, Site, check_names, load_sites
from genui.store import Store
from genui.stream import Stream
from genui.upgrade import take_up
from genui.views import Views

SITES_DIR = bundled("sites")
STATIC_DIR = bundled("static")
DEFAULT_DB = data_dir() / "genui.sqlite3"
log = logging.getLogger("genui")
cache_log = logging.getLogger("genui.cache")  # the page cache opened (genui.logs shows it)
model_log = logging.getLogger("genui.model")  # loading the model: genui serve shows it on the console

T = TypeVar("T")


# What genui serve answers at /robots.txt unless told otherwise (--robots FILE): each page a crawler asks for is one the
# model writes then, and a crawler that follows every link of a generated wiki would have it write pages for ever.
ROBOTS = """\
# genui writes each page of these sites with a language model when it is first asked for: a crawler following
# every link would keep it writing pages without end, so crawlers are asked to keep off.
# The server's operator can serve another policy: genui serve --robots FILE
User-agent: *
Disallow: /
"""
# Where /favicon.ico leads, for a client that asks there without reading the page's icon link.
FAVICON = "/_genui/static/favicon.svg"
# Icons a browser asks for at a host's root by itself (Safari, for a bookmark on a phone's home screen): genui has
# none, and a site served at / would write a page for each.
NO_ICONS = ("/apple-touch-icon.png", "/apple-touch-icon-precomposed.png")


class EveryMethod:
    """A page's endpoint that Starlette routes every method to (an ASGI app, where a function would get a method
    list), so that the page answers a method it does not take with an Allow of its own: a thread takes POST, an
    article does not."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.app = request_response(endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class SecurityHeaders:
    """Adds genui.security's headers (CSP and friends) to every HTTP response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in security_headers().items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class OwnedEngine(TextEngine, Protocol):
    """An engine the app loaded itself, and closes."""

    async def close(self) -> None: ...


def _default_engine() -> OwnedEngine:
    from engine import load_engine  # imports torch: only when the app has to load a model itself

    engine: OwnedEngine = load_engine()
    return engine


def _default_model_id() -> str:
    from engine.identity import model_id

    return model_id()


LOADER_THREAD = "genui-load-model"
EXIT_LOAD_WAIT_S = 120.0  # the longest a process's exit waits for a model still loading (_load_ends_before_exit)


def model_loading() -> bool:
    """Whether a model is still being loaded in this process (a thread of _in_daemon_thread's)."""
    return any(thread.name == LOADER_THREAD and thread.is_alive() for thread in threading.enumerate())


async def _in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own, awaited. A daemon thread, unlike asyncio.to_thread's executor: a server
    stopped while the model loads exits at once instead of waiting for the load to finish."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = call(), None
        except BaseException as err:  # noqa: BLE001 - handed to the awaiting task
            result, error = None, err
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    atexit.unregister(_load_ends_before_exit)  # (registered once, however many loads)
    atexit.register(_load_ends_before_exit)
    threading.Thread(target=run, name=LOADER_THREAD, daemon=True).start()
    return await done


def _load_ends_before_exit() -> None:
    """At the interpreter's exit, wait for a model still loading: torch torn down under the loading thread aborts
    the process ("terminate called without an active exception", status 134), which an app that mounts genui and
    was stopped while the model loaded did (an embedding developer's review). genui serve leaves with os._exit
    before this, at once; another host's process exits once the load has ended."""
    loading = [thread for thread in threading.enumerate() if thread.name == LOADER_THREAD and thread.is_alive()]
    if loading:
        print(
            f"genui: waiting for the model's load to end before this process exits (at most {EXIT_LOAD_WAIT_S:g} s)",
            file=sys.stderr,
            flush=True,
        )
    deadline = time.monotonic() + EXIT_LOAD_WAIT_S  # a load that hangs (a loader of one's own) holds no exit for ever
    for thread in loading:
        thread.join(max(0.0, deadline - time.monotonic()))


UNREACHED_RELOAD_S = 60.0  # how often a model whose weights could not be fetched (no network) is tried again


async def _load(
    pages: Pages,
    loader: Callable[[], OwnedEngine],
    identify: Callable[[], str] | None,
    failed: Callable[[Exception], None] | None,
) -> OwnedEngine | None:
    """Load the engine in a worker thread while the app answers; it serves pages from the moment it is set. Once
    ``identify`` has named the model (cheaply, before its weights), pages it has cached are served meanwhile."""
    pages.loading, started = True, time.monotonic()
    model_log.info("loading the model; pages not cached yet answer 503 with Retry-After until it is ready")
    try:
        if identify is not None:
            pages.expected_model = await _in_daemon_thread(identify)
        while True:
            try:
                engine = await _in_daemon_thread(loader)
                break
            except ModelUnreachable as err:
                # No network to fetch its weights from (a laptop on a train, its genui cache cleared): the pages
                # cached for it are served, and the load tried again, rather than none served and the server gone.
                # Where none are cached there is nothing to serve, and the error is the answer, as any other's.
                model, served = pages.expected_model, list(pages.sites)
                cached = pages.store.pages_by(model, served) if model is not None else 0
                if not cached:
                    raise
                if pages.unreached is None:
                    model_log.warning(
                        "the model did not load: %s. The %d pages cached for it are served, and replies to them are"
                        " kept; genui tries again every %.0f s",
                        err,
                        cached,
                        UNREACHED_RELOAD_S,
                    )
                pages.unreached = str(err)
                await asyncio.sleep(UNREACHED_RELOAD_S)
    except Exception as err:  # noqa: BLE001 - every failure is the answer to every page from now on
        pages.expected_model, pages.load_error = None, str(err)
        if failed is not None:
            failed(err)
        else:
            model_log.error("the model did not load: %s", err)
        return None
    finally:
        pages.loading, pages.unreached = False, None
    if pages.expected_model not in (None, engine.model_id):  # a loader and an identify that disagree: a bug
        model_log.warning("expected model %s, loaded %s", pages.expected_model, engine.model_id)
    pages.loaded(engine)
    model_log.info("model %s loaded in %.0f s; serving pages", engine.model_id, time.monotonic() - started)
    for runtime in pages.sites.values():  # a route no page of which the model can read: said once, at start
        for route in runtime.site.routes:
            if (wrong := pages.misfit(runtime, route)) is not None:
                model_log.error("%s", wrong)
    return engine


def base_clash(base: str, sites: Collection[Site], single: bool) -> str | None:
    """What a base path's first part shares with the sites' own addresses, if anything: behind a proxy that cuts the
    base path off, an address that starts with it could not be told from one under it (a site ``wiki`` under
    ``/wiki``: the browser's ``/wiki/wiki/Lisp`` reaches genui as ``/wiki/Lisp``, the front page's list, a review)."""
    first = base.split("/")[1] if base else None
    if first is None:
        return None
    taken = None
    if first == "_genui":
        taken = "genui's own addresses (/_genui/…)"
    elif not single and first in {site.name for site in sites}:
        taken = f"site {first}'s address (/{first}/…)"
    elif single:
        (site,) = sites
        routes = [route.pattern for route in site.routes if route.pattern.split("/")[1:2] == [first]]
        taken = f"site {site.name}'s route {routes[0]}" if routes else None
    if taken is None:
        return None
    return (
        f"base path {base} begins like {taken}: behind a proxy that cuts the base path off, the one could not be told"
        " from the other; give another base path"
    )


def _sites_given(sites: object) -> list[Site]:
    """``sites`` as create_app takes them, a list of Site; anything else is a TypeError saying what to pass (a Site
    alone failed with "object of type 'Site' has no len()", a folder's path as a string on its first request)."""
    if isinstance(sites, Site):
        raise TypeError(f"sites: a list of sites, [load_site(...)] for one, not the site {sites.name!r} alone")
    if isinstance(sites, str | Path):
        raise TypeError(
            f"sites: a list of sites, not the path {str(sites)!r}: load_sites(folder) for a folder of site folders,"
            " [load_site(folder)] for one (genui.sites)"
        )
    if not isinstance(sites, Iterable):
        raise TypeError(f"sites: a list of sites (genui.sites.load_site), not {type(sites).__name__}")
    listed = list(sites)
    for at, site in enumerate(listed):
        if not isinstance(site, Site):
            raise TypeError(f"sites[{at}]: a Site, as genui.sites.load_site(folder) gives one, not {site!r}")
    return listed


def _check_arguments(engine: object, load_engine: object, hosts: object, **counts: Any) -> None:
    """A TypeError or ValueError naming the argument given wrong, at once: an engine's class or a model's name was
    taken, and every page a 500; a host name alone was split into letters, and every request refused."""
    if isinstance(engine, type | str | Path):
        raise TypeError(
            f"engine: an engine object (engine.load_engine(model), or one of your own with model_id, stream and fits),"
            f" not {engine!r}; to load one as the app starts, pass load_engine=lambda: engine.load_engine(MODEL)"
        )
    if load_engine is not None and not callable(load_engine):
        raise TypeError(f"load_engine: a function that loads and returns an engine, not {load_engine!r}")
    if isinstance(hosts, str):
        raise TypeError(f"hosts: a collection of host names, [{hosts!r}], not one string")
    for name, value in counts.items():
        try:
            count = operator.index(value)  # an int, numpy's too; not "3", nor 2.0
        except TypeError:
            raise TypeError(f"{name}: a whole number, 0 or more, not {value!r}") from None
        if count < 0 or isinstance(value, bool):
            raise ValueError(f"{name}: a whole number, 0 or more, not {value!r}")


def create_app(
    sites: list[Site] | None = None,
    engine: TextEngine | None = None,
    db_path: Path | str = DEFAULT_DB,
    draft_interval: float = 0.1,
    unclaimed_s: float = UNCLAIMED_S,
    read_ahead: int = 0,
    runs_per_client: int = 0,
    posts_per_minute: int = 0,
    reload: bool = False,
    sites_dir: Path | None = None,
    load_engine: Callable[[], OwnedEngine] | None = None,
    identify_model: Callable[[], str] | None = None,
    on_load_error: Callable[[Exception], None] | None = None,
    takes_up: bool = True,
    edits: bool = True,
    robots: str = ROBOTS,
    hosts: Collection[str] | None = None,
    mounted: bool = False,
    base_path: str = "",
    metrics: bool = True,
) -> Starlette:
    """The app serving ``sites`` (default: every site under sites/) with ``engine``.

    Without an engine the app loads one at start-up with ``load_engine`` (default: engine.load_engine(), the
    default model), in a worker thread: it answers from the start, a page asked for before the model is ready gets
    a 503 with Retry-After (genui.pages.EngineLoading), and ``/_genui/health`` says when it is ready. Once
    ``identify_model`` has named the model (the id its engine will report, found without loading the weights; with
    the default loader, engine.identity.model_id()), the pages cached for it are served meanwhile and replies to a
    written thread are stored, to be answered once it is ready. A loader that fails leaves every page a 503 naming
    the error, which is logged, or handed to ``on_load_error`` instead. The app closes an engine it loaded at
    shutdown; an engine passed in belongs to the caller.

    A live stream sends a draft at most every ``draft_interval`` seconds (the final page at once). A page's run that
    nobody comes to watch stops after ``unclaimed_s`` seconds. While no visitor's run is under way, the first
    ``read_ahead`` uncached pages linked from the newest page shown are written and stored, so that a click on one is
    answered at once (genui/readahead.py; 0: never). One client (its address) may have ``runs_per_client`` runs
    under way at once (0: no limit); asking for another is a 429 with Retry-After, and so is a reader's post past
    ``posts_per_minute`` of one client's in 60 s (0: no limit; genui/limits.py). With ``reload`` a site whose
    files change is loaded again and served from the next request on (genui/reload.py), and, where several sites are
    served, a site made under ``sites_dir`` (the folder they came from) meanwhile is served too. ``takes_up=False``:
    an app that only reads the page cache (``genui cache export``) leaves what is stored as it is and notes no
    folder its sites are served from (genui.upgrade.take_up). ``edits=False``: no visitor writes a page's next
    version (Regenerate, a section rewritten, variations kept): the toolbar offers none, and their forms are a 403.
    ``robots`` is the text of ``/robots.txt`` (default: ROBOTS, which asks crawlers to keep off); ``/robots.txt`` and
    ``/favicon.ico`` are genui's, not a site's, and so are NO_ICONS: a site served at / would write a page for each.
    ``hosts``: the names (a Host header's, port aside) the app answers for, any other refused (genui/hosts.py, DNS
    rebinding); None (default) for every name. ``mounted``: each site at ``/{name}`` behind the index though only
    one is served (others under ``sites_dir`` join it once they load, with ``reload``). ``base_path``: the path
    every URL the app writes is under (``/demo``, as genui.routing.base_path_of reads ``demo/``; "" for none): the
    sites at ``/demo/`` or ``/demo/{name}/``, genui's endpoints at ``/demo/_genui/``. It answers them so, and without
    the base path too, as a reverse proxy that cuts it off passes them on; ``/demo`` leads to ``/demo/``, and
    ``/robots.txt`` and ``/favicon.ico`` stay at the root, where they are asked for. A base path that begins like a
    site's own addresses is a ValueError (base_clash). Mounted in another ASGI app, the base path is the mount's, and
    the host runs this app's lifespan (docs/framework.md, "In another ASGI app"). Sites that are no list of Sites, or
    two of one name, an engine that is a class or a name, ``hosts`` as one string and a count below 0 are refused as
    the app is made (a TypeError, ValueError or SiteConfigError naming the argument).
    """
    sites = load_sites(SITES_DIR) if sites is None else _sites_given(sites)
    if not sites:
        raise ValueError("no sites to serve")
    check_names(sites)  # two of one name: the index listed the last alone, the other gone unsaid
    _check_arguments(
        engine,
        load_engine,
        hosts,
        read_ahead=read_ahead,
        runs_per_client=runs_per_client,
        posts_per_minute=posts_per_minute,
    )
    base = base_path_of(base_path)  # ValueError: no URL path
    single = len(sites) == 1 and not mounted
    if (clash := base_clash(base, sites, single)) is not None:
        raise ValueError(clash)
    problems = Problems()  # every site's templates tried: their problems said in one run
    runtimes = [
        runtime
        for site in sites
        if (runtime := problems.check(SiteRuntime.build, site, base if single else f"{base}/{site.name}", base))
    ]
    problems.raise_found()
    store = Store(db_path)
    for runtime in runtimes:
        if takes_up:
            take_up(store, runtime)  # a cache an earlier genui or config wrote: once, and quickly after that
    pages = Pages(runtimes, store, engine, unclaimed_s, read_ahead, runs_per_client, posts_per_minute)
    pages.edits = edits
    screens = Screens(Shell(base=base), pages, index_url=None if single else f"{base}/")
    views = Views(pages, screens)
    stream = Stream(pages, screens, draft_interval)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def unload() -> None:  # the engine the app loaded; one still loading is not waited for
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                owned = await loading
                if owned is not None:
                    await owned.close()

        pages.started = True
        # which file, and whether it is new: a --db with a typo in a service's unit served an empty cache unsaid, and
        # the readers' posts seemed gone (an operator's review)
        held = "new: nothing stored in it yet" if store.new else "readers' posts and pages kept in it"
        if str(store.path) != ":memory:":
            cache_log.info("page cache %s (%s)", store.path.resolve(), held)
        # Shutdown runs these in the reverse order, each one even if one before it failed.
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(store.close)
            if pages.engine is None:
                load = load_engine or _default_engine
                identify = identify_model or (_default_model_id if load_engine is None else None)
                loading = asyncio.create_task(_load(pages, load, identify, on_load_error))
                stack.push_async_callback(unload)
            stack.push_async_callback(pages.close)
            if reload:
                reloader = SiteReloader(pages, new_in=sites_dir, alone=single)
                reloader.start()
                stack.push_async_callback(reloader.close)
            yield

    async def robots_txt(request: Request) -> Response:
        return PlainTextResponse(robots, headers={"Cache-Control": "max-age=3600"})

    async def favicon(request: Request) -> Response:
        return RedirectResponse(base + FAVICON, 301)

    async def not_found(request: Request) -> Response:
        raise HTTPException(404)

    async def to_base(request: Request) -> Response:
        return RedirectResponse(f"{base}/")

    def served(prefix: str) -> list[BaseRoute]:
        """genui's endpoints and the sites' pages, under ``prefix``."""
        under: list[BaseRoute] = [
            # compressed: htmx, its ws extension, genui.js and genui.css are 119 KB as they are (37 KB so), 9 s of a
            # first visit on a slow phone link (a reader on a flaky network's review); they hold no secret, so no
            # BREACH (pages are sent as they are, for that reason)
            Mount(prefix + "/_genui/static", Compressed(Revalidated(directory=STATIC_DIR), minimum_size=1024)),
            Route(prefix + "/_genui/css/{site}.css", views.stylesheet),
            Route(prefix + ASSETS_PATH + "{site}/{path:path}", EveryMethod(views.asset)),  # 405 but for GET, HEAD
            Route(prefix + REGENERATE_PATH, views.regenerate, methods=["POST"]),
            Route(prefix + REWRITE_PATH, views.rewrite, methods=["POST"]),
            Route(prefix + VARIATIONS_PATH, views.variations, methods=["POST"]),
            Route(prefix + VARIATIONS_PATH, views.candidates, methods=["GET", "HEAD"]),
            Route(prefix + KEEP_PATH, views.keep, methods=["POST"]),
            Route(prefix + RESTORE_PATH, views.restore, methods=["POST"]),
            Route(prefix + WAIT_PATH, views.wait),
            Route(prefix + NEWS_PATH, views.news),
            Route(prefix + INTENT_PATH, views.intent, methods=["POST"]),
            Route(prefix + HEALTH_PATH, views.health),
            Route(prefix + LIVE_PATH, views.live),
            *([Route(prefix + METRICS_PATH, views.metrics)] if metrics else []),
            WebSocketRoute(prefix + WS_PATH, stream.serve),
            WebSocketRoute(prefix + VARIATIONS_WS_PATH, stream.serve_variations),
            # the rest of /_genui/ is genui's too: a 404, where a site served at / would write a page for it
            Route(prefix + "/_genui", not_found),
            Route(prefix + "/_genui/{rest:path}", not_found),
        ]
        if single:
            return [*under, Route(prefix + "/{path:path}", EveryMethod(views.page))]
        return [
            *under,
            Route(prefix + "/", views.index),
            Route(prefix + "/{site}", views.to_site),
            Route(prefix + "/{site}/{path:path}", EveryMethod(views.page)),
        ]

    routes: list[BaseRoute] = [
        Route("/robots.txt", robots_txt),
        Route("/favicon.ico", favicon),
        *(Route(path, not_found) for path in NO_ICONS),
        *served(base),
    ]
    if base:
        # Without it too: a proxy may pass each address on as it is (nginx's proxy_pass with no path, Caddy's handle)
        # or cut the base path off (a / after the port, handle_path), and the pages' links, under it, work either way.
        # Redirecting / to the base path looped where it was cut off (a hackathon team's review).
        routes += [Route(base, to_base), *served("")]
    app = Starlette(routes=routes, exception_handlers=exception_handlers(screens), lifespan=lifespan)
    if hosts is not None:  # inside SecurityHeaders: its refusals carry them
        app.add_middleware(HostCheck, hosts=frozenset(host_name(host) for host in hosts))
    app.add_middleware(SecurityHeaders)
    if metrics:
        pages.metrics.routes(routes)
        app.add_middleware(Counted, metrics=pages.metrics)  # outermost: the host check's refusals are counted too
    app.state.pages = pages
    return app
