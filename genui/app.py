"""The genui web app: one or more sites behind a Starlette app.

Several sites are served under ``/{name}/`` behind an index page at ``/``; a single site is served at ``/``.
genui's own endpoints live under ``/_genui/`` (static files, site stylesheets, the live streams, the wait for a
finished page, regenerate, rewrite a section, variations and keeping one).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.frames import TextEngine
from genui.errors import exception_handlers
from genui.pages import UNCLAIMED_S, Pages
from genui.reload import SiteReloader
from genui.resources import bundled, data_dir
from genui.runtime import SiteRuntime
from genui.screens import (
    KEEP_PATH,
    REGENERATE_PATH,
    REWRITE_PATH,
    VARIATIONS_PATH,
    VARIATIONS_WS_PATH,
    WAIT_PATH,
    WS_PATH,
    Screens,
)
from genui.security import security_headers
from genui.shell import Shell
from genui.sites import Site, load_sites
from genui.store import Store
from genui.stream import Stream
from genui.views import Views

SITES_DIR = bundled("sites")
STATIC_DIR = bundled("static")
DEFAULT_DB = data_dir() / "genui.sqlite3"
log = logging.getLogger("genui")


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


def create_app(
    sites: list[Site] | None = None,
    engine: TextEngine | None = None,
    db_path: Path | str = DEFAULT_DB,
    draft_interval: float = 0.1,
    unclaimed_s: float = UNCLAIMED_S,
    read_ahead: int = 0,
    reload: bool = False,
) -> Starlette:
    """The app serving ``sites`` (default: every site under sites/) with ``engine``.

    Without an engine the app loads the default one (engine.load_engine()) at start-up and closes it at shutdown;
    an engine passed in belongs to the caller. A live stream sends a draft at most every ``draft_interval``
    seconds (the final page at once). A page's run that nobody comes to watch stops after ``unclaimed_s`` seconds.
    While no visitor's run is under way, the first ``read_ahead`` uncached pages linked from the newest page shown
    are written and stored, so that a click on one is answered at once (genui/readahead.py; 0: never). With
    ``reload`` a site whose files change is loaded again and served from the next request on (genui/reload.py).
    """
    sites = load_sites(SITES_DIR) if sites is None else sites
    if not sites:
        raise ValueError("no sites to serve")
    single = len(sites) == 1
    runtimes = [SiteRuntime.build(site, "" if single else f"/{site.name}") for site in sites]
    store = Store(db_path)
    pages = Pages(runtimes, store, engine, unclaimed_s, read_ahead)
    screens = Screens(Shell(), pages, index_url=None if single else "/")
    views = Views(pages, screens)
    stream = Stream(pages, screens, draft_interval)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = None
        if pages.engine is None:
            from engine import load_engine  # imports torch: only when the app has to load a model itself

            owned = pages.engine = load_engine()
        reloader = SiteReloader(pages) if reload else None
        if reloader is not None:
            reloader.start()
        try:
            yield
        finally:
            if reloader is not None:
                await reloader.close()
            await pages.close()
            if owned is not None:
                await owned.close()
            store.close()

    routes: list[BaseRoute] = [
        Mount("/_genui/static", StaticFiles(directory=STATIC_DIR)),
        Route("/_genui/css/{site}.css", views.stylesheet),
        Route(REGENERATE_PATH, views.regenerate, methods=["POST"]),
        Route(REWRITE_PATH, views.rewrite, methods=["POST"]),
        Route(VARIATIONS_PATH, views.variations, methods=["POST"]),
        Route(KEEP_PATH, views.keep, methods=["POST"]),
        Route(WAIT_PATH, views.wait),
        WebSocketRoute(WS_PATH, stream.serve),
        WebSocketRoute(VARIATIONS_WS_PATH, stream.serve_variations),
    ]
    if single:
        routes.append(Route("/{path:path}", views.page, methods=["GET", "POST"]))
    else:
        routes += [
            Route("/", views.index),
            Route("/{site}", views.to_site),
            Route("/{site}/{path:path}", views.page, methods=["GET", "POST"]),
        ]
    app = Starlette(routes=routes, exception_handlers=exception_handlers(screens), lifespan=lifespan)
    app.add_middleware(SecurityHeaders)
    app.state.pages = pages
    return app
