"""Where a denoising step's time goes: one diffusion page of `genui bench` under torch.profiler.

On a lent H200 a 64-position step of the 135M default model took 40 ms, and a step of the 25.3B-parameter shape
over 256 positions 64 ms (docs/benchmarks.md, session 26): the small model's step is overhead, not arithmetic.
This prints the operators that take the host's time and the device's, and per denoising step the kernel launches
and the copies to the host that wait for the device, so a lease can see what to cut (CUDA graphs, a fused sampler,
fewer synchronising reads) before trying it. It runs on the CPU as well, where the device columns are empty.

    python3 bench/step_profile.py [--model DIR] [--device cpu|cuda] [--rows 25]
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from torch.profiler import ProfilerActivity, profile

from engine.frames import GenerationRequest, StepFrame
from engine.generation import plan_batch, run_plan
from engine.loading import LoadedModel, load_model
from engine.streaming import Row
from lab.bench import PROMPT

# Host-side names of a read the host waits on (the copy of a step's tokens or a scalar back from the device).
_SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaEventSynchronize")
_LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")


def page(loaded: LoadedModel, seed: int, tokens: int) -> int:
    """One page as `genui bench` writes it; returns the denoising steps it took."""
    steps = 0

    def emit(frame: object) -> None:
        nonlocal steps
        steps += isinstance(frame, StepFrame)

    request = GenerationRequest(
        prompt=PROMPT, max_canvases=math.ceil(tokens / loaded.canvas_length), seed=seed, stop_at_eos=False
    )
    run_plan(loaded, plan_batch(loaded, [request], [Row(emit=emit, started=time.perf_counter())]))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint folder (default: the shipped models/genui-smollm)")
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rows", type=int, default=25, help="operators listed in each table")
    args = parser.parse_args()
    loaded = load_model(args.model, device=args.device)
    cuda = loaded.device.type == "cuda"
    page(loaded, seed=1, tokens=args.tokens)  # warm-up: kernels chosen, caches allocated
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    started = time.perf_counter()
    with profile(activities=activities) as prof:
        steps = page(loaded, seed=0, tokens=args.tokens)
        if cuda:
            torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    events = prof.key_averages()
    print(f"{loaded.model_id} on {loaded.device}: one page, {steps} denoising steps, {seconds:.3f} s profiled")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if cuda:
        print(events.table(sort_by="self_cuda_time_total", row_limit=args.rows))
        launches = sum(e.count for e in events if e.key in _LAUNCHES)
        syncs = sum(e.count for e in events if e.key in _SYNCS)
        device_ms = sum(e.self_device_time_total for e in events) / 1000
        print(f"kernel launches: {launches} ({launches / max(steps, 1):.0f} a step)")
        print(f"host reads that wait for the device: {syncs} ({syncs / max(steps, 1):.1f} a step)")
        print(f"device busy: {device_ms:.0f} ms of {1000 * seconds:.0f} ms ({device_ms / (10 * seconds):.0f}%)")


if __name__ == "__main__":
    main()
