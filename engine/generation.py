"""From requests to one run of the denoising loop (engine.denoise), with a frame streamer watching it.

A ``Plan`` is one batch made ready: the prompts' ids (left-padded), the settings every row shares, the seed, the
pins of the first canvases (openings, infill), and where each row's frames go. Plans are built from plain requests
(``plan_batch``: several prompts with the same settings, or n copies of one prompt for variations) or from an
in-place edit (engine.infill).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from engine.denoise import DenoiseSettings, Pins, denoise
from engine.frames import EngineError, GenerationRequest
from engine.loading import LoadedModel
from engine.streaming import FrameStreamer, Row


@dataclass(eq=False)
class Plan:
    """One batch, ready to run."""

    input_ids: torch.Tensor  # (B, T) prompts, left-padded
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = padding
    settings: DenoiseSettings
    seed: int
    rows: list[Row]
    pins: Pins | None = None  # the first canvases' starting tokens and which of them stay
    cut_at_eos: bool | None = None  # a row's text ends at its end-of-text (None: as settings.stop_at_eos)


def encode_opening(loaded: LoadedModel, opening: str, budget: int) -> list[int]:
    """The tokens of a request's opening; it must leave room in the ``budget`` tokens of its page (whole canvases)
    for the model's own text. A longer opening than a canvas spans canvases."""
    ids = loaded.tokenizer.encode(opening, add_special_tokens=False) if opening else []
    if len(ids) >= budget:
        raise EngineError(
            f"the opening is {len(ids)} tokens, which leaves no room in the page's {budget} tokens "
            f"({budget // loaded.canvas_length} canvases of {loaded.canvas_length}); shorten it or raise max_tokens"
        )
    return ids


