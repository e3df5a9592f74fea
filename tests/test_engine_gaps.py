"""Openings with gaps (engine.gaps): the page is written turn by turn, one turn per hole, and every fixed piece of
the opening comes back word for word, in order, around what the model wrote in the holes."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Iterator

import pytest
from engine_fixtures import collect, tiny_model

from engine import (
    AutoregressiveEngine,
    CanvasFrame,
    DoneFrame,
    EngineError,
    Frame,
    GenerationRequest,
    LoadedModel,
    Scheduler,
    StepFrame,
)
from engine.gaps import GAP_TOKENS, hole_text, write_with_gaps
from engine.generation import plan_batch
from engine.streaming import Row


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


OPENING = "<dl><dt>Name</dt><dd>"
GAPS = ("</dd><dt>Size</dt><dd>", "</dd></dl>")


def words(text: str) -> list[int]:
    return [ord(c) for c in text]


def letters(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def test_a_hole_keeps_one_line_of_text_up_to_the_first_tag() -> None:
    assert hole_text(" 1920 × 1080</dd><dt>Scale", 24, words, letters) == "1920 × 1080"
    assert hole_text("Off\n</div>", 24, words, letters) == "Off"
    assert hole_text("</dd>", 24, words, letters) == ""  # the model may leave a hole empty
    assert hole_text("to the end of the text", 24, words, letters) == "to the end of the text"
    assert hole_text("abcdefgh<", 3, words, letters) == "abc"  # at most `tokens` tokens


class Scripted:
    """A stand-in engine: each turn's text is its opening, then the next scripted continuation, in two canvases."""

    def __init__(self, continuations: list[str]) -> None:
        self.continuations = continuations
        self.openings: list[str] = []
        self.budgets: list[int | None] = []

    async def run(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        self.openings.append(request.opening)
        self.budgets.append(request.max_tokens)
        assert not request.gaps
        text = request.opening + self.continuations[len(self.openings) - 1]
        half = len(text) // 2
        canvases = []
        for index, part in enumerate((text[:half], text[half:])):
            yield StepFrame(canvas=index, step=1, text=part[:-1], accepted=1, entropy=0.5)
            canvas = CanvasFrame(canvas=index, steps=3, text=part, tokens=len(part), seconds=0.1)
            canvases.append(canvas)
            yield canvas
        yield DoneFrame(text, tuple(canvases), 2.0, 0.01, 0.2, stats={"tokens": 10.0, "forwards": 5.0})


async def test_each_turn_opens_with_everything_decided_so_far(loaded: LoadedModel) -> None:
    engine = Scripted(["Ada</dd><dt>Size", " 4 GiB \n</dd></dl>", "</p>tail"])
    request = GenerationRequest(prompt="p", max_tokens=512, opening=OPENING, gaps=GAPS)
    frames = await collect(write_with_gaps(loaded, request, engine.run))

    assert engine.openings == [
        OPENING,
        OPENING + "Ada" + GAPS[0],
        OPENING + "Ada" + GAPS[0] + "4 GiB" + GAPS[1],
    ]
    ids = [len(loaded.tokenizer.encode(o, add_special_tokens=False)) for o in engine.openings]
    assert engine.budgets[:2] == [ids[0] + GAP_TOKENS, ids[1] + GAP_TOKENS]  # room for one hole a turn
    assert engine.budgets[2] == 512  # the last turn has the page's own budget
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.text == "<dl><dt>Name</dt><dd>Ada</dd><dt>Size</dt><dd>4 GiB</dd></dl></p>tail"
    assert len(done.canvases) == 6  # every turn's canvases count
    assert done.stats == {"tokens": 30.0, "forwards": 15.0}
    assert done.tokens_per_forward == 2.0


async def test_turns_before_the_last_show_drafts_of_the_whole_page(loaded: LoadedModel) -> None:
    engine = Scripted(["Ada</dd>", "4 GiB</dd>", "</p>tail"])
    request = GenerationRequest(prompt="p", max_tokens=512, opening=OPENING, gaps=GAPS)
    frames = await collect(write_with_gaps(loaded, request, engine.run))
    first_turn = frames[:2]  # one draft per canvas; the turn's own CanvasFrames and DoneFrame stay inside
    assert all(isinstance(f, StepFrame) for f in first_turn)
    assert first_turn[1].text == (OPENING + "Ada</dd>")[:-1]  # canvas 0's final text, then canvas 1's draft
    kinds = [type(f).__name__ for f in frames[4:]]  # the last turn's frames pass as they are
    assert kinds == ["StepFrame", "CanvasFrame", "StepFrame", "CanvasFrame", "DoneFrame"]


async def test_an_opening_too_long_for_its_holes_is_refused(loaded: LoadedModel) -> None:
    engine = Scripted(["x</dd>"] * 3)
    request = GenerationRequest(prompt="p", max_tokens=32, opening=OPENING * 4, gaps=GAPS)
    with pytest.raises(EngineError, match="no room for the gap"):
        await collect(write_with_gaps(loaded, request, engine.run))


async def test_the_scheduler_fills_the_holes_with_the_model_s_text(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="A list", max_tokens=256, max_steps=4, seed=3, opening=OPENING, gaps=GAPS)
    async with Scheduler(loaded) as engine:
        assert engine.fits(request)
        frames = await collect(engine.stream(request))
        variants = await collect(engine.stream_variants(request, 2))
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    pattern = re.escape(OPENING) + "([^<\n]*)" + re.escape(GAPS[0]) + "([^<\n]*)" + re.escape(GAPS[1])
    assert re.match(pattern, done.text), done.text
    assert all(c.steps <= 4 for c in done.canvases)
    assert len(done.canvases) >= 3  # a canvas for each hole at least, and the last turn's
    ends = [f for f in variants if isinstance(f, DoneFrame)]
    assert [f.variant for f in ends] == [0, 1]
    assert ends[0].text == done.text  # variant 0 is the request's own seed
    assert all(re.match(pattern, f.text) for f in ends)


async def test_the_autoregressive_engine_fills_the_holes_too(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="A list", max_tokens=128, seed=1, opening=OPENING, gaps=GAPS)
    engine = AutoregressiveEngine(loaded)
    try:
        frames = await collect(engine.stream(request))
    finally:
        await engine.close()
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert re.match(re.escape(OPENING) + "[^<\n]*" + re.escape(GAPS[0]) + "[^<\n]*" + re.escape(GAPS[1]), done.text)


async def test_a_request_with_gaps_does_not_fit_where_its_holes_cannot(loaded: LoadedModel) -> None:
    async with Scheduler(loaded) as engine:
        request = GenerationRequest(prompt="p", max_tokens=64, opening=OPENING, gaps=GAPS)
        holes = len(GAPS) * GAP_TOKENS
        fixed = len(loaded.tokenizer.encode(OPENING + "".join(GAPS), add_special_tokens=False))
        assert engine.fits(request) == (fixed + holes < 64)
        assert not engine.fits(dataclasses.replace(request, gaps=GAPS * 4))
        assert engine.fits(dataclasses.replace(request, gaps=()))


def test_a_plan_refuses_gaps_it_would_otherwise_ignore(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="p", opening=OPENING, gaps=GAPS)
    with pytest.raises(ValueError, match="turn by turn"):
        plan_batch(loaded, [request], [Row(emit=lambda frame: None)])
