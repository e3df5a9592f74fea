"""Routing inside one site: which route a site-relative URL belongs to, and the canonical form the cache keys on.

Patterns compile with Starlette's own ``compile_path``, so ``{name}`` and ``{name:path}`` mean exactly what they mean
in a Starlette route. A route's aliases are tried after every pattern, so an alias never shadows a route; a page
reached through one has the route's own path as its canonical path.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urljoin, urlsplit, urlunsplit

from starlette.convertors import (
    Convertor,
    FloatConvertor,
    IntegerConvertor,
    PathConvertor,
    StringConvertor,
    UUIDConvertor,
)
from starlette.routing import compile_path, replace_params

from genui.sites import FORBIDDEN_IN_PATH, MAX_PATH, Problems, Route, Site, SiteConfigError

MAX_QUERY_VALUE = 256  # characters of one query value after whitespace is collapsed
VERSION_KEY = "v"  # genui's own query key (?v=2 shows version 2); no route may declare it
# a control character (C0, DEL, and C1 but NEL, which str.split() reads as a line break) in a query value, where a
# backslash is text (`grep \.py`, `C:\Users`), or in a rewrite's instruction
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x84\x86-\x9f]")
# a run of spaces, any of Unicode's (a Japanese keyboard's ideographic space, a French no-break space before "?"): a
# space but " " made a second page beside the one spelt with the route's character (a walkthrough of other languages)
_SPACES = re.compile(r"\s+")
_LONGEST_NAME = 200  # characters of a link text that may name a page (`Route.link_text`); a longer one is no name
# How alike a link's text and the name in its href must be (difflib's ratio) for the text to name the page: on the
# default model's boards (session 46) every listed title it wrote apart from its href scored 0.62-0.98 against it, a
# meta line or a `Reply` carried into a link 0.0-0.42.
_LIKE = 0.6


# Two values for each kind of parameter a pattern may have, for SiteRouter._check_reached: no literal segment a
# site is likely to use, and a path's second spans two segments.
_SAMPLES: tuple[dict[type[Convertor[Any]], str], ...] = (
    {
        StringConvertor: "genuisample",
        PathConvertor: "genuisample",
        IntegerConvertor: "7",
        FloatConvertor: "7.5",
        UUIDConvertor: str(uuid.UUID(int=7)),
    },
    {
        StringConvertor: "another",
        PathConvertor: "genui/sample",
        IntegerConvertor: "0",
        FloatConvertor: "0.25",
        UUIDConvertor: str(uuid.UUID(int=8)),
    },
)


class BadRequest(ValueError):
    """A path or query genui refuses to route; answered with a 4xx, never a page."""


@dataclass(frozen=True, slots=True)
class Location:
    """One page of a site: the route it matched, its parameters and the canonical path and query."""

    route: Route
    path: str  # canonical site-relative path, e.g. "/Hash_table"
    params: dict[str, str]
    query: dict[str, str]  # only the route's declared keys with a non-empty value, in declaration order
    # matched one of the route's aliases, or was written otherwise than its page's own path (a space its route spells
    # otherwise, ``Route.spaces``; letter case, ``Route.case``; decomposed accents; a slash too many or too few): the
    # page lives at ``path``, not where it was asked for
    aliased: bool = False

    @property
    def query_string(self) -> str:
        return urlencode(sorted(self.query.items()))

    @property
    def blank(self) -> bool:
        """Whether this is an address of a route the site bar asks with (one query key) with nothing in its box
        (``/search``, ``/search?q=%20``), or of a route with a form with nothing in its fields (``/plan``, a value
        carried on aside): no page is written for it, which would be a page about nothing."""
        if self.route.form:
            return not any(self.query.get(key) for key, _ in self.route.form)
        return self.route.bar_label is not None and not self.query

    @property
    def url(self) -> str:
        """The site-relative URL of this page, query included (a `?` in the path written `%3F`)."""
        return f"{url_path(self.path)}?{self.query_string}" if self.query else url_path(self.path)


def _starts(pieces: list[str], start: str) -> bool:
    """Whether ``start`` begins some path the pattern split into ``pieces`` (text, then a ``{parameter}``, in turn)
    matches: each piece of text taken whole or as far as ``start`` goes, each parameter one or more characters (no
    slash but in a ``{name:path}``)."""
    if not start:
        return True
    if not pieces:
        return False
    piece, rest = pieces[0], pieces[1:]
    if not piece.startswith("{"):
        if piece.startswith(start):
            return True
        return start.startswith(piece) and _starts(rest, start[len(piece) :])
    taken = start if piece.endswith(":path}") else start.split("/", 1)[0]
    return any(_starts(rest, start[length:]) for length in range(1, len(taken) + 1))


def _said_once(path: str) -> str:
    """``path`` with each segment that repeats the one before it left out (`/r/news/news/A` is `/r/news/A`)."""
    kept: list[str] = []
    for segment in path.split("/"):
        if not (kept and segment and segment == kept[-1]):
            kept.append(segment)
    return "/".join(kept)


# A server's base path (genui serve --base-path, create_app's base_path): "/" and segments of a URL path's own
# characters, no "." or ".." segment, none empty, and no "/" ending it: "/demo", "/apps/genui".
BASE_PATH = re.compile(r"(/(?!\.\.?(?:/|$))[A-Za-z0-9._~!$&'()*+,;=:@-]+)+")


def base_path_of(text: str) -> str:
    """A base path as given (``demo``, ``/demo`` or ``/demo/``) as the server writes it: ``/demo``; ``/`` or "" is
    none (""). ValueError where it is no URL path."""
    path = "/" + text.strip("/")
    if path == "/":
        return ""
    if not BASE_PATH.fullmatch(path):
        raise ValueError(
            "expected a URL path such as /demo or /apps/genui (each part of it letters, digits or -._~!$&'()*+,;=:@,"
            f" and no part . or ..), got {text!r}"
        )
    return path


def url_path(path: str) -> str:
    """A decoded path as a URL's path: the characters that would end it or start an escape percent-encoded.
    ``/r/debian/What_is_V.11?`` is a page (a forum thread whose title asks), and its URL is
    ``/r/debian/What_is_V.11%3F``; the rest is left as it is, as browsers accept it."""
    return path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def is_number(raw: str, digits: int) -> bool:
    """``raw`` is 1 to ``digits`` ASCII digits. (str.isdigit() also takes "²", which int() refuses, and int() refuses
    more than 4,300 digits.)"""
    return raw.isascii() and raw.isdigit() and len(raw) <= digits


def version(raw: str | None) -> int | None:
    """The page version a ``?v=`` value asks for; None when absent."""
    if raw is None:
        return None
    if not is_number(raw, 7) or not 1 <= int(raw) <= 1_000_000:
        raise BadRequest(f"?{VERSION_KEY}= takes a version number")
    return int(raw)


def versioned(url: str, version: int) -> str:
    """``url`` with ``?v=version`` added (the URL of one version of a page)."""
    return f"{url}{'&' if '?' in url else '?'}{urlencode({VERSION_KEY: version})}"


def untaken_keys(url: str, location: Location) -> str:
    """What is wrong with the query keys ``url`` sets that its page's route does not take (a page opened without
    them, as if they were not there): "" when there are none."""
    ignored = sorted({name for name, _ in parse_qsl(url.partition("?")[2], keep_blank_values=True)})
    ignored = [name for name in ignored if name not in location.route.query]
    if not ignored:
        return ""
    takes = ", ".join(repr(name) for name in location.route.query) or "none"
    return (
        f"{url!r} sets {', '.join(repr(name) for name in ignored)}, which its route {location.route.pattern!r} does"
        f" not take (its query keys: {takes})"
    )


def _blank(value: str) -> bool:
    """Whether a parameter's value shows nothing: only spaces, and characters that take no room (U+200B)."""
    return all(character.isspace() or unicodedata.category(character) in ("Cf", "Zs") for character in value)


