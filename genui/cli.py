"""The ``genui`` command: serve sites, render one page, scaffold a site, list sites; the page cache's upkeep and
readers' posts (genui/upkeep.py); and, delegated to their modules, benchmark the engine, build the corpus, train a
model and report its quality.

Errors a user can fix (a bad site config, a model that will not load, an unknown site or path) print one line to
stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import errno
import importlib
import io
import json
import logging
import logging.config
import os
import re
import shlex
import socket
import sqlite3
import sys
import unicodedata
from pathlib import Path
from typing import Any

from engine.frames import DoneFrame, EngineError
from genui.app import DEFAULT_DB, ROBOTS, SITES_DIR, OwnedEngine, base_clash, create_app, model_loading
from genui.arguments import (
    USAGE_ERROR,
    EngineLoader,
    UsageError,
    base_path,
    count,
    joined,
    loading_sites,
    located,
    made_here,
    misplaced,
    misplaced_before,
    model_id_of,
    no_sites,
    not_taken,
    robots_file,
    site_from,
    sites_here_too,
    sites_in,
)
from genui.hosts import WILDCARDS, allowed_hosts, allowed_name, is_loopback, network_address
from genui.pages import how_to_fit
from genui.prompts import SAMPLE_VALUES, PromptError, split_gaps
from genui.runtime import SiteRuntime
from genui.sanitize import ALLOWED_TAGS
from genui.scaffold import DEFAULT_DESCRIPTION, NoExample, create_site
from genui.sites import (
    Route,
    SiteConfigError,
    check_names,
    load_site,
    site_folders,
    suggested_name,
    valid_lang,
    valid_site_name,
)
from genui.store import NotAPageCache, fix_for
from genui.upkeep import add_commands

READ_AHEAD = 3  # pages linked from the newest page shown that genui serve writes while nobody waits
BROKEN_PIPE = 128 + 13  # the status a shell gives a writer whose reader went away (killed by SIGPIPE)
RUNS_PER_CLIENT = 3  # pages one client may have genui serve write at once
QUEUE = 8  # pages that may wait for genui's engine at once unless --queue says (the Scheduler's max_queue)
QUEUE_MOST = 1000
LOG_FORMATS = ("text", "json")  # genui serve --log-format: genui.logs.server_log_config's forms
POSTS_PER_MINUTE = 10  # readers' posts one client may store a minute under genui serve


def _default_loader(model: str | None, device: str | None, int8: bool) -> OwnedEngine:
    from engine import load_engine  # imports torch: only for the commands that need a model

    engine: OwnedEngine = load_engine(model=model, device=device, quantize="int8" if int8 else None)
    return engine


# -- commands ---------------------------------------------------------------------------------------------------


def _stopping_server(config: Any, app: Any, signals: list[int] | None = None) -> Any:
    """uvicorn's server for ``app``, which tells it as it begins to stop (SIGTERM, Ctrl+C): a request waiting for a
    page (a no-script client's wait URL) is answered then, to ask again, where the stop waited for its page. Each
    signal that stops it is added to ``signals``."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if signals is not None:
                signals.append(sig)
            loop.call_soon_threadsafe(app.state.pages.stopping.set)  # from a signal handler: through the loop
            super().handle_exit(sig, frame)

    loop = asyncio.get_running_loop()
    return Server(config)


GRACE_S = 10  # seconds a stop waits for requests under way before it cancels them (uvicorn waited for ever)
HEADERS_LIMIT = 64 * 1024  # bytes of a request's line and headers (nginx's default allows 4 headers of 8 KB, 32 KB)


WS_MESSAGE_LIMIT = 64 * 1024  # bytes of a message a stream's client sends (genui reads none; uvicorn's default: 16 MB)


def websockets_protocol() -> type[asyncio.Protocol]:
    """uvicorn's sans-I/O WebSocket protocol, taking a handshake as long as h11 takes a request (HEADERS_LIMIT), and
    answering one websockets refuses. Its own limit, 8 KB a line, refused a page's stream whose address was longer
    (a wiki title of 500 CJK characters, from a page like it: url= and from= at 9 bytes a character) or a browser's
    cookies of more than 8 KB; and uvicorn never sent the 414 or 431 websockets queued, so the socket neither opened
    nor closed, and the page never came (an adversarial client's review). websockets' limits are its http11 module's
    (read at each handshake; WEBSOCKETS_MAX_LINE_LENGTH and WEBSOCKETS_MAX_NUM_HEADERS set them as it is imported):
    raised here to h11's, whenever it was imported, and left where an operator set them higher."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    from websockets import http11

    http11.MAX_LINE_LENGTH = max(http11.MAX_LINE_LENGTH, HEADERS_LIMIT)
    http11.MAX_NUM_HEADERS = max(http11.MAX_NUM_HEADERS, HEADERS_LIMIT // 16)  # "a: b\r\n", a header at its least

    class Answering(WebSocketsSansIOProtocol):
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self.handshake_initiated and self.conn.handshake_exc is not None and not self.transport.is_closing():
                self.transport.write(b"".join(self.conn.data_to_send()))  # the refusal websockets wrote
                self.transport.close()

    return Answering


def _serve(args: argparse.Namespace, loader: EngineLoader) -> int:
    import uvicorn

    from genui.logs import server_log_config

    if args.log_format == "json" or not sys.stderr.isatty():
        # A progress bar's redrawn line is no JSON (a log store took each for a message), and in a service's log
        # (journald, a file) the model's load was a line of carriage returns and bars: a terminal still shows it.
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    broken: list[SiteConfigError] = []
    if args.reload and not args.site:  # a site that does not load is served once it does, at its name
        sites, broken = loading_sites(Path(args.sites_dir))
        for err in (problem for site_error in broken for problem in site_error.each):
            print(f"note: not served until it loads (edit it; --reload tries it again): {err}", file=sys.stderr)
    else:
        sites = sites_in(Path(args.sites_dir), args.site)
    if (clash := base_clash(args.base_path, sites, len(sites) == 1 and not broken)) is not None:
        raise UsageError(clash)
    if not args.site and (note := sites_here_too(args.sites_dir, "serve")) is not None:
        print(f"{note} serves them (this serves {args.sites_dir})", file=sys.stderr)
    _can_listen(args.host, args.port)  # before the model loads: a port in use stops nothing under way
    _say_where(args.host, args.port, args.allowed_host or [], args.base_path)

    async def serve() -> None:
        failed: list[Exception] = []

        def load_failed(error: Exception) -> None:  # the model will not load: stop, and say why as genui does
            failed.append(error)
            server.should_exit = True

        # genui's log as the server has it from here on: what making the app says (an earlier genui's posts moved to
        # a page's new address) is said too, not lost before uvicorn configures it
        log_config = server_log_config(args.reload, access_log=not args.no_access_log, form=args.log_format)
        logging.config.dictConfig(log_config)
        # The server answers at once and loads the model meanwhile: pages it has cached are served, others answer
        # 503 with Retry-After until then.
        app = create_app(
            sites,
            db_path=args.db,
            read_ahead=args.read_ahead,
            runs_per_client=args.runs_per_client,
            posts_per_minute=args.posts_per_minute,
            reload=args.reload,
            edits=not args.no_edits,
            metrics=not args.no_metrics,
            robots=ROBOTS if args.robots is None else args.robots,
            hosts=allowed_hosts(args.host, args.allowed_host or []),
            sites_dir=None if args.site else Path(args.sites_dir),  # sites named: no others join them
            mounted=bool(broken),  # each at /NAME, as once the others load (one served alone is at /)
            base_path=args.base_path,
            load_engine=lambda: queued(loader(args.model, args.device, args.int8), args.queue),
            identify_model=(lambda: model_id_of(args.model)) if loader is _default_loader else None,
            on_load_error=load_failed,
        )
        # uvicorn's default WebSocket implementation is websockets' deprecated legacy API; sans-I/O is current.
        # h11, not httptools: it refuses a request whose line and headers pass HEADERS_LIMIT (httptools read a 100 MB
        # header, and held the memory of ten unfinished ones, 1 GB, as long as their clients stayed).
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            http="h11",
            timeout_graceful_shutdown=GRACE_S,
            h11_max_incomplete_event_size=HEADERS_LIMIT,
            ws=websockets_protocol(),
            ws_max_size=WS_MESSAGE_LIMIT,
            log_config=log_config,
            access_log=not args.no_access_log,
        )
        server = _stopping_server(config, app, signals)
        await server.serve()
        if failed:
            raise failed[0]

    signals: list[int] = []
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:  # Ctrl+C: uvicorn stops, then raises it again
        _exit_if_loading(loader, 130)
        raise
    # uvicorn raises the signal again once it has stopped, but a Ctrl+C can reach asyncio's runner first, which then
    # returns (a test run on a busy machine): stopped by a signal while loading, the status says which, as a shell's
    _exit_if_loading(loader, 128 + signals[0] if signals else 0)
    return 0


def _say_where(host: str, port: int, named: list[str], base: str = "") -> None:
    """On an address other machines reach: the address they type (uvicorn says 0.0.0.0, which no browser opens),
    and whether every host name is answered (a workshop host's review). Under a base path, where the sites are:
    uvicorn names the server's root."""
    if is_loopback(host):
        if base:  # uvicorn names the server's root
            shown = f"[{host}]" if ":" in host else host
            print(f"note: the sites are under {base}/: http://{shown}:{port}{base}/", file=sys.stderr)
        return
    if host in WILDCARDS and port and (address := network_address(ipv6=host == "::")) is not None:
        shown = f"[{address}]" if ":" in address else address
        print(f"note: other machines on this network open http://{shown}:{port}{base}/", file=sys.stderr)
    if not named:
        print(
            "note: every host name is answered (off loopback, with no --allowed-host): a page on another site could"
            " reach this server through a name of its own (DNS rebinding); name this machine's with --allowed-host"
            " NAME (an IP address is always answered)",
            file=sys.stderr,
        )


def _exit_if_loading(loader: EngineLoader, code: int) -> None:
    """Leave the process at once where the server stopped while its model loads."""
    if loader is _default_loader and model_loading():
        # Stopped while the model loads: the interpreter's exit would tear torch down under the loading thread, and
        # the process abort ("terminate called without an active exception", status 134: a workshop host's
        # review). Nothing is left to keep: the page cache's writes are committed as they are made.
        print("genui serve: stopped while the model was loading", file=sys.stderr)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _render(args: argparse.Namespace, loader: EngineLoader) -> int:
    site = site_from(args.site, Path(args.sites_dir))
    runtime = SiteRuntime.build(site, "")
    location = located(site, args.path)
    if location.blank:  # as a server answers it: no page
        raise UsageError(
            f"{location.url} asks for nothing, and genui serve writes no page for it: give {location.route.asked} a"
            " value"
        )
    request = runtime.direct_request(location, args.seed, opening=not args.no_opening)
    if args.prompt:  # what the templates made of the page, as the model reads it: no model needed
        if args.json:
            print(json.dumps({"prompt": request.prompt, "opening": request.opening, "gaps": list(request.gaps)}))
            return 0
        print(request.prompt)
        if request.opening:
            print("--- the opening: the page starts with it, word for word ---")
            print(request.opening)
        for number, piece in enumerate(request.gaps, 1):
            print(f"--- after the model's words in gap {number}, the opening goes on ---")
            print(piece)
        return 0

    async def generate() -> DoneFrame:
        engine = loader(args.model, args.device, args.int8)
        try:
            if not engine.fits(request):  # said as genui serve says it: the engine's own words name no site.toml
                fix = how_to_fit(engine, request)
                raise UsageError(f"the prompt and opening of {site.name} {location.url} ({engine.model_id}): {fix}")
            async for frame in engine.stream(request):
                if isinstance(frame, DoneFrame):
                    return frame
            raise EngineError("the engine ended without a final frame")
        finally:
            await engine.close()

    done = asyncio.run(generate())
    html = runtime.render(done.text, on=location)
    if args.json:
        canvases = [{"steps": c.steps, "tokens": c.tokens, "seconds": round(c.seconds, 4)} for c in done.canvases]
        print(json.dumps({"html": html, "canvases": canvases, "seconds": round(done.seconds, 4)}))
    else:
        print(html)
    return 0


def _new(args: argparse.Namespace, loader: EngineLoader) -> int:
    if not valid_site_name(args.name):
        slug = suggested_name(args.name)
        instead = f"; try {slug}" if slug else ""
        raise UsageError(
            f"{args.name!r} is not a site name: it names the site's folder and its URL (/NAME/), so it is a lower case "
            f"letter, then up to 31 lower case letters, digits, - or _{instead} (the title visitors see is made "
            "from it, and site.toml's title may say anything)"
        )
    if args.description is not None and not args.description.strip():
        raise UsageError("--description is empty: give one line about the site, or leave the option out")
    control = args.title is not None and any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in args.title)
    if args.title is not None and (not args.title.strip() or control or len(args.title) > 100):
        raise UsageError("--title takes one line of text, 100 characters at most, or leave the option out")
    if args.lang is not None and not valid_lang(args.lang):
        raise UsageError(f"--lang {args.lang!r} is no language tag: write it as HTML names it (fr, ja, pt-BR)")
    try:
        site = create_site(args.name, args.description, args.dir, args.example, args.title, args.lang)
    except (FileExistsError, NoExample) as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # a --dir that cannot be made or written (/proc/x, a read-only disk)
        where = err.filename or Path(args.dir) / args.name
        raise UsageError(f"cannot write the site at {where}: {err.strerror or err} (--dir names where)") from None
    routes = f"{len(site.routes)} route{'s' if len(site.routes) != 1 else ''}"
    files = ["site.toml", f"prompts/ ({routes})", *([site.stylesheet] if site.stylesheet else [])]
    print(f"created {site.root}: {', '.join(files)}")
    folder = shlex.quote(str(Path(args.dir)))
    print(f"serve it with: genui serve --site {site.name} --sites-dir {folder}")
    if site.lang.split("-")[0].lower() != "en":
        print(
            f"its pages are {site.lang}, but its own text is English until you translate it: the headings of its"
            " openings (prompts/*_opening.j2), its [[navigation]] headings and labels, each route's bar label (bar ="
            " in its [[routes]]), reply_form and page_title, and genui's words (the toolbar, notices, error pages: a"
            " [words] table in site.toml); docs/sites.md lists each. The shipped model writes English"
        )
    print(
        "(add --reload while you edit it: each change is served from the next request on, with no restart; a genui"
        " serve --reload serving several sites of this folder, none named with --site, serves it too, at its name;"
        " any other running genui serve serves the sites it started with, so restart it to serve this one)"
    )
    print(f"before a demo, write its pages ahead: genui cache warm {site.name} --sites-dir {folder} --pages 20")
    print(
        "note: the default model learned the example sites' pages (a computing encyclopedia, a forum, a desktop): a"
        " new site gets their shape from it, but its pages are about computing whatever the brief says; pages on"
        " another subject need a model trained on them (docs/sites.md, docs/model.md)"
    )
    return 0


def _list(args: argparse.Namespace, loader: EngineLoader) -> int:
    folders = site_folders(args.sites_dir)
    if not folders:
        raise no_sites(args.sites_dir)
    failed = False
    sites, broken = [], []
    for folder in folders:  # each on its own: a slip in one site.toml says nothing of the others
        try:
            sites.append(load_site(folder))
        except SiteConfigError as error:
            broken.append((folder, error))
    if args.site:  # only these; a folder of a name asked for that does not load is said as one of them
        missing = [name for name in args.site if name not in {site.name for site in sites}]
        asked = [(folder, err) for folder, err in broken if folder.name in missing]
        for folder, unasked in broken:
            if (folder, unasked) not in asked:
                for problem in unasked.each:
                    print(f"note: left out, not asked for and not loading: {problem}", file=sys.stderr)
        if len(asked) < len(missing):  # a name no folder has (a slip: wikki), whatever else does not load
            unfound = next(name for name in missing if name not in {folder.name for folder, _ in asked})
            have = ", ".join(sorted(site.name for site in sites))
            said = f"no site named {unfound!r} under {args.sites_dir} (have: {have})"
            raise UsageError(said + made_here(unfound, args.sites_dir))
        sites, broken = [site for site in sites if site.name in args.site], asked
    for folder, reason in broken:
        print(f"{folder.name}  ({folder})")
        for problem in reason.each:  # each on a line of its own
            print(f"  does not load: {problem}")
        failed = True
    try:
        check_names(sites)
    except SiteConfigError as err:
        for problem in err.each:
            print(f"does not load: {problem}")
        failed = True
    for site in sites:
        print(f"{site.name}  {site.title}  ({site.root})")
        runtime = None
        try:
            runtime = SiteRuntime.build(site, "")  # its templates rendered with sample values, as genui serve does
        except SiteConfigError as err:
            for problem in err.each:
                print(f"  does not load: {problem}")
            failed = True
        model = site.model
        settings = [f"up to {model.tokens} tokens"]
        if model.steps is not None:
            settings.append(f"up to {model.steps} steps a canvas")
        if model.t_max is not None:
            settings.append(f"temperature {model.t_max:g} -> {model.t_min:g}")
        if model.entropy_bound is not None:
            settings.append(f"entropy bound {model.entropy_bound:g}")
        print(f"  model: {', '.join(settings)} (the rest from the model's generation_config.json)")
        if site.carry:
            print(f"  carries: {', '.join(site.carry)} (query keys its pages' links carry on)")
        # each column as wide as its longest, so a pattern of any length lines up
        patterns = [route.pattern + ("?" + "&".join(route.query) if route.query else "") for route in site.routes]
        pattern_width = max(map(len, patterns), default=0)
        template_width = max((len(route.template) for route in site.routes), default=0)
        for route, pattern in zip(site.routes, patterns, strict=True):
            flags = [f"context: {', '.join(route.context)}"]
            if route.opening:
                flags.append(f"opens with {route.opening}")
            if route.cache != "forever":
                flags.append(f"cache: {route.cache}")
            if route.posts:
                flags.append("readers may post")
            if route.follow_links:
                flags.append(f"follows links ({route.follow_links})")
            if not route.edits:
                flags.append("no edits")
            if route.aliases:
                flags.append(f"aliases: {', '.join(route.aliases)}")
            if route.form:
                flags.append(f"form: {', '.join(key for key, _ in route.form)}")
            print(f"  {pattern:<{pattern_width}}  {route.template:<{template_width}}  {'; '.join(flags)}")
            if len(route.query) > 1 and not route.params and route.bar is None and not route.form:
                print(
                    f"    note: no form in the site bar (it asks one query key, and this route has {len(route.query)}):"
                    " its pages are reached by links only; give it a form of its own (form = { fields = { key ="
                    ' "Label", ... } }), or bar = false to say so'
                )
            for name in runtime.prompts.left_out(route) if runtime is not None else ():
                shown = {"brief": "site.brief", "parent": "parent", "posts": "posts"}[name]
                print(
                    f"    note: its templates read {shown}, which its context leaves out (always empty here): add"
                    f' "{name}" to context = [...] if it should be there'
                )
            if runtime is not None and runtime.prompts.posts_unread(route):
                print(
                    f"    note: readers may post here (posts = true), but its templates never read posts: their posts"
                    f" are kept and shown, and never reach the model; read them in {route.template} (the forum's"
                    " thread.j2 does: docs/sites.md)"
                )
            if runtime is not None and (dropped := _dropped_from_opening(runtime, route)):
                print(
                    f"    note: its opening writes {', '.join(f'<{tag}>' for tag in dropped)}, which the sanitiser"
                    " leaves out of every page (a page holds no form or script of its own: docs/security.md)"
                )
        for index, section in enumerate(site.navigation):
            listed = next((route for route in site.routes if route.pattern == section.pages), None)
            if listed is not None and listed.cache == "none":
                print(
                    f"  note: navigation[{index}] lists the pages of {listed.pattern}, which are never stored"
                    ' (cache = "none"): it shows nothing'
                )
    if (note := sites_here_too(args.sites_dir, "sites")) is not None:
        print(f"{note} lists them", file=sys.stderr)
    return USAGE_ERROR if failed else 0


def _dropped_from_opening(runtime: SiteRuntime, route: Route) -> list[str]:
    """The tags a route's opening (rendered with sample values) writes that the sanitiser leaves out of its pages."""
    if route.opening is None:
        return []
    params, query = dict.fromkeys(route.params, SAMPLE_VALUES[0]), dict.fromkeys(route.query, SAMPLE_VALUES[1])
    try:
        first, after = split_gaps(runtime.prompts.opening(route, params, query))
    except PromptError:
        return []
    written = {tag.lower() for tag in _START_TAG.findall(first + "".join(after))}
    return sorted(written - ALLOWED_TAGS)


_START_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)")


