"""What a denoiser breaks in HTML, mended before the sanitiser parses it, and the parsed tree tidied.

A denoiser writes every position of a canvas at once, so its slips are not a writer's: a piece of a tag written twice
by neighbouring positions, a tag that lost its `<` or its `</`, a quoted value run on into the next tag, a list item
left empty. A browser would show most of them as text or draw them as blank boxes. `genui.sanitize` calls `mend` on
the model's text before parsing it and `tidy` on the tree it parsed. Both only move or remove what is there, or add
what the page already holds (a tag's lost `<`, `>` or name, a link's text taken from its target, an item around what
a list holds loose), and the allowlist runs after them, so it still decides everything that reaches a browser.
docs/security.md ("Headings and links that were never closed" to "Empty elements") has the cases and how often the
default model writes them.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

__all__ = ["mend", "tidy"]

HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

# Flow content a heading may not hold (its content model is phrasing content). A model that forgets `</h1>` puts
# the rest of the page inside the heading, where the parser leaves it and the browser draws it at heading size; such
# a block is moved out to follow the heading (`_close_before_blocks`). A link may hold blocks in HTML, but none of
# the sites' corpus pages (44,817) has one do it: one that does is a link the model never closed.
BLOCKS = HEADINGS | frozenset(
    {
        "address", "article", "aside", "blockquote", "details", "div", "dl", "figure", "footer", "header", "hgroup",
        "hr", "main", "menu", "nav", "ol", "p", "pre", "section", "table", "ul",
    }
)  # fmt: skip

# Elements that show nothing when they hold nothing. An empty one is a piece the model left behind (`<li></li>` drawn
# as a blank card, `<a href="/x"></a>`, the parser's copy of a link left open across a list item); the sites' corpus
# (44,826 pages) has none. One with an attribute of MEANINGFUL stays: a class or an id can give it a look of its own in
# the site's CSS (`a.icon::before`), a title or a label a meaning.
EMPTY_DROPPED = HEADINGS | frozenset(
    {
        "a", "b", "blockquote", "cite", "code", "dd", "div", "dl", "dt", "em", "i", "li", "mark", "ol", "p", "pre",
        "q", "s", "small", "span", "strong", "sub", "sup", "u", "ul",
    }
)  # fmt: skip
MEANINGFUL = frozenset({"class", "id", "title", "aria-label"})
LISTS = frozenset({"ul", "ol", "menu"})
UNORDERED = frozenset({"ul", "menu"})
CLOSED_BEFORE_BLOCKS = HEADINGS | {"a"}
# Start tags that end an open paragraph (HTML's "close a p element").
CLOSES_P = BLOCKS | frozenset({"dd", "dt", "fieldset", "figcaption", "form", "li", "summary"})
# The elements HTML's parser reopens after the element that held them ends ("active formatting elements").
FORMATTING = frozenset(
    {"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"}
)
_BLANK = " \t\n\r\f"  # HTML's whitespace: a no-break space is text
# Elements nested deeper than this keep only their text. A page of 497 nested list items (4 KB, within a site's
# token budget) failed with a RecursionError in the serialiser, and 400 took 0.5 s of the event loop a frame; no
# corpus page nests past 6 (the 44,817 of data/corpus.jsonl, parsed as the sanitiser parses them).
MAX_DEPTH = 40

# A denoiser writes neighbouring positions in parallel, and two of them sometimes both write the same piece of a tag.
# `</` just before another tag or a space (`</</p>`, `</\n</div>`, `object</ to a`) is no markup (a browser swallows
# everything up to the next `>` as a comment, an end tag there too; bleach shows it as text); a tag name echoed right
# after its tag (`</div>div>`, `<p>p>`) is text a reader would see. Neither occurs in the sites' corpus (44,833
# pages), so both are dropped before parsing.
_STRAY_END_START = re.compile(r"</(?=[\s<])")
_EMPTY_END = re.compile(r"</[ \t\n\r\f]*>")
_ECHOED_NAME = re.compile(r"(</?([A-Za-z][A-Za-z0-9]*)\b[^<>]*>)(?:\2>)+", re.IGNORECASE)
# The sites' corpus holds no raw `<` or `>` in text (it writes `&lt;` and `&gt;`), so a `>` in the model's text is
# mostly a piece of a tag it broke: a tag name that lost its `</` (`disease.p>`, `..a>`) or its `<`, a `">` written
# twice (`<a href="x.py">flags">flags.py</a>`), or a `>` on its own after a quote or a word. A `>` after a space, a
# digit or an operator on the same line is text a model writes as a page does (`ls > out`, `2>1`, `a -> b`) and
# stays. And a quoted value that runs on into the next tag
# (`<a href="/wiki/BNF</a>, and`) would swallow every tag after it up to the next quote. `_repair_tags` mends these
# before parsing; a reader would otherwise see them as text (`BNF&lt;/a>, and &lt;a href=`).
_EARLIER_ATTRIBUTES = r"""(?:\s+[^\s"'<>=/]+(?:\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'<>=`]+))?)*"""
_VALUE_INTO_TAG = re.compile(
    rf"""(<([A-Za-z][\w-]*){_EARLIER_ATTRIBUTES}"""
    r"""\s+([^\s"'<>=/]+)\s*=\s*(["']))((?:(?!\4)[^<>])*)(?=</?[A-Za-z][^<>"']*>)"""
    # unless the next quote of its kind closes it (a `>`, `/>` or another attribute after it): a value may hold
    # what reads as a tag (`title="press <Enter> to go"`, `title="std::vector<int>"`)
    r"""(?!(?:(?!\4)[\s\S])*\4(?:\s*/?>|\s+[^\s"'<>=/]+\s*=))"""
)
# A quoted value cut short by the tag's own `>` or the next tag's `<`, its quote lost (`<div class="p></div>\n<div
# class="replies">`, `<div class="replies<\n class="reply">`): the run to the next quote holds a `<` and ends in
# another attribute's `name=`, so that quote opens a value and none closed this one. A closed value that holds a
# bracket (`title="a<b"`) ends in its own quote, not in `=`, and stays.
_VALUE_CUT_SHORT = re.compile(
    rf"""(<[A-Za-z][\w-]*{_EARLIER_ATTRIBUTES}"""
    r"""\s+[^\s"'<>=/]+\s*=\s*(["']))([^"'<>]*)(?=(?:<|>(?:(?!\2).)*<)(?:(?!\2).)*=\s*\2)""",
    re.S,
)
# An end tag that lost its `>` (`</li<li>`, `</a</a>`) is read by a browser as one tag named `li<li`: nothing closes.
_UNFINISHED_END = re.compile(r"(</[A-Za-z][A-Za-z0-9]*)(?=\s*<)")
_MARKUP_TOKEN = re.compile(
    # possessive (`*+`): a tag's name and the run after it could otherwise split the same characters every way
    # before failing on a `>` that never comes, cubic in the run (`<a<a<a...` in 1,200 characters took 4 s)
    r"""<!--.*?(?:-->|\Z)|<[!?][^>]*>?|</?[A-Za-z][^\s/>]*+(?:[^>"']|"[^"]*"|'[^']*')*+>|<[^<>]*>|[^<]+|<""",
    re.S,
)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)")
_EMPTY_TAG = re.compile(r"</?\s*>")
# What precedes a `>` that is text: `2>1`, `ls > out`, `->`, `=>`, `|>`; not a line break (`</\n>` leaves `\n>`)
_BEFORE_TEXT_GT = frozenset(" \t0123456789-=|&)*+")
_LABEL_TWICE = re.compile(r"""^[^\s"<>]*">""")
_WORD_BEFORE = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_START_WITHOUT_LT = re.compile(r"""(?<![\w<>/])([A-Za-z][A-Za-z0-9]*)(?:\s+[\w-]+\s*=\s*"[^"<>]*")+\s*$""")
# A start tag that lost its name: `< href="/view/x.py">` (the `a` gone), or its `<name` and `>` both
# (`\n class="file"<a href=`). The page's own tags say which element carries those attributes.
_ATTRIBUTES = r"""[\w-]+\s*=\s*"[^"<>]*"(?:\s+[\w-]+\s*=\s*"[^"<>]*")*"""
_NAMELESS_START = re.compile(rf"<\s+({_ATTRIBUTES})\s*>")
_ATTRIBUTES_BEFORE_TAG = re.compile(rf"(?:^|(?<=\s))({_ATTRIBUTES})$")
_ATTRIBUTE_NAME = re.compile(r"([\w-]+)\s*=")
_LINK = "a"  # the element an href alone belongs to, where no tag before had one
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


# What a byte-level model's text holds where its tokens' bytes form no character (a Japanese thread read `東lt.�i`):
# the tokenizer decodes them as U+FFFD, which means nothing on a page.
_UNDECODED = "\ufffd"


def mend(text: str, tags: frozenset[str]) -> str:
    """``text`` with the pieces of tags the model broke mended or dropped, a tag cut off at its end removed, and
    bytes that decoded to no character (U+FFFD) left out. ``tags``: the element names the sanitiser keeps (a word is
    read as a tag's remains only if it names one)."""
    return _drop_partial_tag(_repair_tags(_drop_stutters(text.replace(_UNDECODED, "")), tags))


def tidy(root: ElementTree.Element) -> None:
    """Close the headings and links under ``root`` that hold blocks, put list items written after their list back in
    it, wrap a list's loose text and inline elements in items, drop an item its list holds already, and remove the
    elements left empty; below MAX_DEPTH, an element's elements are made its text."""
    _flatten_below(root, MAX_DEPTH)
    _close_before_blocks(root)
    _gather_items(root)
    _wrap_strays(root)
    _drop_repeated_items(root)
    _drop_empty(root)


def _flatten_below(root: ElementTree.Element, depth: int) -> None:
    """Each element ``depth`` levels under ``root`` left holding its descendants' text, in order, and no element."""
    levels = [(root, 0)]
    while levels:
        element, level = levels.pop()
        if level < depth:
            levels += [(child, level + 1) for child in element]
        elif len(element):
            element.text, element[:] = _text_of(element), []


def _text_of(element: ElementTree.Element) -> str:
    """The text under ``element``, as itertext gives it, without its recursion."""
    parts: list[str] = []
    pending: list[ElementTree.Element | str] = [element]  # elements to read, and tails to write after them
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        parts.append(item.text or "")
        for child in reversed(item):
            pending += [child.tail or "", child]
    return "".join(parts)


def _drop_stutters(text: str) -> str:
    text = _EMPTY_END.sub(lambda m: m[0][2:-1], text)  # `</ >`: its blanks stay, and no `>` is left to read as text
    return _ECHOED_NAME.sub(r"\1", _STRAY_END_START.sub("", text))


def _repair_tags(text: str, tags: frozenset[str]) -> str:
    text = _VALUE_INTO_TAG.sub(_close_value, _UNFINISHED_END.sub(r"\1>", text))
    # the value closed where it was cut: a `>` there ends its tag, a `<` needs one
    text = _VALUE_CUT_SHORT.sub(lambda m: m[1] + m[3] + m[2] + (">" if m.string[m.end()] == "<" else ""), text)
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
                held = name[1].lower() if token.startswith("</") else _closed_by(open_tags, name[1].lower(), out)
                if held is not None:
                    token = _close_formatting(open_tags, held) + token
                _follow(open_tags, name[1].lower(), token)
                if not token.startswith("</"):
                    _carry(carriers, name[1], token[name.end() : -1].removesuffix("/"))
            out.append(token)
            after_start = name is not None and not token.startswith("</")
            continue
        if ">" in token and not token.startswith("<"):
            following = next((tokens[k] for k in range(at + 1, len(tokens)) if _is_tag(tokens[k])), "")
            token = _repair_text(token, open_tags, carriers, after_start, following, tags)
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
        target = html.unescape(value)
        try:
            target = urlsplit(target).path
        except ValueError:  # `//[x`: no URL a link could lead to, but its last segment still reads as the text
            target = target.partition("?")[0].partition("#")[0]
        label = unquote(target.rstrip("/").rpartition("/")[2])
        closed += html.escape(label, quote=False)
    return closed


def _close_formatting(open_tags: list[str], name: str) -> str:
    """End tags for the formatting elements still open inside the innermost open ``name``, innermost first (and
    they leave ``open_tags``). The parser closes them where ``name`` ends too, but keeps them in its list of active
    formatting elements and opens a copy of each wherever text follows: a link left open in a paragraph makes every
    paragraph after it a link, a `<b>` every one bold."""
    if name not in open_tags:
        return ""
    start = len(open_tags) - open_tags[::-1].index(name)
    inside = open_tags[start:]
    open_tags[start:] = [tag for tag in inside if tag not in FORMATTING]
    return "".join(f"</{tag}>" for tag in reversed(inside) if tag in FORMATTING)


def _closed_by(open_tags: list[str], name: str, out: list[str]) -> str | None:
    """The open element a start tag ``name`` ends without an end tag (a paragraph ends at the next block, an item
    at the next item), or None. Not when a formatting element has just opened (``out``: the tokens so far): a link
    around a heading (`<p><a href="/x"><h2>`) is one, which the tidy puts inside it."""
    last = next((token for token in reversed(out) if token.strip(_BLANK)), "")
    opened = _TAG_NAME.match(last) if _is_tag(last) and not last.startswith("</") else None
    if opened is not None and opened[1].lower() in FORMATTING:
        return None
    ended = None
    if name == "li":
        ended = _innermost(open_tags, "li", within=LISTS)
    elif name in ("dt", "dd"):
        ended = _innermost(open_tags, "dt", "dd", within={"dl"})
    if ended is None and name in CLOSES_P:
        ended = _innermost(open_tags, "p", within=frozenset())
    return ended


def _innermost(open_tags: list[str], *names: str, within: frozenset[str] | set[str]) -> str | None:
    """The innermost open element of ``names``, if no element of ``within`` (a list: a nested one) opened after it."""
    for tag in reversed(open_tags):
        if tag in names:
            return tag
        if tag in within:
            return None
    return None


def _follow(open_tags: list[str], name: str, token: str) -> None:
    if token.startswith("</"):
        if name in open_tags:
            del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name) :]
    elif name not in _VOID and not token.endswith("/>"):
        open_tags.append(name)


