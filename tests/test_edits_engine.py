"""genui's edits on the real engine: engine.Scheduler over a tiny random model on CPU.

genui builds its infill request without importing torch (genui/edits.py); these check the engine takes it, and that
what the engine writes lands between the page's own bytes, whatever the (random) model writes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import replace

import pytest
from engine_fixtures import tiny_model
from fakes import ClientFactory, visit, ws_messages
from test_app import HTMX, live_url
from test_edits import VARIATIONS_LIVE, keep_form, page_html

from engine import LoadedModel, Scheduler
from genui.runtime import SiteRuntime
from genui.sections import sections
from genui.sites import Site


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


def test_a_rewrite_and_variations_on_the_real_engine_keep_the_page_around_them(
    client_factory: ClientFactory, wiki: Site, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = replace(wiki, model=replace(wiki.model, tokens=32, steps=4))  # one canvas a page, four steps
    engine = Scheduler(loaded)
    try:
        client = client_factory([small], engine)  # type: ignore[arg-type]
        first = page_html(visit(client, "/Lisp").text)
        # the route's opening pins <h1>Lisp</h1>, whatever the model writes around it: a section that is there
        # on every seed (which the toolbar does not offer, tests/test_edits.py), rewritten as another would be
        monkeypatch.setattr(SiteRuntime, "pinned_sections", lambda self, location: frozenset())
        part = sections(first)[0]
        assert first[part.start : part.end] == "<h1>Lisp</h1>"
        response = client.post("/_genui/rewrite", data={"site": "wiki", "url": "/Lisp", "section": "1"}, headers=HTMX)
        assert response.status_code == 200
        assert (
            "/Lisp?v=2" in response.headers["hx-push-url"]
            and "genui-error" not in ws_messages(client, live_url(response.text))[-1]
        )
        second = page_html(client.get("/Lisp?v=2").text)
        assert second.startswith(first[: part.start]) and second.endswith(first[part.end :])

        response = client.post("/_genui/variations", data={"site": "wiki", "url": "/Lisp"}, headers=HTMX)
        match = VARIATIONS_LIVE.search(response.text)
        assert match is not None
        final = ws_messages(client, match.group(1).replace("&amp;", "&"))[-1]
        assert final.count("Keep variation") == 3 and "genui-error" not in final
        candidates = re.findall(r'<section class="genui-candidate".*?"genui-page">(.*?)</div>\n<form', final, re.S)
        assert len(candidates) == 3 and all("<h1>Lisp</h1>" in candidate for candidate in candidates)
        kept = client.post("/_genui/keep", data=keep_form(final, 3), headers=HTMX)
        assert kept.status_code == 200 and page_html(client.get("/Lisp").text) == candidates[2]
    finally:
        asyncio.run(engine.close())
