"""The one gate between model output and a browser.

Every byte the model writes, drafts included, passes `sanitize_html` before it is sent. The model is an untrusted
author: prompt injection through a forum post or a URL can make it write anything, so the policy is an allowlist
(bleach) of plain document markup with no way to run script, load another origin, or issue an htmx request.
genui adds its own htmx attributes to internal links *after* this step (see genui/links.py).

Decisions worth knowing (docs/security.md has the full reasoning):

- Every URL must be same-site and relative (`/wiki/X`, `X`, `?q`, `#h`). Absolute URLs, protocol-relative ones and
  every scheme (`https:`, `javascript:`, `data:`, `mailto:`) lose the attribute; a foreign link becomes plain text.
- No `style` attribute or element: the CSP's `style-src 'self'` would refuse inline styles anyway.
- No forms, inputs, `data-*`, `hx-*`, `ws-*`, `sse-*` or event handlers; `<button>` is always `type="button"`.
- Ids (and `label for`, and `#fragment` links) get the prefix `ID_PREFIX`, so model markup can never collide with
  the ids genui's own page uses as htmx swap targets. genui's own ids must therefore never start with it.
- Elements whose content is code or foreign markup (`script`, `style`, `template`, `svg`, ...) are dropped with
  their content; any other disallowed tag is unwrapped and its text kept.
- The model's own slips (a tag it broke, a heading it never closed, an element it left empty) are mended by
  genui/mending.py before and after parsing, and the allowlist runs after it.
"""

from __future__ import annotations

import html
import html.entities
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from bleach.html5lib_shim import BleachHTMLParser, Filter
from bleach.sanitizer import BleachSanitizerFilter, Cleaner

from genui.mending import mend, tidy

__all__ = ["ID_PREFIX", "PreNewlines", "sanitize_html"]

ID_PREFIX = "gen-"

ALLOWED_TAGS = frozenset(
    {
        # sections and grouping
        "address", "article", "aside", "blockquote", "details", "div", "figcaption", "figure", "footer", "header",
        "hgroup", "hr", "nav", "p", "pre", "section", "summary",
        "h1", "h2", "h3", "h4", "h5", "h6",
        # lists
        "dd", "dl", "dt", "li", "menu", "ol", "ul",
        # text
        "a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "del", "dfn", "em", "i", "ins", "kbd", "mark", "q",
        "rp", "rt", "ruby", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
        # tables
        "caption", "col", "colgroup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
        # app windows: inert controls (no form to submit, no script to listen)
        "button", "label",
        "img",
    }
)  # fmt: skip

# Unwrapping these would leave their content behind as visible text (`alert(1)`) or as markup the browser would
# have parsed differently (SVG/MathML namespaces are where mutation XSS lives), so they go whole.
DROPPED_WITH_CONTENT = frozenset(
    {
        "applet", "embed", "iframe", "math", "noembed", "noframes", "noscript", "object", "script", "select", "style",
        "svg", "template", "textarea", "title",
    }
)  # fmt: skip

GLOBAL_ATTRIBUTES = frozenset({"aria-hidden", "aria-label", "class", "dir", "id", "lang", "role", "title"})

TAG_ATTRIBUTES: dict[str, frozenset[str]] = {
    "a": frozenset({"href"}),
    "img": frozenset({"alt", "height", "src", "width"}),
    "td": frozenset({"colspan", "rowspan"}),
    "th": frozenset({"colspan", "rowspan", "scope"}),
    "col": frozenset({"span"}),
    "colgroup": frozenset({"span"}),
    "ol": frozenset({"reversed", "start", "type"}),
    "li": frozenset({"value"}),
    "time": frozenset({"datetime"}),
    "del": frozenset({"datetime"}),
    "ins": frozenset({"datetime"}),
    "details": frozenset({"open"}),
    "button": frozenset({"type"}),
    "label": frozenset({"for"}),
}

# Classes genui's page and htmx itself give meaning to; model markup must not borrow them (an `htmx-indicator`,
# or a genui overlay class used to dress a fake login box as the site's own chrome).
RESERVED_CLASS_PREFIXES = ("htmx-", "genui-")

_URL_ATTRIBUTES = frozenset({"href", "src"})
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x20\x7f]+")
_SCRIPT_SCHEMES = ("javascript:", "vbscript:", "data:")
_SCHEME_END = re.compile(r"[/?#\\]")
_MAX_PASSES = 4
# `&name` not ended by `;`: the whole run of letters and digits after the `&` (a legacy name such as `copy` must be
# all of it, and not be followed by `=`, for a browser to decode it in an attribute)
_BARE_NAME = re.compile(r"&([A-Za-z][A-Za-z0-9]*)(?![A-Za-z0-9;])")
_HTML_SPACE = re.compile(r"[ \t\n\f\r]+")  # what separates classes in a class attribute (not U+00A0)


