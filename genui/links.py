"""Links in sanitised model output: internal ones become htmx navigation, everything else becomes plain text.

The model writes site-relative links (``/r/lisp``). genui serves a site under a mount point (``/forum`` when several
sites share one server), so each internal link is prefixed and given the htmx attributes that fetch the page into
``#genui-main`` and push its URL. Only this module adds ``hx-*`` attributes; the sanitiser has already removed any the
model wrote. A link that is not site-relative (another host, ``mailto:``, a relative path) loses its ``<a>`` and keeps
its text: generated pages never send a visitor off the site. Given the site's router, so does a site-relative link
that no route serves (``/wikiwiki/Foo``): a visitor never follows a generated link into a "no such page"; given the
page it is on as well (``SiteRuntime.render``), so does a link to that page itself, which would only load it again
(one to a place on it keeps only its ``#place``);
and a link written as a route's alias (the wiki model's ``/wiki/Foo``) is pointed at the page's own URL (``/wiki``
+ ``/Foo``), and a link to a route whose pages a link's text names (``link_text``: the forum's threads) at the page
its text names, so that a thread listed as `Cancer is complete` opens under that title whatever the model wrote in
its href.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, MutableMapping
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urlsplit

from bleach.linkifier import Linker, LinkifyFilter

from genui.sanitize import PreNewlines

MAIN_TARGET = "#genui-main"  # the element every navigation swaps (the page shell keeps the rest)
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
# An `<a>` with no attribute left, and what it holds (no other link can be inside one: the parser closes it first).
_NO_LINK = re.compile(r"<a>((?:(?!<a[\s>]).)*?)</a>", re.S)

Attrs = MutableMapping[Any, str]


def navigation_attrs(url: str) -> dict[str, str]:
    """The htmx attributes genui puts on a link to one of its own pages: the new page shown from its top, or from
    the place a ``#place`` names (htmx scrolls to it, unless told to show the top)."""
    swap = "innerHTML" if "#" in url else "innerHTML show:window:top"
    return {"hx-get": url, "hx-target": MAIN_TARGET, "hx-push-url": "true", "hx-swap": swap}


def internal_url(mount: str, href: str) -> str | None:
    """The served URL of a site-relative ``href`` (``/wiki/Foo`` -> ``{mount}/wiki/Foo``), or None if not internal."""
    if not href.startswith("/") or href.startswith("//"):
        return None
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None
    url = mount + quote(parts.path, safe=_PATH_SAFE)
    if parts.query:
        url += "?" + quote(parts.query, safe=_QUERY_SAFE)
    if parts.fragment:
        url += "#" + quote(parts.fragment, safe=_QUERY_SAFE)
    return url


class _TextFilter(LinkifyFilter):  # type: ignore[misc]  # bleach has no type hints
    """bleach's filter, with a link's text (``_text``) whole: bleach leaves out its character references (`I &lt;3
    Linux` reads `I 3 Linux`), here decoded (`I <3 Linux`), as a reader sees the text."""

    marked = False  # whether the link being handled holds markup (`<code>`), which a new text would replace

    def handle_a_tag(self, token_buffer: list[dict[str, Any]]) -> Any:
        self.marked = any(token["type"] in ("StartTag", "EmptyTag") for token in token_buffer[1:-1])
        return super().handle_a_tag(token_buffer)

    def extract_character_data(self, token_list: list[dict[str, Any]]) -> str:
        out = []
        for token in token_list:
            if token["type"] in ("Characters", "SpaceCharacters"):
                out.append(token["data"])
            elif token["type"] == "Entity":
                out.append(html.unescape(f"&{token['name']};"))
        return "".join(out)


class _Linker(Linker):  # type: ignore[misc]
    """bleach's Linker with ``_TextFilter``; ``filter``: the one at work, whose callbacks may ask it of the link."""

    filter: _TextFilter | None = None

    def linkify(self, text: str) -> str:
        if not text:
            return ""
        self.filter = filtered = _TextFilter(
            source=self.walker(self.parser.parseFragment(text)),
            callbacks=self.callbacks,
            skip_tags=self.skip_tags,
            parse_email=self.parse_email,
            url_re=self.url_re,
            email_re=self.email_re,
        )
        return str(self.serializer.render(PreNewlines(filtered)))


