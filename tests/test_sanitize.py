"""sanitize_html against public XSS corpora, genui's own htmx payloads, drafts and random HTML-ish text.

The public corpora are vendored unchanged in tests/xss/ (see SOURCES.md there); the htmx payloads are
tests/xss_payloads_htmx.json. Output is checked structurally by a second parser (the stdlib's, not bleach's html5lib),
so a check does not share the sanitiser's view of the markup.
"""

from __future__ import annotations

import html
import re
import time
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xss_corpus import HTMX_PAYLOADS, PAYLOAD_FILES, load_payloads

from genui.sanitize import ALLOWED_TAGS, GLOBAL_ATTRIBUTES, ID_PREFIX, TAG_ATTRIBUTES, sanitize_html

OPTIONS = [{}, {"draft": True}, {"allow_images": False}]

BASE = "https://genui.test/wiki/Page"


class _Elements(HTMLParser):
    """Start tags and their (entity-decoded) attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))


def _stays_on_site(url: str) -> bool:
    # Resolve the way a browser would (tabs/newlines dropped, edges trimmed, `\` read as `/`) against a page URL.
    cleaned = re.sub(r"[\t\n\r]", "", url).strip("".join(chr(c) for c in range(0x21))).replace("\\", "/")
    resolved = urlsplit(urljoin(BASE, cleaned))
    return resolved.scheme == "https" and resolved.netloc == "genui.test"


def violations(output: str) -> list[str]:
    """Everything in sanitised output that the policy forbids; empty when the output is acceptable."""
    found = []
    parser = _Elements()
    parser.feed(output)
    parser.close()
    for tag, attrs in parser.elements:
        if tag not in ALLOWED_TAGS:
            found.append(f"element <{tag}>")
        for name, value in attrs:
            value = value or ""
            squashed = re.sub(r"[\s\x00-\x20]+", "", value).lower()
            if name not in GLOBAL_ATTRIBUTES and name not in TAG_ATTRIBUTES.get(tag, frozenset()):
                found.append(f"attribute {name} on <{tag}>")
            if name.startswith(("on", "hx-", "data-", "ws-", "sse-", "style", "form")):
                found.append(f"attribute {name} on <{tag}>")
            # At the start of any value (a title may mention "javascript:" in prose). A URL is resolved as a browser
            # resolves it (_stays_on_site, below), which finds its scheme however it is written: "javascript:" in a
            # path or a fragment (`/JavaScript:_The_Good_Parts`, `&#gen-javascript:`) is no script URL, and was
            # flagged here by a random example the sanitiser had done right.
            if squashed.startswith(("javascript:", "data:", "vbscript:")):
                found.append(f"script or data URL in {name}={value!r}")
            if "url(" in squashed or "expression(" in squashed:
                found.append(f"CSS URL in {name}={value!r}")
            if name in ("href", "src") and not _stays_on_site(value):
                found.append(f"off-site URL {name}={value!r}")
            if name in ("id", "for") and not value.startswith(ID_PREFIX):
                found.append(f"unprefixed {name}={value!r}")
            if tag == "button" and name == "type" and value != "button":
                found.append(f"button type={value!r}")
    return found


# ---------------------------------------------------------------------------------------------------------------
# the corpora


@pytest.mark.parametrize("name", PAYLOAD_FILES)
def test_every_payload_leaves_only_allowed_markup(name: str) -> None:
    failures = {}
    for index, payload in enumerate(load_payloads(name)):
        for options in OPTIONS:
            found = violations(sanitize_html(payload, **options))
            if found:
                failures[(index, str(options))] = found
    assert failures == {}


@pytest.mark.parametrize("name", PAYLOAD_FILES)
def test_sanitising_a_payloads_output_again_changes_nothing(name: str) -> None:
    unstable = []
    for index, payload in enumerate(load_payloads(name)):
        for options in OPTIONS:
            once = sanitize_html(payload, **options)
            if sanitize_html(once, **options) != once:
                unstable.append((index, str(options)))
    assert unstable == []


def test_htmx_payloads_keep_nothing_htmx_or_its_extensions_read() -> None:
    # The structural check refuses these already; this spells out what htmx, ws and sse look for in markup.
    for payload in load_payloads(HTMX_PAYLOADS.name):
        parser = _Elements()
        parser.feed(sanitize_html(payload))
        for tag, attrs in parser.elements:
            assert tag not in ("form", "input", "template", "script"), payload
            for name, value in attrs:
                assert "hx-" not in name and "ws-" not in name and "sse-" not in name, payload
                assert "canary" not in (value or ""), payload


def test_every_corpus_file_is_present_and_non_empty() -> None:
    # A missing or emptied corpus file would make the suites above pass vacuously.
    counts = {name: len(load_payloads(name)) for name in PAYLOAD_FILES}
    assert all(count > 100 for count in counts.values()), counts


# ---------------------------------------------------------------------------------------------------------------
# the policy, case by case


def test_script_and_style_are_dropped_with_their_content() -> None:
    assert sanitize_html("<p>a</p><script>alert(1)</script><style>p{color:red}</style><p>b</p>") == "<p>a</p><p>b</p>"


def test_svg_and_math_are_dropped_whole() -> None:
    html_text = "<svg><script>alert(1)</script><text>t</text></svg><math><mi>x</mi></math>kept"
    assert sanitize_html(html_text) == "kept"


def test_unknown_tags_are_unwrapped_and_their_text_kept() -> None:
    assert sanitize_html("<font color=red><blink>hello</blink></font>") == "hello"


def test_template_syntax_stays_inert_text() -> None:
    output = sanitize_html("<p>{{7*7}} {% if x %}y{% endif %} {# c #}</p>")
    assert output == "<p>{{7*7}} {% if x %}y{% endif %} {# c #}</p>"


@pytest.mark.parametrize(
    "href",
    [
        "https://example.com/",
        "http://example.com/",
        "//example.com/",
        "/\\example.com/",
        "\\\\example.com/",
        " \t//example.com",
        "&#x2f;&#x2f;example.com",
        "javascript:alert(1)",
        "jav&#x09;ascript:alert(1)",
        "&#106;avascript&colon;alert(1)",
        "data:text/html,x",
        "vbscript:x",
        "mailto:a@example.com",
        "Talk:Page",
    ],
)
def test_links_off_site_or_with_a_scheme_lose_their_target(href: str) -> None:
    assert sanitize_html(f'<a href="{href}">text</a>') == "<a>text</a>"


@pytest.mark.parametrize("href", ["/wiki/Hash_table", "Hash_table", "../up", "?q=1&amp;r=2", "/wiki/Talk:Page"])
def test_same_site_links_are_kept(href: str) -> None:
    assert sanitize_html(f'<a href="{href}">text</a>') == f'<a href="{href}">text</a>'


def test_images_keep_same_site_sources_only_and_one_refused_is_its_alt_text() -> None:
    assert sanitize_html('<img src="/static/a.png" alt="a">') == '<img src="/static/a.png" alt="a">'
    assert sanitize_html('<p>A <img src="https://example.com/a.png" alt="cover &amp; <b>"></p>') == (
        "<p>A cover &amp; &lt;b&gt;</p>"  # text, escaped as text
    )
    assert sanitize_html('<p>a<img src="data:image/png;base64,AAAA">b</p>') == "<p>ab</p>"
    assert sanitize_html('<p><img alt="no source"></p>') == "<p>no source</p>"


def test_an_image_is_shown_only_where_the_site_says_so() -> None:
    """genui.assets: a site's pages show the images of its own assets folder, and any other as its alt text."""
    theirs = "/_genui/assets/shop/logo.png"
    shows = theirs.__eq__
    assert (
        sanitize_html(f'<p><img src="{theirs}" alt="Shop"></p>', image=shows)
        == f'<p><img src="{theirs}" alt="Shop"></p>'
    )
    assert sanitize_html('<p><img src="/wiki/Page" alt="Shop"></p>', image=shows) == "<p>Shop</p>"
    assert sanitize_html(f'<p>a<img src="{theirs}" alt="Shop"></p>', image=shows, draft=True) == "<p>a</p>"  # noise yet