def sanitize_html(
    html_text: str, *, allow_images: bool = True, draft: bool = False, image: Callable[[str], bool] | None = None
) -> str:
    """Return `html_text` reduced to genui's allowlist: safe to put in a page as is.

    allow_images: keep `<img>` (same-site `src` only). An `<img>` whose `src` is refused, or that has none, is its
        `alt` text.
    image: with allow_images, which same-site `src` an image may have, as a browser reads the URL (genui.assets'
        files of the site); None for any.
    draft: the text is a denoising intermediate, not the final page. Images and link targets are dropped, because
        a draft's URLs are still noise and each one would otherwise fire (or invite) a request per step.

    A trailing tag cut off mid-way (`<a href="/wi`) is removed and open tags are closed, so a draft frame renders
    as the text so far. A stuttered piece of a tag (`</</p>`, `</div>div>`) is removed, and so is an element left
    empty (`<li></li>`). The function is idempotent: sanitising its own output changes nothing.
    """
    if not html_text:
        return ""
    cleaner = _cleaner(allow_images and not draft, draft)
    cleaner.attributes.image = image  # the cleaner is this thread's alone
    try:
        cleaned = cleaner.clean(mend(html_text, ALLOWED_TAGS))
        # A tree the parser had to repair can serialise to markup that parses into a different tree (an <h6> left
        # inside an <h1> by the adoption agency algorithm), and parsing can bring the pieces of a broken tag together
        # (a NUL between them dropped), so mend and clean until the output is its own fixed point.
        for _ in range(_MAX_PASSES):
            again = cleaner.clean(mend(cleaned, ALLOWED_TAGS))
            if again == cleaned:
                break
            cleaned = again
    finally:
        cleaner.attributes.image = None
    return cleaned


def _is_same_site(value: str) -> bool:
    # Normalise the way a browser's URL parser does before deciding: entities decoded, tabs and newlines removed
    # anywhere, C0 controls and spaces trimmed, and `\` read as `/` (so `/\evil.example` is protocol-relative).
    url = _TAB_OR_NEWLINE.sub("", html.unescape(value)).strip(_C0_OR_SPACE)
    if not url:
        return False
    if url[0] in "/\\":
        return len(url) == 1 or url[1] not in "/\\"
    # Anything with a colon before the first `/?#` has a scheme, or would be read as one.
    return ":" not in _SCHEME_END.split(url, maxsplit=1)[0]


def _looks_like_script_url(value: str) -> bool:
    squashed = _SPACE_OR_CONTROL.sub("", html.unescape(value)).lower()
    return squashed.startswith(_SCRIPT_SCHEMES)


class _Policy:
    """The attribute allowlist as bleach's callable: (tag, attribute, value) -> keep?"""

    def __init__(self, *, links: bool) -> None:
        self.links = links
        self.image: Callable[[str], bool] | None = None  # which same-site src an <img> may have (sanitize_html's)

    def __call__(self, tag: str, name: str, value: str) -> bool:
        if name not in GLOBAL_ATTRIBUTES and name not in TAG_ATTRIBUTES.get(tag, ()):
            return False
        if name in _URL_ATTRIBUTES:
            if tag == "img" and self.image is not None and not self.image(_as_read(value)):
                return False
            return (self.links or tag != "a") and _is_same_site(value)
        if name == "id":
            return bool(value.strip())
        # Text attributes are never read as URLs, but nothing downstream should ever meet one that looks like it.
        return not _looks_like_script_url(value)


class _DropWithContent(Filter):  # type: ignore[misc]
    """Removes the elements in DROPPED_WITH_CONTENT together with everything inside them."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        depth = 0
        for token in super().__iter__():
            kind = token["type"]
            if depth:
                if kind == "StartTag":
                    depth += 1
                elif kind == "EndTag":
                    depth -= 1
                continue
            if kind in ("StartTag", "EmptyTag") and token["name"] in DROPPED_WITH_CONTENT:
                depth = 1 if kind == "StartTag" else 0
                continue
            yield token


class _Namespace(Filter):  # type: ignore[misc]
    """Rewrites the attributes bleach kept so model markup cannot reach into genui's page."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for token in super().__iter__():
            if token["type"] in ("StartTag", "EmptyTag"):
                attrs: dict[tuple[str | None, str], str] = token["data"]
                if token["name"] == "img" and (None, "src") not in attrs:
                    # an image that shows nothing (its src refused, or none) is what it says it shows
                    if alt := _as_read(attrs.get((None, "alt"), "")).strip():
                        yield {"type": "Characters", "data": alt}
                    continue
                _rewrite(token["name"], attrs)
            yield token


