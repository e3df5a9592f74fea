"""Hostile input against the whole app, then against site configs.

Requests go to create_app (every example site, a FakeEngine) through Starlette's TestClient, or straight to the ASGI
app where a client library would tidy the request up first (literal ``..``, lying Content-Length headers). Whatever
arrives, the answer is a 2xx, 3xx or 4xx within REQUEST_BOUND_S, never a 5xx or a hang; text that looks like Jinja
reaches the prompt as the literal text and is never evaluated. Malformed site folders fail with SiteConfigError
naming the file, the key and a fix, never with another exception.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote, unquote

import markupsafe
import pytest
from fakes import FakeEngine, example_sites, visit
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from starlette.types import Message
from starlette.websockets import WebSocketDisconnect

from genui.app import create_app
from genui.pages import SiteRuntime
from genui.sites import SiteConfigError, load_site

REQUEST_BOUND_S = 10.0  # generous: a FakeEngine page takes milliseconds, so only a hang comes near it
HTTP_EXAMPLES = 150
CONFIG_EXAMPLES = 200
FUZZ = settings(max_examples=HTTP_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
THREAD = "/forum/r/hacking/My_first_lisp"
HTMX = {"HX-Request": "true"}


class RequestHung(AssertionError):
    """The app did not answer within the bound."""


@contextmanager
def bounded(seconds: float = REQUEST_BOUND_S) -> Iterator[None]:
    """Turn a hang into a failure: SIGALRM interrupts the test thread while it waits on the app's thread."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise RequestHung(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, engine: FakeEngine) -> Iterator[TestClient]:
    """One app for every example (a fresh database per example would cost more than the request)."""
    app = create_app(example_sites(), engine, db_path=tmp_path_factory.mktemp("bad-input") / "db.sqlite3")
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as test_client:
        yield test_client


def assert_answered(status: int, body: str = "") -> None:
    assert 200 <= status < 500, f"status {status}: {body[:500]}"


def raw_request(
    client: TestClient,
    method: str,
    target: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    cut: bool = False,
) -> tuple[int, bytes]:
    """One request as uvicorn hands it to the app: the target's path percent-decoded, everything else as sent.

    TestClient goes through an HTTP client library that removes dot segments and refuses odd headers; a hostile
    client sends whatever it likes, so this bypasses it.
    """
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode("ascii"),
        "query_string": query.encode("ascii"),
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 50000),
    }

    async def call() -> tuple[int, bytes]:
        answered = asyncio.Event()
        sent: list[Message] = []
        inbox: list[Message] = [{"type": "http.request", "body": body, "more_body": cut}]

        async def receive() -> Message:
            if inbox:
                return inbox.pop(0)
            if not cut:  # ``cut``: the connection closes after the body's first part, before the rest is sent
                await answered.wait()  # the client stays connected until the whole answer is in
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        await client.app(scope, receive, send)
        status = next(int(m["status"]) for m in sent if m["type"] == "http.response.start")
        return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    try:
        return client.portal.call(call)  # type: ignore[union-attr]
    except Exception as error:  # what a server would turn into a 500
        return 500, repr(error).encode()


# -- strategies -------------------------------------------------------------------------------------------------

