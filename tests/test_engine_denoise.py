"""genui's denoising loop against transformers' reference, and the causal layout against its training twin."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_fixtures import tiny_model
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    EntropyBoundSampler,
    EntropyBoundSamplerConfig,
    StableAndConfidentStoppingCriteria,
)

import engine.denoise
from engine.causal import CausalDenoiser
from engine.denoise import (
    _NEVER,
    DenoiseSettings,
    Pins,
    StableAndConfident,
    capped,
    denoise,
    distribution,
    draw,
    entropy_bound_accept,
    hold_back_ends,
    left_to_right_accept,
    looping,
    penalise_neighbour_repeats,
    repeat_start,
    sample,
    spread_accept,
    token_entropy,
)
from engine.frames import EngineError
from engine.generation import left_pad
from lab.adapt import layout_page

SETTINGS = DenoiseSettings(
    max_canvases=3,
    max_steps=6,
    entropy_bound=2.0,
    t_max=0.9,
    t_min=0.3,
    stability_threshold=1,
    confidence_threshold=6.0,
)


def _reference(loaded, input_ids, attention_mask, settings, seed):  # type: ignore[no-untyped-def]
    # generate() marks a cudagraph step each denoising step; the first mark imports torch._inductor, which trips a
    # DeprecationWarning inside torch.jit (not ours to fix) that pytest would turn into an error.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        import torch._inductor.cudagraph_trees  # noqa: F401
    torch.manual_seed(seed)
    output = loaded.model.generate(
        input_ids,
        attention_mask=attention_mask,
        max_new_tokens=settings.max_canvases * loaded.canvas_length,
        max_denoising_steps=settings.max_steps,
        t_min=settings.t_min,
        t_max=settings.t_max,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=settings.entropy_bound),
        stability_threshold=settings.stability_threshold,
        confidence_threshold=settings.confidence_threshold,
    )
    return output.sequences[:, input_ids.shape[1] :]


@pytest.mark.parametrize("prompts", [["Hash table"], ["Hash", "A longer prompt about arrays and lists"]])
def test_the_loop_gives_diffusion_gemma_generates_tokens(tmp_path: Path, prompts: list[str]) -> None:
    with tiny_model(tmp_path) as loaded:
        ids = [loaded.denoiser.encode_prompt(p) for p in prompts]
        input_ids, attention_mask = left_pad(ids, loaded.denoiser.pad_id, loaded.device)
        expected = _reference(loaded, input_ids, attention_mask, SETTINGS, seed=7)
        ours = denoise(loaded.denoiser, input_ids, attention_mask, SETTINGS, torch.Generator().manual_seed(7))
    assert ours.shape == expected.shape
    assert torch.equal(ours, expected)


def test_a_page_ends_at_any_of_the_models_ends_as_generate_ends_it(tmp_path: Path) -> None:
    """Gemma instruction-tuned checkpoints list <eos> and <end_of_turn>: generate() ends a page at either."""
    from engine.gemma import GemmaDenoiser

    with tiny_model(tmp_path) as loaded:
        input_ids, attention_mask = left_pad([loaded.denoiser.encode_prompt("Hash table")], 0, loaded.device)
        written = denoise(loaded.denoiser, input_ids, attention_mask, SETTINGS, torch.Generator().manual_seed(7))
        end = int(written[0, 2])  # a token this page writes early on, listed as a second end
        assert end != loaded.denoiser.eos_id and written.shape[1] > loaded.canvas_length
        loaded.model.generation_config.eos_token_id = [loaded.denoiser.eos_id, end]
        denoiser = GemmaDenoiser(loaded.model, loaded.tokenizer)
        expected = _reference(loaded, input_ids, attention_mask, SETTINGS, seed=7)
        ours = denoise(denoiser, input_ids, attention_mask, SETTINGS, torch.Generator().manual_seed(7))
    assert ours.shape == expected.shape == (1, loaded.canvas_length)  # the page ends with that canvas
    at = expected[0].tolist().index(end)
    assert torch.equal(ours[0, :at], expected[0, :at]) and ours[0, at] == denoiser.eos_id
    assert (ours[0, at + 1 :] == denoiser.pad_id).all()


class _FixedDenoiser:
    """Logits that ignore the canvas: the argmax holds still from the first step."""

    canvas_length, vocab_size, eos_id, pad_id, max_positions = 6, 11, 1, 0, 100

    def __init__(self) -> None:
        self.commits = 0
        self.logits = torch.randn(1, 6, 11, generator=torch.Generator().manual_seed(0)) * 4

    def prefill(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
        return None

    def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
        return self.logits.expand(canvas.shape[0], -1, -1)

    def commit(self, prefix, canvas):  # type: ignore[no-untyped-def]
        self.commits += 1


class _StepCounter:
    """An observer counting each canvas's denoising steps: ``steps[k]`` for canvas k."""

    def __init__(self) -> None:
        self.steps = [0]

    def step(self, draft, accepted, entropy, active):  # type: ignore[no-untyped-def]
        self.steps[-1] += 1

    def canvas(self, tokens):  # type: ignore[no-untyped-def]
        self.steps.append(0)


def test_adaptive_stopping_ends_a_canvas_once_it_is_stable_and_confident() -> None:
    counter = _StepCounter()
    steps = counter.steps

    fixed = _FixedDenoiser()
    settings = DenoiseSettings(
        max_canvases=2,
        max_steps=12,
        entropy_bound=50.0,
        stability_threshold=2,
        confidence_threshold=100.0,
        stop_at_eos=False,
    )
    denoise(fixed, torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), settings, torch.Generator(), counter)
    assert steps[:2] == [3, 3]  # the argmax equals the two before it at the third step
    assert fixed.commits == 1  # the first canvas is committed; the last one need not be
    never = DenoiseSettings(
        max_canvases=1,
        max_steps=5,
        entropy_bound=50.0,
        stability_threshold=2,
        confidence_threshold=1e-6,
        stop_at_eos=False,
    )
    steps[:] = [0]
    denoise(fixed, torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), never, torch.Generator(), counter)
    assert steps[0] == 5  # stable but not confident: every step runs


def test_pins_over_two_canvases_hold_and_a_whole_pinned_canvas_takes_no_step() -> None:
    calls: list[int] = []

    class Counting(_FixedDenoiser):
        def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
            calls.append(int(canvas[0, 0]))
            return super().denoise(prefix, canvas, self_conditioning)

    tokens = torch.tensor([[2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0]])  # canvas 0 pinned whole, canvas 1 its first two
    keep = torch.tensor([[True] * 8 + [False] * 4])
    settings = DenoiseSettings(max_canvases=3, max_steps=2, entropy_bound=50.0, stop_at_eos=False)
    fixed = Counting()
    out = denoise(
        fixed,
        torch.zeros(1, 3, dtype=torch.long),
        torch.ones(1, 3),
        settings,
        torch.Generator(),
        pins=Pins(tokens, keep),
    )
    assert out[0, :8].tolist() == [2, 3, 4, 5, 6, 7, 8, 9]
    assert len(calls) == 4 and calls[:2] == [8, 8]  # no forward for canvas 0; canvas 1 starts with its pins
    assert fixed.commits == 2