def _repair_text(
    text: str, open_tags: list[str], carriers: dict[str, str], after_start: bool, following: str, tags: frozenset[str]
) -> str:
    if after_start:
        text = _LABEL_TWICE.sub("", text, count=1)  # `flags">flags.py`: the label begun, its tag's end, the label
    pieces = text.split(">")
    out = []
    end = -1  # where in ``text`` the piece's `>` is
    kept = False  # whether the last `>` stayed as text
    for piece in pieces[:-1]:
        end += len(piece) + 1
        was_kept, kept = kept, False
        if (start := _START_WITHOUT_LT.search(piece)) and start[1].lower() in tags:
            # `</li>li class="file">`: a start tag that lost its `<`.
            out.append(f"{piece[: start.start()]}<{start[0]}>")
            _follow(open_tags, start[1].lower(), "<" + start[0] + ">")
            _carry(carriers, start[1], start[0][len(start[1]) :])
            continue
        bare = _ATTRIBUTES_BEFORE_TAG.search(piece, max(0, len(piece) - 400))
        carrier = None if bare is None else carriers.get(names := _names(bare[1]), _LINK if names == "href=" else None)
        if bare is not None and carrier is not None and carrier in tags:
            # `See also href="/wiki/Unix">Unix</a>`: a start tag that lost its `<name`, attributes a tag before had
            # (an href alone: a link's)
            out.append(f"{piece[: bare.start()]}<{carrier} {bare[1].strip()}>")
            _follow(open_tags, carrier.lower(), f"<{carrier}>")
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
        elif word is not None and letters in tags and (word.start() == 0 or piece[word.start() - 1].isspace()):
            out.append(piece[: word.start()])  # `h2>` alone, with no <h2> open: a tag's remains
        else:
            kept = _reads_as_text(text, end, was_kept)
            out.append(piece + ">" if kept else piece)
    out.append(pieces[-1])
    return "".join(out)


