"""Site configs: a folder with ``site.toml`` and Jinja2 prompt templates, validated at load time.

Every error names the file, the key and the fix, so a developer never has to read a traceback.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ParamSpec, TypeGuard, TypeVar
from urllib.parse import unquote

from engine.frames import MIN_TEMPERATURE
from genui.words import WORDS, Forms, fields, problem

ASSETS_DIR = "assets"  # a site's own files, served as they are (genui.assets)

CONTEXT_KINDS = ("brief", "parent", "posts")
CACHE_POLICIES = ("forever", "none")
NAV_LOOKS = ("list", "icons")
SPACE_MARKS = ("_", "-", "+", ".", "~")  # what a route's ``spaces`` may turn a space into: URL-safe, not a separator
# What a route's ``case`` may make of a parameter's letters: all lower-case (a forum's boards), or the first one
# upper-case (a wiki's titles, as MediaWiki's: /hash_table is /Hash_table)
CASE_RULES = ("lower", "upper-first")
ROUTE_KEYS = (
    "pattern",
    "template",
    "opening",
    "reply_opening",
    "context",
    "query",
    "cache",
    "posts",
    "aliases",
    "spaces",
    "case",
    "link_text",
    "follow_links",
    "bar",
    "reply_form",
    "page_title",
    "edits",
    "form",
)
# The words of the readers' form below a page with posts (a route's reply_form may say each otherwise): its heading,
# its two fields' labels, its button.
REPLY_FORM = {"heading": "Replies from readers", "name": "Name", "text": "Reply", "button": "Post reply"}
NAV_KEYS = ("on", "heading", "links", "pages", "look", "limit")
TOP_KEYS = ("name", "title", "brief", "lang", "stylesheet", "model", "routes", "navigation", "words", "carry")
_LANG = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*")  # a BCP 47 tag as HTML's lang takes it: en, ja, pt-BR, zh-Hant


def valid_lang(tag: str) -> bool:
    """Whether ``tag`` is a language tag site.toml's ``lang`` takes (en, ja, pt-BR, zh-Hant)."""
    return _LANG.fullmatch(tag) is not None


# Languages written right to left (their BCP 47 primary subtags): a site in one is laid out so (<html dir="rtl">).
# languages written right to left unless a script subtag says otherwise (the old tags iw and ji too)
RIGHT_TO_LEFT = frozenset(
    {
        "ar",
        "arc",
        "bal",
        "bqi",
        "ckb",
        "dv",
        "fa",
        "glk",
        "he",
        "iw",
        "ji",
        "ks",
        "ku",
        "lrc",
        "mzn",
        "nqo",
        "ps",
        "rhg",
    }
    | {"sd", "sdh", "syr", "ug", "ur", "yi"}
)
# ISO 15924 scripts written right to left: a tag's script subtag decides before its language (pa-Arab, ku-Latn)
RIGHT_TO_LEFT_SCRIPTS = frozenset(
    {"adlm", "arab", "aran", "armi", "avst", "cprt", "hebr", "khar", "lydi", "mand", "mani", "mend", "narb", "nbat"}
    | {"nkoo", "orkh", "palm", "phli", "phlp", "phnx", "prti", "rohg", "samr", "sarb", "sogd", "sogo", "syrc", "thaa"}
    | {"yezi"}
)
NAV_LIMIT = 20  # written pages a navigation section lists unless it says otherwise
_PARAM = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)(?::(str|path))?\}")
_TYPED = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*):([^{}]*)\}")
_FLASK_PARAM = re.compile(r"<(?:[a-z]+:)?([A-Za-z_]\w*)>")  # /book/<title>, /book/<int:id>
_EXPRESS_PARAM = re.compile(r"/:([A-Za-z_]\w*)")  # /shelf/:genre
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # the whole name: fullmatch


WHOLE_FILE = "-"  # the key of an error that is the whole file's (not found, not UTF-8, not TOML)


class SiteConfigError(ValueError):
    """A site config is wrong. ``str(error)`` says where and how to fix it."""

    def __init__(self, file: Path | str, key: str, problem: str, fix: str) -> None:
        self.file, self.key, self.problem, self.fix = str(file), key, problem, fix
        where = "" if key == WHOLE_FILE else f"key '{key}': "
        super().__init__(f"{file}: {where}{problem.rstrip('.')}. Fix: {fix}")

    @property
    def each(self) -> tuple[SiteConfigError, ...]:
        """Every problem this error reports: itself, or those of a SiteConfigErrors."""
        return (self,)


class SiteConfigErrors(SiteConfigError):
    """Several problems found in one check, each said on a line of its own: a developer fixes them in one edit
    rather than one a run (a hackathon team's review). Its file, key, problem and fix are the first one's."""

    def __init__(self, errors: list[SiteConfigError]) -> None:
        said = {str(error): error for found in errors for error in found.each}  # one problem found twice: once
        self.errors = tuple(said.values())
        first = self.errors[0]
        self.file, self.key, self.problem, self.fix = first.file, first.key, first.problem, first.fix
        ValueError.__init__(self, "\n".join(str(error) for error in self.errors))

    @property
    def each(self) -> tuple[SiteConfigError, ...]:
        return self.errors


def combined(errors: list[SiteConfigError]) -> SiteConfigError:
    """One error for ``errors`` (at least one): the error itself where there is one."""
    together = SiteConfigErrors(errors)
    return together.errors[0] if len(together.errors) == 1 else together


T = TypeVar("T")
P = ParamSpec("P")


class Problems:
    """The errors of a config's parts that are checked each on its own, so that one wrong part hides no other."""

    def __init__(self) -> None:
        self.found: list[SiteConfigError] = []

    def check(self, part: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """What ``part(*args, **kwargs)`` returns; None where it raises SiteConfigError, which is kept."""
        try:
            return part(*args, **kwargs)
        except SiteConfigError as err:
            self.found.append(err)
            return None

    def add(self, error: SiteConfigError) -> None:
        self.found.append(error)

    def raise_found(self) -> None:
        """Raise every problem found, as one error, if there is any."""
        if self.found:
            raise combined(self.found)


MODEL_KEYS = ("tokens", "steps", "t_max", "t_min", "entropy_bound")


# Keys other tools (or genui's own options) name so, for the key a site.toml calls it: `genui new --description`
# fills in `brief` (a hackathon team wrote `description = ...` and got "unknown key" alone).
ALSO_CALLED = {
    "description": ("brief",),
    "summary": ("brief",),
    "css": ("stylesheet",),
    "style": ("stylesheet",),
    "path": ("pattern",),
    "url": ("pattern",),
    "route": ("pattern",),
    "prompt": ("template",),
    "language": ("lang",),
    "max_tokens": ("tokens",),
    "title": ("page_title",),  # in a route table, whose pages' title it would be (the site's is a top-level key)
}


def unknown_key(file: Path, where: str, key: str, known: tuple[str, ...], table: str) -> SiteConfigError:
    """The error for ``key`` in a table whose keys are ``known``: a key of a route's at the top level, a near miss
    of a known key, or one to remove. (A top-level key written after a [table] header, which TOML puts in that
    table, is found before, where the top level lacks it: ``load_site``.)"""
    if table == "top-level" and key in ROUTE_KEYS:
        return SiteConfigError(
            file, where, f"{key} is a route's key", "put it in a [[routes]] table, after the header of the route"
        )
    if (near := meant_by(key, known)) is not None:
        return SiteConfigError(file, where, f"unknown key (did you mean {near!r}?)", f"write {near}")
    return SiteConfigError(file, where, "unknown key", f"remove it; {table} keys are {list(known)}")


def meant_by(key: str, known: tuple[str, ...]) -> str | None:
    """The key of ``known`` that an unknown ``key`` is a slip or another tool's name for; None where none is."""
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.75) or [
        meant for meant in ALSO_CALLED.get(key, ()) if meant in known
    ]
    return near[0] if near else None