class LinkRewriter:
    """Rewrites the links of sanitised HTML for a site served under ``mount`` ("" for a site served at /)."""

    def __init__(
        self,
        mount: str,
        target: Callable[[str, str], str | None] | None = None,
        reading: Callable[[str, str], str] | None = None,
    ) -> None:
        self.mount = mount
        # (site-relative href, the link's text) -> the href the link should carry, None when no route serves it;
        # None: every href as is
        self.target = target
        # (the href it carries, site-relative; the link's text) -> the text a reader should read (SiteRouter's
        # link_reading: `Hash_table` reads `Hash table`); None: every text as written
        self.reading = reading
        # bleach's linkify calls back on every existing <a>; turning text into new links is refused in the callback.
        self._linker = _Linker(callbacks=[self._rewrite], parse_email=False)

    def __call__(self, sanitised_html: str) -> str:
        # A link to no page (or to another site, its href already dropped by the sanitiser) is no link: its text
        # and markup stay, out of the `<a>` (bleach's own unlinking flattens `<b>` and `<code>` to text, and an
        # `<a>` kept without an href is styled as a link nobody can follow).
        return _NO_LINK.sub(r"\1", str(self._linker.linkify(sanitised_html)))

    def _rewrite(self, attrs: Attrs, new: bool = False) -> Attrs | None:
        if new:
            return None
        raw = attrs.get((None, "href"))
        if raw is None:  # no link (the sanitiser took a foreign href off it): its text, and an id a link may seek
            return {key: value for key, value in attrs.items() if key in ((None, "id"), "_text")}
        # bleach hands attribute values over still entity-encoded; its serialiser encodes them again on the way out.
        href = html.unescape(raw).strip()
        if href.startswith("#"):
            return attrs
        site_href = href if self.target is None else self.target(href, str(attrs.get("_text", "")))
        if site_href is not None and site_href.startswith("#"):  # a place on the page it is on
            attrs[(None, "href")] = site_href
            return attrs
        url = None if site_href is None else internal_url(self.mount, site_href)
        if url is None:  # a link to no page: an `<a>` with nothing on it, which __call__ takes away
            return {key: value for key, value in attrs.items() if key == "_text"}
        attrs[(None, "href")] = url
        for name, value in navigation_attrs(url).items():
            attrs[(None, name)] = value
        marked = self._linker.filter is not None and self._linker.filter.marked
        if self.reading is not None and site_href is not None and not marked:  # bleach writes a changed _text in
            # place of the old, and of the markup in it: a link holding `<code>snake_case</code>` keeps it
            attrs["_text"] = self.reading(site_href, str(attrs.get("_text", "")))
        return attrs


class _Remounter:
    """Moves a page's internal links (those carrying ``hx-get``) from one mount to another."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.linker = _Linker(callbacks=[self._move], parse_email=False)

    def _move(self, attrs: Attrs, new: bool = False) -> Attrs | None:
        if new:
            return None
        url = attrs.get((None, "hx-get"))
        if url is None or not url.startswith(self.old + "/"):
            return attrs
        moved = self.new + url.removeprefix(self.old)
        attrs[(None, "hx-get")] = moved
        attrs[(None, "href")] = moved
        return attrs


@functools.lru_cache(maxsize=64)  # a bleach pass is milliseconds; one request may read the same page several times
def remount(html: str, old: str, new: str) -> str:
    """Stored HTML whose internal links were written for a site under mount ``old`` ("" or "/name"), with them
    under ``new``."""
    return str(_Remounter(old, new).linker.linkify(html))


class _Links(HTMLParser):
    """The targets of genui's navigation links (``hx-get``) in a finished page, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        url = dict(attrs).get("hx-get")
        if tag == "a" and url:
            self.urls.append(url)


def linked_urls(html: str) -> list[str]:
    """The served URLs a finished page links to with genui's navigation, first first, each once."""
    parser = _Links()
    parser.feed(html)
    parser.close()
    return list(dict.fromkeys(parser.urls))
