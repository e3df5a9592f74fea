"""The app answers while its model loads: pages are a 503 with Retry-After until then, /_genui/health says when."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine, eventually, visit
from starlette.testclient import TestClient

from engine.frames import EngineError
from genui.app import create_app
from genui.cli import main
from genui.sites import load_sites


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
        app = create_app(load_sites(SITES_DIR), db_path=tmp_path / "db.sqlite3", load_engine=gate, **options)
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
    assert '<meta http-equiv="refresh" content="5">' in page.text  # a browser asks again by itself
    # A POST is not asked again by a refresh (it would become a GET of the form's URL).
    form = {"site": "wiki", "url": "/Lisp"}
    posted = client.post("/_genui/regenerate", data=form, headers={"Origin": "http://testserver"})
    assert posted.status_code == 503 and "http-equiv" not in posted.text
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


def test_shutting_down_while_the_model_loads_does_not_wait_for_it(tmp_path: Path) -> None:
    gate = Gate()
    app = create_app(load_sites(SITES_DIR), db_path=tmp_path / "db.sqlite3", load_engine=gate)
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