def test_the_neighbour_penalty_lowers_a_kept_left_neighbours_token_only() -> None:
    logits = torch.tensor([[[4.0, 1.0, -1.0], [4.0, 1.0, -1.0], [4.0, 1.0, -1.0], [-1.0, 1.0, 4.0]]])
    canvas = torch.tensor([[0, 0, 1, 2]])
    kept = torch.tensor([[True, False, True, True]])
    out = penalise_neighbour_repeats(logits, canvas, kept, torch.tensor([2]), 2.0)
    assert out[0, 0].tolist() == [4.0, 1.0, -2.0]  # the token before the canvas, 2: a negative logit doubles
    assert out[0, 1].tolist() == [2.0, 1.0, -1.0]  # left neighbour 0, kept: 4 / 2
    assert out[0, 2].tolist() == [4.0, 1.0, -1.0]  # left neighbour 0 was noise (not kept): untouched
    assert out[0, 3].tolist() == [-1.0, 0.5, 4.0]  # left neighbour 1: 1 / 2


def _one_token_everywhere() -> _FixedDenoiser:
    fixed = _FixedDenoiser()
    fixed.logits = torch.zeros(1, 6, 11)
    fixed.logits[..., 3], fixed.logits[..., 4] = 9.0, 6.0  # token 3 everywhere, 4 the runner-up
    return fixed


def test_the_neighbour_penalty_breaks_a_token_written_over_and_over() -> None:
    fixed = _one_token_everywhere()
    plain = DenoiseSettings(max_canvases=1, max_steps=8, entropy_bound=50.0, t_max=0.2, t_min=0.1, stop_at_eos=False)
    prompt = torch.full((1, 3), 5, dtype=torch.long)
    out = denoise(fixed, prompt, torch.ones(1, 3), plain, torch.Generator().manual_seed(0))
    assert out[0].tolist() == [3] * 6
    penalised = dataclasses.replace(plain, neighbour_repeat_penalty=2.0)
    out = denoise(fixed, prompt, torch.ones(1, 3), penalised, torch.Generator().manual_seed(0))
    assert out[0].tolist() == [3, 4, 3, 4, 3, 4]  # settled from the left, one position a step


def test_a_rows_text_ends_at_its_end_of_text() -> None:
    fixed = _FixedDenoiser()
    fixed.logits[0, 2, 1] = 100.0  # position 2 is the end-of-text
    settings = DenoiseSettings(max_canvases=3, max_steps=2, entropy_bound=50.0)
    tokens = denoise(fixed, torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), settings, torch.Generator())
    assert tokens.shape == (1, 6)  # one canvas: the row finished in it
    assert tokens[0, 2] == 1 and (tokens[0, 3:] == 0).all()


def test_a_canvas_of_few_distinct_tokens_loops_unless_it_ends_the_page() -> None:
    canvas = torch.tensor(
        [
            [5, 6, 5, 6, 5, 6],  # two tokens over and over: a loop
            [2, 3, 4, 5, 6, 7],  # six different ones
            [5, 5, 1, 0, 0, 0],  # the end-of-text, then padding: the page's last canvas
        ]
    )
    assert looping(canvas, 3, eos_id=1).tolist() == [True, False, False]
    assert looping(canvas, 2, eos_id=1).tolist() == [False, False, False]


def test_a_looping_canvas_ends_its_row_before_it() -> None:
    fixed = _FixedDenoiser()
    fixed.logits = torch.zeros(1, 6, 11)
    fixed.logits[..., 3] = 9.0  # token 3 everywhere: one distinct token a canvas
    prompt = torch.full((1, 3), 5, dtype=torch.long)
    plain = DenoiseSettings(max_canvases=3, max_steps=2, entropy_bound=50.0)
    assert denoise(fixed, prompt, torch.ones(1, 3), plain, torch.Generator()).tolist() == [[3] * 18]
    stopping = dataclasses.replace(plain, min_distinct=2)
    tokens = denoise(fixed, prompt, torch.ones(1, 3), stopping, torch.Generator())
    assert tokens.tolist() == [[1, 0, 0, 0, 0, 0]]  # the loop is dropped: the page ends where it began
    assert fixed.commits == 2  # the first, plain run's two; the second run committed nothing


def test_a_run_of_one_token_is_found_where_it_starts() -> None:
    canvas = torch.tensor(
        [
            [2, 3, 4, 4, 4, 4, 5, 6],  # a run of four from position 2
            [2, 3, 4, 4, 4, 5, 5, 5],  # two runs of three
            [7, 7, 7, 7, 7, 7, 7, 7],
        ]
    )
    assert repeat_start(canvas, 4).tolist() == [2, 8, 0]
    assert repeat_start(canvas, 3).tolist() == [2, 2, 0]
    assert repeat_start(canvas, 9).tolist() == [8, 8, 8]


def test_a_run_of_one_token_ends_its_row_where_it_starts() -> None:
    fixed = _FixedDenoiser()
    fixed.logits = torch.zeros(1, 6, 11)
    fixed.logits[0, :2, 4] = 9.0  # two tokens of text, then the run: token 3 four times
    fixed.logits[0, 2:, 3] = 9.0
    prompt = torch.full((1, 3), 5, dtype=torch.long)
    plain = DenoiseSettings(max_canvases=2, max_steps=2, entropy_bound=50.0, min_distinct=2)
    assert denoise(fixed, prompt, torch.ones(1, 3), plain, torch.Generator()).tolist() == [[4, 4, 3, 3, 3, 3] * 2]
    stopping = dataclasses.replace(plain, max_repeat=4)
    tokens = denoise(fixed, prompt, torch.ones(1, 3), stopping, torch.Generator())
    assert tokens.tolist() == [[4, 4, 1, 0, 0, 0]]  # the text before the run stays; the page ends there
    longer = dataclasses.replace(plain, max_repeat=5)
    assert denoise(fixed, prompt, torch.ones(1, 3), longer, torch.Generator()).tolist() == [[4, 4, 3, 3, 3, 3] * 2]


