"""A page cache written by an earlier genui, brought under today's keys once, when a server or ``genui cache``
opens it.

Until session 45 a route's version (the page-cache key's ``template``) hashed its prompt and opening files alone,
and a page's links were stored as written for the mount of the server that wrote it, with no record of which. Today
the version also hashes the templates they include and the site.toml values they are rendered with, and every page
keeps its mount (genui.prompts, genui.store). So each page an earlier genui stored for a route whose files are as
they were then is moved under the route's version of today: it is the page that genui would serve, and a forum's
threads keep the replies written into them. Its mount is read from its links where they tell.

A site's routes may also come to move a URL that was a page's own (a route given ``case`` or ``spaces`` since: the
forum's `/r/Linux/…` is `/r/linux/…` from session 60 on). Readers' posts and pages stored under such a URL are
moved to the page's own URL, so that the thread they were posted to still shows them (``rehome_moved``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging

from genui.cache import counted
from genui.links import linked_urls
from genui.routing import BadRequest
from genui.runtime import SiteRuntime
from genui.sites import Route, Site
from genui.store import PageKey, Store

log = logging.getLogger("genui")
cache_log = logging.getLogger("genui.cache")  # shown by genui serve (genui.logs)


def bring_up_to_date(store: Store, runtime: SiteRuntime) -> list[tuple[str, str]]:
    """What an earlier genui, or the site's earlier routes, stored for ``runtime``'s site, moved under today's keys
    (``adopt_earlier_pages``, ``rehome_moved``); the (path, query) of each page left where it was, because its own URL
    holds that page already."""
    adopt_earlier_pages(store, runtime)
    return rehome_moved(store, runtime)


def threads_to_carry(store: Store, runtime: SiteRuntime, model: str, *, other_models: bool = True) -> list[PageKey]:
    """The keys, under ``model`` and the routes' versions of today, of ``runtime``'s threads with readers' posts
    that were written under an earlier config or another model only (Store.carried_from). ``other_models=False``:
    not those written under today's config by another model, which a server of that model serves as they are."""
    current = {runtime.prompts.version(route) for route in runtime.site.routes}
    keys = []
    for path in store.threads_with_posts(runtime.site.name):
        with contextlib.suppress(BadRequest):
            location = runtime.locate(path)
            if location is not None and location.route.posts and location.route.cache != "none":
                key = runtime.page_key(location, model)
                source = store.carried_from(key)
                if source is not None and (other_models or source.template not in current):
                    keys.append(key)
    return keys


def carry_threads(store: Store, runtime: SiteRuntime, model: str, *, other_models: bool = True) -> int:
    """``threads_to_carry`` carried to ``model`` and today's config, as a server carries each at its next visit
    (genui.pages): ``genui cache prune`` deletes an earlier config's pages (and with --other-models another model's),
    and took the conversations with them. How many threads were carried."""
    keys = threads_to_carry(store, runtime, model, other_models=other_models)
    return sum(1 for key in keys if store.carry_thread(key))


def take_up(store: Store, runtime: SiteRuntime, *, move: bool = True) -> None:
    """A server serves ``runtime``'s site from now on: what is stored for it is brought up to date, and its folder
    noted (``genui cache`` judges its pages by that folder's routes: ``served_from``). ``move=False`` (a site
    reloaded as it is edited): what is stored under a URL the routes now move stays there, said in the log, to be
    moved when a server starts; an edit undone a minute later (a `case` tried) must not have moved readers' posts
    to a URL nothing leads to."""
    adopt_earlier_pages(store, runtime)
    if move:
        rehome_moved(store, runtime)
    elif waiting := sorted(old for old in moved_paths(store, runtime) if store.posts(runtime.site.name, old)):
        log.warning(
            "site %s: readers' posts stored under a URL its routes now move (%s) stay there until genui serve starts"
            " again, which moves them",
            runtime.site.name,
            ", ".join(waiting[:3]) + (f", and {len(waiting) - 3} more" if len(waiting) > 3 else ""),
        )
    if move:  # at a start, not at every reload (it would be said at every save)
        _renamed_from(store, runtime.site)
    store.record_served(runtime.site.name, runtime.site.root)


