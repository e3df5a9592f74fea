"""The README's main job in a real browser: the example sites on the shipped model, a click, a live stream, back.

Everything is real here: the checkpoint in models/, the engine's scheduler, uvicorn, the vendored htmx and its
WebSocket extension, Debian's Chromium. On a 2-core CPU a page takes seconds, so the waits are long.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from chromium import browser_page, collect_problems, served, wait_ready
from fakes import example_sites

from genui.app import create_app

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.slow]

ARTICLE = re.compile(r"^/wiki/(?!search$)[^/?#]+$")  # a wiki article under genui serve; /wiki/search is not one
WAIT_MS = 240_000


def shows(page: Any, html: str, seconds: float = 60.0) -> None:
    """Wait until the page shows ``html`` (polled from here: wait_for_function may use eval, which the CSP reports)."""
    deadline = time.monotonic() + seconds
    while page.inner_html(".genui-page") != html:
        assert time.monotonic() < deadline, "the page did not come back"
        time.sleep(0.1)


def test_browse_the_generated_wiki_on_the_shipped_model(tmp_path: Path) -> None:
    app = create_app(example_sites(), db_path=tmp_path / "pages.sqlite3")  # the default model, loaded at start
    with served(app) as url, browser_page() as page:
        wait_ready(url, 180)
        page.set_default_timeout(WAIT_MS)
        problems = collect_problems(page)
        page.goto(url + "/")
        page.click("text=Genpedia")  # a plain visit: the shell at once, the home page denoising in it
        page.wait_for_url(url + "/wiki/")
        page.wait_for_selector("#genui-content:not(.genui-live) .genui-page")  # then the finished page
        home = page.inner_html(".genui-page")
        links = [
            link
            # the model's own links first, then the ways on genui adds below every page ([[navigation]])
            for link in page.query_selector_all(".genui-page a[hx-get], #genui-navigation a[hx-get]")
            if ARTICLE.match(link.get_attribute("hx-get") or "") and link.is_visible()
        ]
        assert links, "the wiki home leads to no article"
        target = links[0].get_attribute("href")
        assert target == links[0].get_attribute("hx-get")

        links[0].click()
        page.wait_for_selector("#genui-draft[data-step]")  # a denoising frame on screen
        page.wait_for_selector("#genui-content:not(.genui-live) .genui-page")  # then the finished page
        assert page.url == url + target
        assert page.query_selector("[ws-connect]") is None
        article = page.inner_html(".genui-page")
        assert article != home

        page.go_back()
        page.wait_for_url(url + "/wiki/")
        shows(page, home)
        page.go_forward()
        shows(page, article)
        assert problems == []