def _reads_as_text(text: str, at: int, after_kept: bool) -> bool:
    """Whether the lone `>` at ``text[at]`` is text (`ls > out`, `2>1`, `a -> b`, `>>`), not a piece of a tag: what
    precedes it is what precedes a `>` in text (or a `>` kept so far), and on its line it has text before it, not
    ending in a quote (`class="lead" >`), and text after it (`<td>42></td>` lost its `</td`). Only the 200
    characters each side are read, so a run of `>` costs no more than a short one."""
    before = text[at - 1] if at else ""
    if not before or not (before in _BEFORE_TEXT_GT or (before == ">" and after_kept)):
        return False
    line = text[max(0, at - 200) : at].rpartition("\n")[2].rstrip(_BLANK)
    after = text[at + 1 : at + 201].partition("\n")[0].strip(_BLANK)
    return bool(line) and line[-1] not in "\"'" and bool(after)


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


def _close_before_blocks(root: ElementTree.Element) -> None:
    """Close every heading and link under ``root`` before its first block child: that child, and everything after
    it in the element, move out to follow it; one left with nothing in it goes. A heading the model never closed
    holds the rest of the page, which a browser draws at heading size; a link it never closed (or the parser's copy
    of one, reopened after the heading that held it) makes every paragraph after it one link. Innermost first, so a
    link's blocks leave it before its heading's do. Iterative, as html5lib is: a page nested thousands deep must not
    exhaust the stack."""
    held = [element for element in root.iter() if element.tag in CLOSED_BEFORE_BLOCKS]
    if not held:
        return  # most drafts and pages past their first frames: no parent map to build
    parents = {child: parent for parent in root.iter() for child in parent}
    for element in reversed(held):  # inner ones first: an outer one may move them out of it
        first = next((i for i, child in enumerate(element) if child.tag in BLOCKS), None)
        if first is None:
            continue
        if element.tag == "a" and _only_child(element) is not None:  # `<a><h1>Title</h1></a>`: one block, linked
            _link_inside(element, parents)  # (a block in that block: the next pass takes the link further in)
            continue
        moved = list(element)[first:]
        for child in moved:
            element.remove(child)
        moved[-1].tail = (moved[-1].tail or "") + (element.tail or "")
        element.tail = None
        parent = parents[element]
        index = list(parent).index(element)
        parent[index + 1 : index + 1] = moved
        for child in moved:
            parents[child] = parent
        if not len(element) and not (element.text or "").strip():
            del parent[index]


