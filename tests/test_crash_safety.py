"""Crash safety of what genui stores (readers' posts, the page cache), with the harness in tests/crash_harness.py."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from crash_harness import CrashHarness, ForumPosts, GeneratedPages, checksum_writer, page_problem
from fakes import SITES_DIR, FakeEngine, example_sites

from genui.app import create_app
from genui.pages import SiteRuntime
from genui.sites import load_site

PAGE = checksum_writer("<title>Crash 1</title>", 3)


def test_a_checksum_page_comes_through_sanitising_unchanged() -> None:
    runtime = SiteRuntime.build(load_site(SITES_DIR / "wiki"), "/wiki")
    assert runtime.render(PAGE) == PAGE and page_problem(PAGE) is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda page: page[: len(page) // 2],
        lambda page: page.replace("Paragraph 3", "Paragraph 4", 1),
        lambda page: page.split("<footer")[0],
        lambda page: page + "<p>more</p>",
        lambda page: page.replace("<p>", "", 1),
    ],
    ids=["cut-in-half", "altered", "no-footer", "trailing-text", "tag-lost"],
)
def test_a_torn_or_altered_page_fails_the_checksum(damage: Callable[[str], str]) -> None:
    assert page_problem(damage(PAGE)) is not None


def test_the_verifiers_find_a_lost_post_and_a_corrupt_page(tmp_path: Path) -> None:
    """The harness is only as good as its checks: tamper with the database behind the app and they must say so."""
    db = tmp_path / "db.sqlite3"
    app = create_app(example_sites(), FakeEngine(checksum_writer, canvas_chars=4096), db_path=db)
    posts, pages = ForumPosts(writers=2, threads=2), GeneratedPages(clients=1)

    async def drive_then_verify() -> list[str]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            stop = asyncio.Event()
            driving = asyncio.ensure_future(asyncio.gather(posts.drive(client, 0, stop), pages.drive(client, 0, stop)))
            while len(posts.acknowledged) < 6 or not any(v >= 2 for v in pages.versions.values()):
                await asyncio.sleep(0.01)  # posts, and a regeneration served whole
            stop.set()
            await driving
            assert await posts.verify(client, db) == [] and await pages.verify(client, db) == []
            with sqlite3.connect(db) as tamper:
                tamper.execute("DELETE FROM posts WHERE id = (SELECT MIN(id) FROM posts)")
                tamper.execute("UPDATE pages SET html = substr(html, 1, length(html) / 2) WHERE rowid = 1")
                tamper.execute("DELETE FROM pages WHERE version >= 2")  # a regeneration's version lost
            return await posts.verify(client, db) + await pages.verify(client, db)

    problems = asyncio.run(asyncio.wait_for(drive_then_verify(), 60))
    assert any("acknowledged post lost" in problem for problem in problems), problems
    assert any("no checksum footer" in problem for problem in problems), problems
    assert any("?v=2: served whole before the kill, missing" in problem for problem in problems), problems


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_write_and_serves_no_torn_page(tmp_path: Path) -> None:
    report = CrashHarness(tmp_path, seed=1).run([ForumPosts(), GeneratedPages()], cycles=3)
    assert report.problems == []
    posts, pages = report.counts["posts"], report.counts["pages"]
    assert posts["acknowledged"] > 0 and pages["acknowledged"] > 0 and pages["verified_after_restart"] > 0
    assert posts["in_flight_at_kill"] + pages["in_flight_at_kill"] > 0  # the kills landed mid-request
