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


def lisp_variations(wiki: Site, engine: FakeEngine, max_canvases: int) -> Variations:
    """Three variations of the wiki's /Lisp, written by ``engine``."""
    runtime = SiteRuntime.build(wiki, "/wiki")
    request = GenerationRequest("<title>Lisp</title>", max_canvases=max_canvases)
    key = PageKey("wiki", "/Lisp", "", "fake-model", "t", 0)
    return Variations(runtime, key, "/Lisp", lambda: engine.stream_variants(request, 3), 3, unclaimed_s=10)


async def test_a_fast_engines_drafts_are_sanitised_only_as_often_as_a_watcher_shows_them(
    wiki: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drafted: list[str] = []

    def counting(text: str, **options: bool) -> str:
        if options.get("draft"):
            drafted.append(text)
        return sanitize_html(text, **options)

    monkeypatch.setattr(genui.runtime, "sanitize_html", counting)
    # no delay: 3 candidates x 40 drafts a canvas, as fast as the loop runs them
    variations = lisp_variations(wiki, FakeEngine(steps=40), max_canvases=4)
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


async def test_a_set_of_variations_with_nothing_new_gives_its_last_state_again(wiki: Site) -> None:
    """Its stream says it again, so that genui.js can tell a silent stream, a connection that died with the browser
    never told, from a slow set (a reader on a flaky network's review)."""
    variations = lisp_variations(wiki, FakeEngine(steps=2, delay=0.4), max_canvases=1)
    seen: list[Candidates] = []
    async for state in variations.watch(heartbeat=0.1):
        seen.append(state)
    again = sum(1 for before, after in zip(seen, seen[1:], strict=False) if before is after)
    assert again >= 3 and seen[-1].pages is not None, again
