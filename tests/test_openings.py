"""The example sites' openings are how the corpus's pages of their routes start, so the model continues them as it
was trained to (docs/sites.md, "Openings"). The pages come from the corpus builder's own code (lab.corpus), fed a
few hand-written sources instead of Debian's dictionaries and fortunes."""

from __future__ import annotations

import re

import pytest
from fakes import example_sites

from genui.prompts import split_gaps
from genui.runtime import SiteRuntime
from lab.corpus import Builder, Entry, Example, Package, Sources

FISH = Entry(
    title="FISH queue",
    paragraphs=("(By analogy with {FIFO}) first in, still here.", "A joking way of pointing out a backlog."),
    refs=("FIFO",),
    categories=("jargon",),
)
MURPHY = Entry(
    title="Murphy's Law",
    paragraphs=('"If anything can go wrong, it will." Or, as the {FISH queue} shows, it already has.',),
    refs=("FISH queue",),
    categories=("jargon",),
)


@pytest.fixture(scope="module")
def builder() -> Builder:
    sites = {site.name: site for site in example_sites()}
    sources = Sources(
        entries={"fish queue": FISH, "murphy's law": MURPHY},
        fortunes={"linux": ["Linux is only free if your time has no value.", "Use the source, Luke."]},
        packages=[],
        tree={"/home/user": {"notes.txt", "src"}, "/home/user/src": set()},
        names=["user", "hacker"],
    )
    return Builder(sites, seed=0, sources=sources)


def examples(builder: Builder) -> list[Example]:
    return [
        builder.wiki_article(FISH),
        builder.wiki_article(MURPHY),  # an apostrophe, written as it is in the heading the opening pins
        builder.forum_board("linux"),
        builder.os_desktop(),
        builder.os_files("/home/user"),
        builder.os_files("/home"),
        builder.os_files("/"),
        builder.os_text("/home/user/notes.txt", "Use the source, Luke."),
        builder.os_viewer(Package("ed", "1.19-1", "editors", "line editor", "The standard text editor. " * 4)),
        builder.os_settings("display"),
        builder.os_browser(FISH),
    ]


def starts_like(page: str, opening: str) -> bool:
    """Whether ``page`` starts with ``opening``, each of its gaps standing for a line of text without a tag."""
    first, after = split_gaps(opening)
    return re.match("".join([re.escape(first), *("[^<\n]*" + re.escape(text) for text in after)]), page) is not None


def test_every_opening_starts_the_corpus_pages_of_its_route(builder: Builder) -> None:
    checked = []
    for example in examples(builder):
        runtime = SiteRuntime.build(builder.sites[example.site], mount="")
        location = runtime.locate(example.path)
        assert location is not None, example.path
        opening = runtime.prompts.opening(location.route, location.params, location.query)
        assert opening, f"{example.site}{example.path}: its route has no opening"
        assert starts_like(example.html, opening), (example.path, opening, example.html[: len(opening) + 40])
        checked.append(location.route.pattern)
    assert checked == [
        "/{title}",
        "/{title}",
        "/r/{board}",
        "/",
        *["/files/{path:path}"] * 3,
        *["/view/{path:path}"] * 2,
        "/settings/{panel}",
        "/browser",
    ]


def test_a_listing_s_opening_pins_its_way_up_and_a_text_file_s_its_pre(builder: Builder) -> None:
    """What the URL decides is pinned: a listing's ".." link and path and the start of its list; a file other than a
    package's README starts its text in a <pre>."""
    runtime = SiteRuntime.build(builder.sites["os"], mount="")

    def opening(url: str) -> str:
        location = runtime.locate(url)
        assert location is not None, url
        return runtime.prompts.opening(location.route, location.params, location.query)

    assert opening("/files/home/user").endswith(
        '<p class="path"><a href="/files/home">..</a> /home/user</p>\n<ul class="files">'
    )
    assert '<a href="/files">..</a> /home</p>' in opening("/files/home")
    assert '<a href="/files">..</a> /</p>' in opening("/files/")
    assert opening("/view/home/user/notes.txt").endswith('<div class="body">\n<pre class="text">')
    assert opening("/view/usr/share/doc/ed/README").endswith('<div class="body">\n')


def test_the_browser_opening_names_the_page_of_any_address(builder: Builder) -> None:
    runtime = SiteRuntime.build(builder.sites["os"], mount="")
    for url, title in (
        ("/browser?url=example.org/docs/", "docs"),
        ("/browser?url=gopher.example", "gopher.example"),
        # the heading and the tab read "a?b=1#c" (a desktop user's review): an address's query and place are not it
        ("/browser?url=example.org/a%3Fb%3D1", "a"),
        ("/browser?url=genpedia.org/wiki/Lisp%3Faction%3Dedit%23History", "Lisp"),
    ):
        location = runtime.locate(url)
        assert location is not None
        opening = runtime.prompts.opening(location.route, location.params, location.query)
        assert f'<div class="titlebar">Browser — {title}</div>' in opening and f"<h1>{title}</h1>" in opening


def test_a_settings_panel_s_opening_names_its_settings_and_leaves_their_values_to_the_model(builder: Builder) -> None:
    runtime = SiteRuntime.build(builder.sites["os"], mount="")
    for panel, settings in builder.SETTINGS.items():
        location = runtime.locate(f"/settings/{panel}")
        assert location is not None
        opening = runtime.prompts.opening(location.route, location.params, location.query)
        first, after = split_gaps(opening)
        assert len(after) == len(settings), panel  # one gap a setting
        for _ in range(3):  # the corpus draws each value at random
            assert starts_like(builder.os_settings(panel).html, opening), panel
    unknown = runtime.locate("/settings/bluetooth")  # a panel of a visitor's making: the model writes it all
    assert unknown is not None
    assert split_gaps(runtime.prompts.opening(unknown.route, unknown.params, unknown.query))[1] == ()