def _only_child(element: ElementTree.Element) -> ElementTree.Element | None:
    """``element``'s one child when it holds nothing else but whitespace, else None."""
    if len(element) != 1 or (element.text or "").strip(_BLANK) or (element[0].tail or "").strip(_BLANK):
        return None
    return element[0]


def _link_inside(link: ElementTree.Element, parents: dict[ElementTree.Element, ElementTree.Element]) -> None:
    """Put a link that holds one block and nothing else inside that block, around all it holds: the same link, and
    no block inside a link (a site's opening may write `<a href="/"><h1>Home</h1></a>`)."""
    block = link[0]
    parent = parents[link]
    index = list(parent).index(link)
    link.remove(block)
    block.tail, link.tail = link.tail, None
    link.text, block.text = block.text, None
    link[:] = list(block)
    block[:] = [link]
    parent[index] = block
    parents[block] = parent
    parents[link] = block


def _gather_items(root: ElementTree.Element) -> None:
    """Put list items back in the list they were written after. A `</ul>` the model writes too soon leaves the items
    after it outside any list, where a browser draws them as bare bullets in the page's body (the forum's front page
    at session 49: two threads in its list, three after it). An `li` outside a list whose sibling before it is a list,
    or an item moved into one, with only whitespace between, joins that list; any other `li` outside a list starts
    a `<ul>` of its own (a list whose `<ul>` the model lost: the wiki's "Linked list", session 51). Valid HTML has no
    `li` outside a list, so nothing else moves."""
    for parent in list(root.iter()):
        if parent.tag in LISTS:
            continue
        into: ElementTree.Element | None = None
        previous: ElementTree.Element | None = None
        for child in list(parent):
            joined = previous is not None and not (previous.tail or "").strip(_BLANK)
            if child.tag == "li" and into is not None and joined:
                parent.remove(child)
                if len(into):  # the whitespace before the item goes in with it; what follows it stays after the list
                    into[-1].tail = (into[-1].tail or "") + (into.tail or "")
                into.tail, child.tail = child.tail, None
                into.append(child)
                continue
            if child.tag == "li" and (parent is root or parent.tag in BLOCKS):  # not an inline element's item
                into = ElementTree.Element("ul")
                into.tail, child.tail = child.tail, None
                parent.insert(list(parent).index(child), into)
                parent.remove(child)
                into.append(child)
                child = into
            else:
                into = child if child.tag in LISTS else None
            previous = child


