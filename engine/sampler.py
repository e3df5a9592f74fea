"""DiffusionGemma's stock sampler and adaptive stopping, made observable step by step.

transformers' generate() keeps what the sampler accepted and which rows stopped denoising to itself; the streamed
frames need both. The model subclass below swaps in recording versions at the seams generate() offers
(``_prepare_sampler`` and ``_prepare_diffusion_stopping_criteria``); the sampling math stays the library's.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from transformers import DiffusionGemmaForBlockDiffusion
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaAdaptiveStopping,
    DiffusionGemmaGenerationConfig,
    EntropyBoundSampler,
)

# Every denoising step calls torch.compiler.cudagraph_mark_step_begin(), whose first call imports
# torch._inductor, which trips a DeprecationWarning inside torch.jit. Importing it here, once and quietly, keeps
# that warning (not ours to fix) out of callers that treat warnings as errors.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.")
    import torch._inductor.cudagraph_trees  # noqa: F401


class RecordingSampler(EntropyBoundSampler):
    """The entropy-bound sampler, keeping per-row statistics of its latest acceptance step."""

    accepted: torch.Tensor | None = None  # (B,) canvas positions accepted at the latest step
    entropy: torch.Tensor | None = None  # (B,) mean token entropy of the latest step's processed logits

    def accept_canvas(
        self,
        current_canvas: torch.LongTensor,
        denoiser_canvas: torch.LongTensor,
        logits: torch.Tensor,
        cur_step: int,
    ) -> torch.LongTensor:
        accepted_canvas = super().accept_canvas(current_canvas, denoiser_canvas, logits, cur_step)
        self.accepted = self.accepted_token_mask.sum(dim=-1)
        # The entropy the sampler and the confidence criterion use, in one softmax: torch.distributions takes three
        # times as long, and this runs every denoising step. entr(0) = 0 keeps pinned (-inf) logits finite.
        self.entropy = torch.special.entr(torch.softmax(logits.float(), dim=-1)).sum(dim=-1).mean(dim=-1)
        return accepted_canvas


class RecordingStopping(DiffusionGemmaAdaptiveStopping):
    """Wraps an adaptive stopping criterion and remembers which rows have stopped denoising the current canvas."""

    def __init__(self, inner: DiffusionGemmaAdaptiveStopping) -> None:
        self.inner = inner
        self.finished: torch.Tensor | None = None  # (B,) bool, since the canvas began

    def __call__(self, argmax_canvas: torch.LongTensor, logits: torch.Tensor, **kwargs: Any) -> torch.BoolTensor:
        done = self.inner(argmax_canvas, logits, **kwargs)
        self.finished = done if self.finished is None else self.finished | done
        return done

    def reset(self) -> None:
        self.inner.reset()
        self.finished = None


class ObservedDiffusionGemma(DiffusionGemmaForBlockDiffusion):
    """DiffusionGemmaForBlockDiffusion whose generate() exposes its sampler and stopping criterion.

    ``sampler`` and ``stopping`` belong to the generate() call in progress (or the latest one). They are plain
    attributes because one worker thread owns the model: two concurrent generate() calls would overwrite them.
    """

    sampler: RecordingSampler | None = None
    stopping: RecordingStopping | None = None

    # transformers decides whether a model may use the fast grouped-matmul experts by searching the source of the
    # module that defines the class for "@use_experts_implementation"; this module inherits the decorated experts
    # without spelling the decorator, so the search would fall back to the slow per-expert loop. Answer it here.
    _can_set_experts_implementation_cached_value = True

    def _prepare_sampler(self, generation_config: DiffusionGemmaGenerationConfig) -> EntropyBoundSampler:
        self.sampler = RecordingSampler(
            config=generation_config.sampler_config,
            canvas_length=self.config.canvas_length,
            vocab_size=self.config.text_config.vocab_size,
            max_denoising_steps=generation_config.max_denoising_steps,
        )
        return self.sampler

    def _prepare_diffusion_stopping_criteria(
        self, generation_config: DiffusionGemmaGenerationConfig
    ) -> DiffusionGemmaAdaptiveStopping | None:
        inner = super()._prepare_diffusion_stopping_criteria(generation_config)
        self.stopping = None if inner is None else RecordingStopping(inner)
        return self.stopping