# Already in URL form: the ways people spell traversal, encoded slashes, control characters, bad UTF-8, templates.
URL_TOKENS = [
    "..", ".", "%2e%2e", "%2E%2e", "%2e", ".%2e", "%2f", "%2F", "..%2f", "%5c", "%5C..%5C", "%00", "%0a", "%0d%0a",
    "%09", "%7f", "%ff", "%c0%ae%c0%ae", "%ed%a0%80", "%25", "%252e%252e", "%7B%7B%207*7%20%7D%7D", "{{7*7}}",
    "%7B%25%20for%20x%20in%20y%20%25%7D", "%7B%7B%27%27.__class__%7D%7D", "%E2%80%AE", "%F0%9F%92%A5", "%C2%B2",
    "~", ";", "@", ":", "%3F", "%23", "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "_", "-", "Lisp", "a" * 600,
]  # fmt: skip
PREFIXES = [
    "", "/", "/wiki", "/wiki/", "/wiki/wiki/", "/wiki/search", "/forum/", "/forum/r/", "/forum/r/b/", "/os/files/",
    "/os/view/", "/os/terminal", "/os/browser", "/os/settings/", "/_genui/static/", "/_genui/css/", "/_genui/ws",
    "/_genui/regenerate", "/_genui/variations", "/nosite/", "//", "/wiki//wiki//",
]  # fmt: skip
QUERY_KEYS = ["q", "cmd", "url", "v", "from", "x", "q[]", "", "site", "id", "wait"]
QUERY_VALUES = [
    "{{ 7*7 }}", "{% for x in range(9) %}x{% endfor %}", "{{ ''.__class__.__mro__ }}", "²", "١", "0", "-1", "1e3",
    "1" * 5000, "%00", "%0a", "%ff", "a" * 300, "<script>alert(1)</script>", "../../etc/passwd", "%2e%2e%2f", "",
]  # fmt: skip

segments = st.one_of(st.sampled_from(URL_TOKENS), st.text(max_size=30).map(lambda s: quote(s, safe="")))
query_values = st.one_of(st.sampled_from(QUERY_VALUES).map(lambda s: quote(s, safe="%")), segments)
queries = st.lists(st.tuples(st.sampled_from(QUERY_KEYS), query_values), max_size=4).map(
    lambda pairs: "&".join(f"{key}={value}" for key, value in pairs)
)


# Pages that exist, so that hostile headers and queries reach the code behind routing too.
PAGES = ["/wiki/Lisp", "/wiki/search", "/forum/r/b/t", "/forum/r/b", "/os/files/a/b", "/os/terminal", "/wiki/"]


@st.composite
def targets(draw: st.DrawFn) -> str:
    """A request target (path and query) in URL form."""
    if draw(st.integers(0, 2)) == 0:
        query = draw(queries)
        return draw(st.sampled_from(PAGES)) + (f"?{query}" if query else "")
    path = draw(st.sampled_from(PREFIXES)) + "/".join(draw(st.lists(segments, max_size=5)))
    if draw(st.booleans()):
        path += "/"
    query = draw(queries)
    return (path or "/") + (f"?{query}" if query else "")


latin1_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=200)
HEADER_VALUES = [
    "true", "TRUE", "false", "", "null", "http://[", "http://[::1", "http://[evil", "http://testserver/wiki/Lisp",
    "http://testserver/wiki/%2e%2e/x", "http://testserver/wiki/{{7*7}}", "http://testserver/forum/r/b/t",
    "http://testserver/wiki/search?q=%00", "http://testserver:99999/", "http://user:pass@testserver/",
    "//testserver/wiki/", "/wiki/Lisp", "javascript:alert(1)", "http://evil.example", "testserver",
    "http://testserver/" + "a/" * 3000, "é" * 2000, "\t", "²", "http://testserver/_genui/variations?site=wiki&id=x",
    "http://testserver/_genui/variations?id=%ff&id=", "/_genui/variations",
]  # fmt: skip
header_values = st.one_of(st.sampled_from(HEADER_VALUES), latin1_text)
header_names = st.sampled_from(["HX-Request", "HX-Current-URL", "Referer", "Origin", "Host", "HX-Target"])
header_sets = st.dictionaries(header_names, header_values, max_size=5)


def encoded(headers: dict[str, str]) -> dict[bytes, bytes]:
    return {name.encode(): value.encode("latin-1") for name, value in headers.items()}


# -- requests ---------------------------------------------------------------------------------------------------


