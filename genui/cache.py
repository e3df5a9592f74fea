"""The page cache's upkeep, for ``genui cache``: what the SQLite file holds, and which of its pages a server of these
sites on this model will look up again.

A page is stored under its route's version, a hash of its templates and the settings they are rendered with
(genui.prompts), and under the model that wrote it. Edit a site and the pages written before stay in the file under
the old hash, never served again; switch models and the old model's pages wait for it. ``prune`` deletes the former
(and, when asked, the latter); ``forget`` deletes one page's versions, so that its next visit writes it anew. Readers'
posts are never deleted: a thread whose pages go is written again with them. A thread with readers' posts written
under an earlier config only is carried to the current one before a prune (genui.upgrade.carry_threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from genui.runtime import SiteRuntime
from genui.store import PageGroup

CURRENT = "current"  # a server of these sites on this model looks these pages up
OTHER_MODEL = "other model"  # written from the current config by another model: served again with that model
EARLIER = "earlier config"  # written from templates or settings the site no longer has: never looked up again
OTHER_SITE = "other site"  # a site not among those checked: left alone


@dataclass(frozen=True, slots=True)
class Standing:
    """One group of cached pages and what it is to the sites and model checked."""

    group: PageGroup
    state: str  # CURRENT, OTHER_MODEL, EARLIER or OTHER_SITE
    route: str = ""  # the pattern of the route whose version it is, for the current config's pages


def route_versions(runtime: SiteRuntime) -> dict[str, str]:
    """The version (the page-cache key's ``template``) of each route of a site, to its pattern."""
    return {runtime.prompts.version(route): route.pattern for route in runtime.site.routes}


def standings(groups: list[PageGroup], runtimes: list[SiteRuntime], model: str) -> list[Standing]:
    """What each group of cached pages is to these sites served on ``model`` (an engine's model id)."""
    versions = {runtime.site.name: route_versions(runtime) for runtime in runtimes}
    found = []
    for group in groups:
        routes = versions.get(group.site)
        if routes is None:
            found.append(Standing(group, OTHER_SITE))
        elif group.template not in routes or group.posts:  # a posts key is from before replies in place
            found.append(Standing(group, EARLIER))
        else:
            state = CURRENT if group.model == model else OTHER_MODEL
            found.append(Standing(group, state, routes[group.template]))
    return found


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``3 versions``, ``1 version``: a count with its noun (made plural with an s, or as ``plural`` gives it)."""
    return f"{count} {noun}" if count == 1 else f"{count} {plural or noun + 's'}"


def size_text(size: int) -> str:
    """A byte count as a person reads it: 950 B, 12.3 kB, 4.5 MB."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def table(found: list[Standing]) -> list[str]:
    """The standings as the lines of a plain-text table."""
    header = ("site", "route", "model", "pages", "versions", "HTML", "state")
    rows = [
        (
            s.group.site,
            s.route or "-",
            s.group.model,
            str(s.group.urls),
            str(s.group.versions),
            size_text(s.group.size),
            s.state,
        )
        for s in found
    ]
    return columns(header, rows)


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as the lines of a plain-text table, each column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
