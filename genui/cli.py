"""The ``genui`` command: serve sites, render one page, scaffold a site, list sites; and, delegated to their
modules, benchmark the engine, build the corpus, train a model and report its quality.

Errors a user can fix (a bad site config, a model that will not load, an unknown site or path) print one line to
stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import importlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.frames import DoneFrame, EngineError
from genui.app import DEFAULT_DB, SITES_DIR, OwnedEngine, create_app
from genui.cache import EARLIER, OTHER_MODEL, Standing, counted, size_text, standings, table
from genui.routing import BadRequest, Location
from genui.runtime import SiteRuntime
from genui.scaffold import DEFAULT_DESCRIPTION, create_site
from genui.sites import Site, SiteConfigError, load_site, load_sites
from genui.store import Store
from genui.upgrade import adopt_earlier_pages

USAGE_ERROR = 2
READ_AHEAD = 3  # pages linked from the newest page shown that genui serve writes while nobody waits
RUNS_PER_CLIENT = 3  # pages one client may have genui serve write at once


EngineLoader = Callable[[str | None, str | None, bool], OwnedEngine]  # (model, device, int8) -> a started engine


class UsageError(Exception):
    """Something the user can fix; the message is the one line genui prints."""


def _default_loader(model: str | None, device: str | None, int8: bool) -> OwnedEngine:
    from engine import load_engine  # imports torch: only for the commands that need a model

    engine: OwnedEngine = load_engine(model=model, device=device, quantize="int8" if int8 else None)
    return engine


def _model_id(model: str | None) -> str:
    from engine.identity import model_id  # no torch: a few small reads

    return model_id(model)


# -- commands ---------------------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace, loader: EngineLoader) -> int:
    import uvicorn

    sites = _sites(Path(args.sites_dir), args.site)

    async def serve() -> None:
        failed: list[Exception] = []

        def load_failed(error: Exception) -> None:  # the model will not load: stop, and say why as genui does
            failed.append(error)
            server.should_exit = True

        # The server answers at once and loads the model meanwhile: pages it has cached are served, others answer
        # 503 with Retry-After until then.
        app = create_app(
            sites,
            db_path=args.db,
            read_ahead=args.read_ahead,
            runs_per_client=args.runs_per_client,
            reload=args.reload,
            load_engine=lambda: loader(args.model, args.device, args.int8),
            identify_model=(lambda: _model_id(args.model)) if loader is _default_loader else None,
            on_load_error=load_failed,
        )
        log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
        info = {"handlers": ["default"], "level": "INFO", "propagate": False}
        log_config["loggers"]["genui.model"] = info  # loading the model, and when it is ready
        if args.reload:  # a developer at work: say what genui does (reloads, pages read ahead) on the console
            log_config["loggers"]["genui"] = info
        # uvicorn's default WebSocket implementation is websockets' deprecated legacy API; sans-I/O is current.
        config = uvicorn.Config(app, host=args.host, port=args.port, ws="websockets-sansio", log_config=log_config)
        server = uvicorn.Server(config)
        await server.serve()
        if failed:
            raise failed[0]

    asyncio.run(serve())
    return 0


def _render(args: argparse.Namespace, loader: EngineLoader) -> int:
    site = _site(args.site, Path(args.sites_dir))
    runtime = SiteRuntime.build(site, "")
    location = _located(site, args.path)
    request = runtime.direct_request(location, args.seed, opening=not args.no_opening)

    async def generate() -> DoneFrame:
        engine = loader(args.model, args.device, args.int8)
        try:
            async for frame in engine.stream(request):
                if isinstance(frame, DoneFrame):
                    return frame
            raise EngineError("the engine ended without a final frame")
        finally:
            await engine.close()

    done = asyncio.run(generate())
    html = runtime.render(done.text)
    if args.json:
        canvases = [{"steps": c.steps, "tokens": c.tokens, "seconds": round(c.seconds, 4)} for c in done.canvases]
        print(json.dumps({"html": html, "canvases": canvases, "seconds": round(done.seconds, 4)}))
    else:
        print(html)
    return 0


def _new(args: argparse.Namespace, loader: EngineLoader) -> int:
    try:
        site = create_site(args.name, args.description, args.dir, args.example)
    except FileExistsError as err:
        raise UsageError(str(err)) from None
    print(f"created {site.root}: site.toml, prompts/ ({len(site.routes)} routes), {site.stylesheet}")
    print(f"serve it with: genui serve --site {site.name} --sites-dir {Path(args.dir)}")
    print("(add --reload while you edit it: each change is served from the next request on, with no restart)")
    print(f"before a demo, write its pages ahead: genui cache warm {site.name} --sites-dir {Path(args.dir)} --pages 20")
    return 0


def _list(args: argparse.Namespace, loader: EngineLoader) -> int:
    sites = load_sites(args.sites_dir)
    if not sites:
        raise UsageError(
            f"no sites under {args.sites_dir} (a site is a folder with site.toml; genui new NAME writes one)"
        )
    for site in sites:
        print(f"{site.name}  {site.title}  ({site.root})")
        model = site.model
        settings = [f"up to {model.tokens} tokens"]
        if model.steps is not None:
            settings.append(f"up to {model.steps} steps a canvas")
        if model.t_max is not None:
            settings.append(f"temperature {model.t_max:g} -> {model.t_min:g}")
        if model.entropy_bound is not None:
            settings.append(f"entropy bound {model.entropy_bound:g}")
        print(f"  model: {', '.join(settings)} (the rest from the model's generation_config.json)")
        for route in site.routes:
            query = "?" + "&".join(route.query) if route.query else ""
            flags = [f"context: {', '.join(route.context)}"]
            if route.opening:
                flags.append(f"opens with {route.opening}")
            if route.cache != "forever":
                flags.append(f"cache: {route.cache}")
            if route.posts:
                flags.append("readers may post")
            print(f"  {route.pattern + query:<28} {route.template:<14} {'; '.join(flags)}")
    return 0


def _cache(args: argparse.Namespace, loader: EngineLoader) -> int:
    if args.action == "warm":
        return _warm(args, loader)
    store = _open_store(Path(args.db))
    try:
        if args.action == "forget":
            return _forget(args, store)
        return (_prune if args.action == "prune" else _show)(args, store)
    finally:
        store.close()


def _open_store(db: Path) -> Store:
    """The page cache at ``db``, or UsageError when there is none (a file genui serve did not make is left alone)."""
    if not db.is_file():
        raise UsageError(f"no page cache at {db} (genui serve makes it; pass --db to name another)")
    try:
        with contextlib.closing(sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)) as check:
            tables = {name for (name,) in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as err:
        raise UsageError(f"{db} is not a page cache: {err}") from None
    if not {"pages", "posts"} <= tables:
        raise UsageError(f"{db} is not a page cache: it has no pages and posts tables (genui serve --db makes one)")
    return Store(db)


def _standings(args: argparse.Namespace, store: Store) -> tuple[list[Standing], list[Standing]]:
    """Every group of cached pages with its standing, and those prune deletes."""
    sites = _sites(Path(args.sites_dir), args.site)
    for site in sites:  # what an earlier genui stored is looked up again under today's keys: not to be pruned
        adopt_earlier_pages(store, SiteRuntime.build(site, ""))
    found = standings(store.page_groups(), sites, _model_id(args.model))
    doomed = [s for s in found if s.state == EARLIER or (args.other_models and s.state == OTHER_MODEL)]
    return found, doomed


def _show(args: argparse.Namespace, store: Store) -> int:
    found, doomed = _standings(args, store)
    posts = store.post_counts()
    if args.json:
        groups = [
            {
                "site": s.group.site,
                "route": s.route or None,
                "model": s.group.model,
                "template": s.group.template,
                "pages": s.group.urls,
                "versions": s.group.versions,
                "html_bytes": s.group.size,
                "state": s.state,
            }
            for s in found
        ]
        print(json.dumps({"db": str(args.db), "groups": groups, "posts": posts}))
        return 0
    print("\n".join(table(found)) if found else f"no pages in {args.db}")
    print(f"readers' posts: {', '.join(f'{site} {n}' for site, n in posts.items()) or 'none'}")
    if doomed:
        size, versions = size_text(sum(s.group.size for s in doomed)), sum(s.group.versions for s in doomed)
        print(f"genui cache prune would delete {counted(versions, 'version')} ({size} of HTML)")
    return 0


def _prune(args: argparse.Namespace, store: Store) -> int:
    _, doomed = _standings(args, store)
    if args.dry_run:
        pages, versions = sum(s.group.urls for s in doomed), sum(s.group.versions for s in doomed)
        print(f"would delete {counted(versions, 'version')} of {counted(pages, 'page')}; readers' posts are kept")
        return 0
    deleted = sum(store.delete_group(s.group) for s in doomed)
    print(f"deleted {counted(deleted, 'version')}; readers' posts are kept")
    if args.vacuum:
        before = Path(args.db).stat().st_size
        try:
            shrunk = store.vacuum()
        except sqlite3.OperationalError as err:  # a server is writing to it: the rows are gone, their space reused
            raise UsageError(
                f"the file was not shrunk ({err}): stop the server that uses it, and prune again"
            ) from None
        after = size_text(Path(args.db).stat().st_size)
        later = "" if shrunk else " (it shrinks once the server reading it lets go: stop it first next time)"
        print(f"{args.db}: {size_text(before)} -> {after}{later}")
    return 0


def _warm(args: argparse.Namespace, loader: EngineLoader) -> int:
    from genui.pages import Pages
    from genui.warming import Warmed, warm

    site = _site(args.warm_site, Path(args.sites_dir))
    runtime = SiteRuntime.build(site, "")
    locations = [_located(site, path) for path in args.paths or ["/"]]
    cached = 0

    def report(page: Warmed) -> None:
        nonlocal cached
        if page.problem:
            print(f"skipped  {page.url}: {page.problem}")
        elif page.seconds is None:
            cached += 1
            print(f"cached   {'':>8}  {page.url}")
        else:
            print(f"wrote    {page.seconds:>6.1f} s  {page.url}", flush=True)

    db = Path(args.db)
    store = _open_store(db) if db.exists() else Store(db)  # made if missing, as genui serve makes it

    async def run() -> int:
        engine = loader(args.model, args.device, args.int8)
        try:
            pages = Pages([runtime], store, engine)
            return await warm(pages, [pages.job(runtime, location) for location in locations], args.pages, report)
        finally:
            await engine.close()

    began = time.monotonic()
    try:
        written = asyncio.run(run())
    finally:
        store.close()
    seconds = time.monotonic() - began
    print(f"wrote {counted(written, 'page')} in {seconds:.1f} s; {counted(cached, 'page')} already stored on the way")
    return 0


def _forget(args: argparse.Namespace, store: Store) -> int:
    site = _site(args.page_site, Path(args.sites_dir))
    location = _located(site, args.path)
    deleted = store.forget(site.name, location.path, location.query_string)
    print(f"forgot {counted(deleted, 'version')} of {site.name} {location.url}; its next visit writes it again")
    return 0


def _located(site: Site, path: str) -> Location:
    """The page of ``site`` at a site-relative URL, or UsageError."""
    try:
        location = SiteRuntime.build(site, "").locate(path)
    except BadRequest as err:
        raise UsageError(f"bad path {path!r}: {err}") from None
    if location is None:
        patterns = ", ".join(route.pattern for route in site.routes)
        raise UsageError(f"no route of site {site.name!r} matches {path!r} (routes: {patterns})")
    return location


def _posts(args: argparse.Namespace, loader: EngineLoader) -> int:
    thread = args.thread
    if thread is not None and args.site is not None:  # any URL of the thread, as genui serve would route it
        thread = _located(_site(args.site, Path(args.sites_dir)), thread).path
    store = _open_store(Path(args.db))
    try:
        if args.action == "delete":
            return _delete_posts(store, args.ids)
        placed_posts = store.recent_posts(args.site, thread, args.limit)
    finally:
        store.close()
    if args.json:
        rows = [{"site": p.site, "thread": p.path, **asdict(p.post)} for p in placed_posts]
        print(json.dumps({"db": str(args.db), "posts": rows}))
        return 0
    for placed in placed_posts:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(placed.post.created))
        text = " ".join(placed.post.text.split())
        print(f"{placed.post.id:>6}  {when}  {placed.site} {placed.path}  {placed.post.user}: {text[:80]}")
    if not placed_posts:
        print("no posts")
    return 0


def _delete_posts(store: Store, ids: list[int]) -> int:
    missing = 0
    for post_id in ids:
        deleted = store.delete_post(post_id)
        if deleted is None:
            print(f"genui posts: no post {post_id} (genui posts lists them)", file=sys.stderr)
            missing += 1
            continue
        placed = deleted.placed
        print(
            f"deleted post {post_id} by {placed.post.user} on {placed.site} {placed.path}, and "
            f"{counted(deleted.versions, 'version')} of the thread that read or showed it"
        )
    return USAGE_ERROR if missing else 0


# Commands that own their whole argument list: main() hands everything after the name to the module's main(argv).
# They are imported only when asked for, since most of them import torch.
DELEGATED = {
    "bench": ("lab.bench", "benchmark the engine: diffusion vs autoregressive on one canvas"),
    "corpus": ("lab.corpus", "build the default model's corpus from Debian's packaged text"),
    "distill": ("lab.distill", "let a model write training pages itself (extra corpus for genui adapt)"),
    "trajectories": ("lab.trajectories", "record the denoiser's own paths to its pages (for adapt --trajectories)"),
    "adapt": ("lab.adapt", "adapt a pretrained causal LM into genui's block-diffusion denoiser (the default model)"),
    "train": ("lab.scratch", "train (or resume training) a DiffusionGemma from scratch on a packed corpus"),
    "quality": ("lab.quality", "the default model's quality report on held-out pages"),
}


def _delegate(name: str, argv: list[str]) -> int:
    module = importlib.import_module(DELEGATED[name][0])
    code: int = module.main(argv)
    return code


# -- plumbing ---------------------------------------------------------------------------------------------------


def _sites(directory: Path, names: list[str] | None) -> list[Site]:
    sites = load_sites(directory)
    if not sites:
        raise UsageError(f"no sites under {directory} (a site is a folder with site.toml; genui new NAME writes one)")
    if not names:
        return sites
    by_name = {site.name: site for site in sites}
    for name in names:
        if name not in by_name:
            raise UsageError(f"no site named {name!r} under {directory} (have: {', '.join(sorted(by_name))})")
    return [by_name[name] for name in dict.fromkeys(names)]


def _count(text: str) -> int:
    """A command-line count: 0 or a positive whole number."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive whole number, got {text!r}")
    return value


