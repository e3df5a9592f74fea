"""Debian's Chromium as every browser test launches it (never a downloaded browser), and genui served to it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette

CHROMIUM = Path("/usr/bin/chromium")
# Headless as root, and nothing that phones home: the machines' network is closed beyond the package registries.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

# Runs before any page script, on every document: CSP violations become console errors, which tests collect.
REPORT_CSP = """
document.addEventListener('securitypolicyviolation', (e) => {
  console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
}, true);
"""


@contextlib.contextmanager
def served(app: Starlette, start_seconds: float = 10.0, config: uvicorn.Config | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free local port (lifespan included); yields its base URL. ``config``: uvicorn's
    settings as genui serve makes them (its app served), in place of the tests' own."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = config or uvicorn.Config(app, log_level="warning", ws="websockets-sansio", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_seconds
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()


def wait_ready(url: str, seconds: float) -> None:
    """Wait until the app at ``url`` has its model loaded (``/_genui/health`` answers 200; 503 while it loads)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url + "/_genui/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as error:
            assert error.code == 503, f"/_genui/health answered {error.code}"
        assert time.monotonic() < deadline, "the model did not load in time"
        time.sleep(0.5)


# The test being set up now (conftest.py's pytest_runtest_setup): a test that opens Chromium must be marked browser.
RUNNING: list[pytest.Item] = []


def launch(playwright: Any) -> Any:
    """Debian's Chromium, launched by Playwright with CHROMIUM_ARGS. Fails (never skips: a browser test skipped on a
    fresh clone tests nothing) without it, and in a test not marked ``browser``, which ``-m "not browser"`` would
    otherwise run (a contributor's quick run, on a machine without Chromium, failed on two such tests)."""
    if RUNNING and RUNNING[-1].get_closest_marker("browser") is None:
        pytest.fail(f"{RUNNING[-1].nodeid} opens Chromium: mark it @pytest.mark.browser (or its module's pytestmark)")
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed at /usr/bin/chromium (./dev setup installs it)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


@contextlib.contextmanager
def browser_page(**context_options: Any) -> Iterator[Any]:
    """A fresh Chromium page that reports CSP violations as console errors (launch: fails without Debian's chromium).

    ``context_options`` go to Playwright's ``new_context`` (``java_script_enabled=False``: a browser without scripts).
    """
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(**context_options)
        context.add_init_script(REPORT_CSP)
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def collect_problems(page: Any) -> list[str]:
    """Console errors (CSP violations included) and uncaught page errors, as they happen."""
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems
