"""The ways on that genui puts below a site's pages, whatever the model wrote: the sections a site.toml declares
under ``[[navigation]]`` (docs/sites.md), each a list of fixed links and of the pages of a route already written.

Written pages come from the page cache: those the engine's model wrote from the route's current template, so every
one of them is served at once (where the site carries state, ``carry``, in the state each was written in: a page is
listed in the state of the page it is listed on, which may not be written yet). A listing keeps to the pages that
agree with the page it is shown on in every parameter but the listed route's last one: on /r/lisp, the threads of
/r/{board}/{thread} whose board is lisp.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl

from genui.routing import BadRequest, Location, guessed_title
from genui.runtime import SiteRuntime
from genui.sites import NavSection
from genui.store import Store

_PARAM = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)(?::(?:str|path))?\}")
SCANNED = 5  # written pages read per one listed: some may turn out to belong elsewhere (another board)
CARRIED_SCANNED = 10  # as many again, times this, where states a site carries fold pages into one entry


@dataclass(frozen=True, slots=True)
class Link:
    label: str
    url: str  # served URL (the site's mount included)
    current: bool = False  # the page it is shown on: marked as such (aria-current), not left out of a fixed list
    posts: int = 0  # a written page's readers' posts (a thread's replies), shown beside it


@dataclass(frozen=True, slots=True)
class Section:
    heading: str
    look: str  # "list" or "icons"
    links: tuple[Link, ...]


def sections(runtime: SiteRuntime, here: Location, store: Store, model: str) -> list[Section]:
    """The navigation shown on the page at ``here``: every section declared for its route that has a link."""
    shown = []
    for section in runtime.site.navigation:
        if here.route.pattern not in section.on:
            continue
        carried = [runtime.router.carried(link.url, here) for link in section.links]  # a game's state goes on
        links = [
            Link(link.label, runtime.url(url), url == here.url)
            for link, url in zip(section.links, carried, strict=True)
        ]
        if section.look == "icons" and not any(link.current for link in links):
            links = _program_open(runtime, here, section, links)
        if section.pages is not None:
            fixed = set(carried)  # a written page that is a fixed link too (its state carried) is listed once
            links += _written(runtime, here, section, store, model, fixed)
        if links:
            shown.append(Section(section.heading, section.look, tuple(links)))
    return shown


def _program_open(runtime: SiteRuntime, here: Location, section: NavSection, links: list[Link]) -> list[Link]:
    """An icons section's links, the one of the program open on the page marked current: of the icons of the page's
    route, the only one, or the one whose path holds the page's (Home on a folder in it). A desktop marked its
    Terminal only on `ls`, the command its icon runs (a review)."""
    same: list[tuple[int, str]] = []  # (index, path) of the icons of the page's route
    for index, link in enumerate(section.links):
        try:
            location = runtime.locate(link.url)
        except BadRequest:
            continue
        if location is not None and location.route == here.route:
            same.append((index, location.path))
    holding = [(len(path), index) for index, path in same if here.path.startswith(path.rstrip("/") + "/")]
    chosen = max(holding)[1] if holding else same[0][0] if len(same) == 1 else None
    return [replace(link, current=index == chosen) for index, link in enumerate(links)]


def everywhere(runtime: SiteRuntime) -> list[Section]:
    """The sections every route's pages show (``on = ["*"]``: a site's own ways on, as the desktop's icons), their
    fixed links alone, for a page of the site that is no route's: an error (a 404, a busy page), from which a visitor
    was left with the bar and a link home (a desktop user's review: "never stuck in one program")."""
    patterns = {route.pattern for route in runtime.site.routes}
    return [
        Section(section.heading, section.look, tuple(Link(link.label, runtime.url(link.url)) for link in section.links))
        for section in runtime.site.navigation
        if patterns <= set(section.on) and section.links
    ]


def _written(
    runtime: SiteRuntime, here: Location, section: NavSection, store: Store, model: str, fixed: set[str]
) -> list[Link]:
    route = next(route for route in runtime.site.routes if route.pattern == section.pages)
    # The pages listed vary in the route's last parameter and agree with this page on the ones before it (the
    # threads of this board), so a thread lists its board's other threads, not only itself.
    shared = {name: here.params[name] for name in route.params[:-1] if name in here.params}
    found: list[tuple[Location, str]] = []
    listed = {here.url, *fixed}
    # a page seen in many states of what the site carries (a card in each of a player's coin counts) is one entry:
    # read further for as many
    folded = any(key in route.query for key in runtime.site.carry)
    rows = store.written(
        runtime.site.name,
        model,
        runtime.prompts.version(route),
        _prefix(route.pattern, shared),
        section.limit * SCANNED * (CARRIED_SCANNED if folded else 1),
    )
    for row in rows:
        try:
            location = runtime.router.resolve(row.path, parse_qsl(row.query))
        except BadRequest:  # stored under rules that have changed since
            continue
        if location is None or location.route != route or location.aliased:
            continue  # aliased: its URL leads elsewhere now (a route's `case` or `spaces` added since it was written)
        if any(location.params.get(name) != value for name, value in shared.items()):
            continue
        location = _in_state(runtime, location, here)
        if location is None or location.url in listed:
            continue
        listed.add(location.url)
        found.append((location, row.title or guessed_title(location, lang=runtime.site.lang)))
        if len(found) == section.limit:
            break
    # a thread's replies from readers, beside it (a forum's lists said nothing of which threads are talked in)
    counts = store.thread_posts(runtime.site.name, [location.path for location, _ in found]) if route.posts else {}
    return [Link(title, runtime.url(location.url), posts=counts.get(location.path, 0)) for location, title in found]


def _in_state(runtime: SiteRuntime, location: Location, here: Location) -> Location | None:
    """A written page as the page ``here`` leads to it: the site's ``carry`` keys its route takes are this page's, or
    none where this page has none. A game's "Cards seen" listed each card with the coins it was written with, and a
    click moved a player with 3 coins to 10 (a hackathon team's review); the listed page may not be written in this
    state yet. None: the page so is no longer one the route serves."""
    carried = [key for key in runtime.site.carry if key in location.route.query]
    if not carried:
        return location
    query = [(key, value) for key, value in location.query.items() if key not in carried]
    query += [(key, here.query[key]) for key in carried if key in here.query]
    try:
        return runtime.router.resolve(location.path, query)
    except BadRequest:
        return None


def _prefix(pattern: str, known: dict[str, str]) -> str:
    """The literal start of every path ``pattern`` matches with the ``known`` parameters filled in."""
    prefix, at = "", 0
    for match in _PARAM.finditer(pattern):
        prefix += pattern[at : match.start()]
        if match.group(1) not in known:
            return prefix
        prefix += known[match.group(1)]
        at = match.end()
    return prefix + pattern[at:]