@dataclass(frozen=True, slots=True)
class ModelSettings:
    tokens: int = 512  # the most tokens one page may take (the engine rounds up to its model's canvases)
    steps: int | None = None  # max denoising steps per canvas; None keeps the checkpoint's
    # Sampler settings; None keeps the checkpoint's generation_config.json. Names as in DiffusionGemma's config.
    t_max: float | None = None  # temperature at the first denoising step
    t_min: float | None = None  # temperature at the last denoising step
    entropy_bound: float | None = None  # how much token entropy one denoising step may accept


@dataclass(frozen=True, slots=True)
class Route:
    pattern: str  # the page's URL under the site's mount, e.g. "/{title}" or "/files/{path:path}"
    template: str  # file name under prompts/
    context: tuple[str, ...] = ("brief",)
    opening: str | None = None  # file name under prompts/: HTML every page of the route starts with, word for word
    query: tuple[str, ...] = ()  # query-string keys passed to the prompt
    cache: str = "forever"
    posts: bool = False  # users may post here; their posts are stored and shown
    reply_opening: str | None = None  # file name under prompts/: HTML new replies to posts start with, word for word
    aliases: tuple[str, ...] = ()  # other patterns naming the same pages (links the model writes); they redirect
    spaces: str | None = None  # the character a run of spaces in a parameter becomes ("_": /Hash table is /Hash_table)
    case: tuple[tuple[str, str], ...] = ()  # (parameter, one of CASE_RULES): the letter case its one page is written in
    link_text: str | None = None  # the parameter a generated link's text names: the link leads to the page it says
    # a query key: every link on this route's pages is the web page's and opens on this route, that key set to the
    # link's address (the desktop's browser: `/wiki/Lisp` on `?url=genpedia.org/wiki/Unix` opens
    # `?url=genpedia.org/wiki/Lisp`)
    follow_links: str | None = None
    # the site bar's form for this route (one with no parameters and one query key): its label, "" for none, None for
    # the label its pattern makes ("/search": "Search")
    bar: str | None = None
    bar_button: str | None = None  # the words of that form's button, None for its label's ("Run" for "Command")
    # the form genui draws above the route's pages, asking for several of its query keys: (key, label) in order
    form: tuple[tuple[str, str], ...] = ()
    form_button: str | None = None  # the words of its button, None for the pattern's ("/plan": "Plan")
    # the words of the readers' form below its pages (posts = true), each of REPLY_FORM's keys a site may say otherwise
    reply_form: tuple[tuple[str, str], ...] = ()
    # visitors may write its pages' next versions (Regenerate, a section rewritten, variations): false keeps each page
    # as first written (a game's scene, which one player's Regenerate changed for everyone), as --no-edits does all
    edits: bool = True
    # the title of a page the model writes no <h1> for, and of any page before it is written: "{name}" is a
    # parameter's or a query key's value ("Terminal: {cmd}"); None: the query's value, or the last parameter's
    page_title: str | None = None

    @property
    def reply_words(self) -> dict[str, str]:
        """The words of the readers' form below the route's pages: REPLY_FORM's, with the route's own over them."""
        return {**REPLY_FORM, **dict(self.reply_form)}

    @property
    def bar_label(self) -> str | None:
        """The label of the site bar's form that asks for this route's pages, None where it has none."""
        if len(self.query) != 1 or self.params or self.bar == "" or self.form:  # (a form asks for its key itself)
            return None
        return self.bar or " ".join(re.split(r"[/_-]+", self.pattern.strip("/"))).capitalize()

    @property
    def asked(self) -> str:
        """The query key a visitor is asked for first: the form's first field, else the route's first key."""
        return self.form[0][0] if self.form else self.query[0]

    @property
    def form_words(self) -> str:
        """The words of the button of the route's form (``form``), and its name."""
        return self.form_button or " ".join(re.split(r"[/_-]+", self.pattern.strip("/"))).capitalize() or "Go"

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(m.group(1) for m in _PARAM.finditer(self.pattern))


@dataclass(frozen=True, slots=True)
class NavLink:
    label: str  # the link's text
    url: str  # a site-relative URL one of the routes serves, e.g. "/Hash_table" or "/terminal?cmd=ls"


@dataclass(frozen=True, slots=True)
class NavSection:
    """A list of ways on that genui shows below the page on the pages of some routes, whatever the model wrote."""

    on: tuple[str, ...]  # patterns of the routes whose pages show it
    heading: str = ""
    links: tuple[NavLink, ...] = ()  # fixed links, in order
    pages: str | None = None  # a route's pattern: its pages already written (from the page cache), newest first
    look: str = "list"  # "list" or "icons"
    limit: int = NAV_LIMIT  # the most written pages listed


@dataclass(frozen=True, slots=True)
class Site:
    name: str
    title: str
    brief: str
    root: Path
    routes: tuple[Route, ...]
    stylesheet: str | None = None
    model: ModelSettings = field(default_factory=ModelSettings)
    navigation: tuple[NavSection, ...] = ()
    lang: str = "en"  # the language of its pages, as <html lang> says it
    # genui's words (genui.words.WORDS) this site says otherwise: a line, or a count's plural forms (genui.words.Forms)
    words: tuple[tuple[str, str | Forms], ...] = ()
    # query keys a page's links carry on from it where they leave them out (a game's inventory: `carry = ["items"]`)
    carry: tuple[str, ...] = ()

    @property
    def direction(self) -> str:
        """ "rtl" for a site in a language written right to left (Arabic, Hebrew, Persian, Urdu, ...) or in a script
        written so (``pa-Arab``), else "ltr" (``ku-Latn``, ``sd-Deva``: the script decides)."""
        language, *rest = self.lang.lower().split("-")
        rest = rest[: next((at for at, part in enumerate(rest) if len(part) == 1), len(rest))]  # not -x-… or -u-…
        script = next((part for part in rest if len(part) == 4 and part.isalpha()), None)
        if script is not None:
            return "rtl" if script in RIGHT_TO_LEFT_SCRIPTS else "ltr"
        return "rtl" if language in RIGHT_TO_LEFT else "ltr"

    @property
    def prompts_dir(self) -> Path:
        return self.root / "prompts"

    def stylesheet_path(self) -> Path | None:
        return self.root / self.stylesheet if self.stylesheet else None

    def assets_dir(self) -> Path:
        """The site's own files, served as they are (genui.assets): there or not, it is where they go."""
        return self.root / ASSETS_DIR


