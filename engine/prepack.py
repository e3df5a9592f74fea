"""A model's linear layers with their bfloat16 weights laid out once for oneDNN's CPU kernels.

On a CPU, torch's bfloat16 linear hands oneDNN a plain weight, which its matrix kernels (AMX, AVX512-BF16) first
copy into their blocked layout: a whole extra pass over the model's weights at every forward, and the weights are
most of what a small model's forward reads. Laid out once at load time, as torch.compile's freezing pass does for
its CPU kernels, the model computes the same logits bit for bit, sooner: on a 2-core Intel Xeon with AMX the
shipped model's forward ran 1.18-1.26x faster (64 rows 67.0 -> 54.9 ms, one row 46.2 -> 36.8 ms, interleaved;
docs/benchmarks.md, session 49). In float32 torch takes other kernels, and laying the weights out for oneDNN's
made them slower there, so float32 weights stay as they are. A weight tied to another module (an LM head sharing
the embeddings) is copied: 57 MB more for SmolLM2-135M's head.

The two operators are torch's own (``torch.ops.mkldnn``, which inductor calls); where this torch lacks them, or
the model reads a linear layer's ``.weight`` itself (``check`` fails), the model is left as it was. The packed
layers are for inference: no gradient reaches their weights.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class PackedLinear(nn.Module):
    """``nn.Linear``'s forward over a weight laid out for oneDNN, for inference (no gradient reaches the weight)."""

    def __init__(self, linear: nn.Linear, rows: int) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # the layout suits products of about ``rows`` input rows; any other count computes the same, as correctly
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), rows)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def can_prepack(model: nn.Module) -> bool:
    """Whether prepack() may change ``model``: on the CPU, with a torch that has oneDNN's operators."""
    weight = next(model.parameters())
    if weight.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight  # noqa: B018 (an operator torch may not have; looked up, not called)
        torch.ops.mkldnn._linear_pointwise  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return True


def prepack(model: nn.Module, rows: int, check: Callable[[nn.Module], object] | None = None) -> int:
    """Replace each ``nn.Linear`` of ``model`` whose weight is bfloat16 on the CPU with a ``PackedLinear`` laid out
    for ``rows`` input rows (the engine's canvas), where can_prepack() says it can; returns how many it replaced.
    ``check(model)`` then runs (a forward); if it raises, every layer is put back and none counts."""
    if not can_prepack(model):
        return 0
    linears = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        and module.weight.dtype == torch.bfloat16
        and module.weight.device.type == "cpu"
    ]

    if not linears:  # float32 or int8 layers: nothing to lay out, and no forward to check
        return 0

    def place(name: str, module: nn.Module) -> None:
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, module)

    for name, linear in linears:
        place(name, PackedLinear(linear, rows))
    if check is not None:
        try:
            with torch.inference_mode():
                check(model)
        except Exception:  # a model that reads its layers' weights (transformers' Mamba reads lm_head.weight)
            for name, linear in linears:
                place(name, linear)
            return 0
    return len(linears)