def test_images_can_be_turned_off() -> None:
    assert sanitize_html('<p>a<img src="/a.png">b</p>', allow_images=False) == "<p>ab</p>"


def test_ids_are_prefixed_and_in_page_links_follow_them() -> None:
    output = sanitize_html('<a href="#History">h</a><h2 id="History">History</h2><a href="/wiki/X#Uses">u</a>')
    assert output == f'<a href="#{ID_PREFIX}History">h</a><h2 id="{ID_PREFIX}History">History</h2>' + (
        f'<a href="/wiki/X#{ID_PREFIX}Uses">u</a>'
    )


def test_model_markup_cannot_take_genui_ids_or_classes() -> None:
    output = sanitize_html('<div id="genui-main" class="htmx-indicator genui-shell note">x</div>')
    assert output == f'<div id="{ID_PREFIX}genui-main" class="note">x</div>'


def test_label_for_follows_the_id_prefix() -> None:
    assert sanitize_html('<label for="q">Q</label>') == f'<label for="{ID_PREFIX}q">Q</label>'


def test_buttons_never_submit() -> None:
    output = sanitize_html('<button type="submit" form="genui-search" formaction="/x">go</button>')
    assert output == '<button type="button">go</button>'


def test_forms_and_their_fields_are_removed() -> None:
    assert sanitize_html('<form action="/x"><label>Name <input name="n"></label></form>') == "<label>Name </label>"


def test_style_attributes_are_removed() -> None:
    assert sanitize_html('<p style="color:red;background:url(/x)">x</p>') == "<p>x</p>"


def test_attribute_values_with_quotes_and_brackets_are_stable() -> None:
    once = sanitize_html("<abbr title='say \"a<b\"'>x</abbr>")
    assert once == '<abbr title="say &quot;a&lt;b&quot;">x</abbr>'
    assert sanitize_html(once) == once


def test_pre_keeps_its_leading_blank_line_across_passes() -> None:
    once = sanitize_html("<pre>\n\ncode</pre>")
    assert once == "<pre>\n\ncode</pre>"
    assert sanitize_html(once) == once


