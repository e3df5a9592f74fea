from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from genui.routing import MAX_PATH, MAX_QUERY_VALUE, BadRequest, SiteRouter, normalise_path
from genui.sites import Route, Site, SiteConfigError, load_site

SITES = Path(__file__).resolve().parent.parent / "sites"


@pytest.fixture(scope="module")
def os_router() -> SiteRouter:
    return SiteRouter(load_site(SITES / "os"))


@pytest.fixture(scope="module")
def wiki_router() -> SiteRouter:
    return SiteRouter(load_site(SITES / "wiki"))


def test_literal_and_parameter_patterns_match(wiki_router: SiteRouter) -> None:
    home = wiki_router.resolve("/")
    article = wiki_router.resolve("/wiki/Hash_table")
    assert home is not None and home.route.template == "home.j2" and home.params == {}
    assert article is not None and article.route.template == "article.j2"
    assert article.params == {"title": "Hash_table"}


def test_plain_parameter_does_not_span_slashes(wiki_router: SiteRouter) -> None:
    assert wiki_router.resolve("/wiki/a/b") is None


def test_path_parameter_spans_slashes(os_router: SiteRouter) -> None:
    location = os_router.resolve("/files/home/ada/notes")
    assert location is not None and location.params == {"path": "home/ada/notes"}


def test_repeated_and_trailing_slashes_are_canonicalised(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("//wiki///Hash_table/")
    assert location is not None and location.path == "/wiki/Hash_table"


def test_trailing_slash_still_reaches_an_empty_path_parameter(os_router: SiteRouter) -> None:
    location = os_router.resolve("/files/")
    assert location is not None and location.path == "/files/" and location.params == {"path": ""}


def test_unknown_path_matches_nothing(wiki_router: SiteRouter) -> None:
    assert wiki_router.resolve("/nowhere") is None


@pytest.mark.parametrize("path", ["/wiki/..", "/wiki/./x", "/wiki/a\x00b", "/wiki/a\\b", "/" + "a" * MAX_PATH])
def test_malformed_paths_are_bad_requests(wiki_router: SiteRouter, path: str) -> None:
    with pytest.raises(BadRequest):
        wiki_router.resolve(path)


def test_query_keeps_declared_keys_only_first_value_whitespace_collapsed(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/search", [("utm", "x"), ("q", "  hash \n tables "), ("q", "second")])
    assert location is not None and location.query == {"q": "hash tables"}
    assert location.url == "/search?q=hash+tables"


def test_empty_query_value_is_dropped(wiki_router: SiteRouter) -> None:
    location = wiki_router.resolve("/search", [("q", "   ")])
    assert location is not None and location.query == {} and location.url == "/search"


def test_query_value_too_long_is_bad_request(wiki_router: SiteRouter) -> None:
    with pytest.raises(BadRequest):
        wiki_router.resolve("/search", [("q", "x" * (MAX_QUERY_VALUE + 1))])


def test_query_string_is_sorted_so_key_order_does_not_matter() -> None:
    site = load_site(SITES / "os")
    route = replace(site.routes[3], query=("b", "a"))
    router = SiteRouter(replace(site, routes=(route,)))
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


@given(st.text(max_size=80))
def test_any_path_either_normalises_idempotently_or_is_a_bad_request(path: str) -> None:
    try:
        canonical = normalise_path(path)
    except BadRequest:
        return
    assert canonical.startswith("/") and normalise_path(canonical) == canonical
    assert "//" not in canonical and (canonical == "/" or not canonical.endswith("/"))
