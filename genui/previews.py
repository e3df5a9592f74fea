"""What a link to a page shows where it is shared: a chat's card, a search result's line.

A shared genui address showed its title alone (Slack, Discord, Mastodon and search engines read a page's
``<meta name="description">`` and Open Graph tags, which it had none of): a reader who posted a wiki article in a chat
gave no hint of what it said. A page's description is its first paragraph of text, which the model wrote; the site's
brief stands in for a page with none (a board's list of threads, a desktop of icons) and for one not written yet, which
is what such a fetcher finds at an address nobody opened before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

from genui.runtime import SiteRuntime
from genui.sections import VOID
from genui.store import StoredPage

DESCRIPTION = 200  # characters: what a card or a search result shows of it (Slack's cut is about 300, Google's 160)
_CHUNK = 4096  # characters fed at a time: a thread of 3,000 replies is read only up to its first paragraph
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True, slots=True)
class Preview:
    title: str  # the page's own title, without the site's
    site: str  # the site's title
    description: str


def preview(runtime: SiteRuntime, page: StoredPage | None, title: str) -> Preview:
    """A page's card: ``page`` is its stored version shown (None while it is written), ``title`` its title."""
    site = runtime.site
    described = description(page.html) if page is not None else ""
    return Preview(title=title or site.title, site=site.title, description=described or site.brief)


def description(html: str, most: int = DESCRIPTION) -> str:
    """The text of a page's first paragraph of its own, cut to ``most`` characters at a word; "" when it has none.

    A paragraph with a class is the site's furniture, not its text (a thread's ``<p class="meta">posted by …</p>``),
    and so is genui's own markup in a page (a reader's post shown in a thread, class ``genui-*``)."""
    finder = _Paragraph()
    for start in range(0, len(html), _CHUNK):
        finder.feed(html[start : start + _CHUNK])
        if finder.found is not None:
            break
    text = " ".join(_BIDI_CONTROLS.sub("", finder.found or "").split())
    if len(text) <= most:
        return text
    cut = text[:most].rsplit(" ", 1)[0] if " " in text[:most] else text[: most - 1]
    return cut.rstrip(" ,;:-–—") + "…"


class _Paragraph(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: str | None = None
        self._open: list[bool] = []  # each open element: whether it is genui's own markup
        self._text: list[str] | None = None  # the paragraph being read
        self._depth = 0  # elements open inside it

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._text is not None:  # inside the paragraph: its text runs on, a line break a space
            self._depth += 0 if tag in VOID else 1
            self._text.append(" " if tag == "br" else "")
            return
        classes = (dict(attrs).get("class") or "").split()
        genui = any(name.startswith("genui-") for name in classes) or bool(self._open and self._open[-1])
        if tag == "p" and not classes and not genui and self.found is None:
            self._text, self._depth = [], 0
        elif tag not in VOID:
            self._open.append(genui)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self._text is not None:
            if self._depth:
                self._depth -= 1
                return
            text, self._text = "".join(self._text), None
            if text.strip():
                self.found = text
            return
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)