def test_a_run_past_the_cap_is_barred_at_the_position_that_would_stretch_it() -> None:
    free = torch.zeros(11, dtype=torch.bool)
    free[9] = True  # a token that may run (a digit)
    u = -1  # not known yet (each unknown position has its own negative id in the loop)
    known = torch.tensor(
        [
            [-10, -11, -12, 3, 3, 3, 4, 3],  # one token three times: the next 3 would make four
            [-10, -11, -12, 5, 6, 5, 6, 7],  # two in turn, three tokens: 6 would make four
            [-10, -11, -12, 9, 9, 9, 9, 9],  # a free token runs as long as it likes
            [5, 6, 5, -13, 6, 5, 6, 5],  # before the canvas: 5 6 5, so its first position may not take 6
            [-10, -11, -12, 9, 5, 9, 5, 9],  # a pair with a free token in it (`0.0.0.0`) runs too
        ]
    )
    barred = capped(known, 3, free).tolist()
    assert barred[0] == [[u, u], [u, u], [u, u], [3, u], [u, u]]
    assert barred[1] == [[u, u], [u, u], [u, u], [u, 6], [u, 5]]
    assert barred[2] == [[u, u]] * 5
    assert barred[3] == [[u, 6], [u, u], [u, u], [u, u], [u, 5]]  # the unknown position breaks the run
    assert barred[4] == [[u, u]] * 5


def test_capped_runs_break_a_token_written_over_and_over_but_not_the_end_of_text() -> None:
    fixed = _one_token_everywhere()
    plain = DenoiseSettings(max_canvases=2, max_steps=8, entropy_bound=50.0, t_max=0.2, t_min=0.1, stop_at_eos=False)
    prompt = torch.full((1, 3), 5, dtype=torch.long)
    assert denoise(fixed, prompt, torch.ones(1, 3), plain, torch.Generator().manual_seed(0)).tolist() == [[3] * 12]
    out = denoise(fixed, prompt, torch.ones(1, 3), dataclasses.replace(plain, cap_runs=3), torch.Generator())[0]
    assert 4 in out.tolist()  # the runner-up where 3 would have run past the cap
    assert not any(out[i : i + 4].unique().numel() == 1 for i in range(len(out) - 3))  # across the canvases too
    free = torch.zeros(11, dtype=torch.bool)
    free[3] = True
    cap3 = dataclasses.replace(plain, cap_runs=3)
    assert denoise(fixed, prompt, torch.ones(1, 3), cap3, torch.Generator(), free=free).tolist() == [[3] * 12]
    fixed.logits[..., 1] = 12.0  # the end of text everywhere (what a denoiser writes after a page's end)
    assert denoise(fixed, prompt, torch.ones(1, 3), cap3, torch.Generator()).tolist() == [[1] * 12]


def test_a_canvas_pinned_whole_is_kept_however_few_its_tokens() -> None:
    tokens = torch.tensor([[4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0]])
    keep = torch.tensor([[True] * 6 + [False] * 6])
    settings = DenoiseSettings(max_canvases=2, max_steps=2, entropy_bound=50.0, min_distinct=2)
    fixed = _FixedDenoiser()
    out = denoise(
        fixed,
        torch.zeros(1, 3, dtype=torch.long),
        torch.ones(1, 3),
        settings,
        torch.Generator(),
        pins=Pins(tokens, keep),
    )
    assert out[0, :6].tolist() == [4] * 6


def test_entropy_bound_acceptance_is_the_library_samplers() -> None:
    logits = torch.randn(3, 16, 50) * 3
    reference = EntropyBoundSampler(EntropyBoundSamplerConfig(entropy_bound=1.5), 16, 50, 8)
    canvas = torch.zeros(3, 16, dtype=torch.long)
    reference.accept_canvas(canvas, canvas + 1, logits, 8)
    entropy = torch.special.entr(torch.softmax(logits, dim=-1)).sum(dim=-1)
    assert torch.equal(entropy_bound_accept(entropy, 1.5), reference.accepted_token_mask)


