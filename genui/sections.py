"""A page's sections: the blocks a visitor may have rewritten, found in the sanitised page genui stores.

A section is an outermost block of text (a paragraph, a heading, a list, a table, a ``<pre>``, ...) or an
outermost ``<div>`` with no block container and no heading inside it (a forum reply, the body of a desktop window);
a ``<div>`` that holds a heading (a forum board: its title, then its list of threads) is a container. They are
numbered 1, 2, ... in document order, and each one is a byte range of the page's HTML, so a rewrite replaces
exactly that range and keeps every other byte. genui's own markup in a page (a reader's post shown in a thread,
class ``genui-*``, which the sanitiser never lets model markup carry) is never a section.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from html.parser import HTMLParser

TEXT_BLOCKS = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "menu", "pre", "table", "blockquote", "figure"}
    | {"details", "address", "hgroup"}
)
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
CONTAINERS = frozenset({"div", "article", "section", "main", "header", "footer", "aside", "nav"})
INLINE = frozenset(
    {"a", "abbr", "b", "bdi", "bdo", "cite", "code", "del", "dfn", "em", "i", "ins", "kbd", "mark", "q", "s", "samp"}
    | {"small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "ruby", "rt", "rp"}
)
VOID = frozenset({"br", "hr", "img", "wbr", "col", "area", "base", "embed", "input", "link", "meta", "source"})
SNIPPET = 60  # characters of a section's text shown in the picker


@dataclass(frozen=True, slots=True)
class Section:
    number: int  # 1-based, in document order
    start: int  # offsets into the page's HTML: html[start:end] is the section's element, tags included
    end: int
    tag: str
    snippet: str  # the start of its text, for the picker


def sections(html: str) -> list[Section]:
    """The sections of a sanitised page (html5lib's serialisation: every non-void element has its end tag)."""
    return list(_sections_of(html))


@functools.lru_cache(maxsize=32)
def _sections_of(html: str) -> tuple[Section, ...]:
    """``sections``, kept for the pages asked for most: the toolbar of every view of a page lists them, and a thread
    of 3,000 replies took 27 ms of the event loop to parse for it at each view (a load test)."""
    tree = _Tree(html)
    tree.feed(html)
    tree.close()
    found: list[Section] = []
    _pick(tree.root, found)
    return tuple(found)


def section(html: str, number: int) -> Section | None:
    return next((found for found in sections(html) if found.number == number), None)


@dataclass(slots=True)
class _Node:
    tag: str
    start: int
    end: int = -1
    genui: bool = False  # genui's own markup inside a page (a reader's post shown in place): never a section
    children: list[_Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def has_container(self) -> bool:
        below = list(self.children)  # a walk, not a recursion: a page may nest thousands deep
        while below:
            node = below.pop()
            if node.tag in CONTAINERS:
                return True
            below.extend(node.children)
        return False

    def is_block(self) -> bool:
        """A ``<div>`` read as one section: no container inside, and no heading of its own."""
        return not self.has_container() and not any(child.tag in HEADINGS for child in self.children)

    def all_text(self) -> str:
        return "".join(self.text)


def _pick(node: _Node, found: list[Section]) -> None:
    """The sections under ``node``, in document order: a walk with a stack, not a recursion (a page of a thousand
    nested ``<div>`` made every view of it a 500)."""
    walks = [iter(node.children)]
    while walks:
        child = next(walks[-1], None)
        if child is None:
            walks.pop()
            continue
        if child.end < 0 or child.genui:
            continue  # never closed (not a range genui can replace), or genui's own
        if child.tag in TEXT_BLOCKS or (child.tag == "div" and child.is_block()):
            text = " ".join(child.all_text().split())
            snippet = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
            found.append(Section(len(found) + 1, child.start, child.end, child.tag, snippet))
        elif child.tag in CONTAINERS:
            walks.append(iter(child.children))


class _Tree(HTMLParser):
    """Element ranges of the page: where each start tag begins and its end tag ends, with the text inside."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("", 0, len(html))
        self._open = [self.root]
        self._html = html
        self._line_starts = [0] + [index + 1 for index, char in enumerate(html) if char == "\n"]

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in INLINE:
            self.handle_data(" ")  # a block's words do not run into the next one's in a snippet
        if tag in VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        node = _Node(tag, self._offset(), genui=any(name.startswith("genui-") for name in classes))
        self._open[-1].children.append(node)
        self._open.append(node)

    def handle_endtag(self, tag: str) -> None:
        if tag not in INLINE:
            self.handle_data(" ")
        if not any(node.tag == tag for node in self._open[1:]):
            return  # a stray end tag: nothing to close
        end = self._html.index(">", self._offset()) + 1
        while True:
            node = self._open.pop()
            node.end = end
            if node.tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for node in self._open:
            node.text.append(data)