def guessed_title(location: Location, own: bool = True, lang: str = "") -> str:
    """A title for a page not written yet, or written with no <h1>: its route's ``page_title`` filled in ("Terminal:
    ls"), else its last path parameter ("Hash_table" -> "Hash table"), or its query. ``lang``: the site's, whose
    letter case a ``page_title``'s ``{x:upper-first}`` follows (``recased``)."""
    route = location.route
    if own and route.page_title is not None:  # own=False: the page's name alone, as a link's text reads it
        values = {**dict.fromkeys(route.query, ""), **location.query, **location.params}
        if route.spaces:  # as a title reads: /Hash_table is "Hash table"
            values = {name: value.replace(route.spaces, " ") for name, value in values.items()}
        return route.page_title.format_map({name: _TitleValue(value, lang) for name, value in values.items()})
    if location.params:  # before a query: a game's `/scene/well?carrying=sword` is the well, not the sword
        last = list(location.params.values())[-1].rstrip("/").rsplit("/", 1)[-1]
        return " ".join(last.replace("_", " ").split())
    if location.query:
        return next(iter(location.query.values()))
    return ""


class _TitleValue(str):
    """A value in a ``page_title``: ``{panel}`` as it is, ``{panel:upper-first}`` in that letter case (``recased``),
    for a value a route's ``case`` keeps lower in its address (the desktop's "Settings: Display")."""

    lang: str

    def __new__(cls, value: str, lang: str = "") -> _TitleValue:
        made = super().__new__(cls, value)
        made.lang = lang
        return made

    def __format__(self, rule: str) -> str:
        return recased(str(self), rule, self.lang) if rule else str(self)


