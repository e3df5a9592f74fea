"""Which model a name or folder means, and its id, without torch: the page cache keys on the id, and genui serve
reads it before the weights load, so that cached pages are served meanwhile (genui/app.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.frames import EngineError

# The shipped model: a folder committed next to the engine package (models/ in a checkout), which a wheel carries
# inside the package (engine/_bundle/models, mapped in by setup.py).
_INSTALLED_MODELS = Path(__file__).resolve().parent / "_bundle" / "models"
_MODELS = _INSTALLED_MODELS if _INSTALLED_MODELS.is_dir() else Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = _MODELS / "genui-smollm"


class ModelLoadError(EngineError):
    """The model could not be loaded; the message names what was asked for and how to fix it."""


def model_id(model: str | Path | None = None) -> str:
    """The id ``load_model(model)`` reports, found without loading weights (a few small reads): what a page cache
    keys on, so that cached pages can be served while the model loads. Raises ModelLoadError as load_model would."""
    return resolve(model)[1]


def resolve(model: str | Path | None) -> tuple[str, str]:
    """The string from_pretrained gets and the id the engine reports."""
    if model is None:
        model = DEFAULT_MODEL
        if not model.is_dir():
            raise ModelLoadError(
                f"the default model is missing at {model}; make it with genui adapt (see docs/model.md) or pass "
                "--model with a checkpoint folder or hub id"
            )
    path = Path(model).expanduser()
    if path.is_file():  # transformers would read it as a hub id, and ask the hub for a minute
        raise ModelLoadError(f"{path} is a file; --model takes the folder a checkpoint is saved in: {path.parent}")
    if path.is_dir():
        return str(path), f"{path.resolve().name}@{fingerprint(path)}"
    name = str(model)
    if isinstance(model, Path) or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelLoadError(f"no model folder at {path}; pass a save_pretrained folder or a hub id like owner/name")
    return name, name  # a hub id: from_pretrained resolves it (or finds it in the local cache)


def fingerprint(folder: Path) -> str:
    """A short digest that changes when the checkpoint does, without reading gigabytes of weights.

    Configs are hashed whole; each weight file (safetensors, or torch's pytorch_model.bin) contributes its size and
    its first and last MiB, which hold the header and tensor data (retrained weights change both ends). A .bin was
    left out: its weights changed, the id did not, and a server showed the pages the old weights wrote.
    """
    digest = hashlib.sha256()
    for name in ("config.json", "genui.json", "adapter_config.json", "generation_config.json", "tokenizer.json"):
        if (folder / name).is_file():
            digest.update((folder / name).read_bytes())
    weight_files = [*folder.glob("*.safetensors"), *folder.glob("*.bin"), *folder.glob("*.pth")]  # torch's too
    for weights in sorted(weight_files):
        size = weights.stat().st_size
        digest.update(str(size).encode())
        with weights.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            handle.seek(max(0, size - (1 << 20)))
            digest.update(handle.read())
    return digest.hexdigest()[:10]
