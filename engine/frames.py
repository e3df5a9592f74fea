"""The engine's public vocabulary: what a caller asks for and the frames it gets back.

This module is the whole boundary between the web layer and the model. It holds plain data only:
no tensors, no HTML, no requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

MIN_TEMPERATURE = 1e-3  # the lowest t_max the loop takes: float32 logits divided by less overflow into NaN


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One prompt to turn into text. ``None`` means "use the checkpoint's generation_config"."""

    prompt: str
    max_canvases: int = 1  # new tokens are capped at max_canvases * canvas_length
    max_tokens: int | None = None  # if set, replaces max_canvases: this many tokens, rounded up to whole canvases
    max_steps: int | None = None  # denoising steps per canvas
    seed: int = 0  # same prompt + seed + model + device -> same text
    t_min: float | None = None  # temperature at the last denoising step
    t_max: float | None = None  # temperature at the first denoising step
    entropy_bound: float | None = None  # sampler: how much entropy one step may accept
    stability_threshold: int | None = None  # adaptive stop: steps the argmax canvas must hold still
    confidence_threshold: float | None = None  # adaptive stop: mean token entropy below this
    stop_at_eos: bool = True
    opening: str = ""  # text the response starts with, word for word: fixed at the page start, written around
    gaps: tuple[str, ...] = ()  # the opening goes on after holes the model fills: opening, hole, gaps[0], hole, ...


@dataclass(frozen=True, slots=True)
class StepFrame:
    """One denoising step: the current draft of canvas ``canvas`` (decoded text of that canvas only)."""

    canvas: int
    step: int  # 1-based step within the canvas
    text: str
    accepted: int  # canvas positions the sampler accepted at this step
    entropy: float  # mean token entropy over the canvas
    variant: int = 0


@dataclass(frozen=True, slots=True)
class CanvasFrame:
    """A finished canvas: its final text (that canvas only)."""

    canvas: int
    steps: int
    text: str
    tokens: int  # tokens of this canvas before EOS/padding
    seconds: float
    variant: int = 0
    stopped_early: bool = False  # the adaptive stop (or settling) ended it before its max_steps


@dataclass(frozen=True, slots=True)
class DoneFrame:
    """The end of one generation: the whole text and its statistics."""

    text: str
    canvases: tuple[CanvasFrame, ...]
    tokens_per_forward: float
    ttff_s: float  # time to the first frame the caller saw
    seconds: float
    variant: int = 0
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueuedFrame:
    """The request waits its turn: ``ahead`` requests are being written or wait before it (a set of variants is one).

    An engine with a queue sends it as the request's place changes, before the request's first StepFrame, and 0 once
    its batch starts; an engine without one sends none."""

    ahead: int
    variant: int = 0  # as every frame has one; a set of variants waits as one request, told once


Frame = StepFrame | CanvasFrame | DoneFrame | QueuedFrame


class EngineError(Exception):
    """A generation failed; the engine itself is still serving."""


class EngineOverloaded(EngineError):
    """The request queue is full. Try again after ``retry_after`` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"engine overloaded; retry after {retry_after:.0f}s")
        self.retry_after = retry_after


class TextEngine(Protocol):
    """What the web layer needs from an engine."""

    @property
    def model_id(self) -> str: ...

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]: ...

    def fits(self, request: GenerationRequest) -> bool:
        """Whether the request's prompt and opening fit the model (positions and canvas), so it may be asked."""
        ...
