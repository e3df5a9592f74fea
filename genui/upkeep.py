"""``genui cache`` and ``genui posts``: the page cache's upkeep from the command line (what it holds, pruning,
forgetting a page, warming a site) and the moderation of readers' posts."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import sqlite3
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from genui.app import DEFAULT_DB, SITES_DIR
from genui.arguments import (
    MOST,
    USAGE_ERROR,
    EngineLoader,
    UsageError,
    count,
    days,
    located,
    model_id_of,
    shared,
    site_from,
    sites_in,
)
from genui.cache import EARLIER, OTHER_MODEL, OTHER_SITE, Standing, columns, counted, size_text, standings, table
from genui.routing import url_path
from genui.runtime import SiteRuntime
from genui.sites import Site, site_folders, valid_site_name
from genui.store import (
    ListedPage,
    NotAPageCache,
    PageGroup,
    PlacedPost,
    SiteRenameRefused,
    Store,
    check_page_cache,
    fix_for,
    is_busy,
    private_file,
)
from genui.upgrade import bring_up_to_date, carry_threads, moved_paths, pending, threads_to_carry

DAY_S = 86_400.0
FLUSH_TRIES, FLUSH_PAUSE_S = 5, 0.5  # a deletion's write-ahead log emptied: tries, and the pause between them


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cache`` and ``posts`` to the genui command."""
    cache = commands.add_parser(
        "cache",
        help="what the page cache holds; prune pages no server looks up again, forget one, warm a site's, export "
        "them as static HTML, or back it up",
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
    pages = cache_actions.add_parser(
        "pages",
        help="the pages a server of these sites on this model shows, newest first",
        description="The pages a server of these sites on this model shows, newest first: each page's address (as "
        "genui cache forget takes it), title, how many versions it has, when its newest was written and "
        "when it was last shown from the cache (-: not since it was written), and a thread's readers' posts. Pages of "
        "earlier configs and other models are counted by genui cache show.",
    )
    pages.add_argument("--limit", type=count, default=50, metavar="N", help="at most N, 0 for all (default: 50)")
    prune = cache_actions.add_parser(
        "prune",
        help="delete the pages of earlier configs, and with --unseen those nobody was shown for a while",
        description="Delete the pages written from earlier configs, which no server of these sites looks up again, "
        "and with --unseen those nobody was shown for a while. Readers' posts are kept. Safe beside a server that "
        "serves the sites as they are on disk (one still running an earlier config writes its pages again).",
    )
    prune.add_argument(
        "--other-models",
        action="store_true",
        help="also delete the pages models other than --model's wrote (with no --model, refused where another model"
        " wrote a site's newest page: most likely the one its server runs)",
    )
    prune.add_argument(
        "--unseen",
        type=days,
        metavar="DAYS",
        help="also delete every version of each page neither written nor shown in the last DAYS days, by any model"
        " or config (threads that hold readers' posts are kept): a public server's cache, run daily from cron",
    )
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
        "(or genui serve reading ahead) writes it again: from the same prompt (model, config, parent page) the same "
        "page as its first version was, written with seed 0 (Regenerate writes another). A later version a server "
        "is writing meanwhile is not stored (whoever watches it is told so), and the page's next visit writes "
        "version 1; a first version being written meanwhile is stored, as the next visit would have written it.",
    )
    forget.add_argument("page_site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    forget.add_argument(
        "path",
        metavar="PATH",
        help="the page's site-relative URL, e.g. /Hash_table, or its address as a browser shows it",
    )
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
    warm_up.add_argument(
        "paths", nargs="*", metavar="PATH", help="site-relative URLs (or addresses) to start from (default: /)"
    )
    warm_up.add_argument(
        "--pages", type=count, default=10, metavar="N", help="write at most N new pages (default: %(default)s)"
    )
    warm_up.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available, else cpu)")
    warm_up.add_argument("--int8", action="store_true", help="run a causal LM's linear layers in int8 on the CPU")
    export = cache_actions.add_parser(
        "export",
        help="write a site's cached pages as static HTML files",
        description="Write the pages the cache holds for a site, as it is configured now, on the model named, as a "
        "folder of static HTML files: the newest version of each, with no scripts, forms or toolbar, and links "
        "between them made relative, so that any static web host, or a browser opening index.html, shows them with "
        "no server and no model. A link to a page not in the copy keeps its look and leads to the copy's list of "
        "its pages. Readers' posts "
        "in the pages, their names and text, are in the copy: it publishes them. Write the pages first (genui serve, "
        "genui cache warm SITE).",
    )
    export.add_argument("export_site", metavar="SITE", help="site name (under --sites-dir) or a site folder")
    export.add_argument("out", metavar="DIR", help="the folder to write: missing or empty (or see --replace)")
    export.add_argument(
        "--replace",
        action="store_true",
        help="DIR may hold a copy genui cache export wrote before: the new copy is written beside it and takes its"
        " place once whole, so that a web server serving DIR shows the one or the other, never half of each; a"
        " failed copy leaves the earlier one as it was, and files of yours beside the copy (CNAME, .git) stay. A"
        " folder of other files is refused",
    )
    export.add_argument(
        "--page",
        action="append",
        metavar="PATH",
        help="only this page (repeatable): its site-relative URL or address, as genui cache pages lists it; links to"
        " the others lead to the copy's list of its pages",
    )
    backup = cache_actions.add_parser(
        "backup",
        help="copy the page cache, posts included, whole, while a server runs",
        description="Copy the page cache, readers' posts included, into a new file, whole and consistent as it is "
        "at one moment, while a server goes on writing (SQLite's online backup; a copy of the file alone with cp "
        "can lack what its -wal holds, or be damaged). The copy is checked before the command ends. To restore "
        "one: stop genui, delete the page cache's -wal and -shm files, put the copy in its place, start genui.",
    )
    backup.add_argument("backup_out", metavar="FILE", help="the file to write: one that does not exist yet")
    rename = cache_actions.add_parser(
        "rename",
        help="move a site's pages and readers' posts to its new name",
        description="Move what the page cache holds for a site, its pages with their versions and its readers' "
        "posts, from its old name to its new one, after its site.toml's name changed: a server looks up a site's "
        "pages and posts by its name, and left the old name's behind (genui serve's log says so). Stop the server "
        "first (one still serving the old name goes on writing under it), then start it again. Refused where the "
        "new name holds readers' posts, or pages unless --replace.",
    )
    rename.add_argument("old_name", metavar="OLD", help="the name the pages and posts are stored under")
    rename.add_argument("new_name", metavar="NEW", help="the site's name now")
    rename.add_argument(
        "--replace",
        action="store_true",
        help="first delete the pages written under the new name since the rename (never a reader's post)",
    )
    shared(
        [cache, show, pages, prune, forget, warm_up, export, backup, rename],
        "--db",
        default=str(DEFAULT_DB),
        help=f"SQLite page cache (default: {DEFAULT_DB})",
    )
    shared(
        [cache, show, pages, prune, forget, warm_up, export],
        "--sites-dir",
        default=str(SITES_DIR),
        help=f"folder of site folders (default: {SITES_DIR})",
    )
    shared([cache, show, pages, prune], "--site", action="append", metavar="NAME", help="only this site (repeatable)")
    shared(
        [cache, show, pages, prune, warm_up, export],
        "--model",
        help="the model a server runs: checkpoint folder or hub id (default: the shipped models/genui-smollm)",
    )
    shared(
        [cache, show, pages],
        "--json",
        action="store_true",
        default=False,
        help="print as JSON (show: the groups and post counts; pages: every page listed)",
    )

    posts = commands.add_parser(
        "posts",
        help="list readers' posts, newest first, or delete some (moderation)",
        description="Readers' posts, newest first, with their ids; or delete some.",
    )
    post_actions = posts.add_subparsers(dest="action", metavar="ACTION")
    posts.set_defaults(run=_posts, action="show")
    listed = post_actions.add_parser(
        "show",
        help="readers' posts, newest first (the default)",
        description="Readers' posts, newest first, with their ids, sites and threads.",
    )
    delete = post_actions.add_parser(
        "delete",
        help="delete posts, and the versions of their threads that read or show them",
        description="Delete posts, each with every version of its thread from the first that may have read it or "
        "shows it, so that no page keeps its text; the thread's next visit answers the posts left. A reply under "
        "way that read a deleted post is not stored; whoever watches it is told so. The replies written to the "
        "thread's later posts go with those versions, and the next visit answers those posts again in one run: "
        "--dry-run says how many first.",
    )
    delete.add_argument("ids", nargs="*", type=count, metavar="ID", help="the posts' ids, as genui posts lists them")
    delete.add_argument(
        "--older-than",
        type=days,
        metavar="DAYS",
        help="in place of ids: every post made more than DAYS days ago (of --site's, --thread's or --user's only, if"
        " given), oldest first; a retention period, run daily from cron",
    )
    delete.add_argument(
        "--dry-run",
        action="store_true",
        default=False,
        help="say what each deletion would take (each as if alone), and delete nothing",
    )
    shared([posts, listed, delete], "--db", default=str(DEFAULT_DB), help=f"SQLite page cache (default: {DEFAULT_DB})")
    shared([posts, listed, delete], "--site", metavar="NAME", help="only this site's posts")
    shared(
        [posts, listed, delete],
        "--thread",
        metavar="PATH",
        help="only this thread's, e.g. /r/lisp/Macros (with --site: any URL of it, its address in a browser too)",
    )
    shared(
        [posts, listed, delete],
        "--sites-dir",
        default=str(SITES_DIR),
        help=f"folder of site folders, for --thread (default: {SITES_DIR})",
    )
    shared(
        [posts, listed, delete],
        "--user",
        metavar="NAME",
        help="only the posts made under this name, as the listing writes it (delete: in place of ids, every one of"
        " them, a spammer's; --site, --thread and --older-than narrow it)",
    )
    shared(
        [posts, listed],
        "--text",
        metavar="WORDS",
        help="only the posts holding these words (letter case and line breaks aside), e.g. to find the posts that"
        " quoted one",
    )
    shared([posts, listed], "--limit", type=count, default=50, metavar="N", help="at most N, 0 for all (default: 50)")
    shared([posts, listed], "--json", action="store_true", default=False, help="print the posts as JSON")


