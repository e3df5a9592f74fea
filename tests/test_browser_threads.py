"""A thread read by several readers at once, in Chromium: the posts others make while it is on screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import browser_page, collect_problems, served
from fakes import FakeEngine, example_sites, wiki_writer

from genui.app import create_app

pytestmark = pytest.mark.browser
FINISHED = "#genui-content:not(.genui-live) .genui-page h1"
THREAD = "/forum/r/linux/Pipes"
ASK_NOW = "() => document.dispatchEvent(new Event('visibilitychange'))"  # as the tab is seen again: asked at once


def post(page: object, user: str, text: str) -> None:
    page.fill(".genui-reply input[name=user]", user)  # type: ignore[attr-defined]
    page.fill(".genui-reply textarea[name=text]", text)  # type: ignore[attr-defined]
    page.click(".genui-reply button[type=submit]")  # type: ignore[attr-defined]


def test_a_reader_is_told_of_posts_made_to_the_thread_on_screen_and_shown_them_at_the_first(tmp_path: Path) -> None:
    """A class reading one thread saw none of the others' posts until each reloaded it (a teacher's review)."""
    app = create_app(example_sites(), FakeEngine(wiki_writer, delay=0.01), db_path=tmp_path / "pages.sqlite3")
    with served(app) as url, browser_page() as reader:
        problems = collect_problems(reader)
        reader.goto(url + THREAD)
        reader.wait_for_selector(FINISHED, timeout=15_000)
        reader.evaluate(ASK_NOW)
        reader.wait_for_timeout(500)
        assert reader.query_selector("#genui-news") is None  # nothing posted since: nothing said

        other = reader.context.new_page()
        other.goto(url + THREAD)
        other.wait_for_selector(FINISHED, timeout=15_000)
        post(other, "bea", "Pipes are fun")
        other.wait_for_selector(".genui-post:has-text('Pipes are fun')", timeout=15_000)

        reader.evaluate(ASK_NOW)
        line = reader.wait_for_selector("#genui-news[role=status]", timeout=5_000)
        assert line is not None and "A reader posted to this thread since it was shown." in (line.text_content() or "")
        assert reader.query_selector(".genui-post:has-text('Pipes are fun')") is None  # nothing loaded by itself

        # Typing a reply: the link would lose it, so the line says that posting shows them.
        reader.fill(".genui-reply textarea[name=text]", "Half a thought")
        assert reader.is_hidden("#genui-news a") and reader.is_visible("#genui-news .genui-news-typing")
        reader.fill(".genui-reply textarea[name=text]", "")
        assert reader.is_visible("#genui-news a") and reader.is_hidden("#genui-news .genui-news-typing")

        # A second post since: the count is said anew.
        post(other, "cy", "Me too")
        other.wait_for_selector(".genui-post:has-text('Me too')", timeout=15_000)
        reader.evaluate(ASK_NOW)
        reader.wait_for_selector("#genui-news:has-text('2 posts were made')", timeout=5_000)

        reader.click("#genui-news a")
        reader.wait_for_selector(".genui-post:has-text('Pipes are fun')", timeout=15_000)
        assert (
            reader.query_selector("#genui-news") is None
            and reader.query_selector(".genui-post:has-text('Me too')") is not None
        )
        first = reader.evaluate("document.querySelector('.genui-post').getBoundingClientRect().top")
        assert 0 <= first < 200  # shown at the first post made since, not at the page's top
        reader.evaluate(ASK_NOW)
        reader.wait_for_timeout(500)
        assert reader.query_selector("#genui-news") is None  # the thread as it is now: nothing new
        assert problems == []


def test_a_name_in_a_right_to_left_script_keeps_its_posts_time_after_it(tmp_path: Path) -> None:
    """A Hebrew or Arabic name took the time's first digits into its own run where the time begins with one (a
    browser that writes dates day first, a copy's UTC time): "02 · שלום.12.2026, 00:50", where it is
    "שלום · 02.12.2026, 00:50" (the name isolated, as the post's text is)."""
    app = create_app(example_sites(), FakeEngine(wiki_writer, delay=0.01), db_path=tmp_path / "pages.sqlite3")
    with served(app) as url, browser_page(locale="de-DE") as reader:
        problems = collect_problems(reader)
        reader.goto(url + THREAD)
        reader.wait_for_selector(FINISHED, timeout=15_000)
        post(reader, "שלום", "Pipes are fun")
        reader.wait_for_selector(".genui-post:has-text('Pipes are fun')", timeout=15_000)
        reader.wait_for_selector("#genui-content:not(.genui-live)", timeout=15_000)  # its replies written
        name_right, time_left = reader.evaluate(
            """() => {
                const meta = [...document.querySelectorAll('.genui-post')]
                    .find(post => post.textContent.includes('Pipes are fun')).querySelector('.genui-post-meta');
                const range = document.createRange();
                range.selectNodeContents(meta.querySelector('time'));
                const pieces = [...range.getClientRects()].filter(rect => rect.width > 0).map(rect => rect.left);
                const name = meta.querySelector('b').getBoundingClientRect().right;
                return [name, pieces.length ? Math.min(...pieces) : -1];
            }"""
        )
        assert name_right > 0 and time_left > name_right, (name_right, time_left)  # every piece of the time after it
        assert problems == []