# Commands that own their whole argument list: main() hands everything after the name to the module's main(argv).
# They are imported only when asked for, since most of them import torch.
DELEGATED = {
    "bench": (
        "lab.bench",
        "benchmark the engine: diffusion vs autoregressive on one page (up to 256 tokens, the same length each way)",
    ),
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genui", description="Generative UI: web sites whose pages are written on the fly by a diffusion model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def model_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--model",
            help="checkpoint folder or hub id: a DiffusionGemma checkpoint, a Llama-shaped causal LM, or a genui"
            " adapter (a folder with genui.json, which names its base; docs/engine.md, Loading) (default: the shipped"
            " models/genui-smollm adapter on its SmolLM2 base)",
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
    serve.add_argument("--port", type=port, default=8000, help="port to listen on (default: %(default)s)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        type=allowed_host,
        help="a name (a request's Host, port aside) this server answers for, any other refused: a reverse proxy's"
        " public name, a laptop's mylaptop.local (repeatable; '*' for any). Default: on a loopback --host,"
        " localhost, 127.0.0.1, ::1 and --host (a page on another site cannot reach it by DNS rebinding); on any"
        " other, every name, or those named and the loopback names. An IP address (http://192.168.1.23:8000) is"
        " answered whatever is named",
    )
    serve.add_argument(
        "--base-path",
        type=base_path,
        default="",
        metavar="PATH",
        help="write every address under this path (/demo: the sites at /demo/, genui's own files at /demo/_genui/), "
        "for a reverse proxy that serves genui beside other things on one host; it may pass each address on as it "
        "is or cut the path off (nginx: location /demo/ { proxy_pass http://127.0.0.1:8000; }; docs/security.md, "
        "which says what else a shared host needs). Default: the root",
    )
    serve.add_argument("--db", default=str(DEFAULT_DB), help="SQLite page cache (default: %(default)s)")
    serve.add_argument(
        "--read-ahead",
        type=count,
        default=READ_AHEAD,
        metavar="N",
        help="while no visitor waits, write those of the first N pages the newest page shown links to that are not "
        "stored yet, so a click on one is answered at once; 0 never does (default: %(default)s)",
    )
    serve.add_argument(
        "--runs-per-client",
        type=count,
        default=RUNS_PER_CLIENT,
        metavar="N",
        help="pages, replies and rewrites one client (an IP address; an IPv6 one's /64, but on the server's own link) "
        "may have written at once; one "
        "more is a 429 with Retry-After. Devices behind one NAT (a school's lab) are one client: there, 0. Behind a "
        "reverse proxy, it must send X-Forwarded-For, and one on another host must be named in the environment "
        "variable FORWARDED_ALLOW_IPS; else every visitor counts as one client. 0: no limit (default: %(default)s)",
    )
    serve.add_argument(
        "--queue",
        type=queue_length,
        metavar="N",
        help="pages that may wait for the model at once; one more is a busy page that asks again by itself once the "
        "engine expects room, a few seconds on (a workshop of twenty: --queue 20 keeps each in line rather than "
        f"retrying; each waits for the pages before it, four at a time) (default: the engine's own, {QUEUE} for "
        "genui's)",
    )
    serve.add_argument(
        "--posts-per-minute",
        type=count,
        default=POSTS_PER_MINUTE,
        metavar="N",
        help="readers' posts one client (an address, as for --runs-per-client: a NAT's devices are one) may store in "
        "any 60 s; one more is a 429 with Retry-After that keeps what was typed. 0: no limit (default: %(default)s)",
    )
    serve.add_argument(
        "--no-edits",
        action="store_true",
        help="visitors only read pages and post replies: no Regenerate, section rewrite, variations or making an "
        "older version the newest (on a public "
        "server, a rewrite's instruction is anyone's to give, and the new version is what every visitor sees next)",
    )
    serve.add_argument(
        "--no-access-log",
        action="store_true",
        help="log no line for each request (uvicorn's access log, on stdout, records each path and query: a search's "
        "words, a terminal's commands; a reverse proxy keeps its own); genui's warnings and errors are logged still",
    )
    serve.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: a line a message, with its time (the default); json: one JSON object a line (time, level, logger, "
        "message; an access line's client, method, path and status as fields, and a WebSocket's line's: method "
        "WebSocket, status 101 where accepted), for a log store",
    )
    serve.add_argument(
        "--no-metrics",
        action="store_true",
        help="answer no /_genui/metrics (Prometheus's format: how busy the server is, how many pages and posts each "
        "site has had; open to whoever reaches the server, as /_genui/health is)",
    )
    serve.add_argument(
        "--robots",
        type=robots_file,
        metavar="FILE",
        help="serve this file at /robots.txt (default: one that asks every crawler to keep off, since each page a "
        "crawler asks for is one the model writes)",
    )
    serve.add_argument(
        "--reload",
        action="store_true",
        help="for working on a site: load a site again when its site.toml, prompts or stylesheet change, with no "
        "restart (a config that fails to load is shown on its pages, to every visitor, paths included, so not on a "
        "public server; the last good one is served); where several sites are served and none was named with "
        "--site, a site made in the sites folder meanwhile (genui new) is served too, at /NAME (under --base-path)",
    )
    model_options(serve)
    serve.set_defaults(run=_serve)

    render = commands.add_parser(
        "render",
        help="write one page and print its final sanitised HTML",
        description="Write one page of a site and print its final sanitised HTML (no cache, no server).",
    )
    render.add_argument("site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    render.add_argument(
        "path",
        metavar="PATH",
        help="site-relative URL, e.g. /Hash_table or '/search?q=lisp', or a page's address as a browser shows it",
    )
    render.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    render.add_argument(
        "--json", action="store_true", help='print {"html", "canvases": [{steps, tokens, seconds}], "seconds"}'
    )
    render.add_argument(
        "--no-opening",
        action="store_true",
        help="leave out the route's opening (site.toml), so the model writes the whole page",
    )
    render.add_argument(
        "--prompt",
        action="store_true",
        help="print the prompt and the opening the model would be given, and load no model (with --json: "
        '{"prompt", "opening", "gaps"}); a page asked for with no parent page or readers\' posts, as a typed URL is',
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
    new.add_argument(
        "name", metavar="NAME", help="site name: a lower case letter, then up to 31 lower case letters, digits, - or _"
    )
    new.add_argument(
        "--description",
        help=f"one line about the site: the prompts' brief (default: {DEFAULT_DESCRIPTION!r}, or the example's own)",
    )
    new.add_argument(
        "--from",
        dest="example",
        metavar="SITE",
        help="start from an example site by its name (forum, os, wiki) or a site folder by its path (./wiki is "
        "yours, wiki is genui's; a name that is no example is also looked for in --dir): its routes, prompts, "
        "openings, navigation and stylesheet under the new name (default: a blank wiki-like site)",
    )
    new.add_argument("--title", help="the title visitors see (default: made from NAME: my-shop is 'My Shop')")
    new.add_argument(
        "--lang",
        metavar="TAG",
        help="the pages' language as HTML names it (fr, ja, pt-BR): site.toml's lang. The site's own text (its "
        "openings' headings, its navigation) and genui's words (the toolbar: [words], docs/sites.md) stay English "
        "until you translate them; default: English, or the example's",
    )
    new.add_argument("--dir", default="sites", help="folder to create the site in (default: %(default)s)")
    new.set_defaults(run=_new)

    listing = commands.add_parser(
        "sites",
        help="list sites, their model settings and routes, and say which do not load",
        description="List sites, their model settings and their routes.",
    )
    listing.add_argument("--sites-dir", default=str(SITES_DIR), help="folder of site folders (default: %(default)s)")
    listing.add_argument(
        "--site",
        action="append",
        metavar="NAME",
        help="only this site (repeatable); the others are not checked, and one that does not load is only noted",
    )
    listing.set_defaults(run=_list)

    add_commands(commands)

    # Listed for --help only; main() hands everything after the command's name to its module untouched.
    for name, (_, summary) in DELEGATED.items():
        commands.add_parser(name, help=f"{summary} (genui {name} --help)", add_help=False)
    _exact(parser)
    return parser


def _can_listen(host: str, port: int) -> None:
    """UsageError saying what stands in the way of a server on ``host`` and ``port``, if anything does: uvicorn
    found out only after the model had begun to load, and exited 3 with `[Errno 98] ... address already in use`. A
    socket is bound there and let go (uvicorn binds its own, and says where it serves)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds it (`localhost`: 127.0.0.1)
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][4]
    except (socket.gaierror, UnicodeError):
        raise UsageError(f"--host {host}: no address of this machine by that name (127.0.0.1 or 0.0.0.0?)") from None
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
    try:
        listening.bind(address)
    except OSError as err:
        listening.close()
        where = f"{host}:{port}"
        if err.errno == errno.EADDRINUSE:
            raise UsageError(
                f"{where} is in use (another genui serve?): stop what holds it, or pass --port N"
            ) from None
        if err.errno == errno.EACCES:
            raise UsageError(
                f"{where}: not allowed to listen there (ports below 1024 need root): pass --port N"
            ) from None
        raise UsageError(
            f"cannot listen on {where}: {err.strerror} (--host names an address of this machine)"
        ) from None
    listening.close()


def queue_length(text: str) -> int:
    """A --queue: 1 to QUEUE_MOST pages."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= QUEUE_MOST:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {QUEUE_MOST}, got {text!r}")
    return value


def queued(engine: OwnedEngine, length: int | None) -> OwnedEngine:
    """``engine`` with ``length`` pages let wait at once (--queue), where it has a queue (the Scheduler's
    max_queue); None leaves the queue the loader gave it (bench/load.py's engine has one of 2)."""
    if length is not None and hasattr(engine, "max_queue"):
        engine.max_queue = length
    return engine


def allowed_host(text: str) -> str:
    """An --allowed-host value (genui.hosts.allowed_name)."""
    try:
        return allowed_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _exact(parser: argparse.ArgumentParser) -> None:
    """No option is taken from its first letters, here or in any command's parser: `genui sites --site wiki` read
    as `--sites-dir wiki` said there were no sites under wiki."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _exact(command)


def _actions(parser: argparse.ArgumentParser) -> dict[str, frozenset[str]]:
    """Each command's actions (``cache``: show, prune, ...), to the command's name."""
    found: dict[str, frozenset[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[name] = frozenset(
                    choice
                    for inner in command._actions
                    if isinstance(inner, argparse._SubParsersAction)
                    for choice in inner.choices
                )
    return found


def _escaping_what_cannot_be_shown() -> None:
    """Output in an encoding that cannot say every character (Windows' cp1252, a file redirected there) says what it
    cannot as ``\\u6771`` escapes: a Japanese site's title ended `genui sites` as "an argument is not UTF-8 text", and
    ended `genui cache forget` so after it had forgotten the page (a review of sites in other languages)."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or stream.errors != "strict":
            continue
        with contextlib.suppress(LookupError, TypeError):
            if codecs.lookup(stream.encoding).name != "utf-8":
                stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None, *, load_engine: EngineLoader | None = None) -> int:
    """Run the genui command. ``load_engine`` replaces the default model loader (tests pass a fake)."""
    argv = sys.argv[1:] if argv is None else argv
    _escaping_what_cannot_be_shown()
    if argv[:1] and argv[0] in DELEGATED:
        return _delegate(argv[0], argv[1:])
    parser = _parser()
    if (problem := misplaced_before(argv, _actions(parser))) is not None:
        print(f"genui {argv[0]}: {problem}", file=sys.stderr)
        return USAGE_ERROR
    args, extras = parser.parse_known_args(argv)
    if extras and not_taken(args, extras) is None:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    args = joined(args)
    if (problem := not_taken(args, extras) or misplaced(args)) is not None:
        print(f"genui {args.command}: {problem}", file=sys.stderr)
        return USAGE_ERROR
    try:
        code: int = args.run(args, load_engine or _default_loader)
    except (UsageError, SiteConfigError, EngineError, NotAPageCache) as err:
        for line in err.each if isinstance(err, SiteConfigError) else (err,):  # a config's problems, a line each
            print(f"genui {args.command}: {line}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # what reads the output stopped (`genui sites | head`): as a shell's writer, quietly
        # (its unwritten output goes nowhere, not into an error at the interpreter's exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except OSError as err:  # a path that is not there, not a folder, not allowed or too long
        print(f"genui {args.command}: {err}", file=sys.stderr)
        return USAGE_ERROR
    except sqlite3.DatabaseError as err:  # a file that is no database, held by another process, full, read-only
        db = getattr(args, "db", None)
        print(f"genui {args.command}: {db or 'the database'}: {err}; {fix_for(err, db)}", file=sys.stderr)
        return USAGE_ERROR
    except UnicodeEncodeError as err:  # an argument of bytes that are not UTF-8 (a site, a path, a URL)
        print(
            f"genui {args.command}: an argument is not UTF-8 text ({err.object[err.start : err.end]!a})",
            file=sys.stderr,
        )
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