def _cache(args: argparse.Namespace, loader: EngineLoader) -> int:
    if args.action == "warm":
        return _warm(args, loader)
    if args.action == "export":
        return _export(args)
    if args.action == "backup":
        return _backup(Path(args.db), Path(args.backup_out))
    if args.action == "rename":
        return _rename(Path(args.db), args.old_name, args.new_name, args.replace)
    store = _open_store(Path(args.db))
    try:
        if args.action == "forget":
            return _forget(args, store)
        if args.action == "pages":
            return _pages(args, store)
        return (_prune if args.action == "prune" else _show)(args, store)
    finally:
        store.close()


def _rename(db: Path, old: str, new: str, replace: bool) -> int:
    """``genui cache rename``: a site's pages and posts stored under its new name."""
    if old == new:
        raise UsageError(f"{old!r} is already the name: name the site's old name, then its new one")
    if not valid_site_name(new):
        raise UsageError(
            f"{new!r} is no site's name: a lower case letter, then up to 31 lower case letters, digits, -"
            " or _, as the site's site.toml names it"
        )
    store = _open_store(db)
    try:
        pages, posts, replaced = store.rename_site(old, new, replace=replace)
    except SiteRenameRefused as refused:
        raise UsageError(str(refused)) from None
    finally:
        store.close()
    deleted = f", after deleting {counted(replaced, 'page version')} of {new}'s" if replaced else ""
    print(f"{old} is {new} now: {counted(pages, 'page version')} and {counted(posts, 'reader post')} moved{deleted}")
    return 0


