from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeEngine

import genui.runtime
from engine.frames import GenerationRequest
from genui.runtime import SiteRuntime
from genui.sanitize import sanitize_html
from genui.sites import Site
from genui.store import PageKey
from genui.variations import Candidates, Variations


async def test_a_fast_engines_drafts_are_sanitised_only_as_often_as_a_watcher_shows_them(
    wiki: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drafted: list[str] = []

    def counting(text: str, **options: bool) -> str:
        if options.get("draft"):
            drafted.append(text)
        return sanitize_html(text, **options)

    monkeypatch.setattr(genui.runtime, "sanitize_html", counting)
    runtime = SiteRuntime.build(wiki, "/wiki")
    engine = FakeEngine(steps=40)  # no delay: 3 candidates x 40 drafts a canvas, as fast as the loop runs them
    request = GenerationRequest("<title>Lisp</title>", max_canvases=4)
    key = PageKey("wiki", "/Lisp", "", "fake-model", "t", 0)
    variations = Variations(runtime, key, "/Lisp", lambda: engine.stream_variants(request, 3), 3, unclaimed_s=10)
    seen: list[Candidates] = []
    async for state in variations.watch(interval=0.05):
        seen.append(state)
        if not state.finished:
            assert state.drafts == tuple(
                sanitize_html(t, allow_images=False, draft=True) if t else "" for t in state.texts
            )
    shown = [state for state in seen if not state.finished]
    assert seen[-1].pages is not None and len(seen[-1].pages) == 3
    assert len(drafted) <= 3 * len(shown) < 3 * 40  # once per candidate a state shown, not once a frame
