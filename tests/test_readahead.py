from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import (
    SITES_DIR,
    ClientFactory,
    FakeEngine,
    Writer,
    eventually,
    pages_of,
    visit,
    wait_url,
    wiki_writer,
    ws_messages,
)
from starlette.testclient import TestClient

from engine.frames import Frame, GenerationRequest
from genui.generation import Generation
from genui.links import linked_urls
from genui.pages import Job, Pages
from genui.readahead import reading_list
from genui.runtime import SiteRuntime
from genui.sites import Site, load_site
from genui.store import Store

HTMX = {"HX-Request": "true"}

Reading = Callable[[int, FakeEngine], TestClient]  # reading(read_ahead, engine) -> a started client


@pytest.fixture
def reading(client_factory: ClientFactory, wiki: Site) -> Reading:
    """reading(read_ahead, engine) -> a started client serving the wiki alone, on a fresh database."""
    return lambda read_ahead, engine: client_factory([wiki], engine, read_ahead=read_ahead)


def stored(client: TestClient, url: str) -> bool:
    """Whether the page at ``url`` is in the cache, asked on the app's own event loop."""

    def look() -> bool:
        pages = pages_of(client)
        runtime = pages.sites["wiki"]
        location = runtime.locate(url)
        assert location is not None
        return pages.versions(pages.job(runtime, location)) > 0

    assert client.portal is not None
    return client.portal.call(look)


def titles(engine: FakeEngine) -> list[str]:
    """The articles the engine was asked to write, in order."""
    return [call.prompt.split("<title>")[1].split("</title>")[0] for call in engine.calls]


def idle(client: TestClient) -> bool:
    assert client.portal is not None
    return client.portal.call(lambda: not pages_of(client)._running)