def _backup(db: Path, out: Path) -> int:
    """``db`` copied whole into ``out`` by SQLite's backup (Store.copy_to), then checked: what a server commits
    meanwhile is in the copy or not, never in part."""
    if out.exists():
        raise UsageError(f"{out} exists: name a new file (a backup never writes over one)")
    if not out.parent.is_dir():
        raise UsageError(f"no folder {out.parent} to write {out.name} in")
    _checked(db)
    # Read as it is, not through Store, which brings an earlier genui's file up to today's layout: a backup changed
    # the file it copied, and failed on an earlier genui's read-only one (an operator's upgrade review)
    try:
        private_file(out)  # the posts in it as private as in the page cache
        with (
            contextlib.closing(sqlite3.connect(db, timeout=COMMAND_BUSY_TIMEOUT_S)) as source,
            contextlib.closing(sqlite3.connect(out)) as copy,
        ):
            source.backup(copy)
            (verdict,) = copy.execute("PRAGMA quick_check").fetchone()
            (posts,) = copy.execute("SELECT COUNT(*) FROM posts").fetchone()
            (versions,) = copy.execute("SELECT COUNT(*) FROM pages").fetchone()
    except (sqlite3.Error, OSError) as err:
        out.unlink(missing_ok=True)
        raise UsageError(f"cannot copy {db} to {out}: {err}") from None
    if verdict != "ok":
        raise UsageError(f"the copy in {out} does not check out ({verdict}): {db} may be damaged; keep {out} aside")
    print(
        f"{db} -> {out}: {size_text(out.stat().st_size)}, {counted(versions, 'page version')}, {counted(posts, 'post')}"
    )
    return 0


COMMAND_BUSY_TIMEOUT_S = 5.0  # a command waits longer than the server (whose wait holds every visitor's request)


def _open_store(db: Path) -> Store:
    """The page cache at ``db``, or UsageError when there is none (a file genui serve did not make is left alone)."""
    _checked(db)
    return Store(db, busy_timeout=COMMAND_BUSY_TIMEOUT_S)


