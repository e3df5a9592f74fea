"""Turning the denoising loop's progress into frames: a draft per denoising step, a text per canvas, one final text.

The loop (engine.denoise) calls ``step`` after every denoising step with the argmax canvas and ``canvas`` with each
finished canvas; the caller calls ``end`` when the loop returns. The streamer decodes those ids for every row of
the batch and hands each row's frames to that row's ``emit``, in the model's worker thread.

With ``drop_doubled_words`` set, a finished canvas's text leaves out a word (letters only, as decoded) that
repeats the one before it, case aside: `data data` reads `data`, `a a` reads `a`, `HashHash` reads `Hash`,
`Desktop desktop` reads `Desktop`, and across a separator stuck to both, `client.py.py` reads `client.py`.
Neighbouring positions are sampled each from its own marginal, and a token written twice is what a denoiser writes
most often and keeps (the default model: 2.1-8.4% of the words of its pages, against 0.2-0.3% in the sites'
corpus). Pinned tokens (openings, infill's kept text) are never left out, nor digits or markup. Only the text
changes: the canvas the model reads on from is the one it wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedTokenizerBase

from engine.denoise import DenoiseSettings, GenerationCancelled, Pins
from engine.frames import CanvasFrame, DoneFrame, Frame, StepFrame

__all__ = ["FrameStreamer", "GenerationCancelled", "Row"]

_SEPARATORS = frozenset(".-_")  # a word written twice across one of these, stuck to both, is one word too many
_MARKS = frozenset(",·")  # a comma or middle dot written twice in a row (`,,`, `· ·`) is one too many
_IDIOMS = frozenset({"and", "or", "as", "by", "after", "upon"})  # `over and over and`, `one by one by`: on purpose


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
    tokens: list[int] = field(default_factory=list)  # the text's tokens (doubled words left out)
    last: int | None = None  # the last token the row wrote, left out or not
    solid: int | None = None  # the last token the row wrote that is not whitespace alone
    pending: list[int] = field(default_factory=list)  # a pair written twice at a canvas's end: the next canvas decides
    word: str = ""  # the letters (lower case) of the word that token ends; "" after anything but letters
    before_separator: str = ""  # where that token is a separator (`.`, `-`, `_`): the word before it
    written: int = 0  # the tokens the row wrote, left out or not
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
        pins: Pins | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.pins = pins  # pinned positions are never left out as doubled words
        self.drop_doubled = settings.drop_doubled_words
        self._texts: dict[int, str] = {}  # token id -> its text alone
        self._marks: dict[int, int] = {}  # a token of one mark written over and over -> that mark's token
        self.rows = rows
        self.max_canvases = settings.max_canvases
        self.max_steps = settings.max_steps
        self.cut_at_eos = cut_at_eos
        self.eos_id = eos_id
        self.states = [_RowState() for _ in rows]
        self.canvas_index = 0
        self.canvas_started = time.perf_counter()
        self.after_step: Callable[[], None] | None = None  # told after every step's frames (engine.threads)

    # -- the loop's hooks -----------------------------------------------------------------------------------------

    def abandoned(self) -> bool:
        """True once every row is finished or its consumer has gone: the loop then stops within one step."""
        return all(state.done or row.cancelled() for row, state in zip(self.rows, self.states, strict=True))

    def gone(self) -> torch.Tensor:
        """The rows (B,) bool whose consumer has gone: the loop stops computing them."""
        return torch.tensor([row.cancelled() for row in self.rows], dtype=torch.bool)

    def step(self, draft: torch.Tensor, accepted: torch.Tensor, entropy: torch.Tensor, active: torch.Tensor) -> None:
        if self.abandoned():
            raise GenerationCancelled  # within one denoising step of the last consumer leaving
        values = (draft.tolist(), accepted.tolist(), entropy.tolist(), active.tolist())
        rows = zip(self.rows, self.states, *values, strict=True)
        for row, state, ids, taken, spread, moving in rows:
            if state.done or not moving:
                continue  # a row that ended, stopped or lost its consumer has nothing new to show
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
        if self.after_step is not None:
            self.after_step()

    def canvas(self, tokens: torch.Tensor) -> None:
        pinned = self._pinned(tokens)
        for row, state, ids, held in zip(self.rows, self.states, tokens.tolist(), pinned, strict=True):  # (B, C)
            if state.done:
                continue
            written = self._cut(ids[row.span])
            ends = self.canvas_index + 1 >= self.max_canvases or (self.cut_at_eos and self.eos_id in ids[row.span])
            stop = row.span.stop
            if stop is not None and 0 <= stop < len(ids):
                after: int | None = ids[stop]  # the kept text after an infill's region
            else:
                after = self.eos_id if ends else None  # the page's end, or the next canvas, not known yet
            kept = self._undouble(state, written, held[row.span], after) if self.drop_doubled else written
            state.tokens.extend(kept)
            state.written += len(written)
            frame = CanvasFrame(
                canvas=self.canvas_index,
                steps=state.steps,
                text=self.tokenizer.decode(kept, skip_special_tokens=True),
                tokens=len(written),
                seconds=time.perf_counter() - self.canvas_started,
                variant=row.variant,
                stopped_early=0 < state.steps < self.max_steps,  # a canvas pinned whole takes no step
            )
            state.canvases.append(frame)
            self._emit(row, state, frame)
            if ends:
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

    def _pinned(self, tokens: torch.Tensor) -> list[list[bool]]:
        """Which positions (B, C) of this canvas were pinned."""
        pins = self.pins.canvas(self.canvas_index, tokens.shape[1]) if self.pins is not None else None
        return pins.keep.tolist() if pins is not None else [[False] * tokens.shape[1] for _ in self.rows]

    def _undouble(self, state: _RowState, ids: list[int], pinned: list[bool], after: int | None = None) -> list[int]:
        """``ids`` without what the denoiser wrote twice (pinned tokens stay, as written):

        - a word token equal to the token before it (`data data`, `HashHash`, `a a`);
        - a whole word equal to the whole word before it, however that one was split (`Desktop desktop`, where
          `Desktop` is two pieces after a tag);
        - a word repeated across a separator it is stuck to (`.`, `-`, `_`): `client.py.py` reads `client.py`,
          `object-oriented-oriented` reads `object-oriented`. The repeat must end its word, so `bash.bashrc`
          stays, and the word before the separator must be the same whole word, so `numpy.py` stays;
        - a capitalised piece that ends a word and repeats the word before it (`WebWeb`, written ` Web` + `Web`;
          `murmur`, `COCOMO` and `WikiWikiWeb` stay);
        - a pair written twice, within a canvas: two whole words (`in the in the`), except where either is `and`,
          `or`, `as`, `by`, `after` or `upon` (`over and over and over`, `as bright as bright`, as the sites'
          corpus writes them; `step by step by step`) or both start with a capital (`New York New York`); or two
          pieces of two letters or more stuck to the same two before them, or such a piece and a separator
          (`DownloadsDownloads`, written `Down` + `loads` twice, its last piece a third time or not), with no space
          in the run (`No. No. No.`); a
          single letter's run stays (`e.g.g.g`, `10.x.x.x`);
        - a comma written twice before a space (`object,, containing` reads `object, containing`; `a,,b` and a CSV's
          `id,,age` stay), or a middle dot, whitespace between or not (`· ·` reads `·`);
        - a word and a middle dot written twice, within a canvas (`in science · science · 26 points` reads `in
          science · 26 points`; `a · a ·`, one letter, stays).

        ``after`` is the token that follows ``ids``: the text after an infill's region, the end of text on the page's
        last canvas, or None when the next canvas is still to come. A pair written twice before None waits for that
        canvas (``state.pending``): it goes unless the canvas goes on with its last word (` in the` + ` in the` |
        `ory`).
        """
        kept: list[int] = []
        kept_held: list[bool] = []
        if state.pending:
            if ids and self._piece(ids[0]):  # the pair's second word goes on: it was no pair
                kept, kept_held = state.pending, [False] * len(state.pending)
            state.pending = []
        for index, (token, held) in enumerate(zip(ids, pinned, strict=False)):
            word, letters = self._word(token), self._letters(token)
            following = ids[index + 1] if index + 1 < len(ids) else after
            ends = following is not None and not self._piece(following)
            stuck = not held and ends and self._stuck_to_itself(token, state.last)
            repeat = not held and (
                (word is not None and word == self._word(state.last))
                or (letters is not None and letters[0] and len(letters[1]) >= 2 and letters[1] == state.word)
                or stuck
                or self._mark_again(token, state, following)
            )
            across = (
                not held
                and letters is not None
                and not letters[0]
                and ends
                and letters[1] == state.before_separator
                and index > 0
                and not pinned[index - 1]  # the separator is this canvas's, and not pinned
            )
            if not held and not repeat and not across and self._pair_again(kept, kept_held, token, following):
                kept.pop()  # the pair's first token goes with its second
                kept_held.pop()
                repeat = True
            if not held and not repeat and not across and (word_again := self._dotted_again(kept, kept_held, token)):
                del kept[-word_again:]  # the word goes with its dot
                del kept_held[-word_again:]
                repeat = True
            if not held and not repeat:
                token = self._one_mark(token, following)
            if across:
                kept.pop()  # the separator goes with the repeat
                kept_held.pop()
            elif not repeat:
                kept.append(token)
                kept_held.append(held)
            if not stuck:  # the word a stuck repeat left goes on as it was (` Web` + `Web` + ` web` is ` Web`)
                self._follow(state, token)
            open_pair = following is None and not held and not repeat and not across
            if open_pair and self._pair_again(kept[:-1], kept_held[:-1], token, self.eos_id):
                state.pending = kept[-2:]  # a pair written twice, unless the next canvas goes on with its word
                del kept[-2:]
        return kept

    def _stuck_to_itself(self, token: int, last: int | None) -> bool:
        """``token`` is a capitalised piece of two letters or more that repeats, case and all, the whole word the
        token before it starts (` Web` + `Web`); not in capitals (` CO` + `CO` + `MO` is `COCOMO`)."""
        text = self._text(token)
        if last is None or len(text) < 2 or not text[0].isupper() or text.isupper():
            return False
        if self._letters(token) != (False, text.lower()):
            return False
        return self._text(last) == " " + text

    def _mark_again(self, token: int, state: _RowState, following: int | None) -> bool:
        """A middle dot after a middle dot, whitespace between or not (`78 points ·  · 20 replies`), or a comma
        after a comma with a space after it."""
        text = self._text(token).removeprefix(" ")
        if state.last is None or text not in _MARKS:
            return False
        before = self._text(state.last).removeprefix(" ")
        if text == "·" and self._text(state.last).isspace() and state.solid is not None:
            before = self._text(state.solid).strip()
        if before != text:
            return False
        return text != "," or self._spaced(following)

    def _one_mark(self, token: int, following: int | None) -> int:
        """A token of one mark written over and over (`,,`, `,,,,`) as that mark once (a comma's before a space)."""
        text = self._text(token)
        mark = text.removeprefix(" ")
        if len(mark) < 2 or len(set(mark)) != 1 or mark[0] not in _MARKS:
            return token
        if mark[0] == "," and not self._spaced(following):
            return token
        if token not in self._marks:
            once = self.tokenizer.encode(text[: len(text) - len(mark) + 1], add_special_tokens=False)
            self._marks[token] = int(once[0]) if len(once) == 1 else token
        return self._marks[token]

    def _spaced(self, token: int | None) -> bool:
        return token is not None and self._text(token).startswith(" ")

    def _pair_again(self, kept: list[int], kept_held: list[bool], token: int, following: int | None) -> bool:
        """``token`` ends a pair of tokens that repeats the pair before it, all four this canvas's and the repeat's
        first not pinned: `in the` + ` in` (the last kept) + ` the` (``token``), or a pair stuck to the one before
        it (`DownloadsDownloads`). See ``_undouble`` for what is spared."""
        if len(kept) < 3 or kept_held[-1]:
            return False
        units = [self._unit(t) for t in (*kept[-3:], token)]
        if any(u is None for u in units):
            return False
        first, second, again, then = (u for u in units if u is not None)

        def same(one: tuple[str, bool, str], other: tuple[str, bool, str] | None) -> bool:
            return other is not None and one[0] == other[0] and one[2].lower() == other[2].lower()

        if not same(first, again) or not same(second, then) or same(first, second):
            return False
        if then[0] == "word" and (following is None or (self._piece(following) and following != token)):
            return False  # the pair's second word goes on: ` in the` + ` in the` + `ory` (`loads` + `loads` repeats)
        if again[1]:  # whole words: ` in the in the`
            spaced = all(u[0] == "word" and u[1] for u in units)
            capitals = first[2][0].isupper() and second[2][0].isupper()
            return spaced and not capitals and not {first[2].lower(), second[2].lower()} & _IDIOMS
        if second[1] or then[1] or "word" not in (second[0], then[0]):
            return False  # a space inside the run (`No. No.`), or no letters in it (`-.-.`)
        return all(u[0] != "word" or len(u[2]) >= 2 for u in units)  # `10.x.x.x`, `U.S.S.R.`, ` dumdum`

    def _dotted_again(self, kept: list[int], kept_held: list[bool], token: int) -> int:
        """How many tokens of ``kept`` go with ``token``, a spaced middle dot that ends a word and dot written twice
        (` science ·` + ` science ·`, a board's meta line; the word in any number of pieces): 0 where it is not."""
        if self._text(token) != " ·" or " ·" not in (texts := [self._text(t) for t in kept]):
            return 0
        dot = len(texts) - 1 - texts[::-1].index(" ·")  # the dot before: the word between them is the repeat
        again, before = "".join(texts[dot + 1 :]), "".join(texts[:dot])
        letters = again.removeprefix(" ")
        if len(letters) < 2 or len(again) == len(letters) or not (letters.isascii() and letters.isalpha()):
            return 0
        if any(kept_held[dot + 1 :]) or not before.endswith(again):
            return 0
        return len(kept) - dot - 1

    def _unit(self, token: int) -> tuple[str, bool, str] | None:
        """A token as a pair's member: ("word", whether a space starts it, its letters) or ("separator", False, the
        separator) for `.`, `-` or `_`; None for anything else (digits, markup, punctuation)."""
        text = self._text(token)
        if text in _SEPARATORS:
            return "separator", False, text
        letters = text.removeprefix(" ")
        if not (letters.isascii() and letters.isalpha()):
            return None
        return "word", len(letters) < len(text), letters

    def _follow(self, state: _RowState, token: int) -> None:
        """Move the row's word tracking on past ``token``."""
        letters = self._letters(token)
        if letters is None:
            separator = self._text(token) in _SEPARATORS
            state.before_separator = state.word if separator and len(state.word) >= 2 else ""
            state.word = ""
        else:
            state.word = letters[1] if letters[0] else state.word + letters[1]
            state.before_separator = ""
        state.last = token
        if not self._text(token).isspace():
            state.solid = token

    def _text(self, token: int) -> str:
        if token not in self._texts:
            self._texts[token] = self.tokenizer.decode([token])
        return self._texts[token]

    def _letters(self, token: int) -> tuple[bool, str] | None:
        """(whether the token starts a word with a space, its letters in lower case) for a token of ASCII letters
        with or without a leading space; None for anything else."""
        text = self._text(token)
        letters = text.removeprefix(" ")
        if not (letters.isascii() and letters.isalpha()):
            return None
        return len(letters) < len(text), letters.lower()

    def _piece(self, token: int) -> bool:
        """Whether the token goes on the word before it: letters with no space before them."""
        letters = self._letters(token)
        return letters is not None and not letters[0]

    def _word(self, token: int | None) -> tuple[bool, str] | None:
        """A token as a word: (whether it starts one, its letters in lower case); None for anything else. A piece
        of a word (no leading space) counts from two letters, so ` a a` and ` The the` repeat, `HashHash` and
        `KITTYTY` too, while `A` + `A` (in `AA`) does not."""
        if token is None:
            return None
        letters = self._letters(token)
        return letters if letters is not None and (letters[0] or len(letters[1]) >= 2) else None

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
        state.done = True  # a pair still pending is left out: nothing follows it
        now = time.perf_counter()
        text = self.tokenizer.decode(state.tokens, skip_special_tokens=True)
        frame = DoneFrame(
            text=row.prefix + text + row.suffix,
            canvases=tuple(state.canvases),
            tokens_per_forward=state.written / max(1, state.forwards),
            ttff_s=(state.first_frame or now) - row.started,
            seconds=now - row.started,
            variant=row.variant,
            stats={"tokens": float(state.written), "forwards": float(state.forwards)},
        )
        self._emit(row, state, frame)
