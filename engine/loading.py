"""Loading a model for the engine: either family, a folder or a hub id, onto a device, with errors that say what
to do.

- A folder with ``genui.json`` of family ``adapted-causal-lm`` is genui's adapter: a LoRA (peft) on a causal-LM
  base. The base is the pinned SmolLM2 (engine.base fetches and converts it once) or the folder or hub id that
  ``genui.json`` or the ``base`` argument names. The LoRA is merged into the base weights for inference.
- A DiffusionGemma checkpoint (``model_type`` ``diffusion_gemma``) runs as it is.
- Any other causal LM runs unadapted in the causal layout (engine.causal): useful only as a starting point.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from engine.denoise import DenoiseSettings
from engine.frames import EngineError
from engine.identity import (
    PINNED_BASE,
    TOKENIZER_FILES,
    ModelLoadError,
    cached_copy,
    folder_id,
    found_base,
    hub_source,
    resolve,
    with_base,
)

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

ADAPTED = "adapted-causal-lm"
DEFAULT_CAUSAL_CANVAS = 64
# The causal LMs engine.causal drives: a ...ForCausalLM whose decoder is at .model, with its layers
LLAMA_SHAPED = (
    "Llama-shaped causal LMs (a ...ForCausalLM with its decoder layers at .model.layers: Llama, SmolLM, Qwen, Mistral,"
    " Gemma, Phi-3 and most others)"
)
# What a folder's tokenizer is saved as (any one): a fast tokenizer, its config, or a slow one's vocabulary


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model ready to denoise: weights on ``device`` in eval mode, the tokenizer, and the sampler defaults."""

    denoiser: Any  # engine.gemma.GemmaDenoiser or engine.causal.CausalDenoiser
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    model_id: str  # folder name plus a short fingerprint of its files, or the hub id
    canvas_length: int  # tokens the model denoises at once
    defaults: DenoiseSettings  # the checkpoint's sampler settings (max_canvases is a placeholder)
    family: str = "diffusion-gemma"
    weights: str = ""  # what the weights compute in: float32, bfloat16, or int8 (engine.quantize)
    param_count: int = 0  # counted before quantizing, which hides the int8 layers' weights from parameters()

    @property
    def model(self) -> torch.nn.Module:
        return self.denoiser.model  # type: ignore[no-any-return]

    @property
    def params(self) -> int:
        # tied weights are counted once
        return self.param_count or sum(p.numel() for p in self.model.parameters())


def load_model(
    model: str | Path | None = None,
    device: str | None = None,
    dtype: torch.dtype | str | None = None,
    base: str | Path | None = None,
    quantize: str | None = None,
) -> LoadedModel:
    """Load a checkpoint of either family (default: the shipped ``models/genui-smollm`` adapter).

    ``device`` defaults to CUDA when there is one, else CPU. ``dtype`` (a torch dtype or its name, ``"bfloat16"``)
    defaults to ``default_dtype(device)``, except a DiffusionGemma on the CPU, which runs in float32. ``base``
    replaces the base an adapter names (a folder or hub id). ``quantize="int8"`` runs a causal LM's linear layers in
    int8 on the CPU (engine.quantize), from float32.
    """
    dtype = _dtype(dtype)
    source, model_id = resolve(model)
    target = _device(device)
    if quantize not in (None, "int8"):
        raise ModelLoadError(f"quantize={quantize!r} is not one genui knows; use int8, or leave it out")
    if quantize and target.type != "cpu":
        picked = f"--device {device}" if device else f"the default device here ({target}: a GPU)"
        raise ModelLoadError(f"int8 runs on the CPU, and {picked} is not the CPU: pass --device cpu with --int8")
    if quantize and dtype not in (None, torch.float32):
        raise ModelLoadError(f"int8 starts from float32 weights, not {dtype}: leave the dtype out with int8")
    if quantize:
        dtype = torch.float32
    genui_file = Path(source) / "genui.json"
    if genui_file.is_file():
        return _load_adapted(source, model_id, genui_file, target, dtype or default_dtype(target), base, quantize)
    if base is not None:
        raise ModelLoadError(
            f"base= is the base of a genui adapter, and {source} is none (no genui.json): leave it out"
        )
    if Path(source).is_dir() and not (Path(source) / "config.json").is_file():
        if (Path(source) / "adapter_config.json").is_file():  # a LoRA that peft saved, as genui adapt's are
            raise ModelLoadError(_no_genui_json(Path(source)))
        raise ModelLoadError(
            f"{source} holds no config.json (nor genui.json): it is no checkpoint; name a folder that save_pretrained"
            " or genui adapt wrote"
        )
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and not Path(source).exists():  # a name taken for a hub id (`checkpoints/run1`)
            raise ModelLoadError(
                f"no folder {str(source)!r} here, and the model hub did not give a model of that id"
                f" ({_first_line(exc)}); name an existing folder (./{source} for one here), or a hub id this"
                " machine can fetch"
            ) from exc
        raise ModelLoadError(f"cannot read a model config from {source}: {_first_line(exc)}") from exc
    if config.model_type == "diffusion_gemma":
        if quantize:
            raise ModelLoadError(f"{source} is a DiffusionGemma checkpoint; int8 is for causal LMs (engine.quantize)")
        if dtype is None:
            dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
        return _load_gemma(source, model_id, config, target, dtype)
    if any(name.endswith("ForCausalLM") for name in getattr(config, "architectures", None) or []):
        network, tokenizer = _causal_lm(source, target, dtype or default_dtype(target))
        defaults = _sampler_defaults(_settings_folder(source))
        return _causal(
            network, tokenizer, target, model_id, DEFAULT_CAUSAL_CANVAS, defaults, source=source, quantize=quantize
        )
    causal = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type, "")
    if not getattr(config, "architectures", None) and causal.endswith("ForCausalLM"):
        raise ModelLoadError(
            f"{source}'s config.json names no architectures, so it is not known to be a causal LM: add"
            f' "architectures": ["{causal}"]'
        )
    raise ModelLoadError(
        f"{source} holds a {config.model_type!r} checkpoint, which genui cannot run; it runs DiffusionGemma"
        f" checkpoints, {LLAMA_SHAPED}, and genui adapters (a folder with genui.json)"
    )