@FUZZ
@given(target=targets(), headers=header_sets, method=st.sampled_from(["GET", "GET", "POST", "HEAD", "PUT"]))
# Each of these was a 500 once (see docs/security.md, Hardening); random search finds them only now and then.
@example(target="/wiki/Lisp?v=%C2%B2", headers={}, method="GET")
@example(target="/wiki/Lisp?v=" + "1" * 5000, headers={}, method="GET")
@example(target="/wiki/Lisp", headers={"HX-Current-URL": "http://["}, method="GET")
@example(target="/wiki/Lisp", headers={"Referer": "http://[::1"}, method="GET")
@example(target="/forum/r/b/t", headers={"Origin": "http://["}, method="POST")
@example(target="////", headers={}, method="GET")  # once a failure of the test's own client, not of the app
@example(target="/_genui/variations?site=wiki&id=%ff&wait=1", headers={}, method="HEAD")
@example(target="/wiki/Lisp", headers={"HX-Current-URL": "http://testserver/_genui/variations?id=%ff"}, method="GET")
def test_any_path_query_and_headers_get_an_answer_below_500(
    client: TestClient, target: str, headers: dict[str, str], method: str
) -> None:
    with bounded():
        # Absolute, so that a target starting `//` (`////`, a valid path on the wire) is not taken for another host's
        # address by the client, which refuses to send it.
        response = client.request(method, f"http://testserver{target}", headers=encoded(headers))
    assert_answered(response.status_code, response.text)


@FUZZ
@given(
    target=targets().map(lambda t: t.replace("%2e", ".").replace("%2E", ".")),
    # Any bytes at all, control characters included: what reaches the app is whatever the server let through.
    headers=st.lists(
        st.tuples(header_names, st.one_of(header_values.map(lambda v: v.encode("latin-1")), st.binary(max_size=200))),
        max_size=5,
    ),
)
def test_literal_dot_segments_and_raw_headers_get_an_answer_below_500(
    client: TestClient, target: str, headers: list[tuple[str, bytes]]
) -> None:
    raw = [(name.lower().encode(), value) for name, value in headers]
    target = target if target.startswith("/") else "/" + target  # an HTTP request target always starts with /
    with bounded():
        status, body = raw_request(client, "GET", target, raw)
    assert_answered(status, body.decode("utf-8", "replace"))


def test_literal_traversal_never_leaves_the_static_folder(client: TestClient) -> None:
    for target in [
        "/_genui/static/../genui/app.py",
        "/_genui/static/%2e%2e/pyproject.toml",
        "/_genui/css/..%2fwiki.css",
    ]:
        status, body = raw_request(client, "GET", target, [])
        assert status == 404 and b"import" not in body and b"[project]" not in body, target


hostile_text = st.one_of(
    st.text(max_size=300),
    st.sampled_from(QUERY_VALUES + ["</textarea><script>alert(1)</script>", "\x00", "\r\n", " ada ", "ada\n"]),
    st.integers(1990, 2010).map(lambda n: "x" * n),
)


@FUZZ
@given(
    user=st.one_of(st.sampled_from(["ada", "a" * 32, "a" * 33, "", "ada_99-x", "Ada Lovelace"]), hostile_text),
    text=hostile_text,
    htmx=st.booleans(),
    extra=st.dictionaries(st.sampled_from(["site", "url", "user2", "v", ""]), hostile_text, max_size=2),
)
def test_any_reply_is_posted_and_shown_escaped_or_refused(
    client: TestClient, user: str, text: str, htmx: bool, extra: dict[str, str]
) -> None:
    with bounded():
        response = client.post(THREAD, data={"user": user, "text": text, **extra}, headers=HTMX if htmx else {})
    assert_answered(response.status_code, response.text)
    if response.status_code in (200, 303):
        with bounded():
            thread = client.get(THREAD, headers=HTMX).text
        stored = text.replace("\r\n", "\n").replace("\r", "\n").strip()  # line breaks as a browser counts them
        assert f'<p class="genui-post-text" dir="auto">{markupsafe.escape(stored)}</p>' in thread