def assert_mended(written: str, expected: str) -> None:
    """The sanitiser writes ``written`` as ``expected``, and leaves that as it is (a fixed point)."""
    once = sanitize_html(written)
    assert once == expected
    assert sanitize_html(once) == once


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the step-1800 model's wiki home page: `</h1>` never came, and the list was drawn at heading size
        (
            '<div class="wiki">\n<h1>home\n<ul><li>1. Home</li></ul> tail</h1></div>',
            '<div class="wiki">\n<h1>home\n</h1><ul><li>1. Home</li></ul> tail</div>',
        ),
        ("<h2>History<p>One.</p><p>Two.</p>", "<h2>History</h2><p>One.</p><p>Two.</p>"),
        ("<h1><p>Only a paragraph</p></h1>after", "<p>Only a paragraph</p>after"),
        ("<h1>Hash <em>table</em></h1><p>x</p>", "<h1>Hash <em>table</em></h1><p>x</p>"),
    ],
)
def test_a_heading_holds_no_blocks(written: str, expected: str) -> None:
    assert_mended(written, expected)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the forum's front page at seed 0 (session 49): `</ul>` after two threads, three more after it
        (
            '<ul class="threads"><li>a</li></ul>\n<li>b</li>\n<li>c</li>\n\n<h2>Boards</h2>',
            '<ul class="threads"><li>a</li>\n<li>b</li>\n<li>c</li></ul>\n\n<h2>Boards</h2>',
        ),
        (
            "<ol><li>1</li></ol><li>2</li><ul><li>3</li></ul><li>4</li>",
            "<ol><li>1</li><li>2</li></ol><ul><li>3</li><li>4</li></ul>",
        ),
        # text between: not that list's, but a list of its own
        ("<ul><li>a</li></ul> and <li>x</li>", "<ul><li>a</li></ul> and <ul><li>x</li></ul>"),
        # no list before it to join: the wiki's "Linked list" at seed 0 (session 51) lost its "See also" list's <ul>
        ("<p>x</p><li>y</li>", "<p>x</p><ul><li>y</li></ul>"),
        ("<h2>See also</h2>\n<li>a</li>\n<li>b</li> then", "<h2>See also</h2>\n<ul><li>a</li>\n<li>b</li></ul> then"),
    ],
)
def test_list_items_written_after_their_list_closed_go_back_in_it(written: str, expected: str) -> None:
    assert_mended(written, expected)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the wiki's home page at seed 0 (session 50): the featured article's link never closed in its heading, so the
        # parser reopened it after the heading and every paragraph after it was one link
        (
            '<h2>Featured: <a href="/wiki/net">net</h2>\n<p>[</p><p>A net.</p>\n<h2>Other</h2>\n<ul><li>x</li></ul>',
            '<h2>Featured: <a href="/wiki/net">net</a></h2>\n<p>[</p><p>A net.</p>\n<h2>Other</h2>\n'
            "<ul><li>x</li></ul>",
        ),
        ('<a href="/wiki/y">lead <div>card</div> after</a>', '<a href="/wiki/y">lead </a><div>card</div> after'),
        # a link's blocks leave it before its heading's do
        ('<h1><a href="/wiki/t">Title<p>text</p></a></h1>', '<h1><a href="/wiki/t">Title</a></h1><p>text</p>'),
        ('<p><a href="/wiki/t">one <em>two</em></a> three</p>', '<p><a href="/wiki/t">one <em>two</em></a> three</p>'),
        # a link around one block and nothing else (a site's opening may write one): the link goes inside it
        (
            '<a href="/wiki/x">\n<h1>My <b>Wiki</b></h1>\n</a> after',
            '<h1><a href="/wiki/x">My <b>Wiki</b></a></h1> after',
        ),
    ],
)
def test_a_link_holds_no_blocks(written: str, expected: str) -> None:
    assert_mended(written, expected)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the wiki's "Linked list" (session 51): a link never closed in its paragraph, reopened by the parser in every
        # paragraph and heading after it
        (
            '<p>A <a href="/wiki/object">object list</p>\n<p>The end of the list.</p>\n<h2>See also</h2>',
            '<p>A <a href="/wiki/object">object list</a></p>\n<p>The end of the list.</p>\n<h2>See also</h2>',
        ),
        ("<ul><li><b>bold</li><li>plain</li></ul>", "<ul><li><b>bold</b></li><li>plain</li></ul>"),
        ('<p><a href="/a"><b>x</a> y</p><p>z</p>', '<p><a href="/a"><b>x</b></a> y</p><p>z</p>'),
        ("<p><span><em>x</p><p>y</p>", "<p><span><em>x</em></span></p><p>y</p>"),
        # ended by the next block or item, with no end tag: the same page's categories line and its "See also"
        (
            '<p class="categories"><a href="/wiki/l">Categories: lists\n<h2>See also</h2>',
            '<p class="categories"><a href="/wiki/l">Categories: lists\n</a></p><h2>See also</h2>',
        ),
        ('<ul><li><a href="/a">a<li>b</ul>', '<ul><li><a href="/a">a</a></li><li>b</li></ul>'),
        ("<dl><dt><b>x<dd>y</dl>", "<dl><dt><b>x</b></dt><dd>y</dd></dl>"),
        ("<ul><li><i>a<ul><li>b</li></ul></i></li></ul>", "<ul><li><i>a<ul><li>b</li></ul></i></li></ul>"),  # nested
        # a link opened just before a block goes around it (and then inside it, as the tidy puts it)
        ('<p><a href="/x"><h2>T</h2></a></p>', '<h2><a href="/x">T</a></h2>'),
        # closed where they are meant to be, or never meant to close: unchanged
        ('<p><a href="/a">x</a> <i>y</i></p><p>z</p>', '<p><a href="/a">x</a> <i>y</i></p><p>z</p>'),
        ("<p><b>x</b></p><p><b>y</b></p>", "<p><b>x</b></p><p><b>y</b></p>"),
    ],
)
def test_a_formatting_element_left_open_ends_with_the_element_that_held_it(written: str, expected: str) -> None:
    assert_mended(written, expected)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the forum's front page at seed 0 (session 50): a board's link with its `<li>` lost
        (
            '<ul class="boards"><a href="/r/x/s">s</a><li><a href="/r/women">women</a></li></ul>',
            '<ul class="boards"><li><a href="/r/x/s">s</a></li><li><a href="/r/women">women</a></li></ul>',
        ),
        (
            "<ul>Boards<li>a</li> loose <b>bold</b> tail<li>b</li></ul>",
            "<ul><li>Boards</li><li>a</li><li> loose <b>bold</b> tail</li><li>b</li></ul>",
        ),
        # a list or a block inside a list stays where it is; so do items and the whitespace between them
        ("<ul><li>a</li>\n<ul><li>b</li></ul>\n</ul>", "<ul><li>a</li>\n<ul><li>b</li></ul>\n</ul>"),
        ("<ol>\n<li>a</li>\n<li>b</li>\n</ol>", "<ol>\n<li>a</li>\n<li>b</li>\n</ol>"),
        ("<ul><li>a</li><br><li>b</li></ul>", "<ul><li>a</li><br><li>b</li></ul>"),  # no blank bullet for a break
    ],
)
def test_text_and_inline_elements_loose_in_a_list_get_an_item(written: str, expected: str) -> None:
    assert_mended(written, expected)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # the forum's front page, session 60: one board listed twice
        (
            '<ul>\n<li><a href="/r/law">law</a></li>\n<li><a href="/r/definitions">definitions</a></li>\n'
            '<li><a href="/r/definitions">definitions</a></li>\n<li><a href="/r/pets">pets</a></li>\n</ul>',
            '<ul>\n<li><a href="/r/law">law</a></li>\n<li><a href="/r/definitions">definitions</a></li>\n'
            '<li><a href="/r/pets">pets</a></li>\n</ul>',
        ),
        ("<menu><li>a</li><li>b</li><li>a</li></menu>", "<menu><li>a</li><li>b</li></menu>"),
        # what differs stays: the text, its blanks (`<pre>`), the target, the markup, and items in different lists;
        # and an ordered list keeps its items: a step may come twice
        ("<ul><li><pre>x  = 1</pre></li><li><pre>x = 1</pre></li></ul>", None),
        ("<ol><li>Stir the pot</li><li>Wait</li><li>Stir the pot</li></ol>", None),
        ('<ul><li><a href="/r/a">x</a></li><li><a href="/r/b">x</a></li></ul>', None),
        ("<ul><li>a</li><li>A</li><li><b>a</b></li></ul>", None),
        ("<ul><li>a</li></ul><ul><li>a</li></ul>", None),
        ("<ul><li>a<ul><li>a</li></ul></li></ul>", None),
    ],
)
def test_an_item_its_list_holds_already_is_dropped(written: str, expected: str | None) -> None:
    assert_mended(written, written if expected is None else expected)


