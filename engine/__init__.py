"""genui's engine: block diffusion (DiffusionGemma or an adapted causal LM) behind a small, typed, streaming interface.

The frame types import eagerly; everything that needs torch and transformers imports on first use, so that
``from engine.frames import ...`` (the web layer's whole view of the engine) does not load a deep-learning stack.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.frames import (
    CanvasFrame,
    DoneFrame,
    EngineError,
    EngineOverloaded,
    Frame,
    GenerationRequest,
    QueuedFrame,
    StepFrame,
    TextEngine,
)

if TYPE_CHECKING:
    from engine.autoregressive import AutoregressiveEngine
    from engine.identity import ModelLoadError, model_id
    from engine.infill import InfillRequest
    from engine.loading import LoadedModel, load_model
    from engine.scheduler import Scheduler

_LAZY = {
    "AutoregressiveEngine": "engine.autoregressive",
    "InfillRequest": "engine.infill",
    "LoadedModel": "engine.loading",
    "ModelLoadError": "engine.identity",
    "load_model": "engine.loading",
    "model_id": "engine.identity",
    "Scheduler": "engine.scheduler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


def load_engine(
    model: str | Path | None = None,
    device: str | None = None,
    quantize: str | None = None,
    dtype: Any = None,
    base: str | Path | None = None,
    **scheduler_kwargs: Any,
) -> Scheduler:
    """Load a checkpoint (default: the shipped model) and serve it: ``Scheduler(load_model(...), ...)``.

    ``model``, ``device``, ``quantize``, ``dtype`` and ``base`` are load_model's; the rest are the Scheduler's.
    """
    from engine.loading import load_model
    from engine.scheduler import Scheduler

    loaded = load_model(model, device=device, dtype=dtype, base=base, quantize=quantize)
    return Scheduler(loaded, **scheduler_kwargs)


__all__ = [
    "AutoregressiveEngine",
    "CanvasFrame",
    "DoneFrame",
    "EngineError",
    "EngineOverloaded",
    "Frame",
    "QueuedFrame",
    "GenerationRequest",
    "InfillRequest",
    "LoadedModel",
    "ModelLoadError",
    "Scheduler",
    "StepFrame",
    "TextEngine",
    "load_engine",
    "load_model",
    "model_id",
]
