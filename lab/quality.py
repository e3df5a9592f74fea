"""The quality report: generate the held-out pages of each example site and measure what a visitor would notice.

Per site: share of well-formed pages with the site's skeleton (judged on the page as served: sanitised, then its
links pointed at the site's pages, as ``genui serve`` sends it; the sanitiser closes every tag, so well-formed there
holds by construction), share of pages whose text as the model wrote it closes every tag in order ("as written",
what the sanitiser did not have to mend), share of wiki articles whose ``<h1>`` is their title,
share of English dictionary words (Debian's ``wamerican`` list; of single letters, only "a" and "I"), share of the
links the model wrote (those with no text too) that lead to one of the site's pages as served from the page they are
on, distinct-2 diversity (each seed's pages apart, averaged), the share of words that repeat the word before them
(`data data`), the share of a page's five-word phrases found on another page of the site (pages that differ with
their prompt share few), median denoising steps per canvas, the share of canvases the adaptive stop ended before
their step cap, and (given the packed corpus) the held-out denoising loss and the prompt gain (over 48 held-out
pages a site, evenly spaced over its held-out rows, so every route has its share). The same held-out pages as the
corpus has them go through the same measures, as the reference (rows marked "(corpus)", the "corpus" list in
JSON): what a page that matched the corpus would score.
Prints a table; ``--json`` prints one object.

The held-out pages are fixed: ``lab.corpus`` holds a page out when a hash of its site and path says so. The report
draws ``--per-site`` of them a site, each of the site's routes in proportion to its held-out pages and spread across
them (``corpus_pages``; before session 27 it took the first ones, which the corpus writes route by route, so the
desktop's were all file listings), and ``genui quality --list`` prints them.

``--first-clicks`` measures instead what a new visitor opens first: each site's home page and the pages its own
navigation links to (the desktop's icons, the wiki's "Start with" articles, the forum's boards), with each page's
skeleton verdict. They are not held out, some are not in the corpus at all, and there is no corpus reference.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from engine.frames import DoneFrame, TextEngine
from genui.pages import SiteRuntime
from genui.resources import bundled
from genui.routing import BadRequest, SiteRouter
from genui.runtime import BARE_LINK
from genui.sanitize import sanitize_html
from genui.sites import Site, load_sites

WORDS = Path("/usr/share/dict/american-english")
HELDOUT_LOSS_PAGES = 48  # held-out pages per site in the loss columns
_WORD = re.compile(r"[A-Za-z]{2,}")
VOID = {"br", "hr", "img", "wbr", "input", "meta", "link", "area", "base", "col", "source", "track", "embed"}
# Markup the model broke, which the sanitiser then shows as text: a tag's start or end ("</a", "<div", "p>"), or an
# attribute ("href=", 'x="') or its end ('file">'). The corpus's own pages have "<language>" (FOLDOC's domains) and
# "a > b" in their text, which this leaves alone: 17 of its 44,826 pages trip it (a stray "</b>" in a page's source).
_TAGS = r"(?:a|p|b|i|ul|ol|li|h[1-6]|div|span|em|strong|article|code|pre|br)"
_DEBRIS = re.compile(rf"</?{_TAGS}\b|\b{_TAGS}/?>|\b(?:href|class)\s*=|\w=\"|\w\">")
_CLASS = re.compile(r"[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*)*")
_HREF_BROKEN = re.compile(r'[\s<>"]')


class _Shape(HTMLParser):
    """Collects what the skeleton checks need and whether every tag closes in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.balanced = True
        self.tags: list[tuple[str, str]] = []  # (tag, class)
        self.hrefs: list[str] = []
        self.links: list[tuple[str, tuple[str, ...]]] = []  # every link's href and the tags it sits in
        self.text: list[str] = []
        self.h1: list[str] = []
        self.paragraphs: list[str] = []  # the text of each <p>
        self.debris: list[str] = []  # broken markup a reader would see: text, class and href values
        self.elements: list[tuple[str, str, list[str]]] = []  # every element in order: (tag, class, its text)
        self.bodies: list[list[str]] = []  # each element's text outside the ``meta`` elements inside it
        self._open: list[int] = []  # the open elements' indexes in ``elements``, as ``stack`` holds their tags
        self._in_h1 = False
        self._in_p = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a.get("class") or ""))
        if "class" in a and not _CLASS.fullmatch(a["class"] or ""):
            self.debris.append(f'class="{a["class"]}"')
        if "href" in a and (not a["href"] or _HREF_BROKEN.search(a["href"])):
            self.debris.append(f'href="{a["href"]}"')
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"] or "")
            self.links.append((a["href"] or "", tuple(self.stack)))
        if tag == "h1":
            self._in_h1 = True
            self.h1.append("")
        if tag == "p":
            self._in_p += 1
            self.paragraphs.append("")
        self.elements.append((tag, a.get("class") or "", []))
        self.bodies.append([])
        if tag not in VOID:
            self.stack.append(tag)
            self._open.append(len(self.elements) - 1)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.balanced = False
            if tag in self.stack:
                while self.stack and self._pop() != tag:
                    pass
            return
        self._pop()
        if tag == "h1":
            self._in_h1 = False
        if tag == "p":
            self._in_p -= 1

    def _pop(self) -> str:
        self._open.pop()
        return self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        meta = False  # inside a meta element: its ancestors' meta line, not their body
        for index in reversed(self._open):
            self.elements[index][2].append(data)
            if not meta:
                self.bodies[index].append(data)
            meta = meta or "meta" in self.elements[index][1].split()
        if found := _DEBRIS.search(data):
            self.debris.append(data[max(0, found.start() - 20) : found.end() + 20])
        if self._in_h1 and self.h1:
            self.h1[-1] += data
        if self._in_p and self.paragraphs:
            self.paragraphs[-1] += data


