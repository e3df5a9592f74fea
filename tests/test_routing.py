from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genui.routing import (
    MAX_PATH,
    MAX_QUERY_VALUE,
    BadRequest,
    SiteRouter,
    guessed_title,
    normalise_path,
    recased,
)
from genui.sites import Route, Site, SiteConfigError, load_site

SITES = Path(__file__).resolve().parent.parent / "sites"


@pytest.fixture(scope="module")
def os_router() -> SiteRouter:
    return SiteRouter(load_site(SITES / "os"))


@pytest.fixture(scope="module")
def wiki_router() -> SiteRouter:
    return SiteRouter(load_site(SITES / "wiki"))


@pytest.fixture(scope="module")
def forum_router() -> SiteRouter:
    return SiteRouter(load_site(SITES / "forum"))


def test_literal_and_parameter_patterns_match(wiki_router: SiteRouter) -> None:
    home = wiki_router.resolve("/")
    article = wiki_router.resolve("/Hash_table")
    assert home is not None and home.route.template == "home.j2" and home.params == {}
    assert article is not None and article.route.template == "article.j2" and not article.aliased
    assert article.params == {"title": "Hash_table"} and article.path == "/Hash_table"


def test_a_literal_pattern_declared_first_wins_over_a_parameter(wiki_router: SiteRouter) -> None:
    search = wiki_router.resolve("/search")
    assert search is not None and search.route.template == "search.j2"


def test_plain_parameter_does_not_span_slashes(wiki_router: SiteRouter) -> None:
    assert wiki_router.resolve("/a/b") is None and wiki_router.resolve("/wiki/a/b") is None


