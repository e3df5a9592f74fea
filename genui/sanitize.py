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
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

from bleach.html5lib_shim import BleachHTMLParser, Filter
from bleach.sanitizer import BleachSanitizerFilter, Cleaner

__all__ = ["ID_PREFIX", "sanitize_html"]

ID_PREFIX = "gen-"

ALLOWED_TAGS = frozenset(
    {
        # sections and grouping
        "address", "article", "aside", "blockquote", "details", "div", "figcaption", "figure", "footer", "header",
        "hgroup", "hr", "main", "nav", "p", "pre", "section", "summary",
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

HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

# Flow content a heading may not hold (its content model is phrasing content). A model that forgets `</h1>` puts
# the rest of the page inside the heading, where the parser leaves it and the browser draws it at heading size; such
# a block is moved out to follow the heading (`_close_headings`).
BLOCKS = HEADINGS | frozenset(
    {
        "address", "article", "aside", "blockquote", "details", "div", "dl", "figure", "footer", "header", "hgroup",
        "hr", "main", "menu", "nav", "ol", "p", "pre", "section", "table", "ul",
    }
)  # fmt: skip

# Elements that show nothing when they hold nothing. An empty one is a piece the model left behind (`<li></li>` drawn
# as a blank card, `<a href="/x"></a>`, the parser's copy of a link left open across a list item); the sites' corpus
# (44,826 pages) has none. One with attributes other than `href` stays: a class or an id can give it a look of its own
# in the site's CSS (`a.icon::before`), a title or a label a meaning.
EMPTY_DROPPED = HEADINGS | frozenset(
    {
        "a", "b", "blockquote", "cite", "code", "dd", "div", "dl", "dt", "em", "i", "li", "mark", "ol", "p", "pre",
        "q", "s", "small", "span", "strong", "sub", "sup", "u", "ul",
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
# A denoiser writes neighbouring positions in parallel, and two of them sometimes both write the same piece of a tag.
# `</` just before another tag (`</</p>`, `</\n</div>`) is no markup (a browser swallows the tag after it as a
# comment, bleach shows it as text); a tag name echoed right after its tag (`</div>div>`, `<p>p>`) is text a reader
# would see. Neither occurs in the sites' corpus (44,833 pages), so both are dropped before parsing.
_STRAY_END_START = re.compile(r"</(?=\s*<)")
_ECHOED_NAME = re.compile(r"(</?([A-Za-z][A-Za-z0-9]*)\b[^<>]*>)(?:\2>)+", re.IGNORECASE)
# The sites' corpus holds no raw `<` or `>` in text (it writes `&lt;` and `&gt;`), so a `>` in the model's text is
# a piece of a tag it broke: a tag name that lost its `</` (`disease.p>`, `..a>`) or its `<`, a `">` written twice
# (`<a href="x.py">flags">flags.py</a>`), or a `>` on its own. And a quoted value that runs on into the next tag
# (`<a href="/wiki/BNF</a>, and`) would swallow every tag after it up to the next quote. `_repair_tags` mends these
# before parsing; a reader would otherwise see them as text (`BNF&lt;/a>, and &lt;a href=`).
_VALUE_INTO_TAG = re.compile(
    r"""(<([A-Za-z][\w-]*)(?:\s+[^\s"'<>=/]+(?:\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'<>=`]+))?)*"""
    r"""\s+([^\s"'<>=/]+)\s*=\s*(["']))((?:(?!\4)[^<>])*)(?=</?[A-Za-z][^<>"']*>)"""
)
# An end tag that lost its `>` (`</li<li>`, `</a</a>`) is read by a browser as one tag named `li<li`: nothing closes.
_UNFINISHED_END = re.compile(r"(</[A-Za-z][A-Za-z0-9]*)(?=\s*<)")
_MARKUP_TOKEN = re.compile(
    r"""<!--.*?(?:-->|\Z)|<[!?][^>]*>?|</?[A-Za-z][^\s/>]*(?:[^>"']|"[^"]*"|'[^']*')*>|<[^<>]*>|[^<]+|<""", re.S
)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)")
_EMPTY_TAG = re.compile(r"</?\s*>")
_LABEL_TWICE = re.compile(r"""^[^\s"<>]*">""")
_WORD_BEFORE = re.compile(r"[A-Za-z][A-Za-z0-9]*$")
_START_WITHOUT_LT = re.compile(r"""(?<![\w<>/])([A-Za-z][A-Za-z0-9]*)(?:\s+[\w-]+\s*=\s*"[^"<>]*")+\s*$""")
# A start tag that lost its name: `< href="/view/x.py">` (the `a` gone), or its `<name` and `>` both
# (`\n class="file"<a href=`). The page's own tags say which element carries those attributes.
_ATTRIBUTES = r"""[\w-]+\s*=\s*"[^"<>]*"(?:\s+[\w-]+\s*=\s*"[^"<>]*")*"""
_NAMELESS_START = re.compile(rf"<\s+({_ATTRIBUTES})\s*>")
_ATTRIBUTES_BEFORE_TAG = re.compile(rf"(?:^|(?<=\s))({_ATTRIBUTES})$")
_ATTRIBUTE_NAME = re.compile(r"([\w-]+)\s*=")
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
# A fragment marker that is not the `#` of a numeric character reference (`&#35;`).
_FRAGMENT = re.compile(r"(?<!&)#")


def sanitize_html(html_text: str, *, allow_images: bool = True, draft: bool = False) -> str:
    """Return `html_text` reduced to genui's allowlist: safe to put in a page as is.

    allow_images: keep `<img>` (same-site `src` only). Off for sites that have no images to serve.
    draft: the text is a denoising intermediate, not the final page. Images and link targets are dropped, because
        a draft's URLs are still noise and each one would otherwise fire (or invite) a request per step.

    A trailing tag cut off mid-way (`<a href="/wi`) is removed and open tags are closed, so a draft frame renders
    as the text so far. A stuttered piece of a tag (`</</p>`, `</div>div>`) is removed, and so is an element left
    empty (`<li></li>`). The function is idempotent: sanitising its own output changes nothing.
    """
    if not html_text:
        return ""
    cleaner = _cleaner(allow_images and not draft, draft)
    cleaned = cleaner.clean(_drop_partial_tag(_repair_tags(_drop_stutters(html_text))))
    # A tree the parser had to repair can serialise to markup that parses into a different tree (an <h6> left
    # inside an <h1> by the adoption agency algorithm), so clean until the output is its own fixed point.
    for _ in range(_MAX_PASSES):
        again = cleaner.clean(cleaned)
        if again == cleaned:
            break
        cleaned = again
    return cleaned


def _drop_stutters(text: str) -> str:
    return _ECHOED_NAME.sub(r"\1", _STRAY_END_START.sub("", text))


def _repair_tags(text: str) -> str:
    text = _VALUE_INTO_TAG.sub(_close_value, _UNFINISHED_END.sub(r"\1>", text))
    out: list[str] = []
    open_tags: list[str] = []
    carriers: dict[str, str] = {}  # an attribute list (and its names alone) -> the element that last carried it
    after_start = False
    tokens = _MARKUP_TOKEN.findall(text)
    for at, token in enumerate(tokens):
        if _is_tag(token):
            name = _TAG_NAME.match(token)
            if _EMPTY_TAG.fullmatch(token):
                after_start = False
                continue  # `<>` or `</\n>`: no tag a browser would read, shown as text
            if name is None and (nameless := _NAMELESS_START.fullmatch(token)):
                carrier = carriers.get(_names(nameless[1]))
                if carrier is None:
                    continue  # `< href="x">` with no such tag before it: no element to give it, and no text
                token = f"<{carrier} {nameless[1].strip()}>"
                name = _TAG_NAME.match(token)
            if name is not None:
                _follow(open_tags, name[1].lower(), token)
                if not token.startswith("</"):
                    _carry(carriers, name[1], token[name.end() : -1].removesuffix("/"))
            out.append(token)
            after_start = name is not None and not token.startswith("</")
            continue
        if ">" in token and not token.startswith("<"):
            following = next((tokens[k] for k in range(at + 1, len(tokens)) if _is_tag(tokens[k])), "")
            token = _repair_text(token, open_tags, carriers, after_start, following)
        if (
            at + 1 < len(tokens)
            and _is_tag(tokens[at + 1])
            and not tokens[at + 1].startswith("</")
            and token.endswith('"')
            # the last few hundred characters: a list of attributes is short, and the search is quadratic in it
            and (bare := _ATTRIBUTES_BEFORE_TAG.search(token, max(0, len(token) - 400)))
            and (carrier := carriers.get(bare[1].strip())) is not None
        ):
            # `\n class="file"<a href=`: only a list the page already gave an element, written out whole
            token = f"{token[: bare.start()]}<{carrier} {bare[1].strip()}>"
            _follow(open_tags, carrier.lower(), token)
        out.append(token)
        after_start = False
    return "".join(out)


def _names(attributes: str) -> str:
    return " ".join(sorted(_ATTRIBUTE_NAME.findall(attributes))) + "="


def _carry(carriers: dict[str, str], name: str, attributes: str) -> None:
    """Remember the element a start tag named for its attribute list, whole and by its names alone."""
    attributes = attributes.strip()
    carriers[attributes] = carriers[_names(attributes)] = name


def _is_tag(token: str) -> bool:
    return token.startswith("<") and token.endswith(">") and len(token) > 1


def _close_value(match: re.Match[str]) -> str:
    start, tag, attribute, quote, value = match.group(1, 2, 3, 4, 5)
    closed = f"{start}{value}{quote}>"
    if tag.lower() == "a" and attribute.lower() == "href":
        # The link's text was never written: its target's last segment reads as what the model meant to write.
        label = unquote(urlsplit(html.unescape(value)).path.rstrip("/").rpartition("/")[2])
        closed += html.escape(label, quote=False)
    return closed


def _follow(open_tags: list[str], name: str, token: str) -> None:
    if token.startswith("</"):
        if name in open_tags:
            del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name) :]
    elif name not in _VOID and not token.endswith("/>"):
        open_tags.append(name)


def _repair_text(text: str, open_tags: list[str], carriers: dict[str, str], after_start: bool, following: str) -> str:
    if after_start:
        text = _LABEL_TWICE.sub("", text, count=1)  # `flags">flags.py`: the label begun, its tag's end, the label
    pieces = text.split(">")
    out = []
    for piece in pieces[:-1]:
        if (start := _START_WITHOUT_LT.search(piece)) and start[1].lower() in ALLOWED_TAGS:
            # `</li>li class="file">`: a start tag that lost its `<`.
            out.append(f"{piece[: start.start()]}<{start[0]}>")
            _follow(open_tags, start[1].lower(), "<" + start[0] + ">")
            _carry(carriers, start[1], start[0][len(start[1]) :])
            continue
        word = _WORD_BEFORE.search(piece)
        letters = word[0].lower() if word else ""
        # The longest open element whose name ends the word: `fites_irb>` closes a <b>, `revisionsp>` a <p>.
        name = next((letters[i:] for i in range(len(letters)) if letters[i:] in open_tags), None)
        if name is not None and following.lower() != f"</{name}>":
            _follow(open_tags, name, f"</{name}>")
            out.append(f"{piece[: len(piece) - len(name)]}</{name}>")
        elif name is not None:
            out.append(piece[: len(piece) - len(name)])  # `"Thep> Paul"</p>`: its own end tag follows
        elif word is not None and letters in ALLOWED_TAGS and (word.start() == 0 or piece[word.start() - 1].isspace()):
            out.append(piece[: word.start()])  # `h2>` alone, with no <h2> open: a tag's remains
        else:
            out.append(piece)  # a `>` on its own
    out.append(pieces[-1])
    return "".join(out)


def _drop_partial_tag(text: str) -> str:
    # The stdlib tokenizer holds back whatever it cannot finish yet: a tag (or a lone `<`) cut off by the end of a
    # draft. bleach would escape it into visible text (`&lt;a href="/wi`); the next frame will carry it whole.
    tokenizer = HTMLParser(convert_charrefs=True)
    try:
        tokenizer.feed(text)
    except AssertionError:
        # Python < 3.13 gives up on some malformed `<![` sections this way; html5lib copes, so clean it as it is.
        return text
    pending: str = tokenizer.rawdata
    if pending.startswith("<") and not pending.startswith("<!"):
        return text[: len(text) - len(pending)]
    return text


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

    def __call__(self, tag: str, name: str, value: str) -> bool:
        if name not in GLOBAL_ATTRIBUTES and name not in TAG_ATTRIBUTES.get(tag, ()):
            return False
        if name in _URL_ATTRIBUTES:
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
        after_pre = False
        for token in super().__iter__():
            kind = token["type"]
            if kind in ("StartTag", "EmptyTag"):
                attrs: dict[tuple[str | None, str], str] = token["data"]
                _rewrite(token["name"], attrs)
            elif kind in ("Characters", "SpaceCharacters") and after_pre and token["data"].startswith("\n"):
                # The parser eats one newline right after <pre>; give it one to eat, or each pass loses a line.
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
    if (None, "href") in attrs:
        # In-page links (`#History`) must follow the ids they point at.
        path, hash_, fragment = _split_fragment(attrs[(None, "href")])
        attrs[(None, "href")] = path + hash_ + (_prefixed(fragment) if fragment else "")
    if (None, "class") in attrs:
        kept = [c for c in attrs[(None, "class")].split() if not c.lower().startswith(RESERVED_CLASS_PREFIXES)]
        if kept:
            attrs[(None, "class")] = " ".join(kept)
        else:
            del attrs[(None, "class")]
    if tag == "button":
        # Without a type a button submits the nearest form, and genui's page has forms of its own.
        attrs[(None, "type")] = "button"


def _close_headings(root: ElementTree.Element) -> None:
    """Close every heading under ``root`` before its first block child: that child, and everything after it in the
    heading, move out to follow the heading. A heading left with nothing in it goes. Iterative, as html5lib is: a
    page nested thousands deep must not exhaust the stack."""
    headings = [element for element in root.iter() if element.tag in HEADINGS]
    if not headings:
        return  # most drafts and pages past their first frames: no parent map to build
    parents = {child: parent for parent in root.iter() for child in parent}
    for heading in reversed(headings):  # inner headings first: an outer one may move them out of it
        first = next((i for i, child in enumerate(heading) if child.tag in BLOCKS), None)
        if first is None:
            continue
        moved = list(heading)[first:]
        for child in moved:
            heading.remove(child)
        moved[-1].tail = (moved[-1].tail or "") + (heading.tail or "")
        heading.tail = None
        parent = parents[heading]
        index = list(parent).index(heading)
        parent[index + 1 : index + 1] = moved
        if not len(heading) and not (heading.text or "").strip():
            del parent[index]


def _drop_empty(root: ElementTree.Element) -> None:
    """Remove the elements of EMPTY_DROPPED under ``root`` that hold no text and no element, innermost first (so a
    list item left holding only an empty link goes too); the whitespace they held stays, between the words around
    them."""
    for parent in reversed(list(root.iter())):  # every element after its descendants: they are emptied first
        if not any(_is_empty(child) for child in parent):
            continue
        kept: list[ElementTree.Element] = []
        for child in parent:
            if not _is_empty(child):
                kept.append(child)
                continue
            text = (child.text or "") + (child.tail or "")
            if kept:
                kept[-1].tail = (kept[-1].tail or "") + text
            else:
                parent.text = (parent.text or "") + text
        parent[:] = kept


def _is_empty(element: ElementTree.Element) -> bool:
    return (
        element.tag in EMPTY_DROPPED
        and not len(element)
        and not (element.text or "").strip()
        and all(name == "href" for name in element.attrib)
    )


def _split_fragment(url: str) -> tuple[str, str, str]:
    match = _FRAGMENT.search(url)
    if match is None:
        return url, "", ""
    return url[: match.start()], "#", url[match.end() :]


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
        _close_headings(dom)
        _drop_empty(dom)
        filtered = BleachSanitizerFilter(
            source=_DropWithContent(self.walker(dom)),
            allowed_tags=self.tags,
            attributes=self.attributes,
            strip_disallowed_tags=True,
            strip_html_comments=True,
            allowed_protocols=self.protocols,
        )
        result: str = self.serializer.render(_Namespace(filtered))
        return result


# bleach's parser keeps state between calls, so each thread gets its own cleaners.
_local = threading.local()


def _cleaner(images: bool, draft: bool) -> _Cleaner:
    cache: dict[tuple[bool, bool], _Cleaner] = _local.__dict__.setdefault("cleaners", {})
    key = (images, draft)
    if key not in cache:
        cache[key] = _Cleaner(images=images, draft=draft)
    return cache[key]
