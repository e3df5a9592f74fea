"""Training DiffusionGemma on a packed corpus: the block-diffusion objective plus the encoder's next-token loss.

One step, per ../shared/ARCHITECTURE.md:
- the clean sequence (prompt + every response canvas) goes through the causal encoder once, which fills the KV cache
  and gives next-token logits (the weighted causal loss: it also makes the same weights a usable AR baseline);
- every canvas of the response is corrupted at a per-example level t ~ U(eps, 1) by uniform random tokens and all
  canvases are denoised in ONE decoder call whose 4D mask lets canvas k see the clean prefix before it and itself;
- per example, self-conditioning is on with probability 1/2: a first, gradient-free decoder pass gives the logits
  fed back as ``self_conditioning_logits`` (``self_conditioning_mask`` switches it per example);
- loss = cross-entropy over all canvas positions + ``ar_weight`` * encoder next-token loss.

The same command runs on CPU or CUDA and resumes from its last checkpoint, so a run can move between machines.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import (
    DiffusionGemmaForBlockDiffusion,
    DynamicCache,
    PreTrainedTokenizerFast,
    get_cosine_schedule_with_warmup,
)
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)

from engine.config import EOS_ID, PAD_ID, SMALL, TINY, make_config
from lab.data import Packed


@dataclass
class TrainConfig:
    steps: int = 30000  # total optimiser steps of the whole run (the cosine schedule's length)
    canvas_tokens: int = 4096  # canvas tokens per step (batch = canvas_tokens // (canvases * canvas_length))
    lr: float = 1.5e-3
    warmup: int = 100
    weight_decay: float = 0.01
    clip: float = 1.0
    eps: float = 1e-3  # lowest corruption level
    ar_weight: float = 0.5  # weight of the encoder's next-token loss
    self_conditioning: float = 0.5  # share of examples trained with self-conditioning
    grounded_weight: float = 1.0  # loss weight of response tokens that only the page's own prompt predicts
    seed: int = 0


# ---------------------------------------------------------------------------------------------------------------
# Batches


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, L) clean sequence: left-padded prompt, then K canvases
    prompt_len: int  # P: length of the (padded) prompt part
    canvases: int  # K
    grounded: torch.Tensor | None = None  # (B, L) bool: response tokens found in the row's own prompt, rare ones


def common_prompt_tokens(packed: Packed, share: float = 0.02) -> np.ndarray:
    """Token ids found in more than ``share`` of all prompts: template text and the site briefs, which a page
    can copy from any prompt, so they say nothing about whether the model reads its own."""
    seen = np.concatenate([np.unique(packed.prompt(i)) for i in range(len(packed))])
    counts = np.bincount(seen.astype(np.int64))
    return np.flatnonzero(counts > share * len(packed))


def make_batch(
    packed: Packed, rows: list[int], canvas_length: int, device: torch.device, common: np.ndarray | None = None
) -> Batch:
    """With ``common`` (see common_prompt_tokens), also mark the grounded response tokens: those that occur in
    the row's own prompt and are not common to prompts (a wiki title in its <h1>, a thread's subject)."""
    prompts = [packed.prompt(i) for i in rows]
    responses = [packed.response(i) for i in rows]
    k = max(math.ceil(len(r) / canvas_length) for r in responses)
    p = max(len(x) for x in prompts)
    seq = np.full((len(rows), p + k * canvas_length), PAD_ID, dtype=np.int64)
    grounded = np.zeros(seq.shape, dtype=bool)
    for b, (pr, re) in enumerate(zip(prompts, responses, strict=True)):
        seq[b, p - len(pr) : p] = pr
        seq[b, p : p + len(re)] = re
        if common is not None:
            grounded[b, p : p + len(re)] = np.isin(re, np.setdiff1d(pr, common))
    return Batch(
        torch.from_numpy(seq).to(device), p, k, torch.from_numpy(grounded).to(device) if common is not None else None
    )


def _masks(batch: Batch, canvas_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean attention masks (True = may attend): encoder (B,1,L,L) and decoder (B,1,K*C,L+K*C)."""
    ids = batch.input_ids
    b, length = ids.shape
    device = ids.device
    real = ids != PAD_ID
    real[:, batch.prompt_len :] = True  # padding inside the response canvases is a real target token
    pos = torch.arange(length, device=device)
    causal = pos[None, :] <= pos[:, None]  # (L, L)
    enc = causal[None] & real[:, None, :]
    enc |= torch.eye(length, dtype=torch.bool, device=device)[None]  # left-pad rows see themselves: no NaN rows
    kc = batch.canvases * canvas_length
    q_canvas = torch.arange(kc, device=device) // canvas_length  # canvas index of each query
    prefix_end = batch.prompt_len + q_canvas * canvas_length  # clean keys before this canvas
    clean = (pos[None, :] < prefix_end[:, None])[None] & real[:, None, :]  # (B, KC, L)
    noisy = (q_canvas[:, None] == q_canvas[None, :])[None].expand(b, kc, kc)  # (B, KC, KC): own canvas only
    dec = torch.cat([clean, noisy], dim=-1)
    return enc[:, None], dec[:, None]