def canvases(loaded: LoadedModel, request: GenerationRequest) -> int:
    """The canvases a request may fill: ``max_tokens`` rounded up to whole canvases, else ``max_canvases``."""
    if request.max_tokens is None:
        return request.max_canvases
    if not isinstance(request.max_tokens, int) or isinstance(request.max_tokens, bool) or request.max_tokens < 1:
        raise EngineError(f"max_tokens must be a positive integer, got {request.max_tokens!r}")
    return -(-request.max_tokens // loaded.canvas_length)


def settings_for(loaded: LoadedModel, request: GenerationRequest) -> DenoiseSettings:
    """The request's settings, unset fields taken from the checkpoint's defaults; EngineError names a bad one, so a
    bad request fails on its own, before any batch."""
    if not isinstance(request.prompt, str) or not isinstance(request.opening, str):
        wrong = "prompt" if not isinstance(request.prompt, str) else "opening"
        raise EngineError(f"{wrong} must be text (a str), got {getattr(request, wrong)!r}")
    if not isinstance(request.gaps, tuple) or not all(isinstance(after, str) for after in request.gaps):
        raise EngineError(f"gaps must be a tuple of texts (the opening after each hole), got {request.gaps!r}")
    if not isinstance(request.seed, int) or isinstance(request.seed, bool) or not 0 <= request.seed < 2**63:
        raise EngineError(f"seed must be an integer from 0 to 2**63 - 1, got {request.seed!r}")
    if not isinstance(request.stop_at_eos, bool):
        raise EngineError(f"stop_at_eos must be true or false, got {request.stop_at_eos!r}")
    overrides: dict[str, Any] = {"max_canvases": canvases(loaded, request), "stop_at_eos": request.stop_at_eos}
    for name in ("max_steps", "t_min", "t_max", "entropy_bound", "stability_threshold", "confidence_threshold"):
        value = getattr(request, name)
        if value is not None:
            overrides[name] = value
    for name in ("t_min", "t_max", "entropy_bound", "confidence_threshold"):
        if name in overrides:  # a number, not text that reads as one, nor True (an int to Python)
            if not isinstance(overrides[name], int | float) or isinstance(overrides[name], bool):
                raise EngineError(f"{name} must be a number, got {overrides[name]!r}")
            overrides[name] = float(overrides[name])
    if ("t_min" in overrides) != ("t_max" in overrides):  # one end given: the other end is the checkpoint's
        low = overrides.get("t_min", loaded.defaults.t_min)
        high = overrides.get("t_max", loaded.defaults.t_max)
        overrides["t_min"], overrides["t_max"] = low, high
    settings = dataclasses.replace(loaded.defaults, **overrides)
    settings.check()
    return settings


def batch_key(request: GenerationRequest) -> tuple[Any, ...]:
    """Requests with equal keys run with the same settings and may share one batch."""
    return (
        request.max_canvases,
        request.max_tokens,
        request.max_steps,
        request.t_min,
        request.t_max,
        request.entropy_bound,
        request.stability_threshold,
        request.confidence_threshold,
        request.stop_at_eos,
    )


def left_pad(prompts: Sequence[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack prompts of different lengths, padding on the left so every prompt ends where the canvas begins."""
    width = max(len(ids) for ids in prompts)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for index, ids in enumerate(prompts):
        input_ids[index, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention_mask[index, width - len(ids) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def fits(loaded: LoadedModel, request: GenerationRequest) -> bool:
    """Whether ``request`` passes the length checks of plan_batch (its other settings are not checked here); False
    for one whose texts or lengths are of no kind those checks take."""
    try:
        check_fits(loaded, request)
    except (EngineError, TypeError):
        return False
    return True


def check_fits(loaded: LoadedModel, request: GenerationRequest) -> None:
    """Raise EngineError saying why ``request`` is too long for the model: plan_batch's length checks, made before a
    request queues, so one that cannot run takes no place in the queue."""
    if not isinstance(request.prompt, str) or not isinstance(request.opening, str):
        raise EngineError("the prompt and the opening must be text (a str)")
    budget = canvases(loaded, request) * loaded.canvas_length
    encode_opening(loaded, request.opening, budget)
    check_length(loaded, len(loaded.denoiser.encode_prompt(request.prompt)), budget)


def check_length(loaded: LoadedModel, prompt_tokens: int, new_tokens: int) -> None:
    limit = loaded.denoiser.max_positions
    if prompt_tokens + new_tokens > limit:
        raise EngineError(
            f"prompt of {prompt_tokens} tokens plus {new_tokens} new tokens exceeds the model's {limit} positions; "
            "shorten the prompt or ask for fewer new tokens (max_tokens)"
        )


def plan_batch(loaded: LoadedModel, requests: Sequence[GenerationRequest], rows: Sequence[Row]) -> Plan:
    """One row per request. All requests must share a batch_key; the batch runs under the first one's seed."""
    if len(requests) != len(rows) or not requests:
        raise ValueError("plan_batch needs one row per request")
    first = requests[0]
    if any(request.gaps for request in requests):
        raise ValueError("an opening's gaps are filled before it is planned (engine.gaps.fill_gaps)")
    if any(batch_key(request) != batch_key(first) for request in requests):
        raise ValueError("requests in one batch must share their generation settings")
    settings = settings_for(loaded, first)
    prompts = [loaded.denoiser.encode_prompt(request.prompt) for request in requests]
    budget = settings.max_canvases * loaded.canvas_length
    for ids in prompts:
        check_length(loaded, len(ids), budget)
    openings = [encode_opening(loaded, request.opening, budget) for request in requests]
    input_ids, attention_mask = left_pad(prompts, loaded.denoiser.pad_id, loaded.device)
    plan = Plan(input_ids, attention_mask, settings, first.seed, list(rows))
    if any(openings):
        # The page starts as noise with each row's opening in place, pinned there while the rest denoises: the
        # first canvas, or as many as the longest opening needs (a canvas that is all opening takes no step).
        length, vocab = loaded.canvas_length, loaded.denoiser.vocab_size
        width = -(-max(len(ids) for ids in openings) // length) * length
        canvas = torch.randint(0, vocab, (len(requests), width), generator=torch.Generator().manual_seed(first.seed))
        keep = torch.zeros((len(requests), width), dtype=torch.bool)
        for index, ids in enumerate(openings):
            canvas[index, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            keep[index, : len(ids)] = True
        plan.pins = Pins(canvas.to(loaded.device), keep.to(loaded.device))
    return plan


_FREE: weakref.WeakKeyDictionary[Any, torch.Tensor] = weakref.WeakKeyDictionary()


def free_to_run(tokenizer: PreTrainedTokenizerBase, vocab_size: int) -> torch.Tensor:
    """The tokens (V,) bool that ``cap_runs`` lets run however long: digits (``1000000``, a table of zeros) and
    whitespace (indentation), which the sites' own pages repeat. Worked out once per tokenizer."""
    free = _FREE.get(tokenizer)
    if free is None or len(free) != vocab_size:
        texts = tokenizer.batch_decode([[index] for index in range(min(len(tokenizer), vocab_size))])
        free = torch.zeros(vocab_size, dtype=torch.bool)
        free[[index for index, text in enumerate(texts) if text.isspace() or text.strip().isdigit()]] = True
        _FREE[tokenizer] = free
    return free


def run_plan(loaded: LoadedModel, plan: Plan, after_step: Callable[[], None] | None = None) -> torch.Tensor:
    """Run a plan in the calling thread; frames go to each row's ``emit``, and ``after_step`` is called after each
    denoising step. Returns the new tokens, (B, K*C).

    Raises GenerationCancelled when every row's consumer has gone.
    """
    cut = plan.settings.stop_at_eos if plan.cut_at_eos is None else plan.cut_at_eos
    streamer = FrameStreamer(loaded.tokenizer, plan.rows, plan.settings, loaded.denoiser.eos_id, cut, plan.pins)
    streamer.after_step = after_step
    generator = torch.Generator(device=loaded.device).manual_seed(plan.seed)
    tokens = denoise(
        loaded.denoiser,
        plan.input_ids,
        plan.attention_mask,
        plan.settings,
        generator,
        observer=streamer,
        pins=plan.pins,
        cancelled=streamer.abandoned,
        gone=streamer.gone,
        free=free_to_run(loaded.tokenizer, loaded.denoiser.vocab_size) if plan.settings.cap_runs else None,
    )
    streamer.end()
    return tokens