def recased(value: str, rule: str, lang: str = "") -> str:
    """``value`` in the letter case a route's ``case`` gives its parameter: "lower" (`Linux` is `linux`) or
    "upper-first" (`hash_table` is `Hash_table`; a first letter whose capital is two letters, `ß`, stays; a digraph
    takes its title case, `ǆungla` is `ǅungla`), in the site's language ``lang`` where it has rules of its own: in
    Turkish and Azerbaijani `i` is `İ` and `I` is `ı` (`/istanbul` is `/İstanbul`, as MediaWiki has it there)."""
    turkic = lang.split("-")[0].lower() in TURKIC_CASING
    if rule == "lower":
        value = (value.replace("İ", "i").replace("I", "ı") if turkic else value).lower()
    elif rule == "upper-first" and value:
        first = "İ" if turkic and value[0] == "i" else value[0].title()
        if len(first) == 1:
            value = first + value[1:]
    return unicodedata.normalize("NFC", value)  # composed, as resolve reads every path


def normalise_path(path: str) -> str:
    """Collapse repeated and trailing slashes; refuse dot segments, control characters and overlong paths."""
    if len(path) > MAX_PATH:
        raise BadRequest(f"path longer than {MAX_PATH} characters")
    if FORBIDDEN_IN_PATH.search(DIRECTION_MARKS.sub("", path)):  # (marks: the page at the path without them)
        raise BadRequest("path contains a control character, a bidi control (U+202E and its kin) or a backslash")
    if "\ufffd" in path:  # what a request's decoding makes of a byte that is no UTF-8 (%FF), or the character typed
        raise BadRequest("path is not UTF-8 text (a %-escape that decodes to no character)")
    segments = [segment for segment in path.split("/") if segment]
    if any(segment in (".", "..") for segment in segments):
        raise BadRequest("path contains a dot segment")
    return "/" + "/".join(segments)


_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
TURKIC_CASING = frozenset({"tr", "az", "crh", "kaa"})  # languages whose i and I are two letters each
# Left-to-right, right-to-left and Arabic letter marks: a Hebrew or Arabic title copied from a page often carries one at
# an end, which shows nothing. A path holding them is the page at the path without them (it was a 400).
DIRECTION_MARKS = re.compile("[\u200e\u200f\u061c]")


