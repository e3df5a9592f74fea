"""One page cache, served by servers that mount a site differently: alone at / (genui serve --site) or beside others
under /name. A stored page's links lead where this server serves them."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine, example_sites, page_html, visit, wiki_writer
from starlette.testclient import TestClient

from genui.app import create_app
from genui.links import remount
from genui.runtime import SiteRuntime
from genui.sites import load_site
from genui.store import PageKey, StoredPage

THREAD_LINKS = re.compile(r'<a href="([^"]+)" hx-get="([^"]+)"')


def links(html: str) -> list[str]:
    """The hx-get of each internal link, checking its href says the same."""
    found = THREAD_LINKS.findall(html)
    assert all(href == get for href, get in found)
    return [get for _, get in found]


def board_or_wiki(prompt: str, seed: int) -> str:
    """A board that goes on from its opening's first thread link and links another board's thread; else a wiki
    page (whose /wiki/ links a forum has no route for)."""
    if "<page>board</page>" in prompt:
        return 'Lisp_at_work">Lisp at work</a></li>\n<li><a href="/r/lisp/Macros">Macros</a></li>\n</ul>\n</div>'
    return wiki_writer(prompt, seed)


def serve(db: Path, alone: str | None) -> TestClient:
    sites = [load_site(SITES_DIR / alone)] if alone else example_sites()
    return TestClient(create_app(sites, FakeEngine(board_or_wiki), db_path=db))


def page_links(client: TestClient, url: str) -> list[str]:
    return links(page_html(visit(client, url).text))  # the page itself, not the site's bar or navigation


@pytest.mark.parametrize(
    ("site", "mounted", "alone"),
    [("forum", "/forum/r/hacking", "/r/hacking"), ("wiki", "/wiki/Lisp", "/Lisp")],
)
def test_a_page_cached_by_one_mount_links_right_under_the_other(
    tmp_path: Path, site: str, mounted: str, alone: str
) -> None:
    db = tmp_path / "genui.sqlite3"
    with serve(db, None) as client:
        written = page_links(client, mounted)
    assert written and all(url.startswith(f"/{site}/") for url in written)
    with serve(db, site) as client:
        shown = page_links(client, alone)
        assert shown == [url.removeprefix(f"/{site}") for url in written]
    runtime = SiteRuntime.build(load_site(SITES_DIR / site), "")
    assert all(runtime.locate(url) is not None for url in shown)  # pages this server serves
    with serve(db, None) as client:  # and back again
        assert page_links(client, mounted) == written
    rows = sqlite3.connect(db).execute("SELECT DISTINCT mount FROM pages").fetchall()
    assert rows == [(f"/{site}",)]  # stored once, by the first server: nothing was written again


def test_a_page_is_moved_only_from_a_mount_it_was_stored_with() -> None:
    forum = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    html = '<p><a href="/forum/r/lisp" hx-get="/forum/r/lisp">Lisp</a> it&#39;s</p>'
    page = StoredPage(PageKey("forum", "/r/hacking", "", "m", "t"), 1, 0, "", html, 0.1, 0.0, mount="/forum")
    moved = forum.remounted(page)
    assert links(moved.html) == ["/r/lisp"] and moved.mount == ""
    assert forum.remounted(moved) is moved  # already this server's: the very same page, not a copy
    assert forum.remounted(replace(page, mount=None)).html == html  # from before mounts were stored: as it is


def test_remount_moves_internal_links_and_leaves_the_rest() -> None:
    html = (
        '<p><a href="/wiki/search?q=a&amp;b=c" hx-get="/wiki/search?q=a&amp;b=c" hx-target="#genui-main">s</a>'
        ' <a href="#gen-History">History</a> /wiki/Lisp in text &lt;b&gt;</p>'
    )
    moved = remount(html, "/wiki", "")
    assert '<a href="/search?q=a&amp;b=c" hx-get="/search?q=a&amp;b=c" hx-target="#genui-main">s</a>' in moved
    assert '<a href="#gen-History">History</a> /wiki/Lisp in text &lt;b&gt;</p>' in moved
    assert remount(moved, "", "/wiki") == html
