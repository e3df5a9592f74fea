"""Routing inside one site: which route a site-relative URL belongs to, and the canonical form the cache keys on.

Patterns compile with Starlette's own ``compile_path``, so ``{name}`` and ``{name:path}`` mean exactly what they mean
in a Starlette route.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.convertors import Convertor
from starlette.routing import compile_path

from genui.sites import Route, Site, SiteConfigError

MAX_PATH = 512  # characters of a decoded path; longer is a malformed request, not a page
MAX_QUERY_VALUE = 256  # characters of one query value after whitespace is collapsed
VERSION_KEY = "v"  # genui's own query key (?v=2 shows version 2); no route may declare it
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")


class BadRequest(ValueError):
    """A path or query genui refuses to route; answered with a 4xx, never a page."""


@dataclass(frozen=True, slots=True)
class Location:
    """One page of a site: the route it matched, its parameters and the canonical path and query."""

    route: Route
    path: str  # canonical site-relative path, e.g. "/wiki/Hash_table"
    params: dict[str, str]
    query: dict[str, str]  # only the route's declared keys with a non-empty value, in declaration order

    @property
    def query_string(self) -> str:
        return urlencode(sorted(self.query.items()))

    @property
    def url(self) -> str:
        """The site-relative URL of this page, query included."""
        return f"{self.path}?{self.query_string}" if self.query else self.path


def normalise_path(path: str) -> str:
    """Collapse repeated and trailing slashes; refuse dot segments, control characters and overlong paths."""
    if len(path) > MAX_PATH:
        raise BadRequest(f"path longer than {MAX_PATH} characters")
    if _FORBIDDEN.search(path):
        raise BadRequest("path contains a control character or a backslash")
    segments = [segment for segment in path.split("/") if segment]
    if any(segment in (".", "..") for segment in segments):
        raise BadRequest("path contains a dot segment")
    return "/" + "/".join(segments)


def normalise_query(route: Route, items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The route's query keys only (the first value of each), whitespace collapsed, empty values dropped."""
    values: dict[str, str] = {}
    for key, value in items:
        if key not in route.query or key in values:
            continue
        if _FORBIDDEN.search(value.replace("\t", " ").replace("\n", " ").replace("\r", " ")):
            raise BadRequest(f"query value of {key!r} contains a control character")
        collapsed = " ".join(value.split())
        if len(collapsed) > MAX_QUERY_VALUE:
            raise BadRequest(f"query value of {key!r} is longer than {MAX_QUERY_VALUE} characters")
        values[key] = collapsed
    return {key: values[key] for key in route.query if values.get(key)}


class SiteRouter:
    """Matches site-relative URLs against one site's routes, first declared route first."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._routes: list[tuple[Route, re.Pattern[str], dict[str, Convertor[Any]]]] = []
        for index, route in enumerate(site.routes):
            where = f"routes[{index}]"
            if VERSION_KEY in route.query:
                raise SiteConfigError(
                    site.root / "site.toml", f"{where}.query", f"{VERSION_KEY!r} is genui's version switch", "rename it"
                )
            try:
                regex, _, convertors = compile_path(route.pattern)
            except ValueError as err:
                raise SiteConfigError(
                    site.root / "site.toml", f"{where}.pattern", str(err), "give each parameter its own name"
                ) from None
            self._routes.append((route, regex, convertors))

    def resolve(self, path: str, query: Iterable[tuple[str, str]] = ()) -> Location | None:
        """The page at ``path`` (site-relative) or None when no route matches. Raises BadRequest on malformed input."""
        canonical = normalise_path(path)
        # "/files/" must still reach "/files/{path:path}" although trailing slashes are otherwise dropped.
        candidates = (canonical,) if canonical == "/" else (canonical, canonical + "/")
        pairs = list(query)
        for candidate in candidates:
            for route, regex, convertors in self._routes:
                match = regex.match(candidate)
                if match is None:
                    continue
                params = {name: str(convertors[name].convert(value)) for name, value in match.groupdict().items()}
                return Location(route=route, path=candidate, params=params, query=normalise_query(route, pairs))
        return None

    def leads_to_page(self, href: str) -> bool:
        """Whether a link's ``href`` is a site-relative URL that resolves to one of the site's routes."""
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            return False
        try:
            return self.resolve(parts.path, parse_qsl(parts.query)) is not None
        except BadRequest:
            return False
