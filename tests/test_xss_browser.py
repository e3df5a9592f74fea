"""The XSS corpora in a real browser: sanitised payloads swapped in by the vendored htmx under the production CSP.

A tiny Starlette app serves a page shell (the production security headers, the HTMX_CONFIG meta tag, and
/static/htmx.min.js from this repository) and one endpoint that answers `sanitize_html(payload)` as an htmx fragment.
Headless Chromium loads the shell once per payload file and has htmx swap every payload in, one after the other;
after each swap the test fires the usual events on every new element. Detectors: calls to alert/confirm/prompt/print,
CSP violation reports, htmx requests the harness did not make, hits on /canary, and every network request the page
makes. Positive controls serve raw payloads through the same page and must trip those detectors, so a detector that
has gone quiet fails the run instead of passing it.

Run it with `./dev test tests/test_xss_browser.py` (Debian's /usr/bin/chromium; never `playwright install`).
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from chromium import launched
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from xss_corpus import PAYLOAD_FILES, load_payloads

from genui.sanitize import sanitize_html
from genui.security import CONTENT_SECURITY_POLICY, HTMX_CONFIG, htmx_config_meta, security_headers

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
HTMX_JS = REPO / "static" / "htmx.min.js"

# Raw (unsanitised) markup for the positive controls. Under the CSP nothing in it may run, but the blocked image,
# the blocked inline handler and htmx's request to /canary must all be seen.
CONTROL_UNDER_CSP = (
    '<img src="http://foreign.invalid/x.png" onerror="alert(1)"><div hx-get="/canary" hx-trigger="load">htmx</div>'
)
# Without the CSP the same kind of markup really executes and really leaves for another origin.
CONTROL_WITHOUT_CSP = '<img src="/missing.png" onerror="alert(1)"><img src="http://foreign.invalid/x.png">'

# Installed before any page script: replaces the dialogs with recorders and listens for CSP reports and for htmx
# requests. `current` names the payload being swapped, so every finding can be traced to its payload.
RECORDER_JS = """
window.__xss = {
  current: null, calls: [], violations: [], htmxRequests: [], offsite: [], errors: [], stalled: [], swaps: 0,
};
for (const name of ['alert', 'confirm', 'prompt', 'print']) {
  window[name] = function (...args) {
    window.__xss.calls.push({name, args: args.map(String), current: window.__xss.current});
    return name === 'confirm' ? false : null;
  };
}
document.addEventListener('securitypolicyviolation', (e) => {
  window.__xss.violations.push({
    directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample, current: window.__xss.current,
  });
}, true);
window.addEventListener('error', (e) => {
  if (e instanceof ErrorEvent) window.__xss.errors.push({message: e.message, current: window.__xss.current});
}, true);
document.addEventListener('htmx:afterSwap', (e) => {
  if (e.detail.target && e.detail.target.id === 'target') window.__xss.swaps += 1;
}, true);
document.addEventListener('htmx:beforeRequest', (e) => {
  const path = e.detail.requestConfig.path;
  if (!path.startsWith('/payload/')) window.__xss.htmxRequests.push({path, current: window.__xss.current});
}, true);
"""

# Swaps each URL's fragment into #target with htmx, then pokes every new element. Synthetic events (not real
# clicks) run inline handlers without following links; the links themselves are checked with the browser's own URL
# parser instead.
SWAP_ALL_JS = """
async (urls) => {
  const target = document.getElementById('target');
  const events = ['mouseover', 'mouseenter', 'mousemove', 'focus', 'focusin', 'click', 'dblclick', 'keydown',
                  'animationstart', 'transitionend', 'load', 'error', 'toggle', 'pointerdown'];
  for (const [label, url] of urls) {
    window.__xss.current = label;
    // A swap that never settles must not hang the run: it is a finding of its own.
    const swapped = htmx.ajax('GET', url, {target: '#target', swap: 'innerHTML swap:0ms settle:0ms'});
    const stalled = new Promise((resolve) => setTimeout(() => resolve('stalled'), 5000));
    if (await Promise.race([swapped, stalled]) === 'stalled') window.__xss.stalled.push(label);
    for (const el of target.querySelectorAll('*')) {
      for (const type of events) el.dispatchEvent(new Event(type, {bubbles: true, cancelable: true}));
      if (typeof el.focus === 'function') el.focus();
      if (el.tagName === 'BUTTON' || el.tagName === 'SUMMARY' || el.tagName === 'LABEL') el.click();
      for (const attr of ['href', 'src']) {
        if (!el.hasAttribute(attr)) continue;
        const url = new URL(el.getAttribute(attr), document.baseURI);
        if (url.origin !== location.origin) window.__xss.offsite.push({url: url.href, current: label});
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  await new Promise((resolve) => setTimeout(resolve, 300));  // late image errors, late htmx triggers
  return window.__xss;
}
"""


# ---------------------------------------------------------------------------------------------------------------
# the server


@dataclass
class Server:
    origin: str
    payloads: dict[str, list[str]]
    canary_hits: list[str] = field(default_factory=list)


def _page_shell(csp: bool) -> Response:
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>xss</title>'
        f'<meta name="htmx-config" content="{html.escape(htmx_config_meta())}">'
        '<script src="/static/htmx.min.js"></script></head>'
        '<body><main id="target"></main></body></html>'
    )
    headers = security_headers()
    if not csp:
        del headers["Content-Security-Policy"]
    return HTMLResponse(body, headers=headers)


def build_app(server: Server) -> Starlette:
    async def shell(request: Request) -> Response:
        return _page_shell(csp=request.query_params.get("csp") != "off")

    async def htmx_js(request: Request) -> Response:
        return FileResponse(HTMX_JS, media_type="text/javascript", headers=security_headers())

    async def payload(request: Request) -> Response:
        mode, name, index = request.path_params["mode"], request.path_params["name"], request.path_params["index"]
        text = server.payloads[name][index]
        body = text if mode == "raw" else sanitize_html(text)
        return HTMLResponse(body, headers=security_headers())

    async def canary(request: Request) -> Response:
        server.canary_hits.append(request.url.path)
        return Response(status_code=204, headers=security_headers())

    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("open")
        await websocket.close()

    return Starlette(
        routes=[
            Route("/", shell),
            Route("/static/htmx.min.js", htmx_js),
            Route("/payload/{mode:str}/{name:str}/{index:int}", payload),
            Route("/canary{rest:path}", canary, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
            WebSocketRoute("/ws", echo),
        ]
    )


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if not HTMX_JS.exists():
        pytest.fail(f"{HTMX_JS} is missing: the browser suite tests the vendored htmx, restore it from git")
    payloads = {name: load_payloads(name) for name in PAYLOAD_FILES}
    payloads["controls"] = [CONTROL_UNDER_CSP, CONTROL_WITHOUT_CSP]
    state = Server(origin="", payloads=payloads)
    config = uvicorn.Config(
        build_app(state), host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="websockets-sansio"
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = uv.servers[0].sockets[0].getsockname()[1]
    state.origin = f"http://127.0.0.1:{port}"
    yield state
    uv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright, launched(playwright) as chromium:
        yield chromium


# ---------------------------------------------------------------------------------------------------------------
# one browsing session


@dataclass
class Findings:
    calls: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    htmx_requests: list[dict[str, Any]]
    offsite_urls: list[dict[str, Any]]
    script_errors: list[dict[str, Any]]
    foreign_requests: list[str]
    unexpected_requests: list[str]
    image_requests: list[str]
    canary_hits: list[str]
    swaps: int
    stalled: list[str]

    @property
    def executions(self) -> int:
        return len(self.calls)


def swap_in(
    browser: Any, server: Server, name: str, indices: list[int], *, raw: bool = False, csp: bool = True
) -> Findings:
    """Loads the page shell and has htmx swap in each payload of `name` at `indices`; returns what was detected."""
    origin = urlsplit(server.origin)
    requests: list[tuple[str, str]] = []
    hits_before = len(server.canary_hits)
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(RECORDER_JS)
    page.on("request", lambda request: requests.append((request.url, request.resource_type)))
    try:
        page.goto(server.origin + ("/" if csp else "/?csp=off"))
        page.wait_for_function("() => window.htmx && htmx.config.allowEval === false")
        mode = "raw" if raw else "clean"
        urls = [[f"{name}#{i}", f"/payload/{mode}/{name}/{i}"] for i in indices]
        # Started, not awaited: a payload that wedged the page's script would hang an awaited evaluate forever,
        # whereas waiting for the result has a deadline the driver enforces.
        page.evaluate(f"(urls) => {{ ({SWAP_ALL_JS})(urls).then((r) => {{ window.__done = r; }}); }}", urls)
        done = page.wait_for_function("() => window.__done", polling=100, timeout=30_000 + 200 * len(urls))
        recorded = done.json_value()
    finally:
        context.close()

    foreign, unexpected, images = [], [], []
    for url, resource_type in requests:
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) != (origin.scheme, origin.netloc):
            foreign.append(url)
        elif parts.path.startswith("/canary"):
            unexpected.append(url)
        elif resource_type == "image":
            images.append(url)  # same-site images are allowed by the policy; counted for the report
        elif parts.path not in ("/", "/static/htmx.min.js", "/favicon.ico") and not parts.path.startswith("/payload/"):
            unexpected.append(f"{resource_type} {url}")
    return Findings(
        calls=recorded["calls"],
        violations=recorded["violations"],
        htmx_requests=recorded["htmxRequests"],
        offsite_urls=recorded["offsite"],
        script_errors=recorded["errors"],
        foreign_requests=foreign,
        unexpected_requests=unexpected,
        image_requests=images,
        canary_hits=server.canary_hits[hits_before:],
        swaps=recorded["swaps"],
        stalled=recorded["stalled"],
    )


def assert_nothing_happened(findings: Findings) -> None:
    assert findings.calls == []
    assert findings.violations == []
    assert findings.htmx_requests == []
    assert findings.offsite_urls == []
    assert findings.script_errors == []
    assert findings.foreign_requests == []
    assert findings.unexpected_requests == []
    assert findings.canary_hits == []
    assert findings.stalled == []


# ---------------------------------------------------------------------------------------------------------------
# the tests


@pytest.mark.parametrize("name", PAYLOAD_FILES)
def test_sanitised_payloads_swapped_in_by_htmx_do_nothing(browser: Any, server: Server, name: str) -> None:
    findings = swap_in(browser, server, name, list(range(len(server.payloads[name]))))
    assert findings.swaps == len(server.payloads[name]), "htmx must have swapped every payload in"
    assert_nothing_happened(findings)


@pytest.mark.parametrize("name", PAYLOAD_FILES)
def test_sanitised_payloads_do_nothing_even_without_the_csp(browser: Any, server: Server, name: str) -> None:
    # The sanitiser must hold on its own; the CSP is the second layer, not the one doing the work.
    findings = swap_in(browser, server, name, list(range(len(server.payloads[name]))), csp=False)
    assert findings.swaps == len(server.payloads[name]), "htmx must have swapped every payload in"
    assert_nothing_happened(findings)


def test_raw_payload_trips_the_detectors_under_the_csp(browser: Any, server: Server) -> None:
    findings = swap_in(browser, server, "controls", [0], raw=True)
    directives = {v["directive"] for v in findings.violations}
    assert {"img-src", "script-src-attr"} <= directives, findings.violations
    assert findings.htmx_requests and findings.canary_hits, "htmx attributes in raw markup must issue a request"
    assert findings.offsite_urls, "the foreign image URL must be seen"
    assert findings.calls == [], "the CSP must stop the inline handler"


def test_raw_payload_trips_the_detectors_without_the_csp(browser: Any, server: Server) -> None:
    findings = swap_in(browser, server, "controls", [1], raw=True, csp=False)
    assert findings.calls and {call["name"] for call in findings.calls} == {"alert"}
    assert any("foreign.invalid" in url for url in findings.foreign_requests), findings.foreign_requests


def test_the_page_shell_runs_htmx_with_the_hardened_config(browser: Any, server: Server) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(RECORDER_JS)
    response = page.goto(server.origin + "/")
    config = page.evaluate("() => htmx.config")
    styles = page.evaluate("() => document.querySelectorAll('style').length")
    violations = page.evaluate("() => window.__xss.violations")
    context.close()
    assert response is not None and response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert {key: config[key] for key in HTMX_CONFIG} == HTMX_CONFIG
    assert styles == 0, "htmx must not inject its indicator <style>"
    assert violations == []


def test_connect_src_self_allows_the_same_origin_websocket(browser: Any, server: Server) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(RECORDER_JS)
    page.goto(server.origin + "/")
    message = page.evaluate(
        """() => new Promise((resolve) => {
            const socket = new WebSocket(location.origin.replace('http', 'ws') + '/ws');
            socket.onmessage = (e) => resolve(e.data);
            socket.onerror = () => resolve('error');
        })"""
    )
    violations = page.evaluate("() => window.__xss.violations")
    context.close()
    assert message == "open"
    assert violations == []
