"""Loading a DiffusionGemma checkpoint (a folder or a hub id) onto a device, with errors that say what to do."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from engine.frames import EngineError
from engine.sampler import ObservedDiffusionGemma

# The shipped model: a save_pretrained folder committed next to the engine package (models/ in a checkout), which
# a wheel carries inside the package (engine/_bundle/models, mapped in by setup.py).
_INSTALLED_MODELS = Path(__file__).resolve().parent / "_bundle" / "models"
_MODELS = _INSTALLED_MODELS if _INSTALLED_MODELS.is_dir() else Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = _MODELS / "genui-small"


class ModelLoadError(EngineError):
    """The model could not be loaded; the message names what was asked for and how to fix it."""


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model ready to generate: weights on ``device`` in eval mode, and the tokenizer that goes with them."""

    model: ObservedDiffusionGemma
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    model_id: str  # folder name plus a short fingerprint of its files, or the hub id
    canvas_length: int  # tokens the model denoises at once

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())  # tied weights are counted once


def load_model(
    model: str | Path | None = None, device: str | None = None, dtype: torch.dtype | None = None
) -> LoadedModel:
    """Load a DiffusionGemma checkpoint.

    ``model`` is a folder written by ``save_pretrained`` or a hub id (default: the shipped ``models/genui-small``).
    ``device`` defaults to CUDA when there is one, else CPU; ``dtype`` to bfloat16 on CUDA and float32 elsewhere.
    """
    source, model_id = _resolve(model)
    target = _device(device)
    if dtype is None:
        dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read a model config from {source}: {_first_line(exc)}") from exc
    if config.model_type != "diffusion_gemma":
        raise ModelLoadError(
            f"{source} holds a {config.model_type!r} checkpoint; genui's engine runs DiffusionGemma "
            "(model_type 'diffusion_gemma') checkpoints only"
        )
    placement: dict[str, Any] = {}
    if target.type == "cuda" and importlib.util.find_spec("accelerate") is not None:
        placement["device_map"] = str(target)  # straight onto the GPU instead of through host memory
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        network = ObservedDiffusionGemma.from_pretrained(source, config=config, dtype=dtype, **placement)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the model in {source}: {_first_line(exc)}") from exc
    if target.type == "cpu":
        _fit_threads_to_cpus()
    network.to(target).eval()
    return LoadedModel(
        model=network, tokenizer=tokenizer, device=target, model_id=model_id, canvas_length=config.canvas_length
    )


def _resolve(model: str | Path | None) -> tuple[str, str]:
    """The string from_pretrained gets and the id the engine reports."""
    if model is None:
        model = DEFAULT_MODEL
        if not model.is_dir():
            raise ModelLoadError(
                f"the default model is missing at {model}; train it (see docs/engine.md) or pass --model "
                "with a checkpoint folder or hub id"
            )
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path), f"{path.resolve().name}@{_fingerprint(path)}"
    name = str(model)
    if isinstance(model, Path) or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelLoadError(f"no model folder at {path}; pass a save_pretrained folder or a hub id like owner/name")
    return name, name  # a hub id: from_pretrained resolves it (or finds it in the local cache)


def _fingerprint(folder: Path) -> str:
    """A short digest that changes when the checkpoint does, without reading gigabytes of weights.

    Configs are hashed whole; each weight file contributes its size and its first and last MiB, which hold the
    safetensors header and tensor data (retrained weights change both ends).
    """
    digest = hashlib.sha256()
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        if (folder / name).is_file():
            digest.update((folder / name).read_bytes())
    for weights in sorted(folder.glob("*.safetensors")):
        size = weights.stat().st_size
        digest.update(str(size).encode())
        with weights.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            handle.seek(max(0, size - (1 << 20)))
            digest.update(handle.read())
    return digest.hexdigest()[:10]


def _device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        target = torch.device(device)
    except RuntimeError as exc:
        raise ModelLoadError(f"{device!r} is not a device name; use cpu or cuda (cuda:N for one GPU)") from exc
    if target.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {device!r} was asked for but this machine has no CUDA GPU; use --device cpu")
        if target.index is not None and target.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device {device!r} does not exist; this machine has {torch.cuda.device_count()} CUDA GPU(s)"
            )
    elif target.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"device {device!r} was asked for but MPS is not available here; use --device cpu")
    elif target.type not in ("cpu", "cuda", "mps"):
        raise ModelLoadError(f"device {device!r} is not supported; use cpu or cuda")
    return target


def _fit_threads_to_cpus() -> None:
    # torch sizes its pool from the host's cores, but a container or taskset may grant us fewer; more threads than
    # CPUs makes every matmul slower. An explicit OMP_NUM_THREADS is the user's choice and wins.
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, min(torch.get_num_threads(), len(os.sched_getaffinity(0)))))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