@pytest.mark.parametrize(
    "written",
    [
        '<a href="/wiki/x"><div><p>x</p></div></a>',  # one block holding another: the link goes in twice
        "<ul><b><li>a</li><li>b</li></b></ul>",  # inline around items: an item in an item would not parse back
        (
            "eta delta<ul><b><li><em><ul>beta</ul><br><li>eps </li></em>beta <em>theta <li>delta\nzeta\ndelta\neps "
            "</li>eta\n</em></li><li><a href='/wiki/gamma'><li>zetabetaeps </li></a><a href='/wiki/beta'>delta\nbeta"
            "<li>epsdelta\ngamma </li>alpha</a>eta\n</li><li><span>beta <div>gamma\nbetagamma gamma </div><h2>theta "
            "theta\n</h2><span>theta </span></span></li>gamma\n<li>alpha\n<h2><div><b>gamma\ngamma theta\n</b>eps\n"
            "</div></h2></li></ul>eta\n"
        ),
    ],
)
def test_the_mended_tree_is_a_fixed_point_at_once(written: str) -> None:
    """Found by fuzzing the two rules of session 50 with random nestings of links, lists and blocks."""
    once = sanitize_html(written)
    assert sanitize_html(once) == once
    assert ("href=" in written) == ('href="/wiki/' in once)  # a link is kept, wherever it ends up


def test_a_heading_deep_in_a_page_is_closed_too_and_thousands_deep_is_text() -> None:
    output = sanitize_html("<div>" * 30 + "<h1>Title<p>Body</p>")
    assert output == "<div>" * 30 + "<h1>Title</h1><p>Body</p>" + "</div>" * 30
    output = sanitize_html("<div>" * 3000 + "<h1>Title<p>Body</p>")  # past mending.MAX_DEPTH (40)
    assert output == "<div>" * 40 + "TitleBody" + "</div>" * 40


