"""genui's block-diffusion loop: one loop for every denoiser family (engine.gemma, engine.causal).

The prompt is read once into the denoiser's KV cache. Then, canvas by canvas:

- the canvas starts as uniform random tokens, or as given (openings and infill pin tokens in place, over one
  canvas or several; a canvas pinned whole is taken as it is);
- each denoising step is one denoiser forward that reads the cache and sees the canvas both ways; its logits go
  through the pins and the temperature schedule, a token is sampled at every position, the lowest-entropy samples
  are accepted under the entropy bound and every other position is re-noised with a fresh random token;
- the canvas stops early when its argmax has held still for ``stability_threshold`` steps and its mean entropy is
  below ``confidence_threshold`` (adaptive stopping), else after ``max_steps``;
- the canvas's final tokens are the argmax of the last step's logits; they are written to the cache and the next
  canvas begins, until every row has written its end-of-text or ``max_canvases`` are done. With ``min_distinct``
  set, a canvas of fewer distinct tokens (a loop: ``linuxlinuxlinux``) is an end-of-text instead, and with
  ``max_repeat`` set, a run of that many copies of one token ends the page where it starts; with ``cap_runs`` set,
  no position may take a token that would stretch a run of one token, or two in turn, that the step before kept
  past that many tokens (``e.g.g.g.g``) (genui's settings; ``generate()`` has none of them).

This is the algorithm of transformers' DiffusionGemma ``generate()``, step for step and draw for draw: with the same
seed and settings it returns the same tokens (tests/test_engine_denoise.py checks it on a tiny model), except that
in a batch a row that has ended its page counts as stopped in every later canvas (``generate()`` denoises its
padding on, holding the batch's canvas to its step cap). Randomness comes only from the ``torch.Generator`` passed
in.

A family that can narrow its prefix to some rows (``Denoiser``'s optional ``narrow``) has each step's forward run
over the rows still denoising only; the sampling still runs over every row, the others on flat logits, so each
row's draws are those it would get with every row computed.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import Cache, RepetitionPenaltyLogitsProcessor

from engine.frames import MIN_TEMPERATURE, EngineError


class Denoiser(Protocol):
    """A model family as the loop sees it: token ids in, logits out; the KV cache is the family's business.

    Two optional methods: ``denoise_changed(prefix, canvas, neighbours)``, a step over the changed positions alone
    (``refresh_every``), and ``narrow(prefix, rows)``, the prefix of rows ``rows`` (R,) in that order, sharing
    nothing a step or a commit changes; with it the loop runs a step's forward over the rows still denoising only,
    not over those that stopped or ended their page (their results are thrown away). An optional attribute,
    ``other_ends``: token ids that end a page as ``eos_id`` does (a Gemma's ``<end_of_turn>``)."""

    canvas_length: int
    vocab_size: int
    eos_id: int
    pad_id: int
    max_positions: int

    def prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        """Read the (left-padded) prompts (B, T); returns the prefix state the other calls take."""
        ...

    def denoise(self, prefix: Any, canvas: torch.Tensor, self_conditioning: torch.Tensor | None) -> torch.Tensor:
        """Logits (B, C, V) for a canvas (B, C); reads the prefix, never changes it."""
        ...

    def commit(self, prefix: Any, canvas: torch.Tensor) -> None:
        """Append a finished canvas (B, C) to the prefix."""
        ...


def cache_rows(cache: Cache, rows: torch.Tensor) -> Cache:
    """A copy of ``cache`` that holds rows ``rows`` (R,) only (transformers' ``batch_select_indices``, on copies of
    the cache and its layers: it replaces a layer's tensors, never writes into them)."""
    narrowed = copy.copy(cache)
    narrowed.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in narrowed.layers:  # batch_select_indices skips a layer initialised but empty (one-token prompts)
        if getattr(layer, "is_initialized", False):
            layer.keys, layer.values = layer.keys[rows], layer.values[rows]
    return narrowed


# The most denoising steps a canvas may take: the shipped model takes 12 at most, DiffusionGemma's default is 48.
# More holds the worker, and every request queued behind it, for minutes to no purpose.
MAX_STEPS = 1024


@dataclass(frozen=True, slots=True)
class DenoiseSettings:
    """How one batch is denoised; engine.loading fills unset request fields from the checkpoint's defaults."""

    max_canvases: int
    max_steps: int  # denoising steps per canvas at most
    entropy_bound: float  # how much summed entropy one step may accept
    t_max: float | None = None  # temperature at the first step (None: no temperature schedule)
    t_min: float | None = None  # temperature at the last step
    stability_threshold: int | None = None  # adaptive stop: steps the argmax must hold still (None: no adaptive stop)
    confidence_threshold: float | None = None  # adaptive stop: mean token entropy below this
    stop_at_eos: bool = True
    top_k: int = 0  # sample among the k likeliest tokens only (cheaper than the whole vocabulary); 0: all
    order: str = "entropy"  # which samples a step accepts first: see ORDERS
    stable_share: float = 1.0  # adaptive stop: the share of positions whose argmax must hold still (1: all of them)
    neighbour_repeat_penalty: float = 1.0  # each position's left neighbour's token made less likely (1: off)
    settle_after: int = 0  # a position accepted with one token this many steps in a row keeps it (0: never)
    min_distinct: int = 0  # a finished canvas with fewer distinct tokens is a loop: dropped, its row ends (0: off)
    max_repeat: int = 0  # a finished canvas with a run of this many of one token ends its row where it starts (0: off)
    cap_runs: int = 0  # no token may stretch one token, or two in turn, past this many tokens (0: off; else 3 or more)
    refresh_every: int = 0  # a whole-canvas step every this many; between them only changed positions (0: all whole)
    refresh_neighbours: int = 2  # a step between refreshes also recomputes this many positions each side of a change
    drop_doubled_words: bool = False  # a canvas's text leaves out a word token its left neighbour wrote too
    end_last: bool = False  # a sampled end of text is accepted only with every position before it in its canvas

    def accept(self, entropy: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        """The positions (B, C) bool a step keeps, from each position's sample entropy (B, C) and the positions the
        step before kept (B, C) bool."""
        return ORDERS[self.order](entropy, self.entropy_bound, before)

    def check(self) -> None:
        """Raise EngineError for settings the loop cannot run, naming the setting."""
        _check_types(self)
        if not isinstance(self.max_canvases, int) or self.max_canvases < 1:
            raise EngineError(f"max_canvases must be a positive integer, got {self.max_canvases!r}")
        if not isinstance(self.max_steps, int) or not 1 <= self.max_steps <= MAX_STEPS:
            raise EngineError(f"max_steps must be an integer from 1 to {MAX_STEPS}, got {self.max_steps!r}")
        if not self.entropy_bound > 0:
            raise EngineError(f"entropy_bound must be above 0, got {self.entropy_bound!r}")
        if (self.t_min is None) != (self.t_max is None):
            raise EngineError("set both t_min and t_max, or neither")
        if self.t_min is not None and self.t_max is not None and not 0 <= self.t_min < self.t_max:
            raise EngineError(f"temperatures need 0 <= t_min < t_max, got t_min={self.t_min} t_max={self.t_max}")
        if self.t_max is not None and not MIN_TEMPERATURE <= self.t_max < math.inf:
            # logits divided by less overflow float32: every probability NaN
            raise EngineError(f"t_max must be at least {MIN_TEMPERATURE} and finite, got {self.t_max}")
        if (self.stability_threshold is None) != (self.confidence_threshold is None):
            raise EngineError("set both stability_threshold and confidence_threshold, or neither")
        stability = self.stability_threshold
        if stability is not None and (not isinstance(stability, int) or isinstance(stability, bool) or stability < 0):
            raise EngineError(f"stability_threshold must be an integer, 0 or more, got {stability!r}")
        if self.confidence_threshold is not None and not 0 <= self.confidence_threshold < math.inf:
            raise EngineError(f"confidence_threshold must be 0 or more and finite, got {self.confidence_threshold}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise EngineError(f"top_k must be 0 (the whole vocabulary) or a positive integer, got {self.top_k!r}")
        if not 0 < self.stable_share <= 1:
            raise EngineError(f"stable_share must be above 0 and at most 1, got {self.stable_share!r}")
        if not self.neighbour_repeat_penalty >= 1:
            raise EngineError(
                f"neighbour_repeat_penalty must be 1 (off) or more, got {self.neighbour_repeat_penalty!r}"
            )
        if not isinstance(self.settle_after, int) or self.settle_after < 0:
            raise EngineError(f"settle_after must be 0 (never) or a positive integer, got {self.settle_after!r}")
        if not isinstance(self.refresh_every, int) or self.refresh_every < 0:
            raise EngineError(
                f"refresh_every must be 0 (every step whole) or a count of steps, got {self.refresh_every!r}"
            )
        if not isinstance(self.refresh_neighbours, int) or self.refresh_neighbours < 0:
            raise EngineError(f"refresh_neighbours must be 0 or a count of positions, got {self.refresh_neighbours!r}")
        if not isinstance(self.min_distinct, int) or self.min_distinct < 0:
            raise EngineError(f"min_distinct must be 0 (off) or a count of tokens, got {self.min_distinct!r}")
        if not isinstance(self.max_repeat, int) or self.max_repeat < 0 or self.max_repeat == 1:
            raise EngineError(f"max_repeat must be 0 (off) or a run of 2 tokens or more, got {self.max_repeat!r}")
        if not isinstance(self.cap_runs, int) or self.cap_runs < 0 or self.cap_runs in (1, 2):
            raise EngineError(f"cap_runs must be 0 (off) or a length of 3 tokens or more, got {self.cap_runs!r}")
        if not isinstance(self.end_last, bool):
            raise EngineError(f"end_last must be true or false, got {self.end_last!r}")
        if not isinstance(self.drop_doubled_words, bool):
            raise EngineError(f"drop_doubled_words must be true or false, got {self.drop_doubled_words!r}")
        if self.order not in ORDERS:
            raise EngineError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")


_INTEGERS = (
    "max_canvases", "max_steps", "stability_threshold", "top_k", "settle_after", "min_distinct", "max_repeat",
    "cap_runs", "refresh_every", "refresh_neighbours",
)  # fmt: skip
_NUMBERS = ("entropy_bound", "t_max", "t_min", "confidence_threshold", "stable_share", "neighbour_repeat_penalty")


def _check_types(settings: DenoiseSettings) -> None:
    """Raise EngineError for a setting of the wrong type (a JSON file's "2.0", true or null), before any comparison
    would raise TypeError, or a true pass for the integer 1 (top_k true would sample greedily)."""
    optional = {"stability_threshold", "t_max", "t_min", "confidence_threshold"}
    for name in _INTEGERS + _NUMBERS:
        value = getattr(settings, name)
        if value is None and name in optional:
            continue
        kinds = (int,) if name in _INTEGERS else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            kind = "an integer" if name in _INTEGERS else "a number"
            raise EngineError(f"{name} must be {kind}, got {value!r}")
    if not isinstance(settings.order, str):
        raise EngineError(f"order must be one of {', '.join(ORDERS)}, got {settings.order!r}")
    for name in ("stop_at_eos", "end_last", "drop_doubled_words"):
        if not isinstance(getattr(settings, name), bool):
            raise EngineError(f"{name} must be true or false, got {getattr(settings, name)!r}")


@dataclass(frozen=True, slots=True)
class Pins:
    """Positions held at given tokens while the rest denoises (openings, infill), from the first canvas on: as many
    canvases as ``tokens`` is long. A canvas pinned whole, in every row, is taken as it is, without a step."""

    tokens: torch.Tensor  # (B, K*C) the starting canvases: pinned tokens in place, noise elsewhere
    keep: torch.Tensor  # (B, K*C) bool

    def canvas(self, index: int, length: int) -> Pins | None:
        """The pins of canvas ``index``, None past the last pinned canvas."""
        start = index * length
        if start >= self.tokens.shape[1]:
            return None
        return Pins(self.tokens[:, start : start + length], self.keep[:, start : start + length])


class Observer(Protocol):
    def step(self, draft: torch.Tensor, accepted: torch.Tensor, entropy: torch.Tensor, active: torch.Tensor) -> None:
        """After each step: the argmax draft (B, C), accepted positions (B,), mean entropy (B,), and which rows
        were still denoising before this step (B,) bool. May raise to abandon the batch."""
        ...

    def canvas(self, tokens: torch.Tensor) -> None:
        """After each canvas: its final tokens (B, C), padded after the end-of-text."""
        ...


# ---------------------------------------------------------------------------------------------------------------
# The sampler's pieces


def temperature(settings: DenoiseSettings, remaining: int) -> float | None:
    """Linear from t_max at the first step down by (t_max - t_min) / max_steps a step, as generate() schedules it:
    the last step runs one such step above t_min. ``remaining`` counts down from max_steps to 1."""
    if settings.t_min is None or settings.t_max is None:
        return None
    return settings.t_min + (settings.t_max - settings.t_min) * remaining / settings.max_steps


def entropy_bound_accept(entropy: torch.Tensor, bound: float, before: torch.Tensor | None = None) -> torch.Tensor:
    """Accept the k lowest-entropy positions of each row such that sum(entropy) - max(entropy) <= bound: a bound on
    the mutual information of tokens sampled in parallel (the EB-sampler, arXiv:2505.24857). (B, C) -> bool."""
    ordered, order = torch.sort(entropy, dim=-1)
    chosen = torch.cumsum(ordered, dim=-1) - ordered <= bound
    return torch.zeros_like(chosen).scatter(-1, order, chosen)


def left_to_right_accept(entropy: torch.Tensor, bound: float, before: torch.Tensor | None = None) -> torch.Tensor:
    """Accept each row's longest run from the left whose summed entropy before its last position is within the
    bound; the first position is always accepted. (B, C) -> bool."""
    return torch.cumsum(entropy, dim=-1) - entropy <= bound


def spread_accept(entropy: torch.Tensor, bound: float, before: torch.Tensor) -> torch.Tensor:
    """The EB-sampler's choice, except that two neighbours never join the accepted set in the same step: a position
    the step before did not keep is accepted only if no such neighbour is surer. Neighbours sampled at once each
    from their own marginal are what writes a token twice ("like like", "<p><p>"). (B, C) -> bool."""
    chosen = entropy_bound_accept(entropy, bound)
    new = chosen & ~before
    joining = torch.where(new, entropy, torch.full_like(entropy, float("inf")))
    left = torch.nn.functional.pad(joining[:, :-1], (1, 0), value=float("inf"))
    right = torch.nn.functional.pad(joining[:, 1:], (0, 1), value=float("inf"))
    return (chosen & before) | (new & (joining <= left) & (joining <= right))


ORDERS = {
    # the EB-sampler's: the lowest-entropy samples anywhere in the canvas (DiffusionGemma's generate())
    "entropy": entropy_bound_accept,
    # the canvas's start first: the longest run from its left end under the bound, so every accepted token has
    # its left neighbours accepted with it (semi-autoregressive, as block-diffusion models adapted from causal LMs
    # decode: Fast-dLLM v2, SDAR)
    "left_to_right": left_to_right_accept,
    # the EB-sampler's, spread out: no two neighbours join in one step (as dilated unmasking schedules do)
    "spread": spread_accept,
}


def hold_back_ends(accepted: torch.Tensor, sampled: torch.Tensor, eos_id: int) -> torch.Tensor:
    """The accepted positions (B, C) bool less each sampled end of text with a position before it not accepted. The
    end of a page is among the surest tokens of its last canvas; accepted first, it fixes where the page ends before
    the text that should decide it is written. Held back, it is accepted with the last of the text."""
    gap_before = torch.nn.functional.pad((~accepted).long().cumsum(dim=-1)[:, :-1], (1, 0)) > 0
    return accepted & ~((sampled == eos_id) & gap_before)


def penalise_neighbour_repeats(
    logits: torch.Tensor, canvas: torch.Tensor, kept: torch.Tensor, before: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Logits (B, C, V) with each position's left neighbour's token made less likely by transformers'
    RepetitionPenaltyLogitsProcessor: the token of the canvas (B, C) the step read where the step before kept it
    (``kept``, B x C bool; the rest is noise), and ``before`` (B,), the token before the canvas, for its first
    position. Neighbours are sampled each from its own marginal, and a token next to itself (``like like``,
    ``</a></a>``) is what a denoiser keeps writing; in text it is rare (0.2% of the sites' corpus tokens, nearly all
    digits)."""
    b, c, v = logits.shape
    known = torch.where(kept, canvas, v)  # the processor leaves ids past the vocabulary alone
    left = torch.cat([before[:, None], known[:, :-1]], dim=-1).reshape(b * c, 1)
    return RepetitionPenaltyLogitsProcessor(penalty)(left, logits.reshape(b * c, v)).view(b, c, v)


def doubled(canvas: torch.Tensor, before: torch.Tensor, eos_id: int) -> torch.Tensor:
    """The positions (B, C) bool of a canvas (B, C) holding the same token as a neighbour, end-of-text (the padding
    after a page's end) aside; ``before`` (B,) is the token before the canvas, the first position's left neighbour.
    Such a position never settles: a token written twice (`HashHash`, `table table`, `</</h1`) is the denoiser's
    commonest mistake, and only self-correction, which settling stops, undoes it."""
    left = torch.cat([before[:, None], canvas[:, :-1]], dim=-1)
    right = torch.nn.functional.pad(canvas[:, :-1] == canvas[:, 1:], (0, 1), value=False)
    return ((canvas == left) | right) & (canvas != eos_id)


def capped(known: torch.Tensor, cap: int, free: torch.Tensor) -> torch.Tensor:
    """The tokens (B, C, 2) each canvas position may not take, -1 for none, from ``known`` (B, W + C): the ``cap``
    tokens before the canvas, then the canvas, with a negative id (each a different one) wherever a token is not
    known yet. A position's left ``cap`` tokens that are one token over and over (period 1) or two in turn (period
    2) bar the token that would stretch the run past ``cap``; tokens ``free`` (V,) bool may run, and so may a pair
    with one of them in it (digits: `10.0.0.0`; the end of text and the padding after it). A denoiser that loses
    its way writes such runs (`e.g.g.g.g`, `~ ~ ~ ~`, `, parallel, parallel, parallel`) over a hundred times as
    often as the sites' own pages hold them."""
    windows = known.unfold(1, cap, 1)[:, : known.shape[1] - cap]  # (B, C, cap): the tokens left of each position
    last, second = windows[..., -1], windows[..., -2]
    once = (windows == last[..., None]).all(dim=-1)
    twice = (windows[..., 2:] == windows[..., :-2]).all(dim=-1) & (last != second) & ~free[last.clamp(min=0)]
    barred = torch.stack([torch.where(once, last, -1), torch.where(twice, second, -1)], dim=-1)
    return torch.where((barred >= 0) & ~free[barred.clamp(min=0)], barred, -1)


def bar(logits: torch.Tensor, barred: torch.Tensor) -> torch.Tensor:
    """Logits (B, C, V) with each position's barred tokens (B, C, k; -1: none) at the loop's floor."""
    hits = torch.zeros(logits.shape, dtype=torch.uint8, device=logits.device)
    hits.scatter_add_(-1, barred.clamp(min=0), (barred >= 0).to(torch.uint8))
    return logits.masked_fill(hits > 0, _NEVER)


def sample(probs: torch.Tensor, top_k: int, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per position from probs (B, C, V), and each position's likeliest token (both B, C); top_k > 0
    draws among the k likeliest tokens only, and the likeliest comes with them at no cost."""
    b, c, v = probs.shape
    if top_k and top_k < v:
        top, index = probs.topk(top_k, dim=-1)  # (B, C, k), likeliest first
        choice = torch.multinomial(top.view(-1, top_k), 1, generator=generator).view(b, c, 1)
        return index.gather(-1, choice).squeeze(-1), index[..., 0]
    return torch.multinomial(probs.view(-1, v), 1, generator=generator).view(b, c), probs.argmax(dim=-1)


def distribution(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each position's logits (..., V) in float32, shifted so the largest is 0 and floored, and their softmax.

    The floor keeps every probability a normal float32. At the loop's low temperatures up to 39% of a 49k
    vocabulary's probabilities fall below float32's smallest normal number, and a CPU computes on such subnormal
    numbers many times slower: on an Intel Xeon the sampler took 19.7 ms a step of the bench page with them and
    9.3 ms with the floor (docs/benchmarks.md, session 49). A token the floor lifts had a probability under about
    1e-32. The probabilities above 1e-30 are bit for bit the softmax's and an entropy moves by under 1e-25, but
    the order topk gives tokens of exactly equal probability (common with bfloat16 logits) can change, so a draw
    among such ties may land on another of them."""
    shifted = logits.float()
    shifted = shifted - shifted.amax(dim=-1, keepdim=True)
    shifted.clamp_(min=math.log(torch.finfo(torch.float32).tiny * shifted.shape[-1]) + 1.0)
    return shifted, torch.softmax(shifted, dim=-1)


def token_entropy(shifted: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Each position's entropy (...,) from ``distribution``'s shifted logits and their softmax (..., V), without a
    logarithm over the vocabulary: log p = shifted - log Z, and the likeliest token's p is 1/Z, so
    H = -sum(p * shifted) - log(max p). On a CPU this is several times cheaper than summing
    ``torch.special.entr(probs)`` (whose log is slow on the many tiny probabilities of a 49k vocabulary), and
    closer to a float64 reference."""
    return (-(shifted * probs).sum(dim=-1) - probs.amax(dim=-1).log()).clamp_(min=0)


# Positions whose logits ``draw`` takes through the vocabulary at a time on a CPU. Over a whole canvas (64 rows of a
# 49k vocabulary, 12.6 MB in float32) each of its passes made a tensor of that size, which glibc's allocator gives
# back to the system when freed and the CPU then faults in again page by page: about 10,000 page faults a step.
# Eight rows (1.6 MB) are reused from memory the process already holds, and stay in the CPU's caches between passes.
# The bench page was written 11-13% faster, its tokens bit for bit the same (docs/benchmarks.md, session 80). A GPU
# takes every row at once.
DRAW_ROWS = 8


def draw(
    logits: torch.Tensor, heat: float | None, top_k: int, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each position's sampled token, likeliest token and entropy (each B, C) from its logits (B, C, V) divided by
    the temperature ``heat`` (None: 1): ``distribution``, ``sample`` and ``token_entropy`` taken a few rows at a
    time, so that each row's numbers, and so the draws of the same generator, are bit for bit theirs over the whole
    tensor (each works row by row), at a fraction of the memory traffic."""
    v = logits.shape[-1]
    if not top_k or top_k >= v:  # a draw over the whole vocabulary needs each row's probabilities whole anyway
        shifted, probs = distribution(logits if heat is None else logits / heat)
        sampled, likeliest = sample(probs, top_k, generator)
        return sampled, likeliest, token_entropy(shifted, probs)
    flat = logits.reshape(-1, v)
    n, device = flat.shape[0], logits.device
    weights = torch.empty((n, top_k), dtype=torch.float32, device=device)
    index = torch.empty((n, top_k), dtype=torch.long, device=device)
    entropy = torch.empty(n, dtype=torch.float32, device=device)
    step = max(DRAW_ROWS, 2) if device.type == "cpu" else max(n, 1)
    bounds = [*range(0, n, step), n]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
        del bounds[-2]  # torch sums a lone row in another order (two passes): it joins the rows before it
    for start, end in itertools.pairwise(bounds):
        rows = slice(start, end)
        shifted, probs = distribution(flat[rows] if heat is None else flat[rows] / heat)
        top = probs.topk(top_k, dim=-1)  # likeliest first
        weights[rows], index[rows] = top.values, top.indices
        entropy[rows] = token_entropy(shifted, probs)
    choice = torch.multinomial(weights, 1, generator=generator)
    shape = logits.shape[:-1]
    return index.gather(-1, choice).view(shape), index[:, 0].view(shape), entropy.view(shape)


def looping(canvas: torch.Tensor, min_distinct: int, eos_id: int) -> torch.Tensor:
    """The rows (B,) bool of a finished canvas (B, C) that loop: fewer than ``min_distinct`` distinct tokens and no
    end-of-text (a canvas that ends its page is mostly padding). A denoiser that has lost its way writes one token or
    two over and over (`linuxlinuxlinux`, often inside an attribute that never closes); every canvas after such a one
    loops too, and the sanitiser would drop most of it. The loop ends the page instead, before that canvas."""
    ordered = canvas.sort(dim=-1).values
    distinct = 1 + (ordered[:, 1:] != ordered[:, :-1]).sum(dim=-1)
    return (distinct < min_distinct) & ~(canvas == eos_id).any(dim=-1)


def past_pins(pinned: Pins | None, b: int, c: int, device: torch.device) -> torch.Tensor:
    """One past each row's last pinned position in a canvas (B,) long: 0 for a row with no pin in it."""
    if pinned is None:
        return torch.zeros(b, dtype=torch.long, device=device)
    last = c - pinned.keep.flip(-1).long().argmax(-1)
    return torch.where(pinned.keep.any(-1), last, 0)


def repeat_start(canvas: torch.Tensor, max_repeat: int) -> torch.Tensor:
    """Where the first run of ``max_repeat`` copies of one token starts in each row of a finished canvas (B, C): a
    (B,) long, C for a row with no such run. `( ( ( ( ...` for fifty positions is a loop inside a canvas that still
    holds other tokens; the page ends where it starts, and the text before it stays."""
    length = canvas.shape[-1]
    if length < max_repeat:
        return torch.full(canvas.shape[:1], length, dtype=torch.long, device=canvas.device)
    same = canvas[:, 1:] == canvas[:, :-1]  # (B, C-1): a position repeats the one before it
    runs = same.unfold(1, max_repeat - 1, 1).all(dim=-1)  # (B, C-R+1): a run of R starts here
    return torch.where(runs.any(dim=-1), runs.float().argmax(dim=-1), length)


class StableAndConfident:
    """Adaptive stopping: a row is done when its argmax canvas equals each of the last ``stability`` ones and its
    mean token entropy is below ``confidence``."""

    def __init__(self, stability: int, confidence: float, share: float = 1.0) -> None:
        self.stability = stability
        self.confidence = confidence
        self.share = share  # below 1: that share of the positions holding still is enough
        self.history: torch.Tensor | None = None  # (stability, B, C)

    def __call__(self, argmax: torch.Tensor, mean_entropy: torch.Tensor) -> torch.Tensor:
        if self.stability == 0:
            stable = torch.ones(argmax.shape[0], dtype=torch.bool, device=argmax.device)
        else:
            if self.history is None:
                self.history = torch.full((self.stability, *argmax.shape), -1, dtype=argmax.dtype, device=argmax.device)
            held = (self.history == argmax[None]).float().mean(dim=-1)  # (stability, B): share unchanged
            stable = (held >= self.share).all(dim=0)
            self.history = torch.cat([self.history[1:], argmax[None]])
        return stable & (mean_entropy < self.confidence)


# ---------------------------------------------------------------------------------------------------------------
# The loop


def _noise(shape: tuple[int, int], vocab: int, device: torch.device, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randint(0, vocab, shape, device=device, generator=generator)


def denoise(
    denoiser: Denoiser,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    settings: DenoiseSettings,
    generator: torch.Generator | None,
    observer: Observer | None = None,
    pins: Pins | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    free: torch.Tensor | None = None,
    gone: Callable[[], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Write up to ``max_canvases`` canvases after each prompt of ``input_ids`` (B, T); returns the new tokens
    (B, K*C), with the padding token after a row's end-of-text (when ``stop_at_eos``). ``free`` (V,) bool: the
    tokens ``cap_runs`` lets run (the end of text and the padding always may). ``gone``, asked before each step:
    the rows (B,) bool nobody waits for any more (once gone, always gone); each ends there, its canvas and the rest
    of its tokens the padding token."""
    settings.check()
    changed_only = getattr(denoiser, "denoise_changed", None)  # a step over the changed positions alone
    if settings.refresh_every and changed_only is None:
        raise EngineError(
            f"refresh_every needs a denoiser that can recompute part of a canvas; {type(denoiser).__name__} cannot"
        )
    b, device = input_ids.shape[0], input_ids.device
    c, vocab = denoiser.canvas_length, denoiser.vocab_size
    others = getattr(denoiser, "other_ends", ())  # a model's ends besides ``eos_id`` (Gemma's <end_of_turn>)
    ends = torch.tensor(others, device=device) if others else None
    narrow: Callable[[Any, torch.Tensor], Any] | None = getattr(denoiser, "narrow", None)
    conditioned = getattr(denoiser, "self_conditioning", True)  # reads each step's logits in the next (a Gemma)
    with torch.inference_mode():
        prefix = denoiser.prefill(input_ids, attention_mask)
        live = torch.arange(b, device=device)  # the rows ``prefix`` holds: a row that ended its page leaves it
        finished = torch.zeros(b, dtype=torch.bool, device=device)
        canvases: list[torch.Tensor] = []
        before = input_ids[:, -1]  # the token before the canvas (prompts are left-padded)
        if settings.cap_runs:
            free = torch.zeros(vocab, dtype=torch.bool, device=device) if free is None else free.to(device).clone()
            free[[denoiser.eos_id, denoiser.pad_id]] = True
            unknown = -1 - torch.arange(settings.cap_runs + c, device=device).expand(b, -1)  # never equal
            tail = torch.cat([unknown[:, : settings.cap_runs], input_ids], dim=-1)[:, -settings.cap_runs :]
        for index in range(settings.max_canvases):
            pinned = pins.canvas(index, c) if pins is not None else None
            current = pinned.tokens if pinned is not None else _noise((b, c), vocab, device, generator)
            given = pinned is not None and bool(pinned.keep.all())  # pinned whole: nothing to denoise
            argmax, self_conditioning = current, None
            stopper = (
                # more steps of history than a canvas has steps never stops it either, and would only take memory
                StableAndConfident(
                    min(settings.stability_threshold, settings.max_steps),
                    settings.confidence_threshold,
                    settings.stable_share,
                )
                if settings.stability_threshold is not None and settings.confidence_threshold is not None
                else None
            )
            # a row that has ended its page writes padding from here on: it holds the batch back no longer (without
            # ``stop_at_eos`` only a row nobody waits for ends before the last canvas)
            stopped = finished.clone()
            accepted = torch.zeros((b, c), dtype=torch.bool, device=device)
            streak = torch.zeros((b, c), dtype=torch.long, device=device)  # steps accepted with the same token
            view, rows = prefix, live  # the prefix a step reads, and its rows: those still denoising, where it narrows
            for remaining in range(0 if given else settings.max_steps, 0, -1):
                if cancelled():
                    raise GenerationCancelled
                if gone is not None:
                    left = gone().to(device)
                    stopped |= left
                    finished |= left
                    if bool(stopped.all()):  # the rows still denoising all left: the canvas ends here
                        break
                active = ~stopped
                step = settings.max_steps - remaining
                if narrow is not None:  # a row whose step would be thrown away (below) is left out of the forward
                    wanted = (active if stopper is not None else ~finished).nonzero().squeeze(-1)
                    if wanted.numel() < rows.numel():  # rows only ever stop, so ``wanted`` is a subset of ``rows``
                        positions = torch.searchsorted(rows, wanted)
                        if not torch.equal(rows[positions.clamp(max=rows.numel() - 1)], wanted):
                            raise EngineError("a row the loop had left out of its forwards came back")
                        view, rows = narrow(view, positions), wanted
                whole = rows.numel() == b
                inputs = current if whole else current[rows]
                if changed_only is not None and settings.refresh_every and step % settings.refresh_every:
                    logits = changed_only(view, inputs, settings.refresh_neighbours)
                else:
                    given_sc = self_conditioning if whole or self_conditioning is None else self_conditioning[rows]
                    logits = denoiser.denoise(view, inputs, given_sc)  # (B, C, V), or (R, C, V) for ``rows``
                if not whole:  # the rows left out get flat logits: what they draw is thrown away (below)
                    part = logits
                    logits = torch.zeros((b, c, part.shape[-1]), dtype=part.dtype, device=device)
                    logits[rows] = part
                if settings.neighbour_repeat_penalty != 1:
                    kept = accepted if pinned is None else accepted | pinned.keep
                    penalty = settings.neighbour_repeat_penalty
                    logits = penalise_neighbour_repeats(logits, current, kept, before, penalty)
                if settings.cap_runs and free is not None:
                    kept = accepted if pinned is None else accepted | pinned.keep
                    known = torch.cat([tail, torch.where(kept, current, unknown[:, settings.cap_runs :])], dim=-1)
                    logits = bar(logits, capped(known, settings.cap_runs, free))
                if pinned is not None:
                    logits = pin(logits, pinned)
                if settings.settle_after:
                    settled = (streak >= settings.settle_after) & ~doubled(current, before, denoiser.eos_id)
                    logits = pin(logits, Pins(current, settled))
                heat = temperature(settings, remaining)
                if heat is not None and conditioned:  # the next step reads the logits as they were sampled from
                    logits, heat = logits / heat, None
                sampled, new_argmax, entropy = draw(logits, heat, settings.top_k, generator)  # (B, C) each
                again = accepted & (sampled == current)  # kept the step before, and the same token sampled now
                accepted = settings.accept(entropy, accepted)
                if settings.end_last:
                    accepted = hold_back_ends(accepted, sampled, denoiser.eos_id)
                if pinned is not None:  # a pin is always kept, whatever the order: the next step reads it, not noise
                    accepted = accepted | pinned.keep
                streak = torch.where(accepted, torch.where(again, streak + 1, 1), 0)
                # accepted samples stay; every other position is re-noised (drawn after the samples, as generate() does)
                new_current = torch.where(accepted, sampled, _noise((b, c), vocab, device, generator))
                mean_entropy = entropy.mean(dim=-1)
                if stopper is not None:
                    if stopped.any():  # rows that stopped keep their canvas while the batch goes on
                        new_argmax = torch.where(stopped[:, None], argmax, new_argmax)
                        new_current = torch.where(stopped[:, None], current, new_current)
                        if self_conditioning is not None:
                            logits = torch.where(stopped[:, None, None], self_conditioning.to(logits.dtype), logits)
                    stopped |= stopper(new_argmax, mean_entropy)
                if settings.settle_after:  # nothing left that may change
                    held = (streak >= settings.settle_after) & ~doubled(new_current, before, denoiser.eos_id)
                    stopped |= held.all(dim=-1)
                current, argmax = new_current, new_argmax
                self_conditioning = logits if conditioned else None
                if observer is not None:
                    observer.step(argmax, accepted.sum(dim=-1), mean_entropy, active)
                if stopped.all():
                    break
            canvas = argmax.clone()
            if ends is not None:  # another of the model's ends (<end_of_turn>) ends the page as its first does
                canvas[torch.isin(canvas, ends)] = denoiser.eos_id
            # the loop guards end a page no earlier than past the canvas's pins: an opening stays word for word
            earliest = past_pins(pinned, b, c, device)
            if settings.min_distinct and settings.stop_at_eos and not given:
                loops = looping(canvas, settings.min_distinct, denoiser.eos_id) & (earliest < c)
                canvas[loops, earliest[loops]] = denoiser.eos_id
            if settings.max_repeat and settings.stop_at_eos and not given:
                # a run inside the pins is the opening's own text, not the model's loop
                written = (
                    canvas if pinned is None else torch.where(pinned.keep, -1 - torch.arange(c, device=device), canvas)
                )
                start = torch.maximum(repeat_start(written, settings.max_repeat), earliest)
                hit = start < canvas.shape[-1]
                canvas[hit, start[hit]] = denoiser.eos_id
            canvas[finished] = denoiser.pad_id  # without ``stop_at_eos``: the rows nobody waits for
            if settings.stop_at_eos:
                is_eos = canvas == denoiser.eos_id
                after = (is_eos.cumsum(dim=-1) - is_eos.long()) > 0  # positions past a row's first EOS
                canvas[after] = denoiser.pad_id
                finished |= is_eos.any(dim=-1)
            canvases.append(canvas)
            if observer is not None:
                observer.canvas(canvas)
            # every row has ended: its page (``stop_at_eos``), or nobody waits for it (``gone``)
            if index + 1 == settings.max_canvases or bool(finished.all()):
                break
            if narrow is not None and bool(finished[live].any()):  # their padding is never read: they leave
                ongoing = ~finished[live]
                prefix, live = narrow(prefix, ongoing.nonzero().squeeze(-1)), live[ongoing]
            denoiser.commit(prefix, canvas if live.numel() == b else canvas[live])
            before = canvas[:, -1]
            if settings.cap_runs:
                tail = torch.cat([tail, canvas], dim=-1)[:, -settings.cap_runs :]
    return torch.cat(canvases, dim=-1)


class GenerationCancelled(Exception):
    """Raised inside the loop to abandon a batch: nobody is waiting for its rows any more."""


_NEVER = -1.0e4  # far below any real logit: exp() of it is 0 even after temperature scaling


def pin(logits: torch.Tensor, pins: Pins) -> torch.Tensor:
    """All probability of each kept position on its token: zero entropy, so the sampler always accepts it, and the
    argmax holds it."""
    forced = torch.full_like(logits, _NEVER).scatter_(-1, pins.tokens.unsqueeze(-1), 0.0)
    return torch.where(pins.keep.unsqueeze(-1), forced, logits)