def normalise_query(route: Route, items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The route's query keys only (the first value of each), whitespace collapsed, bidi overrides, embeddings and
    isolates left out (a title made of one, `Search: <U+202E>…`, read backwards in the browser's tab: a security
    review; a path refuses them), empty values dropped."""
    values: dict[str, str] = {}
    for key, value in items:
        if key not in route.query or key in values:
            continue
        if CONTROL.search(value.replace("\t", " ").replace("\n", " ").replace("\r", " ")):
            raise BadRequest(f"query value of {key!r} contains a control character")
        collapsed = unicodedata.normalize("NFC", " ".join(_BIDI_CONTROLS.sub("", value).split()))
        if len(collapsed) > MAX_QUERY_VALUE:
            raise BadRequest(f"query value of {key!r} is longer than {MAX_QUERY_VALUE} characters")
        values[key] = collapsed
    return {key: values[key] for key in route.query if values.get(key)}


@dataclass(frozen=True, slots=True)
class _Compiled:
    route: Route
    regex: re.Pattern[str]  # the route's pattern, or one of its aliases
    convertors: dict[str, Convertor[Any]]  # the same for an alias as for its pattern (sites.py checks that)
    path_format: str  # the route's own pattern, to build a page's canonical path from its parameters


class SiteRouter:
    """Matches site-relative URLs against one site's routes, first declared route first, then their aliases."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._routes: list[_Compiled] = []
        self._aliases: list[_Compiled] = []
        # Each route whose links' text names a one-segment parameter, that parameter let span slashes: a dead link
        # with a `/` too many in the name (`/r/work/science/Title`) may still be the page its text names.
        self._loose: list[_Compiled] = []
        for index, route in enumerate(site.routes):
            where = f"routes[{index}]"
            if VERSION_KEY in route.query:
                raise SiteConfigError(
                    site.root / "site.toml", f"{where}.query", f"{VERSION_KEY!r} is genui's version switch", "rename it"
                )
            regex, path_format, convertors = self._compile(route.pattern, f"{where}.pattern")
            self._routes.append(_Compiled(route, regex, convertors, path_format))
            for number, alias in enumerate(route.aliases):
                alias_regex, _, _ = self._compile(alias, f"{where}.aliases[{number}]")
                self._aliases.append(_Compiled(route, alias_regex, convertors, path_format))
            if route.link_text is not None and f"{{{route.link_text}}}" in route.pattern:
                loose, _, loose_convertors = compile_path(
                    route.pattern.replace(f"{{{route.link_text}}}", f"{{{route.link_text}:path}}")
                )
                self._loose.append(_Compiled(route, loose, loose_convertors, path_format))
        problems = Problems()  # each route and link on its own: one run says them all (a pattern changed breaks many)
        for index in range(len(site.routes)):
            problems.check(self._check_reached, index)
            for number in range(len(site.routes[index].aliases)):
                problems.check(self._check_alias_reached, index, number)
        for index, section in enumerate(site.navigation):
            for number, link in enumerate(section.links):
                problems.check(self._check_link, link.url, f"navigation[{index}].links[{number}].url")
        problems.raise_found()

    def _check_reached(self, index: int) -> None:
        """A route an earlier one takes every URL of (`/{title}` declared before `/search`, `/files/{p:path}`
        before `/files/{dir}/{name}`) can serve no page: a config error. Judged on two URLs of the route, made of
        two values for each parameter; an earlier route that takes only some of them (`/r/all` before `/r/{board}`) is
        a choice, left alone."""
        compiled = self._routes[index]
        takers = set()
        for sample in _SAMPLES:
            values = {name: sample[type(convertor)] for name, convertor in compiled.convertors.items()}
            path = replace_params(compiled.path_format, compiled.convertors, values)[0]
            try:
                location = self.resolve(path)
            except BadRequest:
                return
            if location is None or location.route is compiled.route:
                return
            takers.add(location.route.pattern)
        (earlier, *_) = [n for n, r in enumerate(self.site.routes) if r.pattern in takers]
        pattern, taker = compiled.route.pattern, f"routes[{earlier}] ({self.site.routes[earlier].pattern!r})"
        if pattern != "/" and pattern.endswith("/") and earlier > index:
            # taken by a route declared after it, as the path without its "/" is tried on every route first
            raise SiteConfigError(
                self.site.root / "site.toml",
                f"routes[{index}].pattern",
                f"no request reaches {pattern!r}: genui drops a URL's trailing slash, and {taker} takes"
                f" {pattern.rstrip('/')!r}, which every route is tried on before {pattern!r} is",
                f"drop the trailing slash: pattern = {pattern.rstrip('/')!r}",
            )
        raise SiteConfigError(
            self.site.root / "site.toml",
            f"routes[{index}].pattern",
            f"no request reaches {pattern!r}: {taker} is tried first and matches every URL it would",
            f"declare it before routes[{earlier}], or make the patterns differ by a literal segment",
        )

    def _check_alias_reached(self, index: int, number: int) -> None:
        """An alias every URL of which a route takes first (aliases are tried last) leads nowhere: `/{a}/{b}` added
        after the wiki's articles took `/wiki/Hash_table`, the form its pages link each other by, which was served as
        another page with no word of it (a site developer's review). Judged as _check_reached judges a route."""
        route = self.site.routes[index]
        alias = route.aliases[number]
        _, path_format, convertors = compile_path(alias)
        takers = set()
        for sample in _SAMPLES:
            values = {name: sample[type(convertor)] for name, convertor in convertors.items()}
            try:
                location = self.resolve(replace_params(path_format, convertors, values)[0])
            except BadRequest:
                return
            if location is None or (location.route is route and location.aliased):
                return
            takers.add(location.route.pattern)
        taker = next(n for n, r in enumerate(self.site.routes) if r.pattern in takers)
        raise SiteConfigError(
            self.site.root / "site.toml",
            f"routes[{index}].aliases[{number}]",
            f"no request reaches {alias!r}: routes[{taker}] ({self.site.routes[taker].pattern!r}) takes every URL of"
            " it, and aliases are tried after every route's pattern",
            f"make routes[{taker}]'s pattern differ from it by a literal segment, or remove the alias",
        )

    def _served(self, url: str) -> bool:
        try:
            return self.locate(url) is not None
        except BadRequest:
            return False

    def _check_link(self, url: str, key: str) -> None:
        """A link in the site's navigation must lead to a page, by the page's own URL."""
        file = self.site.root / "site.toml"
        try:
            location = self.locate(url)
        except BadRequest as err:
            raise SiteConfigError(file, key, f"{url!r} is not a page's URL ({err})", "fix the URL") from None
        if location is None:
            prefix = f"/{self.site.name}"
            inside = url.removeprefix(prefix) if url.startswith(prefix + "/") else None
            if inside is not None and self._served(inside):  # the server's mount is no part of the site's URLs
                fix = f"write it as the site sees it, {inside!r}: genui adds {prefix!r} where the site is served so"
                raise SiteConfigError(file, key, f"no route serves {url!r}", fix)
            raise SiteConfigError(file, key, f"no route serves {url!r}", "write a URL that one of the routes matches")
        if location.aliased:
            said = f"{url!r} redirects to {location.path!r}"
            if unicodedata.normalize("NFC", url) != url:  # escaped as well: the two read alike (a review)
                said += f": it holds decomposed accents ({url!a}), its page's URL composed ones ({location.path!a})"
            raise SiteConfigError(file, key, said, f"write the page's own URL, {location.path!r}")
        if untaken := untaken_keys(url, location):  # the page would open without them
            raise SiteConfigError(file, key, untaken, "use the route's query keys, or add them to its query = [...]")

    def _compile(self, pattern: str, key: str) -> tuple[re.Pattern[str], str, dict[str, Convertor[Any]]]:
        try:
            return compile_path(pattern)
        except ValueError as err:
            raise SiteConfigError(
                self.site.root / "site.toml", key, str(err), "give each parameter its own name"
            ) from None

    def resolve(self, path: str, query: Iterable[tuple[str, str]] = ()) -> Location | None:
        """The page at ``path`` (site-relative) or None when no route matches. Raises BadRequest on malformed input.
        A path that an alias, ``spaces`` or ``case`` moves is the page at the path it moves to, whichever route
        serves that (`/About` with a route `/about` declared before `/{page}`, whose ``case`` lower-cases it)."""
        pairs = list(query)
        location = self._matched(path, pairs)
        if location is None or not location.aliased:
            return location
        settled = self._matched(location.path, pairs)
        if settled is None or settled.aliased or settled.route is location.route:
            return location
        return replace(settled, aliased=True)

    def _matched(self, path: str, pairs: list[tuple[str, str]]) -> Location | None:
        """The first route (then alias) that ``path`` matches, and the page's own path by that route's rules."""
        written_path = normalise_path(path)
        # One page, one URL: `Café` written with a combining accent (NFD, as macOS's file names) is `Café` composed
        canonical = unicodedata.normalize("NFC", DIRECTION_MARKS.sub("", written_path))
        # "/files/" must still reach "/files/{path:path}" although trailing slashes are otherwise dropped.
        candidates = (canonical,) if canonical == "/" else (canonical, canonical + "/")
        for aliased, table in ((False, self._routes), (True, self._aliases)):
            for candidate in candidates:
                for compiled in table:
                    match = compiled.regex.match(candidate)
                    if match is None:
                        continue
                    convertors = compiled.convertors
                    params = {name: str(convertors[name].convert(value)) for name, value in match.groupdict().items()}
                    spaces = compiled.route.spaces
                    written = params
                    if spaces is not None:  # and none at a name's ends: `/Regular_` is `/Regular`, as MediaWiki's
                        params = {name: _SPACES.sub(spaces, value).strip(spaces) for name, value in params.items()}
                    if any(_blank(params[name]) and written[name] for name in params):  # `/_`, `/%E2%80%8B`
                        return None  # a name that shows nothing names no page (`/files/` is the folder `/`)
                    if compiled.route.case:
                        lang, case = self.site.lang, compiled.route.case
                        params = {**params, **{name: recased(params[name], rule, lang) for name, rule in case}}
                    # an alias, or a page whose URL writes spaces, letter case or accents another way
                    rewritten = aliased or params != written or canonical != written_path
                    # normalised again: a parameter may bring a "/" or a "." that the pattern's own text does not
                    # (an alias "/old{p:path}" takes "/evil.example" whole, and "//evil.example" is another host)
                    page = (
                        normalise_path(replace_params(compiled.path_format, convertors, dict(params))[0])
                        if rewritten
                        else candidate
                    )
                    # or one written with a slash too many (`/Lisp/`, `//Lisp`) or too few (`/files` for `/files/`):
                    # a bookmark held two addresses of one page, and Back after a Regenerate led to `/Lisp/?v=1`
                    moved = rewritten or page != path
                    return Location(compiled.route, page, params, normalise_query(compiled.route, pairs), moved)
        return None

    def locate(self, url: str) -> Location | None:
        """The page at a site-relative URL, query included (``/search?q=lisp``, ``/r/debian/What_is_V.11%3F``): its
        path percent-decoded first, as Starlette decodes a request's. Raises BadRequest if malformed."""
        path, _, query = url.partition("?")
        return self.resolve(unquote(path), parse_qsl(query, keep_blank_values=True))

    def link_target(self, href: str, text: str = "", on: Location | None = None) -> str | None:
        """The href a link to ``href`` should carry: ``href`` itself, or for an alias the page's own path with the
        href's query and fragment; None unless ``href`` is a site-relative URL that one of the routes serves. A path
        that no route serves but would with each segment written twice or more in a row written once (the default
        model's `/r/news/news/Title`, `/wiki/wiki/Lisp`) leads to that page; one with a `/` too many in the parameter
        a link's text names (`/r/work/science/Title`, ``Route.link_text``) to the page its text names, if any. Where
        the route says a link's text names one of its parameters (``Route.link_text``), the page the link's
        ``text`` names, when that is a page of the same route. ``on``: the page the link is on; where its route
        follows links (``Route.follow_links``: a web page in the desktop's browser), every link is the web page's
        and opens on that route (``_followed``), `/` and `/files/x` included. Elsewhere a link to ``on`` itself is
        None, as it would only load the page it is on again (the default model's wiki articles list themselves under
        "See also"), and one to a place on it is that place (``#gen-History``)."""
        if on is not None and on.route.follow_links is not None:
            return self._followed(href, on)
        target = self._routed(href, text)
        if target is not None and on is not None:
            target = self.carried(target, on)
        if target is not None and on is not None and self._is_page(target, on):
            fragment = urlsplit(target).fragment
            return f"#{fragment}" if fragment else None
        return target

    def carried(self, href: str, on: Location) -> str:
        """A site-relative ``href`` with the site's ``carry`` keys that the page ``on`` has and ``href`` leaves out,
        where the page it leads to takes them: a game's inventory goes on with the player, whatever link the model
        wrote (it was lost at the first link written without it: a hackathon team's game). A key ``href`` gives,
        empty too, is its own."""
        parts = urlsplit(href)
        if not self.site.carry or not parts.path:
            return href
        given = {key for key, _ in parse_qsl(parts.query, keep_blank_values=True)}
        try:
            location = self.resolve(unquote(parts.path), parse_qsl(parts.query))
        except BadRequest:
            return href
        if location is None:
            return href
        takes = location.route.query
        added = {key: on.query[key] for key in self.site.carry if key in takes and key not in given and key in on.query}
        if not added:
            return href
        query = urlencode(sorted({**location.query, **added}.items()))
        return urlunsplit(("", "", url_path(location.path), query, parts.fragment))

    def _is_page(self, href: str, page: Location) -> bool:
        """Whether a site-relative ``href`` (one ``_routed`` gave) leads to ``page``, fragment or none."""
        parts = urlsplit(href)
        try:
            location = self.resolve(unquote(parts.path), parse_qsl(parts.query))
        except BadRequest:
            return False
        return location is not None and (location.route, location.path, location.query) == (
            page.route,
            page.path,
            page.query,
        )

    def _routed(self, href: str, text: str) -> str | None:
        try:
            parts = urlsplit(href)
        except ValueError:  # "//[": not a URL
            return None
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            return None
        path, query = unquote(parts.path), parse_qsl(parts.query)
        loose = False
        try:
            location = self.resolve(path, query)
            if location is None:
                once = _said_once(canonical := normalise_path(path))
                if once != canonical:
                    location = self.resolve(once, query)
                    if location is not None:  # the page the href meant: its path as a request for it would have it
                        location = replace(location, aliased=True)
                if location is None:
                    location, loose = self._loosely(once, query), True
        except BadRequest:
            return None
        if location is None:
            return None
        named = self._named_by(location, text)
        if loose and named is None:  # no page's name has a `/`: only the text can say which page was meant
            return None
        if named is not None:
            return urlunsplit(("", "", url_path(named.path), parts.query, parts.fragment))
        written = parse_qsl(parts.query, keep_blank_values=True)
        if any(key not in location.route.query for key, _ in written):  # a version's `v`, the model's `gold=5`: out
            # (a `v` led to "No such version", an unknown key stayed in the address bar after an htmx click: a
            # hackathon team's game); the keys the route takes as written, an empty one too (a carried key emptied)
            kept = dict(reversed([(key, value) for key, value in written if key in location.route.query]))
            return urlunsplit(("", "", url_path(location.path), urlencode(sorted(kept.items())), parts.fragment))
        return urlunsplit(("", "", url_path(location.path), parts.query, parts.fragment)) if location.aliased else href

    def _followed(self, href: str, on: Location) -> str | None:
        """The page of ``on``'s route that shows what ``href`` points at: its ``follow_links`` query key set to the
        address ``href`` makes of the page's own (schemeless, as the desktop's browser names pages:
        `/wiki/Lisp` on `?url=genpedia.org/wiki/Unix` is `?url=genpedia.org/wiki/Lisp`, `https://example.org/a`
        is `?url=example.org/a`, though the sanitiser drops a link to another host before it gets here); None for
        a link to no web address (`mailto:`, `javascript:`, a path with no host to resolve it against)."""
        key = on.route.follow_links
        assert key is not None
        own = on.query.get(key, "")
        try:  # `localhost:8080/x` has no scheme: only `://` says one is there
            base = own if "://" in own else "http://" + own.removeprefix("//")
            parts = urlsplit(urljoin(base, href))
            host = parts.hostname
        except ValueError:  # not a URL ("//[", a bad port)
            return None
        if parts.scheme not in ("http", "https") or not host:
            return None
        address = parts.netloc + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            target = self.resolve(on.path, [(key, address), *on.query.items()])
        except BadRequest:  # an address the route's query cannot take
            return None
        return None if target is None else target.url

    def _loosely(self, path: str, query: Iterable[tuple[str, str]]) -> Location | None:
        """The page of a route with ``link_text`` that ``path`` would be if that parameter could span slashes: not a
        page itself (no name has a `/`), but one whose link's text may name a page of the route (``_named_by``)."""
        for compiled in self._loose:
            match = compiled.regex.match(path)
            if match is not None:
                params = {
                    name: str(compiled.convertors[name].convert(value)) for name, value in match.groupdict().items()
                }
                return Location(compiled.route, path, params, normalise_query(compiled.route, query), True)
        return None

    def _named_by(self, location: Location, text: str) -> Location | None:
        """The page of ``location``'s route whose ``link_text`` parameter is ``text`` (as a reader sees it, spaces
        collapsed), the other parameters as they are; None when the route has no such parameter, ``text`` names
        ``location`` itself or no page of the route (a `/` in a one-segment parameter), or ``text`` is not a
        variant of the name the href gives (``_LIKE``): the parser's copy of a link left open, carried into the
        next list item (`by bob · 3 points`), or a link's text that is no title (`Reply`)."""
        name = location.route.link_text
        said = " ".join(text.split())
        if name is None or not said or len(said) > _LONGEST_NAME:
            return None
        href_name = location.params[name].replace(location.route.spaces or " ", " ")
        if difflib.SequenceMatcher(None, said.lower(), " ".join(href_name.lower().split())).ratio() < _LIKE:
            return None
        compiled = next(c for c in self._routes if c.route is location.route)
        try:
            path, _ = replace_params(compiled.path_format, compiled.convertors, {**location.params, name: said})
            named = self.resolve(path)
        except (AssertionError, ValueError, BadRequest):  # Starlette's convertors assert there is no `/`
            return None
        if named is None or named.route is not location.route or named.path == location.path:
            return None
        return named

    def serves_some_path_from(self, start: str) -> bool:
        """Whether some path that starts with ``start`` (an href an opening leaves for the model to finish) is one a
        route or an alias could serve: ``start`` read against each pattern's text and parameters, a ``{name}`` one
        segment (so `/recette/` is no start of `/{title}`'s paths, whose title holds no slash), a ``{name:path}``
        any."""
        return any(
            _starts(re.split(r"(\{[^}]*\})", pattern), start)
            for route in self.site.routes
            for pattern in (route.pattern, *route.aliases)
        )

    def link_reading(self, href: str, text: str) -> str:
        """A link's ``text`` as a reader should read it: where it is the page's own parameter as its URL writes it,
        with the route's ``spaces`` for its spaces (`Hash_table` for a link to `/Hash_table`, as the default model
        writes a tenth of its wiki links), the parameter with spaces (`Hash table`), in the letters the text has;
        anything else as it is. ``href``: a site-relative URL that routes, as ``link_target`` gives it."""
        written = text.strip()
        if not written or any(character.isspace() for character in written):
            return text
        try:
            location = self.resolve(unquote(urlsplit(href).path))
        except ValueError:  # BadRequest, or not a URL
            return text
        spaces = None if location is None else location.route.spaces
        if location is None or spaces is None or spaces == " " or spaces not in written:
            return text
        read = " ".join(written.replace(spaces, " ").split())  # `Regular_` for `/Regular` reads `Regular`
        if not any(read.casefold() == value.replace(spaces, " ").casefold() for value in location.params.values()):
            return text
        return text.replace(written, read)

    def link_title(self, href: str) -> str:
        """What a link to ``href`` (a site-relative URL that routes, as ``link_target`` gives it) reads when the model
        wrote it no text: the page's name as a title reads it (``guessed_title``, not the route's ``page_title``: a
        link in a file manager reads "user", not "Files: /home/user"), "" for none."""
        try:
            parts = urlsplit(href)
            location = self.resolve(unquote(parts.path), parse_qsl(parts.query))
        except ValueError:  # BadRequest, or not a URL ("//[")
            return ""
        return "" if location is None else guessed_title(location, own=False, lang=self.site.lang)

    def leads_to_page(self, href: str) -> bool:
        """Whether a link's ``href`` is a site-relative URL that resolves to one of the site's routes."""
        return self.link_target(href) is not None