def _dtype(value: torch.dtype | str | None) -> torch.dtype | None:
    """A floating-point torch dtype, given as one or by name (``"bfloat16"``, ``"torch.float16"``)."""
    if isinstance(value, str):
        value = getattr(torch, value.removeprefix("torch."), value)
    if value is None or (isinstance(value, torch.dtype) and value.is_floating_point):
        return value
    raise ModelLoadError(
        f"dtype={value!r} is no floating-point torch dtype: use bfloat16, float16 or float32 (a name or torch's own),"
        " or leave it out for the device's default"
    )


def default_dtype(target: torch.device) -> torch.dtype:
    """What a causal LM computes in unless told: bfloat16, but float32 on a CPU without bfloat16 matrix units.

    Without them (x86 CPUs short of AVX512-BF16 or AMX; Arm CPUs without the BF16 extension) oneDNN emulates bfloat16,
    and a denoising step, a 64-token matrix product, runs several times slower than in float32: the bench page took
    45-77 s in bfloat16 and 10.3 s in float32 on a 2-core AVX2 EPYC (docs/benchmarks.md, session 13). Decoding one
    token at a time is memory-bound and faster in bfloat16 even there; the engine's work is canvases."""
    if target.type != "cpu" or _cpu_has_bf16_units():
        return torch.bfloat16
    return torch.float32


def _cpu_has_bf16_units() -> bool:
    if platform.machine().lower() in ("x86_64", "amd64"):
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # on Arm: the BF16 extension


def _placement(target: torch.device) -> dict[str, Any]:
    if target.type == "cuda" and importlib.util.find_spec("accelerate") is not None:
        return {"device_map": str(target)}  # straight onto the GPU instead of through host memory
    return {}