def _renamed_from(store: Store, site: Site) -> None:
    """Say in the log where the site's folder was served under another name whose pages or posts are still stored
    under it: a site renamed (its ``name``) is served from nothing, its readers' posts left behind unsaid."""
    for old in store.names_served_from(site.root):
        pages, posts = store.holds(old) if old != site.name else (0, 0)
        if pages or posts:
            log.warning(
                "site %s: its folder %s was served as %r before, whose %d page version(s) and %d readers' post(s) are"
                " stored under that name: to serve them as %s, stop the server, run genui cache rename %s %s on this"
                " page cache (--db), and start it again",
                site.name,
                site.root,
                old,
                pages,
                posts,
                site.name,
                old,
                site.name,
            )


def pending(store: Store, runtime: SiteRuntime) -> bool:
    """Whether ``bring_up_to_date`` would move anything of ``runtime``'s site, found without writing."""
    return bool(moved_paths(store, runtime)) or bool(_adoptions(store, runtime))


def rehome_moved(store: Store, runtime: SiteRuntime) -> list[tuple[str, str]]:
    """Move readers' posts and pages stored under a path the site's routes now move (a `case` or `spaces` added to
    a route since they were stored) to the path they move it to: every post, and every page whose new path does not
    hold it already. The (path, query) of each page that stayed: never served again, and ``genui cache prune``
    deletes it."""
    moves = moved_paths(store, runtime)
    if not moves:
        return []
    posts, versions, stayed = store.rehome(runtime.site.name, moves)
    if posts or versions:  # said, as a thread carried to a new config is (an operator's upgrade review)
        cache_log.info(
            "site %s: %s and %s stored under an address its routes now move (%s) moved to the page's own",
            runtime.site.name,
            counted(posts, "reader's post").replace("reader's posts", "readers' posts"),
            counted(versions, "page version"),
            ", ".join(f"{old} -> {new}" for old, new in list(moves.items())[:3]) + (", ..." if len(moves) > 3 else ""),
        )
    return stayed


def moved_paths(store: Store, runtime: SiteRuntime) -> dict[str, str]:
    """Each path something is stored under that the site's routes now move, to the path they move it to (read
    only)."""
    moves = {}
    for path in store.stored_paths(runtime.site.name):
        with contextlib.suppress(BadRequest):
            location = runtime.router.resolve(path)
            if location is not None and location.path != path:
                moves[path] = location.path
    return moves


def earlier_version(site: Site, route: Route) -> str:
    """The route's version as genui computed it before session 45."""
    digest = hashlib.sha256((site.prompts_dir / route.template).read_bytes())
    for opening in (route.opening, route.reply_opening):
        if opening is not None:
            digest.update(b"\0" + (site.prompts_dir / opening).read_bytes())
    return digest.hexdigest()[:16]


def written_mount(runtime: SiteRuntime, html: str) -> str | None:
    """The mount an earlier genui wrote a page's links for: ``/name`` or "", whichever more of them lead to a page of
    the site from; None when the links cannot tell (none, or as many either way)."""
    urls = linked_urls(html)
    mounted = "/" + runtime.site.name

    def served(mount: str) -> int:
        count = 0
        for url in urls:
            if url.startswith(mount + "/"):
                with contextlib.suppress(BadRequest):
                    count += runtime.locate(url.removeprefix(mount)) is not None
        return count

    under_name, at_root = served(mounted), served("")
    if under_name == at_root:
        return None
    return mounted if under_name > at_root else ""


def adopt_earlier_pages(store: Store, runtime: SiteRuntime) -> int:
    """Move the pages an earlier genui stored for ``runtime``'s routes, as their files are now, under today's
    versions (with their mounts where their links tell); how many versions moved. Each page goes to the route its
    URL is routed to: routes sharing their files once shared a version."""
    return store.move_pages(_adoptions(store, runtime))


def _adoptions(store: Store, runtime: SiteRuntime) -> list[tuple[int, str, str, str | None]]:
    """Each page an earlier genui stored for ``runtime``'s routes as their files are now: its row, its version then
    and now, and the mount its links tell."""
    site = runtime.site
    earlier = {route: earlier_version(site, route) for route in site.routes}
    moves = []
    for rowid, template, path, query, html in store.unkept_mounts(site.name, sorted(set(earlier.values()))):
        with contextlib.suppress(BadRequest):
            location = runtime.locate(path + (f"?{query}" if query else ""))
            if location is not None and earlier[location.route] == template:
                moves.append((rowid, template, runtime.prompts.version(location.route), written_mount(runtime, html)))
    return moves
