from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from engine_fixtures import collect, tiny_model

from engine import (
    AutoregressiveEngine,
    CanvasFrame,
    DoneFrame,
    EngineError,
    Frame,
    GenerationRequest,
    LoadedModel,
    StepFrame,
)
from engine.autoregressive import generate_autoregressive
from engine.gemma import encode_prompt
from engine.streaming import GenerationCancelled


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


def decode(loaded: LoadedModel, request: GenerationRequest, step_every: int = 8) -> tuple[list[int], list[Frame]]:
    frames: list[Frame] = []
    tokens = generate_autoregressive(loaded, request, frames.append, step_every=step_every)
    return tokens, frames


def test_greedy_decoding_with_the_cache_matches_recomputing_the_sequence(loaded: LoadedModel) -> None:
    tokens, _ = decode(loaded, GenerationRequest(prompt="Hash table", t_min=0.0, stop_at_eos=False))
    sequence = encode_prompt(loaded.tokenizer, "Hash table")
    cap = loaded.model.config.text_config.final_logit_softcapping
    with torch.no_grad():
        for _ in range(8):
            hidden = loaded.model.model.encoder(input_ids=torch.tensor([sequence])).last_hidden_state
            logits = torch.tanh(loaded.model.lm_head(hidden[0, -1]) / cap) * cap
            sequence.append(int(logits.argmax()))
    assert tokens[:8] == sequence[-8:]


def test_the_same_seed_decodes_the_same_tokens(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Linked list", seed=9, stop_at_eos=False)
    assert decode(loaded, request)[0] == decode(loaded, request)[0]
    assert decode(loaded, request)[0] != decode(loaded, GenerationRequest(prompt="Linked list", seed=10))[0]


def test_it_streams_drafts_canvases_and_a_final_text(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Array", max_canvases=2, stop_at_eos=False)
    tokens, frames = decode(loaded, request, step_every=8)
    assert len(tokens) == 2 * loaded.canvas_length
    kinds = [type(frame).__name__ for frame in frames]
    assert kinds == (["StepFrame"] * 4 + ["CanvasFrame"]) * 2 + ["DoneFrame"]
    assert [frame.step for frame in frames if isinstance(frame, StepFrame)] == [1, 2, 3, 4] * 2
    canvases = [frame for frame in frames if isinstance(frame, CanvasFrame)]
    assert [canvas.tokens for canvas in canvases] == [loaded.canvas_length] * 2
    done = frames[-1]
    assert isinstance(done, DoneFrame) and done.tokens_per_forward == 1.0
    assert done.text == loaded.tokenizer.decode(tokens, skip_special_tokens=True)


def test_cancelling_stops_decoding_before_the_next_token(loaded: LoadedModel) -> None:
    frames: list[Frame] = []
    with pytest.raises(GenerationCancelled):
        generate_autoregressive(
            loaded, GenerationRequest(prompt="x", max_canvases=4), frames.append, lambda: len(frames) >= 2, 1
        )
    assert len(frames) == 2


async def test_the_autoregressive_engine_serves_the_same_stream_interface(loaded: LoadedModel) -> None:
    engine = AutoregressiveEngine(loaded)
    try:
        frames = await collect(engine.stream(GenerationRequest(prompt="Hash", seed=2, stop_at_eos=False)))
        assert isinstance(frames[-1], DoneFrame) and frames[-1].stats["tokens"] == loaded.canvas_length
        assert engine.model_id != loaded.model_id  # different text from the same weights: caches stay apart
    finally:
        await engine.close()


async def test_closing_the_autoregressive_engine_fails_open_streams(loaded: LoadedModel) -> None:
    engine = AutoregressiveEngine(loaded)
    stream = engine.stream(GenerationRequest(prompt="x", max_canvases=8, stop_at_eos=False))
    await anext(stream)
    await engine.close()
    with pytest.raises(EngineError, match="closed"):
        await collect(stream)
    with pytest.raises(EngineError, match="closed"):
        await anext(engine.stream(GenerationRequest(prompt="x")))


async def test_the_autoregressive_engine_closes_with_async_with_and_refuses_a_request_too_long_at_once(
    loaded: LoadedModel,
) -> None:
    """It had no ``async with`` (an engine user's walkthrough), and a request too long for the model waited for the
    worker before it failed."""
    async with AutoregressiveEngine(loaded) as engine:
        with pytest.raises(EngineError, match="positions"):
            await anext(engine.stream(GenerationRequest(prompt="hash " * 600)))
    with pytest.raises(EngineError, match="closed"):
        await anext(engine.stream(GenerationRequest(prompt="x")))


def test_an_opening_is_read_as_given_and_continued(loaded: LoadedModel) -> None:
    opening = "<h1>Hash table</h1>"
    request = GenerationRequest(prompt="Hash table", t_min=0.0, stop_at_eos=False, opening=opening)
    tokens, frames = decode(loaded, request)
    ids = loaded.tokenizer.encode(opening, add_special_tokens=False)
    assert tokens[: len(ids)] == ids and len(tokens) == loaded.canvas_length  # the opening counts in the canvas
    done = frames[-1]
    assert isinstance(done, DoneFrame) and done.text.startswith(opening)
    sequence = encode_prompt(loaded.tokenizer, "Hash table") + ids
    cap = loaded.model.config.text_config.final_logit_softcapping
    with torch.no_grad():
        hidden = loaded.model.model.encoder(input_ids=torch.tensor([sequence])).last_hidden_state
    assert tokens[len(ids)] == int((torch.tanh(loaded.model.lm_head(hidden[0, -1]) / cap) * cap).argmax())


def test_an_opening_of_a_canvas_or_more_is_its_own_canvases_and_the_rest_are_whole(loaded: LoadedModel) -> None:
    """A StepFrame never shows more than a canvas, each whole canvas of the opening is a CanvasFrame of no steps,
    and the forwards counted are the tokens decoded, not the opening's."""
    length = loaded.canvas_length
    opening = "word"
    while len(loaded.tokenizer(opening, add_special_tokens=False).input_ids) <= length + length // 2:
        opening += " word"  # more than one canvas of tokens, less than two
    request = GenerationRequest(prompt="Array", opening=opening, max_canvases=4, stop_at_eos=False)
    tokens, frames = decode(loaded, request)
    canvases = [frame for frame in frames if isinstance(frame, CanvasFrame)]
    assert [frame.tokens for frame in canvases] == [length] * 4 and canvases[0].steps == 0
    assert [frame.canvas for frame in canvases] == [0, 1, 2, 3]
    assert all(frame.canvas >= 1 for frame in frames if isinstance(frame, StepFrame))
    done = frames[-1]
    assert isinstance(done, DoneFrame) and len(tokens) == 4 * length
    opened = len(loaded.tokenizer(opening, add_special_tokens=False).input_ids)
    assert done.stats["forwards"] == 4 * length - opened


def test_a_step_every_below_one_is_refused_with_its_fix(loaded: LoadedModel) -> None:
    with pytest.raises(ValueError, match="step_every must be 1 or more"):
        AutoregressiveEngine(loaded, step_every=0)
    with pytest.raises(ValueError, match="step_every must be 1 or more"):
        decode(loaded, GenerationRequest(prompt="Array"), step_every=0)