def _load_gemma(source: str, model_id: str, config: Any, target: torch.device, dtype: torch.dtype) -> LoadedModel:
    from transformers import DiffusionGemmaForBlockDiffusion

    from engine.gemma import GemmaDenoiser

    _has_tokenizer(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        network = DiffusionGemmaForBlockDiffusion.from_pretrained(
            source, config=config, dtype=dtype, **_placement(target)
        )
    except (OSError, ValueError, SafetensorError) as exc:
        raise ModelLoadError(f"cannot load the model in {source}: {_first_line(exc)}") from exc
    except (AttributeError, TypeError) as exc:  # transformers' own check of a mistyped generation_config.json
        raise ModelLoadError(
            f"cannot load the model in {source}: {_first_line(exc)} (check the types in its generation_config.json)"
        ) from exc
    if target.type == "cpu":
        _fit_threads_to_cpus()
    _tokens_fit(network, tokenizer, source)
    network.to(target).eval()
    weights = str(dtype).removeprefix("torch.")
    denoiser = GemmaDenoiser(network, tokenizer)
    defaults = gemma_defaults(network)
    return LoadedModel(denoiser, tokenizer, target, model_id, config.canvas_length, defaults, weights=weights)


def gemma_defaults(network: DiffusionGemmaForBlockDiffusion) -> DenoiseSettings:
    """A DiffusionGemma's sampler settings, in generate()'s own precedence: the checkpoint's generation_config, then
    DiffusionGemma's global defaults. None of a causal LM's extras (refresh_every needs a denoiser that recomputes
    part of a canvas, which DiffusionGemma's decoder cannot)."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    merged = DiffusionGemmaGenerationConfig._get_default_generation_params()
    merged.update({k: v for k, v in network.generation_config.to_dict().items() if k in merged and v is not None})
    sampler = merged["sampler_config"]
    bound = sampler["entropy_bound"] if isinstance(sampler, dict) else sampler.entropy_bound
    return DenoiseSettings(
        max_canvases=1,
        max_steps=int(merged["max_denoising_steps"]),
        entropy_bound=float(bound),
        t_max=merged["t_max"],
        t_min=merged["t_min"],
        stability_threshold=merged["stability_threshold"],
        confidence_threshold=merged["confidence_threshold"],
    )


def _causal_lm(source: str | Path, target: torch.device, dtype: torch.dtype) -> tuple[Any, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM

    _has_tokenizer(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        network = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **_placement(target))
    except (OSError, ValueError, SafetensorError) as exc:
        raise ModelLoadError(f"cannot load the causal LM in {source}: {_first_line(exc)}") from exc
    if not hasattr(getattr(network, "model", None), "layers"):  # engine.causal drives the decoder at .model
        raise ModelLoadError(
            f"{source} holds a {type(network).__name__}, a causal LM genui cannot drive: it runs {LLAMA_SHAPED}"
        )
    return network, tokenizer


def _has_tokenizer(source: str | Path) -> None:
    """ModelLoadError for a folder with no tokenizer's files (transformers' own error stops at "one of:")."""
    folder = Path(source)
    if folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{source} has no tokenizer ({' or '.join(TOKENIZER_FILES[:2])}): copy its base model's tokenizer files"
            " into it (tokenizer.save_pretrained writes them)"
        )


def _load_adapted(
    source: str,
    model_id: str,
    genui_file: Path,
    target: torch.device,
    dtype: torch.dtype,
    base: str | Path | None,
    quantize: str | None,
) -> LoadedModel:
    from peft import PeftModel

    try:
        spec = json.loads(genui_file.read_text(encoding="utf-8"))
        family, canvas = spec["family"], spec["canvas_length"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(
            f"{genui_file}: needs family = {ADAPTED!r} and an integer canvas_length ({_first_line(exc)})"
        ) from exc
    if not isinstance(canvas, int) or isinstance(canvas, bool) or canvas < 1:
        raise ModelLoadError(f"{genui_file}: canvas_length must be a positive integer (tokens), got {canvas!r}")
    if family != ADAPTED:
        raise ModelLoadError(f"{genui_file}: family {family!r} is not one genui knows; use {ADAPTED!r}")
    _has_tokenizer(source)  # checked before the base is loaded and merged, a minute in
    given = base is not None
    if base is None:
        base = _named_base(str(spec.get("base", PINNED_BASE)), spec.get("base_folder"), Path(source), genui_file)
    else:  # the id names the base given, in place of the one genui.json names
        model_id = with_base(folder_id(Path(source)), base)
        if str(base) != PINNED_BASE and not Path(base).expanduser().is_dir():
            base = hub_source(str(base))  # a hub id given: its cached copy, or an error at once where none can be had
    if base == PINNED_BASE:
        from engine.base import ensure_base

        base = ensure_base()
        try:
            network, _ = _causal_lm(base, target, dtype)
        except ModelLoadError as exc:  # written by genui, so damaged since (a full disk, a power cut, a hand)
            raise ModelLoadError(f"{exc}. Fix: delete {base}; genui fetches the base weights again") from exc
    else:
        network, _ = _causal_lm(base, target, dtype)
    try:
        with warnings.catch_warnings():  # peft asks transformers a question it has renamed; harmless
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
            network = PeftModel.from_pretrained(network, source).merge_and_unload()
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the adapter in {source} onto {base}: {_first_line(exc)}") from exc
    except RuntimeError as exc:  # torch, through peft: "size mismatch for ...", the shapes of another base's layers
        mismatch = next((line.strip() for line in str(exc).splitlines() if "size mismatch" in line), None)
        if mismatch is None:  # (out of memory, and the like: not the base's)
            raise
        fix = (
            "pass the base it was trained on"
            if given
            else f'write the base it was trained on as "base" in {genui_file}'
        )
        raise ModelLoadError(
            f"the adapter in {source} does not fit the base {base}, so it was trained on another ({mismatch}): {fix}"
        ) from exc
    defaults = _sampler_defaults(Path(source))
    return _causal(
        network, tokenizer, target, model_id, canvas, defaults, source=source, family=ADAPTED, quantize=quantize
    )


def _named_base(base: str, folder: object, adapter: Path, genui_file: Path) -> str:
    """The base an adapter's genui.json names, here (engine.identity.found_base), or a hub id. A path that is none of
    those is a ModelLoadError naming the file, where transformers would ask the hub for it and say "Repo id must be
    in the form ..." a minute later."""
    found = found_base(base, folder, adapter)
    if found is not None:
        return found
    if (
        Path(base).expanduser().is_absolute()
        or base.startswith((".", "~"))
        or base.count("/") > 1
        or folder is not None
    ):
        raise ModelLoadError(
            f"{genui_file} names its base {base!r}, which is no folder here: copy the base model to that path, or"
            ' write its folder or hub id as "base" in the file'
        )
    try:
        return hub_source(base)  # a hub id: its cached copy, or the id for from_pretrained to fetch
    except ModelLoadError as exc:  # (ModelUnreachable, which a server waits out, stays one)
        # the hub's answer for a name the developer did not type here: where it came from, and what to change
        raise type(exc)(f'{genui_file} names its base "{base}": {exc}; or write another as "base"') from exc