def shape(html_text: str) -> _Shape:
    parser = _Shape()
    parser.feed(html_text)
    parser.close()
    if parser.stack:
        parser.balanced = False
    return parser


def _count(s: _Shape, tag: str, cls: str | None = None) -> int:
    return sum(1 for t, c in s.tags if t == tag and (cls is None or cls in c.split()))


def _texts(s: _Shape, *tags: str, cls: str | None = None) -> list[str]:
    return ["".join(text) for t, c, text in s.elements if t in tags and (cls is None or cls in c.split())]


def _said(s: _Shape, tag: str, cls: str) -> int:
    """How many ``tag.cls`` elements say something: a word outside their meta line (who wrote it, the points)."""
    found = zip(s.elements, s.bodies, strict=True)
    return sum(1 for (t, c, _), body in found if t == tag and cls in c.split() and _WORD.search("".join(body)))


def _listing(path: str, s: _Shape) -> bool:
    """A list of the folder's entries, each linking to what is in it (``/files{folder}/name`` or
    ``/view{folder}/name``, as the corpus writes them): a list of links elsewhere is not this folder's."""
    folder = "/" + urlsplit(path).path.removeprefix("/files").strip("/")
    inside = tuple(f"/{kind}{folder.rstrip('/')}/" for kind in ("files", "view"))
    items = [href for href, within in s.links if "li" in within]

    def in_folder(href: str) -> bool:
        return any(href.startswith(p) and len(href) > len(p) for p in inside)

    return _count(s, "ul", "files") >= 1 and bool(items) and all(in_folder(href) for href in items)


def _worded(path: str, s: _Shape) -> bool:
    return any(_WORD.search(t) for t in _texts(s, "p", "pre", "h2"))


def _file_text(path: str, s: _Shape) -> bool:
    """The file's words, and not a folder's listing in the viewer (``p.path``'s words are a listing's)."""
    text = [t for tag, c, t in s.elements if tag in ("p", "pre", "h2") and "path" not in c.split()]
    return _count(s, "ul", "files") == 0 and any(_WORD.search("".join(t)) for t in text)


def _command_output(path: str, s: _Shape) -> bool:
    return any(t.partition("\n")[2].strip().removesuffix("$").strip() for t in _texts(s, "pre", cls="terminal"))


