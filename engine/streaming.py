"""Turning the denoising loop's progress into frames: a draft per denoising step, a text per canvas, one final text.

The loop (engine.denoise) calls ``step`` after every denoising step with the argmax canvas and ``canvas`` with each
finished canvas; the caller calls ``end`` when the loop returns. The streamer decodes those ids for every row of
the batch and hands each row's frames to that row's ``emit``, in the model's worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedTokenizerBase

from engine.denoise import DenoiseSettings, GenerationCancelled
from engine.frames import CanvasFrame, DoneFrame, Frame, StepFrame

__all__ = ["FrameStreamer", "GenerationCancelled", "Row"]


@dataclass(eq=False)
class Row:
    """One row of a batch: where its frames go and how its text is cut out of the canvas."""

    emit: Callable[[Frame], None]
    cancelled: Callable[[], bool] = lambda: False
    variant: int = 0
    span: slice = field(default_factory=lambda: slice(None))  # the canvas positions that are this row's text
    prefix: str = ""  # text the final text starts with (infill: the kept text before the region)
    suffix: str = ""  # text the final text ends with (infill: the kept text after the region)
    started: float = field(default_factory=time.perf_counter)  # when the caller asked; ttff counts from here


@dataclass(eq=False)
class _RowState:
    tokens: list[int] = field(default_factory=list)
    canvases: list[CanvasFrame] = field(default_factory=list)
    steps: int = 0  # denoising steps of the current canvas
    forwards: int = 0  # denoising steps of all canvases: the decoder passes this row cost
    first_frame: float | None = None
    done: bool = False


class FrameStreamer:
    """An engine.denoise observer that emits StepFrame, CanvasFrame and DoneFrame for every row of a batch."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        rows: list[Row],
        settings: DenoiseSettings,
        eos_id: int,
        cut_at_eos: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.rows = rows
        self.max_canvases = settings.max_canvases
        self.max_steps = settings.max_steps
        self.cut_at_eos = cut_at_eos
        self.eos_id = eos_id
        self.states = [_RowState() for _ in rows]
        self.canvas_index = 0
        self.canvas_started = time.perf_counter()

    # -- the loop's hooks -----------------------------------------------------------------------------------------

    def abandoned(self) -> bool:
        """True once every row is finished or its consumer has gone: the loop then stops within one step."""
        return all(state.done or row.cancelled() for row, state in zip(self.rows, self.states, strict=True))

    def step(self, draft: torch.Tensor, accepted: torch.Tensor, entropy: torch.Tensor, active: torch.Tensor) -> None:
        if self.abandoned():
            raise GenerationCancelled  # within one denoising step of the last consumer leaving
        values = (draft.tolist(), accepted.tolist(), entropy.tolist(), active.tolist())
        rows = zip(self.rows, self.states, *values, strict=True)
        for row, state, ids, taken, spread, moving in rows:
            if state.done or not moving:
                continue  # finished rows ride along in the batch; they have nothing new to show
            state.steps += 1
            state.forwards += 1
            frame = StepFrame(
                canvas=self.canvas_index,
                step=state.steps,
                text=self.tokenizer.decode(self._cut(ids[row.span]), skip_special_tokens=True),
                accepted=int(taken),
                entropy=float(spread),
                variant=row.variant,
            )
            self._emit(row, state, frame)

    def canvas(self, tokens: torch.Tensor) -> None:
        for row, state, ids in zip(self.rows, self.states, tokens.tolist(), strict=True):  # (B, C)
            if state.done:
                continue
            kept = self._cut(ids[row.span])
            state.tokens.extend(kept)
            frame = CanvasFrame(
                canvas=self.canvas_index,
                steps=state.steps,
                text=self.tokenizer.decode(kept, skip_special_tokens=True),
                tokens=len(kept),
                seconds=time.perf_counter() - self.canvas_started,
                variant=row.variant,
                stopped_early=0 < state.steps < self.max_steps,  # a canvas pinned whole takes no step
            )
            state.canvases.append(frame)
            self._emit(row, state, frame)
            if self.canvas_index + 1 >= self.max_canvases or (self.cut_at_eos and self.eos_id in ids[row.span]):
                self._finish(row, state)
        self.canvas_index += 1
        self.canvas_started = time.perf_counter()
        for state in self.states:
            state.steps = 0

    def end(self) -> None:
        for row, state in zip(self.rows, self.states, strict=True):
            if not state.done:  # the loop ran out of canvases for rows the EOS check never finished
                self._finish(row, state)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _cut(self, ids: list[int]) -> list[int]:
        if self.cut_at_eos and self.eos_id in ids:
            return ids[: ids.index(self.eos_id)]
        return ids

    def _emit(self, row: Row, state: _RowState, frame: Frame) -> None:
        if state.first_frame is None:
            state.first_frame = time.perf_counter()
        if not row.cancelled():
            row.emit(frame)

    def _finish(self, row: Row, state: _RowState) -> None:
        state.done = True
        now = time.perf_counter()
        text = self.tokenizer.decode(state.tokens, skip_special_tokens=True)
        frame = DoneFrame(
            text=row.prefix + text + row.suffix,
            canvases=tuple(state.canvases),
            tokens_per_forward=len(state.tokens) / max(1, state.forwards),
            ttff_s=(state.first_frame or now) - row.started,
            seconds=now - row.started,
            variant=row.variant,
            stats={"tokens": float(len(state.tokens)), "forwards": float(state.forwards)},
        )
        self._emit(row, state, frame)
