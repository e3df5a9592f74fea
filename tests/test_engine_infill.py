from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_fixtures import tiny_model

from engine import DoneFrame, EngineError, Frame, GenerationRequest, InfillRequest, LoadedModel, StepFrame
from engine.config import EOS_ID, PAD_ID
from engine.generation import run_plan
from engine.infill import plan_infill
from engine.streaming import Row


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


BEFORE = '<ul><li><a href="/wiki/Array">Array</a></li><li>'
AFTER = "</li></ul>\n<p>The quick brown fox.</p>"


def edit(loaded: LoadedModel, request: InfillRequest) -> tuple[list[Frame], list[int], int]:
    """Frames, the returned canvas ids, and the prompt length."""
    frames: list[Frame] = []
    plan = plan_infill(loaded, request, Row(emit=frames.append))
    tokens = run_plan(loaded, plan)
    return frames, tokens[0].tolist(), plan.input_ids.shape[1]


def test_infill_keeps_the_tokens_after_the_region_exactly(loaded: LoadedModel) -> None:
    request = InfillRequest(GenerationRequest(prompt="Edit the list", max_steps=6, seed=4), BEFORE, AFTER, 8)
    frames, canvas, _ = edit(loaded, request)
    after = loaded.tokenizer.encode(AFTER, add_special_tokens=False)
    assert canvas[8 : 8 + len(after)] == after
    assert canvas[8 + len(after)] == EOS_ID  # `after` is the end of the text
    assert set(canvas[9 + len(after) :]) <= {PAD_ID}
    assert loaded.tokenizer.decode(canvas[8 : 8 + len(after)]) == AFTER


def test_infill_returns_the_callers_text_around_the_new_region(loaded: LoadedModel) -> None:
    request = InfillRequest(GenerationRequest(prompt="", max_steps=4, seed=1), BEFORE, AFTER, 6)
    frames, canvas, _ = edit(loaded, request)
    final = frames[-1]
    assert isinstance(final, DoneFrame)
    region = canvas[:6][: canvas.index(EOS_ID)] if EOS_ID in canvas[:6] else canvas[:6]
    assert final.canvases[0].text == loaded.tokenizer.decode(region, skip_special_tokens=True)
    assert final.text == BEFORE + final.canvases[0].text + AFTER
    assert all(isinstance(frame, StepFrame) for frame in frames[:-2])


def test_infill_writes_new_tokens_into_the_region(loaded: LoadedModel) -> None:
    texts = {
        edit(loaded, InfillRequest(GenerationRequest(prompt="", max_steps=4, seed=seed), BEFORE, AFTER, 6))[0][-1].text
        for seed in range(3)
    }
    assert len(texts) > 1  # the region changes with the seed; the sides do not
    assert all(text.startswith(BEFORE) and text.endswith(AFTER) for text in texts)


def test_infill_sees_only_as_much_after_text_as_the_canvas_holds(loaded: LoadedModel) -> None:
    long_after = " tail" * 100
    frames, canvas, _ = edit(loaded, InfillRequest(GenerationRequest(prompt="", max_steps=2), BEFORE, long_after, 20))
    kept = loaded.tokenizer.encode(long_after, add_special_tokens=False)[:12]
    assert canvas[20:] == kept  # no room for an EOS: the text goes on past the canvas
    final = frames[-1]
    assert isinstance(final, DoneFrame) and final.text.endswith(long_after)


@pytest.mark.parametrize("after", [" tail" * 100, "</p>"])
def test_a_region_as_long_as_the_canvas_still_sees_what_follows_it(loaded: LoadedModel, after: str) -> None:
    """A quarter of the canvas at most stays for the text after the region and its end: written with nothing after
    it in view, a rewritten section would not know where to stop."""
    _, canvas, _ = edit(loaded, InfillRequest(GenerationRequest(prompt="", max_steps=2), BEFORE, after, 32))
    ids = loaded.tokenizer.encode(after, add_special_tokens=False)
    pinned = min(len(ids) + 1, 32 // 4)  # the text after, then its end where it fits
    assert len(canvas) == 32 and canvas[32 - pinned :] == (ids + [EOS_ID])[:pinned]


def test_the_text_before_the_region_is_the_prompts_end(loaded: LoadedModel) -> None:
    request = InfillRequest(GenerationRequest(prompt="Edit", max_steps=2), BEFORE, AFTER, 4)
    plan = plan_infill(loaded, request, Row(emit=lambda frame: None))
    before = loaded.tokenizer.encode(BEFORE, add_special_tokens=False)
    assert plan.input_ids[0, -len(before) :].tolist() == before


@pytest.mark.parametrize("region", [0, 33])
def test_a_region_with_text_after_it_must_fit_in_one_canvas(loaded: LoadedModel, region: int) -> None:
    request = InfillRequest(GenerationRequest(prompt=""), BEFORE, AFTER, region)
    with pytest.raises(EngineError, match="region_tokens"):
        plan_infill(loaded, request, Row(emit=lambda frame: None))


def test_with_nothing_after_the_region_it_continues_over_several_canvases(loaded: LoadedModel) -> None:
    length = loaded.canvas_length
    request = InfillRequest(GenerationRequest(prompt="Reply", max_steps=2, seed=2), BEFORE, "", 2 * length + 1)
    plan = plan_infill(loaded, request, Row(emit=lambda frame: None))
    assert plan.settings.max_canvases == 3 and plan.pins is None and plan.settings.stop_at_eos
    frames, canvas, _ = edit(loaded, request)
    final = frames[-1]
    assert isinstance(final, DoneFrame) and final.text.startswith(BEFORE)
    written = "".join(frame.text for frame in final.canvases)
    assert final.text == BEFORE + written
    # every canvas but an end-of-text one is whole: the tiny random model writes until the budget or its EOS
    assert len(final.canvases) == 3 or EOS_ID in canvas
