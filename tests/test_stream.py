from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import ClientFactory, FakeEngine, after_places, pages_of, ws_messages
from starlette.datastructures import State
from starlette.websockets import WebSocket, WebSocketDisconnect

from engine.frames import Frame, GenerationRequest
from genui.pages import Pages
from genui.runtime import SiteRuntime
from genui.screens import Screens
from genui.shell import Shell
from genui.sites import Site
from genui.store import Store
from genui.stream import Stream

LISP = "/_genui/ws?site=wiki&url=/Lisp&v=1"
HTMX_HEADERS = {"HX-Request": "true"}


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_drafts_arrive_before_the_final_page(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine(steps=3, canvas_chars=120)
    received = ws_messages(client_factory([wiki], engine), LISP)
    *frames, final = received
    assert len(frames) >= 6  # two canvases of three draft steps each, plus each canvas's final text
    assert all('<div id="genui-draft"' in frame and '<p id="genui-progress"' in frame for frame in frames)
    # a frame's progress line is no live region: a screen reader would hear it at every step
    assert all('<p id="genui-progress" class="genui-progress">Writing: part' in frame for frame in frames)
    assert "part 1 of at most 2, step 1" in frames[0] and "part 2 of at most 2" in frames[-1]
    assert final.startswith('<nav id="genui-toolbar"') and '<div id="genui-content"' in final
    assert "<h1>Lisp</h1>" in final and 'hx-get="/Lisp_tree"' in final
    assert "ws-connect" not in final  # the placeholder holding the socket is replaced


def test_a_fast_engine_sends_a_draft_at_most_every_interval_and_the_page_at_once(
    client_factory: ClientFactory, wiki: Site
) -> None:
    engine = FakeEngine(steps=40, delay=0.005, canvas_chars=120)  # 80 drafts over about 0.45 s
    client = client_factory([wiki], engine, draft_interval=0.1)
    started = time.monotonic()
    *frames, final = ws_messages(client, LISP)
    seconds = time.monotonic() - started
    assert 2 <= len(frames) <= seconds / 0.1 + 1
    assert "part 1 of at most 2, step 1" in frames[0]  # the first draft is not held back
    assert "<h1>Lisp</h1>" in final
    # an interval far longer than the run: the first draft, then the page as soon as it is written, not held back
    # until the interval ends
    slow = client_factory([wiki], FakeEngine(steps=40, delay=0.005, canvas_chars=120), draft_interval=60.0)
    started = time.monotonic()
    *frames, final = ws_messages(slow, LISP.replace("/Lisp", "/Scheme"))
    assert len(frames) == 1 and "<h1>Scheme</h1>" in final and time.monotonic() - started < 30


def test_drafts_are_sanitised(client_factory: ClientFactory, wiki: Site) -> None:
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)><a href="/x" hx-get="/evil" hx-swap-oob="true">o</a>'
    received = ws_messages(client_factory([wiki], FakeEngine(draft_extra=evil)), LISP)
    for message in received:
        # (A draft cut inside a tag can turn the script's body into plain text, as a browser would; never into code.)
        assert "<script" not in message and "onerror" not in message and "alert(2)" not in message
        assert "hx-swap-oob" not in message and "/evil" not in message