def _name_value_pairs(path: str, s: _Shape) -> bool:
    pairs = [(t, "".join(text)) for t, _, text in s.elements if t in ("dt", "dd")]
    return (
        _count(s, "dl", "settings") >= 1
        and bool(pairs)
        and [t for t, _ in pairs] == ["dt", "dd"] * (len(pairs) // 2)
        and all(text.strip() for _, text in pairs)
    )


def _page_under_address(path: str, s: _Shape) -> bool:
    paragraphs = [(c, "".join(text)) for t, c, text in s.elements if t == "p"]
    return any(_WORD.search(text) for c, text in paragraphs if "address" not in c.split())


def _note(path: str, s: _Shape) -> bool:
    return _count(s, "div", "desktop") >= 1 and _worded(path, s)


# What the model must write inside the window, by the first segment of the desktop's routes (sites/os/site.toml):
# the routes' openings pin the window and its title bar, so those alone say nothing about what the model wrote.
_DESKTOP_CONTENT: dict[str, Callable[[str, _Shape], bool]] = {
    "": _note,  # the home screen
    "files": _listing,
    "view": _file_text,
    "terminal": _command_output,
    "settings": _name_value_pairs,
    "browser": _page_under_address,
}


def _desktop_ok(path: str, s: _Shape) -> bool:
    if not (_count(s, "div", "window") >= 1 and _count(s, "div", "titlebar") >= 1):
        return False
    content = _DESKTOP_CONTENT.get(urlsplit(path).path.strip("/").partition("/")[0])
    return content is None or content(path, s)  # a route of a site's own making: the window is all it is known to need


def skeleton_ok(site: str, path: str, html_text: str) -> bool:
    """Well-formed HTML with the site's skeleton for this kind of page: tags that close in order, no broken markup
    shown as text or left in a class or link, and the elements the site's pages are built of."""
    s = shape(html_text)
    if not s.balanced or s.debris:
        return False
    if site == "wiki":
        if _is_article(path):
            title = _title(path)
            # A paragraph counts when it holds a word: "<p>&gt;</p>" is not one.
            return (
                any(h.strip().lower() == title for h in s.h1) and sum(bool(_WORD.search(p)) for p in s.paragraphs) >= 2
            )
        if path.startswith("/search"):
            return bool(s.h1) and _count(s, "li") >= 1
        return bool(s.h1) and _count(s, "p") >= 1
    if site == "forum":
        if path.count("/") >= 3:  # /r/{board}/{thread}
            # A reply that is only its meta line (`<p class="meta">user · 3 points</p>` and nothing else) is no reply.
            return _said(s, "div", "post") >= 1 and _said(s, "div", "reply") >= 2
        # A board (or the front page) lists threads: two links to threads at least, since the board's opening
        # already pins the list and its first item's start.
        threads = [h for h in s.hrefs if h.startswith("/r/") and h.count("/") >= 3]
        return _count(s, "ul", "threads") >= 1 and _count(s, "li") >= 2 and len(threads) >= 2
    if site == "os":
        return _desktop_ok(path, s)
    return s.balanced


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]+(?:'[a-z]+)?", text)


def doubled_words(texts: Iterable[str]) -> float:
    """The share of words that repeat the word before them (`of of`), case aside; the text of each page apart."""
    pairs = [(a, b) for t in texts for ws in [words(t.lower())] for a, b in zip(ws, ws[1:], strict=False)]
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0


def distinct_2(texts: Iterable[str]) -> float:
    bigrams = [tuple(ws[i : i + 2]) for t in texts for ws in [words(t.lower())] for i in range(len(ws) - 1)]
    return len(set(bigrams)) / len(bigrams) if bigrams else 0.0


@dataclass
class SiteReport:
    site: str
    pages: int
    skeleton: float
    dictionary_words: float
    valid_links: float
    links: int
    distinct_2: float
    steps_per_canvas: float
    seconds_per_page: float
    title_h1: float | None = None  # wiki articles whose <h1> is their title
    stopped_early: float | None = None  # denoised canvases the adaptive stop ended before max_steps
    shared_phrases: float = 0.0  # five-word phrases of a page also found on another page of the site
    doubled_words: float = 0.0  # words that repeat the word before them
    heldout_loss: float | None = None
    prompt_gain: float | None = None  # held-out loss under another page's prompt minus under its own
    # pages whose text as the model wrote it (its opening too) closes every tag in order, before the sanitiser mends
    # it: the skeleton is judged as served, where every tag is closed by construction; None without the model's text
    well_formed: float | None = None


@dataclass
class PageResult:
    site: str
    path: str
    html: str
    steps: list[int]
    seconds: float
    stopped_early: list[bool] = field(default_factory=list)  # per canvas: the adaptive stop ended it
    raw: str = ""  # what the model wrote, before the sanitiser: ``html`` is this sanitised
    seed: int = 0  # the noise's seed it was written with


async def generate_pages(
    engine: TextEngine,
    sites: dict[str, Site],
    pages: list[tuple[str, str]],
    seed: int,
    progress: Callable[[str], None] | None = None,
    openings: bool = True,
    sampler: dict[str, Any] | None = None,
) -> list[PageResult]:
    """Generate each page exactly as the app would (same route, prompt and request), sanitised.

    ``openings=False`` leaves out the routes' openings, so the model alone writes every byte that is measured;
    ``sampler`` overrides request fields (max_steps, t_max, t_min, entropy_bound, ...) for a sweep."""
    runtimes = {name: SiteRuntime.build(site, mount="") for name, site in sites.items()}
    results = []
    for name, url in pages:
        runtime = runtimes[name]
        location = runtime.locate(url)
        if location is None:
            raise ValueError(f"held-out page {name}{url} matches no route")
        done = None
        request = dataclasses.replace(runtime.direct_request(location, seed, opening=openings), **(sampler or {}))
        async for frame in engine.stream(request):
            if isinstance(frame, DoneFrame):
                done = frame
        assert done is not None
        steps = [c.steps for c in done.canvases]
        early = [c.stopped_early for c in done.canvases]
        html = sanitize_html(done.text)
        results.append(PageResult(name, url, html, steps, done.seconds, early, raw=done.text, seed=seed))
        if progress:
            progress(f"{name}{url}: {done.seconds:.1f}s")
    return results


def served(page: PageResult, runtime: SiteRuntime) -> str:
    """The page as ``genui serve`` sends it (``SiteRuntime.render``): sanitised, then each link pointed at the site's
    page (``/Hop%20tomorrow`` for the model's ``/Hop tomorrow``), or left as its text where no route serves it. The
    skeleton is judged on this, what a visitor gets; the links' validity on what the model wrote."""
    try:
        on = runtime.locate(page.path)  # whose route may follow links (the desktop's browser)
    except BadRequest:
        on = None
    return runtime.render(page.raw or page.html, on=on)


def model_links(page: PageResult, runtime: SiteRuntime) -> list[str]:
    """The href of every link the model wrote, one written with no text too (the sanitiser drops an empty link; genui
    serves it with the title of the page it leads to); not those of the route's opening before its first gap (the
    settings panels' list of panels, a listing's `..`), which the site wrote."""
    if not page.raw:
        return shape(page.html).hrefs
    try:
        location = runtime.locate(page.path)
    except BadRequest:
        location = None
    opening = runtime.direct_request(location, page.seed).opening if location is not None else ""
    written = page.raw.removeprefix(opening)  # a page written with --no-openings does not start with it
    return shape(sanitize_html(BARE_LINK.sub(lambda bare: f"{bare[1]}-{bare[4]}", written))).hrefs


def valid_links(pages: list[PageResult], runtime: SiteRuntime) -> tuple[int, int]:
    """How many of the pages' links lead to one of the site's pages, as served from the page they are on (a link
    on the desktop's browser page opens in the browser), and how many links there are. A link to the page it is on
    leads to a page of the site: it counts, though genui serves it as its text."""
    valid = total = 0
    for page in pages:
        try:
            on = runtime.locate(page.path)
        except BadRequest:
            on = None
        if on is not None and on.route.follow_links is None:
            on = None  # only the browser's pages resolve links by the page they are on
        hrefs = model_links(page, runtime)
        valid += sum(runtime.router.link_target(href, on=on) is not None for href in hrefs)
        total += len(hrefs)
    return valid, total


def dictionary_share(texts: Iterable[str], dictionary: set[str]) -> float:
    """The share of the texts' words found in ``dictionary``; a single letter counts as a word only as "a" or "I"
    (wamerican lists every letter, and ``words`` splits a hash like ``d4e5f6`` into them)."""
    found = [w.lower() for t in texts for w in words(t)]
    hits = sum(w in dictionary and (len(w) > 1 or w in ("a", "i")) for w in found)
    return hits / len(found) if found else 0.0


def per_seed(rows: list[PageResult], measure: Callable[[list[PageResult]], float]) -> float:
    """``measure`` of each seed's pages apart, averaged: the same page written with two seeds shares most of its
    phrases, which pooled would count as repetition."""
    seeds = sorted({r.seed for r in rows})
    return sum(measure([r for r in rows if r.seed == seed]) for seed in seeds) / len(seeds) if seeds else 0.0


def skeleton_verdicts(results: list[PageResult], sites: dict[str, Site]) -> list[bool]:
    """Each page's skeleton verdict, on the page as served."""
    runtimes = {name: SiteRuntime.build(site, mount="") for name, site in sites.items()}
    return [skeleton_ok(r.site, r.path, served(r, runtimes[r.site])) for r in results]


def report(results: list[PageResult], sites: dict[str, Site], dictionary: set[str]) -> list[SiteReport]:
    out = []
    for name in sorted({r.site for r in results}):
        rows = [r for r in results if r.site == name]
        shapes = [shape(r.html) for r in rows]
        texts = {id(r): " ".join(s.text) for r, s in zip(rows, shapes, strict=True)}  # each page's text, once
        runtime = SiteRuntime.build(sites[name], mount="")
        shown = [served(r, runtime) for r in rows]
        valid, links = valid_links(rows, runtime)
        steps = sorted(n for r in rows for n in r.steps if n)  # a canvas that is all opening takes none
        early = [e for r in rows for n, e in zip(r.steps, r.stopped_early, strict=False) if n]
        articles = [(r, shape(h)) for r, h in zip(rows, shown, strict=True) if name == "wiki" and _is_article(r.path)]
        written = [r for r in rows if r.raw]
        out.append(
            SiteReport(
                site=name,
                pages=len(rows),
                skeleton=sum(skeleton_ok(name, r.path, h) for r, h in zip(rows, shown, strict=True)) / len(rows),
                dictionary_words=dictionary_share((" ".join(s.text) for s in shapes), dictionary),
                valid_links=valid / links if links else 0.0,
                links=links,
                distinct_2=per_seed(rows, lambda pages, texts=texts: distinct_2(texts[id(r)] for r in pages)),
                steps_per_canvas=float(statistics.median(steps)) if steps else 0.0,
                seconds_per_page=sum(r.seconds for r in rows) / len(rows),
                title_h1=sum(_title(r.path) in [h.strip().lower() for h in sh.h1] for r, sh in articles) / len(articles)
                if articles
                else None,
                shared_phrases=shared_phrases([" ".join(sh.text) for sh in shapes], [r.path for r in rows]),
                doubled_words=doubled_words(" ".join(sh.text) for sh in shapes),
                stopped_early=sum(early) / len(early) if early else None,
                well_formed=sum(written_well_formed(r) for r in written) / len(written) if written else None,
            )
        )
    return out


def written_well_formed(page: PageResult) -> bool:
    """Whether the model's own text closes every tag in order (True for a page with no text of the model's kept)."""
    return not page.raw or shape(page.raw).balanced


def _title(path: str) -> str:
    return unquote(urlsplit(path).path.rsplit("/", 1)[-1]).replace("_", " ").strip().lower()


def _is_article(path: str) -> bool:
    """A wiki article's path: the corpus writes ``/wiki/{title}`` (the alias the model links with), the site serves
    ``/{title}``."""
    here = urlsplit(path).path
    return here.startswith("/wiki/") or (here.count("/") == 1 and here not in ("/", "/search"))


def shared_phrases(texts: list[str], paths: list[str] | None = None, n: int = 5) -> float:
    """Mean over pages of the share of their n-word phrases that also occur on another page: with ``paths``, one at
    another path (the same page written with another seed is not another page)."""
    grams = [{tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)} for ws in (words(t.lower()) for t in texts)]
    keys = paths if paths is not None else list(range(len(texts)))
    shares = []
    for index, own in enumerate(grams):
        if own:
            others = set().union(*(g for j, g in enumerate(grams) if keys[j] != keys[index]))
            shares.append(len(own & others) / len(own))
    return sum(shares) / len(shares) if shares else 0.0


