"""transformers' SDPA attention, with a grouped-query model's keys and values read in place on the CPU.

Given a mask, transformers' SDPA attention copies a grouped-query model's keys and values out to every query head
(``repeat_kv``), because CUDA's fast kernels take no mask together with torch's ``enable_gqa``. genui's forwards
always carry a mask (left padding, a canvas that sees itself both ways), so on the CPU every layer copied its keys
and values threefold at every step (SmolLM2-135M: 9 query heads, 3 key-value heads). torch's CPU kernel reads the
groups in place: a 64-row step of the shipped model over a 300-token prefix took 56.4 ms against 62.1, 16 rows
37.7 against 44.4, the logits bit for bit the same (docs/benchmarks.md, session 51).

It is registered with transformers' public ``AttentionInterface`` and ``AttentionMaskInterface`` under ``NAME``, and
a CPU model is switched to it with ``use_grouped_sdpa``; anything it does not handle itself (no mask, a position
bias, a softcap) goes to transformers' own function.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, AttentionMaskInterface, PreTrainedModel

NAME = "genui_grouped_sdpa"

_SDPA = AttentionInterface()["sdpa"]


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,  # (B, H, Q, D)
    key: torch.Tensor,  # (B, KV, K, D)
    value: torch.Tensor,  # (B, KV, K, D)
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    plain = kwargs.get("position_bias") is None and kwargs.get("softcap") is None
    if attention_mask is None or not plain or query.device.type != "cpu":
        return _SDPA(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    output = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return output.transpose(1, 2).contiguous(), None  # (B, Q, H, D), as transformers' attention functions return


AttentionInterface.register(NAME, grouped_sdpa)
AttentionMaskInterface.register(NAME, AttentionMaskInterface()["sdpa"])  # the masks SDPA takes


def use_grouped_sdpa(model: PreTrainedModel) -> bool:
    """Switch a CPU model that runs transformers' SDPA attention to ``grouped_sdpa``; whether it did."""
    weight = next(model.parameters())
    if weight.device.type != "cpu" or getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(NAME)
    return True