def test_the_final_page_is_cached(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine()
    client = client_factory([wiki], engine)
    ws_messages(client, LISP)
    assert "<h1>Lisp</h1>" in client.get("/Lisp").text
    assert len(ws_messages(client, LISP)) == 1 and len(engine.calls) == 1  # a cached page comes as one final message


def test_two_watchers_share_one_generation(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine(delay=0.02)
    client = client_factory([wiki], engine)
    with client.websocket_connect(LISP) as first, client.websocket_connect(LISP) as second:
        finals = []
        for socket in (first, second):
            while "genui-toolbar" not in (text := socket.receive_text()):
                pass
            finals.append(text)
    assert finals[0] == finals[1] and len(engine.calls) == 1


def test_the_generation_is_cancelled_when_the_client_goes_away(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine(delay=0.05, steps=50)
    client = client_factory([wiki], engine)
    with client.websocket_connect(LISP) as socket:
        socket.receive_text()
    wait_until(lambda: engine.cancelled == 1)
    assert engine.finished == 0
    # A later visitor starts afresh rather than joining the cancelled run.
    engine.delay, engine.steps = 0.0, 2
    assert "<h1>Lisp</h1>" in ws_messages(client, LISP)[-1] and len(engine.calls) == 2


def test_a_reload_of_a_page_being_written_watches_the_same_run_go_on(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine(delay=0.05, steps=20)
    client = client_factory([wiki], engine)
    with client.websocket_connect(LISP) as socket:
        for _ in range(4):
            socket.receive_text()
        # The reload's GET arrives while the old page's socket is open; the old page goes, then the new one's socket
        # connects: the run it was handed goes on, from where it was.
        assert "ws-connect" in client.get("/Lisp").text
    time.sleep(0.2)
    with client.websocket_connect(LISP) as socket:
        first = socket.receive_text()
        assert engine.cancelled == 0
    assert "part 1 of at most 2, step 1<" not in first and len(engine.calls) == 1, first
    # Left for good, it is cancelled once the placeholder's wait is over (here at once: nobody holds one).
    wait_until(lambda: engine.cancelled == 1)


def test_engine_overload_is_reported_in_the_page(client_factory: ClientFactory, wiki: Site) -> None:
    received = ws_messages(client_factory([wiki], FakeEngine(overloaded=4)), LISP)
    assert len(received) == 1 and "busy" in received[0] and "4 s" in received[0]
    assert received[0].startswith('<div id="genui-content"') and 'href="/Lisp"' in received[0]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("/_genui/ws?site=nope&url=/", "does not exist"),
        ("/_genui/ws?site=wiki&url=/no/such/page", "No page"),
        ("/_genui/ws?site=wiki&url=/..", "dot segment"),
        ("/_genui/ws?site=wiki&url=/Lisp&v=7", "no version 7"),
    ],
)
def test_bad_stream_requests_get_one_failure_message(
    client_factory: ClientFactory, wiki: Site, url: str, reason: str
) -> None:
    engine = FakeEngine()
    received = ws_messages(client_factory([wiki], engine), url)
    assert len(received) == 1 and reason in received[0] and engine.calls == []


def test_the_next_version_is_written_with_the_next_seed(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine()
    client = client_factory([wiki], engine)
    ws_messages(client, LISP)
    # a socket opened on its own writes no version past the first: a regeneration starts one
    refused = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp&v=2")
    assert len(refused) == 1 and "There is no version 2 of this page." in refused[0] and len(engine.calls) == 1
    client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers={"HX-Request": "true"})
    final = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp&v=2")[-1]
    assert "seed 1" in final and 'aria-current="page">2</a>' in final
    assert [call.seed for call in engine.calls] == [0, 1]


def test_a_socket_from_another_site_is_refused(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine()
    client = client_factory([wiki], engine)
    with client.websocket_connect(LISP, headers={"Origin": "http://evil.example"}) as socket:
        said = socket.receive_text()  # said in the page, then closed with 1008, on which htmx does not reconnect
        with pytest.raises(WebSocketDisconnect) as refused:
            socket.receive_text()
    assert refused.value.code == 1008 and "proxy_set_header Host $http_host" in said and engine.calls == []


def test_a_bug_in_a_stream_is_logged_said_in_the_page_and_closed_without_a_reconnect(
    client_factory: ClientFactory, wiki: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # htmx's ws extension reconnects on 1011 with its back-off reset at every open: a bug would run again every second
    client = client_factory([wiki], FakeEngine())
    monkeypatch.setattr("genui.screens.Screens.final", lambda *_: 1 / 0)
    messages: list[str] = []
    with client.websocket_connect(LISP) as socket, pytest.raises(WebSocketDisconnect) as closed:
        while True:
            messages.append(socket.receive_text())
    assert closed.value.code == 1000 and "genui failed to write this page" in messages[-1]
    assert "stream" in caplog.text and "ZeroDivisionError" in caplog.text


@pytest.mark.parametrize(
    ("code", "kept"), [(1006, True), (1011, True), (4000, True), (None, True), (1000, False), (1001, False)]
)
def test_a_run_waits_for_the_reconnect_of_a_stream_whose_connection_broke(
    client_factory: ClientFactory, wiki: Site, code: int | None, kept: bool
) -> None:
    """A network drop (1006) ends a socket the visitor did not close: the ws extension reconnects within a second or
    two, and the run goes on for it (it was cancelled, and written again from its first step). uvicorn's websockets
    reports a drop as 1005, no code given (a reader on a flaky network's review: every drop wrote the page again);
    static/genui.js closes a page's socket with 1000 when it leaves it, and with 4000 when it opens it anew. A page
    left (a normal close, a page going away) still ends its run at once."""
    engine = FakeEngine(delay=0.05, steps=20)
    client = client_factory([wiki], engine, app_options={"unclaimed_s": 5.0})
    socket = client.websocket_connect(LISP)
    with socket:
        for _ in range(6):
            socket.receive_text()
        if code is None:
            socket.send({"type": "websocket.disconnect"})  # a close frame without a code: 1005
        else:
            socket.close(code)
    if not kept:
        wait_until(lambda: engine.cancelled == 1)
        return
    time.sleep(0.3)
    assert engine.cancelled == 0
    first = ws_messages(client, LISP)[0]
    assert "part 1 of at most 2, step 1<" not in first and len(engine.calls) == 1, first


def test_a_regenerate_that_fails_asks_again_for_the_version_it_was_writing(
    client_factory: ClientFactory, wiki: Site
) -> None:
    """Its automatic retry and its link named the page's URL, which shows the version before: the new one lost."""
    engine = FakeEngine(delay=0.05, steps=10)
    client = client_factory([wiki], engine, app_options={"unclaimed_s": 0.2, "runs_per_client": 1})
    engine.delay = 0.0
    ws_messages(client, LISP)
    engine.overloaded = 4  # the run starts, and the engine's queue is full
    answer = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers={"HX-Request": "true"})
    assert answer.headers["HX-Push-Url"] == "/Lisp?v=2"
    failed = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp&v=2")[-1]
    assert 'data-genui-retry-url="/Lisp?v=2"' in failed and 'href="/Lisp?v=2"' in failed, failed
    engine.overloaded = None
    assert "ws-connect" in client.get("/Lisp?v=2").text  # which writes it again
    assert "<h1>Lisp</h1>" in ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp&v=2")[-1]
    # a run that cannot start when the stream comes (its placeholder's wait over, the visitor at their limit)
    engine.delay = 0.05
    client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers={"HX-Request": "true"})
    wait_until(lambda: engine.cancelled == 1)  # v3's run, nobody come to watch it
    assert "ws-connect" in client.get("/Scheme").text  # the visitor's one run
    failed = ws_messages(client, "/_genui/ws?site=wiki&url=/Lisp&v=3")[-1]
    assert "A page is being written for your address (or network) already" in failed, failed
    assert 'data-genui-retry-url="/Lisp?v=3"' in failed, failed


def test_variations_whose_only_viewer_left_stop_at_once(client_factory: ClientFactory, wiki: Site) -> None:
    """A new set was claimed twice (by itself and by its placeholder) and its one stream spent one claim: three rows
    of engine time went on, unwatched, until the other lapsed."""
    engine = FakeEngine()
    client = client_factory([wiki], engine, app_options={"unclaimed_s": 30.0})
    ws_messages(client, LISP)
    engine.delay, engine.steps = 0.05, 40
    answer = client.post("/_genui/variations", data={"site": "wiki", "url": "/Lisp"}, headers={"HX-Request": "true"})
    stream = re.search(r'ws-connect="([^"]+)"', answer.text)
    assert stream is not None
    with client.websocket_connect(html.unescape(stream[1])) as socket:
        socket.receive_text()
    wait_until(lambda: engine.cancelled >= 1, seconds=5.0)  # with a claim left, not before 30 s


def test_a_reload_of_a_page_never_cached_shows_the_run_it_started(client_factory: ClientFactory, wiki: Site) -> None:
    """A page never cached is held for its stream when written before the stream came. A reload meanwhile started a
    run of its own, and its stream was handed the held page instead, that run left to nobody (a visitor at their
    limit of runs then refused their next click)."""
    count = itertools.count(1)
    engine = FakeEngine(lambda prompt, seed: f"<article><h1>Run {next(count)}</h1></article>")
    uncached = replace(wiki, routes=tuple(replace(route, cache="none") for route in wiki.routes))
    client = client_factory([uncached], engine, app_options={"unclaimed_s": 30.0, "runs_per_client": 1})
    client.get("/Lisp")  # run 1, written before its page's stream connects
    wait_until(lambda: engine.finished == 1)
    engine.delay, engine.steps = 0.02, 5
    assert "ws-connect" in client.get("/Lisp").text  # the reload: run 2
    assert "Run 2" in ws_messages(client, LISP)[-1]
    assert client.get("/Lisp_tree").status_code == 200  # no run of the visitor's is left unwatched


def test_a_rewrite_or_a_regenerate_withdrawn_that_fails_asks_again_at_the_pages_url(
    client_factory: ClientFactory, wiki: Site, tmp_path: Path
) -> None:
    """Not at the version's: a rewrite's is not written again by a GET (a 404 that it stopped), and a version whose
    page was forgotten meanwhile is none (a 404)."""
    engine = FakeEngine()
    client = client_factory([wiki], engine)
    ws_messages(client, LISP)
    engine.overloaded = 4.5
    answer = client.post("/_genui/rewrite", data={"site": "wiki", "url": "/Lisp", "section": 2}, headers=HTMX_HEADERS)
    failed = ws_messages(client, html.unescape(re.search(r'ws-connect="([^"]+)"', answer.text)[1]))[-1]
    assert "busy" in failed and 'data-genui-retry-url="/Lisp"' in failed, failed
    engine.overloaded, engine.delay = None, 0.2
    answer = client.post("/_genui/regenerate", data={"site": "wiki", "url": "/Lisp"}, headers=HTMX_HEADERS)
    with client.websocket_connect(html.unescape(re.search(r'ws-connect="([^"]+)"', answer.text)[1])) as socket:
        socket.receive_text()
        pages_of(client).store.forget("wiki", "/Lisp")
        while "genui-error" not in (last := socket.receive_text()):
            pass
    assert "deleted while it was being written" in last and 'href="/Lisp"' in last and "v=2" not in last, last


async def test_a_stream_whose_frame_cannot_be_sent_holds_its_run_for_the_reconnect(wiki: Site, tmp_path: Path) -> None:
    """A connection that broke under a frame, before its close was read: the run was left unwatched and cancelled."""
    engine = FakeEngine(delay=0.02, steps=20)
    store = Store(tmp_path / "db.sqlite3")
    pages = Pages([SiteRuntime.build(wiki, "")], store, engine, unclaimed_s=5.0)
    runtime = pages.sites["wiki"]
    location = runtime.locate("/Lisp")
    assert location is not None
    job = pages.job(runtime, location)
    generation = pages.generation(job, 1)

    class Broken:
        state = State()

        async def send_text(self, text: str) -> None:
            raise OSError("connection reset")

    stream = Stream(pages, Screens(Shell(), pages, index_url=None), 0.0)
    with pytest.raises(OSError):
        await stream._watch(Broken(), job, generation)  # type: ignore[arg-type]
    await asyncio.sleep(0.1)
    assert generation.claimed and not generation.finished and engine.cancelled == 0
    generation.cancel()
    store.close()


def test_a_connection_that_drops_under_uvicorn_keeps_its_run_for_the_reconnect(wiki: Site, tmp_path: Path) -> None:
    """Under uvicorn (websockets-sansio, genui serve's), a connection that breaks with no close frame is a 1005, as
    a close with no code is: every drop ended the page's run, and the reconnect wrote it again from its first step
    (a reader on a flaky network's review)."""
    import socket as sockets

    from chromium import served
    from websockets.sync.client import connect

    from genui.app import create_app

    engine = FakeEngine(delay=0.05, steps=20)
    with served(create_app([wiki], engine, db_path=tmp_path / "pages.sqlite3")) as url:
        address = url.replace("http://", "ws://") + LISP
        with contextlib.suppress(Exception), connect(address, origin=url) as first:  # type: ignore[arg-type]
            for _ in range(6):
                first.recv(timeout=10)
            first.socket.shutdown(sockets.SHUT_RDWR)  # the network gone: no close frame
            first.socket.close()
        time.sleep(0.5)
        assert engine.cancelled == 0
        with connect(address, origin=url) as second:  # type: ignore[arg-type]
            messages = [second.recv(timeout=10)]
            while "<h1>Lisp</h1>" not in messages[-1] or "genui-draft" in messages[-1]:
                messages.append(second.recv(timeout=10))
        assert "part 1 of at most 2, step 1<" not in messages[0] and len(engine.calls) == 1, messages[0]


def test_a_page_left_under_a_frame_ends_its_run_at_once(
    wiki: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page left closes its stream with 1000; a frame sent after that fails, and on a busy CPU it failed before the
    task that reads the close code had run: the run was held 30 s for a reconnect that never came (a browser test
    failed 1 run in 8 beside two busy cores). Here the reading task comes 0.3 s late, as it may."""
    from chromium import served
    from websockets.sync.client import connect

    import genui.stream
    from genui.app import create_app

    async def late(websocket: WebSocket) -> int:  # reads the close code 0.3 s after it came
        while (message := await websocket.receive())["type"] != "websocket.disconnect":
            pass
        await asyncio.sleep(0.3)
        return int(message["code"])

    monkeypatch.setattr(genui.stream, "_closed", late)
    engine = FakeEngine(delay=0.02, steps=200)
    with served(create_app([wiki], engine, db_path=tmp_path / "pages.sqlite3")) as url:
        with connect(url.replace("http://", "ws://") + LISP, origin=url) as socket:  # type: ignore[arg-type]
            for _ in range(3):
                socket.recv(timeout=10)
            socket.close(1000)  # as genui.js closes the stream of a page the visitor leaves
        wait_until(lambda: engine.cancelled == 1, seconds=3.0)


def test_a_stream_says_its_progress_again_while_nothing_new_comes(
    client_factory: ClientFactory, wiki: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that died with the browser never told showed 'Writing…' for ever (a reader on a flaky network's
    review): the stream sends its progress line again while the run has nothing new, so that genui.js can tell a
    silent stream from a slow one."""
    import genui.stream

    monkeypatch.setattr(genui.stream, "HEARTBEAT_S", 0.1)
    engine = FakeEngine(delay=0.5, steps=2)
    client = client_factory([wiki], engine)
    messages = ws_messages(client, LISP)
    beats = [message for message in messages if "genui-draft" not in message and "<h1>" not in message]
    assert len(beats) >= 4, messages
    first = next(message for message in messages if "genui-draft" in message)
    said = first.split("</p>", 1)[0] + "</p>"
    assert said.startswith('<p id="genui-progress"') and said in beats, (said, beats)


def test_a_page_waiting_for_the_engine_says_its_place_in_line_as_it_moves_up(
    client_factory: ClientFactory, wiki: Site
) -> None:
    """A page behind others in the engine's queue said "Waiting for the model…" and nothing more, for a minute in a
    class of 25 behind one address."""

    class Queued(FakeEngine):  # the engine's QueuedFrames (engine.scheduler), then the page
        def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
            return after_places((3, 1, 0), super().stream(request))

    received = ws_messages(client_factory([wiki], Queued(steps=2)), LISP)
    said = [re.sub(r"<[^>]+>", "", message) for message in received if 'id="genui-draft"' not in message]
    assert said[:3] == [
        "Waiting for the model: 3 pages are ahead of this one.",
        "Waiting for the model: one page is ahead of this one.",
        "Waiting for the model…",
    ]
    assert '<div id="genui-content"' in received[-1]
