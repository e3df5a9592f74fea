"""In-place editing: regenerate one region of a text while the text on both sides stays exactly as it was.

The text before the region goes into the prompt, where the encoder reads it as a clean causal prefix. The canvas
starts with the region (noise) followed by the text after it (kept tokens), so the region's bidirectional
attention sees both sides. A logits processor pins every kept position to its own token: its distribution is
one-hot, zero entropy, so the entropy-bound sampler always accepts it and the argmax canvas generate() returns
holds it unchanged. (A custom sampler alone would not do: generate() returns the argmax of the processed logits,
not the accepted canvas.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from engine.config import EOS_ID, PAD_ID
from engine.frames import EngineError, GenerationRequest
from engine.generation import Plan, check_length, encode_prompt, generate_options
from engine.loading import LoadedModel
from engine.streaming import Row

# Far below any softcapped logit (|logit| <= 30): exp() of it is exactly 0 even after temperature scaling.
_NEVER = -1.0e4


@dataclass(frozen=True, slots=True)
class InfillRequest:
    """Rewrite the ``region_tokens`` tokens between ``before`` and ``after``."""

    generation: GenerationRequest  # its prompt (the instruction, or the prompt the text answers) comes first;
    # seed, steps, temperatures and thresholds apply; max_canvases and stop_at_eos do not (one canvas, kept text)
    before: str
    after: str
    region_tokens: int


class PinTokens(LogitsProcessor):
    """Puts all probability of each kept canvas position on that position's token."""

    def __init__(self, canvas: torch.Tensor, keep: torch.Tensor) -> None:
        self.canvas = canvas  # (B, L) token ids; only kept positions matter
        self.keep = keep  # (B, L) bool
        self._pinned: torch.Tensor | None = None  # (B, L, V) built on first use, when V and dtype are known

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor, cur_step: int) -> torch.Tensor:
        if self._pinned is None or self._pinned.shape != scores.shape or self._pinned.dtype != scores.dtype:
            self._pinned = torch.full_like(scores, _NEVER).scatter_(-1, self.canvas.unsqueeze(-1), 0.0)
        return torch.where(self.keep.unsqueeze(-1), self._pinned, scores)


def plan_infill(loaded: LoadedModel, request: InfillRequest, row: Row) -> Plan:
    """A one-canvas plan whose row text is the region, and whose final text is before + region + after."""
    length = loaded.canvas_length
    if not isinstance(request.region_tokens, int) or not 1 <= request.region_tokens <= length:
        raise EngineError(
            f"region_tokens must be between 1 and the canvas length {length}, got {request.region_tokens!r}"
        )
    # One canvas; no EOS handling in generate(), which would otherwise overwrite kept tokens after an EOS.
    settings = dataclasses.replace(request.generation, max_canvases=1, stop_at_eos=False)
    options = generate_options(settings, length)
    tokenizer = loaded.tokenizer
    prompt = encode_prompt(tokenizer, settings.prompt) + tokenizer.encode(request.before, add_special_tokens=False)
    check_length(loaded, len(prompt), length)

    region = request.region_tokens
    after = tokenizer.encode(request.after, add_special_tokens=False)[: length - region]
    tail = after + [EOS_ID] if region + len(after) < length else after  # the text ends where `after` ends
    tail += [PAD_ID] * (length - region - len(tail))  # and generate() pads what follows an EOS
    noise = torch.randint(
        0, loaded.model.config.text_config.vocab_size, (region,), generator=torch.Generator().manual_seed(settings.seed)
    )
    canvas = torch.cat([noise, torch.tensor(tail, dtype=torch.long)]).unsqueeze(0).to(loaded.device)  # (1, L)
    keep = torch.zeros((1, length), dtype=torch.bool, device=loaded.device)
    keep[:, region:] = True

    edited = dataclasses.replace(row, span=slice(0, region), prefix=request.before, suffix=request.after)
    return Plan(
        input_ids=torch.tensor([prompt], dtype=torch.long, device=loaded.device),
        attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=loaded.device),
        options=options,
        seed=settings.seed,
        rows=[edited],
        max_canvases=1,
        cut_at_eos=True,
        decoder_input_ids=canvas,
        logits_processor=LogitsProcessorList([PinTokens(canvas, keep)]),
    )
