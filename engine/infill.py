"""In-place editing: regenerate one region of a text while the text on both sides stays exactly as it was.

The text before the region goes into the prompt, where the encoder reads it as a clean causal prefix. The canvas
starts with the region (noise) followed by the text after it (kept tokens), so the region's bidirectional
attention sees both sides. The loop's pins (engine.denoise.Pins) hold every kept position at its own token.

With nothing after the region (a thread's new replies), the region is a continuation of the text before it and may
span several canvases: it is written canvas after canvas, as a page is, until its end-of-text or
``region_tokens``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from engine.denoise import Pins
from engine.frames import EngineError, GenerationRequest
from engine.generation import Plan, check_length, settings_for
from engine.loading import LoadedModel
from engine.streaming import Row


@dataclass(frozen=True, slots=True)
class InfillRequest:
    """Rewrite the ``region_tokens`` tokens between ``before`` and ``after`` (at most one canvas), or, with nothing
    after, write up to ``region_tokens`` tokens after ``before``."""

    generation: GenerationRequest  # its prompt (the instruction, or the prompt the text answers) comes first;
    # seed, steps, temperatures and thresholds apply; max_canvases, stop_at_eos and opening do not (one canvas)
    before: str
    after: str
    region_tokens: int


def plan_infill(loaded: LoadedModel, request: InfillRequest, row: Row) -> Plan:
    """A plan whose row text is the region, and whose final text is before + region + after."""
    if not request.after:
        return _plan_continuation(loaded, request, row)
    length = loaded.canvas_length
    if not isinstance(request.region_tokens, int) or not 1 <= request.region_tokens <= length:
        raise EngineError(
            f"region_tokens must be between 1 and the canvas length {length}, got {request.region_tokens!r}"
        )
    # One canvas; no EOS handling in the loop, which would otherwise overwrite kept tokens after an EOS.
    generation = dataclasses.replace(request.generation, max_canvases=1, max_tokens=None, stop_at_eos=False)
    settings = settings_for(loaded, generation)
    tokenizer, denoiser = loaded.tokenizer, loaded.denoiser
    prompt = denoiser.encode_prompt(generation.prompt) + tokenizer.encode(request.before, add_special_tokens=False)
    check_length(loaded, len(prompt), length)

    after_ids = tokenizer.encode(request.after, add_special_tokens=False)
    # Some of what follows (or the end of the text) stays in view, pinned: a region as long as the canvas would
    # be written with nothing after it, and no end marked where it must stop.
    region = min(request.region_tokens, length - min(len(after_ids) + 1, length // 4))
    after = after_ids[: length - region]
    tail = after + [denoiser.eos_id] if region + len(after) < length else after  # the text ends where `after` ends
    tail += [denoiser.pad_id] * (length - region - len(tail))  # and padding follows an EOS
    noise = torch.randint(0, denoiser.vocab_size, (region,), generator=torch.Generator().manual_seed(generation.seed))
    canvas = torch.cat([noise, torch.tensor(tail, dtype=torch.long)]).unsqueeze(0).to(loaded.device)  # (1, L)
    keep = torch.zeros((1, length), dtype=torch.bool, device=loaded.device)
    keep[:, region:] = True

    edited = dataclasses.replace(row, span=slice(0, region), prefix=request.before, suffix=request.after)
    return Plan(
        input_ids=torch.tensor([prompt], dtype=torch.long, device=loaded.device),
        attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=loaded.device),
        settings=settings,
        seed=generation.seed,
        rows=[edited],
        pins=Pins(canvas, keep),
        cut_at_eos=True,  # the row's text (the region) ends at an EOS the model writes into it
    )


def _plan_continuation(loaded: LoadedModel, request: InfillRequest, row: Row) -> Plan:
    """The region after ``before`` with nothing after it: whole canvases, ending at the model's end-of-text."""
    if not isinstance(request.region_tokens, int) or request.region_tokens < 1:
        raise EngineError(f"region_tokens must be a positive integer, got {request.region_tokens!r}")
    generation = dataclasses.replace(request.generation, max_tokens=request.region_tokens, stop_at_eos=True, opening="")
    settings = settings_for(loaded, generation)
    tokenizer, denoiser = loaded.tokenizer, loaded.denoiser
    prompt = denoiser.encode_prompt(generation.prompt) + tokenizer.encode(request.before, add_special_tokens=False)
    check_length(loaded, len(prompt), settings.max_canvases * loaded.canvas_length)
    return Plan(
        input_ids=torch.tensor([prompt], dtype=torch.long, device=loaded.device),
        attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=loaded.device),
        settings=settings,
        seed=generation.seed,
        rows=[dataclasses.replace(row, prefix=request.before)],
    )