def _checked(db: Path) -> None:
    """UsageError unless ``db`` is a page cache this genui may open, checked as it is."""
    if not db.is_file():
        raise UsageError(f"no page cache at {db} (genui serve makes it; pass --db to name another)")
    try:
        check_page_cache(db, earlier=True)  # checked whole before Store touches the file (WAL, added columns, tables)
    except sqlite3.OperationalError as err:  # locked, or a read-only folder where SQLite cannot make its -shm file
        raise UsageError(f"cannot read {db}: {err}; {fix_for(err, db)}") from None
    except NotAPageCache as err:
        raise UsageError(str(err)) from None


def _standings(
    args: argparse.Namespace, store: Store, trial: bool
) -> tuple[list[Standing], list[Standing], list[tuple[str, str, str]]]:
    """Every group of cached pages with its standing, those prune deletes, and the (site, path, query) of each page
    stored under a URL the site's routes now move to another page's (prune deletes them too). What an earlier genui
    or config stored is brought up to date first, as a server would (genui.upgrade); on a copy of the page cache
    when ``trial`` (what the command says changes nothing)."""
    sites = sites_in(Path(args.sites_dir), args.site)
    _served_here(store, sites)
    runtimes = [SiteRuntime.build(site, "") for site in sites]
    model = model_id_of(args.model)
    others = _prunes_other_models(args)
    if trial and any(
        pending(store, runtime) or threads_to_carry(store, runtime, model, other_models=others) for runtime in runtimes
    ):
        with _trial_copy(store) as copy:
            return _judged(args, copy, runtimes, model)
    return _judged(args, store, runtimes, model)


@contextlib.contextmanager
def _trial_copy(store: Store) -> Iterator[Store]:
    """A copy of the page cache, in a temporary folder, to bring up to date where the command writes nothing."""
    with tempfile.TemporaryDirectory(prefix="genui-trial-") as folder:
        try:
            copy = store.copy_to(Path(folder) / "copy.sqlite3")
        except sqlite3.OperationalError as err:  # the temporary folder's disk, not the page cache's
            raise UsageError(
                f"cannot copy the page cache into {folder} to show what would change: {err}; give TMPDIR a folder with"
                " room for a copy"
            ) from None
        try:
            yield copy
        finally:
            copy.close()


def _served_here(store: Store, sites: list[Site]) -> None:
    """UsageError for a site that a server last served from another folder, still there: its pages would be judged
    by another site's routes (a `genui new wiki --dir mine` served with --sites-dir mine, judged by the bundled
    wiki's: every page an earlier config's, to prune)."""
    for site in sites:
        served = store.served_from(site.name)
        if served is not None and served != site.root.resolve() and (served / "site.toml").is_file():
            raise UsageError(
                f"{site.name} was last served from {served}, not {site.root}: name its folder with --sites-dir"
                f" {served.parent} (a server started from {site.root} makes that the one)"
            )


def _prunes_other_models(args: argparse.Namespace) -> bool:
    """Whether prune deletes other models' pages besides an earlier config's (--other-models): a thread another model
    wrote under today's config is otherwise that model's, served as it is by its server, and not carried."""
    return bool(getattr(args, "other_models", False))


def _judged(
    args: argparse.Namespace, store: Store, runtimes: list[SiteRuntime], model: str
) -> tuple[list[Standing], list[Standing], list[tuple[str, str, str]]]:
    stranded = []
    for runtime in runtimes:  # what an earlier genui stored is looked up again under today's keys: not to be pruned
        stranded += [(runtime.site.name, path, query) for path, query in bring_up_to_date(store, runtime)]
        # a thread's conversation, written under what prune deletes
        carry_threads(store, runtime, model, other_models=_prunes_other_models(args))
    found = standings(store.page_groups(), runtimes, model)
    doomed = [s for s in found if s.state == EARLIER or (args.other_models and s.state == OTHER_MODEL)]
    return found, doomed, stranded


def _stranded_line(stranded: list[tuple[str, str, str]]) -> str:
    named = ", ".join(f"{site} {shown(path)}" for site, path, _ in stranded[:3])
    more = ", ..." if len(stranded) > 3 else ""
    return f"{counted(len(stranded), 'page')} stored under a URL that now leads to another copy of it ({named}{more})"


