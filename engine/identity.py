"""Which model a name or folder means, and its id, without torch: the page cache keys on the id, and genui serve
reads it before the weights load, so that cached pages are served meanwhile (genui/app.py)."""

from __future__ import annotations

import hashlib
import json
import socket
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from engine.frames import EngineError

# The shipped model: a folder committed next to the engine package (models/ in a checkout), which a wheel carries
# inside the package (engine/_bundle/models, mapped in by setup.py).
_INSTALLED_MODELS = Path(__file__).resolve().parent / "_bundle" / "models"
_MODELS = _INSTALLED_MODELS if _INSTALLED_MODELS.is_dir() else Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = _MODELS / "genui-smollm"


class ModelLoadError(EngineError):
    """The model could not be loaded; the message names what was asked for and how to fix it."""


class ModelUnreachable(ModelLoadError):
    """The model's weights are elsewhere, and this machine cannot reach them now (no network): the same load may work
    later, with nothing changed."""


def model_id(model: str | Path | None = None) -> str:
    """The id ``load_model(model)`` reports, found without loading weights (a few small reads, the hub not asked):
    what a page cache keys on, so that cached pages can be served while the model loads. Raises ModelLoadError as
    load_model would for a folder that is missing or no folder."""
    return _named(model)[1]


def resolve(model: str | Path | None) -> tuple[str, str]:
    """The string from_pretrained gets and the id the engine reports."""
    source, named_id = _named(model)
    if source == named_id:  # a hub id (a folder's id carries its fingerprint)
        return hub_source(source), named_id
    return source, named_id


def _named(model: str | Path | None) -> tuple[str, str]:
    """A folder and its id (name@fingerprint), or a hub id twice."""
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
        return str(path), with_base(folder_id(path), _adapter_base(path))
    name = str(model)
    if isinstance(model, Path) or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelLoadError(f"no model folder at {path}; pass a save_pretrained folder or a hub id like owner/name")
    return name, name


PINNED_BASE = "smollm2-135m-instruct"  # genui.json's name for engine.base's pinned wheel


def folder_id(folder: Path) -> str:
    """A checkpoint folder's id: its name and the fingerprint of its files."""
    return f"{folder.resolve().name}@{fingerprint(folder)}"


def with_base(adapter_id: str, base: str | Path | None) -> str:
    """An adapter's id on ``base``: as it is on the pinned base (or none: not an adapter), else with the base's id
    after a ``+``, a folder's by its fingerprint. The weights served are the base's merged with the adapter's: an
    adapter of one's own base kept its id when the base was trained on, and a server showed the pages the old base
    wrote."""
    if base is None or str(base) == PINNED_BASE:
        return adapter_id
    folder = Path(base).expanduser()
    return f"{adapter_id}+{folder_id(folder) if folder.is_dir() else base}"


def _adapter_base(folder: Path) -> str | None:
    """The base a genui adapter's genui.json names, found as engine.loading finds it (``found_base``; else a hub id as
    named); None for a folder that is no adapter or whose file cannot be read (loading says why)."""
    try:
        spec = json.loads((folder / "genui.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(spec, dict):
        return None
    base = str(spec.get("base", PINNED_BASE))
    return found_base(base, spec.get("base_folder"), folder) or base


def found_base(base: str, kept: object, adapter: Path) -> str | None:
    """The base genui.json names as ``base``, where it is here: the pinned one by name; a folder as named (from the
    current folder), inside the adapter's folder, or at ``kept`` (``base_folder``, where genui.json says it was when
    exported: an adapter of ``--base llama`` loaded only where ./llama was). None where it is none of those."""
    path = Path(base).expanduser()
    if base == PINNED_BASE or path.is_dir():
        return base
    if not path.is_absolute() and (adapter / path).is_dir():
        return str(adapter / path)
    if isinstance(kept, str) and Path(kept).is_dir():
        return kept
    return None


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")  # any one will do
HUB_PROBE_S = 3.0  # how long a connection to the model hub may take before it counts as out of reach


def hub_source(name: str) -> str:
    """What from_pretrained gets for hub id ``name``: its copy in the hub's local cache where that copy is whole (read
    offline, asking the hub nothing), else the id itself, for transformers to fetch or finish fetching. A hub this
    machine cannot reach is a ModelLoadError at once: huggingface_hub retries a connection five times over 23 s, for
    each file, before it gives up (a mistyped name waited 26 s, offline, for an error)."""
    from huggingface_hub import constants

    cached = cached_copy(name)
    if cached is not None and whole(cached):
        return str(cached)
    out_of_reach = (
        "it is set offline (HF_HUB_OFFLINE)" if constants.is_offline_mode() else _unreachable(constants.ENDPOINT)
    )
    if out_of_reach:
        held = (
            f"only part of hub id {name!r} in the hub's cache ({cached}: no weights, config or tokenizer)"
            if cached is not None
            else f"no copy of hub id {name!r} in the hub's cache ({constants.HF_HUB_CACHE})"
        )
        # (set offline, it stays so until a restart: trying again changes nothing, and costs nothing either, while
        # the pages cached for the model are served)
        raise ModelUnreachable(
            f"no folder {name!r} here, {held}, and the model hub cannot be asked: {out_of_reach}. Name an existing"
            f" folder (./{name} for one here), or fetch the model where the hub can be reached"
        )
    return name


def cached_copy(name: str) -> Path | None:
    """The folder of hub id ``name``'s newest copy in the hub's local cache, whole or not; None where there is none.
    ModelLoadError for a name that is no hub id."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:
        return None
    except ValueError as exc:  # not a well-formed id: "Repo id must use alphanumeric chars ..."
        raise ModelLoadError(f"no model folder {name!r} here, and it is no hub id ({exc}); name a folder") from exc


def whole(folder: Path) -> bool:
    """Whether a cached copy holds a checkpoint to load: its config (or genui.json), a tokenizer, and its weights,
    every shard an index names. transformers fetches file by file, so a fetch stopped part way leaves a copy with
    its config and tokenizer and no weights, which from_pretrained given the id would finish."""
    if not any((folder / config).is_file() for config in ("config.json", "genui.json")):
        return False
    if not any((folder / tokenizer).is_file() for tokenizer in TOKENIZER_FILES):
        return False
    for index in [*folder.glob("*.safetensors.index.json"), *folder.glob("*.bin.index.json")]:
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        return all((folder / shard).is_file() for shard in shards)
    weights = ("model*.safetensors", "pytorch_model*.bin", "adapter_model.safetensors", "adapter_model.bin")
    return any(any(folder.glob(pattern)) for pattern in weights)  # not training_args.bin


def _unreachable(endpoint: str) -> str:
    """Why a connection to the hub at ``endpoint`` fails within HUB_PROBE_S, or "" when it opens (or goes through a
    proxy, HTTPS_PROXY and its kin, which huggingface_hub uses and this probe cannot judge)."""
    parts = urlsplit(endpoint)
    proxies = urllib.request.getproxies()
    if (parts.scheme in proxies or "all" in proxies) and not urllib.request.proxy_bypass(parts.hostname or ""):
        return ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=HUB_PROBE_S).close()
    except OSError as exc:
        return f"{parts.hostname}:{port} does not answer ({exc})"
    return ""


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