def test_a_page_shown_has_its_first_links_written_and_stored_while_the_engine_is_idle(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(2, engine)
    assert visit(client, "/Lisp").status_code == 200
    assert eventually(lambda: stored(client, "/Lisp_tree") and stored(client, "/Lisp_map"))
    assert eventually(lambda: idle(client))
    # Both links were read ahead, one at a time, and the pages read ahead were not read ahead in turn.
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map"]
    assert not stored(client, "/Lisp_tree_tree")
    # A click on a link read ahead is a cache hit: the page whole, with no placeholder to stream into.
    response = client.get("/Lisp_tree", headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/Lisp"})
    assert wait_url(response) is None and "ws-connect" not in response.text
    assert "Lisp tree is a topic in computing, written with seed 0." in response.text
    assert titles(engine).count("Lisp tree") == 1


def test_a_page_read_ahead_is_the_page_its_click_would_write(reading: Reading) -> None:
    ahead, clicked = FakeEngine(), FakeEngine()
    reader, clicker = reading(1, ahead), reading(0, clicked)
    visit(reader, "/Lisp")
    visit(clicker, "/Lisp")
    assert eventually(lambda: stored(reader, "/Lisp_tree"))
    visit(clicker, "/Lisp_tree", headers={"HX-Current-URL": "http://testserver/Lisp"})
    # The same request, so the same page: the prompt names Lisp as the page the visitor came from.
    assert ahead.calls[1] == clicked.calls[1]
    assert "<from>Lisp</from>" in ahead.calls[1].prompt
    assert len(clicked.calls) == 2  # and without reading ahead nothing but the clicks is written


def test_reading_ahead_writes_the_first_links_that_are_not_written_yet(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(2, engine)
    visit(client, "/Lisp_map")  # /Lisp links to it second
    assert eventually(lambda: stored(client, "/Lisp_map_map") and idle(client))
    visit(client, "/Lisp")
    assert eventually(lambda: stored(client, "/Lisp_tree") and idle(client))
    assert titles(engine) == ["Lisp map", "Lisp map tree", "Lisp map map", "Lisp", "Lisp tree"]


def test_reading_ahead_passes_a_blank_search_by_without_spending_a_page_on_it(reading: Reading) -> None:
    """A link to a bare /search, which writes no page, took one of the pages read ahead (a review)."""

    def writer(prompt: str, seed: int) -> str:
        if "<title>Lisp</title>" not in prompt:
            return "<article><h1>Page</h1><p>Nothing further.</p></article>"
        links = '<a href="/search">Search</a> <a href="/Apl">Apl</a> <a href="/Bcpl">Bcpl</a>'
        return f"<article><h1>Lisp</h1><p>{links}</p></article>"

    engine = FakeEngine(writer)
    client = reading(2, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: stored(client, "/Bcpl") and idle(client))
    assert titles(engine) == ["Lisp", "Apl", "Bcpl"]


def test_showing_a_page_again_reaches_no_further_down_its_links(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(1, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: stored(client, "/Lisp_tree") and idle(client))
    client.get("/Lisp")
    client.get("/Lisp")
    time.sleep(0.3)
    assert titles(engine) == ["Lisp", "Lisp tree"]


def test_a_cached_page_shown_again_reads_ahead_from_it(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(1, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: stored(client, "/Lisp_tree"))
    client.get("/Lisp_tree")  # from the cache; the visitor moved on, so its link is next
    assert eventually(lambda: stored(client, "/Lisp_tree_tree"))


def test_a_visitor_does_not_wait_for_a_page_being_read_ahead(reading: Reading) -> None:
    engine = FakeEngine(steps=20, delay=0.03)  # a page takes over a second
    client = reading(1, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: len(engine.calls) == 2)  # /Lisp_tree is being read ahead
    response = visit(client, "/Unix")
    assert response.status_code == 200 and "Unix is a topic in computing" in response.text
    # The run reading ahead gave way as the visitor's started: its stream was closed (the engine's loop stops
    # within one step), and the page it was writing is not stored.
    assert engine.cancelled == 1 and not stored(client, "/Lisp_tree")
    # The newest page shown says what is read ahead next.
    assert eventually(lambda: stored(client, "/Unix_tree"), within=30)
    assert not stored(client, "/Lisp_tree")


def test_a_visitor_who_opens_the_page_being_read_ahead_watches_it_land(reading: Reading) -> None:
    engine = FakeEngine(steps=20, delay=0.02)
    client = reading(1, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: len(engine.calls) == 2)
    response = client.get("/Lisp_tree", headers={"HX-Request": "true"})
    assert 'ws-connect="/_genui/ws?site=wiki&amp;url=%2FLisp_tree&amp;v=1&amp;' in response.text
    messages = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp_tree&v=1")
    assert "Lisp tree is a topic in computing" in messages[-1]
    assert engine.cancelled == 0 and titles(engine).count("Lisp tree") == 1
    # The page the visitor moved on to reads ahead in turn.
    assert eventually(lambda: stored(client, "/Lisp_tree_tree"), within=30)


def test_without_reading_ahead_only_what_visitors_ask_for_is_written(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(0, engine)
    visit(client, "/Lisp")
    time.sleep(0.3)
    assert len(engine.calls) == 1 and not stored(client, "/Lisp_tree")


def test_the_links_read_ahead_are_genuis_navigation_in_document_order() -> None:
    html = (
        '<p><a href="/B" hx-get="/B">B</a> <a href="/A" hx-get="/A">A</a> <a href="/B" hx-get="/B">B</a></p>'
        '<a href="#top">top</a><a href="/C" hx-get="/C#x">C</a>'
    )
    assert linked_urls(html) == ["/B", "/A", "/C#x"]


def served_links(*urls: str) -> str:
    """A finished page linking to ``urls`` with genui's navigation, in that order."""
    return "".join(f'<a href="{url}" hx-get="{url}">{url}</a>' for url in urls)


@pytest.mark.parametrize("search_cache", ["forever", "none"])
async def test_the_reading_list_is_this_sites_cached_routes_each_page_once_then_the_navigation(
    tmp_path: Path, wiki: Site, search_cache: str
) -> None:
    routes = tuple(replace(route, cache=search_cache) if route.pattern == "/search" else route for route in wiki.routes)
    runtime = SiteRuntime.build(replace(wiki, routes=routes), "/wiki")  # beside other sites, as `genui serve` mounts it
    pages = Pages([runtime], Store(tmp_path / "pages.sqlite3"), FakeEngine())
    front = runtime.locate("/")
    assert front is not None
    html = served_links(
        "/forum/",  # another site's front page
        "/wikiwiki/Lisp",  # under no mount of this site
        "/_genui/wait?site=wiki&url=/Lisp",  # genui's own endpoint, not a page
        "/wiki/../Lisp",  # malformed: a dot segment
        "/wiki/Lisp/History",  # a path no route serves
        "/wiki/",  # the page itself
        "/wiki/Unix",
        "/wiki/Unix#History",  # the same page again
        "/wiki/search?q=lisp&from=feed",
        "/wiki/search?q=lisp",  # the same page again: `from` is no query key of the route
    )

    def listed(links: int) -> list[str]:
        jobs = reading_list(pages, pages.job(runtime, front), html, links)
        assert all(job.parent_url == "/" for job in jobs)  # each as a click on the link from this page would be
        return [job.url for job in jobs]

    search = ["/wiki/search?q=lisp"] if search_cache == "forever" else []  # a route never stored is never read ahead
    # The site's navigation below the page ("Start with"), less Unix: the model's link to it came first.
    navigation = ["/wiki/Hacker", "/wiki/Hash_table", "/wiki/Lisp", "/wiki/Regular_expression", "/wiki/Turing_machine"]
    assert listed(10) == ["/wiki/Unix", *search, *navigation]
    assert listed(3) == ["/wiki/Unix", *search, *navigation][:3]  # the first N, and no more
    await pages.close()


# -- the reader against Pages directly: visitors who come and go, an engine slow to close, shutdown --------------


class Paced(FakeEngine):
    """Writes pages whose prompt holds ``slow`` a frame every 0.05 s (20 steps a canvas), the rest at once; and with
    ``closing`` seconds, takes that long to close a stream, as an engine that waits for its worker would."""

    def __init__(self, slow: str = "\0", closing: float = 0.0, writer: Writer = wiki_writer) -> None:
        super().__init__(writer, steps=20)
        self.slow, self.closing = slow, closing

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        inner = super().stream(request)
        pause = 0.05 if self.slow in request.prompt else 0.0

        async def frames() -> AsyncIterator[Frame]:
            try:
                async with contextlib.aclosing(inner):
                    async for frame in inner:
                        yield frame
                        await asyncio.sleep(pause)
            finally:
                await asyncio.sleep(self.closing)

        return frames()


@pytest.fixture
def wiki_pages(tmp_path: Path, wiki: Site) -> Callable[..., Pages]:
    def make(engine: FakeEngine, read_ahead: int) -> Pages:
        return Pages([SiteRuntime.build(wiki, "")], Store(tmp_path / "pages.sqlite3"), engine, read_ahead=read_ahead)

    return make


def page_job(pages: Pages, url: str, parent: str | None = None) -> Job:
    runtime = pages.sites["wiki"]
    location = runtime.locate(url)
    assert location is not None
    return pages.job(runtime, location, parent)


async def written(pages: Pages, url: str) -> None:
    """A visitor's page: opened, and watched until it is written."""
    run = pages.open(page_job(pages, url))
    assert isinstance(run, Generation)
    await run.result()


async def until(check: Callable[[], bool], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return check()


async def test_pages_read_ahead_are_not_read_ahead_from_even_when_a_stream_is_slow_to_close(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(closing=0.01)  # the reader starts its next page before the last one's run has ended
    pages = wiki_pages(engine, 2)
    await written(pages, "/Lisp")
    await asyncio.sleep(1.0)
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map"]
    await pages.close()


async def test_a_visitor_who_opened_the_page_read_ahead_and_left_no_longer_holds_it(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="tree")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: len(engine.calls) == 2)  # /Lisp_tree is being read ahead
    joined = pages.open(page_job(pages, "/Lisp_tree", "/Lisp"))
    assert isinstance(joined, Generation) and titles(engine).count("Lisp tree") == 1
    watching = asyncio.ensure_future(joined.result())
    await asyncio.sleep(0.1)
    other = pages.open(page_job(pages, "/Unix_tree"))  # another visitor: the page read ahead is watched, so it goes on
    other_watch = asyncio.ensure_future(other.result())  # type: ignore[union-attr]
    await asyncio.sleep(0.3)
    assert engine.cancelled == 0
    watching.cancel()  # the visitor who opened it leaves: the other visitor's run is waiting
    assert await until(lambda: engine.cancelled == 1, within=3.0)
    assert not joined.finished or joined.page is None
    await other_watch
    await pages.close()


async def test_closing_as_a_visitors_run_ends_stops_the_reader_and_starts_nothing(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="Unix")
    pages = wiki_pages(engine, 1)
    busy = pages.open(page_job(pages, "/Unix"))
    assert isinstance(busy, Generation)
    busy_watch = asyncio.ensure_future(busy.result())
    await written(pages, "/Lisp")
    await asyncio.sleep(0.05)  # the reader has /Lisp_tree to read and waits: a visitor's run is under way
    pages.reader.ended()  # a run ends as shutdown begins
    await asyncio.sleep(0)
    await asyncio.wait_for(pages.close(), 5)
    assert titles(engine) == ["Unix", "Lisp"]
    busy_watch.cancel()


async def test_a_page_opened_then_left_for_a_newer_one_does_not_say_what_to_read_next(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="tree")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Unix")
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.open(page_job(pages, "/Lisp_tree", "/Lisp"))  # a visitor opens it (and never watches)...
    pages.open(page_job(pages, "/Unix"))  # ...and is shown a stored page after: its link is what comes next
    assert await until(lambda: pages.reader.reading == "/Unix_tree")
    assert "Lisp tree tree" not in titles(engine)
    await pages.close()


async def test_a_visitor_who_opened_the_page_read_ahead_keeps_it_while_their_stream_connects(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="tree")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Unix")
    assert await until(lambda: pages.versions(page_job(pages, "/Unix_tree")) > 0 and not pages.busy())
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    joined = pages.open(page_job(pages, "/Lisp_tree", "/Lisp"))  # the page comes back with its placeholder...
    pages.open(page_job(pages, "/Unix"))  # (a third visitor is shown a stored page meanwhile: a newer list)
    other = pages.open(page_job(pages, "/Hacker"))  # ...another visitor's run starts before its stream connects
    await asyncio.sleep(0.3)
    assert isinstance(joined, Generation) and isinstance(other, Generation)
    page = await joined.result()  # the stream connects, and watches the page land
    assert page.title == "Lisp tree" and engine.cancelled == 0
    await other.result()
    await pages.close()


async def test_a_page_that_gave_way_is_not_put_before_a_newer_pages_links(wiki_pages: Callable[..., Pages]) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Unix")
    assert await until(lambda: pages.versions(page_job(pages, "/Unix_tree")) > 0 and not pages.busy())
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    go = pages.open(page_job(pages, "/Go"))  # one visitor's click: the reader gives way
    pages.open(page_job(pages, "/Unix_tree"))  # another visitor, shown a stored page in the same turn
    assert isinstance(go, Generation)
    go.cancel()  # the clicker leaves: the engine is free, and no page of theirs says what to read
    assert await until(lambda: pages.reader.reading == "/Unix_tree_tree", within=5)
    assert titles(engine).count("Lisp tree") == 1  # not started again before the newer page's link
    await pages.close()


def test_the_list_of_sites_has_the_first_sites_front_pages_read_ahead(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine, read_ahead=2)
    pages = pages_of(client)
    first, second, third = list(pages.sites)[:3]

    def front_stored(site: str) -> bool:
        def look() -> bool:
            runtime = pages.sites[site]
            location = runtime.locate("/")
            assert location is not None
            return pages.versions(pages.job(runtime, location)) > 0

        assert client.portal is not None
        return client.portal.call(look)

    assert client.head("/").status_code == 200  # a HEAD of the list reads nothing ahead: no list, no run
    assert pages.reader._lists == 0 and engine.calls == []
    assert client.get("/").status_code == 200
    assert eventually(lambda: front_stored(first) and front_stored(second) and idle(client))
    # The first two, as the list shows them: the third site's front page waits for a visitor.
    assert not front_stored(third) and len(engine.calls) == 2
    # A visitor who opens one is served the page read ahead, whole.
    response = client.get(f"/{first}/", headers={"HX-Request": "true"})
    assert wait_url(response) is None and "ws-connect" not in response.text
    front = engine.calls[0]
    assert [call for call in engine.calls if call == front] == [front]  # never written again


# -- hints: the link a visitor's pointer rests on ------------------------------------------------------------------


def wide_writer(prompt: str, seed: int) -> str:
    """``wiki_writer``'s page with two more links, to Unix and Go: more links than the list reads ahead."""
    more = '<li><a href="/wiki/Unix">Unix</a></li><li><a href="/wiki/Go">Go</a></li></ul>'
    return wiki_writer(prompt, seed).replace("</ul>", more)


async def test_a_link_pointed_at_is_read_ahead_next_and_the_list_gives_way_to_it(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)  # the list holds /Lisp's first link only
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.reader.hinted(page_job(pages, "/Lisp_map", parent="/Lisp"))
    assert await until(lambda: pages.reader.reading == "/Lisp_map")
    assert engine.cancelled == 1  # the run read ahead from the list gave way at once
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_tree")) > 0 and not pages.busy(), within=20)
    # The hinted page first, then the list's page again, each written once to the end.
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map", "Lisp tree"]
    assert pages.versions(page_job(pages, "/Lisp_map")) == 1
    assert "<from>Lisp</from>" in engine.calls[2].prompt  # as the click from /Lisp would write it
    await pages.close()


async def hint_running(wiki_pages: Callable[..., Pages]) -> tuple[Paced, Pages]:
    """/Lisp written, its list's first link being read ahead, then a hint on its /Lisp_map link: that one's run."""
    engine = Paced(slow="<title>", writer=wide_writer)
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.reader.hinted(page_job(pages, "/Lisp_map", parent="/Lisp"))
    assert await until(lambda: pages.reader.reading == "/Lisp_map")
    return engine, pages


async def test_a_newer_hint_waits_for_the_run_an_earlier_hint_started(wiki_pages: Callable[..., Pages]) -> None:
    engine, pages = await hint_running(wiki_pages)
    pages.reader.hinted(page_job(pages, "/Unix", parent="/Lisp"))  # the pointer moved on to another link
    pages.reader.hinted(page_job(pages, "/Go", parent="/Lisp"))  # and on again: only the newest hint is kept
    await asyncio.sleep(0.2)
    assert pages.reader.reading == "/Lisp_map" and engine.cancelled == 1
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_tree")) > 0 and not pages.busy(), within=30)
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map", "Go", "Lisp tree"]
    await pages.close()


async def test_a_hint_writes_nothing_stored_nothing_running_and_nothing_without_reading_ahead(
    wiki_pages: Callable[..., Pages], tmp_path: Path, wiki: Site
) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.reader.hinted(page_job(pages, "/Lisp_tree", parent="/Lisp"))  # the very page being read ahead
    pages.reader.hinted(page_job(pages, "/Lisp"))  # a stored page
    await asyncio.sleep(0.2)
    assert pages.reader.reading == "/Lisp_tree" and engine.cancelled == 0
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_tree")) > 0 and not pages.busy(), within=20)
    assert titles(engine) == ["Lisp", "Lisp tree"]
    await pages.close()

    quiet = FakeEngine()
    off = Pages([SiteRuntime.build(wiki, "")], Store(tmp_path / "off.sqlite3"), quiet, read_ahead=0)
    await written(off, "/Lisp")
    off.reader.hinted(page_job(off, "/Lisp_map", parent="/Lisp"))
    await asyncio.sleep(0.2)
    assert titles(quiet) == ["Lisp"]
    await off.close()


def test_the_page_script_says_which_link_is_pointed_at_and_genui_writes_it(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(1, engine)
    response = visit(client, "/Lisp")
    assert 'data-genui-hint="/_genui/intent"' in response.text  # where the page's script says it
    assert eventually(lambda: stored(client, "/Lisp_tree") and idle(client))
    assert not stored(client, "/Lisp_map")  # past the first link of the list
    here = {"HX-Current-URL": "http://testserver/Lisp"}
    answer = client.post("/_genui/intent", data={"href": "/Lisp_map"}, headers=here)
    assert answer.status_code == 204 and answer.content == b""
    assert eventually(lambda: stored(client, "/Lisp_map") and idle(client))
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map"]
    assert "<from>Lisp</from>" in engine.calls[-1].prompt  # the page the link is on, as a click names it
    # A link to a stored page (a place in it too), to another server, or to an address of no page: nothing.
    for href in ("/Lisp_map", "/Lisp_map#History", "http://elsewhere.example/Lisp_x", "//elsewhere.example/x", "/a/b"):
        assert client.post("/_genui/intent", data={"href": href}, headers=here).status_code == 204
    time.sleep(0.3)
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map"]


def test_a_malformed_or_foreign_hint_is_refused_and_starts_nothing(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(1, engine)
    visit(client, "/Lisp")
    assert eventually(lambda: idle(client))
    calls = len(engine.calls)
    foreign = {"Origin": "http://evil.example"}
    assert client.post("/_genui/intent", data={"href": "/Lisp_map"}, headers=foreign).status_code == 403
    assert client.post("/_genui/intent", data={}).status_code == 400  # no href
    assert client.post("/_genui/intent", data={"href": "/" + "x" * 600}).status_code == 400  # too long
    assert client.post("/_genui/intent", data={"href": "/../Lisp_map"}).status_code == 400  # a dot segment
    assert client.post("/_genui/intent", data={"href": "http://[/x"}).status_code == 400  # no URL
    assert client.get("/_genui/intent").status_code == 404  # a GET changes nothing: no page lives there
    time.sleep(0.3)
    assert len(engine.calls) == calls


def test_without_reading_ahead_pages_say_no_hints_and_a_hint_writes_nothing(reading: Reading) -> None:
    engine = FakeEngine()
    client = reading(0, engine)
    assert "data-genui-hint" not in visit(client, "/Lisp").text
    assert client.post("/_genui/intent", data={"href": "/Lisp_map"}).status_code == 204
    assert client.post("/_genui/intent", data={"href": "/../Lisp_map"}).status_code == 400  # malformed all the same
    time.sleep(0.3)
    assert titles(engine) == ["Lisp"]


async def test_a_hint_run_for_a_page_left_behind_gives_way_to_the_newer_pages_hint(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Unix")
    assert await until(lambda: pages.versions(page_job(pages, "/Unix_tree")) > 0 and not pages.busy(), within=20)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.reader.hinted(page_job(pages, "/Lisp_map", parent="/Lisp"))
    assert await until(lambda: pages.reader.reading == "/Lisp_map")
    pages.open(page_job(pages, "/Unix"))  # the visitor went back to a stored page: its links are the ones now
    pages.reader.hinted(page_job(pages, "/Unix_map", parent="/Unix"))
    assert await until(lambda: pages.reader.reading == "/Unix_map")
    assert engine.cancelled == 2  # the older page's hint run gave way too
    assert await until(lambda: pages.versions(page_job(pages, "/Unix_map")) > 0 and not pages.busy(), within=20)
    assert titles(engine) == ["Unix", "Unix tree", "Lisp", "Lisp tree", "Lisp map", "Unix map"]
    await pages.close()


async def test_a_hint_sent_while_its_page_is_written_again_is_kept_when_that_version_lands(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 0)
    await written(pages, "/Unix")
    await written(pages, "/Lisp")
    await asyncio.sleep(0.1)  # the reader hears of the page shown
    pages.reader.links = 1  # reading ahead from here on
    run = pages.generation(page_job(pages, "/Unix"), 2)  # Regenerate: the first version shown while the second is
    pages.reader.hinted(page_job(pages, "/Unix_map", parent="/Unix"))  # written, and one of its links pointed at
    pages.reader.hinted(page_job(pages, "/Lisp_map", parent="/Lisp"))  # and one of another page's, then
    pages.reader.hinted(page_job(pages, "/Unix_map", parent="/Unix?v=1"))  # this page's again, as its URL says
    await run.result()
    pages.reader.shown(page_job(pages, "/Unix"), run.page)  # the visitor is shown the second version
    assert await until(lambda: pages.versions(page_job(pages, "/Unix_tree")) > 0 and not pages.busy(), within=20)
    assert titles(engine) == ["Unix", "Lisp", "Unix", "Unix map", "Unix tree"]  # the hint first, then the list
    await pages.close()


async def test_only_a_link_on_a_page_shown_is_a_hint(wiki_pages: Callable[..., Pages]) -> None:
    """A hint writes no page that a visitor could not have clicked through to: its link must be on the stored page
    its request names (the page's own links or the site's navigation below it)."""
    engine = FakeEngine()
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_tree")) > 0 and not pages.busy())
    for job in (
        page_job(pages, "/Never_linked", parent="/Lisp"),  # no link on /Lisp
        page_job(pages, "/search?q=spam", parent="/Lisp"),
        page_job(pages, "/Lisp_map"),  # no page named
        page_job(pages, "/Lisp_map", parent="/Unix"),  # a page not written
        page_job(pages, "/Lisp_map", parent="/Lisp?v=7"),  # a version not written
    ):
        pages.reader.hinted(job)
    await asyncio.sleep(0.3)
    assert titles(engine) == ["Lisp", "Lisp tree"]
    front = pages.open(page_job(pages, "/"))  # the site's navigation under its front page links to /Hacker
    assert isinstance(front, Generation)
    await front.result()
    pages.reader.hinted(page_job(pages, "/Hacker", parent="/"))
    assert await until(lambda: pages.versions(page_job(pages, "/Hacker")) > 0)
    await pages.close()


async def test_a_hint_for_the_page_the_list_is_reading_keeps_it_from_a_newer_hint(
    wiki_pages: Callable[..., Pages],
) -> None:
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    pages.reader.hinted(page_job(pages, "/Lisp_tree", parent="/Lisp"))  # the pointer rests on it: it is the hint's
    pages.reader.hinted(page_job(pages, "/Lisp_map", parent="/Lisp"))  # on its way back to click it
    await asyncio.sleep(0.2)
    assert pages.reader.reading == "/Lisp_tree" and engine.cancelled == 0
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_map")) > 0 and not pages.busy(), within=20)
    assert titles(engine) == ["Lisp", "Lisp tree", "Lisp map"]
    await pages.close()


async def test_a_page_read_ahead_that_waits_only_to_be_kept_does_not_give_way(
    wiki_pages: Callable[..., Pages], tmp_path: Path
) -> None:
    """Written whole while another process holds the page cache, a page read ahead waits to be kept: the engine is
    done with it, so a visitor's run has nothing to take back, and cancelling it would throw the page away."""
    engine = Paced(slow="<title>")
    pages = wiki_pages(engine, 1)
    await written(pages, "/Lisp")
    assert await until(lambda: pages.reader.reading == "/Lisp_tree")
    run = pages.reader._current
    assert run is not None
    holder = sqlite3.connect(tmp_path / "pages.sqlite3", isolation_level=None)  # genui cache prune --vacuum, say
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert await until(lambda: run.keeping, within=20)
        visitor = pages.open(page_job(pages, "/Unix"))  # a visitor's run: the reader gives way to it, if it can
        assert isinstance(visitor, Generation)
        await asyncio.sleep(1.5)  # and looks again a second later
        assert engine.cancelled == 0 and not run.finished
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_tree")) > 0, within=20)
    await visitor.result()
    await pages.close()


def test_a_page_read_ahead_waits_for_a_visitors_stream_that_is_slow_to_connect(
    client_factory: ClientFactory, wiki: Site
) -> None:
    """A visitor handed the placeholder of the page being read ahead: their stream may connect later than the
    reader's one-second grace (a slow network) while another visitor's run needs the engine. The run waits for them,
    as any run waits for its placeholder's stream (``unclaimed_s``); it was cancelled, and written again from its
    first step once they came (found by review)."""
    engine = FakeEngine(delay=0.2, steps=10)  # a page takes about 4 s
    client = client_factory([wiki], engine, read_ahead=1)
    pages = pages_of(client)
    client.get("/_genui/wait?site=wiki&url=/Lisp")  # /Lisp written and shown: its links are read ahead
    assert eventually(lambda: pages.reader.reading == "/Lisp_tree", 5)
    assert "ws-connect" in client.get("/Lisp_tree", headers=HTMX).text  # its placeholder, handed out
    client.get("/Unix", headers=HTMX)  # another visitor's page needs the engine
    time.sleep(2.5)  # past the reader's grace, well within unclaimed_s
    assert engine.cancelled == 0
    final = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp_tree&v=1")[-1]
    assert "<h1>Lisp tree</h1>" in final and titles(engine).count("Lisp tree") == 1


async def test_a_hint_reads_no_threads_posts_to_find_its_link(tmp_path: Path) -> None:
    """Each link on the page the hint names was made a job, which loads a thread's every post: a board linking to 100
    threads of 1,000 posts took 216 ms of the event loop an intent, and no limit held them back (found by review)."""
    forum = load_site(SITES_DIR / "forum")

    def board(prompt: str, seed: int) -> str:
        return "<ul>" + "".join(f'<li><a href="/r/linux/T{n}">T{n}</a></li>' for n in range(20)) + "</ul>"

    store = Store(tmp_path / "pages.sqlite3")
    pages = Pages([SiteRuntime.build(forum, "")], store, FakeEngine(board, canvas_chars=4096), read_ahead=1)
    runtime = pages.sites["forum"]
    for n in range(20):
        store.add_post("forum", f"/r/linux/T{n}", "ada", "hello")
    shown = runtime.locate("/r/linux")
    assert shown is not None
    run = pages.open(pages.job(runtime, shown))
    assert isinstance(run, Generation)
    await run.result()
    hinted = runtime.locate("/r/linux/Not_linked")
    assert hinted is not None
    job = pages.job(runtime, hinted, "/r/linux")
    read: list[str] = []
    posts = store.posts
    store.posts = lambda site, path: read.append(path) or posts(site, path)  # type: ignore[method-assign]
    pages.reader.hinted(job)
    pages.reader.hinted(pages.job(runtime, runtime.locate("/r/linux/T3") or hinted, "/r/linux"))  # one it links to
    assert read == ["/r/linux/T3"]  # the second hint's own job; finding the link read none
    await pages.close()
    store.close()


async def test_a_hints_run_is_waited_for_though_the_page_its_link_is_on_is_shown_again(
    wiki_pages: Callable[..., Pages],
) -> None:
    """Shown again (a reload, another visitor), the page reset the wait: the next hint on it cancelled the hint's run,
    and the page it was writing was never written (found by review)."""
    engine, pages = await hint_running(wiki_pages)
    pages.open(page_job(pages, "/Lisp"))  # the same page shown again
    pages.reader.hinted(page_job(pages, "/Unix", parent="/Lisp"))  # the pointer moves on, on that page
    await asyncio.sleep(0.2)
    assert pages.reader.reading == "/Lisp_map" and engine.cancelled == 1  # the list's run only
    assert await until(lambda: pages.versions(page_job(pages, "/Lisp_map")) > 0, within=30)
    await pages.close()
