"""Block-diffusion generation: from requests to one ``generate()`` call, and running it with a frame streamer.

A ``Plan`` is one generate() call made ready: the batch's prompt ids (left-padded), the options every row shares,
the seed, and where each row's frames go. Plans are built from plain requests (``plan_batch``: several prompts
with the same settings, or n copies of one prompt for variations) or from an in-place edit (engine.infill).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedTokenizerBase
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)

from engine.config import BOS_ID, PAD_ID, RESPONSE_ID
from engine.frames import EngineError, GenerationRequest
from engine.loading import LoadedModel
from engine.streaming import FrameStreamer, Row


@dataclass(eq=False)
class Plan:
    """One generate() call, ready to run."""

    input_ids: torch.Tensor  # (B, T) prompts, left-padded with PAD
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = padding
    options: dict[str, Any]  # generate() keyword arguments shared by every row
    seed: int
    rows: list[Row]
    max_canvases: int
    cut_at_eos: bool = True
    decoder_input_ids: torch.Tensor | None = None  # (B, L) starting canvas; None = the sampler's uniform noise
    logits_processor: LogitsProcessorList = field(default_factory=LogitsProcessorList)


# Far below any softcapped logit (|logit| <= 30): exp() of it is exactly 0 even after temperature scaling.
_NEVER = -1.0e4


class PinTokens(LogitsProcessor):
    """Puts all probability of each kept position of the first canvas on that position's token.

    A pinned distribution is one-hot, zero entropy, so the entropy-bound sampler always accepts it and never
    re-noises it, and the argmax canvas generate() returns holds it unchanged. (A custom sampler alone would not do:
    generate() returns the argmax of the processed logits, not the accepted canvas.) Later canvases are left alone:
    generate() calls this with the sequence so far, which is longer than ``width`` once the first canvas is done.
    """

    def __init__(self, canvas: torch.Tensor, keep: torch.Tensor, width: int) -> None:
        self.canvas = canvas  # (B, L) token ids; only kept positions matter
        self.keep = keep  # (B, L) bool
        self.width = width  # length of the (padded) prompt: the sequence while the first canvas is denoised
        self._pinned: torch.Tensor | None = None  # (B, L, V) built on first use, when V and dtype are known

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor, cur_step: int) -> torch.Tensor:
        if input_ids.shape[-1] != self.width:
            return scores
        if self._pinned is None or self._pinned.shape != scores.shape or self._pinned.dtype != scores.dtype:
            self._pinned = torch.full_like(scores, _NEVER).scatter_(-1, self.canvas.unsqueeze(-1), 0.0)
        return torch.where(self.keep.unsqueeze(-1), self._pinned, scores)


def encode_opening(loaded: LoadedModel, opening: str) -> list[int]:
    """The tokens of a request's opening; it must leave room in the first canvas for the model's own text."""
    ids = loaded.tokenizer.encode(opening, add_special_tokens=False) if opening else []
    if len(ids) >= loaded.canvas_length:
        raise EngineError(
            f"the opening is {len(ids)} tokens, which leaves no room in a {loaded.canvas_length}-token canvas; "
            "shorten it"
        )
    return ids


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """The encoder input DiffusionGemma was trained on: <bos> prompt <response>."""
    return [BOS_ID, *tokenizer.encode(prompt, add_special_tokens=False), RESPONSE_ID]


def generate_options(request: GenerationRequest, canvas_length: int) -> dict[str, Any]:
    """generate() keyword arguments for a request; fields left at None fall back to the checkpoint's defaults.

    Raises EngineError for values generate() would reject, so a bad request fails on its own, before any batch.
    """
    if not isinstance(request.max_canvases, int) or request.max_canvases < 1:
        raise EngineError(f"max_canvases must be a positive integer, got {request.max_canvases!r}")
    options: dict[str, Any] = {"max_new_tokens": request.max_canvases * canvas_length}
    if request.max_steps is not None:
        options["max_denoising_steps"] = request.max_steps
    if request.t_min is not None:
        options["t_min"] = float(request.t_min)
    if request.t_max is not None:
        options["t_max"] = float(request.t_max)
    if request.entropy_bound is not None:
        options["sampler_config"] = EntropyBoundSamplerConfig(entropy_bound=float(request.entropy_bound))
    if request.stability_threshold is not None:
        options["stability_threshold"] = request.stability_threshold
    if request.confidence_threshold is not None:
        options["confidence_threshold"] = float(request.confidence_threshold)
    if not request.stop_at_eos:
        # Without an EOS id generate() neither stops at EOS nor pads what follows it.
        options["eos_token_id"] = None
    try:
        DiffusionGemmaGenerationConfig(**options)  # validates ranges and types the way generate() will
    except ValueError as exc:
        raise EngineError(f"invalid generation settings: {exc}") from exc
    return options


def batch_key(request: GenerationRequest) -> tuple[Any, ...]:
    """Requests with equal keys produce the same generate() options and may share one call."""
    return (
        request.max_canvases,
        request.max_steps,
        request.t_min,
        request.t_max,
        request.entropy_bound,
        request.stability_threshold,
        request.confidence_threshold,
        request.stop_at_eos,
    )


def left_pad(prompts: Sequence[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack prompts of different lengths, padding on the left so every prompt ends where the canvas begins."""
    width = max(len(ids) for ids in prompts)
    input_ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for index, ids in enumerate(prompts):
        input_ids[index, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention_mask[index, width - len(ids) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def fits(loaded: LoadedModel, request: GenerationRequest) -> bool:
    """Whether ``request`` passes the length checks of plan_batch (its other settings are not checked here)."""
    tokenizer, length = loaded.tokenizer, loaded.canvas_length
    if request.opening and len(tokenizer.encode(request.opening, add_special_tokens=False)) >= length:
        return False
    prompt = len(encode_prompt(tokenizer, request.prompt))
    return prompt + request.max_canvases * length <= loaded.model.config.text_config.max_position_embeddings


def check_length(loaded: LoadedModel, prompt_tokens: int, new_tokens: int) -> None:
    limit = loaded.model.config.text_config.max_position_embeddings
    if prompt_tokens + new_tokens > limit:
        raise EngineError(
            f"prompt of {prompt_tokens} tokens plus {new_tokens} new tokens exceeds the model's {limit} positions; "
            "shorten the prompt or ask for fewer canvases"
        )


def plan_batch(loaded: LoadedModel, requests: Sequence[GenerationRequest], rows: Sequence[Row]) -> Plan:
    """One row per request. All requests must share a batch_key; the batch runs under the first one's seed."""
    if len(requests) != len(rows) or not requests:
        raise ValueError("plan_batch needs one row per request")
    first = requests[0]
    if any(batch_key(request) != batch_key(first) for request in requests):
        raise ValueError("requests in one batch must share their generation settings")
    options = generate_options(first, loaded.canvas_length)
    prompts = [encode_prompt(loaded.tokenizer, request.prompt) for request in requests]
    for ids in prompts:
        check_length(loaded, len(ids), options["max_new_tokens"])
    openings = [encode_opening(loaded, request.opening) for request in requests]
    input_ids, attention_mask = left_pad(prompts, loaded.device)
    plan = Plan(
        input_ids=input_ids,
        attention_mask=attention_mask,
        options=options,
        seed=first.seed,
        rows=list(rows),
        max_canvases=first.max_canvases,
        cut_at_eos=first.stop_at_eos,
    )
    if any(openings):
        # The first canvas starts as noise with each row's opening in place, pinned there while the rest denoises.
        length, vocab = loaded.canvas_length, loaded.model.config.text_config.vocab_size
        canvas = torch.randint(0, vocab, (len(requests), length), generator=torch.Generator().manual_seed(first.seed))
        keep = torch.zeros((len(requests), length), dtype=torch.bool)
        for index, ids in enumerate(openings):
            canvas[index, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            keep[index, : len(ids)] = True
        canvas, keep = canvas.to(loaded.device), keep.to(loaded.device)
        plan.decoder_input_ids = canvas
        plan.logits_processor = LogitsProcessorList([PinTokens(canvas, keep, width=input_ids.shape[1])])
    return plan


def run_plan(loaded: LoadedModel, plan: Plan) -> torch.Tensor:
    """Run a plan in the calling thread; frames go to each row's ``emit``. Returns the sequences, (B, T + new).

    Raises GenerationCancelled when every row's consumer has gone.
    """
    streamer = FrameStreamer(loaded.model, loaded.tokenizer, plan.rows, plan.max_canvases, plan.cut_at_eos)
    extra: dict[str, Any] = {}
    if plan.decoder_input_ids is not None:
        extra["decoder_input_ids"] = plan.decoder_input_ids
    # generate() draws its noise and samples from torch's global generator: seed it here, and fork it so the
    # seed does not leak into the caller's randomness.
    devices = [loaded.device] if loaded.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices, device_type=loaded.device.type):
        torch.manual_seed(plan.seed)
        output = loaded.model.generate(
            plan.input_ids,
            attention_mask=plan.attention_mask,
            streamer=streamer,
            logits_processor=LogitsProcessorList(plan.logits_processor),
            **plan.options,
            **extra,
        )
    return output.sequences