def _wrap_strays(root: ElementTree.Element) -> None:
    """Wrap each run of text and inline elements a list holds outside its items in an item of its own. A list item
    whose `<li>` the model lost leaves its link straight inside the `<ul>` (the forum's front page, session 50: a
    board's link before the board items), where a browser draws it with no bullet, out of line with the rest. A
    block or a list inside the list stays as it is. Valid HTML holds only items in a list; the sites' corpus pages
    (44,817) have nothing else in one."""
    for parent in list(root.iter()):
        if parent.tag not in LISTS:
            continue
        items: list[ElementTree.Element] = []
        run: ElementTree.Element | None = None  # the item taking the stray pieces since the last item or block
        if (parent.text or "").strip(_BLANK):
            run = ElementTree.Element("li")
            run.text, parent.text = parent.text, None
            items.append(run)
        for child in list(parent):
            # an item, a block, a comment, or an inline element holding items (an item in an item would not parse
            # back as one) stay as they are
            stays = child.tag == "li" or child.tag in BLOCKS or not isinstance(child.tag, str)
            if stays or any(inner.tag == "li" for inner in child.iter()):
                items.append(child)
                run = None
                if (child.tail or "").strip(_BLANK):  # loose text after it starts an item
                    run = ElementTree.Element("li")
                    run.text, child.tail = child.tail, None
                    items.append(run)
                continue
            if run is None:
                run = ElementTree.Element("li")
                items.append(run)
            run.append(child)
        # a run of line breaks alone is no item (it would be a blank bullet): those stay where they were
        kept: list[ElementTree.Element] = []
        for item in items:
            breaks = item.tag == "li" and item not in parent and not (item.text or "").strip(_BLANK)
            if breaks and all(child.tag in ("br", "wbr") and not (child.tail or "").strip(_BLANK) for child in item):
                kept.extend(item)
            else:
                kept.append(item)
        parent[:] = kept


