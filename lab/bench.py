"""``genui bench``: diffusion vs autoregressive decoding of one canvas, same weights, same machine, same run.

Each row times ``--runs`` generations of one canvas (after one untimed warm-up): time to the first frame, p50 and
p95 of the whole canvas, and tokens per second at p50. The diffusion row denoises with the checkpoint's adaptive
stopping, or exactly ``--steps`` steps when given; the autoregressive row decodes the same number of tokens with
the model's causal encoder (engine.autoregressive). On CUDA, rows for a random-weight model of
DiffusionGemma-26B-A4B's shape follow, at fixed 24 and 48 steps and autoregressively.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaTextConfig

from engine.autoregressive import generate_autoregressive
from engine.config import tiny_vision_config
from engine.frames import CanvasFrame, Frame, GenerationRequest, StepFrame
from engine.generation import plan_batch, run_plan
from engine.loading import LoadedModel, ModelLoadError, load_model
from engine.sampler import ObservedDiffusionGemma
from engine.streaming import Row

PROMPT = "Write the encyclopedia article 'Hash table' as an HTML fragment."
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


def build_random(config: DiffusionGemmaConfig, device: torch.device, dtype: torch.dtype) -> ObservedDiffusionGemma:
    """Random weights straight onto ``device``: built on the meta device (encoder and decoder weights tied, so
    allocated once), then materialised and initialised there. Building on the device directly would allocate the
    encoder's and the decoder's copies before tying them: twice the memory."""
    with torch.device("meta"):
        model = ObservedDiffusionGemma._from_config(config, dtype=dtype)
    model.to_empty(device=device)
    model.init_weights()  # also recomputes buffers (rotary frequencies, embedding scale) to_empty left blank
    return model.eval()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: an observed value, defined for any number of runs."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def time_runs(runs: int, once: Callable[[int], tuple[float, float, int, float]]) -> dict[str, float]:
    """Call ``once(seed)`` -> (ttff, seconds, tokens, steps) after one warm-up; summarise the timed calls."""
    once(runs)  # warm-up, with a seed none of the timed runs uses
    results = [once(seed) for seed in range(runs)]
    totals = [seconds for _, seconds, _, _ in results]
    p50 = statistics.median(totals)
    tokens = statistics.median(tokens for _, _, tokens, _ in results)
    return {
        "tokens": int(tokens),
        "steps": round(statistics.median(steps for _, _, _, steps in results), 1),
        "ttff_s": round(statistics.median(ttff for ttff, _, _, _ in results), 4),
        "p50_s": round(p50, 4),
        "p95_s": round(percentile(totals, 0.95), 4),
        "tokens_per_s": round(tokens / p50, 1) if p50 > 0 else 0.0,
    }


def diffusion_row(loaded: LoadedModel, runs: int, steps: int | None) -> dict[str, Any]:
    def once(seed: int) -> tuple[float, float, int, float]:
        frames: list[tuple[float, Frame]] = []
        request = GenerationRequest(
            prompt=PROMPT,
            max_canvases=1,
            max_steps=steps,
            seed=seed,
            stop_at_eos=False,
            # A canvas cannot hold still for as many steps as it has: fixed steps means no adaptive stop.
            stability_threshold=steps,
        )
        started = time.perf_counter()
        row = Row(emit=lambda frame: frames.append((time.perf_counter(), frame)), started=started)
        run_plan(loaded, plan_batch(loaded, [request], [row]))
        return _measure(started, frames)

    return {"engine": "diffusion", **_describe(loaded), **time_runs(runs, once)}


def autoregressive_row(loaded: LoadedModel, runs: int) -> dict[str, Any]:
    def once(seed: int) -> tuple[float, float, int, float]:
        frames: list[tuple[float, Frame]] = []
        request = GenerationRequest(prompt=PROMPT, max_canvases=1, seed=seed, stop_at_eos=False)
        started = time.perf_counter()
        generate_autoregressive(
            loaded, request, lambda frame: frames.append((time.perf_counter(), frame)), step_every=1, started=started
        )
        return _measure(started, frames)

    return {"engine": "autoregressive", **_describe(loaded), **time_runs(runs, once)}


def _measure(started: float, frames: list[tuple[float, Frame]]) -> tuple[float, float, int, float]:
    first = next(at for at, frame in frames if isinstance(frame, StepFrame))
    canvas = next(frame for _, frame in frames if isinstance(frame, CanvasFrame))
    return first - started, frames[-1][0] - started, canvas.tokens, float(canvas.steps)


def _describe(loaded: LoadedModel) -> dict[str, Any]:
    return {"device": str(loaded.device), "model": loaded.model_id, "params": loaded.params}


def reference_rows(loaded: LoadedModel, runs: int) -> list[dict[str, Any]]:
    """Rows for the 26B-A4B shape on ``loaded``'s CUDA device (prompt tokenised with ``loaded``'s tokenizer)."""
    network = build_random(reference_config(), loaded.device, torch.bfloat16)
    reference = LoadedModel(
        model=network,
        tokenizer=loaded.tokenizer,
        device=loaded.device,
        model_id="random DiffusionGemma-26B-A4B shape",
        canvas_length=network.config.canvas_length,
    )
    try:
        runs = min(runs, REFERENCE_RUNS)
        rows = [diffusion_row(reference, runs, steps) for steps in REFERENCE_STEPS]
        rows.append(autoregressive_row(reference, runs))
        return rows
    finally:
        del network, reference
        torch.cuda.empty_cache()


def format_table(rows: list[dict[str, Any]]) -> str:
    columns = ["engine", "device", "model", "params", "tokens", "steps", "ttff_s", "p50_s", "p95_s", "tokens_per_s"]
    cells = [columns] + [[_cell(row[column]) for column in columns] for row in rows]
    widths = [max(len(line[index]) for line in cells) for index in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in cells)


def _cell(value: Any) -> str:
    if isinstance(value, int) and value >= 10**6:
        return f"{value / 1e6:.1f}M"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui bench", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available, else cpu")
    parser.add_argument("--model", help="checkpoint folder or hub id (default: the shipped models/genui-small)")
    parser.add_argument("--json", action="store_true", help='print one JSON object {"rows": [...], "notes": [...]}')
    parser.add_argument("--runs", type=int, default=5, help="timed runs per row, after one warm-up (default 5)")
    parser.add_argument("--steps", type=int, help="fixed denoising steps (default: the checkpoint's adaptive stop)")
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--runs and --steps must be positive")
    try:
        loaded = load_model(args.model, device=args.device)
    except ModelLoadError as exc:
        print(f"genui bench: {exc}", file=sys.stderr)
        return 2

    rows = [diffusion_row(loaded, args.runs, args.steps), autoregressive_row(loaded, args.runs)]
    notes = [f"one canvas of {loaded.canvas_length} tokens per run; prompt: {PROMPT!r}"]
    if loaded.device.type == "cuda":
        rows += reference_rows(loaded, args.runs)
        notes.append(f"26B-A4B-shaped rows: random bf16 weights, {min(args.runs, REFERENCE_RUNS)} runs each")
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