FORM_TYPES = [
    b"application/x-www-form-urlencoded",
    b"multipart/form-data; boundary=x",
    b"multipart/form-data",
    b"multipart/form-data; boundary=",
    b"text/plain",
    b"application/json",
    b"application/x-www-form-urlencoded; charset=utf-16",
    b"multipart/form-data; boundary=x; charset=utf-7",
]
MULTIPART = (
    b'--x\r\nContent-Disposition: form-data; name="user"\r\n\r\nada\r\n'
    b'--x\r\nContent-Disposition: form-data; name="text"; filename="t.txt"\r\nContent-Type: text/plain\r\n\r\nhi\r\n'
    b"--x--\r\n"
)
# UTF-7's `+2AA-` decodes to a lone surrogate, which no database or response can hold
SURROGATE = (
    b'--x\r\nContent-Disposition: form-data; name="user"\r\n\r\nada\r\n'
    b'--x\r\nContent-Disposition: form-data; name="site"\r\n\r\nwiki\r\n'
    b'--x\r\nContent-Disposition: form-data; name="url"\r\n\r\n/Lisp+2AA-\r\n'
    b'--x\r\nContent-Disposition: form-data; name="text"\r\n\r\nhi +2AA-\r\n--x--\r\n'
)
BODIES = [
    b"user=ada&text=hi",
    SURROGATE,
    b"user=ada&text=%ff%fe%00",
    b"user=%E2%80%AE&text=hi",
    b"&&&===",
    MULTIPART,
    b"--x\r\n",
]