def _show(args: argparse.Namespace, store: Store) -> int:
    found, doomed, stranded = _standings(args, store, trial=True)
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
        moved = [{"site": site, "path": path, "query": query} for site, path, query in stranded]
        print(json.dumps({"db": str(args.db), "groups": groups, "posts": posts, "stranded": moved}))
        return 0
    print("\n".join(table(found)) if found else f"no pages in {args.db}")
    print(f"readers' posts: {', '.join(f'{site} {n}' for site, n in posts.items()) or 'none'}")
    if doomed:
        size, versions = size_text(sum(s.group.size for s in doomed)), sum(s.group.versions for s in doomed)
        print(f"genui cache prune would delete {counted(versions, 'version')} ({size} of HTML)")
    if stranded:
        print(f"{_stranded_line(stranded)}: genui cache prune deletes them")
    here = Path("sites")  # where genui new writes a site, from the folder it is run in
    unjudged = {s.group.site for s in found if s.state == OTHER_SITE}
    if here.resolve() != Path(args.sites_dir).resolve() and here.is_dir():
        mine = sorted(unjudged & {folder.name for folder in site_folders(here)})
        if mine:  # a hackathon's own site, its pages listed as another's: say where its folder is, as genui sites does
            print(
                f"note: ./sites holds {', '.join(mine)}, listed as {OTHER_SITE}: add --sites-dir sites", file=sys.stderr
            )
    return 0


def _pages(args: argparse.Namespace, store: Store) -> int:
    sites = sites_in(Path(args.sites_dir), args.site)
    _served_here(store, sites)
    model = model_id_of(args.model)
    runtimes = [SiteRuntime.build(site, "") for site in sites]
    if any(pending(store, runtime) or threads_to_carry(store, runtime, model) for runtime in runtimes):
        with _trial_copy(store) as copy:  # as a server would find them: an earlier genui's pages under today's keys
            for runtime in runtimes:
                bring_up_to_date(copy, runtime)
                carry_threads(copy, runtime, model)
            found = _listed(copy, runtimes, model)
    else:
        found = _listed(store, runtimes, model)
    limit = args.limit or len(found)
    more = len(found) > limit
    found = found[:limit]
    if more:
        print(f"note: the newest {counted(limit, 'page')}; more are stored: --limit 0 lists them all", file=sys.stderr)
    if args.json:
        rows = [
            {"site": site, "url": url, **asdict(page), "posts": posts, "route": route}
            for site, route, url, page, posts in found
        ]
        print(json.dumps({"db": str(args.db), "model": model, "pages": rows, "more": more}))
        return 0
    with contextlib.suppress(AttributeError, ValueError):  # a terminal or file that cannot show a letter: escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    if not found:
        print(f"no pages of {', '.join(runtime.site.name for runtime in runtimes)} by {model} in {args.db}")
        return 0
    header = ("site", "address", "title", "versions", "written", "last shown", "posts")
    lines = [
        (
            site,
            shown(url),
            _cut(shown(page.title)) or "-",
            str(page.versions),
            _when(page.created),
            _when(page.seen) if page.seen is not None else "-",
            "" if posts is None else str(posts),
        )
        for site, _, url, page, posts in found
    ]
    print("\n".join(columns(header, lines)))
    return 0


def _listed(
    store: Store, runtimes: list[SiteRuntime], model: str
) -> list[tuple[str, str, str, ListedPage, int | None]]:
    """(site, route pattern, address, page, a thread's posts) of each page the sites' routes as they are now show
    on ``model``, newest first."""
    found = []
    for runtime in runtimes:
        site = runtime.site
        threads = store.posts_by_thread(site.name) if any(route.posts for route in site.routes) else {}
        for route in site.routes:
            for page in store.listed(site.name, model, runtime.prompts.version(route)):
                url = f"{url_path(page.path)}?{page.query}" if page.query else url_path(page.path)
                posts = threads.get(page.path, 0) if route.posts else None
                found.append((site.name, route.pattern, url, page, posts))
    return sorted(found, key=lambda row: -row[3].created)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _cut(title: str, most: int = 40) -> str:
    return title if len(title) <= most else title[: most - 1] + "…"


def _prune(args: argparse.Namespace, store: Store) -> int:
    if args.other_models and args.model is None:
        _not_the_served_model(args, store)
    _, doomed, stranded = _standings(args, store, trial=args.dry_run)
    if args.dry_run:
        pages, versions = sum(s.group.urls for s in doomed), sum(s.group.versions for s in doomed)
        print(f"would delete {counted(versions, 'version')} of {counted(pages, 'page')}; readers' posts are kept")
        if stranded:
            print(f"and {_stranded_line(stranded)}")
        if args.unseen is not None:  # (those of the earlier configs counted once, above)
            besides = [standing.group for standing in doomed]
            print(f"and {_unseen_line(args, *_unseen(args, store, delete=False, besides=besides))}")
        return 0
    deleted = sum(store.delete_group(s.group) for s in doomed)
    deleted += sum(store.forget(site, path, query) for site, path, query in stranded)
    print(f"deleted {counted(deleted, 'version')}; readers' posts are kept")
    if args.unseen is not None:
        print(f"and {_unseen_line(args, *_unseen(args, store, delete=True))}")
    if not args.vacuum:
        _flushed(store)
    if args.vacuum:
        before = _on_disk(Path(args.db))
        try:
            shrunk = store.vacuum()
        except sqlite3.OperationalError as err:  # the rows are gone all the same: their space is reused
            if is_busy(err):
                fix = ": stop the server that uses it, and prune again"
            elif "full" in str(err):
                fix = ": VACUUM needs about the file's size free on its disk; make room, and prune again"
            else:
                fix = ""
            raise UsageError(f"the file was not shrunk ({err}){fix}") from None
        after = size_text(_on_disk(Path(args.db)))
        later = "" if shrunk else " (it shrinks once the server reading it lets go: stop it first next time)"
        print(f"{args.db}: {size_text(before)} -> {after}{later}")
    return 0


