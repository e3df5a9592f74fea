"""Openings with gaps (engine.gaps): the model writes each hole token by token before the page is denoised, and
every fixed piece of the opening comes back word for word, in order, around what it wrote there."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import pytest
import torch
from engine_fixtures import collect, tiny_model
from transformers import DynamicCache

import engine.gaps
from engine import (
    AutoregressiveEngine,
    DoneFrame,
    EngineError,
    Frame,
    GenerationRequest,
    LoadedModel,
    Scheduler,
    StepFrame,
)
from engine.gaps import GAP_TOKENS, fill_gaps, hole_text
from engine.generation import plan_batch
from engine.streaming import GenerationCancelled, Row


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
    # cut short, at its last whole word and with nothing hanging (it read `Serves: 1. To make potato-`)
    long = "1. To make potato-based food, you need to first make potato-based dough"
    assert hole_text(long, 59, words, letters) == "1. To make potato-based food, you need to first make"
    assert hole_text(long, 29, words, letters) == "1. To make potato-based food"
    assert hole_text(long, 40, words, letters) == "1. To make potato-based food, you need"


PATTERN = re.escape(OPENING) + "([^<\n]*)" + re.escape(GAPS[0]) + "([^<\n]*)" + re.escape(GAPS[1])


def test_the_holes_are_written_before_the_page_and_the_fixed_text_kept_word_for_word(loaded: LoadedModel) -> None:
    frames: list[Frame] = []
    request = GenerationRequest(prompt="A list", max_tokens=256, seed=3, opening=OPENING, gaps=GAPS)
    filled = fill_gaps(loaded, request, frames.append)
    assert filled.gaps == () and filled.prompt == request.prompt and filled.max_tokens == 256
    match = re.fullmatch(PATTERN, filled.opening)
    assert match is not None, filled.opening
    count = len(loaded.tokenizer.encode(match[1], add_special_tokens=False))
    assert count <= GAP_TOKENS
    assert [f.step for f in frames if isinstance(f, StepFrame)] == [1, 2]  # a draft of the page after each hole
    assert isinstance(frames[0], StepFrame) and frames[0].text == OPENING + match[1] + GAPS[0]
    assert fill_gaps(loaded, request) == filled  # the request's seed decides the holes
    assert fill_gaps(loaded, dataclasses.replace(request, gaps=())) == dataclasses.replace(request, gaps=())


def test_a_hole_after_a_word_keeps_the_space_the_model_wrote(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<p>A hash table is` and a hole the model began ` a data structure` read `isa data structure` (an engine
    user's walkthrough). A hole the model ended at once keeps the page read for the next (transformers' crop(0)
    crops nothing)."""
    seen: list[int] = []

    def write(loaded: LoadedModel, unread: list[int], cache: object, *args: object) -> tuple[str, int, bool]:
        seen.append(cache.get_seq_length())  # type: ignore[attr-defined]
        loaded.denoiser.next_token_logits(torch.tensor([unread]), cache)  # read, as the real one does
        return ("a data structure", 0, True) if len(seen) == 1 else ("", 0, False)

    monkeypatch.setattr(engine.gaps, "_write_hole", write)
    request = GenerationRequest(
        prompt="Hash table", max_tokens=256, opening="<p>A hash table is", gaps=(" that maps keys: ", "</p>")
    )
    filled = fill_gaps(loaded, request)
    assert filled.opening == "<p>A hash table is a data structure that maps keys: </p>"
    read = len(loaded.denoiser.encode_prompt(request.prompt)) + len(
        loaded.tokenizer.encode(request.opening, add_special_tokens=False)
    )
    assert seen == [0, read]  # the second hole goes on from the prompt and the page, read once
    for opening in ("<p>Size: ", "<p>"):  # after a space or a tag, no second space
        seen.clear()
        again = fill_gaps(loaded, dataclasses.replace(request, opening=opening))
        assert again.opening == f"{opening}a data structure that maps keys: </p>"


def test_a_cancelled_request_stops_writing_its_holes(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="A list", max_tokens=256, opening=OPENING, gaps=GAPS)
    with pytest.raises(GenerationCancelled):
        fill_gaps(loaded, request, cancelled=lambda: True)


def test_an_opening_too_long_for_its_holes_is_refused(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="p", max_tokens=32, opening=OPENING * 4, gaps=GAPS)
    with pytest.raises(EngineError, match="no room for the gap"):
        fill_gaps(loaded, request)