@FUZZ
@given(
    path=st.sampled_from([THREAD, "/_genui/regenerate", "/wiki/Lisp", "/forum/r/b/t/"]),
    content_type=st.one_of(st.sampled_from(FORM_TYPES), latin1_text.map(lambda s: s.encode("latin-1"))),
    body=st.one_of(st.sampled_from(BODIES), st.binary(max_size=400)),
    length=st.one_of(
        st.none(),
        st.sampled_from(["²", "-1", "1" * 5000, "abc", "", " 16", "16384", "16385", "99999999999"]).map(
            lambda s: s.encode("latin-1")
        ),
        st.just("١٢".encode()),
    ),
    origin=st.sampled_from([None, "http://testserver", "http://[", "null", "http://evil.example"]),
)
@example(path=THREAD, content_type=FORM_TYPES[0], body=BODIES[0], length="²".encode("latin-1"), origin=None)
@example(path=THREAD, content_type=FORM_TYPES[1], body=MULTIPART, length=None, origin=None)
@example(path=THREAD, content_type=FORM_TYPES[-1], body=SURROGATE, length=None, origin=None)
@example(path="/_genui/regenerate", content_type=FORM_TYPES[-1], body=SURROGATE, length=None, origin=None)
def test_any_form_body_and_length_get_an_answer_below_500(
    client: TestClient, path: str, content_type: bytes, body: bytes, length: bytes | None, origin: str | None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", length or str(len(body)).encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    with bounded():
        status, answer = raw_request(client, "POST", path, headers, body)
    assert_answered(status, answer.decode("utf-8", "replace"))


@pytest.mark.parametrize("path", [THREAD, "/_genui/regenerate", "/_genui/rewrite", "/_genui/variations"])
@pytest.mark.parametrize("content_type", [b"application/x-www-form-urlencoded", b"multipart/form-data; boundary=x"])
def test_a_form_cut_off_as_it_is_sent_is_a_400_and_stores_nothing(
    client: TestClient, path: str, content_type: bytes
) -> None:
    """A phone losing its signal mid-post: Starlette's ClientDisconnect was a 500, with a traceback in the log (an
    adversarial client's review)."""
    body = b"user=ada&text=hello+th" if b"urlencoded" in content_type else b"--x\r\nContent-Disposition: form-da"
    headers = [(b"content-type", content_type), (b"content-length", b"200"), (b"origin", b"http://testserver")]
    status, answer = raw_request(client, "POST", path, headers, body, cut=True)
    assert status == 400 and b"the connection closed as it was sent" in answer, answer[:300]
    assert "hello th" not in client.get(THREAD, headers={"HX-Request": "true"}).text


@pytest.mark.parametrize("path", [THREAD, "/_genui/regenerate", "/_genui/rewrite", "/_genui/variations"])
def test_a_form_whose_charset_leaves_lone_surrogates_is_a_400(client: TestClient, path: str) -> None:
    headers = {"content-type": FORM_TYPES[-1].decode()}
    response = client.post(path, content=SURROGATE, headers=headers, follow_redirects=False)
    assert response.status_code == 400 and "send it as UTF-8" in response.text


@pytest.mark.parametrize("body", [b"user=ada&text=%ff%fe%c3%28", b"user=ada&text=caf\xe9", b"user=%ff&text=hi"])
def test_a_url_encoded_form_that_is_not_utf8_is_a_400_and_nothing_is_stored(client: TestClient, body: bytes) -> None:
    """Starlette reads a broken escape as U+FFFD: the reply would be stored with its bytes lost."""
    headers = {"content-type": "application/x-www-form-urlencoded"}
    response = client.post(THREAD, content=body, headers=headers, follow_redirects=False)
    assert response.status_code == 400 and "send it as UTF-8" in response.text
    assert "\ufffd" not in client.get(THREAD, headers={"HX-Request": "true"}).text


ws_params = st.dictionaries(
    st.sampled_from(["site", "url", "v", "from"]),
    st.one_of(st.sampled_from(["wiki", "forum", "/wiki/Lisp", "/", "1", "2", "²", "1" * 5000]), hostile_text),
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=ws_params)
@example(params={"site": "wiki", "url": "/wiki/Lisp", "v": "²"})  # hung once: the socket was never closed
def test_any_stream_request_ends_with_a_close(client: TestClient, params: dict[str, str]) -> None:
    query = "&".join(f"{quote(key)}={quote(value, safe='')}" for key, value in params.items())
    with bounded(), client.websocket_connect(f"/_genui/ws?{query}") as socket:
        for _ in range(1000):
            try:
                socket.receive_text()
            except WebSocketDisconnect as closed:
                assert closed.code == 1000
                return
    raise AssertionError("the stream never closed")


# -- template syntax in input is data ---------------------------------------------------------------------------

JINJA = ["{{ 7*7 }}", "{% for x in range(7) %}{{ 7*7 }}{% endfor %}", "{{ ''.__class__.__mro__ }}", "{{7*'7'}}"]


@pytest.mark.parametrize("payload", JINJA)
def test_jinja_in_urls_posts_and_parents_reaches_the_prompt_as_literal_text(tmp_path: Path, payload: str) -> None:
    engine = FakeEngine()
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3")
    with TestClient(app, follow_redirects=False) as client, bounded():
        named = "_".join(payload.split(" "))  # the article's own URL: one asked for with spaces redirects to it
        article = visit(client, "/wiki/" + quote(named, safe=""))
        visit(client, "/wiki/search", params={"q": payload})
        visit(client, "/os/terminal", params={"cmd": payload})
        assert client.post(THREAD, data={"user": "ada", "text": payload}).status_code == 303
        visit(client, THREAD)
        # The article's title came from the URL; clicking on from it makes it the next page's parent.
        visit(client, "/wiki/Next", headers={"Referer": "http://testserver/wiki/" + quote(named, safe="")})
    prompts = [call.prompt for call in engine.calls]
    title = payload.replace("_", " ")  # the article template turns underscores into spaces
    assert f"<title>{title}</title>" in prompts[0]
    assert f"<query>{payload}</query>" in prompts[1]
    assert f"<cmd>{payload}</cmd>" in prompts[2]
    assert f'<reply user="ada">{payload}</reply>' in prompts[3]
    heading = " ".join(title.split())  # a page's title is its <h1>'s text, spaces collapsed
    assert f"<from>{heading}</from>" in prompts[4]
    assert all("49" not in prompt and "7777777" not in prompt and "<class" not in prompt for prompt in prompts)
    assert f"<title>{markupsafe.escape(heading)} — Genpedia</title>" in article.text and "49" not in article.text


# -- site configs -----------------------------------------------------------------------------------------------

GOOD_SITE: dict[str, Any] = {
    "name": "demo",
    "title": "Demo",
    "brief": "A demo site.",
    "stylesheet": "demo.css",
    "model": {"tokens": 512, "steps": 12},
    "routes": [
        {"pattern": "/", "template": "home.j2"},
        {"pattern": "/page/{name}", "template": "page.j2", "context": ["brief", "parent"]},
        {"pattern": "/thread/{id}", "template": "page.j2", "posts": True},
        {"pattern": "/find", "template": "page.j2", "query": ["q"], "cache": "none"},
    ],
}
TEMPLATES = {"home.j2": "<page>home</page>\n", "page.j2": "<page>{{ params }}</page>\n"}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, str):
        # JSON's escapes are TOML's, except that TOML also wants DEL escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{toml_value(key)} = {toml_value(item)}" for key, item in value.items()) + "}"


