"""Openings with gaps: fixed text a page is made of, with short holes in it that the model fills.

A request's ``opening`` is pinned word for word at the start of the page (engine.generation.plan_batch). Pins hold
positions, and the text the model writes in a hole has no length known beforehand, so pins alone can fix only a
prefix. With ``gaps`` the page is written in turns instead: ``opening``, a hole, ``gaps[0]``, a hole, ``gaps[1]``,
and so on. Each turn is an ordinary run whose opening is all the text decided so far, given room for one hole
(GAP_TOKENS); the hole keeps one line of what the model wrote there, up to its first tag or line end, and the fixed
text after it joins the next turn's opening. The last turn writes the rest of the page as any page is written.

A hole costs a prefill and the canvas (rarely two) it falls in. Frames of the turns before the last are drafts of
the whole page so far (StepFrames only, numbered by the turn's own canvases); the last turn's frames pass as they
are, and its DoneFrame carries every turn's canvases, time and counts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, GenerationRequest, StepFrame
from engine.generation import canvases
from engine.loading import LoadedModel

GAP_TOKENS = 24  # the most tokens a hole may hold: a value, a name or a short phrase
_ENDS = ("<", "\n")  # where the model's text in a hole stops: a tag (the fixed text's own) or a new line


def hole_text(written: str, tokens: int, count: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> str:
    """What a hole keeps of the text the model wrote after it: up to the first tag or line end, at most ``tokens``
    tokens, without the spaces at its ends."""
    cut = min((i for i in (written.find(end) for end in _ENDS) if i >= 0), default=len(written))
    text = written[:cut]
    ids = count(text)
    if len(ids) > tokens:
        text = decode(ids[:tokens])
    return text.strip()


def fits_with_gaps(loaded: LoadedModel, request: GenerationRequest, fits: Callable[[GenerationRequest], bool]) -> bool:
    """Whether the request fits with every hole at its longest."""
    if not request.gaps:
        return fits(request)
    room = GAP_TOKENS * len(request.gaps)
    whole = request.opening + "".join(request.gaps)
    ids = loaded.tokenizer.encode(whole, add_special_tokens=False)
    try:
        budget = canvases(loaded, request) * loaded.canvas_length
    except EngineError:
        return False
    return len(ids) + room < budget and fits(dataclasses.replace(request, opening=whole, gaps=()))


async def write_with_gaps(
    loaded: LoadedModel, request: GenerationRequest, run: Callable[[GenerationRequest], AsyncIterator[Frame]]
) -> AsyncIterator[Frame]:
    """The frames of ``request`` written turn by turn, one turn per hole (see the module's docstring); ``run``
    writes one turn."""
    tokenizer = loaded.tokenizer
    budget = canvases(loaded, request) * loaded.canvas_length

    def count(text: str) -> list[int]:
        ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
        return ids

    def decode(ids: list[int]) -> str:
        text: str = tokenizer.decode(ids)
        return text

    started = time.perf_counter()
    decided, rest = request.opening, list(request.gaps)
    spent: list[CanvasFrame] = []
    totals: dict[str, float] = {}
    ttff: float | None = None
    while rest:
        room = len(count(decided)) + GAP_TOKENS
        if room >= budget:
            raise EngineError(
                f"the opening's text before a gap is {room - GAP_TOKENS} tokens, which leaves no room for the gap in "
                f"the page's {budget} tokens; shorten the opening or raise the page's tokens"
            )
        turn = dataclasses.replace(request, opening=decided, gaps=(), max_tokens=room, stop_at_eos=True)
        finished: dict[int, str] = {}
        done: DoneFrame | None = None
        async with aclosing(run(turn)) as frames:
            async for frame in frames:
                if ttff is None:
                    ttff = time.perf_counter() - started
                if isinstance(frame, StepFrame):
                    draft = "".join(text for index, text in sorted(finished.items()) if index < frame.canvas)
                    yield dataclasses.replace(frame, text=draft + frame.text)
                elif isinstance(frame, CanvasFrame):
                    finished[frame.canvas] = frame.text
                elif isinstance(frame, DoneFrame):
                    done = frame
        if done is None:
            raise EngineError("a gap's turn ended without a final frame")
        if not done.text.startswith(decided):
            raise EngineError("a gap's turn did not keep its opening word for word")  # a tokenizer that rewrites text
        spent.extend(done.canvases)
        for name, value in done.stats.items():
            totals[name] = totals.get(name, 0.0) + value
        decided += hole_text(done.text[len(decided) :], GAP_TOKENS, count, decode) + rest.pop(0)
    last = dataclasses.replace(request, opening=decided, gaps=())
    async with aclosing(run(last)) as frames:
        async for frame in frames:
            if ttff is None:
                ttff = time.perf_counter() - started
            if not isinstance(frame, DoneFrame):
                yield frame
                continue
            for name, value in frame.stats.items():
                totals[name] = totals.get(name, 0.0) + value
            forwards = totals.get("forwards", 0.0)
            yield dataclasses.replace(
                frame,
                canvases=(*spent, *frame.canvases),
                tokens_per_forward=totals.get("tokens", 0.0) / forwards if forwards else frame.tokens_per_forward,
                ttff_s=ttff,
                seconds=time.perf_counter() - started,
                stats=totals,
            )


async def variants_in_turn(
    request: GenerationRequest, n: int, stream: Callable[[GenerationRequest], AsyncIterator[Frame]]
) -> AsyncIterator[Frame]:
    """``n`` variants of a request with gaps, one after another (seeds ``seed`` .. ``seed + n - 1``); frames carry
    ``variant`` 0..n-1."""
    for variant in range(n):
        async with aclosing(stream(dataclasses.replace(request, seed=request.seed + variant))) as frames:
            async for frame in frames:
                yield dataclasses.replace(frame, variant=variant)