def _not_the_served_model(args: argparse.Namespace, store: Store) -> None:
    """UsageError where --other-models, with no --model named, would delete the pages of the model that wrote a
    site's newest page: most likely the one its server runs, which is not the default (a demo's curator who served
    another checkpoint, and ran prune --other-models from a cron line without --model, lost every page of it)."""
    from engine.identity import DEFAULT_MODEL  # no torch

    model = model_id_of(None)
    for site in sites_in(Path(args.sites_dir), args.site):
        newest = store.newest_writer(site.name)
        if newest is not None and newest[0] != model:
            writer, when = newest
            raise UsageError(
                f"{site.name}'s newest page ({_when(when)}) was written by {writer}, not the default model: "
                f"--other-models would delete all its pages. Name the model its server runs with --model ({writer}'s "
                f"checkpoint folder or hub id), or --model {DEFAULT_MODEL} to delete them"
            )


def _on_disk(db: Path) -> int:
    """Bytes of the page cache on disk, its write-ahead log's included (a vacuum moved them from the one to the
    other, and was said to have grown the file 4.1 kB -> 41.0 kB: a data-protection review)."""
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.is_file() else 0)


def _unseen(
    args: argparse.Namespace, store: Store, *, delete: bool, besides: Sequence[PageGroup] = ()
) -> tuple[int, int]:
    """The pages of the sites checked that no visitor was shown, and none was written, in ``--unseen`` days."""
    sites = [site.name for site in sites_in(Path(args.sites_dir), args.site)]
    return store.unseen(sites, time.time() - args.unseen * DAY_S, delete=delete, besides=besides)


def _unseen_line(args: argparse.Namespace, pages: int, versions: int) -> str:
    return f"{counted(versions, 'version')} of {counted(pages, 'page')} not shown in {counted(args.unseen, 'day')}"


def _warm(args: argparse.Namespace, loader: EngineLoader) -> int:
    from genui.pages import Pages
    from genui.warming import Warmed, warm

    site = site_from(args.warm_site, Path(args.sites_dir))
    runtime = SiteRuntime.build(site, "")
    cached = 0

    def report(page: Warmed) -> None:
        nonlocal cached
        if page.problem:
            print(f"skipped  {shown(page.url)}: {page.problem}")
        elif page.seconds is None:
            cached += 1
            print(f"cached   {'':>8}  {shown(page.url)}")
        else:
            print(f"wrote    {page.seconds:>6.1f} s  {shown(page.url)}", flush=True)

    db = Path(args.db)
    stored = _open_store(db) if db.exists() else None
    try:  # an address as a browser showed it, under a mount the cache knows (genui serve --base-path)
        mounts = stored.mounts(site.name) if stored is not None else []
        locations = [located(site, path, mounts) for path in args.paths or ["/"]]
    except UsageError:
        if stored is not None:
            stored.close()
        raise
    # made if missing, as genui serve makes it: not for a path mistyped
    store = stored if stored is not None else Store(db, busy_timeout=COMMAND_BUSY_TIMEOUT_S)
    bring_up_to_date(store, runtime)  # an earlier genui's pages are stored pages: not written again

    async def run() -> int:
        if args.pages == 0:  # nothing to write: the model is not loaded for it
            return 0
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


def _export(args: argparse.Namespace) -> int:
    from genui.export import ExportError, export

    site = site_from(args.export_site, Path(args.sites_dir))
    db = Path(args.db)
    store = _open_store(db)  # checked as every cache action checks it: not made if missing
    try:
        _served_here(store, [site])
        runtime = SiteRuntime.build(site, "")
        model = model_id_of(args.model)
        only = None if args.page is None else {located(site, path, store.mounts(site.name)).url for path in args.page}
        # what a server would find (an earlier genui's pages, threads it carries to this config): on a copy, as
        # genui cache judges it
        if pending(store, runtime) or threads_to_carry(store, runtime, model):
            with _trial_copy(store) as copy:
                bring_up_to_date(copy, runtime)
                carry_threads(copy, runtime, model)
                done = export(site, copy.path, model, Path(args.out), named=db, only=only, replace=args.replace)
        else:
            done = export(site, db, model, Path(args.out), only=only, replace=args.replace)
    except ExportError as err:
        raise UsageError(str(err)) from None
    finally:
        store.close()
    for url, why in done.skipped:
        print(f"skipped  {shown(url)}: {why}")
    for said in done.left_out:
        print(f"left out {said}")
    start = Path(args.out) / "index.html"  # the front page, or the copy's list of its pages where it has none
    print(f"exported {counted(len(done.pages), 'page')} of {site.name} to {args.out}; open {shlex.quote(str(start))}")
    return 0


