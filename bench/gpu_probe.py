"""Training throughput of lab.adapt on this machine, before the base is there: a randomly initialised model of
SmolLM2-135M's shape with genui's adapter, the packed corpus's pages, several pages per forward. Prints canvas
tokens a second for each --batch-pages, so a lease's training call can pick one and size its schedule.

    python3 bench/gpu_probe.py data/adapt-packed.npz [BATCHES, e.g. 1,8,16] [PAGES TIMED, default 128]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lab.adapt import AdaptConfig, _autocast, add_adapter, layout_page, pages_loss
from lab.data import Packed


def main(packed_path: str, batches: list[int], timed: int) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        rope_parameters={"rope_theta": 100000.0, "rope_type": "default"},
    )
    cfg = AdaptConfig()
    model = add_adapter(LlamaForCausalLM(config).to(torch.bfloat16).to(device), cfg)
    inner = model.get_base_model()
    packed = Packed.load(packed_path)
    rows = np.random.default_rng(0).permutation(np.flatnonzero(~packed.holdout))
    generator = torch.Generator().manual_seed(0)
    pages = [layout_page(packed.prompt(r), packed.response(r), 64, 2, 49152, 0.5, generator) for r in rows[:256]]
    for batch in batches:
        torch.cuda.reset_peak_memory_stats() if device.type == "cuda" else None
        tokens, start = 0, 0.0
        for index in range(0, timed + batch, batch):
            if index == batch:  # the first forward warms up
                torch.cuda.synchronize() if device.type == "cuda" else None
                start, tokens = time.perf_counter(), 0
            chunk = pages[index % timed : index % timed + batch]
            with _autocast(device):
                loss, _ = pages_loss(inner, chunk, 0.5)
            (loss / 16384).backward()
            tokens += sum(len(p.canvas_targets) for p in chunk)
        torch.cuda.synchronize() if device.type == "cuda" else None
        seconds = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0
        print(f"batch-pages {batch:3d}: {tokens / seconds:9.0f} canvas tokens/s, peak {peak:.1f} GiB", flush=True)


if __name__ == "__main__":
    batches = [int(b) for b in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 4, 8, 16, 32]
    main(
        sys.argv[1] if len(sys.argv) > 1 else "data/adapt-packed.npz",
        batches,
        int(sys.argv[3]) if len(sys.argv) > 3 else 128,
    )