def test_an_alias_reaches_the_page_at_its_routes_own_path(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/wiki/Hash_table")
    assert location is not None and location.aliased and location.route.template == "article.j2"
    assert location.path == "/Hash_table" and location.params == {"title": "Hash_table"}


@pytest.mark.parametrize(
    ("path", "page"),
    [
        ("/Hash table", "/Hash_table"),
        ("/wiki/Hash table", "/Hash_table"),
        ("/Hash   table", "/Hash_table"),
        ("/Hash\u3000table", "/Hash_table"),  # a Japanese keyboard's ideographic space
        ("/Hash\u00a0\u202ftable", "/Hash_table"),  # no-break spaces, as French puts before "?"
    ],
)
def test_a_title_written_with_spaces_is_the_page_with_underscores(
    wiki_router: SiteRouter, path: str, page: str
) -> None:
    """The wiki's articles declare spaces = "_": one page, one URL, however a link or a visitor writes the title."""
    location = wiki_router.resolve(path)
    assert location is not None and location.aliased and location.path == page
    assert location.params == {"title": "Hash_table"}
    # a query key the route does not take is no part of the page: left out of the link
    assert wiki_router.link_target(path + "?x=1#Uses") == page + "#Uses"
    assert wiki_router.locate(quote(path)) == location  # as a request's URL has it


@pytest.mark.parametrize(
    ("path", "page"),
    [("/hash_table", "/Hash_table"), ("/wiki/hash table", "/Hash_table"), ("/éCOLE", "/ÉCOLE"), ("/ßtraße", None)],
)
def test_a_title_written_with_a_small_first_letter_is_the_page_with_a_capital(
    wiki_router: SiteRouter, path: str, page: str | None
) -> None:
    """The wiki's articles declare case = { title = "upper-first" }, as MediaWiki's: the shipped model writes a third
    of its article links in lower case, and each would have been an article of its own beside the capitalised one."""
    location = wiki_router.resolve(path)
    assert location is not None and location.path == (page or path) and location.aliased == (page is not None)
    if page is not None:
        assert wiki_router.link_target(path + "#Uses") == page + "#Uses"
        assert wiki_router.resolve(page) == replace(location, aliased=False)  # the page's own URL moves no more


def test_a_link_the_model_writes_keeps_only_the_query_its_route_takes() -> None:
    """A link's `v=2` (a version: "No such version" where there was none) and a key no route takes (`gold=5`, which an
    htmx click left in the address bar) are left out; the keys the route takes stay (a hackathon team's game)."""
    wiki = SiteRouter(load_site(SITES / "wiki"))
    assert wiki.link_target("/search?q=lisp&v=2") == "/search?q=lisp"
    assert wiki.link_target("/search?gold=5&q=lisp#top") == "/search?q=lisp#top"
    assert wiki.link_target("/search?q=lisp") == "/search?q=lisp"  # as written where nothing is left out


def test_letter_case_follows_the_sites_language_where_it_has_rules_of_its_own() -> None:
    """A Turkish wiki's `/istanbul` was `/Istanbul`, a page beside `/İstanbul`, and `ǆungla`'s capital was the
    all-capital `Ǆ` (a review of sites in other languages)."""
    wiki = load_site(SITES / "wiki")
    turkish, english = SiteRouter(replace(wiki, lang="tr")), SiteRouter(wiki)
    assert turkish.resolve("/istanbul").path == "/İstanbul"  # type: ignore[union-attr]
    assert english.resolve("/istanbul").path == "/Istanbul"  # type: ignore[union-attr]
    assert english.resolve("/ǆungla").path == "/ǅungla"  # type: ignore[union-attr]
    assert recased("IĞDIR", "lower", "tr") == "ığdır" and recased("İzmir", "lower", "az") == "izmir"
    assert recased("IĞDIR", "lower", "en") == "iğdir"
    # a page_title's {panel:upper-first} too: the Turkish desktop's settings panel `internet` was "Settings: Internet"
    desktop = load_site(SITES / "os")
    for lang, title in (("tr", "Settings: İnternet"), ("en", "Settings: Internet")):
        location = SiteRouter(replace(desktop, lang=lang)).resolve("/settings/internet")
        assert location is not None and guessed_title(location, lang=lang) == title


@pytest.mark.parametrize(
    ("router", "path", "page"),
    [
        ("forum", "/r/Linux", "/r/linux"),
        ("forum", "/r/LINUX/Kernel_News", "/r/linux/Kernel_News"),  # the thread's title keeps its capitals
        ("forum", "/r/linux/kernel_news", "/r/linux/kernel_news"),
        ("os", "/settings/Display", "/settings/display"),
        ("os", "/files/home/user/Documents", "/files/home/user/Documents"),  # file names are case-sensitive
    ],
)
def test_a_parameter_whose_route_says_lower_case_is_read_so(
    request: pytest.FixtureRequest, router: str, path: str, page: str
) -> None:
    location = request.getfixturevalue(f"{router}_router").resolve(path)
    assert location is not None and location.path == page and location.aliased == (page != path)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20))
@settings(max_examples=300)
def test_a_recased_page_is_its_own_url(title: str) -> None:
    """Whatever a title's letters, the page it leads to is at its own URL: resolving that again moves it nowhere."""
    router = SiteRouter(load_site(SITES / "wiki"))
    try:
        location = router.resolve("/" + title)
    except BadRequest:
        return
    if location is None or location.route.template != "article.j2":
        return
    again = router.resolve(location.path)
    assert again is not None and again.path == location.path and not again.aliased


def test_a_route_without_spaces_keeps_them(os_router: SiteRouter) -> None:
    location = os_router.resolve("/files/home/user/My Documents")
    assert location is not None and not location.aliased and location.path == "/files/home/user/My Documents"