# ---------------------------------------------------------------------------------------------------------------
# drafts: text cut off anywhere


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        ('<p>Hash tables <a href="/wi', "<p>Hash tables </p>"),
        ('<p>Hash tables <a href="/wiki/X" title="a>b', "<p>Hash tables </p>"),
        ("<p>Hash tables <a hr", "<p>Hash tables </p>"),
        ("<p>Hash tables</p><", "<p>Hash tables</p>"),
        ("<p>Hash tables</p></di", "<p>Hash tables</p>"),
        ("<p>Hash tables <img src=/a.png alt=x", "<p>Hash tables </p>"),
        ("<p>a &lt; b and c < d</p>", "<p>a &lt; b and c &lt; d</p>"),
    ],
)
def test_a_tag_cut_off_at_the_end_is_dropped_not_shown(draft: str, expected: str) -> None:
    assert sanitize_html(draft, draft=True) == expected
    assert sanitize_html(draft) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # pages of the default model (the quality report's held-out forum and wiki pages, session 16)
        ('<p><a href="/r/law">law</</a> · 11 points</p>', '<p><a href="/r/law">law</a> · 11 points</p>'),
        ("<p>revenue tax.</</p></div>", "<p>revenue tax.</p>"),
        ("<article><p>units.</p>\n</</article>", "<article><p>units.</p>\n</article>"),
        ("<div><p>x</p></\n</div>", "<div><p>x</p>\n</div>"),
        ("<div><p>HELLO!</p></div>div>\n<p>y</p>", "<div><p>HELLO!</p></div>\n<p>y</p>"),
        ("<p>by <b>reduceer_linty</b>b> in it</p>", "<p>by <b>reduceer_linty</b> in it</p>"),
        ('<p class="x">p>The human</p>', '<p class="x">The human</p>'),
        ("<p>a</</</p><p>b</p>", "<p>a</p><p>b</p>"),
        # the wiki's "Linked list" (session 51): `</` and a space swallowed the text up to the paragraph's `</p>`
        ("<p>an object</ to a list</p><p>b</p>", "<p>an object to a list</p><p>b</p>"),
        # text that only looks alike stays
        ("<p>a &lt;/ b and x</p>", "<p>a &lt;/ b and x</p>"),
        ("<p>1 &lt;&lt; 2, div&gt; <b>b</b></p>", "<p>1 &lt;&lt; 2, div&gt; <b>b</b></p>"),
    ],
)
def test_a_stuttered_piece_of_a_tag_is_dropped_not_shown(written: str, expected: str) -> None:
    """Neighbouring canvas positions sometimes write the same piece of a tag twice; a reader would see it as text."""
    assert sanitize_html(written) == expected
    assert sanitize_html(written, draft=True) == expected.replace(' href="/r/law"', "")


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # pages of the default model (the quality report's held-out pages, session 21)
        (
            '<p>See also <a href="/wiki/BNF</a>, and <a href="/wiki/BULSI.</p>',
            '<p>See also <a href="/wiki/BNF">BNF</a>, and <a href="/wiki/BULSI.">BULSI.</a></p>',
        ),
        (
            '<ul><li class="file"><a href="/view/d/pyuppy.py</a></li>\n<li><a href="/view/d/up.py">up</a></li></ul>',
            '<ul><li class="file"><a href="/view/d/pyuppy.py">pyuppy.py</a></li>\n'
            '<li><a href="/view/d/up.py">up</a></li></ul>',
        ),
        (
            '<ul><li><a href="/view/d/flags.py">flags">flags.py</a></li></ul>',
            '<ul><li><a href="/view/d/flags.py">flags.py</a></li></ul>',
        ),
        (
            '<p class="meta">posted by <b>bway_liquorb> in <a href="/r/news">news</a></p><p>Photo</p>',
            '<p class="meta">posted by <b>bway_liquor</b> in <a href="/r/news">news</a></p><p>Photo</p>',
        ),
        (
            '<div><p>of chestnut disease.</>p><div class="reply">x</div></div>',
            '<div><p>of chestnut disease.</p><div class="reply">x</div></div>',
        ),
        ('<p><a href="/files/d">..a> /usr/d</p>', '<p><a href="/files/d">..</a> /usr/d</p>'),
        ("<p>-- dinner, Thep> Paul</p>", "<p>-- dinner, The Paul</p>"),
        (
            '<ul><li>a</li>li class="file"><a href="/view/x">x</a></li></ul>',
            '<ul><li>a</li><li class="file"><a href="/view/x">x</a></li></ul>',
        ),
        ("<article><p>risk</p>\n\nh2>\n</article>", "<article><p>risk</p>\n\n\n</article>"),
        ("<div><p>Bush</p></\n></div>\n>\n", "<div><p>Bush</p>\n</div>\n\n"),
        (
            '<ul><li><a href="/view/c.py">c.py</a</a></li<li>d</li></ul\n</div>',
            '<ul><li><a href="/view/c.py">c.py</a></li><li>d</li></ul>\n',
        ),
        ('<p><a href="/r/para</a</a> · 23 points</p>', '<p><a href="/r/para">para</a> · 23 points</p>'),
        # session 23: a start tag that lost its name, or its `<name` and `>` both; the page's own tags name it
        (
            '<ul><li class="file"><a href="/view/a">a</a></li>\n<li class="file">< href="/view/r">r.py</li>',
            '<ul><li class="file"><a href="/view/a">a</a></li>\n<li class="file"><a href="/view/r">r.py</a></li></ul>',
        ),
        (
            '<ul><li class="file"><a href="/view/a">a</a></li>\n class="file"<a href="/view/b">b</a></li></ul>',
            '<ul><li class="file"><a href="/view/a">a</a></li>\n <li class="file"><a href="/view/b">b</a></li></ul>',
        ),
        ('<p>< href="/view/r.py">r.py</p>', "<p>r.py</p>"),
        # session 48: a start tag that lost its `<name` and kept its `>` (a wiki article's See also)
        (
            '<p>On <a href="/wiki/Hew">Hew</a>.</p>\n<p>See also href="/wiki/Unix">Unix</a>.</p>',
            '<p>On <a href="/wiki/Hew">Hew</a>.</p>\n<p>See also <a href="/wiki/Unix">Unix</a>.</p>',
        ),
        ('<p>See also href="/wiki/Unix">Unix</a>.</p>', '<p>See also <a href="/wiki/Unix">Unix</a>.</p>'),
        ('<p>So set class="y">z</p>', '<p>So set class="y"z</p>'),  # no tag before had it: no element to give it
        # session 30: a quoted value cut short by `>` or `<`, its quote lost (the forum's held-out threads)
        (
            '<div class="post"><p>x</p>\n<div class="p></div>\n<div class="replies"><div class="reply">y</div></div>',
            '<div class="post"><p>x</p>\n<div class="p"></div>\n<div class="replies"><div class="reply">y</div></div>'
            "</div>",
        ),
        (
            '<div class="post">x</div>\n<div class="replies<\n class="reply"><p>y</p></div></div>',
            '<div class="post">x</div>\n<div class="replies"><div class="reply"><p>y</p></div></div>',
        ),
        (
            '<p><a href="/wiki/x>foo</a> and <a href="/wiki/y">y</a></p>',
            '<p><a href="/wiki/x">foo</a> and <a href="/wiki/y">y</a></p>',
        ),
        # text and attributes that only look alike stay
        ("<p>a &gt; b, p&gt; and &lt;programming&gt;</p>", "<p>a &gt; b, p&gt; and &lt;programming&gt;</p>"),
        # a `>` after a space, a digit or an operator on its line is text (a terminal's redirect, a comparison)
        (
            "<pre>$ echo hi > out.txt\n$ ls >> log 2>&1</pre>",
            "<pre>$ echo hi &gt; out.txt\n$ ls &gt;&gt; log 2&gt;&amp;1</pre>",
        ),
        ("<p>If 2>1, then a -> b and x => y.</p>", "<p>If 2&gt;1, then a -&gt; b and x =&gt; y.</p>"),
        ('<p>So "thanks">more, then\n> alone</p>', '<p>So "thanks"more, then\n alone</p>'),  # a quote, a line break
        # pieces of tags that a `>` after a space or a digit might pass for (a review of session 54)
        ("<p>a</ >b</p><p>c</\t>d</p>", "<p>a b</p><p>c\td</p>"),  # an empty end tag: its blanks stay
        ("<ul><li>x</li> ></ul>\n  >\n<p>y</p>", "<ul><li>x</li> </ul>\n  \n<p>y</p>"),  # nothing before it
        ('<p>class="lead" >x</p>', '<p>class="lead" x</p>'),  # a quote before it
        ("<table><tr><td>42></td></tr></table>", "<table><tbody><tr><td>42</td></tr></tbody></table>"),  # nothing after
        ('<p>Use 2> then p class="note">>more</p>', '<p>Use 2&gt; then </p><p class="note">more</p>'),
        ("<p>revisionsp\n> more</p>", "<p>revisionsp\n more</p>"),  # a word, then a line break: no tag's name
        ('<p><a href="/x" title="a>b">y</a></p>', '<p><a href="/x" title="a>b">y</a></p>'),
        ("<abbr title='a<b'>x</abbr>", '<abbr title="a&lt;b">x</abbr>'),
        ('<abbr title="a<b" class="c">x</abbr>', '<abbr title="a&lt;b" class="c">x</abbr>'),
        ('<p>he set x="y"<b>z</b></p>', '<p>he set x="y"<b>z</b></p>'),
        ('<p class="x">a</p><p>set class="y"<b>z</b></p>', '<p class="x">a</p><p>set class="y"<b>z</b></p>'),
    ],
)
def test_a_tag_the_model_broke_is_mended_not_shown(written: str, expected: str) -> None:
    """A `>` in the model's text, or a link target that runs into the next tag, is a tag the model broke; the sites'
    corpus writes `&gt;` and closes its quotes, so the repair reads it as the tag it was meant to be."""
    assert sanitize_html(written) == expected
    assert sanitize_html(expected) == expected


