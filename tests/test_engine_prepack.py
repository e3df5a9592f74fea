from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_adapter, build_tiny_llama_base
from torch import nn
from transformers import LlamaForCausalLM

import engine.loading
from engine import load_model
from engine.prepack import PackedLinear, can_prepack, prepack


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("prepack"))


def _linears(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]


def test_the_cpu_here_can_prepack_bfloat16_weights(base: Path) -> None:
    # genui's CPU engine relies on it where torch has oneDNN (every x86 and Arm build of torch): a torch that lost
    # the operators would silently give up the speed, so that shows here as a failure, not a skip
    model = LlamaForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    assert can_prepack(model) == torch.backends.mkldnn.is_available()
    assert torch.backends.mkldnn.is_available()


@pytest.mark.parametrize("rows", [1, 5, 16, 40])
def test_a_prepacked_model_computes_the_same_logits(base: Path, rows: int) -> None:
    model = LlamaForCausalLM.from_pretrained(base, dtype=torch.bfloat16).eval()
    linears = _linears(model)
    ids = torch.randint(3, model.config.vocab_size, (2, rows), generator=torch.Generator().manual_seed(rows))
    with torch.inference_mode():
        plain = model(input_ids=ids).logits
        assert prepack(model, 16) == len(linears) > 0
        packed = model(input_ids=ids).logits
    assert not _linears(model) and all(isinstance(model.get_submodule(name), PackedLinear) for name in linears)
    torch.testing.assert_close(packed, plain, atol=0, rtol=0)


def test_float32_weights_are_left_as_they_are(base: Path) -> None:
    model = LlamaForCausalLM.from_pretrained(base, dtype=torch.float32)
    before = _linears(model)
    assert prepack(model, 16) == 0 and _linears(model) == before
    mixed = LlamaForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    mixed.lm_head = nn.Linear(mixed.config.hidden_size, mixed.config.vocab_size, bias=False)  # float32 among bf16
    assert prepack(mixed, 16) == len(before) - 1 and _linears(mixed) == ["lm_head"]


class _ReadsItsWeight(nn.Module):
    """A model whose forward reads a linear layer's weight, as transformers' Mamba reads its LM head's dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8).to(torch.bfloat16)
        self.head = nn.Linear(8, 4).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.inner(x.to(self.head.weight.dtype)))


def test_a_model_that_reads_its_weights_is_put_back_as_it_was() -> None:
    model = _ReadsItsWeight()
    x = torch.randn(2, 8)
    before = model(x)
    assert prepack(model, 16, check=lambda m: m(x)) == 0
    assert _linears(model) == ["inner", "head"] and torch.equal(model(x), before)
    assert prepack(model, 16) == 2  # without the check nothing tells


def test_the_engine_prepacks_a_bfloat16_causal_lm_on_the_cpu_and_not_an_int8_one(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = build_tiny_adapter(base, tmp_path / "adapter")
    loaded = load_model(adapter, device="cpu", dtype=torch.bfloat16)
    assert isinstance(loaded.model.model.layers[0].mlp.down_proj, PackedLinear)
    assert isinstance(loaded.model.lm_head, PackedLinear)
    assert loaded.param_count == sum(p.numel() for p in LlamaForCausalLM.from_pretrained(base).parameters())
    monkeypatch.setattr(engine.loading, "_cpu_has_bf16_units", lambda: False)
    assert not any(isinstance(m, PackedLinear) for m in load_model(adapter, device="cpu").model.modules())
    int8 = load_model(adapter, device="cpu", quantize="int8")
    assert not any(isinstance(m, PackedLinear) for m in int8.model.modules())
