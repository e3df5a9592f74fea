from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_adapter, build_tiny_llama_base
from transformers import DynamicCache, LlamaForCausalLM

from engine import load_model
from engine.attention import NAME, use_grouped_sdpa


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("attention"))


def _pair(base: Path, dtype: torch.dtype) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    plain = LlamaForCausalLM.from_pretrained(base, dtype=dtype).eval()
    grouped = LlamaForCausalLM.from_pretrained(base, dtype=dtype).eval()
    assert plain.config._attn_implementation == "sdpa"
    assert plain.config.num_key_value_heads < plain.config.num_attention_heads  # the grouped case
    assert use_grouped_sdpa(grouped) and grouped.config._attn_implementation == NAME
    return plain, grouped


def _ids(model: LlamaForCausalLM, rows: int, length: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, model.config.vocab_size, (rows, length), generator=generator)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_canvas_against_a_padded_prefix_gets_the_logits_of_transformers_sdpa(base: Path, dtype: torch.dtype) -> None:
    # the engine's step: a cached prefix with left padding in one row, a canvas that sees the prefix and itself
    plain, grouped = _pair(base, dtype)
    prefix, canvas = _ids(plain, 2, 12, 0), _ids(plain, 2, 6, 1)
    real = torch.ones((2, 12), dtype=torch.bool)
    real[1, :4] = False
    mask = torch.cat([real[:, None, :].expand(2, 6, 12), torch.ones((2, 6, 6), dtype=torch.bool)], dim=-1)[:, None]
    logits = []
    with torch.inference_mode():
        for model in (plain, grouped):
            cache = DynamicCache(config=model.config)
            model(input_ids=prefix, attention_mask=real.long(), cache=cache)
            positions = torch.arange(12, 18)[None].expand(2, -1)
            logits.append(model(input_ids=canvas, attention_mask=mask, position_ids=positions, cache=cache).logits)
    torch.testing.assert_close(logits[1], logits[0], atol=0, rtol=0)


@pytest.mark.parametrize("mask", ["none", "padded"])
def test_a_plain_forward_and_decoding_match_transformers_sdpa(base: Path, mask: str) -> None:
    # no mask goes to transformers' own function; a 2-D mask must still be turned into a 4-D one, not dropped
    plain, grouped = _pair(base, torch.float32)
    ids = _ids(plain, 2, 10, 2)
    attention = torch.ones((2, 10), dtype=torch.long)
    if mask == "padded":
        attention[0, :3] = 0
    with torch.inference_mode():
        outputs = [model(input_ids=ids, attention_mask=attention).logits for model in (plain, grouped)]
        tokens = [
            model.generate(ids, attention_mask=attention, max_new_tokens=5, do_sample=False, pad_token_id=0)
            for model in (plain, grouped)
        ]
    torch.testing.assert_close(outputs[1], outputs[0], atol=0, rtol=0)
    assert torch.equal(tokens[1], tokens[0])


def test_the_engine_runs_a_cpu_causal_lm_with_grouped_attention(base: Path, tmp_path: Path) -> None:
    adapter = build_tiny_adapter(base, tmp_path / "adapter")
    for options in ({"dtype": torch.bfloat16}, {"dtype": torch.float32}, {"quantize": "int8"}):
        loaded = load_model(adapter, device="cpu", **options)
        assert loaded.model.config._attn_implementation == NAME, options