def test_pieces_of_a_tag_that_parsing_brings_together_are_mended_in_the_same_call() -> None:
    """The parser drops a NUL, which leaves `class="file"` right before a tag only after the first pass: found by
    fuzzing (session 25), where sanitising the output once more changed it."""
    written = 'li class="file">ali class="file">\x00<b>]]>'
    once = sanitize_html(written)
    assert once == '<ul><li class="file">ali </li><li class="file"><b>]]</b></li></ul>'
    assert sanitize_html(once) == once


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # session 25, step 3850's /forum/r/science: two blank cards, and the parser's copies of a link left open
        (
            '<ul class="threads"><li><a href="/r/s/a">A</a></li>\n<li></li><li></li><li><a></a><a href="/r/s/b">B</a>'
            '</li><a href="/r/s/b">\n</a></ul>',
            '<ul class="threads"><li><a href="/r/s/a">A</a></li>\n<li><a href="/r/s/b">B</a></li>\n</ul>',
        ),
        ("<article><p>One.</p>\n<p></p>\n</article>", "<article><p>One.</p>\n\n</article>"),
        ('<p>word<b> </b>word <a href="/wiki/san"></a>.</p>', "<p>word word .</p>"),
        ('<ul><li><a href="/wiki/x"> </a></li></ul>', " "),
        ("<dl><dt></dt><dd></dd></dl><div>\n</div>", "\n"),
        # attributes that give an empty element no look or meaning, or that the allowlist takes away
        ('<p dir="ltr"></p><a href="/x" onclick="go()"></a><li class="htmx-indicator"></li>', ""),
    ],
)
def test_an_element_left_empty_is_dropped(written: str, expected: str) -> None:
    """An empty list item is drawn as a blank card and an empty link is a target nobody can click; the sites' corpus
    has neither, so they are the model's leftovers."""
    assert sanitize_html(written) == expected
    assert sanitize_html(expected) == expected


