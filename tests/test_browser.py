"""genui in a real browser: Debian's Chromium, driven by Playwright, against uvicorn serving the example sites.

The engine is a slow FakeEngine, so the denoising frames stay on screen long enough to be seen. Never run
`playwright install`: the test drives /usr/bin/chromium.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from chromium import CHROMIUM, CHROMIUM_ARGS
from fakes import SITES_DIR, FakeEngine, wiki_writer

from genui.app import create_app
from genui.sites import load_sites

pytestmark = pytest.mark.browser

# Runs before any page script, on every document: CSP violations become console errors, which the test collects.
REPORT_CSP = """
document.addEventListener('securitypolicyviolation', (e) => {
  console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
}, true);
"""


@dataclass
class Server:
    url: str
    engine: FakeEngine


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    # Headings the URL does not predict, so the test sees the finished page's own title reach the document.
    engine = FakeEngine(lambda p, s: wiki_writer(p, s).replace("</h1>", " (topic)</h1>"), delay=0.12, steps=4)
    app = create_app(load_sites(SITES_DIR), engine, db_path=tmp_path / "pages.sqlite3")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws="websockets-sansio", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    thread = threading.Thread(target=uvicorn_server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uvicorn_server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield Server(f"http://127.0.0.1:{port}", engine)
    uvicorn_server.should_exit = True
    thread.join(timeout=10)
    listener.close()


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (./dev setup installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context()
        context.add_init_script(REPORT_CSP)
        yield context.new_page()
        context.close()
        browser.close()


def test_browse_the_wiki_watch_a_page_denoise_and_go_back(server: Server, page: Any) -> None:
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    page.goto(server.url + "/")
    page.click("text=Genpedia")
    page.wait_for_url(server.url + "/wiki/")
    assert page.text_content(".genui-page h1") == "Genpedia (topic)"
    assert len(server.engine.calls) == 1  # a plain visit is served finished

    page.click("text=Genpedia tree")
    draft = page.wait_for_selector("#genui-draft[data-step]", timeout=10_000)
    assert draft is not None
    assert "canvas" in (page.text_content("#genui-progress") or "")
    assert page.query_selector("#genui-content:not(.genui-live)") is None  # a draft is on screen, not the final
    page.wait_for_selector("#genui-content:not(.genui-live) .genui-page h1", timeout=15_000)
    assert page.text_content(".genui-page h1") == "Genpedia tree (topic)"
    assert page.url == server.url + "/wiki/wiki/Genpedia_tree"
    assert page.title() == "Genpedia tree (topic) — Genpedia"
    assert page.query_selector("[ws-connect]") is None and len(server.engine.calls) == 2

    page.go_back()
    page.wait_for_function(
        "document.querySelector('.genui-page h1')?.textContent === 'Genpedia (topic)'", timeout=10_000
    )
    assert page.url == server.url + "/wiki/"
    assert len(server.engine.calls) == 2  # the earlier page came back from the cache

    page.go_forward()
    page.wait_for_function("document.querySelector('.genui-page h1')?.textContent === 'Genpedia tree (topic)'")
    assert len(server.engine.calls) == 2
    assert problems == []