def _causal(
    network: Any,
    tokenizer: PreTrainedTokenizerBase,
    target: torch.device,
    model_id: str,
    canvas: int,
    defaults: DenoiseSettings,
    source: str,
    family: str = "causal-lm",
    quantize: str | None = None,
) -> LoadedModel:
    from engine.attention import use_grouped_sdpa
    from engine.causal import CausalDenoiser

    _tokens_fit(network, tokenizer, source)
    if target.type == "cpu":
        _fit_threads_to_cpus()
    network.to(target).eval()
    count = sum(p.numel() for p in network.parameters())
    weights = str(next(network.parameters()).dtype).removeprefix("torch.")
    if quantize:
        from engine.quantize import QuantizeError, quantize_int8

        try:
            network = quantize_int8(network, tokenizer)
        except QuantizeError as exc:
            raise ModelLoadError(f"{model_id}: {exc}") from exc
        weights = quantize
    else:
        from engine.prepack import prepack

        # bfloat16 on a CPU: the weights laid out once for oneDNN, not at every step; one token's forward checks it
        prepack(network, canvas, check=lambda model: model(input_ids=torch.zeros((1, 1), dtype=torch.long)))
    use_grouped_sdpa(network)  # on the CPU: a grouped-query model's keys and values read in place, not copied
    try:
        denoiser = CausalDenoiser(network, tokenizer, canvas)
    except ValueError as exc:  # a tokenizer with no end of text
        raise ModelLoadError(f"{model_id}: {exc}") from exc
    if canvas >= denoiser.max_positions and family == ADAPTED:
        raise ModelLoadError(
            f"{source}: canvas_length {canvas} leaves no room in the model's {denoiser.max_positions} positions; "
            "set a shorter one in its genui.json"
        )
    if canvas >= denoiser.max_positions:  # a causal LM run as it is: genui's canvas, fixed
        raise ModelLoadError(
            f"{source}: the model reads {denoiser.max_positions} positions (max_position_embeddings), and genui's"
            f" canvas for a causal LM is {canvas} tokens, with the prompt before it: run a model that reads more"
        )
    return LoadedModel(denoiser, tokenizer, target, model_id, canvas, defaults, family, weights, count)


def _no_genui_json(folder: Path) -> str:
    """What to write beside a peft adapter that has no genui.json: its base as adapter_config.json names it."""
    try:
        named = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        named = None
    base = named if isinstance(named, str) and named else "<the folder or hub id of the model it was trained on>"
    spec = json.dumps({"family": ADAPTED, "canvas_length": DEFAULT_CAUSAL_CANVAS, "base": base})
    return (
        f"{folder} holds a peft adapter but no genui.json, which says how genui runs it: write one beside"
        f" adapter_config.json, {spec}, with the canvas it was trained with (genui adapt's is"
        f" {DEFAULT_CAUSAL_CANVAS} tokens; docs/engine.md)"
    )