def _logits(model: DiffusionGemmaForBlockDiffusion, hidden: torch.Tensor) -> torch.Tensor:
    """The LM head with the model's final-logit softcapping, as its forward applies it."""
    cap = model.final_logit_softcapping
    logits = model.lm_head(hidden).float()
    return torch.tanh(logits / cap) * cap if cap else logits


def diffusion_loss(
    model: DiffusionGemmaForBlockDiffusion,
    batch: Batch,
    cfg: TrainConfig,
    generator: torch.Generator,
    self_conditioning: bool = True,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The training loss of one batch; also used (without self-conditioning, fixed generator) for held-out loss."""
    canvas_length = model.config.canvas_length
    vocab = model.config.text_config.vocab_size
    ids = batch.input_ids
    b, length = ids.shape
    device = ids.device
    enc_mask, dec_mask = _masks(batch, canvas_length)
    text_config = model.config.get_text_config()

    # 1. Causal encoder over the clean sequence: fills the cache the decoder reads, and gives next-token logits.
    cache = DynamicCache(config=text_config)
    enc = model.model.encoder(
        input_ids=ids,
        attention_mask={"full_attention": enc_mask, "sliding_attention": enc_mask},
        cache=cache,
        position_ids=torch.arange(length, device=device)[None],
        use_cache=True,
    )
    enc_logits = _logits(model, enc.last_hidden_state[:, :-1])  # (B, L-1, V)
    targets = ids[:, 1:].clone()
    # no next-token target at or onto left padding: a pad position would learn to predict the prompt's first token
    prompt_targets = targets[:, : batch.prompt_len - 1]
    prompt_targets[(prompt_targets == PAD_ID) | (ids[:, : batch.prompt_len - 1] == PAD_ID)] = -100
    after_eos = (ids[:, batch.prompt_len :] == EOS_ID).cumsum(-1) > 0
    after_eos &= ids[:, batch.prompt_len :] != EOS_ID  # padding after <eos>: no next-token target
    targets[:, batch.prompt_len - 1 :][after_eos] = -100
    ar_each = F.cross_entropy(enc_logits.transpose(1, 2), targets, ignore_index=-100, reduction="none")  # (B, L-1)
    ar_weights = (targets != -100).float()

    # 2. Corrupt every canvas at a per-example level t and denoise all canvases in one decoder call.
    clean = ids[:, batch.prompt_len :]  # (B, K*C)
    t = cfg.eps + (1 - cfg.eps) * torch.rand(b, 1, device=device, generator=generator)
    corrupt = torch.rand(clean.shape, device=device, generator=generator) < t
    noise = torch.randint(0, vocab, clean.shape, device=device, generator=generator)
    noisy = torch.where(corrupt, noise, clean)
    kc = clean.shape[1]
    dec_kwargs = {
        "cache": cache,
        "decoder_attention_mask": {"full_attention": dec_mask, "sliding_attention": dec_mask},
        "decoder_position_ids": torch.arange(batch.prompt_len, batch.prompt_len + kc, device=device)[None],
    }
    sc_logits = sc_mask = None
    if self_conditioning and cfg.self_conditioning > 0:
        sc_mask = torch.rand(b, device=device, generator=generator) < cfg.self_conditioning
        if sc_mask.any():
            with torch.no_grad():
                sc_logits = model(decoder_input_ids=noisy, **dec_kwargs).logits.detach()
        else:
            sc_mask = None
    out = model(
        decoder_input_ids=noisy, self_conditioning_logits=sc_logits, self_conditioning_mask=sc_mask, **dec_kwargs
    )
    dec_each = F.cross_entropy(out.logits.transpose(1, 2), clean, reduction="none")  # (B, K*C)
    dec_loss, ar_loss = dec_each.mean(), (ar_each * ar_weights).sum() / ar_weights.sum()
    if batch.grounded is not None and cfg.grounded_weight != 1.0:
        # Tokens only the prompt can predict are ~1% of a page, too few for the gradient to teach a small model to
        # read its prompt; weighting them up does (the held-out "prompt gain" measures it, docs/model.md).
        weights = 1.0 + (cfg.grounded_weight - 1.0) * batch.grounded.float()
        dec_weights, ar_weights = weights[:, batch.prompt_len :], ar_weights * weights[:, 1:]
        loss = (dec_each * dec_weights).sum() / dec_weights.sum()
        loss = loss + cfg.ar_weight * (ar_each * ar_weights).sum() / ar_weights.sum()
    else:
        loss = dec_loss + cfg.ar_weight * ar_loss
    return loss, {"loss": loss.item(), "diffusion": dec_loss.item(), "ar": ar_loss.item()}


# ---------------------------------------------------------------------------------------------------------------
# The run


class Batcher:
    """Random batches bucketed by canvas count, so a batch never pads a one-canvas page to two canvases."""

    def __init__(self, packed: Packed, canvas_length: int, canvas_tokens: int, seed: int) -> None:
        self.packed = packed
        self.canvas_length = canvas_length
        self.canvas_tokens = canvas_tokens
        canvases = np.ceil(np.diff(packed.response_offsets) / canvas_length).astype(int)
        train = ~packed.holdout
        self.buckets = {k: np.flatnonzero(train & (canvases == k)) for k in np.unique(canvases[train])}
        self.weights = np.array([len(v) * k for k, v in self.buckets.items()], dtype=float)
        self.weights /= self.weights.sum()
        self.rng = np.random.default_rng(seed)

    def next(self) -> list[int]:
        k = list(self.buckets)[self.rng.choice(len(self.buckets), p=self.weights)]
        size = max(1, self.canvas_tokens // (k * self.canvas_length))
        return [int(i) for i in self.rng.choice(self.buckets[k], size=size, replace=False)]


def generation_config() -> DiffusionGemmaGenerationConfig:
    """Defaults shipped with genui's own checkpoints (tuned for the small CPU model; see docs/model.md)."""
    return DiffusionGemmaGenerationConfig(
        max_new_tokens=512,
        max_denoising_steps=24,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=8.0),
        t_min=0.2,
        t_max=0.5,
        stability_threshold=2,
        confidence_threshold=0.2,
        bos_token_id=2,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
    )