@pytest.mark.parametrize(
    "written",
    [
        '<a class="icon" href="/os/terminal"></a>',  # drawn by the site's CSS (os.css: a.icon::before)
        '<span class="meta"></span>',
        '<a href="/x" title="Terminal"></a>',
        '<div class="replies"></div>',
        "<p><br></p>",
        "<p>\xa0</p>",  # a no-break space is text
        '<p><img src="/a.png" alt=""></p>',
        "<table><tr><td></td><td>x</td></tr></table>",
    ],
)
def test_an_empty_element_with_a_look_or_a_meaning_of_its_own_stays(written: str) -> None:
    assert sanitize_html(written).replace("<tbody>", "").replace("</tbody>", "") == written


def test_open_tags_in_a_draft_are_closed() -> None:
    output = sanitize_html("<article><h1>Title</h1><ul><li>one<li>two <b>bold", draft=True)
    assert output == "<article><h1>Title</h1><ul><li>one</li><li>two <b>bold</b></li></ul></article>"


def test_a_draft_keeps_links_as_text_and_drops_images() -> None:
    output = sanitize_html('<p><a href="/wiki/X">X</a><img src="/a.png"></p>', draft=True)
    assert output == "<p><a>X</a></p>"


def test_empty_input_gives_empty_output() -> None:
    assert sanitize_html("") == ""


# ---------------------------------------------------------------------------------------------------------------
# random HTML-ish text

PIECES = [
    "<", ">", "</", "/>", "<!--", "-->", "<!", "<![CDATA[", "]]>", "=", '"', "'", " ", "\n", "\t", "\r", "\x00", "&",
    "&amp;", "&lt;", "&#", "&#x", ";", "#", "/", "\\", ":", "a", "p", "b", "div", "pre", "li", "td", "table", "svg",
    "math", "script", "style", "template", "textarea", "noscript", "img", "form", "select", "option", "href", "src",
    "id", "for", "class", "title", "hx-get", "data-hx-post", "onerror", "javascript:", "data:", "//x", "/wiki/X",
    "{{7*7}}", "<p>", "</p>", "<a href=", "<img src=", "<pre>", "<td>", "<li>", "<b>", "<script>", "</script>",
    "<svg>", "<math>", "<template>", "<textarea>", "<noscript>", "<table>", "<button>", "<label for=",
    "genui-", "htmx-", "\u00a0", "\u2028", "\ufeff",
    # pieces of tags the model broke (`_repair_tags`)
    'li class="file">', '< href="/y">', ' class="file"', '">', "a>", "</li<li>", '<div class="r', ' class="',
]  # fmt: skip

html_ish = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=40).map("".join)
RANDOM = settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@RANDOM
@given(html_ish, st.sampled_from(OPTIONS))
def test_sanitising_random_html_ish_text_twice_changes_nothing(text: str, options: dict[str, bool]) -> None:
    once = sanitize_html(text, **options)
    assert sanitize_html(once, **options) == once


@RANDOM
@given(html_ish)
def test_random_html_ish_text_leaves_only_allowed_markup(text: str) -> None:
    assert violations(sanitize_html(text)) == []


@RANDOM
@given(st.text(alphabet=st.characters(exclude_categories=["Cc", "Cs"], exclude_characters="<>&"), max_size=80))
def test_printable_text_without_markup_characters_passes_through(text: str) -> None:
    assert html.unescape(sanitize_html(text)) == text


