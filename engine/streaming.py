"""Turning generate()'s streamer calls into frames: a draft per denoising step, a text per canvas, one final text.

generate() calls ``put`` once with the prompt, then ``put_draft`` after every denoising step with the argmax
canvas, then ``put`` with each finished canvas, then ``end``. The streamer decodes those ids for every row of the
batch and hands each row's frames to that row's ``emit``, in the model's worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedTokenizerBase
from transformers.generation.streamers import BaseStreamer

from engine.config import EOS_ID
from engine.frames import CanvasFrame, DoneFrame, Frame, StepFrame
from engine.sampler import ObservedDiffusionGemma


class GenerationCancelled(Exception):
    """Raised inside generate() to abandon it: nobody is waiting for its rows any more."""


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


class FrameStreamer(BaseStreamer):
    """A generate() streamer that emits StepFrame, CanvasFrame and DoneFrame for every row of a batch."""

    def __init__(
        self,
        model: ObservedDiffusionGemma,
        tokenizer: PreTrainedTokenizerBase,
        rows: list[Row],
        max_canvases: int,
        cut_at_eos: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.rows = rows
        self.max_canvases = max_canvases
        self.cut_at_eos = cut_at_eos
        self.states = [_RowState() for _ in rows]
        self.canvas = -1  # -1 until the prompt has been put
        self.canvas_started = time.perf_counter()
        self.stopped_before: list[bool] = [False] * len(rows)  # rows that had stopped denoising before this step

    # -- generate() hooks ---------------------------------------------------------------------------------------

    def put(self, value: torch.Tensor) -> None:
        if self.canvas < 0:  # the first put is the prompt
            self._begin_canvas()
            return
        for row, state, ids in zip(self.rows, self.states, value.tolist(), strict=True):  # (B, L)
            if state.done:
                continue
            kept = self._cut(ids[row.span])
            state.tokens.extend(kept)
            frame = CanvasFrame(
                canvas=self.canvas,
                steps=state.steps,
                text=self.tokenizer.decode(kept, skip_special_tokens=True),
                tokens=len(kept),
                seconds=time.perf_counter() - self.canvas_started,
                variant=row.variant,
            )
            state.canvases.append(frame)
            self._emit(row, state, frame)
            if self.canvas + 1 >= self.max_canvases or (self.cut_at_eos and EOS_ID in ids[row.span]):
                self._finish(row, state)
        self._begin_canvas()

    def put_draft(self, value: torch.Tensor) -> None:
        if all(state.done or row.cancelled() for row, state in zip(self.rows, self.states, strict=True)):
            raise GenerationCancelled  # within one denoising step of the last consumer leaving
        sampler = self.model.sampler
        stopping = self.model.stopping
        accepted = sampler.accepted.tolist() if sampler is not None and sampler.accepted is not None else None
        entropy = sampler.entropy.tolist() if sampler is not None and sampler.entropy is not None else None
        for index, (row, state, ids) in enumerate(zip(self.rows, self.states, value.tolist(), strict=True)):
            if state.done or self.stopped_before[index]:
                continue  # finished rows ride along in the batch; they have nothing new to show
            state.steps += 1
            state.forwards += 1
            draft = self._cut(ids[row.span])
            frame = StepFrame(
                canvas=self.canvas,
                step=state.steps,
                text=self.tokenizer.decode(draft, skip_special_tokens=True),
                accepted=int(accepted[index]) if accepted is not None else 0,
                entropy=float(entropy[index]) if entropy is not None else 0.0,
                variant=row.variant,
            )
            self._emit(row, state, frame)
        if stopping is not None and stopping.finished is not None:
            self.stopped_before = stopping.finished.tolist()

    def end(self) -> None:
        for row, state in zip(self.rows, self.states, strict=True):
            if not state.done:  # generate() ran out of canvases for rows the EOS check never finished
                self._finish(row, state)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _begin_canvas(self) -> None:
        self.canvas += 1
        self.canvas_started = time.perf_counter()
        self.stopped_before = [False] * len(self.rows)
        for state in self.states:
            state.steps = 0

    def _cut(self, ids: list[int]) -> list[int]:
        if self.cut_at_eos and EOS_ID in ids:
            return ids[: ids.index(EOS_ID)]
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
