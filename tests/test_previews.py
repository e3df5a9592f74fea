from __future__ import annotations

import html
import re

from fakes import ClientFactory, FakeEngine, example_sites, visit, wiki_writer

from genui.previews import DESCRIPTION, description

META = re.compile(r'<meta (?:name|property)="([^"]+)" content="([^"]*)">')


def cards(text: str) -> dict[str, str]:
    """A document's description and Open Graph tags, as a link's fetcher reads them."""
    return {
        name: html.unescape(content) for name, content in META.findall(text) if name not in ("htmx-config", "viewport")
    }


def test_a_pages_description_is_its_first_paragraph_of_text() -> None:
    page = '<article class="wiki">\n<h1>Lisp</h1>\n<p>Lisp is a <a href="/LISP">family</a><br>of languages.</p>'
    page += "<p>More.</p>"
    assert description(page) == "Lisp is a family of languages."


def test_a_paragraph_with_a_class_is_the_sites_furniture_and_genuis_own_markup_is_no_page_text() -> None:
    thread = (
        '<div class="thread"><h1>Disk full</h1><ol class="genui-postlist"><li><p>a reader</p></li></ol>'
        '<div class="post"><p class="meta">posted by ann · 3 points</p><p></p><p>My disk is full again.</p></div>'
    )
    assert description(thread) == "My disk is full again."
    assert description('<div class="board"><h1>r/linux</h1><ul><li>a thread</li></ul></div>') == ""


def test_a_long_paragraph_is_cut_at_a_word_and_loses_its_bidi_overrides() -> None:
    text = "word " * 100
    cut = description(f"<p>{text}</p>")
    assert len(cut) <= DESCRIPTION and cut.endswith("word…") and "  " not in cut
    assert description("<p>Invoice\u202efdp.exe, sent.</p>") == "Invoicefdp.exe, sent."
    assert len(description("<p>" + "x" * 500 + "</p>")) == DESCRIPTION


def test_a_thread_of_thousands_of_replies_is_read_only_to_its_first_paragraph() -> None:
    page = (
        "<div><h1>T</h1><p>First.</p>" + "<p>reply</p>" * 50_000 + "<p"
    )  # the rest unread: a broken tail is no matter
    assert description(page) == "First."


def test_a_shared_address_shows_the_pages_title_and_first_paragraph(client_factory: ClientFactory) -> None:
    client = client_factory(example_sites(), engine=FakeEngine(wiki_writer))
    tags = cards(visit(client, "/wiki/Lisp").text)
    assert tags == {
        "description": "Lisp is a topic in computing, written with seed 0.",
        "og:type": "website",
        "og:site_name": "Genpedia",
        "og:title": "Lisp",
        "og:description": "Lisp is a topic in computing, written with seed 0.",
        "twitter:card": "summary",
    }


def test_an_address_not_written_yet_and_a_page_without_text_are_described_by_the_sites_brief(
    client_factory: ClientFactory,
) -> None:
    """A chat's fetcher is often the first to ask for an address: it gets the shell while the page is written."""
    sites = example_sites()
    brief = next(site.brief for site in sites if site.name == "forum")
    client = client_factory(
        sites, engine=FakeEngine(lambda prompt, seed: '<div class="board"><ul><li>x</li></ul></div>')
    )
    writing = client.get("/forum/r/linux")
    assert "ws-connect" in writing.text  # the page being written
    assert (
        cards(writing.text)["description"] == brief and cards(writing.text)["og:title"] == "linux"
    )  # (its tab's title too, till it lands)
    assert cards(visit(client, "/forum/r/linux").text)["og:description"] == brief  # written: no paragraph of text


def test_a_description_is_escaped_in_its_attribute(client_factory: ClientFactory) -> None:
    engine = FakeEngine(lambda prompt, seed: '<p>"Quoted" &lt;b&gt; &amp; more</p>')
    text = visit(client_factory(example_sites(), engine=engine), "/wiki/Quotes").text
    assert '<meta name="description" content="&#34;Quoted&#34; &lt;b&gt; &amp; more">' in text


def test_the_index_and_error_pages_have_no_card(client_factory: ClientFactory) -> None:
    client = client_factory(example_sites())
    assert cards(client.get("/").text) == {}
    assert cards(client.get("/wiki/_genui/nothing").text) == {}
