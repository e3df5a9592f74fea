"""Openings with gaps: fixed text a page is made of, with short holes in it that the model fills.

A request's ``opening`` is pinned word for word at the start of the page (engine.generation.plan_batch). Pins hold
positions, and the text the model writes in a hole has no length known beforehand, so pins alone can fix only a
prefix. With ``gaps`` the opening goes on after holes: ``opening``, a hole, ``gaps[0]``, a hole, ``gaps[1]``, and
so on. Before the page is denoised, each hole is written in the model's next-token mode (both families are causal
LMs too: engine.autoregressive), sampled at GAP_TEMPERATURE, from the prompt and the text decided so far, until the
model ends the line, opens a tag or has written GAP_TOKENS tokens; the whole opening, holes filled, is then pinned
as any opening is.

A hole holds a value, a name or a short phrase: a few tokens, which one token at a time writes whole and cheaply,
where a denoised canvas settles on a length first and often cuts a value short (``1`` for ``1920 × 1080``,
docs/model.md, session 35).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from transformers import Cache

from engine.frames import EngineError, Frame, GenerationRequest, StepFrame
from engine.generation import canvases, check_fits, check_length
from engine.loading import LoadedModel
from engine.streaming import GenerationCancelled

GAP_TOKENS = 24  # the most tokens a hole may hold
# A hole's tokens are sampled at this temperature. The checkpoint's final one (0.2 for the shipped model) wrote the
# same values at every seed, so a page's versions and variations hardly differed; 0.7 varies them and keeps them the
# corpus's (docs/model.md, session 35).
GAP_TEMPERATURE = 0.7
_ENDS = ("<", "\n")  # where the model's text in a hole stops: a tag (the fixed text's own) or a new line


def _in_word(character: str) -> bool:
    return character.isalnum() or character in "-'’"


def hole_text(written: str, tokens: int, count: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> str:
    """What a hole keeps of the text the model wrote after it: up to the first tag or line end, at most ``tokens``
    tokens, without the spaces at its ends. Text cut at ``tokens`` ends at its last whole word, where it has more
    than one (`Serves: 1. To make potato-` read as a hole cut short: a hackathon team's walkthrough), and without a
    comma, colon or dash left hanging."""
    cut = min((i for i in (written.find(end) for end in _ENDS) if i >= 0), default=len(written))
    text = written[:cut]
    ids = count(text)
    if len(ids) > tokens:
        kept = decode(ids[:tokens])
        rest = text[len(kept) :] if text.startswith(kept) else ""  # a decoding that is no prefix: cut as it is
        if _in_word(rest[:1]) and _in_word(kept[-1:]) and len(kept.split()) > 1:
            kept = kept.rsplit(None, 1)[0]
        text = kept.rstrip().rstrip(",;:-–—")
    return text.strip()


def fits_with_gaps(loaded: LoadedModel, request: GenerationRequest) -> bool:
    """Whether the request fits the model with every hole at its longest."""
    try:
        check_fits_with_gaps(loaded, request)
    except (EngineError, TypeError):
        return False
    return True


def check_fits_with_gaps(loaded: LoadedModel, request: GenerationRequest) -> None:
    """Raise EngineError saying why the request, every hole at its longest, is too long for the model."""
    if not request.gaps:
        return check_fits(loaded, request)
    whole = request.opening + "".join(request.gaps)
    budget = canvases(loaded, request) * loaded.canvas_length
    room = len(loaded.tokenizer.encode(whole, add_special_tokens=False)) + GAP_TOKENS * len(request.gaps)
    if room >= budget:
        raise EngineError(
            f"the opening and its {len(request.gaps)} gaps take up to {room} tokens ({GAP_TOKENS} a gap), which"
            f" leaves no room in the page's {budget} tokens; shorten the opening or raise max_tokens"
        )
    return check_fits(loaded, dataclasses.replace(request, opening=whole, gaps=()))


def fill_gaps(
    loaded: LoadedModel,
    request: GenerationRequest,
    emit: Callable[[Frame], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    variant: int = 0,
) -> GenerationRequest:
    """``request`` with its holes written: its opening is the whole fixed text with the model's text in each hole,
    and it has no gaps left. ``emit`` gets a StepFrame of the page so far after each hole. Runs in the calling
    thread; raises GenerationCancelled once ``cancelled()`` turns true."""
    if not request.gaps:
        return request
    tokenizer, length = loaded.tokenizer, loaded.canvas_length
    budget = canvases(loaded, request) * length
    prompt = loaded.denoiser.encode_prompt(request.prompt)
    temperature = GAP_TEMPERATURE
    generator = torch.Generator(device=loaded.device).manual_seed(request.seed)
    decided = request.opening
    cache = loaded.denoiser.new_cache()  # the prompt and the page so far, read once: each hole goes on from it
    unread = prompt + tokenizer.encode(decided, add_special_tokens=False)
    for index, after in enumerate(request.gaps):
        before = len(tokenizer.encode(decided, add_special_tokens=False))
        if before + GAP_TOKENS >= budget:
            raise EngineError(
                f"the opening's text before gap {index + 1} is {before} tokens, which leaves no room for the "
                f"gap in the page's {budget} tokens; shorten the opening or raise the page's tokens"
            )
        check_length(loaded, len(prompt), before + GAP_TOKENS)
        hole, spare, spaced = _write_hole(loaded, unread, cache, temperature, generator, cancelled)
        if spaced and hole and decided[-1:] not in ("", ">") and not decided[-1:].isspace():
            hole = " " + hole  # the space the model wrote after a word (`is` + ` a data structure`), kept
        decided += hole + after
        try:
            cache.crop(-spare)  # back to the page so far: the hole keeps less than the model wrote
            unread = tokenizer.encode(hole + after, add_special_tokens=False)
        except (RuntimeError, ValueError):  # a sliding-window layer past its window keeps no past to go back to
            cache = loaded.denoiser.new_cache()
            unread = prompt + tokenizer.encode(decided, add_special_tokens=False)
        if emit is not None:
            written = len(tokenizer.encode(hole, add_special_tokens=False))
            emit(StepFrame(before // length, index + 1, decided, written, 0.0, variant))
    return dataclasses.replace(request, opening=decided, gaps=())


def _write_hole(
    loaded: LoadedModel,
    unread: list[int],
    cache: Cache,
    temperature: float,
    generator: torch.Generator,
    cancelled: Callable[[], bool],
) -> tuple[str, int, bool]:
    """The text the model writes after the ``cache`` and the ``unread`` tokens, token by token, cut as a hole keeps
    it; how many of its tokens the cache holds after the unread ones; and whether the model began it with a space."""
    denoiser, tokenizer = loaded.denoiser, loaded.tokenizer
    next_input = torch.tensor([unread], dtype=torch.long, device=loaded.device)  # (1, T), then (1, 1)
    written: list[int] = []
    fed = 0  # of the written tokens, those the model has read (each is read as the input of the next call)
    with torch.inference_mode():
        for _ in range(GAP_TOKENS + 1):
            if cancelled():
                raise GenerationCancelled
            logits = denoiser.next_token_logits(next_input, cache) / temperature  # (1, V)
            fed = len(written)
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            next_input = torch.multinomial(probs, 1, generator=generator)  # (1, 1)
            token = int(next_input)
            if token == denoiser.eos_id:
                break
            written.append(token)
            if any(end in tokenizer.decode(written) for end in _ENDS):
                break
    text: str = tokenizer.decode(written, skip_special_tokens=True)
    kept = hole_text(text, GAP_TOKENS, lambda t: list(tokenizer.encode(t, add_special_tokens=False)), tokenizer.decode)
    # every written token the model read (not the last one unless an end of text followed it); a space first, as
    # decoded or as the token's own mark (a SentencePiece tokenizer's decode drops the ▁ a text starts with)
    first = str(tokenizer.convert_ids_to_tokens(written[0])) if written else ""
    return kept, fed, text[:1].isspace() or first.startswith(("▁", "Ġ"))