def test_left_to_right_acceptance_takes_a_run_from_the_canvas_start() -> None:
    entropy = torch.tensor([[0.1, 0.2, 0.3, 0.0, 2.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    accepted = left_to_right_accept(entropy, 1.0)
    # row 0: 0.1 + 0.2 + 0.3 + 0.0 = 0.6 before position 4 (accepted), 2.6 before position 5 (not), however sure
    # the tail is; row 1: the unsure first position is accepted (a step always moves on) and nothing after it
    assert accepted.tolist() == [[True] * 5 + [False] * 2, [True] + [False] * 6]
    # the lowest-entropy order would take the sure tail of both rows instead
    assert entropy_bound_accept(entropy, 1.0)[:, -1].all()


def test_spread_acceptance_never_lets_two_neighbours_join_in_one_step() -> None:
    entropy = torch.tensor([[0.1, 0.2, 0.3, 5.0, 0.0, 0.0]])
    assert entropy_bound_accept(entropy, 1.0).all()  # the plain bound takes every position at once
    # of neighbours joining together only the surest stays; equally sure ones (pins: entropy 0) join together
    first = spread_accept(entropy, 1.0, torch.zeros_like(entropy, dtype=torch.bool))
    assert first.tolist() == [[True, False, False, False, True, True]]
    # a position kept the step before stays and is no new neighbour: both of its neighbours may join
    before = torch.tensor([[False, True, False, False, False, False]])
    assert spread_accept(entropy, 1.0, before).tolist() == [[True, True, True, False, True, True]]


class _Recording:
    """Sure of token 5 at positions 0-1, unsure at 2, sure of token 7 at 3-5; records the canvases it is shown."""

    canvas_length, vocab_size, eos_id, pad_id, max_positions = 6, 1000, 1, 0, 100

    def __init__(self) -> None:
        self.seen: list[torch.Tensor] = []
        self.logits = torch.zeros(1, 6, 1000)
        self.logits[0, :2, 5] = 50.0
        self.logits[0, 3:, 7] = 50.0

    def prefill(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
        return None

    def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
        self.seen.append(canvas.clone())
        return self.logits

    def commit(self, prefix, canvas):  # type: ignore[no-untyped-def]
        pass


@pytest.mark.parametrize("order", ["entropy", "left_to_right", "spread"])
def test_the_order_decides_which_samples_the_next_step_sees(order: str) -> None:
    recording = _Recording()
    settings = DenoiseSettings(max_canvases=1, max_steps=2, entropy_bound=0.5, order=order, stop_at_eos=False)
    denoise(
        recording, torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), settings, torch.Generator().manual_seed(0)
    )
    second = recording.seen[1][0]
    assert second[:2].tolist() == [5, 5]  # the sure start is kept either way
    # the sure tail after the unsure position: kept by lowest entropy first, re-noised left to right
    assert (second[3:] == 7).all() if order != "left_to_right" else not (second[3:] == 7).any()


def test_an_end_of_text_is_accepted_only_with_every_position_before_it() -> None:
    eos = 1
    accepted = torch.tensor([[True, False, True, True, True], [True, True, True, True, True]])
    sampled = torch.tensor([[5, 6, 7, eos, eos], [5, 6, eos, eos, eos]])
    held = hold_back_ends(accepted, sampled, eos)
    # row 0: the ends wait for position 1; the word after the gap is no end and stays; row 1 has no gap
    assert held.tolist() == [[True, False, True, False, False], [True] * 5]


@pytest.mark.parametrize("end_last", [False, True])
def test_with_end_last_the_next_step_sees_no_end_before_the_text(end_last: bool) -> None:
    recording = _Recording()
    recording.logits[0, 3:] = 0.0  # unsure of positions 2 and 3 (the bound takes one of them), sure the page ends at 4
    recording.logits[0, 4:, recording.eos_id] = 50.0
    settings = DenoiseSettings(max_canvases=1, max_steps=2, entropy_bound=0.5, stop_at_eos=False, end_last=end_last)
    denoise(
        recording, torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), settings, torch.Generator().manual_seed(0)
    )
    second = recording.seen[1][0]
    assert second[:2].tolist() == [5, 5]
    assert (second[4:] == recording.eos_id).all() != end_last


def test_stopping_is_the_library_criterions() -> None:
    ours, theirs = StableAndConfident(2, 3.0), StableAndConfidentStoppingCriteria(2, 3.0)
    generator = torch.Generator().manual_seed(0)
    for step in range(6):
        argmax = torch.randint(0, 3, (4, 5), generator=generator) if step < 2 else torch.ones(4, 5, dtype=torch.long)
        logits = torch.randn(4, 5, 7, generator=generator) * (step + 1)
        entropy = torch.special.entr(torch.softmax(logits, dim=-1)).sum(dim=-1).mean(dim=-1)
        assert torch.equal(ours(argmax, entropy), theirs(argmax, logits))


def test_a_stable_share_below_one_stops_with_a_few_positions_still_changing() -> None:
    argmax = torch.arange(10)[None].repeat(2, 1)  # two rows of 10 positions
    moved = argmax.clone()
    moved[0, 0] = 99  # row 0: one position in ten changed since the step before
    moved[1, :3] = 99  # row 1: three
    confident = torch.zeros(2)
    for share, expected in ((1.0, [False, False]), (0.9, [True, False]), (0.7, [True, True])):
        stopper = StableAndConfident(1, 1.0, share)
        stopper(argmax, confident)
        assert stopper(moved, confident).tolist() == expected, share


def test_top_k_sampling_draws_only_the_likeliest_tokens() -> None:
    probs = torch.softmax(torch.randn(2, 8, 100), dim=-1)
    drawn, likeliest = sample(probs, 5, torch.Generator().manual_seed(0))
    top = probs.topk(5, dim=-1).indices
    assert (top == drawn.unsqueeze(-1)).any(dim=-1).all()
    assert torch.equal(likeliest, probs.argmax(dim=-1))
    assert torch.equal(sample(probs, 0, torch.Generator().manual_seed(0))[1], probs.argmax(dim=-1))


def _sampled_whole(
    logits: torch.Tensor, heat: float | None, top_k: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sampler as the loop ran it over a whole canvas at once, before ``draw``."""
    shifted, probs = distribution(logits if heat is None else logits / heat)
    sampled, likeliest = sample(probs, top_k, generator)
    return sampled, likeliest, token_entropy(shifted, probs)


@pytest.mark.parametrize(
    ("heat", "top_k", "rows"), [(0.3, 64, 8), (None, 64, 5), (0.9, 3, 5), (0.3, 64, 5), (0.7, 64, 1), (0.5, 0, 8)]
)
def test_draw_takes_a_few_rows_at_a_time_and_draws_bit_for_bit_what_the_whole_canvas_drew(
    heat: float | None, top_k: int, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that do not divide into the chunks (26 in fives leaves one: torch would sum it in another order, so it
    joins the chunk before), bfloat16 logits full of ties (as a model gives them), a pinned position, and two rows
    of a batch: the same generator draws the same tokens, and every number is equal."""
    monkeypatch.setattr(engine.denoise, "DRAW_ROWS", rows)
    logits = (torch.randn(2, 13, 49_152, generator=torch.Generator().manual_seed(11)) * 4).bfloat16().float()
    logits[1, 4] = _NEVER
    logits[1, 4, 11] = 0.0
    ours = draw(logits, heat, top_k, torch.Generator().manual_seed(5))
    theirs = _sampled_whole(logits, heat, top_k, torch.Generator().manual_seed(5))
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine.shape == (2, 13) and torch.equal(mine, reference)
    assert int(ours[0][1, 4]) == 11 and float(ours[2][1, 4]) < 1e-20
    assert len(set(ours[0].flatten().tolist())) > 13  # the draws are draws, not one token everywhere


def test_draw_leaves_the_logits_it_was_given_as_they_were() -> None:
    logits = torch.randn(1, 16, 1_000, generator=torch.Generator().manual_seed(4))
    before = logits.clone()
    draw(logits, 0.5, 8, torch.Generator().manual_seed(0))
    assert torch.equal(logits, before)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.2])
def test_token_entropy_is_the_entropy_of_the_softmax(temperature: float) -> None:
    logits = torch.randn(2, 8, 49_152, generator=torch.Generator().manual_seed(1)) * 6 / temperature
    logits[0, 0] = _NEVER  # a pinned position: all its probability on one token
    logits[0, 0, 7] = 0.0
    shifted, probs = distribution(logits)
    reference = torch.special.entr(torch.softmax(logits.double(), dim=-1)).sum(dim=-1)
    ours = token_entropy(shifted, probs)
    assert ours.dtype == torch.float32 and ours[0, 0] < 1e-20
    torch.testing.assert_close(ours.double(), reference, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("vocab", [100, 49_152, 262_144])
def test_distribution_has_no_subnormal_probabilities_and_keeps_the_rest_bit_for_bit(vocab: int) -> None:
    logits = torch.randn(2, 64, vocab, generator=torch.Generator().manual_seed(2)) * 30  # a low temperature's spread
    logits[0, 0] = _NEVER
    logits[0, 0, 7] = 0.0
    exact = torch.softmax(logits, dim=-1)
    tiny = torch.finfo(torch.float32).tiny
    assert ((exact > 0) & (exact < tiny)).any()  # the plain softmax has subnormal probabilities here
    shifted, probs = distribution(logits)
    assert bool((probs >= tiny).all())
    assert torch.equal(shifted.amax(dim=-1), torch.zeros(2, 64))
    kept = exact >= 1e-30
    assert torch.equal(probs[kept], exact[kept])
    assert torch.equal(probs.argmax(dim=-1), exact.argmax(dim=-1)) and float(probs[0, 0, 7]) == 1.0


def test_pinned_positions_come_back_exact_and_the_rest_is_written(tmp_path: Path) -> None:
    with tiny_model(tmp_path) as loaded:
        c = loaded.canvas_length
        input_ids, mask = left_pad([loaded.denoiser.encode_prompt("Hash")], loaded.denoiser.pad_id, loaded.device)
        start = torch.randint(0, loaded.denoiser.vocab_size, (1, c), generator=torch.Generator().manual_seed(3))
        keep = torch.zeros(1, c, dtype=torch.bool)
        keep[:, :5] = True
        settings = DenoiseSettings(max_canvases=1, max_steps=4, entropy_bound=2.0, stop_at_eos=False)
        tokens = denoise(
            loaded.denoiser, input_ids, mask, settings, torch.Generator().manual_seed(1), pins=Pins(start, keep)
        )
    assert torch.equal(tokens[:, :5], start[:, :5])
    assert not torch.equal(tokens[:, 5:], start[:, 5:])


def test_the_same_seed_gives_the_same_tokens_and_another_seed_others(tmp_path: Path) -> None:
    with tiny_model(tmp_path) as loaded:
        input_ids, mask = left_pad([loaded.denoiser.encode_prompt("Hash")], loaded.denoiser.pad_id, loaded.device)

        def run(seed: int) -> torch.Tensor:
            return denoise(loaded.denoiser, input_ids, mask, SETTINGS, torch.Generator().manual_seed(seed))

        assert torch.equal(run(1), run(1))
        assert not torch.equal(run(1), run(2))


@pytest.mark.parametrize(
    "change",
    [
        {"max_steps": 0},
        {"entropy_bound": 0.0},
        {"t_min": 0.5, "t_max": 0.5},
        {"t_min": 0.2, "t_max": None},
        {"stability_threshold": -1},
        {"top_k": -3},
        {"max_canvases": 0},
        {"order": "random"},
        {"stable_share": 0.0},
        {"stable_share": 1.5},
        {"neighbour_repeat_penalty": 0.5},
        {"settle_after": -1},
        {"min_distinct": -1},
        {"max_repeat": 1},
        {"max_repeat": -2},
        {"cap_runs": 2},
        {"cap_runs": -1},
        {"refresh_every": -2},
        {"refresh_neighbours": -1},
        {"drop_doubled_words": "yes"},
        {"end_last": 1},
    ],
)
def test_settings_the_loop_cannot_run_are_refused_by_name(change: dict[str, object]) -> None:
    import dataclasses

    with pytest.raises(EngineError):
        dataclasses.replace(SETTINGS, **change).check()  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# The adapted causal LM: inference's cached steps equal training's one-pass layout


def _tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=1,
        pad_token_id=1,
        bos_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


class _Tokens:
    eos_token_id = 1
    pad_token_id = 1


def test_the_cached_canvas_step_sees_what_training_sees() -> None:
    model = _tiny_llama()
    c = 8
    denoiser = CausalDenoiser(model, _Tokens(), c)  # type: ignore[arg-type]
    prompt = np.array([5, 6, 7, 8, 9], dtype=np.uint16)
    response = np.array(list(range(20, 36)), dtype=np.uint16)  # two whole canvases
    page = layout_page(prompt, response, c, eos=1, vocab=97, t=0.0, generator=torch.Generator())
    with torch.no_grad():
        logits = model(input_ids=page.input_ids, attention_mask=page.mask, position_ids=page.position_ids).logits[0]
        one_pass = logits[-2 * c :]  # (2C, V): both canvases, clean inputs
        prefix = denoiser.prefill(torch.from_numpy(prompt.astype(np.int64))[None], torch.ones(1, len(prompt)))
        first = denoiser.denoise(prefix, torch.from_numpy(response[:c].astype(np.int64))[None], None)[0]
        denoiser.commit(prefix, torch.from_numpy(response[:c].astype(np.int64))[None])
        second = denoiser.denoise(prefix, torch.from_numpy(response[c:].astype(np.int64))[None], None)[0]
    torch.testing.assert_close(first, one_pass[:c], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(second, one_pass[c:], atol=1e-4, rtol=1e-4)


def test_a_denoising_step_leaves_the_cache_as_it_was() -> None:
    model = _tiny_llama()
    denoiser = CausalDenoiser(model, _Tokens(), 8)  # type: ignore[arg-type]
    with torch.no_grad():
        prefix = denoiser.prefill(torch.tensor([[5, 6, 7, 8]]), torch.ones(1, 4))
        before = prefix.cache.get_seq_length()
        a = denoiser.denoise(prefix, torch.arange(10, 18)[None], None)
        b = denoiser.denoise(prefix, torch.arange(10, 18)[None], None)
    assert prefix.cache.get_seq_length() == before
    assert torch.equal(a, b)


def test_left_padding_does_not_change_a_rows_canvas() -> None:
    model = _tiny_llama()
    denoiser = CausalDenoiser(model, _Tokens(), 8)  # type: ignore[arg-type]
    short, long = [5, 6, 7], [9, 10, 11, 12, 13, 14]
    canvas = torch.arange(30, 38)[None]
    with torch.no_grad():
        alone = denoiser.denoise(denoiser.prefill(torch.tensor([short]), torch.ones(1, 3)), canvas, None)
        input_ids, mask = left_pad([short, long], 1, torch.device("cpu"))
        both = denoiser.denoise(denoiser.prefill(input_ids, mask), canvas.repeat(2, 1), None)
    torch.testing.assert_close(both[0], alone[0], atol=1e-4, rtol=1e-4)


def test_settled_positions_keep_their_token_and_a_settled_canvas_stops() -> None:
    counter = _StepCounter()
    steps = counter.steps

    class Flipping(_FixedDenoiser):
        """Two tokens equally likely at each position, no token shared by neighbours: sampled positions flip, and
        the argmax never settles."""

        def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
            logits = torch.full((canvas.shape[0], 6, 20), -9.0)
            for j in range(6):
                logits[:, j, 3 + 2 * j] = logits[:, j, 4 + 2 * j] = 0.0  # (3, 4), (5, 6), ...
            return logits

    Flipping.vocab_size = 20
    settings = DenoiseSettings(max_canvases=1, max_steps=30, entropy_bound=50.0, stop_at_eos=False)
    prompt = torch.zeros(1, 3, dtype=torch.long)
    denoise(Flipping(), prompt, torch.ones(1, 3), settings, torch.Generator().manual_seed(0), counter)
    assert steps[0] == 30  # no adaptive stop: every step runs
    steps[:] = [0]
    settling = dataclasses.replace(settings, settle_after=2)
    out = denoise(Flipping(), prompt, torch.ones(1, 3), settling, torch.Generator().manual_seed(0), counter)
    assert steps[0] < 30  # every position held one token twice in a row, then kept it, and the canvas stopped
    argmax = [3, 5, 7, 9, 11, 13]  # the lower of the two wins the tie
    assert out[0].tolist() != argmax  # the settled samples, not the argmax
    assert all(token in (a, a + 1) for token, a in zip(out[0].tolist(), argmax, strict=True))


def test_a_token_written_twice_never_settles() -> None:
    counter = _StepCounter()
    steps = counter.steps

    class Wanting(_FixedDenoiser):
        """Each position sure of its token: ``wanted``, one row."""

        wanted: list[int] = []

        def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
            logits = torch.full((canvas.shape[0], 6, 11), -9.0)
            logits[0, torch.arange(6), torch.tensor(self.wanted)] = 0.0
            return logits

    settings = DenoiseSettings(max_canvases=1, max_steps=30, entropy_bound=50.0, stop_at_eos=False, settle_after=2)
    prompt = torch.zeros(1, 3, dtype=torch.long)
    for wanted, settles in (
        ([2, 3, 4, 5, 6, 7], True),
        ([2, 3, 3, 5, 6, 7], False),  # `table table`: self-correction stays free to undo it
        ([2, 3, 4, 5, 1, 1], True),  # end-of-text padding after a page's end is no doubled word
    ):
        steps[:] = [0]
        Wanting.wanted = wanted
        out = denoise(Wanting(), prompt, torch.ones(1, 3), settings, torch.Generator().manual_seed(0), counter)
        assert out[0].tolist() == wanted
        assert (steps[0] < 30) is settles, wanted


def _llama(layers: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=1,
        pad_token_id=1,
        bos_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize(
    ("neighbours", "recomputed"), [(0, [3, 6]), (1, [2, 3, 4, 5, 6, 7]), (2, [1, 2, 3, 4, 5, 6, 7])]
)
def test_a_step_over_the_changed_positions_computes_them_as_a_whole_step_does(
    neighbours: int, recomputed: list[int]
) -> None:
    """With one layer a position's keys and values depend on its own input only, so reusing the unchanged
    positions' is exact there: the recomputed positions' logits (the changed ones and their neighbours) equal a
    whole step's; the rest are the last step's."""
    denoiser = CausalDenoiser(_llama(1), _Tokens(), 8)  # type: ignore[arg-type]
    input_ids, mask = left_pad([[5, 6, 7], [9, 10, 11, 12, 13, 14]], 1, torch.device("cpu"))
    with torch.no_grad():
        prefix = denoiser.prefill(input_ids, mask)
        length = prefix.cache.get_seq_length()
        first = torch.arange(30, 38).repeat(2, 1)
        before = denoiser.denoise(prefix, first, None)
        second = first.clone()
        second[0, 2], second[1, 5] = 50, 60  # the inputs of slots 3 and 6 (a canvas is read shifted by one)
        partial = denoiser.denoise_changed(prefix, second, neighbours)
        assert prefix.cache.get_seq_length() == length  # read, never written
        whole = denoiser.denoise(prefix, second, None)
    torch.testing.assert_close(partial[:, recomputed], whole[:, recomputed], atol=1e-5, rtol=1e-5)
    kept = [slot for slot in range(8) if slot not in recomputed]
    assert torch.equal(partial[:, kept], before[:, kept])
    assert not torch.allclose(whole[:, kept], before[:, kept])  # so the reused logits are an approximation


def test_refreshing_every_step_is_the_whole_step_loop_and_fewer_refreshes_run_the_partial_steps() -> None:
    model = _llama(2)
    input_ids, mask = left_pad([[5, 6, 7], [9, 10, 11, 12]], 1, torch.device("cpu"))
    settings = DenoiseSettings(max_canvases=2, max_steps=6, entropy_bound=2.0, stop_at_eos=False)

    class Counting(CausalDenoiser):
        partial = 0

        def denoise_changed(self, prefix, canvas, neighbours):  # type: ignore[no-untyped-def]
            Counting.partial += 1
            return super().denoise_changed(prefix, canvas, neighbours)

    def run(refresh: int) -> torch.Tensor:
        denoiser = Counting(model, _Tokens(), 8)  # type: ignore[arg-type]
        chosen = dataclasses.replace(settings, refresh_every=refresh)
        return denoise(denoiser, input_ids, mask, chosen, torch.Generator().manual_seed(3))

    assert torch.equal(run(1), run(0)) and Counting.partial == 0
    out = run(3)
    assert Counting.partial == 2 * 4  # steps 2, 3, 5 and 6 of each canvas reuse; 1 and 4 are whole
    assert out.shape == (2, 16)


def test_refresh_every_is_refused_for_a_family_that_recomputes_every_position() -> None:
    settings = DenoiseSettings(max_canvases=1, max_steps=3, entropy_bound=1.0, refresh_every=2)
    with pytest.raises(EngineError, match="refresh_every"):
        denoise(_FixedDenoiser(), torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3), settings, None)  # type: ignore[arg-type]


class _OneEndsEarly:
    """Two rows: row 0 writes its end of text in the first canvas and is flat (never sure) after it; row 1 is sure of
    one token everywhere, so its canvases stop after the adaptive stop's few steps."""

    canvas_length, vocab_size, eos_id, pad_id, max_positions = 6, 11, 1, 0, 100

    def __init__(self) -> None:
        self.canvas_index = 0

    def prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        return None

    def denoise(self, prefix: object, canvas: torch.Tensor, self_conditioning: torch.Tensor | None) -> torch.Tensor:
        logits = torch.zeros(2, 6, 11)
        logits[1, :, 5] = 20.0
        if self.canvas_index == 0:
            logits[0, :, 4] = 20.0
            logits[0, 2, 1] = 40.0
        return logits

    def commit(self, prefix: object, canvas: torch.Tensor) -> None:
        self.canvas_index += 1


def test_a_row_that_ended_its_page_holds_the_batch_back_no_longer() -> None:
    class Steps:
        def __init__(self) -> None:
            self.steps = [0]

        def step(
            self, draft: torch.Tensor, accepted: torch.Tensor, entropy: torch.Tensor, active: torch.Tensor
        ) -> None:
            self.steps[-1] += 1

        def canvas(self, tokens: torch.Tensor) -> None:
            self.steps.append(0)

    settings = DenoiseSettings(
        max_canvases=4, max_steps=20, entropy_bound=50.0, t_max=0.5, t_min=0.2, stability_threshold=2,
        confidence_threshold=1.0,
    )  # fmt: skip
    steps = Steps()
    prompts = torch.zeros(2, 3, dtype=torch.long)
    out = denoise(_OneEndsEarly(), prompts, torch.ones(2, 3), settings, torch.Generator().manual_seed(0), steps)
    assert out[0, :3].tolist() == [4, 4, 1] and set(out[0, 3:].tolist()) == {0}  # its end, then padding
    assert steps.steps[:-1] == [3, 3, 3, 3]  # every canvas as short as the live row's, not max_steps after row 0 ends


class _Narrowing(CausalDenoiser):
    """Counts the rows each forward runs over, and the narrowed prefixes. A row whose last clean token is 12 or 7
    is made sure of 7 everywhere (a bias the row carries through a narrowed prefix), so it stops within two steps
    while the others run on."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.rows: list[int] = []
        self.narrowed = 0

    def _sure(self, prefix, logits):  # type: ignore[no-untyped-def]
        self.rows.append(logits.shape[0])
        sure = (prefix.last == 12) | (prefix.last == 7)
        logits[sure, :, 7] += 50.0
        return logits

    def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
        return self._sure(prefix, super().denoise(prefix, canvas, self_conditioning))

    def denoise_changed(self, prefix, canvas, neighbours):  # type: ignore[no-untyped-def]
        return self._sure(prefix, super().denoise_changed(prefix, canvas, neighbours).clone())

    def narrow(self, prefix, rows):  # type: ignore[no-untyped-def]
        self.narrowed += 1
        return super().narrow(prefix, rows)


class _Whole(_Narrowing):
    narrow = None  # type: ignore[assignment]  # the loop runs every row through every step


@pytest.mark.parametrize("refresh", [0, 3])
def test_rows_that_stopped_or_ended_their_page_leave_the_forward_and_the_others_are_unchanged(refresh: int) -> None:
    """Three rows: row 0's first canvas is pinned to end its page, so it leaves the prefix after it; row 1 is sure
    of its canvases and stops within each in two steps; row 2 runs to the step cap. In float64 the narrowed loop's
    tokens equal those of the loop that runs every row through every step, which the forwards' row counts show it
    did not do."""
    model = _llama(2).double()
    input_ids, mask = left_pad([[5, 6, 8], [9, 10, 11, 12], [20, 21]], 1, torch.device("cpu"))
    settings = DenoiseSettings(
        max_canvases=3, max_steps=8, entropy_bound=3.0, t_max=0.6, t_min=0.2, stability_threshold=1,
        confidence_threshold=1.0, refresh_every=refresh,
    )  # fmt: skip
    tokens = torch.full((3, 8), 40)
    tokens[0, 3] = 1  # row 0 ends its page in the first canvas
    pins = Pins(tokens, tokens == 1)

    def run(kind: type[_Narrowing]) -> tuple[torch.Tensor, _Narrowing]:
        denoiser = kind(model, _Tokens(), 8)  # type: ignore[arg-type]
        out = denoise(denoiser, input_ids, mask, settings, torch.Generator().manual_seed(5), pins=pins)
        return out, denoiser

    narrowed, ours = run(_Narrowing)
    whole, theirs = run(_Whole)
    assert torch.equal(narrowed, whole)
    assert set(narrowed[0, 4:].tolist()) == {1}  # row 0: its end of text, then padding
    assert set(narrowed[1].tolist()) == {7}  # row 1: sure of 7
    assert len(set(narrowed[2].tolist())) > 4  # row 2: written
    assert theirs.rows == [3] * 24
    assert ours.rows == [3, 3] + [2] * 6 + [2, 2] + [1] * 6 + [2, 2] + [1] * 6


def test_diffusion_gemma_narrowed_to_its_rows_still_denoising_writes_the_same_tokens(tmp_path: Path) -> None:
    """DiffusionGemma's prefix narrowed too (its cache and mask; its decoder masks are built again). The row of the
    shortest prompt is made sure of one token, so it stops within each canvas in two steps while the others run
    to the step cap: the tokens equal the loop's over every row, and the forwards after its stop leave it out."""
    from engine.gemma import GemmaDenoiser

    class Sure(GemmaDenoiser):
        rows: list[int] = []
        pads = 0

        def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
            logits = super().denoise(prefix, canvas, self_conditioning).clone()
            Sure.rows.append(logits.shape[0])
            logits[(~prefix.attention_mask).sum(dim=-1) == Sure.pads, :, 9] += 50.0  # the row of most padding
            return logits

    settings = dataclasses.replace(SETTINGS, max_steps=8, confidence_threshold=0.5, stop_at_eos=False)
    with tiny_model(tmp_path) as loaded:
        denoiser = Sure(loaded.model, loaded.denoiser.tokenizer)
        ids = [denoiser.encode_prompt(p) for p in ["Hash table", "A longer prompt about arrays and lists", "x"]]
        assert [len(i) for i in ids][2] == 3
        input_ids, attention_mask = left_pad(ids, denoiser.pad_id, loaded.device)
        Sure.pads = input_ids.shape[1] - 3
        ours = denoise(denoiser, input_ids, attention_mask, settings, torch.Generator().manual_seed(0))
        narrowed, Sure.rows = Sure.rows, []
        Sure.narrow = None  # type: ignore[assignment,method-assign]
        whole = denoise(denoiser, input_ids, attention_mask, settings, torch.Generator().manual_seed(0))
    assert torch.equal(ours, whole)
    assert set(ours[2].tolist()) == {9} and Sure.rows == [3] * 24
    assert narrowed == ([3, 3] + [2] * 6) * 3


def test_a_row_nobody_waits_for_leaves_the_forward_and_the_others_draw_as_before() -> None:
    """Row 1's consumer goes after three steps: from the fourth it is left out of every forward and ends as padding;
    rows 0 and 2 write, in float64, the tokens they write when row 1 stays (row 2 never stops early here, so no
    canvas ends sooner for row 1's leaving, which would draw less noise for the others' later canvases)."""
    model = _llama(2).double()
    input_ids, mask = left_pad([[5, 6, 8], [9, 10, 11, 13], [20, 21]], 1, torch.device("cpu"))
    settings = DenoiseSettings(
        max_canvases=3, max_steps=8, entropy_bound=3.0, t_max=0.6, t_min=0.2, stability_threshold=1,
        confidence_threshold=0.01, refresh_every=3,
    )  # fmt: skip
    asked = []

    def gone() -> torch.Tensor:
        asked.append(1)
        return torch.tensor([False, len(asked) > 3, False])

    def run(leaves: bool) -> tuple[torch.Tensor, _Narrowing]:
        denoiser = _Narrowing(model, _Tokens(), 8)  # type: ignore[arg-type]
        generator = torch.Generator().manual_seed(5)
        return denoise(denoiser, input_ids, mask, settings, generator, gone=gone if leaves else None), denoiser

    (left, ours), (stayed, theirs) = run(True), run(False)
    # row 0's second canvas ends in 12, so it is sure of its third and stops there after two steps
    assert theirs.rows == [3] * 18 + [2] * 6 and ours.rows == [3] * 3 + [2] * 15 + [1] * 6
    assert torch.equal(left[[0, 2]], stayed[[0, 2]])
    assert set(left[1].tolist()) == {1} and set(stayed[1].tolist()) != {1}


def test_when_the_rows_still_denoising_all_leave_the_canvas_ends_without_a_forward_over_none() -> None:
    """Row 0 is sure of its canvas and stops within it after two steps; row 1's consumer goes after three. No row is
    left to compute, so the canvas ends there (a forward over no rows would fail the whole batch, row 0 with it), and
    row 0's page is written on."""
    model = _llama(2).double()
    input_ids, mask = left_pad([[9, 10, 11, 12], [20, 21]], 1, torch.device("cpu"))
    settings = DenoiseSettings(
        max_canvases=2, max_steps=8, entropy_bound=3.0, t_max=0.6, t_min=0.2, stability_threshold=1,
        confidence_threshold=1.0,
    )  # fmt: skip
    asked = []

    def gone() -> torch.Tensor:
        asked.append(1)
        return torch.tensor([False, len(asked) > 3])

    denoiser = _Narrowing(model, _Tokens(), 8)  # type: ignore[arg-type]
    out = denoise(denoiser, input_ids, mask, settings, torch.Generator().manual_seed(5), gone=gone)
    assert denoiser.rows == [2, 2, 1, 1, 1]  # canvas 0: both, then row 1 alone; canvas 1: row 0 alone
    assert set(out[0].tolist()) == {7} and set(out[1].tolist()) == {1}


class _Reading:
    """Flat logits, or one token everywhere (a loop); records each canvas it reads."""

    canvas_length, vocab_size, eos_id, pad_id, max_positions = 8, 50, 1, 1, 100

    def __init__(self, token: int | None = None) -> None:
        self.token, self.seen = token, []  # type: list[torch.Tensor]

    def prefill(self, input_ids, attention_mask):  # type: ignore[no-untyped-def]
        return None

    def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
        self.seen.append(canvas.clone())
        logits = torch.zeros(canvas.shape[0], 8, 50)
        if self.token is not None:
            logits[..., self.token] = 30.0
        return logits

    def commit(self, prefix, canvas):  # type: ignore[no-untyped-def]
        pass


@pytest.mark.parametrize("order", [{}, {"order": "left_to_right"}, {"order": "spread"}, {"end_last": True}])
def test_every_step_reads_the_pinned_tokens_whatever_the_order(order: dict[str, object]) -> None:
    """An infill's text after the region is pinned: the region is written reading it, never noise in its place."""
    tokens = torch.tensor([[30, 31, 32, 33, 20, 21, 1, 1]])
    keep = torch.tensor([[False] * 4 + [True] * 4])
    settings = DenoiseSettings(max_canvases=1, max_steps=4, entropy_bound=1.0, stop_at_eos=False, **order)  # type: ignore[arg-type]
    reading = _Reading()
    denoise(
        reading,
        torch.tensor([[5, 6, 7]]),
        torch.ones(1, 3),
        settings,
        torch.Generator().manual_seed(0),
        pins=Pins(tokens, keep),
    )
    assert len(reading.seen) == 4 and all(seen[0, 4:].tolist() == [20, 21, 1, 1] for seen in reading.seen)


@pytest.mark.parametrize("guard", [{"min_distinct": 8}, {"max_repeat": 4}])
def test_the_loop_guards_end_a_page_after_its_pinned_opening_not_over_it(guard: dict[str, int]) -> None:
    opening = [10, 11, 12, 13, 14, 15, 16, 17, 40, 41, 42]  # canvas 0 pinned whole, canvas 1 starts with 3 pins
    tokens = torch.full((1, 16), 3)
    tokens[0, :11] = torch.tensor(opening)
    keep = torch.arange(16)[None] < 11
    settings = DenoiseSettings(max_canvases=2, max_steps=3, entropy_bound=5.0, **guard)  # type: ignore[arg-type]
    looping_model = _Reading(token=9 if "min_distinct" in guard else 42)
    out = denoise(looping_model, torch.tensor([[5, 6, 7]]), torch.ones(1, 3), settings, None, pins=Pins(tokens, keep))
    assert out[0].tolist() == [*opening, 1, 1, 1, 1, 1]  # the opening word for word, then the page's end


def test_a_batch_of_one_token_prompts_narrows_when_a_row_ends_its_page() -> None:
    """Nothing is prefilled: each cache layer is made by the first step, empty, and must still lose the rows."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, eos_token_id=1, pad_token_id=1,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()

    class Tokens:
        eos_token_id = pad_token_id = 1

    tokens = torch.full((2, 8), 40)
    tokens[0, 3] = 1  # row 0 ends its page in the first canvas
    settings = DenoiseSettings(max_canvases=2, max_steps=3, entropy_bound=3.0)
    denoiser = CausalDenoiser(model, Tokens(), 8)  # type: ignore[arg-type]
    out = denoise(denoiser, torch.tensor([[5], [9]]), torch.ones(2, 1), settings, None, pins=Pins(tokens, tokens == 1))
    assert out.shape == (2, 16) and out[0, 3] == 1 and (out[0, 4:] == 1).all()


def test_a_run_inside_the_pinned_opening_ends_no_page() -> None:
    """`max_repeat` counts the model's runs: an opening's own (a row of dashes) is the site's text."""

    class Counting(_Reading):
        def denoise(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
            logits = torch.zeros(canvas.shape[0], 8, 50)
            logits[:, torch.arange(8), 10 + torch.arange(8)] = 30.0  # a different token at every position
            return logits

    tokens = torch.tensor([[5, 5, 5, 5, 6, 0, 0, 0]])
    keep = torch.arange(8)[None] < 5
    settings = DenoiseSettings(max_canvases=1, max_steps=3, entropy_bound=5.0, max_repeat=4)
    out = denoise(Counting(), torch.tensor([[5, 6, 7]]), torch.ones(1, 3), settings, None, pins=Pins(tokens, keep))
    assert out[0].tolist() == [5, 5, 5, 5, 6, 15, 16, 17]