def _tokens_fit(network: Any, tokenizer: PreTrainedTokenizerBase, source: str) -> None:
    """A tokenizer with more tokens than the model has embeddings loaded, then failed every page with an IndexError
    (the server said it was ready): refused here, naming both, and the tokens past the embeddings where they are
    tokens added to the tokenizer (a pad token added in training, the embeddings never resized)."""
    rows = network.get_input_embeddings().num_embeddings
    if len(tokenizer) <= rows:
        return
    added = {index: token.content for index, token in tokenizer.added_tokens_decoder.items() if index >= rows}
    if len(added) == len(tokenizer) - rows:
        raise ModelLoadError(
            f"{source}: its tokenizer has tokens added past the {rows} the model embeds (vocab_size):"
            f" {', '.join(repr(added[index]) for index in sorted(added))}; resize the model's embeddings"
            " (resize_token_embeddings) and save it again, or take them out of the tokenizer"
        )
    raise ModelLoadError(
        f"{source}: its tokenizer has {len(tokenizer)} tokens, and the model embeds {rows} (vocab_size): the"
        " tokenizer is another model's; save the model's own beside its weights"
    )


_SAMPLER_KEYS = {
    "max_denoising_steps": "max_steps",
    "entropy_bound": "entropy_bound",
    "t_max": "t_max",
    "t_min": "t_min",
    "stability_threshold": "stability_threshold",
    "confidence_threshold": "confidence_threshold",
    "top_k": "top_k",
    "acceptance_order": "order",
    "stable_share": "stable_share",
    "neighbour_repeat_penalty": "neighbour_repeat_penalty",
    "settle_after": "settle_after",
    "min_distinct": "min_distinct",
    "max_repeat": "max_repeat",
    "cap_runs": "cap_runs",
    "refresh_every": "refresh_every",
    "refresh_neighbours": "refresh_neighbours",
    "drop_doubled_words": "drop_doubled_words",
    "end_last": "end_last",
}

# DenoiseSettings' names where generation_config.json spells them otherwise: a file that used one would be ignored.
_INNER_NAMES = {inner: key for key, inner in _SAMPLER_KEYS.items() if inner != key}


def _settings_folder(source: str) -> Path:
    """Where a checkpoint's generation_config.json is: its folder, or for a hub id the copy from_pretrained has just
    fetched (read as a cached copy is read, so a model's first run samples as its later ones do)."""
    folder = Path(source)
    if folder.is_dir():
        return folder
    return cached_copy(source) or folder


def _sampler_defaults(folder: Path) -> DenoiseSettings:
    """The sampler settings in a causal checkpoint's generation_config.json (genui's keys), else safe defaults."""
    values: dict[str, Any] = {"max_canvases": 1, "max_steps": 12, "entropy_bound": 1.0}
    path = folder / "generation_config.json"
    if path.is_file():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{path}: cannot read it as JSON ({_first_line(exc)})") from exc
        if not isinstance(raw, dict):
            raise ModelLoadError(f"{path}: must be a JSON object of settings, not a {type(raw).__name__}")
        for key in raw.keys() & _INNER_NAMES.keys():  # the loop's own name, which this file would silently ignore
            raise ModelLoadError(f"{path}: '{key}' is not read here; write it as '{_INNER_NAMES[key]}'")
        values.update({_SAMPLER_KEYS[k]: v for k, v in raw.items() if k in _SAMPLER_KEYS})
    known = {f.name for f in fields(DenoiseSettings)}
    settings = DenoiseSettings(**{k: v for k, v in values.items() if k in known})
    try:
        settings.check()
    except EngineError as exc:
        raise ModelLoadError(f"{path}: {exc}") from exc
    return settings


def _device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        target = torch.device(device)
    except RuntimeError as exc:
        raise ModelLoadError(f"{device!r} is not a device name; use cpu or cuda (cuda:N for one GPU)") from exc
    if target.type == "cuda":
        cpu_build = torch.version.cuda is None and getattr(torch.version, "hip", None) is None  # nor ROCm's
        if not torch.cuda.is_available() and cpu_build:  # a GPU there or not, this torch cannot use it
            raise ModelLoadError(
                f"device {device!r} was asked for but this torch ({torch.__version__}) is a CPU build: install a CUDA"
                " build of torch (./dev setup does on a machine whose nvidia-smi lists its GPU), or use --device cpu"
            )
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