def _shared(parsers: list[argparse.ArgumentParser], *names: str, default: object = None, **options: Any) -> None:
    """An option of a command and of each of its actions (the first parser, then the rest), so that it may come
    before or after the action's name: ``genui cache --db X prune`` is ``genui cache prune --db X``. An action's
    copy sets nothing when not given, so as not to undo the command's; a repeatable one is kept apart and joined to
    the command's by ``_joined``."""
    top, *actions = parsers
    top.add_argument(*names, default=default, **options)
    if options.get("action") == "append":
        dest = options.get("dest") or names[0].lstrip("-").replace("-", "_")
        _REPEATED[AFTER + dest] = dest
        options = {**options, "dest": AFTER + dest}
    for action in actions:
        action.add_argument(*names, default=argparse.SUPPRESS, **options)


AFTER = "after_"  # where an action keeps a repeatable option given after its name
_REPEATED: dict[str, str] = {}  # those places, to the command's own dest


def _joined(args: argparse.Namespace) -> argparse.Namespace:
    """The values of a repeatable option given before an action's name and after it, as one list."""
    for after, dest in _REPEATED.items():
        if hasattr(args, after):
            setattr(args, dest, (getattr(args, dest, None) or []) + getattr(args, after))
            delattr(args, after)
    return args


def _site(name_or_folder: str, directory: Path) -> Site:
    folder = Path(name_or_folder)
    if (folder / "site.toml").is_file():
        return load_site(folder)
    return _sites(directory, [name_or_folder])[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genui", description="Generative UI: web sites whose pages are written on the fly by a diffusion model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def model_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--model",
            help="checkpoint folder or hub id (default: the shipped models/genui-smollm adapter on its SmolLM2 base)",
        )
        command.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available, else cpu)")
        command.add_argument(
            "--int8",
            action="store_true",
            help="run a causal LM's linear layers in int8 on the CPU: pages 1.3-1.6x sooner than in float32 on a "
            "2-core AVX2 CPU, held-out loss 2-7%% higher (docs/model.md)",
        )

    serve = commands.add_parser(
        "serve",
        help="serve sites over HTTP",
        description="Serve sites: all of them under /NAME/ behind an index page, or a single one at /.",
    )
    serve.add_argument("--site", action="append", metavar="NAME", help="serve only this site (repeatable)")
    serve.add_argument("--sites-dir", default=str(SITES_DIR), help="folder of site folders (default: %(default)s)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: %(default)s)")
    serve.add_argument("--db", default=str(DEFAULT_DB), help="SQLite page cache (default: %(default)s)")
    serve.add_argument(
        "--read-ahead",
        type=_count,
        default=READ_AHEAD,
        metavar="N",
        help="while no visitor waits, write the first N unwritten pages the newest page shown links to, so a click "
        "on one is answered at once; 0 never does (default: %(default)s)",
    )
    serve.add_argument(
        "--runs-per-client",
        type=_count,
        default=RUNS_PER_CLIENT,
        metavar="N",
        help="pages, replies and rewrites one client (an IP address) may have written at once; one more is a 429 "
        "with Retry-After. Behind a reverse proxy, it must send X-Forwarded-For, and one on another host must be "
        "named in FORWARDED_ALLOW_IPS; else every visitor counts as one client. 0: no limit (default: %(default)s)",
    )
    serve.add_argument(
        "--reload",
        action="store_true",
        help="for working on a site: load a site again when its site.toml, prompts or stylesheet change, with no "
        "restart (a config that fails to load is shown on its pages, and the last good one is served)",
    )
    model_options(serve)
    serve.set_defaults(run=_serve)

    render = commands.add_parser(
        "render",
        help="write one page and print its final sanitised HTML",
        description="Write one page of a site and print its final sanitised HTML (no cache, no server).",
    )
    render.add_argument("site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    render.add_argument("path", metavar="PATH", help="site-relative URL, e.g. /wiki/Hash_table or '/search?q=lisp'")
    render.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    render.add_argument(
        "--json", action="store_true", help='print {"html", "canvases": [{steps, tokens, seconds}], "seconds"}'
    )
    render.add_argument(
        "--no-opening",
        action="store_true",
        help="leave out the route's opening (site.toml), so the model writes the whole page",
    )
    render.add_argument("--sites-dir", default=str(SITES_DIR), help="folder of site folders (default: %(default)s)")
    model_options(render)
    render.set_defaults(run=_render)

    new = commands.add_parser(
        "new",
        help="scaffold a new site folder",
        description="Write a working site folder (site.toml, prompts, stylesheet) from a one-line description, or "
        "from an example site.",
    )
    new.add_argument("name", metavar="NAME", help="site name: lower case letters, digits, - or _")
    new.add_argument(
        "--description",
        help=f"one line about the site: the prompts' brief (default: {DEFAULT_DESCRIPTION!r}, or the example's own)",
    )
    new.add_argument(
        "--from",
        dest="example",
        metavar="SITE",
        help="start from an example site (forum, os, wiki) or a site folder: its routes, prompts, openings, "
        "navigation and stylesheet under the new name (default: a blank wiki-like site)",
    )
    new.add_argument("--dir", default="sites", help="folder to create the site in (default: %(default)s)")
    new.set_defaults(run=_new)

    listing = commands.add_parser(
        "sites",
        help="list sites, their model settings and routes",
        description="List sites, their model settings and their routes.",
    )
    listing.add_argument("--sites-dir", default=str(SITES_DIR), help="folder of site folders (default: %(default)s)")
    listing.set_defaults(run=_list)

    cache = commands.add_parser(
        "cache",
        help="what the page cache holds; prune pages no server will look up again, or forget one page",
        description="What the page cache holds, by site, route and model, and which of it a server of these sites "
        "on this model looks up. Readers' posts are never deleted.",
    )
    cache_actions = cache.add_subparsers(dest="action", metavar="ACTION")
    cache.set_defaults(run=_cache, action="show", other_models=False, dry_run=False, vacuum=False)
    show = cache_actions.add_parser(
        "show",
        help="the cached pages and their standing (the default)",
        description="The cached pages of each site, by route and model: looked up by a server of these sites on this "
        "model (current), by one on another model (other model), or never again: written from templates or "
        "site.toml settings the site no longer has (earlier config). Sites not checked: other site.",
    )
    prune = cache_actions.add_parser(
        "prune",
        help="delete the pages of earlier configs",
        description="Delete the pages written from earlier configs, which no server of these sites looks up again. "
        "Safe beside a server that serves the sites as they are on disk (one still running an earlier config "
        "writes its pages again).",
    )
    prune.add_argument("--other-models", action="store_true", help="also delete the pages other models wrote")
    prune.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")
    prune.add_argument(
        "--vacuum",
        action="store_true",
        help="then shrink the file (it is locked meanwhile: stop the server first; without it, the space is reused)",
    )
    forget = cache_actions.add_parser(
        "forget",
        help="delete every version of one page",
        description="Delete every version of one page, whatever model or config wrote it, so that its next visit "
        "writes it again. Do it while no server is writing that page: a version under way is stored when done.",
    )
    forget.add_argument("page_site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    forget.add_argument("path", metavar="PATH", help="the page's site-relative URL, e.g. /Hash_table")
    warm_up = cache_actions.add_parser(
        "warm",
        help="write a site's pages before anyone asks, following their links",
        description="Write pages before anyone asks, so that a demo on a CPU is clicked through from the cache: the "
        "pages named (the front page unless told), then the pages they link to, breadth first, each as a click "
        "would write it (same prompt, parent and seed). Stored pages are not written again, but their links are "
        "followed, so warming again goes further. It loads the model; a server using the same file may run "
        "meanwhile.",
    )
    warm_up.add_argument("warm_site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    warm_up.add_argument("paths", nargs="*", metavar="PATH", help="site-relative URLs to start from (default: /)")
    warm_up.add_argument(
        "--pages", type=_count, default=10, metavar="N", help="write at most N new pages (default: %(default)s)"
    )
    warm_up.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available, else cpu)")
    warm_up.add_argument("--int8", action="store_true", help="run a causal LM's linear layers in int8 on the CPU")
    _shared(
        [cache, show, prune, forget, warm_up],
        "--db",
        default=str(DEFAULT_DB),
        help=f"SQLite page cache (default: {DEFAULT_DB})",
    )
    _shared(
        [cache, show, prune, forget, warm_up],
        "--sites-dir",
        default=str(SITES_DIR),
        help=f"folder of site folders (default: {SITES_DIR})",
    )
    _shared([cache, show, prune], "--site", action="append", metavar="NAME", help="only this site (repeatable)")
    _shared(
        [cache, show, prune, warm_up],
        "--model",
        help="the model a server runs: checkpoint folder or hub id (default: the shipped models/genui-smollm)",
    )
    _shared(
        [cache, show], "--json", action="store_true", default=False, help="print the groups and post counts as JSON"
    )

    posts = commands.add_parser(
        "posts",
        help="list readers' posts, newest first, or delete some (moderation)",
        description="Readers' posts, newest first, with their ids; or delete some.",
    )
    post_actions = posts.add_subparsers(dest="action", metavar="ACTION")
    posts.set_defaults(run=_posts, action="show")
    listed = post_actions.add_parser("show", help="readers' posts, newest first (the default)")
    delete = post_actions.add_parser(
        "delete",
        help="delete posts, and the versions of their threads that read or show them",
        description="Delete posts, each with every version of its thread from the first that may have read it or "
        "shows it, so that no page keeps its text; the thread's next visit answers the posts left. Delete a post "
        "while nobody posts to its thread: a reply under way is stored when it is done.",
    )
    delete.add_argument("ids", nargs="+", type=int, metavar="ID", help="the posts' ids, as genui posts lists them")
    _shared([posts, listed, delete], "--db", default=str(DEFAULT_DB), help=f"SQLite page cache (default: {DEFAULT_DB})")
    _shared([posts, listed], "--site", metavar="NAME", help="only this site's posts")
    _shared(
        [posts, listed],
        "--thread",
        metavar="PATH",
        help="only this thread's, e.g. /r/lisp/Macros (with --site: any URL of it)",
    )
    _shared(
        [posts, listed],
        "--sites-dir",
        default=str(SITES_DIR),
        help=f"folder of site folders, for --thread (default: {SITES_DIR})",
    )
    _shared([posts, listed], "--limit", type=_count, default=50, metavar="N", help="at most N (default: 50)")
    _shared([posts, listed], "--json", action="store_true", default=False, help="print the posts as JSON")

    # Listed for --help only; main() hands everything after the command's name to its module untouched.
    for name, (_, summary) in DELEGATED.items():
        commands.add_parser(name, help=f"{summary} (genui {name} --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None, *, load_engine: EngineLoader | None = None) -> int:
    """Run the genui command. ``load_engine`` replaces the default model loader (tests pass a fake)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in DELEGATED:
        return _delegate(argv[0], argv[1:])
    args = _joined(_parser().parse_args(argv))
    try:
        code: int = args.run(args, load_engine or _default_loader)
    except (UsageError, SiteConfigError, EngineError) as err:
        print(f"genui {args.command}: {err}", file=sys.stderr)
        return USAGE_ERROR
    except sqlite3.DatabaseError as err:  # a file that is no database, or one another process holds past 5 s
        held = "; try again, or stop what holds it" if "locked" in str(err) else ""
        print(f"genui {args.command}: {getattr(args, 'db', 'the database')}: {err}{held}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