def load_dictionary(path: Path = WORDS) -> set[str]:
    if not path.exists():
        raise SystemExit(f"{path} is missing: install Debian's wamerican package (apt-get install wamerican)")
    return {w.lower() for w in path.read_text(encoding="utf-8", errors="replace").split() if w.isascii()}


def route_of(routers: dict[str, SiteRouter], site: str, path: str) -> str:
    """The route pattern a corpus page's path matches (its first path segment when no site or route knows it)."""
    url = urlsplit(path)
    router = routers.get(site)
    try:
        location = router.locate(path) if router is not None else None
    except BadRequest:
        location = None
    return location.route.pattern if location is not None else "/" + url.path.strip("/").partition("/")[0]


def spread(groups: list[list[Any]], n: int) -> list[list[Any]]:
    """``n`` items drawn from ``groups`` in proportion to their sizes (largest remainder), one at least from each
    while ``n`` allows, evenly spaced within a group so a long run of alike items (one folder's listings) does not
    fill a group's share."""
    total = sum(len(g) for g in groups)
    if n >= total:
        return [list(g) for g in groups]
    counts = [min(1, len(g)) if n >= len(groups) else 0 for g in groups]
    left = n - sum(counts)
    shares = [len(g) * left / total for g in groups]
    counts = [min(len(g), c + int(share)) for g, c, share in zip(groups, counts, shares, strict=True)]
    by_remainder = sorted(range(len(groups)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    while sum(counts) < n:
        for i in by_remainder:
            if sum(counts) < n and counts[i] < len(groups[i]):
                counts[i] += 1
    return [[g[k * len(g) // c] for k in range(c)] for g, c in zip(groups, counts, strict=True)]


def corpus_pages(corpus: Path, per_site: int, routers: dict[str, SiteRouter]) -> list[PageResult]:
    """``per_site`` held-out pages of each site as the corpus has them, sanitised: the pages the report generates,
    and the reference it measures them against (no steps, no time); none at a URL the corpus trains on too. Each of
    a site's routes gives its share of the site's held-out pages (``spread``): the corpus writes a route's pages in
    one run (every file listing, then every file), so its first held-out pages would all be of one route."""
    held: dict[str, dict[str, list[dict[str, Any]]]] = {}
    trained: set[tuple[str, str]] = set()
    rows = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["holdout"]:
                rows.append(row)
            else:
                trained.add((row["site"], row["path"]))
    for row in rows:  # a URL some copies of which train (a home page split by item): its prompt is no news
        if (row["site"], row["path"]) not in trained:
            routes = held.setdefault(row["site"], {})
            routes.setdefault(route_of(routers, row["site"], row["path"]), []).append(row)
    return [
        PageResult(row["site"], row["path"], sanitize_html(row["html"]), [], 0.0, raw=row["html"])
        for site in sorted(held)
        for group in spread(list(held[site].values()), per_site)
        for row in group
    ]


def first_clicks(sites: dict[str, Site]) -> list[tuple[str, str]]:
    """Each site's home page and the pages its own navigation links to (the desktop's icons, the wiki's "Start
    with" articles, the forum's boards): what a new visitor opens first, whether or not the corpus holds them."""
    pages = []
    for name in sorted(sites):
        router = SiteRouter(sites[name])
        urls = ["/", *(link.url for section in sites[name].navigation for link in section.links)]
        pages += [(name, url) for url in dict.fromkeys(urls) if router.leads_to_page(url)]
    return pages


def corpus_pages_at(corpus: Path, wanted: set[tuple[str, str]]) -> list[PageResult]:
    """The corpus's own held-out pages at these (site, path) pairs, sanitised: the reference for pages saved by an
    earlier report, whichever held-out pages it drew."""
    pages: dict[tuple[str, str], PageResult] = {}
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            key = (row["site"], row["path"])
            if row["holdout"] and key in wanted and key not in pages:
                pages[key] = PageResult(row["site"], row["path"], sanitize_html(row["html"]), [], 0.0, raw=row["html"])
    return list(pages.values())


def saved_pages(path: Path) -> list[PageResult]:
    """Pages written by ``--save-pages``; one saved with the model's own text (``raw``) is sanitised again from it."""
    pages = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                page = PageResult(**json.loads(line))
                if page.raw:
                    page.html = sanitize_html(page.raw)
                pages.append(page)
    if not pages:
        raise ValueError("no pages in it")
    return pages


def print_table(rows: list[SiteReport], reference: list[SiteReport] | None = None) -> None:
    """The report as a Markdown table; ``reference`` rows (the corpus's own pages) follow, marked "(corpus)"."""
    head = (
        "site",
        "pages",
        "skeleton",
        "as written",
        "title h1",
        "dict words",
        "valid links",
        "distinct-2",
        "doubled words",
        "shared 5-grams",
        "steps/canvas",
        "stopped early",
        "s/page",
        "held-out loss",
        "prompt gain",
    )
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    measured = [(r, r.site) for r in rows] + [(r, f"{r.site} (corpus)") for r in reference or []]
    for r, label in measured:
        title = f"{r.title_h1:.1%}" if r.title_h1 is not None else "-"
        loss = f"{r.heldout_loss:.3f}" if r.heldout_loss is not None else "-"
        gain = f"{r.prompt_gain:+.3f}" if r.prompt_gain is not None else "-"
        early = f"{r.stopped_early:.0%}" if r.stopped_early is not None else "-"
        written = f"{r.well_formed:.1%}" if r.well_formed is not None else "-"
        timing = f"{r.steps_per_canvas:.1f} | {early} | {r.seconds_per_page:.2f}" if r.seconds_per_page else "- | - | -"
        print(
            f"{label} | {r.pages} | {r.skeleton:.1%} | {written} | {title} | {r.dictionary_words:.1%} | "
            f"{r.valid_links:.1%} ({r.links}) | {r.distinct_2:.3f} | {r.doubled_words:.2%} | {r.shared_phrases:.1%} | "
            f"{timing} | {loss} | {gain}"
        )


def _loss_function(loaded: Any) -> Callable[[Any], float]:
    """Held-out denoising loss of a packed subset, in the training objective of the model's family (the packed
    file must be tokenised for that model: lab.corpus for DiffusionGemma, ``genui adapt --pack`` for an adapter)."""
    if loaded.family == "diffusion-gemma":
        from lab.scratch import heldout_loss

        return lambda packed: heldout_loss(loaded.model, packed, loaded.device)
    from engine.causal import end_of_text
    from lab.adapt import AdaptConfig
    from lab.adapt import heldout_loss as adapted_loss

    cfg = AdaptConfig(canvas_length=loaded.canvas_length)
    eos = end_of_text(loaded.tokenizer)
    return lambda packed: adapted_loss(loaded.model, packed, cfg, eos, n=len(packed))


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive count of pages")
    return number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui quality", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model", help="checkpoint folder or hub id (default: the shipped model)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: CUDA when there is one)")
    parser.add_argument(
        "--int8", action="store_true", help="a causal LM's linear layers in int8, on the CPU (engine.quantize)"
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus.jsonl"), help="built by lab.corpus")
    parser.add_argument("--packed", type=Path, help="packed corpus (lab.data) for the held-out loss column")
    parser.add_argument("--per-site", type=_positive, default=30, help="held-out pages per site")
    parser.add_argument(
        "--seed",
        type=int,
        nargs="+",
        default=[0],
        metavar="S",
        help="the noise's seed (default 0); several: each page is written once a seed, and the report pools them "
        "(the same pages each time: the seed does not change which pages are drawn)",
    )
    parser.add_argument("--sites-dir", type=Path, default=bundled("sites"))
    parser.add_argument(
        "--site",
        action="append",
        metavar="NAME",
        help="report on this site's held-out pages only (repeat for several; default: every site in the corpus)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--list", action="store_true", help="only list the pages the report would generate")
    parser.add_argument(
        "--first-clicks",
        action="store_true",
        help="report on each site's home page and the pages its navigation links to (what a new visitor opens "
        "first; mostly not held out, some not in the corpus at all) instead of the held-out pages, and list each "
        "page's skeleton verdict",
    )
    parser.add_argument(
        "--save-pages", type=Path, metavar="FILE", help="also write every generated page to FILE (JSON lines)"
    )
    parser.add_argument(
        "--rescore",
        type=Path,
        metavar="FILE",
        help="report on pages saved by --save-pages instead of generating them (no model is loaded); a page saved "
        "with the model's own text is sanitised again, so a sanitiser change can be measured on the same pages",
    )
    parser.add_argument(
        "--no-openings",
        action="store_true",
        help="leave out the routes' openings (sites/*/site.toml), so the model writes every byte measured",
    )
    for flag, kind, meaning in (
        ("--steps", int, "max_steps"),
        ("--t-max", float, "t_max"),
        ("--t-min", float, "t_min"),
        ("--entropy-bound", float, "entropy_bound"),
    ):
        parser.add_argument(flag, type=kind, dest=meaning, help=f"override the sites' and the model's {meaning}")
    args = parser.parse_args(argv)
    sampler = {
        key: getattr(args, key)
        for key in ("max_steps", "t_max", "t_min", "entropy_bound")
        if getattr(args, key) is not None
    }
    sites = {s.name: s for s in load_sites(args.sites_dir)}
    if args.first_clicks:
        if args.packed:
            print("--first-clicks: no held-out loss is measured on these pages, so no --packed", file=sys.stderr)
            return 2
        unknown = sorted(set(args.site or ()) - sites.keys())
        if unknown:
            print(f"--site {', '.join(unknown)}: {args.sites_dir} has no such site", file=sys.stderr)
            return 2
        pages = [(site, url) for site, url in first_clicks(sites) if not args.site or site in args.site]
        originals: list[PageResult] = []  # no reference: the corpus holds few of these pages, none held out
    else:
        if not args.corpus.exists():
            print(
                f"{args.corpus} is missing: build it with `genui corpus --text-only --out {args.corpus}`",
                file=sys.stderr,
            )
            return 2
        routers = {name: SiteRouter(site) for name, site in sites.items()}
        originals = corpus_pages(args.corpus, args.per_site, routers)
        if args.site:
            unknown = sorted(set(args.site) - {r.site for r in originals})
            if unknown and not args.rescore:  # a rescore's sites are its file's: checked there
                print(f"--site {', '.join(unknown)}: {args.corpus} has no held-out pages of it", file=sys.stderr)
                return 2
            originals = [r for r in originals if r.site in args.site]
        pages = [(r.site, r.path) for r in originals]
    if args.list:
        for site, path in pages:
            print(f"{site}\t{path}")
        return 0
    missing = sorted({site for site, _ in pages} - sites.keys())
    if missing:
        print(
            f"{args.sites_dir} has no site {', '.join(missing)}, whose held-out pages {args.corpus} holds: "
            "name the sites to report on with --site",
            file=sys.stderr,
        )
        return 2
    dictionary = load_dictionary()
    if args.rescore:
        if args.packed or args.save_pages:
            print("--rescore reads saved pages: it takes neither --packed nor --save-pages", file=sys.stderr)
            return 2
        try:
            results = saved_pages(args.rescore)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{args.rescore}: not a file of pages saved by --save-pages ({e})", file=sys.stderr)
            return 2
        if args.site:
            unknown = sorted(set(args.site) - {r.site for r in results})
            if unknown:
                print(f"--site {', '.join(unknown)}: {args.rescore} has no pages of it", file=sys.stderr)
                return 2
            results = [r for r in results if r.site in args.site]
        missing = sorted({r.site for r in results} - sites.keys())
        if missing:
            print(
                f"{args.sites_dir} has no site {', '.join(missing)}, whose pages {args.rescore} holds: name the "
                "sites to report on with --site",
                file=sys.stderr,
            )
            return 2
        saved = {(r.site, r.path) for r in results}
        originals = [] if args.first_clicks else corpus_pages_at(args.corpus, saved)
        if not args.first_clicks and len(originals) < len(saved):
            site, path = min(saved - {(r.site, r.path) for r in originals})
            print(
                f"{args.rescore} holds {len(saved) - len(originals)} page(s) that {args.corpus} does not hold out "
                f"({site} {path}): pages saved by a report with --first-clicks are rescored with --first-clicks",
                file=sys.stderr,
            )
            return 2
        rows = report(results, sites, dictionary)
        reference = report(originals, sites, dictionary)
        summary = {"rescored": str(args.rescore), "resanitised": sum(bool(r.raw) for r in results)}
        _emit(args, sites, summary, rows, reference, results)
        return 0
    if args.packed and not args.packed.is_file():  # said before the model loads and the pages are written
        print(f"--packed {args.packed}: no such file (genui adapt --pack makes one)", file=sys.stderr)
        return 2
    from engine import load_engine  # the model is loaded only when a report is asked for

    engine = load_engine(args.model, device=args.device, quantize="int8" if args.int8 else None)
    packed = None
    if args.packed:
        from lab.data import Packed, tokenizer_digest

        packed = Packed.load(args.packed)
        # another tokenizer's ids are other words to this model: its loss on them is a number, and meaningless
        if packed.tokenizer and packed.tokenizer != tokenizer_digest(engine.loaded.tokenizer):
            print(
                f"--packed {args.packed} was packed with another tokenizer than {engine.model_id}'s: pack the corpus"
                " for its base (genui adapt --pack data/corpus.jsonl --packed FILE --base BASE)",
                file=sys.stderr,
            )
            return 2
    progress = None if args.json else lambda m: print(m, file=sys.stderr)

    async def every_seed() -> list[PageResult]:  # one event loop for the engine, whatever the seeds
        written = []
        for seed in args.seed:
            written += await generate_pages(engine, sites, pages, seed, progress, not args.no_openings, sampler)
        return written

    results = asyncio.run(every_seed())
    rows = report(results, sites, dictionary)
    reference = report(originals, sites, dictionary)
    if args.save_pages:
        with args.save_pages.open("w", encoding="utf-8") as out:
            for result in results:
                out.write(json.dumps(asdict(result)) + "\n")
    if packed is not None:
        import numpy as np

        loss = _loss_function(engine.loaded)
        for row in rows:
            if row.site in packed.group_names:
                group = packed.group_names.index(row.site)
                # Evenly spaced over the site's held-out rows, which the corpus packs route by route: the first 48
                # would be one or two of its routes.
                rows_held = np.flatnonzero(packed.holdout & (packed.groups == group))
                picks = np.linspace(0, len(rows_held), num=min(HELDOUT_LOSS_PAGES, len(rows_held)), endpoint=False)
                held = [int(rows_held[int(i)]) for i in picks]
                row.heldout_loss = loss(packed.subset(held))
                # The same pages under each other's prompts (rotated by one): the loss the prompt saves.
                rotated = held[1:] + held[:1]
                row.prompt_gain = loss(packed.subset(held, prompts_from=rotated)) - row.heldout_loss
    summary = {
        "model": engine.model_id,
        "weights": engine.loaded.weights,
        "seed": args.seed[0] if len(args.seed) == 1 else args.seed,
        "openings": not args.no_openings,
        "sampler": sampler,
    }
    _emit(args, sites, summary, rows, reference, results)
    return 0


def _emit(
    args: argparse.Namespace,
    sites: dict[str, Site],
    summary: dict[str, Any],
    rows: list[SiteReport],
    reference: list[SiteReport],
    results: list[PageResult],
) -> None:
    """Print the report: a table or JSON, and with ``--first-clicks`` each page's skeleton verdict."""
    verdicts = [
        {
            "site": r.site,
            "path": r.path,
            "seed": r.seed,
            "skeleton": ok,
            "well_formed": written_well_formed(r),
            "steps": r.steps,
        }
        for r, ok in zip(results, skeleton_verdicts(results, sites), strict=True)
    ]
    if args.json:
        summary = {**summary, "pages_measured": "first clicks" if args.first_clicks else "held out"}
        extra = {"pages": verdicts} if args.first_clicks else {}
        sites = [asdict(r) for r in rows]
        print(json.dumps({**summary, "sites": sites, "corpus": [asdict(r) for r in reference], **extra}, indent=1))
        return
    print_table(rows, reference)
    if args.first_clicks:
        print("\nsite | page | seed | skeleton | as written | steps a canvas")
        print("--- | --- | --- | --- | --- | ---")
        for v in verdicts:
            skeleton, written = ("ok" if v[key] else "FAIL" for key in ("skeleton", "well_formed"))
            print(f"{v['site']} | {v['path']} | {v['seed']} | {skeleton} | {written} | {v['steps']}")


if __name__ == "__main__":
    raise SystemExit(main())