def _forget(args: argparse.Namespace, store: Store) -> int:
    if not args.path:
        raise UsageError("name the page's site-relative URL (/ for the front page)")
    site = site_from(args.page_site, Path(args.sites_dir))
    _served_here(store, [site])  # another folder's routes could read the URL as another page's
    location = located(site, args.path, store.mounts(site.name))
    deleted = store.forget(site.name, location.path, location.query_string)
    if not deleted:  # a typo said "forgot 0 versions …; its next visit writes it again", as if it had (a review)
        raise UsageError(f"no version of {site.name} {shown(location.url)} is stored (genui cache pages lists what is)")
    _flushed(store)
    posts = len(store.posts(site.name, location.path)) if location.route.posts else 0
    # a thread's conversation goes with its versions, its posts stay: said, as posts delete says it (a forum host)
    stay = "stays" if posts == 1 else "stay"
    kept = f"; its {counted(posts, 'reader post')} {stay}, to be answered anew" if posts else ""
    print(
        f"forgot {counted(deleted, 'version')} of {site.name} {shown(location.url)}; its next visit writes it"
        f" again{kept}"
    )
    return 0


def _posts(args: argparse.Namespace, loader: EngineLoader) -> int:
    thread, site_name = args.thread, args.site
    site = None
    if thread is not None and site_name is not None:
        site = site_from(site_name, Path(args.sites_dir))
    store = _open_store(Path(args.db))
    try:
        if site is not None and thread is not None:  # any URL of the thread, as genui serve would route it
            thread, site_name = located(site, thread, store.mounts(site.name)).path, site.name
        if args.action == "delete":
            return _delete(args, store, site_name, thread)
        if site_name is not None and thread is None and site_name not in store.post_counts():
            site_name = site_from(site_name, Path(args.sites_dir)).name  # a site with no posts yet, or a typo
        if site is not None:
            _served_here(store, [site])
        limit = args.limit or MOST  # 0: all of them, as 0 turns off the other commands' counts
        user = None if args.user is None else unicodedata.normalize("NFC", args.user)  # as names are stored
        asked = min(limit + 1, MOST)  # one more than listed: whether there are more

        def recent(path: str | None) -> list[PlacedPost]:
            return store.recent_posts(site_name, path, asked, user, args.text)

        placed_posts = recent(thread)
        if site is not None and thread is not None:
            # posts stored under a URL the thread's route now moves: listed under the thread a server moves them to
            # (by their own ids: listing moves nothing)
            moved_from = [old for old, new in moved_paths(store, SiteRuntime.build(site, "")).items() if new == thread]
            for old in moved_from:
                placed_posts += [replace(p, path=thread) for p in recent(old)]
            placed_posts = sorted(placed_posts, key=lambda placed: -placed.post.id)
        unknown = _no_such_thread(store, site_name, thread) if not placed_posts else None
    finally:
        store.close()
    more = len(placed_posts) > limit
    placed_posts = placed_posts[:limit]
    if more:  # a reader's request for all their posts, answered with the newest 50 and no word (a review)
        newest = "the newest post" if limit == 1 else f"the newest {limit} posts"
        print(f"note: {newest}; more are stored: --limit 0 lists them all", file=sys.stderr)
    if unknown:
        print(unknown, file=sys.stderr)
    if args.json:
        rows = [{"site": p.site, "thread": p.path, **asdict(p.post)} for p in placed_posts]
        print(json.dumps({"db": str(args.db), "posts": rows, "more": more}))
        return 0
    with contextlib.suppress(AttributeError, ValueError):  # a terminal or file that cannot show a letter: escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    for placed in placed_posts:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(placed.post.created))
        text = shown(" ".join(placed.post.text.split()))
        print(f"{placed.post.id:>6}  {when}  {placed.site} {shown(placed.path)}  {placed.post.user}: {text[:80]}")
    if not placed_posts:
        print("no posts")
    return 0


