"""/_genui/metrics: what the server has done and is doing, in Prometheus's text format, read back by its parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import ClientFactory, FakeEngine, example_sites, region_writer, visit, ws_messages
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from test_app import HTMX, live_url, wait_until

from engine.frames import EngineError
from genui.edits import Infill
from genui.sites import Site

LISP = "/_genui/ws?site=wiki&url=/Lisp&v=1"
PAGES = "/{path:path}"  # the handler of a site's pages, the site served alone
THREAD = "/forum/r/hacking/My_first_lisp"


def scraped(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /_genui/metrics by its name and labels, as a Prometheus server reads them."""
    answer = client.get("/_genui/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=")
    assert answer.headers["cache-control"] == "no-store"
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_a_written_page_is_counted_with_its_seconds_tokens_canvases_and_steps(
    client_factory: ClientFactory, wiki: Site
) -> None:
    client = client_factory([wiki], FakeEngine(steps=3, canvas_chars=120))
    before = scraped(client)
    assert before[("genui_model_ready", ())] == 1 and before[("genui_status", (("status", "ready"),))] == 1
    assert before[("genui_status", (("status", "loading"),))] == 0
    assert before[("genui_model_info", (("model", "fake-model"),))] == 1
    assert before[("process_resident_memory_bytes", ())] > 0  # the process's own, in the app's registry
    # every series of the sites served is there from the start, at 0: a first burst shows in increase()
    assert before[("genui_runs_total", (("kind", "whole"), ("outcome", "written"), ("site", "wiki")))] == 0
    assert before[("genui_posts_total", (("site", "wiki"),))] == 0
    assert before[("genui_http_responses_total", (("code", "429"), ("handler", PAGES)))] == 0
    assert not any(name.endswith("_created") for name, _ in before)  # OpenMetrics' times, not written
    assert client.get("/Lisp").status_code == 200  # the wiki served alone, at /
    ws_messages(client, LISP)
    assert client.get("/Lisp").status_code == 200  # from the cache now
    after = scraped(client)
    assert after[("genui_page_requests_total", (("answer", "written"), ("site", "wiki")))] == 1
    assert after[("genui_page_requests_total", (("answer", "cached"), ("site", "wiki")))] == 1
    assert after[("genui_streams_total", (("end", "sent"),))] == 1
    assert after[("genui_http_request_duration_seconds_count", (("handler", PAGES),))] == 2
    assert after[("genui_runs_total", (("kind", "whole"), ("outcome", "written"), ("site", "wiki")))] == 1
    assert after[("genui_run_duration_seconds_count", (("site", "wiki"),))] == 1
    assert after[("genui_run_first_frame_seconds_count", (("site", "wiki"),))] == 1
    # the fake engine's page: two canvases of three steps, their tokens its words
    assert after[("genui_canvases_total", (("site", "wiki"), ("stopped_early", "false")))] == 2
    assert after[("genui_denoising_steps_total", (("site", "wiki"),))] == 6
    assert after[("genui_tokens_total", (("site", "wiki"),))] > 10
    assert after[("genui_runs_active", (("run", "visitor"),))] == 0
    # by the route that answered: the page's two GETs, and the scrape before this one
    assert after[("genui_http_responses_total", (("code", "200"), ("handler", PAGES)))] == 2
    assert after[("genui_http_responses_total", (("code", "200"), ("handler", "/_genui/metrics")))] == 1
    assert client.get("/_genui/nothing").status_code == 404
    missing = ("genui_http_responses_total", (("code", "404"), ("handler", "/_genui/{rest:path}")))
    assert scraped(client)[missing] == 1


def test_a_page_left_unwatched_is_counted_cancelled_and_a_refused_one_overloaded(
    client_factory: ClientFactory, wiki: Site
) -> None:
    engine = FakeEngine(delay=0.05, steps=50)
    client = client_factory([wiki], engine)
    with client.websocket_connect(LISP) as socket:
        socket.receive_text()
        assert scraped(client)[("genui_runs_active", (("run", "visitor"),))] == 1
        socket.close(1000)  # as genui.js closes the stream of a page the visitor leaves
    wait_until(lambda: engine.cancelled == 1)
    counted = scraped(client)
    assert counted[("genui_streams_total", (("end", "left"),))] == 1
    assert counted[("genui_runs_total", (("kind", "whole"), ("outcome", "cancelled"), ("site", "wiki")))] == 1
    assert counted[("genui_runs_active", (("run", "visitor"),))] == 0
    engine.overloaded, engine.delay = 4, 0.0
    ws_messages(client, LISP.replace("/Lisp", "/Scheme"))
    counted = scraped(client)
    assert counted[("genui_runs_total", (("kind", "whole"), ("outcome", "overloaded"), ("site", "wiki")))] == 1
    assert counted[("genui_run_duration_seconds_count", (("site", "wiki"),))] == 0  # no written run timed


def test_a_readers_post_is_counted_and_its_replies_run_by_its_kind(client_factory: ClientFactory) -> None:
    client = client_factory(example_sites(), FakeEngine())
    visit(client, THREAD)
    response = client.post(THREAD, data={"user": "ada", "text": "Hello all"}, headers=HTMX)
    assert response.status_code == 200
    ws_messages(client, live_url(response.text))
    counted = scraped(client)
    assert counted[("genui_posts_total", (("site", "forum"),))] == 1
    assert counted[("genui_runs_total", (("kind", "replies"), ("outcome", "written"), ("site", "forum")))] == 1
    # a post refused (no name) is no post stored
    assert client.post(THREAD, data={"user": "", "text": "Hello"}, headers=HTMX).status_code == 400
    assert scraped(client)[("genui_posts_total", (("site", "forum"),))] == 1