def save_checkpoint(
    out: Path,
    model: DiffusionGemmaForBlockDiffusion,
    tokenizer: PreTrainedTokenizerFast,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    state: dict[str, object],
) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.generation_config = generation_config()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save(
        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), **state}, tmp / "training_state.pt"
    )
    if out.exists():
        old = out.with_name(out.name + ".old")
        out.rename(old)
        tmp.rename(out)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        tmp.rename(out)


@torch.no_grad()
def heldout_loss(model: DiffusionGemmaForBlockDiffusion, packed: Packed, device: torch.device, n: int = 48) -> float:
    """Mean denoising loss (no self-conditioning) over the first n held-out pages, with a fixed noise seed."""
    was_training = model.training
    model.eval()
    rows = [int(i) for i in np.flatnonzero(packed.holdout)[:n]]
    gen = torch.Generator(device=device).manual_seed(1234)
    losses = []
    for i in range(0, len(rows), 8):
        batch = make_batch(packed, rows[i : i + 8], model.config.canvas_length, device)
        _, parts = diffusion_loss(model, batch, TrainConfig(), gen, self_conditioning=False)
        losses.append(parts["diffusion"])
    model.train(was_training)
    return float(np.mean(losses))


clock = time.monotonic  # seconds; a seam for tests that need the run's sense of time to be exact
FIT_AFTER_STEPS = 20  # steps timed before --fit-schedule sets the schedule's length
FIT_SHARE = 0.92  # of --minutes, for the steps; the rest is left for checkpoints and held-out evaluation