def _no_such_thread(store: Store, site: str | None, thread: str | None) -> str | None:
    """A note where ``thread`` holds no post at all (of ``site``, or of any site): an address mistyped, or given as
    the served one (``/forum/r/...``) where the site's own is stored. A listing or a cron job's deletion that finds
    nothing there says so (a moderator's review: a misspelt thread found nothing, forever, with no word)."""
    if thread is None or store.recent_posts(site, thread, 1):
        return None
    lists = "genui posts --site " + shlex.quote(site) if site is not None else "genui posts"
    return f"note: no thread at {shown(thread)} holds a post; `{lists}` lists the threads that do"


def shown(text: str) -> str:
    """A reader's text as a terminal may print it: every control or format character written as its escape
    (`\x1b`, `\u202e`), so that a post cannot move the cursor, clear lines, set the window's title or turn the
    moderator's listing right to left."""
    return "".join(
        char.encode("unicode_escape").decode("ascii") if unicodedata.category(char).startswith("C") else char
        for char in text
    )


def _delete(args: argparse.Namespace, store: Store, site: str | None, thread: str | None) -> int:
    """genui posts delete: the posts named by id, or every one under --user's name, or older than --older-than
    days, or both."""
    user = None if args.user is None else unicodedata.normalize("NFC", args.user)  # as names are stored
    if args.older_than is None and user is None:
        if not args.ids:
            raise UsageError(
                "genui posts delete: name the posts' ids (genui posts lists them), or --user NAME or --older-than DAYS"
            )
        if site is not None or thread is not None:
            raise UsageError(
                "genui posts delete: --site and --thread choose posts for --user and --older-than; ids name posts"
            )
        return _delete_posts(store, list(dict.fromkeys(args.ids)), dry_run=args.dry_run)
    if args.ids:
        raise UsageError("genui posts delete: give the posts' ids, or --user and --older-than, not both")
    if site is not None and site not in store.post_counts():  # a site's folder, one with no posts yet, or a typo
        site = site_from(site, Path(args.sites_dir)).name
    before = None if args.older_than is None else time.time() - args.older_than * DAY_S
    ids = store.posts_before(before, site, thread, user)
    by = "" if user is None else f" by {shown(user)}"
    where = " of " + " ".join(shown(part) for part in (site, thread) if part is not None) if site or thread else ""
    when = ""
    if before is not None:
        when = f" made before {time.strftime('%Y-%m-%d %H:%M', time.localtime(before))}"
        when += f" ({counted(args.older_than, 'day')} ago)"
    if not ids:
        print(f"no posts{by}{where}{when}")
        unknown = _no_such_thread(store, site, thread)
        if unknown:
            print(unknown, file=sys.stderr)
        return 0
    # a post deleted meanwhile (a moderator, another run) is no error here: it is gone, as asked
    deleted = _delete_posts(store, ids, dry_run=args.dry_run, gone_ok=True)
    done = "would delete" if args.dry_run else "deleted"
    print(f"{done} {counted(deleted, 'post')}{by}{where}{when}")
    return 0


def _delete_posts(store: Store, ids: list[int], dry_run: bool = False, gone_ok: bool = False) -> int:
    """Delete the posts ``ids``, saying what went with each: the exit code, or with ``gone_ok`` (a post not there
    is no error) how many were deleted."""
    missing = 0
    for post_id in ids:
        deleted = store.delete_post(post_id, dry_run=dry_run)
        if deleted is None:
            if not gone_ok:
                print(f"genui posts: no post {post_id} (genui posts lists them)", file=sys.stderr)
            missing += 1
            continue
        placed = deleted.placed
        # the replies to the posts after it go too (a moderator deleting an old post of a long thread lost the
        # replies to every post since, a forum host's review): said, so that --dry-run shows it before it is done
        later = (
            f", with the replies to {counted(deleted.later, 'later post')} (the thread's next visit answers "
            f"{'it' if deleted.later == 1 else 'them'} again, in one run)"
            if deleted.later
            else ""
        )
        print(
            f"{'would delete' if dry_run else 'deleted'} post {post_id} by {placed.post.user} on {placed.site} "
            f"{shown(placed.path)}, and {counted(deleted.versions, 'version')} of the thread that read or showed "
            f"it{later}"
        )
    if not dry_run and len(ids) > missing:
        _flushed(store)
    if gone_ok:
        return len(ids) - missing
    return USAGE_ERROR if missing else 0


def _flushed(store: Store) -> None:
    """After a deletion: the deleted text out of the write-ahead log too (tried for a few seconds, while a server's
    reads come and go), or a note of where it stays."""
    for _ in range(FLUSH_TRIES):
        if store.flush_journal():
            return
        time.sleep(FLUSH_PAUSE_S)
    print(
        "note: a server reading the page cache held its write-ahead log (-wal), which keeps the deleted text until"
        " the server stops; genui cache prune --vacuum with the server stopped clears it",
        file=sys.stderr,
    )