def _expect(file: Path, data: dict[str, Any], key: str, kind: type, fix: str, *, where: str = "") -> Any:
    full = f"{where}{key}"
    if key not in data:
        raise SiteConfigError(file, full, "missing", fix)
    value = data[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise SiteConfigError(file, full, f"expected {kind.__name__}, got {type(value).__name__}", fix)
    return value


def _string_list(file: Path, data: dict[str, Any], key: str, where: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in data:
        return default
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SiteConfigError(file, f"{where}{key}", "expected a list of strings", f'write e.g. {key} = ["a", "b"]')
    return tuple(value)


def _check_pattern(file: Path, key: str, pattern: str) -> None:
    """Refuse a pattern no request could match: genui canonicalises every path first (routing.normalise_path), so a
    pattern must be a canonical path itself, whatever its parameters hold."""
    if not pattern.startswith("/"):
        raise SiteConfigError(file, key, f"{pattern!r} is not an absolute path", 'start it with "/"')
    leftover = _PARAM.sub("", pattern)
    typed = _TYPED.search(leftover)
    if typed:  # Starlette's {n:int}, {x:float}, {u:uuid}: a page's parameters are text a prompt reads
        raise SiteConfigError(
            file,
            key,
            f"{typed[0]!r} in {pattern!r}: genui's parameters take no type but path",
            f"write {{{typed[1]}}} (one segment of text) or {{{typed[1]}:path}} (several)",
        )
    for other in (_FLASK_PARAM.search(leftover), _EXPRESS_PARAM.search(leftover)):
        if other:  # another framework's way (Flask's <title>, Express's :title): a page for that literal text only
            raise SiteConfigError(
                file,
                key,
                f"{other[0].lstrip('/')!r} in {pattern!r} is another framework's parameter, here a literal text",
                f"write {{{other[1]}}} (one segment) or {{{other[1]}:path}} (several)",
            )
    if "{" in leftover or "}" in leftover:
        raise SiteConfigError(file, key, f"bad parameter in {pattern!r}", "write parameters as {name} or {name:path}")
    sample = _PARAM.sub("x", pattern)  # the path a request for it has, a value in each parameter
    if "?" in sample or "#" in sample:
        raise SiteConfigError(
            file,
            key,
            f"{pattern!r} holds a query or a fragment",
            'match the path only, and name query keys in query = ["q"]',
        )
    if "//" in sample or FORBIDDEN_IN_PATH.search(sample):
        raise SiteConfigError(
            file,
            key,
            f"{pattern!r} holds an empty segment, a backslash, a control character or a bidi control",
            "no request has one (genui canonicalises paths first): write the path as a browser sends it",
        )
    if any(segment in (".", "..") for segment in sample.split("/")):
        raise SiteConfigError(file, key, f"{pattern!r} holds a dot segment", "no request has one: remove it")
    if _ESCAPE.search(sample):  # requests are matched decoded: "%61" would match only a path holding "%2561"
        raise SiteConfigError(
            file, key, f"{pattern!r} holds a percent-escape", f"genui matches decoded paths: write {unquote(pattern)!r}"
        )
    if unicodedata.normalize("NFC", sample) != sample:  # requests are matched composed (routing reads paths as NFC)
        composed = unicodedata.normalize("NFC", pattern)
        raise SiteConfigError(
            # escaped as well: the two read alike, and "write '/é' as '/é'" named no difference (a review)
            file,
            key,
            f"{pattern!r} holds decomposed accents ({pattern!a})",
            f"write it composed (NFC): {composed!r} ({composed!a})",
        )
    if len(sample) > MAX_PATH:
        raise SiteConfigError(file, key, f"{pattern!r} is longer than {MAX_PATH} characters", "shorten it")


# What no canonical path holds, and how long one may be (genui.routing refuses a request's path by these before any
# route is tried, so a pattern past them would match nothing).
# C0 and C1 controls (a C1 in a path printed by genui posts set the moderator's terminal's title or cleared it), the
# bidi controls RFC 3987 keeps out of IRIs (a path that prints right to left), and the backslash.
FORBIDDEN_IN_PATH = re.compile(r"[\x00-\x1f\x7f-\x9f\\\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_PATH = 512  # characters of a decoded path; longer is a malformed request, not a page


def _parameters(pattern: str) -> list[tuple[str, str]]:
    return sorted((name, kind or "str") for name, kind in _PARAM.findall(pattern))


def _load_route_at(file: Path, root: Path, index: int, data: Any) -> Route:
    """``_load_route``, its error naming the route by its pattern too where it has one: `routes[5]` alone is the
    sixth [[routes]] table, counted from 0."""
    try:
        return _load_route(file, root, index, data)
    except SiteConfigError as found:
        pattern = data.get("pattern") if isinstance(data, dict) else None
        if not isinstance(pattern, str):
            raise
        named = [
            err
            if pattern in err.problem or err.key == f"routes[{index}].pattern"
            else SiteConfigError(err.file, err.key, f"{err.problem.rstrip('.')} (the route {pattern!r})", err.fix)
            for err in found.each
        ]
        raise combined(named) from None


def _load_route(file: Path, root: Path, index: int, data: Any) -> Route:
    """A route, checked: its unknown keys (a typo, `cach`) said with the first problem of the rest, not alone."""
    where = f"routes[{index}]."
    if not isinstance(data, dict):
        raise SiteConfigError(file, f"routes[{index}]", "expected a table", "write each route as a [[routes]] table")
    unknown = [unknown_key(file, f"{where}{key}", key, ROUTE_KEYS, "route") for key in data if key not in ROUTE_KEYS]
    try:
        route = _route_of(file, root, where, data)
    except SiteConfigError as err:
        meant = err.key.removeprefix(where)
        if err.problem == "missing" and any(f"did you mean {meant!r}" in slip.problem for slip in unknown):
            raise combined(unknown) from None  # `templte`'s template: said once, as the key misspelt
        raise combined([*unknown, err]) from None
    if unknown:
        raise combined(unknown)
    return route


def _route_of(file: Path, root: Path, where: str, data: dict[str, Any]) -> Route:
    pattern = _expect(file, data, "pattern", str, 'add pattern = "/page/{name}"', where=where)
    _check_pattern(file, f"{where}pattern", pattern)
    aliases = _string_list(file, data, "aliases", where, ())
    for number, alias in enumerate(aliases):
        _check_pattern(file, f"{where}aliases[{number}]", alias)
        # An alias's page is redirected to the pattern's, which is built from the alias's parameters.
        if _parameters(alias) != _parameters(pattern):
            raise SiteConfigError(
                file,
                f"{where}aliases[{number}]",
                f"{alias!r} has other parameters than the pattern {pattern!r}",
                "give it exactly the pattern's parameters",
            )
    spaces = data.get("spaces")
    if spaces is not None and (not isinstance(spaces, str) or spaces not in SPACE_MARKS):
        raise SiteConfigError(
            file,
            f"{where}spaces",
            f"{spaces!r} cannot stand for a space in a URL",
            f'write spaces = "_" (or one of {"".join(SPACE_MARKS)}), or remove it to keep spaces as they are',
        )
    case = _load_case(file, where, data, pattern)
    link_text = data.get("link_text")
    if link_text is not None and link_text not in [name for name, _ in _parameters(pattern)]:
        raise _not_a_parameter(file, f"{where}link_text", link_text, pattern, "the key")
    template = _prompt_file(file, root, f"{where}template", data, "template", "page.j2")
    opening = None
    if "opening" in data:
        opening = _prompt_file(file, root, f"{where}opening", data, "opening", "page_opening.j2")
    context = _string_list(file, data, "context", where, ("brief",))
    for kind in context:
        if kind not in CONTEXT_KINDS:
            raise SiteConfigError(
                file, f"{where}context", f"unknown context {kind!r}", f"use some of {list(CONTEXT_KINDS)}"
            )
    query = _string_list(file, data, "query", where, ())
    if len(set(query)) < len(query):
        raise SiteConfigError(file, f"{where}query", f"{list(query)} names a key twice", "name each key once")
    follow_links = data.get("follow_links")
    if follow_links is not None and follow_links not in query:
        raise SiteConfigError(
            file,
            f"{where}follow_links",
            f"{follow_links!r} is not one of the route's query keys",
            f'add it to query (query = ["{follow_links}"]), or remove the key'
            if isinstance(follow_links, str)
            else 'name one of the route\'s query keys: follow_links = "url"',
        )
    cache = data.get("cache", "forever")
    if cache not in CACHE_POLICIES:
        raise SiteConfigError(file, f"{where}cache", f"unknown policy {cache!r}", f"use one of {list(CACHE_POLICIES)}")
    posts = data.get("posts", False)
    if not isinstance(posts, bool):
        raise SiteConfigError(file, f"{where}posts", "expected true or false", "write posts = true or remove it")
    edits = data.get("edits", True)
    if not isinstance(edits, bool):
        raise SiteConfigError(file, f"{where}edits", "expected true or false", "write edits = false or remove it")
    if posts and "posts" not in context:
        context = (*context, "posts")
    if "posts" in context and not posts:  # readers post only where posts = true: the template would see none, ever
        raise SiteConfigError(
            file,
            f"{where}context",
            '"posts" is in the context of a route readers cannot post to',
            'add posts = true (readers post below its pages, and the template sees their posts), or take "posts" out',
        )
    bar, bar_button = data.get("bar"), None
    if isinstance(bar, dict):  # { label = "Command", button = "Run" }: the button says what it does
        bar, bar_button = _bar_table(file, f"{where}bar", bar)
    if (bar_button is not None or isinstance(bar, str)) and (len(query) != 1 or _parameters(pattern)):
        raise SiteConfigError(
            file,
            f"{where}bar",
            "the site bar has a form only for a route with no parameters and one query key",
            'remove bar, or give the route one query key (query = ["q"]) and no parameters',
        )
    if isinstance(bar, bool):  # false: no form, on any route (so a query key added later breaks nothing); true: the
        # form a route with no parameters and one query key has anyway
        bar = None if bar else ""
    elif bar is not None:
        example = f'bar = "{pattern.strip("/").capitalize() or "Search"}"'
        if not _one_line(bar, 40):
            raise SiteConfigError(
                file,
                f"{where}bar",
                _wrong(bar, "a short label (one line, 40 characters at most)"),
                f"{example} (its form's label), or bar = false for none",
            )
    reply_form = _reply_form(file, where, data, posts)
    form, form_button = _form(file, where, data, pattern, query)
    page_title = _page_title(file, where, data, pattern, query)
    reply_opening = None
    if "reply_opening" in data:
        if not posts:
            raise SiteConfigError(
                file, f"{where}reply_opening", "only a route with posts gets replies", "add posts = true or remove it"
            )
        reply_opening = _prompt_file(file, root, f"{where}reply_opening", data, "reply_opening", "reply_opening.j2")
    return Route(
        pattern=pattern,
        template=template,
        context=context,
        opening=opening,
        query=query,
        cache=cache,
        posts=posts,
        reply_opening=reply_opening,
        reply_form=reply_form,
        aliases=aliases,
        spaces=spaces,
        case=case,
        link_text=link_text,
        follow_links=follow_links,
        bar=bar,
        bar_button=bar_button,
        form=form,
        form_button=form_button,
        page_title=page_title,
        edits=edits,
    )


BAR_KEYS = ("label", "button")
FORM_KEYS = ("fields", "button")


def _form(
    file: Path, where: str, data: dict[str, Any], pattern: str, query: tuple[str, ...]
) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """A route's ``form``: the query keys it asks for, each with its label, in the order written, and its button's
    words (None where left out). A trip planner asked for four values, which a site bar's box (one key) could not,
    and the sanitiser drops a form the model writes (a hackathon team's app)."""
    form = data.get("form")
    if form is None:
        return (), None
    key = f"{where}form"
    first = query[0] if query else "q"
    example = f'form = {{ fields = {{ {first} = "{first.capitalize()}" }}, button = "Go" }}'
    if not isinstance(form, dict):
        raise SiteConfigError(file, key, _wrong(form, "a table"), f"write it as a table: {example}")
    for name in form:
        if name not in FORM_KEYS:
            raise unknown_key(file, f"{key}.{name}", name, FORM_KEYS, "form")
    if _parameters(pattern):
        raise SiteConfigError(
            file,
            key,
            f"a form asks for query keys, and {pattern!r} has parameters its form could not fill in",
            "give the form a route of its own with no parameters, or remove form",
        )
    fields = form.get("fields")
    if not isinstance(fields, dict) or not fields:
        said = "no fields" if fields is None or fields == {} else _wrong(fields, "a table of fields")
        raise SiteConfigError(
            file, f"{key}.fields", said, f"name the query keys it asks for, each with its label: {example}"
        )
    for name, label in fields.items():
        if name not in query:
            raise SiteConfigError(
                file,
                f"{key}.fields.{name}",
                f"{name!r} is not one of the route's query keys ({', '.join(query) or 'it has none'})",
                f'add it to query = [...], or ask for one of the keys it has: {{ {first} = "..." }}',
            )
        if not _one_line(label, 60):
            raise SiteConfigError(
                file,
                f"{key}.fields.{name}",
                _wrong(label, "a label (one line, 60 characters at most)"),
                f'write the words a visitor reads beside the box: {name} = "{name.replace("_", " ").capitalize()}"',
            )
    button = form.get("button")
    if button is not None and not _one_line(button, 40):
        raise SiteConfigError(
            file,
            f"{key}.button",
            _wrong(button, "a short text (one line, 40 characters at most)"),
            f"write it as the visitor reads it: {example}",
        )
    return tuple((name, label.strip()) for name, label in fields.items()), button


def _bar_table(file: Path, key: str, table: dict[str, Any]) -> tuple[str | None, str | None]:
    """A route's ``bar`` written as a table: its form's label and its button's words, each None where left out."""
    for name in table:
        if name not in BAR_KEYS:
            raise unknown_key(file, f"{key}.{name}", name, BAR_KEYS, "bar")
    said = []
    for name in BAR_KEYS:
        value = table.get(name)
        if value is not None and not _one_line(value, 40):
            raise SiteConfigError(
                file,
                f"{key}.{name}",
                _wrong(value, "a short text (one line, 40 characters at most)"),
                'write it as the visitor reads it: bar = { label = "Command", button = "Run" }',
            )
        said.append(value)
    return said[0], said[1]


def _page_title(file: Path, where: str, data: dict[str, Any], pattern: str, query: tuple[str, ...]) -> str | None:
    """A route's ``page_title`` (not ``title``, the site's: written after a [[routes]] header by mistake, it is
    said to be the top level's): one line of text, each ``{name}`` in it one of the pattern's parameters or the route's
    query keys, or ``{name:RULE}`` with a RULE of CASE_RULES (``{{`` and ``}}`` are braces)."""
    if "page_title" not in data:
        return None
    key, title = f"{where}page_title", data["page_title"]
    names = [name for name, _ in _parameters(pattern)] + list(query)
    words = pattern.strip("/").split("/")[0].capitalize() or "Home"
    example = f'page_title = "{words}{": {" + names[0] + "}" if names else ""}"'
    if not _one_line(title, 100):
        problem = "empty" if isinstance(title, str) and not title.strip() else None
        wrong = problem or _wrong(title, "one line of text (100 characters at most)")
        raise SiteConfigError(file, key, wrong, f"write {example}")
    try:
        written_fields = fields(title)
    except ValueError as exc:
        raise SiteConfigError(file, key, f"{title!r}: {exc}", f"write {{{{ and }}}} for a brace; {example}") from None
    for field_text in written_fields:
        name = re.split(r"[!:]", field_text, maxsplit=1)[0]
        written = f"{{{field_text}}}"
        if name in names and field_text not in (name, *(f"{name}:{rule}" for rule in CASE_RULES)):
            raise SiteConfigError(
                file,
                key,
                f"{written} has a format genui does not know",
                f"write {{{name}}} for the value as it is, or {{{name}:upper-first}} or {{{name}:lower}} for it in "
                "that letter case",
            )
        if name not in names:
            said = ", ".join(names) or "none"
            raise SiteConfigError(
                file,
                key,
                f"{written} is not one of the route's parameters or query keys ({said})",
                f"name one of them in braces, as {example} does",
            )
    return title


def _reply_form(file: Path, where: str, data: dict[str, Any], posts: bool) -> tuple[tuple[str, str], ...]:
    """A route's ``reply_form``: the words of its readers' form a site says otherwise (a recipe site's "Send your
    recipe"), each one line of text."""
    if "reply_form" not in data:
        return ()
    key = f"{where}reply_form"
    example = 'reply_form = { heading = "Recipes from readers", text = "Your recipe", button = "Send it" }'
    if not posts:
        raise SiteConfigError(file, key, "only a route with posts = true has a readers' form", "add posts = true")
    table = data["reply_form"]
    if not isinstance(table, dict):
        raise SiteConfigError(file, key, _wrong(table, "a table"), f"write {example}")
    words = []
    for name, value in table.items():
        if name not in REPLY_FORM:
            raise unknown_key(file, f"{key}.{name}", name, tuple(REPLY_FORM), "reply_form")
        if not _one_line(value, 60):
            raise SiteConfigError(
                file, f"{key}.{name}", _wrong(value, "a short line of text"), f'write {name} = "{REPLY_FORM[name]}"'
            )
        words.append((name, value.strip()))
    return tuple(words)


def _not_a_parameter(file: Path, key: str, name: object, pattern: str, what: str) -> SiteConfigError:
    names_said = ", ".join(repr(name) for name, _ in _parameters(pattern)) or "none"
    return SiteConfigError(
        file,
        key,
        f"{name!r} is not a parameter of the pattern {pattern!r} (its parameters: {names_said})",
        f"name one of the pattern's parameters, or remove {what}",
    )


def _load_case(file: Path, where: str, data: dict[str, Any], pattern: str) -> tuple[tuple[str, str], ...]:
    """A route's ``case``: a table of its parameters, each with the letter case its one page is written in."""
    if "case" not in data:
        return ()
    names = [name for name, _ in _parameters(pattern)]
    example = f'case = {{ {names[0] if names else "title"} = "upper-first" }}'
    value = data["case"]
    if not isinstance(value, dict):
        raise SiteConfigError(
            file,
            f"{where}case",
            f"expected a table of the pattern's parameters, got {type(value).__name__}",
            f"write e.g. {example}",
        )
    for name, rule in value.items():
        if name not in names:
            raise _not_a_parameter(file, f"{where}case.{name}", name, pattern, "it")
        if not isinstance(rule, str) or rule not in CASE_RULES:
            raise SiteConfigError(
                file,
                f"{where}case.{name}",
                f"{rule!r} is no letter case",
                f'write {name} = "lower" (every letter lower-case) or "upper-first" (the first one upper-case)',
            )
    return tuple(sorted(value.items()))


def _load_navigation(file: Path, index: int, data: Any, patterns: list[str]) -> NavSection:
    where = f"navigation[{index}]"
    if not isinstance(data, dict):
        raise SiteConfigError(file, where, "expected a table", "write each section as a [[navigation]] table")
    for key in data:
        if key not in NAV_KEYS:
            raise unknown_key(file, f"{where}.{key}", key, NAV_KEYS, "navigation")
    on = _string_list(file, data, "on", f"{where}.", ())
    if not on:
        raise SiteConfigError(file, f"{where}.on", "missing or empty", 'name the pages that show it, e.g. on = ["/"]')
    if "*" in on:  # every route's pages, those added later too
        if len(on) > 1:
            raise SiteConfigError(
                file, f"{where}.on", '"*" is every route already', 'write on = ["*"] alone, or name the patterns'
            )
        on = tuple(patterns)
    for pattern in on:
        if pattern not in patterns:
            raise SiteConfigError(
                file, f"{where}.on", f"{pattern!r} is not a route's pattern", f"use some of {patterns}"
            )
    heading = data.get("heading", "")
    if not isinstance(heading, str):
        raise SiteConfigError(file, f"{where}.heading", "expected a string", 'write heading = "Boards" or remove it')
    pages = data.get("pages")
    if pages is not None and pages not in patterns:
        raise SiteConfigError(
            file, f"{where}.pages", f"{pages!r} is not a route's pattern", f"list the pages of one of {patterns}"
        )
    raw_links = data.get("links", [])
    if not isinstance(raw_links, list):
        raise SiteConfigError(
            file, f"{where}.links", "expected an array of tables", 'write links = [{ label = "Lisp", url = "/Lisp" }]'
        )
    links = tuple(_load_link(file, f"{where}.links[{number}]", link) for number, link in enumerate(raw_links))
    if not links and pages is None:
        raise SiteConfigError(
            file, where, "a section with nothing to list", 'add links = [...] or pages = "<a route\'s pattern>"'
        )
    look = data.get("look", "list")
    if look not in NAV_LOOKS:
        raise SiteConfigError(file, f"{where}.look", f"unknown look {look!r}", f"use one of {list(NAV_LOOKS)}")
    limit = data.get("limit", NAV_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200:
        raise SiteConfigError(file, f"{where}.limit", _wrong(limit, "an integer"), "use an integer from 1 to 200")
    return NavSection(on=on, heading=heading, links=links, pages=pages, look=look, limit=limit)


def _wrong(value: Any, number: str) -> str:
    """What is wrong with a value its key does not take: its type (`tokens = "512"`), or its size."""
    if isinstance(value, str) and number in ("an integer", "a number"):
        quoted = re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", value) is not None
        return f"{value!r} is text, not {number}" + (" (write it without quotes)" if quoted else "")
    if isinstance(value, str):  # text of the wrong shape: too long, two lines, not a language tag
        return f"{value!r} is not {number}"
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (number == "an integer" and isinstance(value, float))
    ):
        return f"{value!r} is not {number}"
    return f"{value!r} is out of range"


def _load_link(file: Path, where: str, data: Any) -> NavLink:
    example = '{ label = "Lisp", url = "/Lisp" }'
    if not isinstance(data, dict):
        raise SiteConfigError(file, where, "expected a table", f"write each link as {example}")
    for key in data:
        if key not in ("label", "url"):
            raise SiteConfigError(file, f"{where}.{key}", "unknown key", "a link has a label and a url, nothing else")
    label = data.get("label")
    if not isinstance(label, str) or not label.strip():
        problem = "missing" if label is None else "empty" if isinstance(label, str) else f"{label!r} is not text"
        raise SiteConfigError(file, f"{where}.label", problem, f"give the link its text: {example}")
    url = data.get("url")
    if isinstance(url, str) and (url.startswith("//") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", url)):
        raise SiteConfigError(
            file,
            f"{where}.url",
            f"{url!r} leads off the site: genui's ways on lead to the site's own pages only",
            "remove it: genui's pages never send a visitor off the site (docs/security.md), so no link of theirs can",
        )
    if not isinstance(url, str) or not url.startswith("/"):
        raise SiteConfigError(
            file, f"{where}.url", f"{url!r} is not a site-relative URL", f'start it with one "/": {example}'
        )
    return NavLink(label=label.strip(), url=url)


def _prompt_file(file: Path, root: Path, full: str, data: dict[str, Any], key: str, example: str) -> str:
    """A route key naming a Jinja2 file in the site's prompts/ folder."""
    name = data.get(key)
    if not isinstance(name, str):
        problem = "missing" if name is None else f"expected str, got {type(name).__name__}"
        raise SiteConfigError(file, full, problem, f'add {key} = "{example}" (a file in prompts/)')
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise SiteConfigError(file, full, f"{name!r} is not a plain file name", "name a file in prompts/")
    path = root / "prompts" / name
    if not _is_file(path):
        if _is_folder(path):
            raise SiteConfigError(file, full, f"{path} is a folder", "name a file in prompts/")
        raise SiteConfigError(file, full, f"{path} does not exist", "create it or fix the name")
    if key.endswith("opening"):
        _check_opening_quotes(file, full, path)
    return name


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a name no file system takes, which Path.is_file() raises on."""
    try:
        return path.is_file()
    except OSError:  # a name too long for this file system, or a folder that cannot be read
        return False


# A template expression inside a single-quoted attribute value: `title='{{ x }}'`.
_SINGLE_QUOTED_VALUE = re.compile(r"=\s*'[^'<>]*\{\{")


def _check_opening_quotes(file: Path, full: str, path: Path) -> None:
    """An opening writes its values with `'` unescaped (genui.prompts.as_html_text, as the corpus writes text), so
    a value inside a single-quoted attribute could end it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SiteConfigError(file, full, f"cannot read {path} ({err})", "save it as UTF-8 text") from None
    found = _SINGLE_QUOTED_VALUE.search(text)
    if found:
        raise SiteConfigError(
            file,
            full,
            f"{path} puts a value inside a single-quoted attribute ({found.group(0)!r}), where a `'` in the value "
            "would end the attribute",
            "quote the attribute with double quotes",
        )


def _bare_key_fix(text: str, error: str) -> str | None:
    """The fix for a key TOML cannot read bare (`titré = …`: a bare key is ASCII's letters and digits, `-` and `_`),
    where the error's line starts with one; None otherwise. tomllib said only "Expected '=' after a key"."""
    where = re.search(r"at line (\d+), column \d+", error)
    lines = text.split("\n")  # as TOML counts them (splitlines also ends a line at U+2028, which a string may hold)
    if where is None or not 0 < int(where[1]) <= len(lines) or "=" not in lines[int(where[1]) - 1]:
        return None
    key = lines[int(where[1]) - 1].split("=", 1)[0].strip()
    if not key or key[0] in "\"'[" or re.fullmatch(r"[A-Za-z0-9_.\- \t]+", key):
        return None
    return (
        f"{key} is no bare key (those are ASCII letters, digits, - and _): genui's keys are English as written in"
        f' docs/sites.md ([words] included: regenerate = "…"), and a key of other characters is quoted, "{key}" = …'
    )


def _bare_value_fix(text: str, error: str) -> str | None:
    """The fix for a text written without its quotes (`title = Recipes`), where the error says the value is
    invalid at its start; None otherwise. tomllib said only "Invalid value" (a hackathon team's review)."""
    where = re.search(r"^Invalid value \(at line (\d+), column (\d+)\)", error)
    lines = text.split("\n")
    if where is None or not 0 < int(where[1]) <= len(lines):
        return None
    line = lines[int(where[1]) - 1]
    key, equals, after = line.partition("=")
    value = after.split(" #", 1)[0].strip()
    starts = len(key) + len(equals) + len(after) - len(after.lstrip()) + 1  # the value's column, as TOML counts
    if not equals or not value or value[0] in "\"'[{" or starts != int(where[2]):
        return None  # not a key's whole value at fault (a list, a table, a text quoted already)
    return f"a text is quoted: write {key.strip()} = {json.dumps(value, ensure_ascii=False)}"


def load_site(root: Path | str) -> Site:
    """Load and validate ``root/site.toml``."""
    root = Path(root)
    file = root / "site.toml"
    if root.is_file() and root.name == "site.toml":  # the file named, where its folder is the site
        raise SiteConfigError(root, WHOLE_FILE, "a site is its folder, not its site.toml", f"name {root.parent}")
    if not file.is_file():
        raise SiteConfigError(file, WHOLE_FILE, "file not found", f"create {file} (genui new NAME writes one)")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SiteConfigError(file, WHOLE_FILE, f"not UTF-8 ({err})", "save the file as UTF-8") from None
    except OSError as err:
        raise SiteConfigError(file, WHOLE_FILE, f"cannot read it ({err.strerror or err})", "make it readable") from None
    if text.startswith("\ufeff"):
        raise SiteConfigError(
            file, WHOLE_FILE, "it starts with a byte order mark", "save the file as UTF-8 without a BOM"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        single = re.search(r"^[ \t]*\[[ \t]*(routes|navigation)[ \t]*\][ \t]*(#.*)?$", text, re.MULTILINE)
        fix = (
            f"write each {single[1].removesuffix('s')}'s header [[{single[1]}]], with two brackets (one entry of an"
            f" array); [{single[1]}] is one table, which a second header declares again"
            if single is not None
            else _bare_key_fix(text, str(err))
            or _bare_value_fix(text, str(err))
            or "fix the syntax at the position given"
        )
        raise SiteConfigError(file, WHOLE_FILE, f"not valid TOML ({err})", fix) from None
    except ValueError as err:  # an integer of more digits than Python converts (4,300)
        raise SiteConfigError(file, WHOLE_FILE, f"not valid TOML ({err})", "write the value shorter") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise SiteConfigError(file, WHOLE_FILE, "arrays or tables nested too deeply", "flatten the nesting") from None
    problems = Problems()  # each part on its own: every problem said in one run, not one a run
    slips: set[str] = set()  # the keys a slip was meant for (titel = ...): said with the slip, not again as missing
    slipped: dict[str, str] = {}  # each of them, to the key written
    for key in data:
        if key not in TOP_KEYS:
            problems.add(unknown_key(file, key, key, TOP_KEYS, "top-level"))
            if key not in ROUTE_KEYS and (meant := meant_by(key, TOP_KEYS)) is not None:
                slips.add(meant)
                slipped.setdefault(meant, key)
    # a top-level key written after a table's header is in that table, and missing where it belongs: said as such
    tables = [("model", "model", data.get("model")), ("words", "words", data.get("words"))]
    for array in ("routes", "navigation"):
        if isinstance(data.get(array), list):
            tables += [(f"{array}[{i}].", array.removesuffix("s"), table) for i, table in enumerate(data[array])]
    misplaced: list[tuple[Any, str]] = []
    for where, kind, table in tables:
        for key in table if isinstance(table, dict) else ():
            if key in TOP_KEYS and key not in data:  # (where the top level has it too, it is a key to remove)
                fix = f"move {key} above the first [table] or [[table]] header: TOML puts every key after one in it"
                where_key = f"{where}{'.' * (kind in ('model', 'words'))}{key}"
                problems.add(SiteConfigError(file, where_key, f"{key} is a top-level key, here in a {kind} table", fix))
                misplaced.append((table, key))
    for table, key in misplaced:  # said once, where it is: not again as missing, nor as a table's unknown key
        data[key] = table.pop(key)
    slips -= set(data)
    name = "" if "name" in slips else problems.check(_name, file, data) or ""
    title = "" if "title" in slips else problems.check(_title, file, data) or ""
    brief = "" if "brief" in slips else problems.check(_brief, file, data) or ""
    lang = problems.check(_lang, file, data) or "en"
    words = problems.check(_words, file, data) or ()
    stylesheet = problems.check(_stylesheet, file, root, data)
    model = problems.check(_model, file, data) or ModelSettings()
    routes = () if "routes" in slips else problems.check(_routes, file, root, data, problems) or ()
    raw_navigation = data.get("navigation", [])
    if not isinstance(raw_navigation, list):
        problems.add(
            SiteConfigError(file, "navigation", "expected an array of tables", "write each section as [[navigation]]")
        )
        raw_navigation = []
    # the routes' patterns, and where any problem was found (no Site is made) those written in routes that did not
    # load: a section naming one is not wrong for it
    # (routes written under a slip, [[route]], are said once, there: not again by each section naming one)
    raw_routes = data.get("routes", data.get(slipped.get("routes", ""))) if problems.found else None
    patterns = [route.pattern for route in routes]
    patterns += [  # once each, in the order written
        pattern
        for pattern in dict.fromkeys(
            route["pattern"]
            for route in (raw_routes if isinstance(raw_routes, list) else [])
            if isinstance(route, dict) and isinstance(route.get("pattern"), str)
        )
        if pattern not in patterns
    ]
    navigation = tuple(
        section
        for i, raw in enumerate(raw_navigation)
        if (section := problems.check(_load_navigation, file, i, raw, patterns)) is not None
    )
    carry = problems.check(_carry, file, data, routes) or ()
    # a route whose one query key is carried state asks the visitor nothing: no box in the site bar for it, unless
    # its bar says one (an Inventory box where a player typed any inventory, and /inventory with nothing carried
    # was "nothing asked yet" rather than a page: a review)
    routes = tuple(
        replace(route, bar="") if route.bar is None and len(route.query) == 1 and route.query[0] in carry else route
        for route in routes
    )
    problems.raise_found()
    return Site(
        name=name,
        title=title,
        brief=brief,
        root=root,
        routes=routes,
        stylesheet=stylesheet,
        model=model,
        navigation=navigation,
        lang=lang,
        words=words,
        carry=carry,
    )


def _carry(file: Path, data: dict[str, Any], routes: tuple[Route, ...]) -> tuple[str, ...]:
    """The site's ``carry``: query keys a page's links carry on from it, each a query key of some route."""
    carry = data.get("carry", [])
    taken = sorted({key for route in routes for key in route.query})
    written = [carry] if isinstance(carry, str) else carry  # one key, written without its list
    if not isinstance(written, list) or not all(isinstance(key, str) for key in written):
        example = f'carry = ["{taken[0] if taken else "items"}"]'
        raise SiteConfigError(file, "carry", _wrong(carry, "a list of query keys"), f"write {example}")
    # what was written, mended: each key no route has replaced by a route's key near it (`dest`: destination), or
    # left out where none is (the fix said the alphabetically first key, whatever was written: a hackathon team's)
    mended = [near[0] for key in written if (near := [key] if key in taken else _near(key, taken))]
    fix = f"write carry = {json.dumps(list(dict.fromkeys(mended)), ensure_ascii=False)}" if mended else ""
    if isinstance(carry, str):
        otherwise = "name a route's query key in a list" if routes else f'write carry = ["{carry}"]'
        raise SiteConfigError(file, "carry", _wrong(carry, "a list of query keys"), fix or otherwise)
    for key in carry:
        if routes and key not in taken:
            said = ", ".join(taken) or "none: give a route query = [...] first"
            raise SiteConfigError(
                file,
                "carry",
                f"{key!r} is no route's query key (theirs: {said})",
                fix or "remove carry, or name a route's query key in it",
            )
    return tuple(dict.fromkeys(carry))


def _one_line(value: Any, most: int) -> TypeGuard[str]:
    """Whether ``value`` is one line of text, not blank, of at most ``most`` characters (a label, a button's words)."""
    return isinstance(value, str) and bool(value.strip()) and len(value) <= most and "\n" not in value


def _near(key: str, known: list[str]) -> list[str]:
    """The one of ``known`` nearest ``key``, alone in a list; an empty one where none is near it."""
    return difflib.get_close_matches(key, known, n=1, cutoff=0.5)


def _name(file: Path, data: dict[str, Any]) -> str:
    name: str = _expect(file, data, "name", str, 'add name = "mysite" (lower case, digits, - or _)')
    check_site_name(file, name)
    return name


def _title(file: Path, data: dict[str, Any]) -> str:
    title: str = _expect(file, data, "title", str, 'add title = "My Site"')
    if not title.strip() or any(character in title for character in "\r\n"):
        problem = "empty" if not title.strip() else "more than one line"
        raise SiteConfigError(
            file, "title", problem, 'write the name visitors see in the header and tab: title = "My Site"'
        )
    return title


def _brief(file: Path, data: dict[str, Any]) -> str:
    brief: str = _expect(file, data, "brief", str, 'add brief = "one or two sentences about the site"')
    if not brief.strip() and _reads_brief(data):
        raise SiteConfigError(file, "brief", "empty", "say what the site is in a sentence or two: the prompts read it")
    return brief


def _lang(file: Path, data: dict[str, Any]) -> str:
    lang = data.get("lang", "en")
    if not isinstance(lang, str) or not _LANG.fullmatch(lang):
        raise SiteConfigError(
            file,
            "lang",
            _wrong(lang, "a language tag (en, ja, pt-BR)"),
            'write the language of its pages as HTML names it: lang = "ja"',
        )
    return lang


def _stylesheet(file: Path, root: Path, data: dict[str, Any]) -> str | None:
    stylesheet = data.get("stylesheet")
    if stylesheet is not None and (
        not isinstance(stylesheet, str)
        or "/" in stylesheet
        or not stylesheet.lower().endswith(".css")
        or not _is_file(root / stylesheet)
    ):
        absent = isinstance(stylesheet, str) and "/" not in stylesheet and not (root / stylesheet).exists()
        problem = f"{stylesheet!r} is not in {root}" if absent else f"{stylesheet!r} is not a .css file in {root}"
        raise SiteConfigError(file, "stylesheet", problem, "name a .css file in the site folder")
    return stylesheet


def _model(file: Path, data: dict[str, Any]) -> ModelSettings:
    model = ModelSettings()
    if "model" not in data:
        return model
    table = data["model"]
    if not isinstance(table, dict):
        raise SiteConfigError(file, "model", "expected a table", "write [model] with keys such as tokens and steps")
    for key in table:
        if key == "canvases":
            raise SiteConfigError(
                file,
                "model.canvases",
                "pages are budgeted in tokens now, whatever the model's canvas length",
                "write tokens = N instead (canvases = 2 was tokens = 512)",
            )
        if key not in MODEL_KEYS:
            raise unknown_key(file, f"model.{key}", key, MODEL_KEYS, "model")
    tokens = table.get("tokens", model.tokens)
    steps = table.get("steps", model.steps)
    for key, value, low, top in (("tokens", tokens, 16, 4096), ("steps", steps, 1, 256)):
        if key == "steps" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
            raise SiteConfigError(
                file, f"model.{key}", _wrong(value, "an integer"), f"use an integer from {low} to {top}"
            )
    sampler: dict[str, float] = {}
    for key, bound in (("t_max", 10.0), ("t_min", 10.0), ("entropy_bound", 1000.0)):
        value = table.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= bound:
            raise SiteConfigError(
                file, f"model.{key}", _wrong(value, "a number"), f"use a number above 0, at most {bound:g}"
            )
        sampler[key] = float(value)
    if ("t_max" in sampler) != ("t_min" in sampler):
        given, missing = ("t_max", "t_min") if "t_max" in sampler else ("t_min", "t_max")
        raise SiteConfigError(
            file,
            f"model.{given}",
            f"{given} without {missing}",
            f"give both ends of the temperature schedule ({missing} too)",
        )
    if sampler.get("t_max", MIN_TEMPERATURE) < MIN_TEMPERATURE:
        raise SiteConfigError(
            file, "model.t_max", f"{sampler['t_max']!r} is too low", f"use at least {MIN_TEMPERATURE:g}"
        )
    if "t_max" in sampler and sampler["t_max"] <= sampler["t_min"]:
        raise SiteConfigError(
            file,
            "model.t_min",
            "t_min is not below t_max",
            "the temperature falls from t_max to t_min: make t_min lower (equal ends are rejected)",
        )
    return ModelSettings(tokens=tokens, steps=steps, **sampler)


def _routes(file: Path, root: Path, data: dict[str, Any], problems: Problems) -> tuple[Route, ...]:
    """The routes that load, each route's problems added to ``problems`` (the routes are each on their own)."""
    raw_routes = data.get("routes")
    if isinstance(raw_routes, dict):
        raise SiteConfigError(
            file, "routes", "[routes] is one table, not a list of routes", "write each route's header as [[routes]]"
        )
    if not isinstance(raw_routes, list) or not raw_routes:
        raise SiteConfigError(
            file, "routes", "no routes", "add at least one [[routes]] table with pattern and template"
        )
    loaded = [problems.check(_load_route_at, file, root, i, r) for i, r in enumerate(raw_routes)]
    seen: dict[str, str] = {}  # each pattern's shape (its parameters' names left out) -> the pattern
    for i, route in enumerate(loaded):
        if route is None:
            continue
        keys = [(f"routes[{i}].pattern", route.pattern)]
        keys += [(f"routes[{i}].aliases[{n}]", alias) for n, alias in enumerate(route.aliases)]
        for key, pattern in keys:
            shape = _PARAM.sub(lambda match: "{:" + (match.group(2) or "str") + "}", pattern)
            if shape in seen:
                earlier = seen[shape]
                problem = (
                    f"{pattern!r} appears twice"
                    if earlier == pattern
                    else f"{pattern!r} and {earlier!r} differ only in their parameters' names: one takes every URL"
                )
                problems.add(
                    SiteConfigError(file, key, problem, "remove one, or make the patterns differ in more than names")
                )
            seen[shape] = pattern
    return tuple(route for route in loaded if route is not None)


def _words(file: Path, data: dict[str, Any]) -> tuple[tuple[str, str | Forms], ...]:
    """The site's ``[words]``: genui's own words on its pages that it says otherwise (genui/words.py)."""

    table = data.get("words", {})
    if not isinstance(table, dict):
        raise SiteConfigError(file, "words", _wrong(table, "a table"), 'write [words] with keys such as skip = "..."')
    problems = Problems()  # each word on its own: one run says every one a translation got wrong
    for key, text in table.items():
        problems.check(_word, file, key, text)
    problems.raise_found()
    return tuple((key, tuple(text.items()) if isinstance(text, dict) else text) for key, text in table.items())


def _word(file: Path, key: str, text: Any) -> None:
    """One of ``[words]``, checked: SiteConfigError naming it and the fix."""
    wrong = problem(key, text)
    if wrong is None:
        return
    near = difflib.get_close_matches(key, list(WORDS), n=1, cutoff=0.75) if key not in WORDS else []
    if key in WORDS and isinstance(text, dict):
        fix = f'write {key} = {{ one = "…", other = "…" }}, with the forms its language has (docs/sites.md)'
        if "n" not in fields(WORDS[key]):
            fix = f'say it in one line, as genui says it: {key} = "{WORDS[key]}"'
    elif key in WORDS:
        fix = f'say it in one line, as genui says it: {key} = "{WORDS[key]}"'
    elif near:  # (a misspelt key was told every one of genui's fifty-odd words: a site developer's review)
        wrong, fix = f"{wrong} (did you mean {near[0]!r}?)", f"write {near[0]}"
    else:
        fix = f"use one of genui's words: {', '.join(WORDS)}"
    raise SiteConfigError(file, f"words.{key}", wrong, fix)


def _reads_brief(data: dict[str, Any]) -> bool:
    """Whether a route of a site.toml's (as parsed, not checked yet) has the brief in its context (the default)."""
    routes = data.get("routes")
    for route in routes if isinstance(routes, list) else []:
        context = route.get("context", ["brief"]) if isinstance(route, dict) else []
        if isinstance(context, list) and "brief" in context:
            return True
    return False


def valid_site_name(name: str) -> bool:
    """Whether ``name`` may name a site: a folder name and a URL path."""
    return _NAME.fullmatch(name) is not None


def suggested_name(text: str) -> str:
    """A site name made of ``text`` ("My Recipes!" -> "my-recipes"), "" where it has no letter to start one."""
    words = re.sub(r"[^a-z0-9_-]+", "-", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())
    slug = re.sub(r"^[^a-z]+", "", words).strip("-_")[:32].rstrip("-_")
    return slug if valid_site_name(slug) else ""


def check_site_name(file: Path, name: str) -> None:
    """Raise SiteConfigError (about ``file``) unless ``name`` may name a site: it is a folder name and a URL path."""
    if not valid_site_name(name):
        raise SiteConfigError(
            file,
            "name",
            f"{name!r} is not a valid site name",
            "start with a lower case letter, then up to 31 lower case letters, digits, - or _",
        )


def load_sites(directory: Path | str, *, unique: bool = True) -> list[Site]:
    """Every site folder (one holding site.toml) under ``directory``, sorted by name. With ``unique``, two sites of
    one name are a config error: each is served at /name, so one would hide the other."""
    problems = Problems()  # every site's problems in one run, not the first site's alone
    sites = [site for folder in site_folders(directory) if (site := problems.check(load_site, folder))]
    problems.raise_found()
    if unique:
        check_names(sites)
    return sites


def site_folders(directory: Path | str) -> list[Path]:
    """The site folders under ``directory`` (those holding a site.toml), sorted. A hidden folder is no site: genui
    new's draft of one (.name-xxxx), left by a killed run, would be a second site of its name."""
    found = sorted(Path(directory).glob("*/site.toml"))
    return [toml.parent for toml in found if not toml.parent.name.startswith(".")]


def check_names(sites: list[Site]) -> None:
    """Raise SiteConfigError when two of ``sites`` have one name, naming both files."""
    seen: dict[str, Site] = {}
    for site in sites:
        other = seen.setdefault(site.name, site)
        if other is not site:
            raise SiteConfigError(
                site.root / "site.toml",
                "name",
                f"{site.name!r} is the name of {other.root / 'site.toml'} too, and a site is served at /{site.name}",
                "give one of them another name",
            )