def toml_text(data: dict[str, Any]) -> str:
    """A TOML document for ``data`` (routes as [[routes]] tables when they are tables, like a hand-written file)."""
    lines = [f"{toml_value(key)} = {toml_value(value)}" for key, value in data.items() if key != "routes"]
    routes = data.get("routes")
    if isinstance(routes, list) and all(isinstance(route, dict) for route in routes) and routes:
        for route in routes:
            lines += ["", "[[routes]]"] + [f"{toml_value(key)} = {toml_value(value)}" for key, value in route.items()]
    elif "routes" in data:
        lines.insert(0, f"routes = {toml_value(routes)}")
    return "\n".join(lines) + "\n"


def write_site(root: Path, data: dict[str, Any], templates: dict[str, bytes] | None = None) -> Path:
    """A site folder: ``site.toml`` from ``data``, the prompts and the stylesheet GOOD_SITE names."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    for name, source in (templates or {k: v.encode() for k, v in TEMPLATES.items()}).items():
        (root / "prompts" / name).write_bytes(source)
    (root / "demo.css").write_text("", encoding="utf-8")
    (root / "site.toml").write_text(toml_text(data), encoding="utf-8")
    return root


def load_everything(root: Path) -> None:
    """Everything genui does with a site folder before serving it."""
    SiteRuntime.build(load_site(root), "")


def copy_of_good() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(GOOD_SITE))
    return data


def test_the_config_writer_round_trips_the_good_site(tmp_path: Path) -> None:
    root = write_site(tmp_path, GOOD_SITE)
    assert tomllib.loads((root / "site.toml").read_text(encoding="utf-8")) == GOOD_SITE
    load_everything(root)


WRONG_TYPES = st.one_of(
    st.integers(-3, 300), st.booleans(), st.floats(allow_nan=False), st.text(max_size=20),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)  # fmt: skip
TOP_TYPES = {
    "name": str, "title": str, "brief": str, "stylesheet": str, "model": dict, "routes": list, "navigation": list,
}  # fmt: skip
ROUTE_TYPES = {"pattern": str, "template": str, "context": list, "query": list, "cache": str, "posts": bool}
BAD_PATTERNS = [
    "no-slash", "", "//x", "/a//b", "/../x", "/a/..", "/{1x}", "/{x:int}", "/{x", "/x}", "/{}", "/{x}/{x}",
    "/{x:str}/{x}", "/{x-y}", "/{ x }", "/{x:path:more}",
]  # fmt: skip
BAD_TEMPLATES = [
    "{% for %}", "{{ x ", "{% endif %}", "{% if x %}", "{{ }}", "{{ x | }}", "{% macro %}", "{# unclosed",
    "{% endraw %}", "{% block a %}{% block a %}{% endblock %}{% endblock %}",
]  # fmt: skip


def not_a(kind: type) -> Callable[[object], bool]:
    return lambda value: not isinstance(value, kind)


BREAKAGES = [
    "missing", "route-missing", "wrong-type", "route-wrong-type", "unknown", "route-unknown", "model-unknown",
    "bad-pattern", "bad-template-name", "missing-template", "template-syntax", "template-bytes", "bad-context",
    "bad-cache", "version-query", "model-range", "bad-name",
]  # fmt: skip


@st.composite
def broken_sites(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, bytes], str, str]:
    """A site folder with exactly one thing wrong: (site.toml data, templates, key expected in the error, file)."""
    data = copy_of_good()
    templates = {name: source.encode() for name, source in TEMPLATES.items()}
    route = draw(st.integers(0, len(data["routes"]) - 1))
    kind = draw(st.sampled_from(BREAKAGES))
    where = f"routes[{route}]."
    if kind == "missing":
        key = draw(st.sampled_from(["name", "title", "brief", "routes"]))
        del data[key]
        return data, templates, key, "site.toml"
    if kind == "route-missing":
        key = draw(st.sampled_from(["pattern", "template"]))
        del data["routes"][route][key]
        return data, templates, where + key, "site.toml"
    if kind == "wrong-type":
        key = draw(st.sampled_from(sorted(TOP_TYPES)))
        data[key] = draw(WRONG_TYPES.filter(not_a(TOP_TYPES[key])))
        return data, templates, key, "site.toml"
    if kind == "route-wrong-type":
        key = draw(st.sampled_from(sorted(ROUTE_TYPES)))
        value = draw(WRONG_TYPES.filter(not_a(ROUTE_TYPES[key])))
        data["routes"][route][key] = value
        return data, templates, where + key, "site.toml"
    if kind in ("unknown", "route-unknown", "model-unknown"):
        key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in TOP_TYPES and k not in ROUTE_TYPES))
        key = key if key not in ("tokens", "steps") else key + "_"
        value = draw(st.one_of(st.integers(), st.text(max_size=5), st.booleans()))
        if kind == "unknown":
            data[key] = value
            return data, templates, key, "site.toml"
        if kind == "model-unknown":
            data["model"][key] = value
            return data, templates, f"model.{key}", "site.toml"
        data["routes"][route][key] = value
        return data, templates, where + key, "site.toml"
    if kind == "bad-pattern":
        data["routes"][route]["pattern"] = draw(st.sampled_from(BAD_PATTERNS))
        return data, templates, where + "pattern", "site.toml"
    if kind == "bad-template-name":
        data["routes"][route]["template"] = draw(st.sampled_from(["../site.toml", "a/b.j2", ".hidden", "", "x\\y"]))
        return data, templates, where + "template", "site.toml"
    if kind == "missing-template":
        name = data["routes"][route]["template"]
        del templates[name]
        first = next(i for i, r in enumerate(data["routes"]) if r["template"] == name)  # the first route to use it
        return data, templates, f"routes[{first}].template", "site.toml"
    if kind in ("template-syntax", "template-bytes"):
        name = data["routes"][route]["template"]
        if kind == "template-syntax":
            templates[name] = draw(st.sampled_from(BAD_TEMPLATES)).encode()
        else:
            templates[name] = b"<page>\xff\xfe caf\xe9</page>"  # Latin-1, not UTF-8
        return data, templates, "template", f"prompts/{name}"
    if kind == "bad-context":
        unknown = draw(st.text(max_size=10).filter(lambda c: c not in ("brief", "parent", "posts")))
        data["routes"][route]["context"] = ["brief", unknown]
        return data, templates, where + "context", "site.toml"
    if kind == "bad-cache":
        data["routes"][route]["cache"] = draw(st.text(max_size=10).filter(lambda c: c not in ("forever", "none")))
        return data, templates, where + "cache", "site.toml"
    if kind == "version-query":
        data["routes"][route]["query"] = ["q", "v"]
        return data, templates, where + "query", "site.toml"
    if kind == "model-range":
        key = draw(st.sampled_from(["tokens", "steps"]))
        data["model"][key] = draw(st.one_of(st.integers(-5, 0), st.integers(4097, 2**63 - 1), st.booleans(), st.text()))
        return data, templates, f"model.{key}", "site.toml"
    data["name"] = draw(st.text(max_size=40).filter(lambda n: not n.isascii() or not n[:1].islower() or " " in n))
    return data, templates, "name", "site.toml"


def assert_names_file_key_and_fix(error: SiteConfigError, file: Path, key: str) -> None:
    message = str(error)
    assert error.file == str(file) and error.key == key, message
    where = "" if key == "-" else f"key '{key}': "  # an error of the whole file names no key
    assert message.startswith(f"{file}: {where}") and "Fix: " in message and error.fix.strip(), message


@settings(max_examples=CONFIG_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken_sites())
def test_every_broken_site_folder_fails_with_an_error_naming_file_key_and_fix(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[dict[str, Any], dict[str, bytes], str, str]
) -> None:
    data, templates, key, file = case
    root = write_site(tmp_path_factory.mktemp("site"), data, templates)
    with pytest.raises(SiteConfigError) as caught:
        load_everything(root)
    assert_names_file_key_and_fix(caught.value, root / file, key)


@settings(max_examples=CONFIG_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    position=st.floats(0, 1),
    cut=st.booleans(),
    junk=st.one_of(
        st.sampled_from(["= =", "[[routes", '"unclosed', "x = ", "]]", "[model]\n[model]", "\x00", "'''", "{", "\\u"]),
        st.text(max_size=10),
    ),
)
def test_a_corrupted_site_toml_loads_or_fails_with_a_site_config_error(
    tmp_path_factory: pytest.TempPathFactory, position: float, cut: bool, junk: str
) -> None:
    root = write_site(tmp_path_factory.mktemp("site"), GOOD_SITE)
    text = (root / "site.toml").read_text(encoding="utf-8")
    at = int(position * len(text))
    (root / "site.toml").write_text(text[:at] + junk + ("" if cut else text[at:]), encoding="utf-8")
    try:
        load_everything(root)
    except SiteConfigError as error:
        assert error.file == str(root / "site.toml") and "Fix: " in str(error) and error.fix, str(error)
        if error.key == "-":
            assert "(at " in error.problem, str(error)  # tomllib says where: "(at line 3, column 8)"


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 5000 + "]" * 5000,  # nesting deep enough to exhaust the parser's recursion
        "x = " + "{a = " * 3000 + "1" + "}" * 3000,
        b"\xff\xfe".decode("latin-1"),
    ],
    ids=["deep-array", "deep-table", "not-utf8"],
)
def test_pathological_toml_is_a_site_config_error(tmp_path: Path, text: str) -> None:
    write_site(tmp_path, GOOD_SITE)
    (tmp_path / "site.toml").write_bytes(text.encode("latin-1"))
    with pytest.raises(SiteConfigError) as caught:
        load_everything(tmp_path)
    assert_names_file_key_and_fix(caught.value, tmp_path / "site.toml", "-")


@pytest.mark.parametrize("path", [THREAD, "/_genui/regenerate", "/_genui/rewrite", "/_genui/variations"])
@pytest.mark.parametrize(
    ("content_type", "body"),
    [("text/plain", "site=forum\r\nurl=/forum/\r\ntext=hi\r\n"), ("application/json", '{"site": "forum"}'), ("", "x")],
)
def test_a_body_that_is_no_form_is_a_415_that_names_the_form_types(
    client: TestClient, path: str, content_type: str, body: str
) -> None:
    """Starlette reads such a body as an empty form: it was answered as a form without its fields (a 404, no site)."""
    response = client.post(path, content=body, headers={"content-type": content_type}, follow_redirects=False)
    assert response.status_code == 415 and "application/x-www-form-urlencoded" in response.text