async def test_the_scheduler_fills_the_holes_with_the_model_s_text(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="A list", max_tokens=256, max_steps=4, seed=3, opening=OPENING, gaps=GAPS)
    async with Scheduler(loaded) as engine:
        assert engine.fits(request)
        frames = await collect(engine.stream(request))
        variants = await collect(engine.stream_variants(request, 2))
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    filled = fill_gaps(loaded, request)
    assert done.text.startswith(filled.opening), done.text  # the holes as fill_gaps writes them, then the canvases
    assert all(c.steps <= 4 for c in done.canvases)
    assert [f.step for f in frames[:2] if isinstance(f, StepFrame)] == [1, 2]  # the holes' drafts come first
    ends = sorted((f for f in variants if isinstance(f, DoneFrame)), key=lambda f: f.variant)
    assert [f.variant for f in ends] == [0, 1]
    openings = [re.match(PATTERN, f.text) for f in ends]
    assert all(openings), [f.text for f in ends]
    assert ends[0].text.startswith(filled.opening)  # variant 0 writes its holes from the request's seed
    assert fill_gaps(loaded, dataclasses.replace(request, seed=4)).opening in ends[1].text  # variant 1 from seed + 1


async def test_the_autoregressive_engine_fills_the_holes_too(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="A list", max_tokens=128, seed=1, opening=OPENING, gaps=GAPS)
    engine = AutoregressiveEngine(loaded)
    try:
        frames = await collect(engine.stream(request))
    finally:
        await engine.close()
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert re.match(PATTERN, done.text), done.text


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
    with pytest.raises(ValueError, match="filled before it is planned"):
        plan_batch(loaded, [request], [Row(emit=lambda frame: None)])


def test_a_cache_that_cannot_go_back_is_read_again(loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sliding-window layer past its window cannot be cropped (transformers raises); the holes go on from a fresh
    cache that reads the page so far again."""
    made: list[DynamicCache] = []

    class Stuck(DynamicCache):
        def crop(self, tokens_to_remove: int) -> None:
            raise RuntimeError("no past recorded")

    def new_cache() -> DynamicCache:
        made.append(Stuck())
        return made[-1]

    monkeypatch.setattr(loaded.denoiser, "new_cache", new_cache)
    request = GenerationRequest(prompt="A list", max_tokens=256, seed=3, opening=OPENING, gaps=GAPS)
    filled = fill_gaps(loaded, request)
    assert re.fullmatch(PATTERN, filled.opening), filled.opening
    assert len(made) == 3  # one to start with, one after each hole


def test_a_hole_ended_by_the_end_of_text_leaves_none_of_its_tokens_in_the_cache(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hole is written after the prompt and the text decided so far, and nothing else: a hole the model ends
    with its end of text has had every token it wrote read, where one cut at a tag has not had its last."""
    denoiser, tokenizer = loaded.denoiser, loaded.tokenizer
    letter = tokenizer.encode("a", add_special_tokens=False)[0]
    script = [[letter, letter, denoiser.eos_id], [letter, tokenizer.encode("<", add_special_tokens=False)[0]]]
    read = denoiser.next_token_logits
    held: list[int] = []  # the cache's length as each hole starts

    def scripted(input_ids: torch.Tensor, cache: DynamicCache) -> torch.Tensor:
        if input_ids.shape[1] > 1:  # a hole's unread text: a new hole
            held.append(cache.get_seq_length())
            script.append(script.pop(0)) if len(held) > 1 else None
        read(input_ids, cache)  # the cache grows as it would
        logits = torch.full((1, denoiser.vocab_size), -1.0e4)
        logits[0, script[0].pop(0) if script[0] else denoiser.eos_id] = 0.0
        return logits

    monkeypatch.setattr(denoiser, "next_token_logits", scripted)
    request = GenerationRequest(prompt="A list", max_tokens=256, opening=OPENING, gaps=GAPS)
    filled = fill_gaps(loaded, request)
    assert filled.opening.startswith(OPENING + "aa" + GAPS[0])
    prompt = len(denoiser.encode_prompt(request.prompt))
    # before the second hole: the prompt and the opening; the first hole's text is read again with what follows it
    assert held == [0, prompt + len(tokenizer.encode(OPENING, add_special_tokens=False))]