def _all_payloads() -> list[str]:
    return [payload for name in PAYLOAD_FILES for payload in load_payloads(name)]


@RANDOM
@given(st.data())
def test_a_payload_cut_off_anywhere_is_safe_and_stable(data: st.DataObject) -> None:
    # A draft frame is a prefix of some text; attack strings cut at a random point are the nastiest prefixes.
    payload = data.draw(st.sampled_from(_all_payloads()))
    cut = payload[: data.draw(st.integers(0, len(payload)))]
    once = sanitize_html(cut, draft=True)
    assert violations(once) == []
    assert sanitize_html(once, draft=True) == once


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (
            '<p><abbr title="std::vector<int>">vec</abbr> ok</p>',
            '<p><abbr title="std::vector&lt;int>">vec</abbr> ok</p>',
        ),
        (
            '<p><span title="press <Enter> to go" class="k">hint</span></p>',
            '<p><span title="press &lt;Enter> to go" class="k">hint</span></p>',
        ),
        ('<p><a href="/X" title="see <b>b</b>">X</a></p>', '<p><a href="/X" title="see &lt;b>b&lt;/b>">X</a></p>'),
        # a value that runs on into the next tag is still closed there
        ('<p><a href="/wiki/BNF</a> and "quoted" text</p>', '<p><a href="/wiki/BNF">BNF</a> and "quoted" text</p>'),
    ],
)
def test_a_closed_value_that_holds_what_reads_as_a_tag_is_kept(written: str, expected: str) -> None:
    assert sanitize_html(written) == expected


@pytest.mark.parametrize("written", ['<p>See <a href="//[x</a> and more</p>', '<a href="http://[::1</a>'])
def test_a_run_on_link_to_no_url_at_all_is_mended_not_raised(written: str) -> None:
    """`urlsplit` refuses `//[x`: the link's text is still its last segment, and the page is written."""
    for draft in (False, True):
        assert "[" in sanitize_html(written, draft=draft) and "href" not in sanitize_html(written, draft=draft)


def test_an_unclosed_run_of_tags_is_read_in_linear_time() -> None:
    """`<a<a<a...` with no `>`: the tag pattern split the run every way before failing, cubic in its length (1,200
    characters took 4 s, on the event loop, for every draft). 20,000 now take a small fraction of a second; the
    bound is loose on purpose (a slow machine), while the old pattern would take hours."""
    text = "<p>" + "<a" * 10_000  # and no `>` after it
    started = time.perf_counter()
    sanitize_html(text)
    assert time.perf_counter() - started < 10.0


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ('<p class="&#104;tmx-indicator">x</p>', "<p>x</p>"),
        ('<ul><li class="ok&#32;&#103;enui-post">x</li></ul>', '<ul><li class="ok">x</li></ul>'),
        ('<a href="&#35;genui-main">skip</a>', '<a href="#gen-genui-main">skip</a>'),
        ('<a href="/wiki/A&amp;B&#35;top">x</a>', '<a href="/wiki/A&amp;B#gen-top">x</a>'),
        ('<p class="a&amp;b">x</p>', '<p class="a&amp;b">x</p>'),
        # a name without its `;` before a letter, a digit or `=` is text in an attribute, as a browser reads it
        ('<a href="/X?a=1&copy=2#top">x</a>', '<a href="/X?a=1&amp;copy=2#gen-top">x</a>'),
        ('<p class="a&notb">x</p>', '<p class="a&amp;notb">x</p>'),
    ],
)
def test_an_entity_does_not_hide_a_reserved_class_or_fragment(written: str, expected: str) -> None:
    """The browser decodes entities in a value: a class or fragment is judged as it reads it, not as written."""
    assert sanitize_html(written) == expected and sanitize_html(expected) == expected


def test_bytes_that_decode_to_no_character_are_left_out() -> None:
    """A byte-level model wrote bytes that form no UTF-8 character, decoded as U+FFFD: a stored Japanese thread read
    `東lt.�i` (a walkthrough of sites in other languages)."""
    assert sanitize_html("<p>東\ufffdlt.\ufffd\ufffdi</p>") == "<p>東lt.i</p>"
    assert sanitize_html("<p>東京\ufffd", draft=True) == "<p>東京</p>"  # a draft cut inside a character


def test_a_page_nested_past_max_depth_keeps_its_text_and_no_deeper_element() -> None:
    """497 nested list items (4 KB) failed with a RecursionError in the serialiser, the page lost (a security
    review); 40 levels, more than any corpus page, are kept as written."""
    from genui.mending import MAX_DEPTH

    deep = "<ul><li>" * 2000 + "x<b>bold</b> tail"
    for draft in (False, True):
        cleaned = sanitize_html(deep, draft=draft)
        assert cleaned.endswith("xbold tail" + "</li></ul>" * (MAX_DEPTH // 2))
        assert cleaned.count("<li>") == MAX_DEPTH // 2 and sanitize_html(cleaned, draft=draft) == cleaned
    kept = "<div>" * (MAX_DEPTH - 2) + "<p>a <b>b</b></p>" + "</div>" * (MAX_DEPTH - 2)
    assert sanitize_html(kept) == kept