def train(args: argparse.Namespace) -> None:
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    packed = Packed.load(args.data)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(args.tokenizer))
    cfg = TrainConfig(
        steps=args.steps or TrainConfig.steps,
        lr=args.lr,
        canvas_tokens=args.canvas_tokens,
        grounded_weight=args.grounded_weight,
    )
    state_file = args.out / "training_state.pt"
    if state_file.exists() and args.init:
        raise SystemExit(f"{args.out} already holds a run; --init only starts a new one (pick another --out)")
    if state_file.exists():
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.out, dtype=torch.float32)
        saved = torch.load(state_file, map_location="cpu", weights_only=False)
        step, tokens, seconds = saved["step"], saved["tokens"], saved["seconds"]
        cfg = TrainConfig(**saved["config"])
        if args.steps and args.steps != cfg.steps:
            # A new length re-shapes the rest of the cosine schedule from the current step on (e.g. to anneal a
            # CPU run early, or to continue it for longer on a GPU).
            print(f"schedule length {cfg.steps} -> {args.steps} steps")
            cfg.steps = args.steps
        print(f"resuming {args.out} at step {step} ({tokens / 1e6:.1f}M canvas tokens, {seconds / 3600:.2f} h)")
    elif args.init:
        # A new run (fresh optimiser, warm-up and schedule) from another checkpoint's weights: how a run moves to a
        # machine that can only take the weights along (a lent GPU takes 64 MiB of files, not the optimiser state).
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.init, dtype=torch.float32)
        saved, step, tokens, seconds = None, 0, 0, 0.0
        print(f"new run from the weights of {args.init}")
    else:
        torch.manual_seed(cfg.seed)
        model = DiffusionGemmaForBlockDiffusion(make_config(TINY if args.shape == "tiny" else SMALL))
        saved, step, tokens, seconds = None, 0, 0, 0.0
    model.to(device).train()
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    scheduler = get_cosine_schedule_with_warmup(optimizer, cfg.warmup, cfg.steps)
    if saved is not None:
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
    batcher = Batcher(packed, model.config.canvas_length, cfg.canvas_tokens, seed=cfg.seed + step)
    common = common_prompt_tokens(packed) if cfg.grounded_weight != 1.0 else None
    generator = torch.Generator(device=device).manual_seed(cfg.seed * 7919 + step)
    # bfloat16 autocast where the hardware has fast bf16 matrix units (CUDA); float32 master weights either way.
    bf16 = args.precision == "bf16" or (args.precision == "auto" and device.type == "cuda")
    precision = "bf16 autocast" if bf16 else "float32"
    print(f"{params / 1e6:.2f}M parameters on {device} ({precision}); {len(packed)} pages, step {step}/{cfg.steps}")

    def checkpoint(held: float) -> None:
        state = {
            "step": step,
            "tokens": tokens,
            "seconds": seconds,
            "config": asdict(cfg),
            "heldout": held,
            "device": str(device),
        }
        save_checkpoint(args.out, model, tokenizer, optimizer, scheduler, state)

    started = clock()
    last_save = started
    # --fit-schedule: after a few steps, set the schedule's length from the measured speed so that the cosine
    # decay ends (annealed) when --minutes run out; a lent GPU's few minutes then give a finished model.
    fit_at = step + FIT_AFTER_STEPS if args.fit_schedule else None
    first_step = step
    window: list[float] = []
    window_tokens, window_start = 0, clock()
    while step < cfg.steps and (clock() - started) < args.minutes * 60:
        batch = make_batch(packed, batcher.next(), model.config.canvas_length, device, common)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss, parts = diffusion_loss(model, batch, cfg, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        optimizer.step()
        scheduler.step()
        step += 1
        if step == fit_at:
            elapsed = clock() - started
            left = args.minutes * 60 * FIT_SHARE - elapsed
            cfg.steps = step + max(1, int(left / (elapsed / (step - first_step))))
            cfg.warmup = min(cfg.warmup, cfg.steps // 10)  # a short run still gets most of its steps past warm-up
            scheduler = get_cosine_schedule_with_warmup(optimizer, cfg.warmup, cfg.steps, last_epoch=step - 1)
            print(f"schedule fitted to {args.minutes:g} minutes: {cfg.steps} steps", flush=True)
        n = batch.input_ids.shape[0] * batch.canvases * model.config.canvas_length
        tokens += n
        window_tokens += n
        window.append(parts["diffusion"])
        if step % args.log_every == 0:
            now = clock()
            rate = window_tokens / (now - window_start)
            print(
                f"step {step:6d}/{cfg.steps} loss {parts['loss']:.3f} diffusion {np.mean(window):.3f} "
                f"ar {parts['ar']:.3f} lr {scheduler.get_last_lr()[0]:.2e} {rate:,.0f} tok/s "
                f"{tokens / 1e6:.2f}M tok",
                flush=True,
            )
            window, window_tokens, window_start = [], 0, now
        if clock() - last_save > args.save_minutes * 60:
            seconds += clock() - last_save
            last_save = clock()
            held = heldout_loss(model, packed, device)
            print(f"checkpoint step {step}: held-out diffusion loss {held:.3f}", flush=True)
            checkpoint(held)
    seconds += clock() - last_save
    held = heldout_loss(model, packed, device)
    print(f"final step {step}: held-out diffusion loss {held:.3f}; {tokens / 1e6:.2f}M tokens, {seconds / 3600:.2f} h")
    checkpoint(held)


def export(run: Path, dest: Path) -> None:
    """Copy a run's checkpoint to a shippable folder: no optimiser state, weights in bfloat16.

    bfloat16 halves what every shipped copy adds to git history for good; the engine loads it as float32 on a CPU."""
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(run, dtype=torch.bfloat16)
    model.generation_config = generation_config()
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    PreTrainedTokenizerFast.from_pretrained(str(run)).save_pretrained(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui train", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--data", type=Path, default=Path("data/packed.npz"), help="packed corpus (lab.data)")
    parser.add_argument("--tokenizer", type=Path, default=Path("data/tokenizer"))
    parser.add_argument("--out", type=Path, default=Path("runs/small"), help="checkpoint folder; resumed if present")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    parser.add_argument(
        "--steps",
        type=int,
        help=f"total steps of the run's schedule (new runs: {TrainConfig.steps}; a resumed run "
        "keeps its own unless given)",
    )
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    parser.add_argument("--canvas-tokens", type=int, default=TrainConfig.canvas_tokens)
    parser.add_argument(
        "--grounded-weight",
        type=float,
        default=TrainConfig.grounded_weight,
        help="loss weight of response tokens found only in the page's own prompt (new runs; 1 = plain loss)",
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="stop this invocation after so many minutes")
    parser.add_argument("--save-minutes", type=float, default=10.0)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--shape", choices=("small", "tiny"), default="small", help="model shape of a new run")
    parser.add_argument("--init", type=Path, help="start a new run from this checkpoint folder's weights")
    parser.add_argument(
        "--fit-schedule",
        action="store_true",
        help=f"after {FIT_AFTER_STEPS} steps, set the schedule's length so that it ends when --minutes run out",
    )
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="bf16: bfloat16 autocast (auto: on CUDA only); weights and optimiser stay float32",
    )
    parser.add_argument("--export", type=Path, help="only export --out to this folder (no optimiser state)")
    args = parser.parse_args(argv)
    if args.export:
        export(args.out, args.export)
    else:
        train(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
