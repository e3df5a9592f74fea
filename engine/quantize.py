"""Int8 linear layers for a causal LM on a CPU without bfloat16 units, where it otherwise runs in float32.

PyTorch's dynamic quantization (fbgemm) stores a linear layer's weights in int8, one scale per output channel, and
quantizes its input per call to 7 bits (``reduce_range``) with one scale for the whole tensor. That one input scale
is what costs accuracy: a Llama's projection inputs have a few channels far larger than the rest, which leave the
others a few levels each. Before quantizing, genui moves that spread from the inputs into the weights (SmoothQuant,
Xiao et al. 2023): per input channel a scale s, the input divided by it and the weight column multiplied by it, so
the float32 model computes the same function. The division is folded into the RMSNorm weight that writes the input
(before q/k/v, before gate/up, before the LM head), so it costs nothing at run time. The scales come from one
forward over a fixed calibration text.

down_proj stays in float32: even smoothed, its input (the SwiGLU product) loses about as much in int8 as all the
other layers together (docs/engine.md, "Int8 on a CPU"). The LM head is untied from the embeddings first, since
its smoothed weights no longer equal them.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

# What the calibration forward reads: English prose in the HTML the sites' pages are made of. The scales need the
# inputs' large channels, which a model shows on any text; a page of the kind it writes shows the typical ones.
CALIBRATION_TEXT = """<article class="wiki">
<h1>Lighthouse</h1>
<p>A <b>lighthouse</b> is a tower built on a coast or an island, with a bright lamp at its top that guides ships
at night. Most lighthouses stand near <a href="/wiki/Reef">reefs</a>, harbour entrances and headlands, where a
ship that lost its way would run aground.</p>
<h2>History</h2>
<p>The oldest known lighthouse stood at Alexandria in the third century BC. Early keepers burned wood or coal in
an open fire; later towers used oil lamps behind mirrors, and from 1822 the Fresnel lens, which bends the light of
a small flame into a narrow beam visible thirty kilometres away.</p>
<ul>
<li><a href="/wiki/Fresnel_lens">Fresnel lens</a></li>
<li><a href="/wiki/Foghorn">Foghorn</a></li>
</ul>
</article>
<div class="thread"><h2>Has anyone fixed a laptop fan that rattles?</h2>
<p class="meta">posted by quietkeys, 14 points</p>
<p>Mine started after I cleaned it. Is it the bearing, or did I put the cover back wrong?</p>
<div class="reply"><p class="meta">tinkerer42, 6 points</p><p>Usually the bearing. A drop of oil helps for a
month; a new fan costs less than a dinner.</p></div></div>
<div class="window"><div class="titlebar">Files: /home/user/Documents</div>
<table class="files"><tr><td><a href="/os/files/home/user/Documents/notes.txt">notes.txt</a></td><td>2 KB</td></tr>
<tr><td><a href="/os/files/home/user/Documents/budget.ods">budget.ods</a></td><td>18 KB</td></tr></table></div>
"""

QUANTIZED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj")  # and the LM head; not down_proj
SUPPORTED = ("llama",)  # RMSNorm weights that scale their output, and projections as in transformers' Llama
ALPHA = 0.5  # SmoothQuant's migration strength: how much of an input channel's range moves into the weights


class QuantizeError(ValueError):
    """The model's layout is not one genui knows how to quantize."""


def quantize_int8(model: Any, tokenizer: Any) -> Any:
    """Smooth and quantize ``model`` (a float32 Llama causal LM on the CPU) in place; return it."""
    smooth(model, tokenizer)
    for layer in model.model.layers:
        for name in QUANTIZED:
            owner = layer.self_attn if hasattr(layer.self_attn, name) else layer.mlp
            setattr(owner, name, _int8(getattr(owner, name)))
    model.lm_head = _int8(model.lm_head)
    return model


def smooth(model: Any, tokenizer: Any) -> Any:
    """Move the spread of the quantized layers' inputs into their weights, in place; the float32 model computes the
    same function as before, up to rounding. The LM head becomes a weight of its own."""
    if getattr(model.config, "model_type", None) not in SUPPORTED:
        raise QuantizeError(
            f"int8 supports {', '.join(SUPPORTED)} models, whose layers it knows; this one is "
            f"{getattr(model.config, 'model_type', type(model).__name__)!r}: run it without int8 (--int8)"
        )
    if next(model.parameters()).dtype != torch.float32:
        raise QuantizeError("int8 quantization starts from float32 weights")
    if any(isinstance(module, torch.ao.nn.quantized.dynamic.Linear) for module in model.modules()):
        raise QuantizeError("this model is int8 already; load it again in float32 to quantize it")
    maxima = _input_maxima(model, tokenizer)
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        _smooth(layer.input_layernorm.weight, [attn.q_proj, attn.k_proj, attn.v_proj], maxima[attn.q_proj])
        _smooth(layer.post_attention_layernorm.weight, [mlp.gate_proj, mlp.up_proj], maxima[mlp.gate_proj])
    old = model.lm_head
    head = nn.Linear(old.in_features, old.out_features, bias=old.bias is not None, device=old.weight.device)
    head.load_state_dict(old.state_dict())  # a copy: the embeddings keep their own weights
    _smooth(model.model.norm.weight, [head], maxima[old])
    model.lm_head = head
    model.config.tie_word_embeddings = False
    return model


@torch.inference_mode()
def _input_maxima(model: Any, tokenizer: Any) -> dict[nn.Module, torch.Tensor]:
    """The largest absolute value of each input channel of every linear layer, over the calibration text."""
    maxima: dict[nn.Module, torch.Tensor] = {}

    def record(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen = inputs[0].abs().reshape(-1, inputs[0].shape[-1]).amax(dim=0)
        maxima[module] = torch.maximum(maxima[module], seen) if module in maxima else seen

    hooks = [m.register_forward_hook(record) for m in model.modules() if isinstance(m, nn.Linear)]
    try:
        ids = tokenizer(CALIBRATION_TEXT, return_tensors="pt").input_ids.to(model.device)
        model(input_ids=ids)
    finally:
        for hook in hooks:
            hook.remove()
    return maxima


@torch.no_grad()
def _smooth(norm_weight: torch.Tensor, consumers: list[nn.Linear], input_max: torch.Tensor) -> None:
    """Divide the channels the norm writes by s, and multiply the consumers' weight columns by s."""
    weight_max = torch.stack([c.weight.abs().amax(dim=0) for c in consumers]).amax(dim=0)
    scale = input_max.clamp(min=1e-5).pow(ALPHA) / weight_max.clamp(min=1e-5).pow(1 - ALPHA)
    scale = scale.clamp(min=1e-5)
    norm_weight.div_(scale)
    for consumer in consumers:
        consumer.weight.mul_(scale)


def _int8(linear: nn.Linear) -> nn.Module:
    """The layer with int8 weights, one scale per output channel, and its input quantized per call."""
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    with warnings.catch_warnings():  # deprecated in favour of torchao, but the pinned torch's fbgemm int8 path
        warnings.simplefilter("ignore")
        wrapped = torch.ao.quantization.quantize_dynamic(nn.Sequential(linear), {nn.Linear: qconfig}, dtype=torch.qint8)
    return wrapped[0]