def test_a_server_error_is_counted_as_its_500(
    client_factory: ClientFactory, wiki: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starlette answers an unhandled error outside every middleware added: counted all the same."""
    monkeypatch.setattr("genui.views.Views.live", lambda *_: 1 / 0)
    client = client_factory([wiki], FakeEngine(), raise_server_exceptions=False)
    assert client.get("/_genui/live").status_code == 500
    assert scraped(client)[("genui_http_responses_total", (("code", "500"), ("handler", "/_genui/live")))] == 1


def test_the_metrics_are_under_the_base_path_each_apps_own_and_may_be_turned_off(
    client_factory: ClientFactory, wiki: Site
) -> None:
    first = client_factory([wiki], FakeEngine(), app_options={"base_path": "/demo"})
    second = client_factory([wiki], FakeEngine())
    for _ in range(3):
        assert first.get("/demo/_genui/live").status_code == 200
    assert first.get("/demo/_genui/metrics").status_code == 200
    assert scraped(second)[("genui_http_responses_total", (("code", "200"), ("handler", "/_genui/live")))] == 0
    off = client_factory([wiki], FakeEngine(), app_options={"metrics": False})  # genui serve --no-metrics
    assert off.get("/_genui/metrics").status_code == 404


def test_a_stream_from_another_sites_page_is_counted_refused(client_factory: ClientFactory, wiki: Site) -> None:
    client = client_factory([wiki], FakeEngine())
    with client.websocket_connect(LISP, headers={"Origin": "http://elsewhere.example"}) as socket:
        socket.receive_text()
    assert scraped(client)[("genui_streams_total", (("end", "refused"),))] == 1


def test_the_status_follows_the_model_loading(wiki: Site, tmp_path: Path) -> None:
    """genui_model_ready is 0 while loading and after a failure alike; genui_status says which, as the health
    check does."""
    import threading

    release = threading.Event()

    def load() -> FakeEngine:
        release.wait(10)
        return FakeEngine()

    from genui.app import create_app

    with TestClient(
        create_app([wiki], db_path=tmp_path / "db.sqlite3", load_engine=load, identify_model=None)
    ) as client:
        loading = scraped(client)
        assert loading[("genui_status", (("status", "loading"),))] == 1 and loading[("genui_model_ready", ())] == 0
        release.set()
        wait_until(lambda: scraped(client)[("genui_status", (("status", "ready"),))] == 1)


def test_a_run_read_ahead_that_a_visitor_comes_to_is_counted_theirs(client_factory: ClientFactory, wiki: Site) -> None:
    engine = FakeEngine(steps=60, delay=0.02)  # 1.2 s a canvas: the socket below joins the page read ahead in time
    client = client_factory([wiki], engine, read_ahead=1)
    visit(client, "/Lisp")
    wait_until(lambda: len(engine.calls) == 2, 10)  # /Lisp_tree, its first link, read ahead
    before = scraped(client)
    assert before[("genui_runs_active", (("run", "ahead"),))] == 1
    with client.websocket_connect("/_genui/ws?site=wiki&url=/Lisp_tree&v=1") as socket:
        socket.receive_text()
        during = scraped(client)
        assert during[("genui_runs_active", (("run", "visitor"),))] == 1
        assert during[("genui_runs_active", (("run", "ahead"),))] == 0
        with pytest.raises(WebSocketDisconnect):  # the server closes the stream once the page has landed
            while True:
                socket.receive_text()
    engine.delay = 0.5  # the next page read ahead stays under way (20 s): only the two runs before it end
    wait_until(lambda: len(engine.calls) == 3, 15)  # the page it leads to, read ahead in turn
    after = scraped(client)
    assert after[("genui_runs_total", (("kind", "whole"), ("outcome", "written"), ("site", "wiki")))] == 2
    assert after[("genui_runs_total", (("kind", "ahead"), ("outcome", "written"), ("site", "wiki")))] == 0


def test_a_thread_whose_waiting_replies_a_visit_starts_is_counted_as_a_page_being_written(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A visit to a thread whose replies' run had failed starts them again: its GET was in no count of pages asked for
    (session 78's operator review, left alone then)."""
    failures = [1]

    def flaky(edit: Infill) -> str:
        if failures:
            failures.pop()
            raise EngineError("the model fell over")
        return region_writer(edit)

    engine = FakeEngine(region=flaky)
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    client.post(THREAD, data={"user": "ada", "text": "hi"}, headers=HTMX)
    wait_until(lambda: not failures)  # the replies' run has failed and is gone
    asked = ("genui_page_requests_total", (("answer", "written"), ("site", "forum")))
    before = scraped(client)[asked]
    arriving = client.get(THREAD, headers=HTMX).text  # the replies written again, in place
    assert "genui-in-place" in arriving
    assert scraped(client)[asked] == before + 1
    assert "Welcome, ada!" in ws_messages(client, live_url(arriving))[-1] and len(engine.infills) == 2
