from __future__ import annotations

import html
import json
import logging
import math
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from fakes import (
    SITES_DIR,
    ClientFactory,
    FakeEngine,
    example_sites,
    page_html,
    pages_of,
    visit,
    wait_url,
    wiki_writer,
    ws_messages,
)
from starlette.testclient import TestClient

import genui.pages
from genui import inputs
from genui.app import create_app
from genui.screens import WS_PATH
from genui.security import security_headers
from genui.sites import Site, load_site
from genui.store import MAX_POST, Store
from genui.words import Words

HTMX = {"HX-Request": "true"}
LIVE = re.compile(r'ws-connect="([^"]+)"')


def live_url(text: str) -> str:
    """The stream URL of a live placeholder."""
    match = LIVE.search(text)
    assert match is not None, text[:500]
    return match.group(1).replace("&amp;", "&")


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_index_lists_every_site(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = client_factory(all_sites).get("/")
    assert response.status_code == 200
    for site in all_sites:
        assert f'href="/{site.name}/"' in response.text and site.title in response.text


def test_the_index_says_each_sites_title_and_brief_in_its_own_language_and_direction(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """An Arabic forum's brief was laid out left to right on the English index, its parentheses on the wrong side, and
    a French wiki's title read in an English voice (a review of sites in other languages)."""
    langs = {"forum": "ar", "wiki": "fr"}
    sites = [replace(site, lang=langs[site.name]) if site.name in langs else site for site in all_sites]
    index = client_factory(sites).get("/").text
    assert '<li lang="ar" dir="rtl"><a href="/forum/">' in index and '<li lang="fr"><a href="/wiki/">' in index
    assert '<li><a href="/os/">' in index and index.startswith('<!doctype html><html lang="en">')


def test_fields_named_only_by_placeholder_have_a_label_a_text_browser_shows(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """w3m and lynx show neither a placeholder nor an aria-label: the desktop's bar read "[ ] Go", the toolbar's
    instruction "[ ] Rewrite" (a text-browser reader's review). A label no eye sees names each."""
    client = client_factory(all_sites)
    desktop = visit(client, "/os/").text
    assert '<label class="genui-unseen" for="genui-bar-1">Command</label>' in desktop
    assert '<input id="genui-bar-1" type="search" name="cmd"' in desktop
    wiki = visit(client, "/wiki/Lisp").text
    assert '<label class="genui-unseen" for="genui-instruction">How to rewrite it (optional)</label>' in wiki
    assert '<input id="genui-instruction" name="instruction"' in wiki


def test_a_site_name_without_slash_redirects_to_its_home(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = client_factory(all_sites).get("/wiki", follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/wiki/"


def test_a_plain_get_of_a_new_page_answers_at_once_with_the_shell_around_its_stream(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine(delay=0.1)  # about a second for the whole page
    client = client_factory(all_sites, engine)
    response = client.get("/wiki/Hash_table")
    assert engine.finished == 0  # answered before the page was written
    assert response.status_code == 200 and response.headers["vary"] == "HX-Request"
    assert response.headers["cache-control"] == "no-store"  # a placeholder, never to be kept as the page
    assert response.text.startswith("<!doctype html>") and '<header class="genui-bar">' in response.text
    assert "<title>Hash table — Genpedia</title>" in response.text  # guessed from the URL until the page lands
    assert live_url(response.text) == "/_genui/ws?site=wiki&url=%2FHash_table&v=1"
    assert wait_url(response) == "/_genui/wait?site=wiki&url=%2FHash_table&v=1"
    wait_until(lambda: len(engine.calls) == 1)  # the request started the run; its stream will watch it


def test_without_scripts_the_shell_leads_to_the_finished_page(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine(delay=0.01)
    client = client_factory(all_sites, engine, follow_redirects=False)
    target = wait_url(client.get("/wiki/Hash_table"))
    assert target is not None
    waited = client.get(target)  # answered when the page is finished
    assert waited.status_code == 303 and waited.headers["location"] == "/wiki/Hash_table"
    response = client.get("/wiki/Hash_table")
    assert response.status_code == 200 and response.text.startswith("<!doctype html>")
    assert "<h1>Hash table</h1>" in response.text and "<title>Hash table — Genpedia</title>" in response.text
    assert 'href="/wiki/Hash_table_tree"' in response.text  # the model's /wiki/... links lead to the articles
    assert "ws-connect" not in response.text and wait_url(response) is None
    assert "cache-control" not in response.headers
    assert len(engine.calls) == 1  # the wait joined the run the first request started


def test_the_wait_writes_no_version_that_was_not_asked_for(client_factory: ClientFactory, wiki: Site) -> None:
    """A GET to the wait URL (another site's <img>, a crawler) starts no version past the first: only one this
    server started a run for (Regenerate) and that ended unstored is written again when its client waits for it."""
    engine = FakeEngine()
    client = client_factory([wiki], engine, follow_redirects=False)
    visit(client, "/Lisp")
    for asked in (2, 3):
        assert client.get(f"/_genui/wait?site=wiki&url=/Lisp&v={asked}").status_code == 404
    assert len(engine.calls) == 1 and client.get("/Lisp?v=2").status_code == 404
    engine.overloaded = 1.0
    failed = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers=HTMX)
    assert failed.status_code == 200 and "ws-connect" in failed.text
    assert client.portal is not None
    wait_until(lambda: not client.portal.call(lambda: bool(pages_of(client)._running)))  # its run failed
    engine.overloaded = None
    waited = client.get("/_genui/wait?site=wiki&url=/Lisp&v=2")  # its client, waiting for it, writes it again
    assert waited.status_code == 303 and waited.headers["location"] == "/Lisp"
    assert client.get("/Lisp?v=2").status_code == 200 and len(engine.calls) == 3
    assert client.get("/_genui/wait?site=wiki&url=/Lisp&v=4").status_code == 404 and len(engine.calls) == 3


EMBEDDING = {  # what a browser sends for another site's <img> and <iframe> of this one, and for its link
    "image": {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"},
    "frame": {"sec-fetch-site": "same-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"},
    "fetch": {"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty"},
    # a prefetch (speculation rules) is sent as a navigation, and is none (a review)
    "prefetch": {
        "sec-fetch-site": "cross-site",
        "sec-fetch-mode": "navigate",
        "sec-fetch-dest": "document",
        "sec-purpose": "prefetch;prerender",
    },
}
FOLLOWED = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}


@pytest.mark.parametrize("kind", sorted(EMBEDDING))
def test_another_sites_page_embedding_one_starts_no_run_and_reads_only_what_is_stored(
    client_factory: ClientFactory, wiki: Site, kind: str
) -> None:
    """Any page on the web could have a visitor's own genui write pages for it, with an <img> of a wait URL or a
    page, and spend the visitor's runs until their own clicks got 429 (a security review)."""
    engine = FakeEngine()
    client = client_factory([wiki], engine, follow_redirects=False)
    headers = EMBEDDING[kind]
    for url in ("/Planted", "/_genui/wait?site=wiki&url=/Planted&from=/Lisp"):
        refused = client.get(url, headers=headers)
        assert refused.status_code == 403 and "another site" in refused.text and not engine.calls, url
    assert client.get("/Planted").status_code == 200 and len(engine.calls) == 1  # a visitor's own visit writes it
    visit(client, "/Lisp")
    calls = len(engine.calls)
    stored = client.get("/Lisp", headers=headers)  # a stored page is only read
    assert stored.status_code == 200 and "<h1>Lisp</h1>" in stored.text and len(engine.calls) == calls
    assert client.get("/_genui/wait?site=wiki&url=/Lisp", headers=headers).status_code == 303
    followed = client.get("/Followed_here", headers=FOLLOWED)  # a link from another site: the visitor's own click
    assert followed.status_code == 200 and "ws-connect" in followed.text


def test_the_wait_serves_a_page_that_is_never_cached_itself(client_factory: ClientFactory, wiki: Site) -> None:
    uncached = replace(wiki, routes=tuple(replace(route, cache="none") for route in wiki.routes))
    client = client_factory([uncached], follow_redirects=False)
    target = wait_url(client.get("/Lisp"))
    assert target is not None
    response = client.get(target)  # its URL would only write another page: no redirect
    assert response.status_code == 200 and "<h1>Lisp</h1>" in response.text and "ws-connect" not in response.text


def test_a_games_state_goes_on_in_the_links_of_the_page_as_written(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    from test_sites import GAME, write_site

    from genui.sites import load_site

    site = load_site(write_site(tmp_path / "game", GAME))
    engine = FakeEngine(lambda prompt, seed: '<h1>Hall</h1><p><a href="/scene/well">Go to the well</a></p>')
    client = client_factory([site], engine)
    url = "/scene/hall?carrying=sword&health=7"
    ws_messages(client, f"/_genui/ws?site=game&url={quote(url)}&v=1")
    shown = client.get(url).text
    assert 'href="/scene/well?carrying=sword&amp;health=7"' in shown, shown
    assert 'href="/inventory?carrying=sword"' in shown  # the site's own Inventory link too


def test_a_front_page_titled_as_its_site_says_the_title_once_in_the_tab(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """ "The Lamp — The Lamp" in the tab (a hackathon team's game); another page keeps the site's name after its own."""
    client = client_factory(all_sites)
    assert "<title>Genpedia</title>" in visit(client, "/wiki/").text  # its <h1> is Genpedia
    assert "<title>Lisp — Genpedia</title>" in visit(client, "/wiki/Lisp").text


def test_a_page_never_stored_is_written_with_a_seed_of_its_own_at_each_visit(
    client_factory: ClientFactory, wiki: Site
) -> None:
    """`cache = "none"` is written afresh at each visit: it was seed 0 each time, the same text again at full cost (a
    hackathon team's game, whose every fight with a goblin was one)."""
    uncached = replace(wiki, routes=tuple(replace(route, cache="none") for route in wiki.routes))
    engine = FakeEngine()
    client = client_factory([uncached], engine)
    for _ in range(3):
        ws_messages(client, "/_genui/ws?site=wiki&url=/Goblin&v=1")
    seeds = [call.seed for call in engine.calls]
    assert len(seeds) == 3 and len(set(seeds)) == 3, seeds


def test_the_stream_watches_the_run_the_request_started(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    engine = FakeEngine(delay=0.01)
    client = client_factory(all_sites, engine)
    placeholder = client.get("/wiki/Lisp", headers=HTMX).text
    wait_until(lambda: len(engine.calls) == 1)
    engine.max_prompt_chars = 0  # a prompt rendered now would be refused: the stream must not need one
    assert "<h1>Lisp</h1>" in ws_messages(client, live_url(placeholder))[-1]
    assert len(engine.calls) == 1


def test_a_page_whose_path_holds_a_question_mark_is_one_page_for_the_request_and_its_stream(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A forum thread titled "What is V.11?" lives at /r/debian/What_is_V.11%3F: the request's decoded path and the
    stream's URL must name the same page (the stream once cut the path at the ?, and wrote another thread)."""
    engine = FakeEngine(delay=0.01)
    client = client_factory(all_sites, engine)
    placeholder = client.get("/forum/r/debian/What_is_V.11%3F", headers=HTMX).text
    frames = ws_messages(client, live_url(placeholder))
    assert "<h1>What is V.11?</h1>" in frames[-1]
    assert len(engine.calls) == 1  # the stream watched the request's own run
    cached = client.get("/forum/r/debian/What_is_V.11%3F")
    assert cached.status_code == 200 and "<h1>What is V.11?</h1>" in cached.text and "ws-connect" not in cached.text


def test_htmx_request_on_a_cached_page_gets_the_fragment(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites)
    visit(client, "/wiki/Hash_table")
    response = client.get("/wiki/Hash_table", headers=HTMX)
    assert response.status_code == 200 and response.headers["vary"] == "HX-Request"
    assert "<html" not in response.text and "<header" not in response.text
    assert response.text.startswith("<title>Hash table — Genpedia</title>")
    assert '<div id="genui-content"' in response.text and "<h1>Hash table</h1>" in response.text


def test_htmx_request_on_a_miss_gets_a_live_placeholder_and_starts_the_page(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    response = client_factory(all_sites, engine).get("/wiki/Lisp", headers=HTMX)
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    assert 'ws-connect="/_genui/ws?site=wiki&amp;url=%2FLisp&amp;v=1"' in response.text
    assert "<html" not in response.text and "<noscript>" not in response.text  # a fragment: htmx runs scripts
    # the toolbar keeps its place, and its room, until the page lands, and is no landmark with nothing in it meanwhile
    toolbar = (
        '<nav id="genui-toolbar" class="genui-toolbar genui-toolbar-later" aria-label="Page tools" aria-hidden="true">'
    )
    assert toolbar in response.text
    wait_until(lambda: len(engine.calls) == 1)


def test_a_second_get_is_served_from_the_cache(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    first = visit(client, "/wiki/Lisp").text
    assert client.get("/wiki/Lisp").text == first and len(engine.calls) == 1


def test_a_single_site_is_served_at_the_root(client_factory: ClientFactory, wiki: Site) -> None:
    client = client_factory([wiki])
    response = visit(client, "/Lisp")
    assert response.status_code == 200 and 'href="/Lisp_tree"' in response.text
    assert "all sites" not in response.text


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("/wiki/wiki/Lisp", "/wiki/Lisp"),
        ("/wiki/wiki/Lisp?v=2&utm=x", "/wiki/Lisp?v=2"),
        ("/wiki/wiki/Lisp/", "/wiki/Lisp"),
        ("/wiki/Lisp/", "/wiki/Lisp"),  # a slash too many: a bookmark held two addresses of one page
        ("/wiki//Lisp?v=2", "/wiki/Lisp?v=2"),
        ("/wiki/search/?q=lisp", "/wiki/search?q=lisp"),
        ("/os/files", "/os/files/"),  # the folder / has its slash
        ("/wiki/lisp?v=2", "/wiki/Lisp?v=2"),  # the wiki's titles start with a capital (case)
        ("/forum/r/Linux", "/forum/r/linux"),  # and the forum's boards are lower-case
        ("/wiki/Lisp?utm=x", "/wiki/Lisp"),  # a query key no route takes: the page's own address (a review)
        ("/wiki/search?q=lisp&gold=5&v=2", "/wiki/search?q=lisp&v=2"),
    ],
)
def test_an_alias_redirects_to_the_pages_own_url(
    client_factory: ClientFactory, all_sites: list[Site], url: str, location: str
) -> None:
    engine = FakeEngine()
    response = client_factory(all_sites, engine).get(url, follow_redirects=False)
    assert response.status_code == 308 and response.headers["location"] == location
    assert engine.calls == []


def test_a_thread_asked_for_with_spaces_redirects_to_its_own_url(client_factory: ClientFactory) -> None:
    engine = FakeEngine()
    response = client_factory([load_site(SITES_DIR / "forum")], engine).get(
        "/r/linux/Kernel%20news?v=2", follow_redirects=False
    )
    assert response.status_code == 308 and response.headers["location"] == "/r/linux/Kernel_news?v=2"
    assert engine.calls == []


def test_a_title_with_a_combining_accent_is_the_page_of_the_composed_title(client_factory: ClientFactory) -> None:
    """`Café` as NFD (a combining accent, as macOS writes file names) and as NFC look alike: one page, one thread."""
    engine = FakeEngine()
    client = client_factory([load_site(SITES_DIR / "forum")], engine)
    response = client.get("/r/lisp/Cafe%CC%81", follow_redirects=False)
    assert response.status_code == 308 and response.headers["location"] == "/r/lisp/Caf%C3%A9"
    assert engine.calls == []


def test_a_listed_thread_opens_under_the_title_its_listing_shows(client_factory: ClientFactory) -> None:
    """The default model writes a thread's href and its title apart (`Cancer is complete` listed, the href's
    `Cancer_is__iscomplete_complete`); the forum's link_text makes the link open the thread the listing shows."""

    def board(prompt: str, seed: int) -> str:
        thread = re.search(r"<thread>(.*?)</thread>", prompt)
        if thread is not None:
            return f'<div class="thread">\n<h1>{thread.group(1)}</h1></div>'
        return (
            '<div class="board">\n<h1>r/linux</h1>\n<ul class="threads">\n'
            '<li><a href="/r/linux/Cancer_is__iscomplete_complete">Cancer is complete</a></li>\n'
            '<li><a href="/r/linux/Kernel_news">Kernel news</a></li>\n</ul>\n</div>'
        )

    client = client_factory([load_site(SITES_DIR / "forum")], FakeEngine(board))
    listed = page_html(visit(client, "/r/linux").text)
    assert re.findall(r'hx-get="([^"]+)"', listed)[:2] == ["/r/linux/Cancer_is_complete", "/r/linux/Kernel_news"]
    assert "<h1>Cancer is complete</h1>" in page_html(visit(client, "/r/linux/Cancer_is_complete").text)


def test_a_single_sites_alias_redirects_under_the_root(client_factory: ClientFactory, wiki: Site) -> None:
    response = client_factory([wiki]).get("/wiki/Lisp", follow_redirects=False)
    assert response.status_code == 308 and response.headers["location"] == "/Lisp"


def test_query_routes_become_forms_in_the_site_bar(client_factory: ClientFactory, wiki: Site) -> None:
    text = client_factory([wiki]).get("/").text
    assert re.search(r'<form class="genui-query" role="search" method="get" action="/search"', text)
    assert 'name="q"' in text


def test_search_query_reaches_the_prompt(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine()
    visit(client_factory([wiki], engine), "/search", params={"q": "lambda calculus", "junk": "x"})
    assert "<query>lambda calculus</query>" in engine.calls[0].prompt and "junk" not in engine.calls[0].prompt


@pytest.mark.parametrize(
    ("url", "label"),
    [("/wiki/search", "Search"), ("/wiki/search?q=%20%20", "Search"), ("/os/terminal?cmd=+", "Command")],
)
def test_a_bar_route_asked_with_nothing_shows_where_to_type_and_writes_nothing(
    client_factory: ClientFactory, all_sites: list[Site], url: str, label: str
) -> None:
    """A bare /search (or a command of spaces) was written as a page about nothing (a hackathon team's review)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    for headers in ({}, HTMX):
        response = client.get(url, headers=headers)
        assert response.status_code == 200 and "Nothing was asked yet" in response.text, response.text[-800:]
        assert f"<h1>{label}</h1>" in response.text and f"the {label} box above" in response.text
        assert wait_url(response) is None and "ws-connect" not in response.text
    site, _, path = url.lstrip("/").partition("/")
    wait = client.get("/_genui/wait", params={"site": site, "url": "/" + path, "v": "1"})
    assert wait.status_code == 400 and "asks for nothing" in wait.text
    assert engine.calls == [] and pages_of(client).store.page_groups() == []


def test_a_route_kept_off_the_bar_writes_its_page_with_nothing_asked(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki")
    toml = tmp_path / "wiki" / "site.toml"
    toml.write_text(toml.read_text().replace('query = ["q"]', 'query = ["q"]\nbar = false', 1), encoding="utf-8")
    engine = FakeEngine()
    response = visit(client_factory([load_site(tmp_path / "wiki")], engine), "/search")
    assert response.status_code == 200 and "Nothing was asked yet" not in response.text and len(engine.calls) == 1


@pytest.mark.parametrize("path", ["/forum/nowhere", "/wiki/a/b", "/nosite/wiki/X", "/_genui/static/nothing.js"])
def test_unknown_routes_get_a_404_page(client_factory: ClientFactory, all_sites: list[Site], path: str) -> None:
    response = client_factory(all_sites).get(path)
    assert response.status_code == 404 and "Not Found" in response.text.title()
    assert response.headers["content-type"].startswith("text/html")


def test_a_404_inside_a_site_keeps_the_site_shell(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = client_factory(all_sites).get("/wiki/no/such/page")
    assert 'class="genui-brand" href="/wiki/"' in response.text and response.headers["vary"] == "HX-Request"


@pytest.mark.parametrize("url", ["/wiki/Lisp?v=abc", "/wiki/Lisp?v=0", "/wiki/%2E%2E/x", "/wiki/a%00b"])
def test_malformed_requests_get_a_400(client_factory: ClientFactory, all_sites: list[Site], url: str) -> None:
    engine = FakeEngine()
    assert client_factory(all_sites, engine).get(url).status_code == 400
    assert engine.calls == []


def test_engine_overload_answers_503_with_retry_after(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = visit(client_factory(all_sites, FakeEngine(overloaded=2.2)), "/wiki/Lisp")
    assert response.status_code == 503 and response.headers["retry-after"] == "3"
    # it asks again by itself (static/genui.js), and says so; a form posted is told to try again (test_loading)
    assert (
        "The model is busy. This page tries again in 3 s." in response.text and 'data-genui-retry="3"' in response.text
    )


def test_a_page_that_asks_again_asks_for_itself_a_percent_sign_and_all(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A server hands the app the request's path decoded (`/wiki/50%41_off` for the page `50%41 off`, asked for
    as `/wiki/50%2541_off`); written back as it is, a browser would read `%41` and ask for `50A_off`. (Starlette's
    TestClient decodes a path twice, so the request is made here as a server makes it.)"""
    from starlette.requests import Request

    from genui.screens import Screens
    from genui.shell import Shell

    pages = pages_of(client_factory(all_sites))
    scope = {"type": "http", "method": "GET", "path": "/wiki/50%41_off", "query_string": b"x=1", "headers": []}
    screens = Screens(Shell(), pages, index_url="/")
    response = screens.error(Request(scope), pages.sites["wiki"], 503, "Busy", "Try again.", {"Retry-After": "2"})
    assert 'data-genui-retry-url="/wiki/50%2541_off?x=1"' in bytes(response.body).decode()


def test_security_headers_on_every_kind_of_response(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites)
    expected = security_headers()
    for path in ["/", "/wiki/", "/wiki/no/such/page", "/_genui/static/genui.js", "/_genui/css/wiki.css"]:
        response = client.get(path)
        for name, value in expected.items():
            assert response.headers.get(name) == value, (path, name)


def test_a_server_error_is_a_500_page_with_security_headers(client_factory: ClientFactory, tmp_path: Path) -> None:
    class Broken(FakeEngine):
        def fits(self, request: object) -> bool:
            raise RuntimeError("a bug")

    wiki = load_site(SITES_DIR / "wiki")
    response = client_factory([wiki], Broken(), raise_server_exceptions=False).get("/")
    assert response.status_code == 500 and "Server error" in response.text
    assert '<header class="genui-bar">' in response.text  # in the site's shell: the way on is still there
    assert response.headers["content-security-policy"] == security_headers()["Content-Security-Policy"]


def test_pages_load_htmx_config_from_a_meta_tag_and_no_inline_script(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    text = client_factory(all_sites).get("/wiki/").text
    assert '<meta name="htmx-config"' in text and "&#34;allowEval&#34;:false" in text
    assert re.findall(r"<script[^>]*>", text) == [
        '<script src="/_genui/static/htmx.min.js" defer>',
        '<script src="/_genui/static/ws.js" defer>',
        '<script src="/_genui/static/genui.js" defer>',
    ]
    assert not re.search(r"<[^>]*\son[a-z]+=", text)  # no inline event handlers either


def test_site_stylesheet_is_served_as_css(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites)
    response = client.get("/_genui/css/wiki.css")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/css")
    # asked again on each page load (tests/test_browser.py: an edit shows on reload), genui's own files with a 304
    assert response.headers["cache-control"] == "no-cache"
    script = client.get("/_genui/static/genui.js")
    assert script.headers["cache-control"] == "no-cache"
    again = client.get("/_genui/static/genui.js", headers={"if-none-match": script.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_a_stylesheet_gone_since_the_site_loaded_is_a_404(client_factory: ClientFactory, tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    client = client_factory([load_site(root)])
    (root / "wiki.css").unlink()  # renamed by an editor, or a checkout meanwhile
    assert client.get("/_genui/css/wiki.css").status_code == 404
    (root / "wiki.css").mkdir()
    assert client.get("/_genui/css/wiki.css").status_code == 404


# -- parent context ---------------------------------------------------------------------------------------------


def test_a_click_from_a_cached_page_passes_its_title_as_parent(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Hash_table")
    headers = {**HTMX, "HX-Current-URL": "http://testserver/wiki/Hash_table"}
    placeholder = client.get("/wiki/Hash_table_tree", headers=headers).text
    assert "from=%2FHash_table" in placeholder  # a stream that has to start the page again starts it the same
    ws_messages(client, live_url(placeholder))
    assert len(engine.calls) == 2 and "<from>Hash table</from>" in engine.calls[-1].prompt
    visit(client, "/wiki/Hash_table_map", headers={"Referer": "http://testserver/wiki/Hash_table"})
    assert len(engine.calls) == 3 and "<from>Hash table</from>" in engine.calls[-1].prompt


def test_a_parent_whose_title_asks_is_named_whole(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """A page whose title ends in `?` has its `?` written %3F in its URL; the page a click came from is that page,
    not the one its title would name up to the `?`."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Why%3F")
    visit(client, "/wiki/Lisp", headers={"HX-Current-URL": "http://testserver/wiki/Why%3F"})
    assert len(engine.calls) == 2 and "<from>Why?</from>" in engine.calls[-1].prompt


def test_a_page_of_another_server_is_no_parent(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """A visitor who comes from another web site's page (a search engine's Referer is its bare origin) came from no
    page of this one, though its path may read like one."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")
    visit(client, "/wiki/Unix", headers={"Referer": "https://en.wikipedia.org/wiki/Lisp"})
    visit(client, "/wiki/Go", headers={"HX-Current-URL": "http://elsewhere.example/wiki/Lisp"})
    assert len(engine.calls) == 3 and not any("<from>" in call.prompt for call in engine.calls)
    visit(client, "/wiki/C", headers={"Referer": "http://testserver/wiki/Lisp"})  # this server's own page
    assert "<from>Lisp</from>" in engine.calls[-1].prompt


def test_page_controls_name_their_page_byte_for_byte(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """The toolbar's forms carry the page's address as genui wrote it (``Location.url``): two spaces are not one, a
    long address of encoded characters is no error, and an alias or an address written otherwise is a 400."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/os/files/My%20%20Documents")
    regenerate = {"follow_redirects": False}
    response = client.post("/_genui/regenerate", data={"site": "os", "url": "/files/My  Documents"}, **regenerate)
    assert response.status_code == 303 and response.headers["location"] == "/os/files/My%20%20Documents?v=2"
    long = "/terminal?" + urlencode({"cmd": "echo " + "é" * 100})
    assert len(long) > 512
    response = client.post("/_genui/regenerate", data={"site": "os", "url": long}, **regenerate)
    assert response.status_code == 303 and response.headers["location"].startswith("/os/terminal?cmd=echo+%C3%A9")
    wide = client.post("/_genui/regenerate", data={"site": "os", "url": "/files/Tokyo\u3000Tower"}, **regenerate)
    assert wide.status_code == 303 and wide.headers["location"].startswith("/os/files/Tokyo%E3%80%80Tower")  # kept
    for site, url in (("os", "/files/My  Documents/"), ("wiki", "/wiki/Lisp")):
        response = client.post("/_genui/regenerate", data={"site": site, "url": url}, **regenerate)
        assert response.status_code == 400, url
    assert len(engine.calls) == 4


def test_a_parent_from_another_site_is_ignored(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/forum/")
    visit(client, "/wiki/Lisp", headers={"Referer": "http://testserver/forum/"})
    assert "<from>" not in engine.calls[-1].prompt


# -- versions ---------------------------------------------------------------------------------------------------


def test_regenerate_adds_a_version_and_keeps_the_first(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")
    response = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/wiki/Lisp?v=2"
    assert [call.seed for call in engine.calls] == [0, 1]
    first, second = client.get("/wiki/Lisp?v=1").text, client.get("/wiki/Lisp?v=2").text
    assert "seed 0" in first and "seed 1" in second
    assert "seed 1" in client.get("/wiki/Lisp").text  # the newest is the default
    assert 'href="/wiki/Lisp?v=1"' in second and 'aria-current="page">2</a>' in second


def test_a_server_without_edits_offers_none_and_refuses_their_forms(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Any visitor could rewrite a page with an instruction of their own, and every later visitor saw that version
    (an operator's review): `genui serve --no-edits` keeps the pages as written; readers' replies still post."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine, app_options={"edits": False})
    page = visit(client, "/wiki/Lisp").text
    shown = client.get("/wiki/Lisp").text
    for control in ("genui-regenerate", "genui-rewrite", "genui-vary", "/_genui/"):
        assert control not in page_html(shown) and control not in shown.split('id="genui-toolbar"')[1][:400], control
    forms = {
        "/_genui/regenerate": {"site": "wiki", "url": "/Lisp"},
        "/_genui/rewrite": {
            "site": "wiki",
            "url": "/Lisp",
            "v": "1",
            "section": "1",
            "instruction": "say it is closed",
        },
        "/_genui/variations": {"site": "wiki", "url": "/Lisp"},
        "/_genui/keep": {"site": "wiki", "url": "/Lisp", "id": "x", "n": "1"},
        "/_genui/restore": {"site": "wiki", "url": "/Lisp", "v": "1"},
    }
    for path, form in forms.items():
        for headers in ({}, HTMX):
            refused = client.post(path, data=form, headers=headers, follow_redirects=False)
            assert refused.status_code == 403 and "genui serve --no-edits" in refused.text, path
    assert len(engine.calls) == 1 and "seed 0" in client.get("/wiki/Lisp").text and page
    posted = client.post(THREAD, data={"user": "ada", "text": "still open"}, follow_redirects=False)
    assert posted.status_code == 303  # a forum's replies are its pages' own, not an edit


def test_a_route_without_edits_offers_none_and_refuses_their_forms_while_the_others_keep_theirs(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """One player's Regenerate changed a game's scene for everyone, and the only switch was --no-edits for the
    whole server (a hackathon team's game): a route's `edits = false` keeps its own pages as first written."""
    wiki = next(site for site in all_sites if site.name == "wiki")
    articles = replace(wiki, routes=tuple(replace(route, edits=route.pattern != "/{title}") for route in wiki.routes))
    sites = [articles if site.name == "wiki" else site for site in all_sites]
    engine = FakeEngine()
    client = client_factory(sites, engine)
    visit(client, "/wiki/Lisp")
    shown = client.get("/wiki/Lisp").text
    assert "genui-regenerate" not in shown and "genui-rewrite" not in shown and "genui-vary" not in shown
    for path in ("/_genui/regenerate", "/_genui/variations"):
        refused = client.post(path, data={"site": "wiki", "url": "/Lisp"}, follow_redirects=False)
        assert refused.status_code == 403 and "edits = false" in refused.text, path
    visit(client, "/wiki/")  # the front page's route keeps its controls
    assert "genui-regenerate" in client.get("/wiki/").text
    assert len(engine.calls) == 2


def test_htmx_regenerate_streams_the_next_version(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites)
    visit(client, "/wiki/Lisp")
    response = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers=HTMX)
    assert response.status_code == 200 and response.headers["hx-push-url"] == "/wiki/Lisp?v=2"
    assert "url=%2FLisp&amp;v=2" in response.text


def test_forward_to_a_regenerated_version_left_unfinished_writes_it_again(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine(delay=0.05, steps=20)
    client = client_factory(all_sites, engine)
    engine.delay, engine.steps = 0.0, 2
    visit(client, "/wiki/Lisp")
    engine.delay, engine.steps = 0.05, 20
    response = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers=HTMX)
    with client.websocket_connect(live_url(response.text)) as socket:
        socket.receive_text()  # the visitor watches a step, then goes Back: the run is cancelled
    wait_until(lambda: engine.cancelled == 1)
    engine.delay, engine.steps = 0.0, 2
    forward = client.get("/wiki/Lisp?v=2")  # then Forward (or a reload) to the URL Regenerate pushed
    assert forward.status_code == 200 and "ws-connect" in forward.text
    assert "seed 1" in ws_messages(client, live_url(forward.text))[-1] and len(engine.calls) == 3
    assert client.get("/wiki/Lisp?v=3").status_code == 404  # a version nobody asked for is still not written


def test_a_version_that_does_not_exist_is_a_404(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    engine = FakeEngine()
    assert client_factory(all_sites, engine).get("/wiki/Lisp?v=2").status_code == 404
    assert engine.calls == []


def test_a_cross_site_regenerate_is_refused(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = client_factory(all_sites).post(
        "/_genui/regenerate", data={"site": "wiki", "url": "/"}, headers={"Origin": "http://evil.example"}
    )
    assert response.status_code == 403


# -- posts ------------------------------------------------------------------------------------------------------

THREAD = "/forum/r/hacking/My_first_lisp"


def test_a_plain_reply_is_stored_shown_escaped_and_answered_in_place(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    thread = visit(client, THREAD).text
    response = client.post(
        THREAD, data={"user": "ada", "text": "<script>alert(1)</script> nice"}, follow_redirects=False
    )
    assert response.status_code == 303 and response.headers["location"] == THREAD
    page = visit(client, THREAD).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; nice" in page and "<script>alert" not in page
    assert '<b dir="auto">ada</b>' in page and "Welcome, ada!" in page  # the replies came without scripts too
    assert len(engine.calls) == 1 and len(engine.infills) == 1
    assert page_html(page).startswith(page_html(thread))  # the thread as it was, then the post and replies


def test_an_htmx_reply_on_a_thread_not_written_yet_writes_it_with_the_post(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    response = client.post(THREAD, data={"user": "ada", "text": "hello"}, headers=HTMX)
    assert response.status_code == 200 and "ws-connect" in response.text and "hello" in response.text
    ws_messages(client, live_url(response.text))
    assert '<reply user="ada">hello</reply>' in engine.calls[0].prompt and engine.infills == []


@pytest.mark.parametrize(
    "form",
    [
        {"user": "", "text": "hi"},
        {"user": "a b", "text": "hi"},
        {"user": "ada", "text": " "},
        {"user": "ada", "text": "x" * 2001},
        {"text": "no name"},
    ],
)
def test_bad_replies_are_rejected_with_a_400(
    client_factory: ClientFactory, all_sites: list[Site], form: dict[str, str]
) -> None:
    client = client_factory(all_sites)
    response = client.post(THREAD, data=form)
    assert response.status_code == 400 and "Reply not posted" in response.text
    assert "No replies from readers yet." in response.text


@pytest.mark.parametrize("headers", [HTMX, {}])
def test_a_reply_the_page_cache_cannot_store_is_a_503_that_keeps_what_was_typed(
    client_factory: ClientFactory, all_sites: list[Site], headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk: it was a bare 500 ("Something broke"), what was typed lost; the operator's log says why."""
    client = client_factory(all_sites, FakeEngine(), raise_server_exceptions=False)
    visit(client, THREAD)
    store = pages_of(client).store
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # the disk fills up, the posts' pages too
    with pytest.raises(sqlite3.OperationalError, match="full"):
        for _ in range(1000):
            store._db.execute(
                "INSERT INTO posts (site, path, user, text, created) VALUES ('x', '/x', 'x', ?, 0)", ("x" * 500,)
            )
    try:
        long = "a careful reply " * 120
        answer = client.post(THREAD, data={"user": "ada", "text": long}, headers=headers, follow_redirects=False)
        # and health and metrics say so while it lasts: health said "ready", and nothing counted it (an operator's
        # review); still 200, as the cached pages are served
        health = client.get("/_genui/health")
        assert health.status_code == 200 and "full" in health.json()["storage_error"], health.json()
        metrics = client.get("/_genui/metrics").text
        assert "genui_store_failing 1.0" in metrics and "genui_store_write_failures_total 1.0" in metrics
    finally:
        store._db.execute(f"PRAGMA max_page_count = {10**9}")
    assert answer.status_code == 503 and "cannot store anything now" in answer.text, answer.text
    assert f">{long}</textarea>" in answer.text and "Your reply was not posted" in answer.text
    assert store.posts("forum", "/r/hacking/My_first_lisp") == [] and "SQLITE_FULL" in caplog.text
    assert client.post(THREAD, data={"user": "ada", "text": "again"}, follow_redirects=False).status_code in (200, 303)
    assert client.get("/_genui/health").json()["storage_error"] is None  # a write that succeeds ends it


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_reply_after_the_page_cache_file_was_deleted_or_replaced_is_a_503_and_health_says_why(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`rm genui.sqlite3` (or a backup copied over it) while serving: posts were answered 303 into the deleted file,
    health stayed 200, and after a restart every post was gone (an operator's review)."""
    client = client_factory(all_sites, FakeEngine())
    visit(client, THREAD)
    store = pages_of(client).store
    kept = client.post(THREAD, data={"user": "ada", "text": "before"}, follow_redirects=False)
    assert kept.status_code == 303
    if how == "deleted":
        store.path.unlink()
    else:
        backup = tmp_path / "backup.sqlite3"
        store.copy_to(backup).close()
        backup.replace(store.path)
    answer = client.post(THREAD, data={"user": "ada", "text": "after"}, follow_redirects=False)
    assert answer.status_code == 503 and "cannot store anything now" in answer.text
    assert ">after</textarea>" in answer.text  # what was typed stays in the form
    health = client.get("/_genui/health")
    assert health.status_code == 503 and f"was {how}" in health.json()["error"]
    assert f"{store.path} was {how}" in caplog.text and "restart genui" in caplog.text


def test_a_damaged_page_cache_is_a_503_and_the_log_names_the_fix(
    client_factory: ClientFactory,
    all_sites: list[Site],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A backup copied over a served file left it "malformed": each page that read the damage was a bare 500,
    "Something broke", and the log a traceback (an operator's review)."""
    client = client_factory(all_sites, FakeEngine(), raise_server_exceptions=False)
    visit(client, THREAD)

    def damaged(*args: object, **kwargs: object) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(pages_of(client).store, "page", damaged)
    answer = client.get(THREAD)
    assert answer.status_code == 503 and "The page cache is damaged" in answer.text
    assert "restore a backup, or recover what it holds with sqlite3's .recover" in caplog.text


def test_a_reply_to_a_page_without_posts_is_405(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    refused = client_factory(all_sites).post("/wiki/Lisp", data={"user": "a", "text": "b"})
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"  # HTTP asks a 405 to say what is


@pytest.mark.parametrize(
    ("method", "url", "allow"),
    [
        ("PUT", "/wiki/Lisp", "GET, HEAD"),
        ("DELETE", THREAD, "GET, HEAD, POST"),
        ("PATCH", "/forum/", "GET, HEAD"),
        ("FOO", "/wiki/", "GET, HEAD"),
    ],
)
def test_a_method_a_page_does_not_take_is_a_405_naming_those_it_does(
    client_factory: ClientFactory, all_sites: list[Site], method: str, url: str, allow: str
) -> None:
    engine = FakeEngine()
    refused = client_factory(all_sites, engine).request(method, url)
    assert refused.status_code == 405 and refused.headers["allow"] == allow and engine.calls == []


def test_a_cross_site_reply_is_refused(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites)
    response = client.post(THREAD, data={"user": "a", "text": "b"}, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403 and client.get(THREAD).text.count("genui-post-text") == 0
    # a browser that sent no Origin, but said the request came from another site (a security review's second signal)
    for where, status in (("cross-site", 403), ("same-site", 403), ("same-origin", 303), ("none", 303)):
        response = client.post(
            THREAD, data={"user": "a", "text": where}, headers={"Sec-Fetch-Site": where}, follow_redirects=False
        )
        assert response.status_code == status, where


def test_a_reply_through_a_proxy_that_drops_the_port_keeps_its_text_and_says_the_fix(
    client_factory: ClientFactory, all_sites: list[Site], caplog: pytest.LogCaptureFixture
) -> None:
    """Behind nginx with `proxy_set_header Host $host;` (the port dropped), every reply was a bare 403 "That form
    belongs to another site.": the text typed gone, and nothing said of the proxy (a teacher's review)."""
    client = client_factory(all_sites)
    visit(client, THREAD)
    typed = "My answer, typed for ten minutes"
    headers = {"Origin": "http://classroom.test:8795", "Host": "classroom.test"}
    inputs.PROXY_SAID.last = -math.inf  # said once a minute: whatever another test had said
    with caplog.at_level(logging.WARNING, logger="genui"):
        response = client.post(THREAD, data={"user": "ada", "text": typed}, headers=headers)
    assert response.status_code == 403 and f">{typed}</textarea>" in response.text
    assert "pass the Host header on with its port (nginx: proxy_set_header Host $http_host;" in response.text
    assert "a proxy that drops the port?" in caplog.text
    assert client.get(THREAD).text.count("genui-post-text") == 0
    with caplog.at_level(logging.WARNING, logger="genui"):  # once a minute: every hover behind such a proxy sends one
        assert client.post(THREAD, data={"user": "ada", "text": typed}, headers=headers).status_code == 403
    assert caplog.text.count("a proxy that drops the port?") == 1 and "'http://classroom.test:8795'" in caplog.text
    # another site's page: a bare refusal, nothing of its form shown in the thread (a review)
    foreign = client.post(THREAD, data={"user": "ada", "text": typed}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "That form belongs to another site." in foreign.text
    assert typed not in foreign.text


def test_an_oversized_reply_is_413(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    response = client_factory(all_sites).post(THREAD, data={"user": "ada", "text": "x" * 20_000})
    assert response.status_code == 413


def test_a_reply_as_long_as_the_form_allows_is_posted_in_any_script(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """The textarea takes MAX_POST characters; 2,000 of Japanese are 18,000 bytes url-encoded (a 413 until session 48,
    and the text typed was gone)."""
    client = client_factory(all_sites)
    text = "東京" * (MAX_POST // 2)
    response = client.post(THREAD, data={"user": "ada", "text": text}, follow_redirects=False)
    assert response.status_code == 303 and text in client.get(THREAD).text


def test_a_page_whose_own_url_is_too_long_for_the_model_is_a_400_and_its_stream_says_why(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = client_factory(all_sites, FakeEngine(max_prompt_chars=400))
    long_title = "Very_long_title_" * 20  # under the router's 512 characters, over this engine's prompt
    for headers in ({}, HTMX):
        response = client.get(f"/wiki/{long_title}", headers=headers)
        assert response.status_code == 400 and "longer than the model can read" in response.text
    assert client.get("/wiki/Lisp").status_code == 200
    messages = ws_messages(client, f"{WS_PATH}?site=wiki&url=/{long_title}")
    assert len(messages) == 1 and "longer than the model can read" in messages[0]


def test_a_site_whose_own_prompt_is_too_long_for_the_model_says_so_not_blaming_the_address(
    client_factory: ClientFactory, all_sites: list[Site], caplog: pytest.LogCaptureFixture
) -> None:
    client = client_factory(all_sites, FakeEngine(max_prompt_chars=20))  # shorter than the wiki's brief
    response = client.get("/wiki/Lisp")
    # The site's config, not a busy server: a 500 (a 503 asked the visitor to try again), and said in the log.
    assert response.status_code == 500 and "are too long at any address" in response.text
    assert "shorten it" not in response.text and "Retry-After" not in response.headers
    assert "site wiki: the prompt and opening for /{title} are too long at any address: they are longer" in caplog.text
    assert "or lower model.tokens (site.toml)" in response.text
    (failed,) = ws_messages(client, f"{WS_PATH}?site=wiki&url=/Lisp")  # the stream says the same, with no retry
    assert "are too long at any address" in failed and "Try again" not in failed


def test_a_route_whose_opening_fills_the_page_says_to_raise_its_tokens(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """It was told to "lower model.tokens", which made it worse (a reader of the docs)."""
    client = client_factory(all_sites, FakeEngine(max_opening_chars=5))  # the wiki's opening is longer
    response = client.get("/wiki/Lisp")
    assert response.status_code == 500 and "lower model.tokens" not in response.text
    assert "the opening leaves the model no room in the page&#39;s 384 tokens; raise model.tokens" in response.text


def test_a_route_no_page_of_which_the_model_can_read_is_logged_once_the_model_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A long brief passed genui new and genui sites, and every front page was a 503 with nothing in the log (a
    hackathon team's walkthrough): the developer is told at start, route by route."""
    app = create_app(
        example_sites(), db_path=tmp_path / "db.sqlite3", load_engine=lambda: FakeEngine(max_prompt_chars=20)
    )
    with TestClient(app) as client:
        wait_until(lambda: client.get("/_genui/health").status_code == 200)
    said = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert "site wiki: the prompt and opening for /{title} are too long at any address: they are longer" in (
        "\n".join(said)
    )
    assert len([line for line in said if line.startswith("site forum: ")]) == len(load_site(SITES_DIR / "forum").routes)


def test_a_page_whose_prompt_template_fails_is_a_500_naming_the_template_and_the_fix(
    client_factory: ClientFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    article = root / "prompts" / "article.j2"
    article.write_text(article.read_text() + '{% if params.title == "Boom" %}{{ 1 / 0 }}{% endif %}\n')
    engine = FakeEngine()
    client = client_factory([load_site(root)], engine)
    failed = client.get("/Boom")
    assert failed.status_code == 500 and "Template error" in failed.text
    assert "wiki/prompts/article.j2: rendering it failed at line 6: ZeroDivisionError" in failed.text
    assert str(tmp_path) not in failed.text and engine.calls == []
    assert "a prompt template failed" in caplog.text and str(article) in caplog.text  # the developer's log says where
    assert client.get("/Lisp").status_code == 200  # the route's other pages are written


def test_a_stream_that_finds_the_page_cache_busy_asks_again_as_the_page_does(
    client_factory: ClientFactory, wiki: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writing the page cache (a vacuum, a second server starting): the GET's 503 asks again by
    itself after its Retry-After, and so must the stream's message, which closes normally (htmx does not reconnect)."""
    import sqlite3

    client = client_factory([wiki], FakeEngine())
    store = pages_of(client).store

    def locked(*args: object, **kwargs: object) -> int:
        error = sqlite3.OperationalError("database is locked")
        error.sqlite_errorname = "SQLITE_BUSY"
        raise error

    monkeypatch.setattr(store, "versions", locked)
    page = client.get("/Lisp")
    assert page.status_code == 503 and page.headers["retry-after"] == "2" and 'data-genui-retry="2"' in page.text
    (message,) = ws_messages(client, f"{WS_PATH}?site=wiki&url=/Lisp&v=1")
    assert "The page cache is busy" in message and 'data-genui-retry="2"' in message
    assert 'data-genui-retry-url="/Lisp"' in message and 'href="/Lisp"' in message


@pytest.mark.parametrize(("written", "shown"), [('bar = "Look up"', "Look up"), ("bar = false", None), ("", "Search")])
def test_the_site_bars_form_says_what_its_route_says(
    client_factory: ClientFactory, tmp_path: Path, written: str, shown: str | None
) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    toml = root / "site.toml"
    toml.write_text(toml.read_text().replace('query = ["q"]', f'query = ["q"]\n{written}', 1))
    page = client_factory([load_site(root)]).get("/").text
    if shown is None:
        assert 'class="genui-query"' not in page
    else:
        assert f'placeholder="{shown}"' in page and f'<button type="submit">{shown}</button>' in page


def test_a_page_asked_again_with_no_parent_is_written_from_the_page_it_was_first_asked_from(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Back or Forward to a page left while it was written loads it again with no Referer: its run, started anew, wrote
    it with no parent (a visitor's walkthrough), where the click had asked for it from its parent."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine, app_options={"unclaimed_s": 0.05})
    visit(client, "/wiki/Lisp")
    engine.hold = threading.Event()  # the page is not written before its visitor leaves
    left = client.get("/wiki/Lisp_machine", headers={"referer": "http://testserver/wiki/Lisp"})
    assert "ws-connect" in left.text  # nobody comes to watch it: the run is let go
    time.sleep(0.3)
    engine.hold.set()
    calls = len(engine.calls)
    again = client.get("/wiki/Lisp_machine")  # no Referer, no HX-Current-URL
    ws_messages(client, live_url(again.text))
    assert len(engine.calls) == calls + 1 and "<from>Lisp</from>" in engine.calls[-1].prompt
    typed = client.get("/wiki/Lisp_tree")  # a page nobody asked for from another: no parent, as before
    ws_messages(client, live_url(typed.text))
    assert "<from>" not in engine.calls[-1].prompt


def test_a_request_waiting_for_its_page_is_answered_as_the_server_begins_to_stop(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """SIGTERM waited until every no-script client's page was written (12 s for one page in an operator's review,
    past a service manager's patience with a queue of them): such a request is answered at once, to ask again."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    engine.hold = threading.Event()  # the page is not written before the server stops
    wait = wait_url(client.get("/wiki/Lisp"))
    assert wait is not None
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(client.get(wait, follow_redirects=False)))
    waiting.start()
    time.sleep(0.3)
    assert answers == []  # it waits for the page, as it should while the server runs
    client.portal.call(client.app.state.pages.stopping.set)  # type: ignore[attr-defined, union-attr]
    waiting.join(timeout=5)
    engine.hold.set()
    (answer,) = answers
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert "genui is stopping, most likely to start again. This page tries again in 5 s." in answer.text


@pytest.mark.parametrize("finishes", [True, False])
def test_a_page_being_written_as_the_server_stops_is_finished_and_stored_first(
    tmp_path: Path,
    all_sites: list[Site],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    finishes: bool,
) -> None:
    """SIGTERM closed the page's stream (1012) and threw its run away at once, and the log said nothing: a restart
    cost each visitor's page, up to a minute of the model's work on a CPU (an operator's review). It is given a few
    seconds to finish and be stored; one that does not is cut short, and the log says which was which."""
    monkeypatch.setattr(genui.pages, "DRAIN_S", 5.0 if finishes else 0.3)
    engine = FakeEngine(delay=0.05, steps=6)
    if not finishes:
        engine.hold = threading.Event()  # its last frame never comes
    db = tmp_path / "pages.sqlite3"
    with (
        caplog.at_level(logging.INFO, logger="genui"),
        TestClient(create_app(all_sites, engine, db_path=db)) as client,
    ):
        live = live_url(client.get("/wiki/Lisp").text)
        with client.websocket_connect(live) as socket:
            socket.receive_text()  # a frame; then the server begins to stop, and its streams close
            client.portal.call(client.app.state.pages.stopping.set)  # type: ignore[attr-defined, union-attr]
        time.sleep(0.2)  # past its stream's close: the run is not let go with it
        assert engine.cancelled == 0
    said = "stopping: 1 page being written as the server began to stop: "
    store = Store(db)
    try:
        assert sum(group.urls for group in store.page_groups()) == int(finishes)
    finally:
        store.close()
    if finishes:
        assert said + "1 finished and stored first, 0 cut short" in caplog.text and engine.cancelled == 0
    else:
        assert said + "0 finished and stored first, 1 cut short after 0.3 s" in caplog.text, caplog.text
        engine.hold.set()  # type: ignore[union-attr]


def test_the_bars_box_of_a_query_page_says_its_query(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """On `/os/terminal?cmd=ls` opened by a link or a reload, the bar's Terminal box was empty (a visitor's
    walkthrough): it holds the page's own query, escaped, and the other boxes stay empty."""
    client = client_factory(all_sites)
    page = client.get("/os/terminal?cmd=ls%20-l%20%22x%22").text
    assert 'name="cmd" placeholder="Command" maxlength="256" required value="ls -l &#34;x&#34;"' in page
    assert 'name="url" placeholder="Address" maxlength="256" required>' in page
    buttons = re.findall(r'<form class="genui-query"[^>]*>.*?<button type="submit">([^<]*)</button>', page, re.DOTALL)
    assert buttons == ["Run", "Go"]  # what each does, not its box's label again (bar = { label, button })


def test_a_toolbar_links_the_first_the_shown_and_the_newest_versions_of_a_page_with_many(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """One client made 300 versions of a page, and its toolbar linked every one: 51 KB (an operator's review)."""
    client = client_factory(all_sites)
    visit(client, "/wiki/Lisp")
    for _ in range(11):
        client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, follow_redirects=False)
    bar = client.get("/wiki/Lisp?v=3").text.split('<span class="genui-versions">', 1)[1].split("</nav>", 1)[0]
    linked = re.findall(r'<a href="/wiki/Lisp\?v=(\d+)"', bar)
    assert linked == ["1", "3", "6", "7", "8", "9", "10", "11", "12"] and bar.count("…") == 2
    assert 'aria-current="page">3</a>' in bar
    assert 'aria-label="Version 3"' in bar  # a screen reader's list of links read "1", "3", "6", ... (an audit)


def test_robots_txt_and_the_icons_a_browser_asks_for_are_genuis_not_a_sites_pages(
    client_factory: ClientFactory, wiki: Site, all_sites: list[Site]
) -> None:
    """`genui serve --site wiki` wrote an article "Robots.txt" for every crawler, and "Favicon.ico" and
    "Apple-touch-icon.png" for browsers that ask for an icon there; and no robots.txt kept crawlers, each of whose
    requests the model writes a page for, off the sites' endless links. The rest of /_genui/ is genui's too."""
    for sites in ([wiki], all_sites):
        engine = FakeEngine()
        client = client_factory(sites, engine=engine)
        robots = client.get("/robots.txt")
        assert robots.status_code == 200 and robots.headers["content-type"] == "text/plain; charset=utf-8"
        assert "User-agent: *\nDisallow: /\n" in robots.text and "genui serve --robots FILE" in robots.text
        icon = client.get("/favicon.ico", follow_redirects=False)
        assert icon.status_code == 301 and icon.headers["location"] == "/_genui/static/favicon.svg"
        assert client.get("/favicon.ico").headers["content-type"] == "image/svg+xml"
        for path in (
            "/apple-touch-icon.png",
            "/apple-touch-icon-precomposed.png",
            "/_genui",
            "/_genui/x",
            "/_genui/ws",
        ):
            assert visit(client, path).status_code == 404
        assert engine.calls == [] and pages_of(client).store.page_groups() == []
    allowed = "User-agent: *\nAllow: /\n"
    assert client_factory([wiki], app_options={"robots": allowed}).get("/robots.txt").text == allowed


def test_a_page_written_with_no_heading_has_one_for_screen_readers(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A desktop's screen has its title in a window's bar, no <h1>: a screen reader, which finds a page's parts by
    its headings, found none on any desktop screen (an accessibility audit)."""
    window = '<div class="window"><div class="titlebar">Terminal</div><div class="body"><pre>$ ls</pre></div></div>'
    engine = FakeEngine(
        lambda prompt, seed: window if "Terminal" in prompt or "terminal" in prompt else wiki_writer(prompt, seed)
    )
    client = client_factory(all_sites, engine)
    screen = visit(client, "/os/terminal?cmd=ls").text
    assert '<h1 class="genui-unseen">Terminal: ls — GenOS</h1>' in screen and "<h1" not in page_html(screen)
    article = visit(client, "/wiki/Lisp").text
    assert '<h1 class="genui-unseen"' not in article and "<h1>Lisp</h1>" in page_html(article)


def test_a_site_says_its_language_and_one_written_right_to_left_is_laid_out_so(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Every page said lang="en", a Japanese or Arabic site's too (screen readers read it in an English voice, and
    browsers offered to translate it from English), and nothing could say otherwise (a walkthrough of sites in other
    languages)."""
    sites = [replace(site, lang={"wiki": "ja", "forum": "ar"}.get(site.name, "en")) for site in all_sites]
    client = client_factory(sites)
    assert '<html lang="ja">' in visit(client, "/wiki/Lisp").text
    assert '<html lang="ar" dir="rtl">' in visit(client, "/forum/").text
    assert '<html lang="en">' in client.get("/").text and '<html lang="en">' in visit(client, "/os/").text
    assert '<html lang="ja">' in client.get("/wiki/no/such/page").text  # an error page is the site's too


def asked_again_as_it_ends(client: TestClient, wait: str, engine: FakeEngine) -> Any:
    """The answer to ``wait`` asked again while the engine's held run ends (``engine.hold`` set meanwhile)."""
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(client.get(wait, follow_redirects=False)))
    waiting.start()
    time.sleep(0.1)
    assert engine.hold is not None
    engine.hold.set()
    waiting.join(timeout=10)
    (answer,) = answers
    return answer


def test_a_wait_that_outlasts_a_proxys_patience_is_answered_and_asked_again_joins_the_same_run(
    client_factory: ClientFactory, all_sites: list[Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait URL said nothing until its page was written: behind nginx (60 s) a page queued behind others got a
    bare 504, and its run was dropped with the request (an operator's deployment). It answers in time, a 503 that
    asks again at once, and the run waits for the request asked again."""
    import genui.views

    monkeypatch.setattr(genui.views, "WAIT_ANSWER_S", 0.3)
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    engine.hold = threading.Event()  # the page is not written within the wait
    wait = wait_url(client.get("/wiki/Lisp"))
    assert wait is not None
    answer = client.get(wait, follow_redirects=False)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "The page is still being written. This page asks again in 1 s." in answer.text
    assert f'content="1; url={html.escape(wait)}"' in answer.text  # without scripts too
    time.sleep(0.5)  # a browser's second, within the run's wait for it
    done = asked_again_as_it_ends(client, wait, engine)
    assert done.status_code == 303 and done.headers["location"] == "/wiki/Lisp"
    assert len(engine.calls) == 1 and engine.cancelled == 0  # one run, never dropped


def test_a_page_controls_form_without_scripts_is_answered_before_a_proxys_patience_ends(
    client_factory: ClientFactory, all_sites: list[Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without scripts, Regenerate and variations held their POST until the page was written, however long: behind
    nginx (60 s) the reader got a 504, and the run was dropped with the request (a text-browser reader's review).
    Past WAIT_ANSWER_S they go to the address that waits for it, and the run waits for that request."""
    import genui.views

    monkeypatch.setattr(genui.views, "WAIT_ANSWER_S", 0.3)
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")
    engine.hold = threading.Event()  # the next version is not written within the wait
    form = {"site": "wiki", "url": "/Lisp"}
    answer = client.post("/_genui/regenerate", data=form, follow_redirects=False)
    assert answer.status_code == 303
    wait = answer.headers["location"]
    assert wait == "/_genui/wait?site=wiki&url=%2FLisp&v=2"
    time.sleep(0.5)  # a browser follows the redirect at once; the run waits for it meanwhile
    done = asked_again_as_it_ends(client, wait, engine)
    assert done.status_code == 303 and done.headers["location"] == "/wiki/Lisp"
    assert "seed 1" in client.get("/wiki/Lisp?v=2").text and engine.cancelled == 0  # one run, never dropped
    engine.hold = threading.Event()
    answer = client.post("/_genui/variations", data=form, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"].endswith("&wait=1")
    time.sleep(0.5)
    engine.hold.set()
    written = client.get(answer.headers["location"], follow_redirects=False)
    assert written.status_code == 303 and "wait" not in written.headers["location"]
    assert engine.cancelled == 0


def in_language(sites: list[Site], name: str, lang: str, words: dict[str, str] | None = None) -> list[Site]:
    """The sites, with site ``name`` in language ``lang`` and saying ``words`` of genui's in its own."""
    return [
        replace(site, lang=lang, words=tuple((words or {}).items())) if site.name == name else site for site in sites
    ]


def test_a_site_says_genuis_own_words_in_its_own(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """A Japanese forum's toolbar, skip link, footer and readers' notices were English (a walkthrough of sites in
    other languages): a site's [words] says them, values filled in and escaped."""
    words = {
        "regenerate": "再生成",
        "variations": "{n}つの案",
        "skip": "本文へ",
        "footer": "各ページは{model}が書きます。",
        "no_replies": "まだ返信はありません。",
        "loaded": "読み込みました: {title}",
    }
    sites = in_language(all_sites, "forum", "ja", words)
    client = client_factory(sites)
    page = visit(client, "/forum/r/hacking/My_first_lisp").text
    assert '<a class="genui-skip" href="#genui-content">本文へ</a>' in page
    # the rest, English, and marked so: a screen reader read "Rewrite" in its Japanese voice (an accessibility
    # review); in an attribute, the text alone
    assert (
        ">再生成</button>" in page
        and ">3つの案</button>" in page
        and '><span lang="en">Rewrite</span></button>' in page
    )
    assert 'aria-label="Page tools"' in page and 'title="Write this section again; the rest of the page' in page
    # a value filled in is the site's, in its language (a review of this change)
    said = Words({}, "ja").say("back_to", title="広場")
    assert said == '<span lang="en">Back to <span lang="ja">広場</span></span>'
    assert Words({}, "ja").say("keep", n=2) == '<span lang="en">Keep variation 2</span>'  # a number is none
    assert '<footer class="genui-footer">各ページは<code>fake-model</code>が書きます。</footer>' in page
    assert '<p class="genui-quiet">まだ返信はありません。</p>' in page
    said = json.loads(html.unescape(re.search(r'data-genui-words="([^"]*)"', page)[1]))  # type: ignore[index]
    assert said["loaded"] == "読み込みました: {title}" and said["refused"] == "That was refused ({status}). Try again."
    assert ">Regenerate</button>" in visit(client, "/wiki/Lisp").text  # another site's own words


def test_a_page_a_site_cannot_give_now_is_said_in_its_own_words(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A Japanese site's busy and not-found pages, and a stream that ended on a busy model, were English: the rest of
    its chrome was its own (a note of session 63)."""
    words = {
        "busy_heading": "混雑中",
        "busy": "モデルが混んでいます。{seconds}秒後にもう一度。",
        "not_found_heading": "見つかりません",
        "no_page": "このアドレスにページはありません。",
        "back_to": "{title}に戻る",
        "try_again": "もう一度",
    }
    sites = in_language(all_sites, "os", "ja", words)
    engine = FakeEngine(overloaded=3)
    client = client_factory(sites, engine)
    busy = client.get("/os/files/home", headers={"Accept": "text/html"})
    live = live_url(busy.text)
    ended = ws_messages(client, live)[-1]
    assert "モデルが混んでいます。3秒後にもう一度。" in ended and ">もう一度</a>" in ended
    waited = client.get(live.replace("/_genui/ws?", "/_genui/wait?"))
    assert waited.status_code == 503 and "<h1>混雑中</h1>" in waited.text
    assert "<p>モデルが混んでいます。3秒後にもう一度。</p>" in waited.text and ">GenOSに戻る</a>" in waited.text
    missing = client.get("/os/no/such/place")
    assert missing.status_code == 404 and "<h1>見つかりません</h1>" in missing.text
    assert "<p>このアドレスにページはありません。</p>" in missing.text
    english = client.get("/wiki/Lisp/x/y")  # another site's: genui's English
    assert (
        english.status_code == 404 and "<h1>Not found</h1>" in english.text and ">Back to Genpedia</a>" in english.text
    )


def test_every_refusal_a_reader_meets_is_said_in_the_sites_words_or_marked_english(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A French wiki's "No such version", "Method not allowed", "Too many requests" and "Bad request" pages were
    English that its [words] could not say, and not marked English either, so a screen reader read them in its French
    voice (a review of a site in another language)."""
    words = {
        "no_version_heading": "Version introuvable",
        "no_version": "Cette page n'a pas de version {n}.",
        "not_allowed_heading": "Méthode refusée",
        "only_read": "Cette page se lit seulement.",
        "too_many_heading": "Trop de demandes",
        "too_many_runs_one": "Une page s'écrit déjà pour vous. Réessayez dans {seconds} s.",
    }
    sites = in_language(all_sites, "wiki", "fr", words)
    engine = FakeEngine(delay=0.2)
    client = client_factory(sites, engine, app_options={"runs_per_client": 1})
    visit(client, "/wiki/Lisp")
    version = client.get("/wiki/Lisp?v=9")
    assert version.status_code == 404 and "<h1>Version introuvable</h1>" in version.text
    assert "<p>Cette page n&#39;a pas de version 9.</p>" in version.text
    assert "<title>Version introuvable — Genpedia</title>" in version.text  # the tab's: text, never markup
    deleted = client.delete("/wiki/Lisp")
    assert deleted.status_code == 405 and deleted.headers["allow"] == "GET, HEAD"
    assert "<h1>Méthode refusée</h1>" in deleted.text and "<p>Cette page se lit seulement.</p>" in deleted.text
    first = client.get("/wiki/Smalltalk")
    assert first.status_code == 200
    second = client.get("/wiki/Prolog")
    assert second.status_code == 429 and "<h1>Trop de demandes</h1>" in second.text
    assert "<p>Une page s&#39;écrit déjà pour vous. Réessayez dans 5 s.</p>" in second.text
    # what no site's words say (a malformed address's reason) is English, marked so; the tab's title is text
    bad = client.get("/wiki/%C3")
    assert bad.status_code == 400 and '<h1><span lang="en">Bad request</span></h1>' in bad.text
    assert '<p><span lang="en">' in bad.text and "<title>Bad request — Genpedia</title>" in bad.text
    # an English site's pages carry no such marks
    english = client.get("/os/files/home?v=9")
    assert (
        english.status_code == 404 and "<h1>No such version</h1>" in english.text and "<span lang" not in english.text
    )


def test_a_readers_name_rule_is_said_in_the_sites_words(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    """An Arabic forum's name field showed its rule in English, and a refused name was told so in English inside the
    site's own words (a review of sites in other languages)."""
    words = {"user_rule": "اسم من 1 إلى {n} حرفًا أو رقمًا", "not_posted": "لم يُنشر ردك: {reason}"}
    sites = in_language(all_sites, "forum", "ar", words)
    client = client_factory(sites)
    thread = visit(client, THREAD).text
    assert 'title="اسم من 1 إلى 32 حرفًا أو رقمًا"' in thread
    refused = client.post(
        THREAD, data={"user": "أحمد علي", "text": "مرحبا"}, headers={**HTMX, "Origin": "http://testserver"}
    )
    assert refused.status_code == 400 and "لم يُنشر ردك: اسم من 1 إلى 32 حرفًا أو رقمًا" in refused.text
    assert "letters or digits" not in refused.text
    # a reason no site's words say, on the error page of a thread not written yet: English, and marked so (a review)
    long = client.post(
        "/forum/r/linux/Never_written",
        data={"user": "ada", "text": "x" * 2001},
        headers={**HTMX, "Origin": "http://testserver"},
    )
    assert (
        long.status_code == 400
        and '<p><span lang="en">The post is longer than 2000 characters.</span></p>' in long.text
    )


def test_a_sets_wait_that_outlasts_a_proxys_patience_is_answered_and_the_set_waits(
    client_factory: ClientFactory, all_sites: list[Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set of variations' wait (…&wait=1) still waited without limit after a page's was capped (a review of that
    change): the slowest thing genui writes, so the likeliest to meet a proxy's 504."""
    import genui.views

    monkeypatch.setattr(genui.views, "WAIT_ANSWER_S", 0.3)
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")
    engine.hold = threading.Event()  # the candidates are not written within the wait
    live = client.post("/_genui/variations", data={"site": "wiki", "url": "/Lisp"}, headers={"HX-Request": "true"})
    wait = live.headers["hx-push-url"] + "&wait=1"
    answer = client.get(wait, follow_redirects=False)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    done = asked_again_as_it_ends(client, wait, engine)
    assert done.status_code == 303 and done.headers["location"] == live.headers["hx-push-url"]
    assert len(engine.variations) == 1 and engine.cancelled == 0  # one set, never dropped


def test_genuis_own_templates_are_read_once(tmp_path: Path) -> None:
    """A server whose files were updated in place (git pull) read the new templates at once beside its old Python,
    and answered 500 on every page until it was restarted (a soak test): the templates are read as it starts."""
    from genui.shell import TEMPLATES_DIR, Shell

    copied = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copied)
    shell = Shell(copied)
    before = shell.part("inline_posts", [])
    (copied / "parts.html").write_text("{% macro inline_posts(posts) %}{{ no_such_value }}{% endmacro %}\n")
    assert shell.part("inline_posts", []) == before