def test_an_alias_never_shadows_a_pattern(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/Wiki")  # the article called "Wiki", not the alias /wiki/{title}
    assert location is not None and not location.aliased and location.path == "/Wiki"


@pytest.mark.parametrize(
    ("href", "target"),
    [
        ("/Lisp", "/Lisp"),
        ("/wiki/Lisp", "/Lisp"),
        ("/wiki/Lisp#History", "/Lisp#History"),
        ("/wiki/What_is_it%3F", "/What_is_it%3F"),  # the title's ? stays in the path, encoded
        ("/search?q=lisp", "/search?q=lisp"),
        ("/wiki/a/b", None),
        ("/wiki/wiki/Lisp", "/Lisp"),  # the default model writes a segment twice; once, it is an article
        ("/wiki/wiki/Lisp/Lisp", "/Lisp"),
        ("/Lisp/Lisp", "/Lisp"),
        ("/wiki/Lisp/Unix", None),  # nothing written twice
        ("/wiki//wiki/Lisp", "/Lisp"),  # an empty segment is no segment
        ("https://example.com/wiki/Lisp", None),
        ("//[", None),
    ],
)
def test_a_link_target_is_the_pages_own_path(wiki_router: SiteRouter, href: str, target: str | None) -> None:
    assert wiki_router.link_target(href) == target
    assert wiki_router.leads_to_page(href) == (target is not None)


@pytest.mark.parametrize(
    ("url", "path", "title"),
    [
        ("/What_is_V.11%3F", "/What_is_V.11?", "What_is_V.11?"),  # a forum thread's title that asks
        ("/100%25_pure", "/100%_pure", "100%_pure"),
        ("/C%23", "/C#", "C#"),
        ("/Hash:_a_table", "/Hash:_a_table", "Hash:_a_table"),
    ],
)
def test_a_url_s_path_is_decoded_as_starlette_decodes_a_request_s(
    wiki_router: SiteRouter, url: str, path: str, title: str
) -> None:
    """A link or a stream names a page by its URL; the view gets the request's decoded path. Both must be the same
    page: the ? of /What_is_V.11%3F was once read as the start of a query, so the live stream wrote What_is_V.11."""
    located, requested = wiki_router.locate(url), wiki_router.resolve(path)
    assert located is not None and requested is not None
    assert located.path == requested.path == path and located.params == {"title": title}
    assert wiki_router.locate(located.url) == located  # the page's URL leads back to it
    assert located.url == url  # only what would end the path or start an escape is encoded


def test_path_parameter_spans_slashes(os_router: SiteRouter) -> None:
    location = os_router.resolve("/files/home/ada/notes")
    assert location is not None and location.params == {"path": "home/ada/notes"}


def test_repeated_and_trailing_slashes_are_canonicalised(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("//Hash_table/")
    assert location is not None and location.path == "/Hash_table"
    assert location.aliased  # a request for it is redirected there: one URL per page (a reader's bookmark held two)
    assert not wiki_router.resolve("/Hash_table").aliased  # type: ignore[union-attr]


def test_trailing_slash_still_reaches_an_empty_path_parameter(os_router: SiteRouter) -> None:
    location = os_router.resolve("/files/")
    assert location is not None and location.path == "/files/" and location.params == {"path": ""}
    assert not location.aliased
    without = os_router.resolve("/files")  # the same folder, whose own address has the slash
    assert without is not None and without.path == "/files/" and without.aliased
    deeper = os_router.resolve("/files//home/")
    assert deeper is not None and deeper.path == "/files/home" and deeper.aliased


def test_unknown_path_matches_nothing(os_router: SiteRouter) -> None:
    assert os_router.resolve("/nowhere") is None


def test_a_title_with_spaces_at_its_ends_is_the_page_without_them_and_one_that_shows_nothing_is_none(
    wiki_router: SiteRouter, os_router: SiteRouter
) -> None:
    """The model linked `/wiki/Regular_`: a second article "Regular " beside "Regular". `/recipe/_` and a zero-width
    space were pages with no title (a visitor's and a hackathon team's walkthroughs)."""
    for path in ("/Regular_", "/wiki/_Regular", "/ Regular "):
        location = wiki_router.resolve(path)
        assert location is not None and location.path == "/Regular" and location.aliased, path
    for path in ("/_", "/__", "/wiki/_", "/\u200b", "/\u200b_"):
        assert wiki_router.resolve(path) is None, path
    assert wiki_router.link_target("/wiki/Regular_") == "/Regular"
    folder = os_router.resolve("/files/")  # an empty path is the root folder, not nothing
    assert folder is not None and folder.params == {"path": ""}
    assert os_router.resolve("/files/ ") is None


@pytest.mark.parametrize(
    "path", ["/wiki/..", "/wiki/./x", "/wiki/a\x00b", "/wiki/a\\b", "/" + "a" * MAX_PATH, "/wiki/\ufffd"]
)
def test_malformed_paths_are_bad_requests(wiki_router: SiteRouter, path: str) -> None:
    with pytest.raises(BadRequest):
        wiki_router.resolve(path)


def test_query_keeps_declared_keys_only_first_value_whitespace_collapsed(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/search", [("utm", "x"), ("q", "  hash \n tables "), ("q", "second")])
    assert location is not None and location.query == {"q": "hash tables"}
    assert location.url == "/search?q=hash+tables"


def test_a_query_value_loses_its_bidi_overrides_and_keeps_its_marks(wiki_router: SiteRouter) -> None:
    """`?q=<U+202E>abc` titled the page, and the browser's tab, backwards (a security review)."""
    location = wiki_router.resolve("/search", [("q", "\u202eabc \u2067def\u2069 \u200fשלום")])
    assert location is not None and location.query == {"q": "abc def \u200fשלום"}
    assert wiki_router.resolve("/search", [("q", "\u202e\u202c")]).query == {}  # type: ignore[union-attr]


def test_empty_query_value_is_dropped(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/search", [("q", "   ")])
    assert location is not None and location.query == {} and location.url == "/search"


def test_query_value_too_long_is_bad_request(wiki_router: SiteRouter) -> None:
    with pytest.raises(BadRequest):
        wiki_router.resolve("/search", [("q", "x" * (MAX_QUERY_VALUE + 1))])


def test_a_path_with_a_c1_or_bidi_control_is_refused(wiki_router: SiteRouter) -> None:
    """A thread's path of C1 controls (a terminal's OSC and CSI) and a right-to-left override was stored, and printed
    raw by genui posts (a security review). A right-to-left title still routes."""
    for control in ("\x9b2J", "\x9d0;pwned\x9c", "\u202eevil", "\u2066x\u2069", "a\u200f\u202eb"):
        with pytest.raises(BadRequest, match="control character, a bidi control"):
            wiki_router.resolve(f"/Hi{control}")
    arabic = wiki_router.resolve("/\u0628\u064a\u062a")
    assert arabic is not None and arabic.params == {"title": "\u0628\u064a\u062a"}
    # A Hebrew title copied with the right-to-left mark at its end, which shows nothing, was a 400: it is the page
    # without it, as a title written another way is (a review of sites in other languages)
    for marked in (
        "/\u05e9\u05dc\u05d5\u05dd\u200f",
        "/\u200e\u05e9\u05dc\u05d5\u05dd",
        "/\u05e9\u05dc\u061c\u05d5\u05dd",
    ):
        hebrew = wiki_router.resolve(marked)
        assert hebrew is not None and hebrew.aliased and hebrew.path == "/\u05e9\u05dc\u05d5\u05dd", marked


def test_a_backslash_in_a_query_value_is_text_and_a_control_character_is_refused(
    wiki_router: SiteRouter, os_router: SiteRouter
) -> None:
    search = wiki_router.resolve("/search", [("q", "C:\\Users")])
    terminal = os_router.resolve("/terminal", [("cmd", "grep \\.py")])
    assert search is not None and search.query == {"q": "C:\\Users"}
    assert terminal is not None and terminal.query == {"cmd": "grep \\.py"}
    with pytest.raises(BadRequest, match="control character"):
        wiki_router.resolve("/search", [("q", "a\x00b")])
    with pytest.raises(BadRequest, match="control character"):
        wiki_router.resolve("/search", [("q", "a\x9bb")])  # C1 too
    spaced = wiki_router.resolve("/search", [("q", "a\x85b")])  # but NEL, which is a line break: a space
    assert spaced is not None and spaced.query == {"q": "a b"}


def test_an_aliases_redirect_never_leaves_the_site_nor_names_a_dot_segment() -> None:
    site = load_site(SITES / "os")
    moved = Route(pattern="/{p:path}/edit", template="home.j2", aliases=("/old{p:path}",))
    router = SiteRouter(replace(site, routes=(site.routes[0], moved), navigation=()))
    found = router.resolve("/old/evil.example/login")  # the parameter takes the "/" the alias's text lacks
    assert found is not None and found.aliased and found.path == "/evil.example/login/edit"  # not //evil.example
    dotted = replace(site.routes[1], spaces=".")
    router = SiteRouter(replace(site, routes=(site.routes[0], dotted), navigation=()))
    with pytest.raises(BadRequest, match="dot segment"):  # a space made "." would be /files/a/./b
        router.resolve("/files/a/ /b")


def test_a_moved_path_is_the_page_of_the_route_that_serves_where_it_moves_to() -> None:
    """`/About` lower-cased by `/{page}`'s case is `/about`, which the literal route declared first serves: the page
    is that route's, or a stream or read-ahead would write `/{page}`'s template under a key never looked up."""
    site = load_site(SITES / "os")
    about = Route(pattern="/about", template="home.j2")
    page = Route(pattern="/{page}", template="home.j2", case=(("page", "lower"),))
    router = SiteRouter(replace(site, routes=(about, page), navigation=()))
    found = router.resolve("/About")
    assert found is not None and found.route is about and found.path == "/about" and found.aliased
    other = router.resolve("/Contact")
    assert other is not None and other.route is page and other.path == "/contact" and other.aliased


def test_query_string_is_sorted_so_key_order_does_not_matter() -> None:
    site = load_site(SITES / "os")
    route = replace(site.routes[3], query=("b", "a"))
    router = SiteRouter(replace(site, routes=(route,), navigation=()))
    one = router.resolve("/terminal", [("a", "1"), ("b", "2")])
    two = router.resolve("/terminal", [("b", "2"), ("a", "1")])
    assert one is not None and two is not None and one.query_string == two.query_string == "a=1&b=2"


def test_a_route_declaring_the_version_key_is_a_config_error() -> None:
    site = load_site(SITES / "wiki")
    bad = replace(site, routes=(Route(pattern="/search", template="search.j2", query=("v",)),))
    with pytest.raises(SiteConfigError) as caught:
        SiteRouter(bad)
    assert caught.value.key == "routes[0].query" and "site.toml" in caught.value.file


def test_a_pattern_repeating_a_parameter_is_a_config_error() -> None:
    site = load_site(SITES / "wiki")
    bad: Site = replace(site, routes=(Route(pattern="/{a}/{a}", template="article.j2"),))
    with pytest.raises(SiteConfigError) as caught:
        SiteRouter(bad)
    assert caught.value.key == "routes[0].pattern" and caught.value.fix


@pytest.mark.parametrize(
    ("patterns", "shadowed", "by"),
    [
        (("/", "/{title}", "/search"), 2, 1),  # the wiki's two routes the other way round
        (("/files/{path:path}", "/files/{folder}/{name}"), 1, 0),
        (("/r/{board}", "/r/{name}"), 1, 0),  # the same shape, another name
        (("/{title}", "/{title}"), 1, 0),
    ],
)
def test_a_route_an_earlier_one_takes_every_url_of_is_a_config_error(
    patterns: tuple[str, ...], shadowed: int, by: int
) -> None:
    site = load_site(SITES / "wiki")
    bad = replace(site, routes=tuple(Route(pattern=p, template="article.j2") for p in patterns), navigation=())
    with pytest.raises(SiteConfigError) as caught:
        SiteRouter(bad)
    assert caught.value.key == f"routes[{shadowed}].pattern" and f"routes[{by}]" in caught.value.problem
    assert f"declare it before routes[{by}]" in caught.value.fix


def test_an_alias_a_route_takes_every_url_of_is_a_config_error() -> None:
    """`/{a}/{b}` added after the wiki's articles took `/wiki/Hash_table`, the form the model links them by, with no
    word of it (a site developer's review)."""
    site = load_site(SITES / "wiki")
    added = Route(pattern="/{a}/{b}", template="article.j2")
    with pytest.raises(SiteConfigError) as caught:
        SiteRouter(replace(site, routes=(*site.routes, added)))
    (articles,) = [n for n, route in enumerate(site.routes) if route.aliases == ("/wiki/{title}",)]
    assert caught.value.key == f"routes[{articles}].aliases[0]"
    assert f"routes[{len(site.routes)}] ('/{{a}}/{{b}}') takes every URL of it" in caught.value.problem
    SiteRouter(replace(site, routes=(*site.routes, Route(pattern="/x/{a}/{b}", template="article.j2"))))


@pytest.mark.parametrize(
    "patterns",
    [
        ("/search", "/{title}"),
        ("/r/{n:int}", "/r/{board}"),  # numbers go to the first, the rest to the second: a choice
        ("/files/{folder}/{name}", "/files/{path:path}"),
        ("/{title}", "/r/{board}"),
    ],
)
def test_routes_that_each_serve_some_url_load(patterns: tuple[str, ...]) -> None:
    site = load_site(SITES / "wiki")
    SiteRouter(replace(site, routes=tuple(Route(pattern=p, template="article.j2") for p in patterns), navigation=()))


@settings(deadline=None)  # a stall of a shared machine is no failure
@given(st.text(max_size=80))
def test_any_path_either_normalises_idempotently_or_is_a_bad_request(path: str) -> None:
    try:
        canonical = normalise_path(path)
    except BadRequest:
        return
    assert canonical.startswith("/") and normalise_path(canonical) == canonical
    assert "//" not in canonical and (canonical == "/" or not canonical.endswith("/"))


@pytest.mark.parametrize(
    ("href", "text", "target"),
    [
        # The default model's board (session 46): a listing's title and the thread its href names differ.
        ("/r/linux/Cancer_is__iscomplete_complete", "Cancer is complete", "/r/linux/Cancer_is_complete"),
        ("/r/linux/What_is_V11", "  What   is V.11?\n", "/r/linux/What_is_V.11%3F"),
        ("/r/linux/ATT_3#top", "AT&T <3", "/r/linux/AT&T_<3#top"),  # the text as a reader sees it
        ("/r/linux/Kernel_news", "Kernel news", "/r/linux/Kernel_news"),  # the same page: the href as it was
        ("/r/linux/Kernel news", "Kernel news", "/r/linux/Kernel_news"),
        ("/r/linux/Kernel_news", "", "/r/linux/Kernel_news"),
        ("/r/linux/Kernel_news", "r/linux/Kernel news", "/r/linux/Kernel_news"),  # a / names no thread
        ("/r/linux/Kernel_news", "x" * 201, "/r/linux/Kernel_news"),  # no title is that long
        ("/r/linux", "Kernel news", "/r/linux"),  # a board's link: its route says nothing of its text
        # Text that is no variant of the href's name: the parser's copy of a link left open, carried into the next
        # list item, or a link's text that is no title.
        ("/r/linux/A", "by bob · 3 points", "/r/linux/A"),
        ("/r/linux/Kernel_news", "Reply", "/r/linux/Kernel_news"),
        ("/nowhere/x", "Kernel news", None),
        # A board written twice (the default model's first clicks, session 47): the thread its text names.
        ("/r/news/news/The_color_Parad", "The color Parad", "/r/news/The_color_Parad"),
        ("/r/computers/computers/Was_it", "Was it?", "/r/computers/Was_it%3F"),
        ("/r/linux/linux", "Kernel news", "/r/linux/linux"),  # a thread called linux: served as it is
        ("/r/linux/linux/linux", "linux", "/r/linux"),  # every repeat goes: the board
        # A `/` too many in the thread's name (the default model's first clicks, session 47): the page its text names,
        # on the board the href names first; nothing where the text names no variant of it.
        ("/r/work/science/Science_is_a_cant", "Science is a can't", "/r/work/Science_is_a_can't"),
        (
            "/r/computers/Was_emptiness_was_/Was_old",
            "Clearlyemptiness was old",
            "/r/computers/Clearlyemptiness_was_old",
        ),
        ("/r/parbian/Today_is_a_aa_/a?x=1#top", "Today is aa aa", "/r/parbian/Today_is_aa_aa?x=1#top"),
        ("/r/linux/Kernel/news", "Reply", None),
        ("/r/linux/Kernel/news", "", None),
        ("/r/linux/Kernel/news", "Kernel/news", None),  # the text names no page either
    ],
)
def test_a_link_to_a_thread_leads_to_the_thread_its_text_names(
    forum_router: SiteRouter, href: str, text: str, target: str | None
) -> None:
    """The forum's threads declare link_text = "thread": a listing shows a thread's title as the link's text, so
    the link opens the thread of that title, whatever the model wrote in its href."""
    assert forum_router.link_target(href, text) == target


def test_a_route_without_link_text_ignores_a_links_text(wiki_router: SiteRouter) -> None:
    assert wiki_router.link_target("/Lisp", "the language") == "/Lisp"
    assert wiki_router.link_target("/wiki/Lisp", "the language") == "/Lisp"


@pytest.mark.parametrize(
    ("href", "title"),
    [
        ("/r/linux/What_is_V.11%3F", "What is V.11?"),
        ("/r/linux/Kernel_news#top", "Kernel news"),
        ("/r/linux", "linux"),
        ("/", ""),  # the front page: nothing to guess from
        ("/nowhere/x/y/z", ""),
        ("/r/linux/..", ""),  # no page at all
    ],
)
def test_a_links_title_is_the_title_of_the_page_it_leads_to(forum_router: SiteRouter, href: str, title: str) -> None:
    assert forum_router.link_title(href) == title


@pytest.mark.parametrize(
    ("href", "target"),
    [
        ("/wiki/Lisp", "/browser?url=genpedia.org%2Fwiki%2FLisp"),  # the page's own host
        ("Lisp", "/browser?url=genpedia.org%2Fwiki%2FLisp"),  # relative to the page's own address
        ("../Lisp", "/browser?url=genpedia.org%2FLisp"),
        ("https://example.org/a?b=1#top", "/browser?url=example.org%2Fa%3Fb%3D1"),  # another host; no fragment
        ("//example.org/a", "/browser?url=example.org%2Fa"),
        ("/files/home/user", "/browser?url=genpedia.org%2Ffiles%2Fhome%2Fuser"),  # the web site's, not the desktop's
        ("/", "/browser?url=genpedia.org%2F"),  # the web site's main page
        ("mailto:ann@example.org", None),  # no web address: the link keeps its text only
        ("javascript:alert(1)", None),
        ("http://[::1", None),
    ],
)
def test_a_link_no_route_serves_opens_on_a_route_that_follows_links(
    os_router: SiteRouter, href: str, target: str | None
) -> None:
    """The desktop's browser declares follow_links = "url": a web page's links stay in the browser."""
    on = os_router.locate("/browser?url=genpedia.org/wiki/Unix")
    assert on is not None and on.route.follow_links == "url"
    assert os_router.link_target(href, "", on=on) == target
    if target is not None and target.startswith("/browser"):
        followed = os_router.locate(target)
        assert followed is not None and followed.url == target  # the page's canonical URL: one cache entry


def test_a_page_address_with_a_port_is_a_host_not_a_scheme(os_router: SiteRouter) -> None:
    on = os_router.locate("/browser?url=localhost:8080/docs/index.html")
    assert on is not None
    assert os_router.link_target("intro.html", "", on=on) == "/browser?url=localhost%3A8080%2Fdocs%2Fintro.html"


def test_links_are_followed_only_on_a_route_that_says_so(os_router: SiteRouter) -> None:
    files = os_router.locate("/files/home/user")
    blank = os_router.locate("/browser")  # no address of its own: a path has no host to resolve against
    assert files is not None and blank is not None
    assert os_router.link_target("/wiki/Lisp", "", on=files) is None
    assert os_router.link_target("/wiki/Lisp") is None
    assert os_router.link_target("/wiki/Lisp", "", on=blank) is None
    assert os_router.link_target("https://example.org/", "", on=blank) == "/browser?url=example.org%2F"


def test_a_query_with_a_combining_accent_is_the_query_composed(wiki_router: SiteRouter) -> None:
    decomposed = wiki_router.resolve("/search", [("q", "cafe\u0301")])
    composed = wiki_router.resolve("/search", [("q", "caf\u00e9")])
    assert decomposed is not None and composed is not None and decomposed.query == composed.query == {"q": "café"}
