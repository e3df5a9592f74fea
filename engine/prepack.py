"""A model's linear layers with their bfloat16 weights laid out once for oneDNN's CPU kernels.

On a CPU, torch's bfloat16 linear hands oneDNN a plain weight, which its matrix kernels (AMX, AVX512-BF16) first
copy into their blocked layout: a whole extra pass over the model's weights at every forward, and the weights are
most of what a small model's forward reads. Laid out once at load time, as torch.compile's freezing pass does for
its CPU kernels, the model computes the same logits bit for bit, sooner: on a 2-core Intel Xeon with AMX, the
shipped model's 64-token forward took 66 ms against 81, and a one-token forward 43 ms against 55
(docs/benchmarks.md, session 49). In float32 torch takes other kernels, and laying the weights out for oneDNN's
made them slower there, so float32 weights stay as they are.

The two operators are torch's own (``torch.ops.mkldnn``, which inductor calls); where this torch lacks them the
model is left as it was.
"""

from __future__ import annotations

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
    """Whether prepack() would change ``model``: bfloat16 weights on the CPU, and a torch with oneDNN's operators."""
    weight = next(model.parameters())
    if weight.device.type != "cpu" or weight.dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight  # noqa: B018 (an operator torch may not have; looked up, not called)
        torch.ops.mkldnn._linear_pointwise  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return True


def prepack(model: nn.Module, rows: int) -> int:
    """Replace every ``nn.Linear`` of ``model`` with a ``PackedLinear`` laid out for ``rows`` input rows (the
    engine's canvas), where can_prepack() says it can; returns how many it replaced. A weight tied to another
    module (an LM head sharing the embeddings) is copied: the other module keeps the plain one."""
    if not can_prepack(model):
        return 0
    linears = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    for name, linear in linears:
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, PackedLinear(linear, rows))
    return len(linears)
