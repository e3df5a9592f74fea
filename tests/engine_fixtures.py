"""A tiny random DiffusionGemma checkpoint for engine tests: built in a second, saved like a real one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion, LlamaConfig, LlamaForCausalLM

from engine.config import TINY, make_config
from engine.frames import Frame
from engine.loading import LoadedModel, load_model
from lab.tokenizer import train_tokenizer

SENTENCES = [
    "<html><body><h1>Hash table</h1><p>A hash table maps keys to values.</p></body></html>",
    '<ul><li><a href="/wiki/Array">Array</a></li><li>Linked list</li></ul>',
    "The quick brown fox jumps over the lazy dog. Pages are written on the fly.",
]


def build_tiny_checkpoint(folder: Path, seed: int = 0) -> Path:
    """Write a random TINY-shaped model and a byte-level BPE tokenizer into ``folder``; return it."""
    train_tokenizer(SENTENCES * 4, vocab_size=TINY.vocab_size).save_pretrained(folder)
    torch.manual_seed(seed)
    DiffusionGemmaForBlockDiffusion(make_config(TINY)).save_pretrained(folder)
    return folder


def build_tiny_llama_base(folder: Path, positions: int = 2048) -> Path:
    """A random tiny Llama with the tiny test tokenizer, saved like a causal-LM base: a stand-in for SmolLM2."""
    build_tiny_checkpoint(folder / "tok")  # only for its tokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder / "tok")
    tokenizer.eos_token = "<eos>"
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=positions,
        eos_token_id=1,
        pad_token_id=0,
        bos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder / "base")
    tokenizer.save_pretrained(folder / "base")
    return folder / "base"


def build_tiny_adapter(base: Path, folder: Path, canvas: int = 16) -> Path:
    """A genui adapter on a tiny Llama base (build_tiny_llama_base): a LoRA with one non-zero projection."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(LlamaForCausalLM.from_pretrained(base), LoraConfig(r=4, target_modules=["q_proj"]))
    torch.nn.init.normal_(model.base_model.model.model.layers[0].self_attn.q_proj.lora_B["default"].weight)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    (folder / "genui.json").write_text(
        json.dumps({"family": "adapted-causal-lm", "base": str(base), "canvas_length": canvas})
    )
    (folder / "generation_config.json").write_text(
        json.dumps({"max_denoising_steps": 5, "t_max": 0.6, "t_min": 0.2, "entropy_bound": 2.0, "min_distinct": 8})
    )
    return folder


async def collect(frames: AsyncIterator[Frame]) -> list[Frame]:
    return [frame async for frame in frames]


@contextmanager
def tiny_model(folder: Path) -> Iterator[LoadedModel]:
    """Build and load a tiny checkpoint, on one CPU thread while it is in use.

    A tiny model gains nothing from intra-op threads, and on a CPU shared with other work spinning OpenMP threads
    turn milliseconds into seconds.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield load_model(build_tiny_checkpoint(folder), device="cpu")
    finally:
        torch.set_num_threads(threads)
