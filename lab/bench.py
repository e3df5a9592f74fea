"""``genui bench``: diffusion vs autoregressive decoding of one page, same weights, same machine, same run.

Each row times ``--runs`` generations of a page of up to ``--tokens`` tokens (after one untimed warm-up): time to
the first frame, p50 and p95 of the whole page, the median denoising steps per canvas, the share of canvases the
adaptive stop ended before the step cap (``stopped``), and tokens of text per second at p50. The diffusion row
writes the page as ``genui serve`` does: in canvases with the checkpoint's sampler and adaptive stopping (or exactly
``--steps`` steps a canvas when given), ending with the canvas that holds the model's end of text. The
autoregressive row decodes, for each seed, as many tokens as that seed's diffusion page holds, with the same
weights in their causal mode (engine.autoregressive): the same length of text, so neither row is timed for tokens
the other does not write (a canvas after the end of text settles in a few steps, a token costs a whole forward).
Both run in the calling thread; the "diffusion, served" row writes the diffusion row's pages again through the
engine as ``genui serve`` runs it (a worker thread, frames crossing to an event loop), so what serving adds is
measured, not assumed. The "diffusion, N variations" row (``--variations N``, default 3: the candidates the Rewrite
menu's Variations writes) times N pages of the same prompt written in one batch, as ``genui serve`` writes a set
of variations: from the start to the last page's end, with every page's text counted in its tokens a second. On
CUDA, rows for a random-weight model of DiffusionGemma-26B-A4B's shape follow, at fixed
24 and 48 steps and autoregressively.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, DiffusionGemmaTextConfig

from engine.attention import NAME as ATTENTION
from engine.autoregressive import generate_autoregressive
from engine.config import tiny_vision_config
from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, GenerationRequest, StepFrame
from engine.gemma import GemmaDenoiser
from engine.generation import plan_batch, run_plan
from engine.loading import LoadedModel, ModelLoadError, gemma_defaults, load_model
from engine.prepack import PackedLinear
from engine.scheduler import Scheduler
from engine.streaming import Row

# The wiki's article prompt for "Hash table", as genui renders it (sites/wiki/prompts/article.j2).
PROMPT = (
    "<site>Genpedia: A free encyclopedia of computing, hacker culture and language. Articles are short, factual and "
    "link to related articles.</site>\n<page>article</page>\n<title>Hash table</title>\n\n"
)
REFERENCE_STEPS = (24, 48)
REFERENCE_RUNS = 3  # each reference run takes seconds; three give a median without taking all afternoon


def reference_config() -> DiffusionGemmaConfig:
    """DiffusionGemma-26B-A4B's text shape: Gemma 4 26B-A4B (30 layers, 2816 wide, 128 experts of 704, 8 active).

    25.3B parameters. The vision tower is token-sized: the benchmark feeds no images.
    """
    text = DiffusionGemmaTextConfig(
        vocab_size=262_144,
        hidden_size=2816,
        intermediate_size=2112,  # the dense MLP beside the experts
        num_hidden_layers=30,  # five sliding-window layers to one global, the config's default pattern
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        global_head_dim=512,
        num_global_key_value_heads=2,
        sliding_window=1024,
        num_experts=128,
        top_k_experts=8,
        moe_intermediate_size=704,
    )
    vision = tiny_vision_config()
    return DiffusionGemmaConfig(text_config=text.to_dict(), vision_config=vision.to_dict())


def build_random(
    config: DiffusionGemmaConfig, device: torch.device, dtype: torch.dtype, seed: int = 0
) -> DiffusionGemmaForBlockDiffusion:
    """Random weights straight onto ``device``: built on the meta device (encoder and decoder weights tied, so
    allocated once), then materialised and initialised there. Building on the device directly would allocate the
    encoder's and the decoder's copies before tying them: twice the memory. ``seed`` fixes the weights, so every
    run times the same model, and leaves the caller's random state as it was."""
    with torch.device("meta"):
        model = DiffusionGemmaForBlockDiffusion._from_config(config, dtype=dtype)
    model.to_empty(device=device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        model.init_weights()  # also recomputes buffers (rotary frequencies, embedding scale) to_empty left blank
    # transformers 5.24's _init_weights sets the decoder layers' layer_scalar and not the encoder layers', so those
    # kept whatever memory to_empty found: now and then a non-finite scale, and non-finite logits. __init__ gives 1.
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.rsplit(".", 1)[-1] == "layer_scalar":
                buffer.fill_(1.0)
    return model.eval()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: an observed value, defined for any number of runs."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Run:
    """One timed page."""

    ttff: float  # seconds to the first frame
    seconds: float  # to the final frame
    tokens: int
    steps: list[int]  # every canvas's denoising steps (autoregressive: tokens), a batch's pages' all
    canvas_steps: list[int]  # each canvas's steps, in order (a batch: the most any page took at it)
    stopped_early: list[bool]  # per denoised canvas: the adaptive stop ended it (none for autoregressive decoding)
    step_seconds: float  # mean time from one step of a canvas to its next: what one more step costs
    fixed_seconds: float  # the rest: the prompt, each canvas's first step and its commit, the frames


def time_runs(runs: int, once: Callable[[int], Run]) -> dict[str, Any]:
    """Call ``once(seed)`` after one warm-up; summarise the timed calls."""
    once(runs)  # warm-up, with a seed none of the timed runs uses
    results = [once(seed) for seed in range(runs)]
    totals = [r.seconds for r in results]
    p50 = statistics.median(totals)
    tokens = statistics.median(r.tokens for r in results)
    early = [stopped for r in results for stopped in r.stopped_early]
    canvases = zip_longest(*(r.canvas_steps for r in results))  # a page may end a canvas sooner on another seed
    return {
        "tokens": int(tokens),
        "tokens_by_run": [r.tokens for r in results],  # by seed, 0 up: what the autoregressive row writes of each
        "seconds_by_run": [round(r.seconds, 4) for r in results],
        "canvases": round(statistics.median(len(r.canvas_steps) for r in results), 1),
        # over every timed canvas, as the quality report counts them: a short run's median would weigh as a long one's
        "steps": round(float(statistics.median(s for r in results for s in r.steps)), 1),
        # A page's canvases apart, over the runs that reached each: its first ones take the most steps.
        "steps_by_canvas": [
            round(float(statistics.median(s for s in steps if s is not None)), 1) for steps in canvases
        ],
        "stopped": round(sum(early) / len(early), 2) if early else None,
        "ttff_s": round(statistics.median(r.ttff for r in results), 4),
        "p50_s": round(p50, 4),
        "p95_s": round(percentile(totals, 0.95), 4),
        "tokens_per_s": round(tokens / p50, 1) if p50 > 0 else 0.0,
        "ms_step": round(1000 * statistics.median(r.step_seconds for r in results), 1),
        "fixed_s": round(statistics.median(r.fixed_seconds for r in results), 3),
    }


def page_request(loaded: LoadedModel, seed: int, steps: int | None, tokens: int) -> GenerationRequest:
    return GenerationRequest(
        prompt=PROMPT,
        max_canvases=math.ceil(tokens / loaded.canvas_length),
        max_steps=steps,
        seed=seed,
        stop_at_eos=True,  # the page as served: it ends with the canvas that holds the model's end of text
        # A canvas cannot hold still for as many steps as it has, nor be surer than certain: fixed steps means no
        # adaptive stop (and a checkpoint without one of its two settings still takes both).
        stability_threshold=steps,
        confidence_threshold=None if steps is None else 0.0,
    )


def diffusion_row(loaded: LoadedModel, runs: int, steps: int | None, tokens: int) -> dict[str, Any]:
    def once(seed: int) -> Run:
        frames: list[tuple[float, Frame]] = []
        started = time.perf_counter()
        row = Row(emit=lambda frame: frames.append((time.perf_counter(), frame)), started=started)
        run_plan(loaded, plan_batch(loaded, [page_request(loaded, seed, steps, tokens)], [row]))
        return _measure(started, frames, denoised=True)

    return {"engine": "diffusion", **_describe(loaded), **time_runs(runs, once)}


def served_row(loaded: LoadedModel, runs: int, steps: int | None, tokens: int) -> dict[str, Any]:
    """The diffusion row's pages as ``genui serve`` writes them: through the engine (engine.Scheduler), whose worker
    thread computes while frames cross to an event loop, each timed when it arrives there."""
    loop = asyncio.new_event_loop()
    scheduler = Scheduler(loaded)

    async def page(request: GenerationRequest) -> list[tuple[float, Frame]]:
        return [(time.perf_counter(), frame) async for frame in scheduler.stream(request)]

    def once(seed: int) -> Run:
        started = time.perf_counter()
        frames = loop.run_until_complete(page(page_request(loaded, seed, steps, tokens)))
        return _measure(started, frames, denoised=True)

    try:
        return {"engine": "diffusion, served", **_describe(loaded), **time_runs(runs, once)}
    finally:
        loop.run_until_complete(scheduler.close())
        loop.close()


def variations_row(loaded: LoadedModel, runs: int, steps: int | None, tokens: int, n: int) -> dict[str, Any]:
    """``n`` pages of the bench's prompt in one batch (a seed's variants, as the engine writes a set of
    variations): each run's time is its last page's. Its steps are every page's canvases', its steps by canvas the
    most any page took at each (the batch runs until its last page's canvas settles); it times no step apart."""

    def once(seed: int) -> Run:
        frames: list[list[tuple[float, Frame]]] = [[] for _ in range(n)]
        started = time.perf_counter()
        rows = [
            Row(emit=lambda frame, mine=mine: mine.append((time.perf_counter(), frame)), started=started)
            for mine in frames
        ]
        run_plan(loaded, plan_batch(loaded, [page_request(loaded, seed, steps, tokens)] * n, rows))
        pages = [_measure(started, mine, denoised=True) for mine in frames]
        seconds = max(page.seconds for page in pages)
        return Run(
            ttff=min(page.ttff for page in pages),
            seconds=seconds,
            tokens=sum(page.tokens for page in pages),
            steps=[s for page in pages for s in page.canvas_steps],
            canvas_steps=[max(s) for s in zip_longest(*(p.canvas_steps for p in pages), fillvalue=0)],
            stopped_early=[stopped for page in pages for stopped in page.stopped_early],
            step_seconds=0.0,
            fixed_seconds=seconds,
        )

    row = {"engine": f"diffusion, {n} variations", **_describe(loaded), **time_runs(runs, once)}
    return {**row, "ms_step": None, "fixed_s": None}


def autoregressive_row(loaded: LoadedModel, runs: int, tokens_by_seed: Sequence[int]) -> dict[str, Any]:
    """Decode, for each seed, ``tokens_by_seed[seed]`` tokens (the diffusion row's page of that seed; the warm-up
    takes the median), through its end of text if the causal mode writes one sooner: the same length of text."""

    def once(seed: int) -> Run:
        frames: list[tuple[float, Frame]] = []
        count = tokens_by_seed[seed] if seed < len(tokens_by_seed) else int(statistics.median(tokens_by_seed))
        count = max(1, count)
        request = GenerationRequest(
            prompt=PROMPT, max_canvases=math.ceil(count / loaded.canvas_length), seed=seed, stop_at_eos=False
        )
        started = time.perf_counter()
        generate_autoregressive(
            loaded,
            request,
            lambda frame: frames.append((time.perf_counter(), frame)),
            step_every=1,
            started=started,
            max_tokens=count,
        )
        return _measure(started, frames, denoised=False)

    return {"engine": "autoregressive", **_describe(loaded), **time_runs(runs, once)}


def _measure(started: float, frames: list[tuple[float, Frame]], denoised: bool) -> Run:
    first = next(at for at, frame in frames if isinstance(frame, StepFrame))
    done = next(frame for _, frame in frames if isinstance(frame, DoneFrame))
    canvases = [frame for _, frame in frames if isinstance(frame, CanvasFrame)]
    steps = [(at, frame.canvas) for at, frame in frames if isinstance(frame, StepFrame)]
    # One step to the next within a canvas; a canvas's first step also carries the commit of the one before it.
    gaps = [b - a for (a, one), (b, other) in zip(steps, steps[1:], strict=False) if one == other]
    seconds = frames[-1][0] - started
    step_seconds = statistics.mean(gaps) if gaps else 0.0
    return Run(
        ttff=first - started,
        seconds=seconds,
        tokens=sum(canvas.tokens for canvas in canvases),
        steps=[c.steps for c in done.canvases],
        canvas_steps=[c.steps for c in done.canvases],
        stopped_early=[c.stopped_early for c in done.canvases if c.steps] if denoised else [],
        step_seconds=step_seconds,
        fixed_seconds=seconds - len(gaps) * step_seconds,
    )


def paired_speedup(diffusion: dict[str, Any], autoregressive: dict[str, Any]) -> float:
    """The median, over seeds, of the autoregressive row's time over the diffusion row's for the same page length:
    pages of one prompt differ in length from seed to seed, which the ratio of two p50s mixes in."""
    pairs = zip(autoregressive["seconds_by_run"], diffusion["seconds_by_run"], strict=True)
    return statistics.median(slow / max(fast, 1e-9) for slow, fast in pairs)


def break_even(diffusion: dict[str, Any], autoregressive: dict[str, Any], canvases: float) -> str:
    """The steps a canvas at which the diffusion row would take as long as the autoregressive one, and a third as
    long: each canvas's first step is in ``fixed_s``, every further one costs ``ms_step``."""
    step = diffusion["ms_step"] / 1000
    if step <= 0:
        return "too few steps a canvas to time one step: no break-even"

    def steps_a_canvas(seconds: float) -> float:
        return 1 + (seconds - diffusion["fixed_s"]) / step / canvases

    at_par, three = steps_a_canvas(autoregressive["p50_s"]), steps_a_canvas(autoregressive["p50_s"] / 3)
    said = (
        f"a denoising step costs {diffusion['ms_step']} ms and the rest of a page {diffusion['fixed_s']} s: "
        f"diffusion matches autoregressive decoding at {at_par:.1f} steps a canvas"
    )
    return f"{said}; 3x is out of reach" if three < 1 else f"{said} and is 3x faster at {three:.1f}"


def _describe(loaded: LoadedModel) -> dict[str, Any]:
    return {"device": str(loaded.device), "model": loaded.model_id, "params": loaded.params}


def reference_rows(loaded: LoadedModel, runs: int) -> list[dict[str, Any]]:
    """Rows for the 26B-A4B shape on ``loaded``'s CUDA device (prompt tokenised with ``loaded``'s tokenizer)."""
    network = build_random(reference_config(), loaded.device, torch.bfloat16)
    reference = LoadedModel(
        denoiser=GemmaDenoiser(network, loaded.tokenizer),
        tokenizer=loaded.tokenizer,
        device=loaded.device,
        model_id="random DiffusionGemma-26B-A4B shape",
        canvas_length=network.config.canvas_length,
        defaults=gemma_defaults(network),  # not loaded's: a causal LM's settings may ask what DiffusionGemma lacks
    )
    try:
        runs = min(runs, REFERENCE_RUNS)
        tokens = reference.canvas_length
        rows = [diffusion_row(reference, runs, steps, tokens) for steps in REFERENCE_STEPS]
        rows.append(autoregressive_row(reference, runs, rows[0]["tokens_by_run"]))
        return rows
    finally:
        del network, reference
        torch.cuda.empty_cache()


def reference_section(loaded: LoadedModel, runs: int) -> tuple[list[dict[str, Any]], str]:
    """The 26B-A4B-shaped rows and their note; a GPU too small for them gets a note instead of a crash that would
    lose the rows already measured."""
    try:
        rows = reference_rows(loaded, runs)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return [], (
            f"26B-A4B-shaped rows skipped: {loaded.device} ran out of memory for them (25.3B random bf16 parameters, "
            "51 GB before activations)"
        )
    except Exception as exc:  # the rows already measured matter more than these: a note names the failure instead
        first = next(iter(str(exc).splitlines()), "")
        return [], f"26B-A4B-shaped rows failed: {type(exc).__name__}: {first}"
    return rows, f"26B-A4B-shaped rows: random bf16 weights, {min(runs, REFERENCE_RUNS)} runs each"


def format_table(rows: list[dict[str, Any]]) -> str:
    columns = [
        *("engine", "device", "model", "params", "tokens", "steps", "steps_by_canvas", "stopped", "ttff_s", "p50_s"),
        "p95_s",
        "tokens_per_s",
        "ms_step",
        "fixed_s",
    ]
    cells = [columns] + [[_cell(row[column]) for column in columns] for row in rows]
    widths = [max(len(line[index]) for line in cells) for index in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in cells)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "/".join(_cell(item) for item in value) or "-"
    if isinstance(value, int) and value >= 10**6:
        return f"{value / 1e6:.1f}M"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="genui bench", description=__doc__.splitlines()[0].replace("``", ""), allow_abbrev=False
    )
    parser.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available, else cpu)")
    parser.add_argument("--model", help="checkpoint folder or hub id (default: the shipped models/genui-smollm)")
    parser.add_argument(
        "--tokens",
        type=int,
        default=256,
        help="tokens a page at most, rounded up to whole canvases; a page ends sooner at the model's end of text "
        "(default 256)",
    )
    parser.add_argument("--json", action="store_true", help='print one JSON object {"rows": [...], "notes": [...]}')
    parser.add_argument("--runs", type=int, default=5, help="timed runs per row, after one warm-up (default 5)")
    parser.add_argument("--steps", type=int, help="fixed denoising steps (default: the checkpoint's adaptive stop)")
    parser.add_argument(
        "--dtype",
        choices=["auto", "bfloat16", "float32", "int8"],
        default="auto",
        help="what the model computes in (default: auto, the engine's choice for the device); int8: a causal LM's "
        "linear layers in int8, on the CPU (engine.quantize)",
    )
    parser.add_argument(
        "--variations",
        type=int,
        default=3,
        help="pages in the batch of the variations row, as the Rewrite menu's Variations writes them (default 3; "
        "0: no such row)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.tokens < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--runs, --tokens and --steps must be positive")
    if args.variations < 0:
        parser.error("--variations must be 0 or more")
    try:
        dtype = None if args.dtype in ("auto", "int8") else getattr(torch, args.dtype)
        quantize = "int8" if args.dtype == "int8" else None
        loaded = load_model(args.model, device=args.device, dtype=dtype, quantize=quantize)
    except ModelLoadError as exc:
        print(f"genui bench: {exc}", file=sys.stderr)
        return 2

    try:
        diffusion = diffusion_row(loaded, args.runs, args.steps, args.tokens)
        rows = [
            diffusion,
            autoregressive_row(loaded, args.runs, diffusion["tokens_by_run"]),
            served_row(loaded, args.runs, args.steps, args.tokens),
        ]
        if args.variations:
            rows.append(variations_row(loaded, args.runs, args.steps, args.tokens, args.variations))
    except EngineError as exc:  # a page the model cannot hold (--tokens past its positions), said as the engine says it
        print(f"genui bench: {exc}", file=sys.stderr)
        return 2
    most = math.ceil(args.tokens / loaded.canvas_length)
    notes = [
        f"a page of up to {most} canvas(es) of {loaded.canvas_length} tokens, ending at the model's end of text: "
        f"median {diffusion['tokens']} tokens of text in {diffusion['canvases']} canvas(es); the autoregressive row "
        "decodes as many tokens as each seed's page holds; prompt: the wiki's 'Hash table'",
        f"diffusion is {rows[1]['p50_s'] / max(rows[0]['p50_s'], 1e-9):.2f}x the autoregressive speed (p50); "
        f"{paired_speedup(rows[0], rows[1]):.2f}x the median of each seed's page against the same length decoded "
        "autoregressively",
        break_even(rows[0], rows[1], diffusion["canvases"]),
        f"served through the engine, the same pages take {rows[2]['p50_s'] / max(rows[0]['p50_s'], 1e-9):.2f}x the "
        "diffusion row's time (p50)",
        *(
            [
                f"{args.variations} variations in one batch take {rows[3]['p50_s'] / max(rows[0]['p50_s'], 1e-9):.2f}x "
                f"one page's time (p50) and write {rows[3]['tokens_per_s'] / max(rows[0]['tokens_per_s'], 1e-9):.2f}x "
                "its tokens of text a second"
            ]
            if args.variations
            else []
        ),
        f"torch threads: {torch.get_num_threads()}; weights in {loaded.weights}"
        + (
            ", laid out once for oneDNN (engine.prepack)"
            if any(isinstance(m, PackedLinear) for m in loaded.model.modules())
            else ""
        )
        + (
            "; grouped-query attention reads its keys and values in place (engine.attention)"
            if getattr(loaded.model.config, "_attn_implementation", None) == ATTENTION
            else ""
        ),
    ]
    if loaded.device.type == "cuda":
        reference, note = reference_section(loaded, args.runs)
        rows += reference
        notes.append(note)
    else:
        notes.append("26B-A4B-shaped rows need CUDA; skipped on cpu")
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}, indent=2))
    else:
        print(format_table(rows))
        for note in notes:
            print(f"note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
