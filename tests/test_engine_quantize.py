"""engine.quantize: smoothing keeps the float32 function, int8 stays close to it, and loading wires it in."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_checkpoint, build_tiny_llama_base
from torch import nn
from transformers import AutoTokenizer, LlamaForCausalLM

from engine import ModelLoadError, load_model
from engine.quantize import CALIBRATION_TEXT, QuantizeError, quantize_int8, smooth


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("llama"))


def _with_outliers(base: Path) -> tuple[LlamaForCausalLM, object]:
    """The tiny Llama with a few norm channels 100x the rest: the spread a real LLM's projection inputs have."""
    model = LlamaForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.input_layernorm.weight[:3] *= 100
            layer.post_attention_layernorm.weight[-2:] *= 100
    return model, AutoTokenizer.from_pretrained(base)


def _logits(model: nn.Module, tokenizer: object) -> torch.Tensor:
    ids = tokenizer(CALIBRATION_TEXT[:400], return_tensors="pt").input_ids  # type: ignore[operator]
    with torch.inference_mode():
        return model(input_ids=ids).logits


def _error(logits: torch.Tensor, reference: torch.Tensor) -> float:
    return float((logits - reference).norm() / reference.norm())


def test_smoothing_computes_the_same_function_with_narrower_inputs(base: Path) -> None:
    model, tokenizer = _with_outliers(base)
    before = _logits(model, tokenizer)
    spread_before = model.model.layers[0].input_layernorm.weight.abs()
    smoothed = smooth(copy.deepcopy(model), tokenizer)
    torch.testing.assert_close(_logits(smoothed, tokenizer), before, rtol=1e-4, atol=1e-4)
    spread_after = smoothed.model.layers[0].input_layernorm.weight.abs()
    assert spread_after.max() / spread_after.median() < spread_before.max() / spread_before.median() / 3
    assert smoothed.lm_head.weight.data_ptr() != smoothed.model.embed_tokens.weight.data_ptr()  # untied
    torch.testing.assert_close(smoothed.model.embed_tokens.weight, model.model.embed_tokens.weight)


@pytest.mark.filterwarnings("ignore:torch.ao.quantization is deprecated:DeprecationWarning")
def test_int8_stays_close_to_float32_and_smoothing_is_what_keeps_it_close(base: Path) -> None:
    model, tokenizer = _with_outliers(base)
    reference = _logits(model, tokenizer)
    quantized = quantize_int8(copy.deepcopy(model), tokenizer)
    kinds = {name.rsplit(".", 1)[-1]: type(m) for name, m in quantized.named_modules()}
    int8 = torch.ao.nn.quantized.dynamic.Linear
    assert all(kinds[n] is int8 for n in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "lm_head"))
    assert kinds["down_proj"] is nn.Linear
    smoothed_error = _error(_logits(quantized, tokenizer), reference)

    plain = copy.deepcopy(model)  # the same layers quantized without smoothing
    for layer in plain.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        for owner, name in [(attn, "q_proj"), (attn, "k_proj"), (attn, "v_proj"), (attn, "o_proj")] + [
            (mlp, "gate_proj"),
            (mlp, "up_proj"),
        ]:
            single = nn.Sequential(getattr(owner, name))
            qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
            setattr(owner, name, torch.ao.quantization.quantize_dynamic(single, {nn.Linear: qconfig}, torch.qint8)[0])
    plain_error = _error(_logits(plain, tokenizer), reference)
    assert smoothed_error < 0.2  # measured 0.10 (without smoothing 0.28)
    assert smoothed_error < plain_error / 2


def test_int8_refuses_models_whose_layers_it_does_not_know(base: Path, tmp_path: Path) -> None:
    model, tokenizer = _with_outliers(base)
    model.config.model_type = "gemma3_text"
    with pytest.raises(QuantizeError, match="int8 supports llama"):
        quantize_int8(model, tokenizer)
    with pytest.raises(QuantizeError, match="float32"):
        quantize_int8(_with_outliers(base)[0].to(torch.bfloat16), tokenizer)
    model, tokenizer = _with_outliers(base)
    quantize_int8(model, tokenizer)
    with pytest.raises(QuantizeError, match="int8 already; load it again in float32"):
        quantize_int8(model, tokenizer)  # it was a KeyError naming a layer


def _adapter(base: Path, folder: Path) -> Path:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(LlamaForCausalLM.from_pretrained(base), LoraConfig(r=4, target_modules=["q_proj"]))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    (folder / "genui.json").write_text(
        json.dumps({"family": "adapted-causal-lm", "base": str(base), "canvas_length": 16})
    )
    return folder


def test_load_model_int8_denoises_and_reports_its_weights(base: Path, tmp_path: Path) -> None:
    adapter = _adapter(base, tmp_path / "adapter")
    full = load_model(adapter, device="cpu", dtype=torch.float32)
    loaded = load_model(adapter, device="cpu", quantize="int8")
    assert (full.weights, loaded.weights) == ("float32", "int8")
    assert loaded.params == full.params  # the int8 layers' weights still count
    ids = torch.tensor([[5, 6, 7, 8]])
    canvas = torch.randint(0, full.denoiser.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = full.denoiser.denoise(full.denoiser.prefill(ids, torch.ones_like(ids)), canvas, None)
        got = loaded.denoiser.denoise(loaded.denoiser.prefill(ids, torch.ones_like(ids)), canvas, None)
    assert got.shape == expected.shape and _error(got, expected) < 0.1


def test_int8_is_refused_where_it_cannot_run(base: Path, tmp_path: Path) -> None:
    adapter = _adapter(base, tmp_path / "adapter")
    with pytest.raises(ModelLoadError, match="'int4' is not one genui knows"):
        load_model(adapter, device="cpu", quantize="int4")
    with pytest.raises(ModelLoadError, match="from float32"):
        load_model(adapter, device="cpu", dtype=torch.bfloat16, quantize="int8")
    gemma = build_tiny_checkpoint(tmp_path / "gemma")
    with pytest.raises(ModelLoadError, match="int8 is for causal LMs"):
        load_model(gemma, device="cpu", quantize="int8")