def _drop_repeated_items(root: ElementTree.Element) -> None:
    """Remove each item of an unordered list that repeats, byte for byte, an item before it in its list. A denoiser
    that writes a list's items in parallel writes one twice (the forum's boards, session 60: `definitions` listed
    twice, one link to one board), which a reader sees as a slip. The sites' corpus has 8 lists of 15,332 that
    repeat an item, each a FOLDOC entry's "See also" naming one article twice: a slip of the source's too. An
    ordered list keeps its items: a step may come twice (`Stir`, `Wait`, `Stir`)."""
    for parent in list(root.iter()):
        if parent.tag not in UNORDERED:
            continue
        seen: set[str] = set()
        kept: list[ElementTree.Element] = []
        for child in parent:  # (what follows an item in a list is whitespace: _wrap_strays put any text in an item)
            key = _content(child) if child.tag == "li" else None
            if key is None or key not in seen:
                kept.append(child)
            if key is not None:
                seen.add(key)
        parent[:] = kept


def _content(item: ElementTree.Element) -> str | None:
    """``item`` as markup (its tail left out); None when it shows no text."""
    tail, item.tail = item.tail, None
    try:
        written = ElementTree.tostring(item, encoding="unicode")
    finally:
        item.tail = tail
    return written if "".join(item.itertext()).strip(_BLANK) else None


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
        and not (element.text or "").strip(_BLANK)
        and MEANINGFUL.isdisjoint(element.attrib)
    )