class PreNewlines(Filter):  # type: ignore[misc]
    """Keeps a ``<pre>``'s leading newline through a parse and serialisation (the sanitiser's, the links' rewriting):
    the parser eats one newline right after ``<pre>``, so the text gets one to eat, or each pass loses a line."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        after_pre = False
        for token in super().__iter__():
            kind = token["type"]
            if kind in ("Characters", "SpaceCharacters") and after_pre and token["data"].startswith("\n"):
                token = {**token, "data": "\n" + token["data"]}
            after_pre = kind == "StartTag" and token["name"] == "pre"
            yield token


def _rewrite(tag: str, attrs: dict[tuple[str | None, str], str]) -> None:
    for key, value in attrs.items():
        # bleach quotes a value holding `"` with `'` and then escapes its `&lt;` once more on every pass; as an
        # entity the quote keeps the value's meaning and the output stable.
        attrs[key] = value.replace('"', "&quot;")
    for key in ((None, "id"), (None, "for")):
        if key in attrs:
            attrs[key] = _prefixed(attrs[key].strip())
    # The values come still entity-encoded, and a browser decodes them: each is judged as the browser will read it
    # (`&#35;genui-main`, `&#104;tmx-indicator`), and what is rewritten goes back encoded.
    if (None, "href") in attrs and "#" in (href := _as_read(attrs[(None, "href")])):
        # In-page links (`#History`) must follow the ids they point at.
        path, _, fragment = href.partition("#")
        attrs[(None, "href")] = _encoded(path + "#" + (_prefixed(fragment) if fragment else ""))
    if (None, "class") in attrs:
        classes = _HTML_SPACE.split(_as_read(attrs[(None, "class")]))
        kept = [c for c in classes if c and not c.lower().startswith(RESERVED_CLASS_PREFIXES)]
        if kept:
            attrs[(None, "class")] = _encoded(" ".join(kept))
        else:
            del attrs[(None, "class")]
    if tag == "button":
        # Without a type a button submits the nearest form, and genui's page has forms of its own.
        attrs[(None, "type")] = "button"


def _as_read(value: str) -> str:
    """An attribute's value as a browser decodes it: html.unescape, save that a named reference without its `;` is
    text where a letter, a digit or `=` follows its name (`?a=1&copy=2`, `a&notb`), as HTML reads attributes."""
    return html.unescape(_BARE_NAME.sub(_bare_name, value))


def _bare_name(match: re.Match[str]) -> str:
    name, after = match[1], match.string[match.end() : match.end() + 1]
    return match[0] if name in html.entities.html5 and after != "=" else "&amp;" + name


def _encoded(value: str) -> str:
    """An attribute value as bleach hands them over: entity-encoded, its `"` an entity too (see _rewrite)."""
    return html.escape(value, quote=False).replace('"', "&quot;")


def _prefixed(name: str) -> str:
    return name if name.startswith(ID_PREFIX) else ID_PREFIX + name


class _Cleaner(Cleaner):  # type: ignore[misc]
    """bleach's Cleaner with two extra stages around its sanitizer filter."""

    def __init__(self, *, images: bool, draft: bool) -> None:
        tags = ALLOWED_TAGS if images else ALLOWED_TAGS - {"img"}
        super().__init__(
            tags=tags,
            attributes=_Policy(links=not draft),
            # bleach only lets relative URLs through when http(s) is allowed; _Policy has already refused every
            # absolute one, so these never survive as schemes.
            protocols={"http", "https"},
            strip=True,
            strip_comments=True,
        )
        # bleach's tokenizer unwraps tags it does not know before the tree is built, which would parse a script's
        # body as markup; the tree has to see these elements to drop them whole.
        self.parser = BleachHTMLParser(
            tags=tags | DROPPED_WITH_CONTENT, strip=True, consume_entities=False, namespaceHTMLElements=False
        )

    def clean(self, text: str) -> str:
        dom = self.parser.parseFragment(text)
        tidy(dom)
        filtered = BleachSanitizerFilter(
            source=_DropWithContent(self.walker(dom)),
            allowed_tags=self.tags,
            attributes=self.attributes,
            strip_disallowed_tags=True,
            strip_html_comments=True,
            allowed_protocols=self.protocols,
        )
        result: str = self.serializer.render(PreNewlines(_Namespace(filtered)))
        return result


# bleach's parser keeps state between calls, so each thread gets its own cleaners.
_local = threading.local()


def _cleaner(images: bool, draft: bool) -> _Cleaner:
    cache: dict[tuple[bool, bool], _Cleaner] = _local.__dict__.setdefault("cleaners", {})
    key = (images, draft)
    if key not in cache:
        cache[key] = _Cleaner(images=images, draft=draft)
    return cache[key]
