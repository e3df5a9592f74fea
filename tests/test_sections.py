from __future__ import annotations

from fakes import SITES_DIR, wiki_writer

from genui.runtime import SiteRuntime
from genui.sections import section, sections
from genui.sites import load_site

THREAD = (
    '<div class="thread"><h1>T</h1><div class="post"><p class="meta">m</p><p>x<br>y</p></div>'
    '<div class="replies"><div class="reply"><p>r1</p></div><div class="reply"><p>r2</p></div></div></div>'
)


def test_a_wiki_articles_sections_are_its_blocks_in_order_with_exact_byte_ranges() -> None:
    runtime = SiteRuntime.build(load_site(SITES_DIR / "wiki"), "/wiki")
    page = runtime.render(wiki_writer("<title>Hash table</title>", 0))
    found = sections(page)
    assert [(part.number, part.tag) for part in found] == [(1, "h1"), (2, "p"), (3, "h2"), (4, "ul")]
    assert [page[part.start : part.end] for part in found][:3] == [
        "<h1>Hash table</h1>",
        "<p>Hash table is a topic in computing, written with seed 0.</p>",
        "<h2>See also</h2>",
    ]
    assert page[found[3].start : found[3].end].startswith("<ul><li><a href=") and found[3].snippet.startswith("Hash")


def test_a_reply_or_a_post_is_one_section_and_its_container_is_none() -> None:
    found = sections(THREAD)
    assert [THREAD[part.start : part.end] for part in found] == [
        "<h1>T</h1>",
        '<div class="post"><p class="meta">m</p><p>x<br>y</p></div>',
        '<div class="reply"><p>r1</p></div>',
        '<div class="reply"><p>r2</p></div>',
    ]


def test_genuis_own_markup_in_a_page_is_never_a_section() -> None:
    page = THREAD + '<ol class="genui-postlist genui-inline"><li class="genui-post"><p>hi</p></li></ol><p>reply</p>'
    assert [part.snippet for part in sections(page)] == ["T", "m x y", "r1", "r2", "reply"]


def test_sections_span_lines_and_a_missing_number_is_none() -> None:
    page = "<article>\n<h1>A\nB</h1>\n\n<p>one</p>\n</article>\n<p>two</p>"
    assert [page[part.start : part.end] for part in sections(page)] == ["<h1>A\nB</h1>", "<p>one</p>", "<p>two</p>"]
    assert section(page, 3) is not None and section(page, 4) is None and section(page, 0) is None


def test_a_long_sections_snippet_is_cut() -> None:
    (part,) = sections("<p>" + "word " * 40 + "</p>")
    assert len(part.snippet) == 60 and part.snippet.endswith("…")


def test_a_div_that_holds_a_heading_is_a_container_of_sections() -> None:
    board = (
        '<div class="board">\n<h1>r/linux</h1>\n<ul class="threads"><li><a href="/r/linux/a">A</a></li></ul>\n</div>'
    )
    assert [board[part.start : part.end] for part in sections(board)] == [
        "<h1>r/linux</h1>",
        '<ul class="threads"><li><a href="/r/linux/a">A</a></li></ul>',
    ]


def test_a_page_nested_thousands_deep_has_its_sections_found() -> None:
    """The picker read a page by recursion, one call a level: a stored page of a thousand nested `<div>` (the
    sanitiser keeps 3,000 levels) made every view of it a 500 (found by review)."""
    deep = "<div>" * 3000 + "<p>deep</p>" + "</div>" * 3000 + "<p>after</p>"
    found = sections(deep)
    assert [(s.tag, s.snippet) for s in found] == [("div", "deep"), ("p", "after")]
    assert deep[found[0].start : found[0].end] == "<div><p>deep</p></div>"


def test_a_pages_sections_are_kept_and_each_caller_gets_its_own_list() -> None:
    """The toolbar parsed a page at every view (27 ms for a thread of 3,000 replies, a load test); kept, a caller's
    list is still its own to change."""
    page = "<h1>T</h1><p>One.</p><p>Two.</p>"
    first = sections(page)
    first.pop()
    assert [part.number for part in sections(page)] == [1, 2, 3]
    assert sections(page) is not sections(page)
