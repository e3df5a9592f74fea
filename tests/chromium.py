"""Debian's Chromium as every browser test launches it (never a downloaded browser), and genui served to it."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
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


# Closing a context hung for ever in 2 of 3 runs of test_browser.py (or its first 49 tests) here, a page's Back
# having just loaded it anew: Playwright's BrowserContext.close, which has no timeout, never answered. CI waited on it
# for its whole 90 minutes.
CLOSE_SECONDS = 20.0


def _descendants() -> set[psutil.Process]:
    """This process's processes, and theirs: Playwright's drivers, the Chromium each launched."""
    return set(psutil.Process().children(recursive=True))


def _browser_process(before: set[psutil.Process]) -> psutil.Process | None:
    """The Chromium launched since ``before`` (this process's descendants then): the new process that is Chromium,
    a Playwright driver's child (/usr/bin/chromium, a script, runs /usr/lib/chromium/chromium in its place)."""
    for process in _descendants() - before:
        with contextlib.suppress(psutil.Error):
            if process.name() == "chromium" and process.parent() in before:
                return process
    return None


@contextlib.contextmanager
def launched(playwright: Any) -> Iterator[Any]:
    """Chromium (``launch``), closed on the way out: its contexts, then itself. A close that takes more than
    CLOSE_SECONDS kills this browser's processes (its renderers and helpers with it), so Playwright's close returns
    as for a crashed browser, and says so on stderr: the test's own checks have passed by then, and the next test
    gets a browser of its own."""
    from playwright import sync_api

    before = _descendants()  # Playwright's driver is running already
    browser = launch(playwright)
    chromium = _browser_process(before)
    launched_with = _descendants() - before  # where Chromium is not found so: whatever this launch started
    try:
        yield browser
    finally:
        killed: list[psutil.Process] = []

        def kill() -> None:
            processes = list(launched_with)
            if chromium is not None:
                with contextlib.suppress(psutil.Error):
                    processes = [chromium, *chromium.children(recursive=True)]  # as they are now: renderers too
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    process.kill()
                    killed.append(process)

        watchdog = threading.Timer(CLOSE_SECONDS, kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            for context in browser.contexts:
                context.close()
            browser.close()
        except sync_api.Error:
            if not killed:
                raise
        finally:
            watchdog.cancel()
            watchdog.join()  # a kill under way has ended: ``killed`` is whole
        if killed:
            print(f"chromium.py: Chromium did not close in {CLOSE_SECONDS:.0f} s; killed it", file=sys.stderr)


@contextlib.contextmanager
def browser_page(**context_options: Any) -> Iterator[Any]:
    """A fresh Chromium page that reports CSP violations as console errors (launch: fails without Debian's chromium).

    ``context_options`` go to Playwright's ``new_context`` (``java_script_enabled=False``: a browser without scripts).
    """
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright, launched(playwright) as browser:
        context = browser.new_context(**context_options)
        context.add_init_script(REPORT_CSP)
        yield context.new_page()


def collect_problems(page: Any) -> list[str]:
    """Console errors (CSP violations included) and uncaught page errors, as they happen."""
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems
