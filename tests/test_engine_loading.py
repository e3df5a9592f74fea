from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_adapter, build_tiny_checkpoint, build_tiny_llama_base
from transformers import AutoTokenizer, BertConfig, LlamaConfig, LlamaForCausalLM

import engine.identity
import engine.loading
from engine import EngineError, ModelLoadError, load_model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))


def test_loading_a_folder_gives_model_tokenizer_and_canvas_length(checkpoint: Path) -> None:
    loaded = load_model(checkpoint, device="cpu")
    assert loaded.device == torch.device("cpu")
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert not loaded.model.training
    assert loaded.canvas_length == 32
    assert loaded.model_id.startswith(f"{checkpoint.name}@")
    assert loaded.tokenizer.convert_tokens_to_ids("<response>") == 6


def test_a_dtype_is_taken_by_name_and_one_that_is_none_is_a_load_error(checkpoint: Path) -> None:
    """``dtype="bogus"`` was a raw AttributeError from deep in the load (an engine user's walkthrough)."""
    assert next(load_model(checkpoint, device="cpu", dtype="bfloat16").model.parameters()).dtype == torch.bfloat16
    for wrong in ("bogus", "int8", torch.int64, 3):
        with pytest.raises(ModelLoadError, match=r"no floating-point torch dtype: use bfloat16"):
            load_model(checkpoint, device="cpu", dtype=wrong)  # type: ignore[arg-type]


def test_a_base_given_for_a_checkpoint_that_is_no_adapter_is_a_load_error(checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="base= is the base of a genui adapter"):
        load_model(checkpoint, device="cpu", base="elsewhere")


def test_the_model_id_follows_the_weights(checkpoint: Path, tmp_path: Path) -> None:
    other = build_tiny_checkpoint(tmp_path / checkpoint.name, seed=1)
    assert load_model(checkpoint, device="cpu").model_id == load_model(checkpoint, device="cpu").model_id
    assert load_model(other, device="cpu").model_id != load_model(checkpoint, device="cpu").model_id
    # Known before the weights load (genui serves cached pages meanwhile): the same id, from a few small reads.
    assert engine.identity.model_id(checkpoint) == load_model(checkpoint, device="cpu").model_id
    assert engine.identity.model_id(other) == load_model(other, device="cpu").model_id
    assert engine.identity.model_id("owner/name") == "owner/name"
    # torch's pytorch_model.bin counts as safetensors do: new weights there kept the old id, and so the old pages
    torch_saved = tmp_path / "torch_saved"
    torch_saved.mkdir()
    (torch_saved / "config.json").write_text("{}")
    (torch_saved / "pytorch_model.bin").write_bytes(b"weights")
    before = engine.identity.model_id(torch_saved)
    (torch_saved / "pytorch_model.bin").write_bytes(b"retrained")
    assert engine.identity.model_id(torch_saved) != before


def test_a_missing_folder_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no model folder at .*nowhere"):
        load_model(tmp_path / "nowhere", device="cpu")
    # a file (its config.json) is not read as a hub id, asked of the hub for a minute (a review of other checkpoints)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=f"config.json is a file; --model takes the folder .*: {tmp_path}$"):
        load_model(tmp_path / "config.json", device="cpu")


def test_a_missing_default_model_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.identity, "DEFAULT_MODEL", tmp_path / "genui-small")
    with pytest.raises(ModelLoadError, match="default model is missing .*--model"):
        load_model(device="cpu")


def test_a_checkpoint_that_is_neither_family_is_refused(tmp_path: Path) -> None:
    BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=16).save_pretrained(
        tmp_path
    )
    with pytest.raises(ModelLoadError, match="'bert' checkpoint.*DiffusionGemma.*causal LMs.*genui adapters"):
        load_model(tmp_path, device="cpu")


def _tiny_llama_base(folder: Path) -> Path:
    return build_tiny_llama_base(folder, positions=512)


def test_an_adapter_loads_onto_its_base_merged_with_its_sampler_settings(tmp_path: Path) -> None:
    base = _tiny_llama_base(tmp_path)
    adapter = build_tiny_adapter(base, tmp_path / "adapter")
    loaded = load_model(adapter, device="cpu", dtype=torch.float32)  # float32: linear layers as transformers has them
    assert loaded.family == "adapted-causal-lm" and loaded.canvas_length == 16
    assert loaded.model_id == engine.identity.model_id(adapter)
    assert loaded.defaults.max_steps == 5 and loaded.defaults.t_max == 0.6 and loaded.defaults.min_distinct == 8
    assert not any("lora" in name for name, _ in loaded.model.named_parameters())  # merged into the base
    plain = load_model(base, device="cpu", dtype=torch.float32)  # the same base, unadapted
    assert plain.family == "causal-lm"
    q_adapted = loaded.model.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(q_adapted, plain.model.model.layers[0].self_attn.q_proj.weight)


def test_an_adapters_id_follows_the_weights_of_its_own_base(tmp_path: Path) -> None:
    """An adapter on a base of one's own kept its id when the base was trained on (or another was passed), and a
    server showed the pages the old weights wrote (noticed by session 59, left alone until now)."""
    base = _tiny_llama_base(tmp_path / "base")
    adapter = build_tiny_adapter(base, tmp_path / "adapter")
    before = engine.identity.model_id(adapter)
    assert before.startswith("adapter@") and f"+base@{engine.identity.fingerprint(base)}" in before
    other = _tiny_llama_base(tmp_path / "other")
    (other / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes()[:-8] + b"retrain!")
    moved = load_model(adapter, device="cpu", dtype=torch.float32, base=other)  # another base, given
    assert moved.model_id == before.split("+")[0] + f"+base@{engine.identity.fingerprint(other)}" != before
    (base / "model.safetensors").write_bytes((base / "model.safetensors").read_bytes()[:-8] + b"retrain!")
    after = engine.identity.model_id(adapter)  # the base trained on: the same adapter, new weights served
    assert after != before and load_model(adapter, device="cpu", dtype=torch.float32).model_id == after
    spec = json.loads((adapter / "genui.json").read_text())
    (adapter / "genui.json").write_text(json.dumps({**spec, "base": engine.identity.PINNED_BASE}))
    assert "+" not in engine.identity.model_id(adapter)  # the pinned base's id is the adapter's alone (the shipped)


@pytest.mark.parametrize("units", [True, False])
def test_a_causal_lm_computes_in_bfloat16_only_where_the_cpu_has_bfloat16_units(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, units: bool
) -> None:
    monkeypatch.setattr(engine.loading, "_cpu_has_bf16_units", lambda: units)
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    expected = torch.bfloat16 if units else torch.float32
    assert next(load_model(adapter, device="cpu").model.parameters()).dtype == expected
    assert next(load_model(adapter, device="cpu", dtype=torch.float32).model.parameters()).dtype == torch.float32
    assert engine.loading.default_dtype(torch.device("cuda")) == torch.bfloat16


@pytest.mark.skipif(platform.machine() != "x86_64" or not Path("/proc/cpuinfo").is_file(), reason="x86 Linux flags")
def test_this_cpus_bfloat16_units_are_read_from_its_flags() -> None:
    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    assert engine.loading._cpu_has_bf16_units() == ("avx512_bf16" in flags or "amx_bf16" in flags)


def test_an_adapter_with_a_broken_genui_json_names_file_and_keys(tmp_path: Path) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    (adapter / "genui.json").write_text('{"family": "adapted-causal-lm"}')
    with pytest.raises(ModelLoadError, match="genui.json: needs family .* canvas_length"):
        load_model(adapter, device="cpu")
    (adapter / "genui.json").write_text('{"family": "mystery", "canvas_length": 8}')
    with pytest.raises(ModelLoadError, match="family 'mystery'"):
        load_model(adapter, device="cpu")


def test_an_adapters_bad_sampler_setting_names_the_file(tmp_path: Path) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    (adapter / "generation_config.json").write_text('{"t_max": 0.2, "t_min": 0.5}')
    with pytest.raises(ModelLoadError, match="generation_config.json: temperatures"):
        load_model(adapter, device="cpu")

    (adapter / "generation_config.json").write_text('{"order": "left_to_right"}')  # the loop's name, not the file's
    with pytest.raises(
        ModelLoadError, match="generation_config.json: 'order' is not read here; write it as 'acceptance_order'"
    ):
        load_model(adapter, device="cpu")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "cannot read it as JSON"),
        ("[1, 2]", "must be a JSON object of settings, not a list"),
        ('{"entropy_bound": "2.0"}', "entropy_bound must be a number, got '2.0'"),
        ('{"top_k": true}', "top_k must be an integer, got True"),  # not 1: greedy sampling
        ('{"max_denoising_steps": 24.0}', "max_steps must be an integer, got 24.0"),
        ('{"acceptance_order": ["entropy"]}', "order must be one of"),
        ('{"stable_share": null}', "stable_share must be a number, got None"),
        ('{"drop_doubled_words": 1}', "drop_doubled_words must be true or false"),
    ],
)
def test_a_mistyped_sampler_file_is_a_load_error_naming_it(tmp_path: Path, text: str, said: str) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    (adapter / "generation_config.json").write_text(text)
    with pytest.raises(ModelLoadError, match=f"generation_config.json: .*{re.escape(said)}"):
        load_model(adapter, device="cpu")


@pytest.mark.parametrize("canvas", ["0", "-4", "16.9", "true", '"16"', "4096"])
def test_a_canvas_length_that_cannot_be_run_is_a_load_error(tmp_path: Path, canvas: str) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    spec = (adapter / "genui.json").read_text().replace('"canvas_length": 16', f'"canvas_length": {canvas}')
    (adapter / "genui.json").write_text(spec)
    with pytest.raises(ModelLoadError, match="canvas_length"):  # the base has 2048 positions
        load_model(adapter, device="cpu")


def test_a_tokenizer_without_an_end_of_text_is_a_load_error(tmp_path: Path) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    config = adapter / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"eos_token": "<eos>"', '"eos_token": null'))
    with pytest.raises(ModelLoadError, match="no end-of-text token; set eos_token"):
        load_model(adapter, device="cpu")


def test_a_diffusiongemma_listing_several_ends_of_text_stops_at_the_first(tmp_path: Path) -> None:
    checkpoint = build_tiny_checkpoint(tmp_path / "tiny")
    config = json.loads((checkpoint / "generation_config.json").read_text())
    (checkpoint / "generation_config.json").write_text(json.dumps({**config, "eos_token_id": [1, 3]}))
    assert load_model(checkpoint, device="cpu").denoiser.eos_id == 1


def test_asking_for_a_gpu_that_is_not_there_fails_clearly(checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without CUDA, on any machine
    monkeypatch.setattr(torch.version, "cuda", "12.8")  # with a CUDA build of torch
    with pytest.raises(ModelLoadError, match="no CUDA GPU.*--device cpu"):
        load_model(checkpoint, device="cuda")
    monkeypatch.setattr(torch.version, "cuda", None)  # a CPU build, whatever GPU the machine has: said as such
    with pytest.raises(ModelLoadError, match=r"this torch \(.*\) is a CPU build: install a CUDA build"):
        load_model(checkpoint, device="cuda")


def test_int8_where_the_default_device_is_a_gpu_says_to_pass_device_cpu(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said to leave out --device cuda and --dtype, neither of them given (found by review)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(
        ModelLoadError, match=r"the default device here \(cuda: a GPU\) is not the CPU: pass --device cpu"
    ):
        load_model(checkpoint, quantize="int8")
    with pytest.raises(ModelLoadError, match="starts from float32 weights, not torch.bfloat16"):
        load_model(checkpoint, device="cpu", dtype=torch.bfloat16, quantize="int8")


def test_a_folder_that_is_no_checkpoint_or_has_no_tokenizer_says_so(tmp_path: Path) -> None:
    """An empty folder was "Unrecognized model ... Should have a `model_type` key in its config.json" (there was none),
    and one without a tokenizer "Couldn't instantiate the backend tokenizer from one of:" and no more."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="holds no config.json .*: it is no checkpoint"):
        load_model(tmp_path / "empty", device="cpu")
    base = build_tiny_llama_base(tmp_path / "llama")
    for name in engine.loading.TOKENIZER_FILES + ("special_tokens_map.json", "chat_template.jinja"):
        (base / name).unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match="has no tokenizer .*copy its base model's tokenizer files into it"):
        load_model(base, device="cpu")


def test_a_causal_lm_not_shaped_as_llama_is_refused_at_load_not_on_every_page(tmp_path: Path) -> None:
    """A GPT-NeoX loaded, and every page then failed: "object has no attribute 'model'" (found by review)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    base = build_tiny_llama_base(tmp_path / "llama")
    config = GPTNeoXConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    GPTNeoXForCausalLM(config).save_pretrained(tmp_path / "neox")
    for name in engine.loading.TOKENIZER_FILES + ("special_tokens_map.json",):
        if (base / name).is_file():
            (tmp_path / "neox" / name).write_bytes((base / name).read_bytes())
    with pytest.raises(
        ModelLoadError, match="GPTNeoXForCausalLM, a causal LM genui cannot drive: it runs Llama-shaped"
    ):
        load_model(tmp_path / "neox", device="cpu")


def test_a_name_that_is_no_folder_here_nor_a_model_the_hub_gives_says_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`checkpoints/run1` mistyped is taken for a hub id: the hub's "couldn't connect" named no fix."""
    monkeypatch.chdir(tmp_path)

    def offline(*args: object, **kwargs: object) -> None:
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.setattr(engine.loading.AutoConfig, "from_pretrained", offline)
    monkeypatch.setattr(engine.identity, "_unreachable", lambda endpoint: "")  # a hub that answers, without the id
    with pytest.raises(ModelLoadError, match=r"no folder 'checkpoints/run1' here, and the model hub did not give"):
        load_model("checkpoints/run1", device="cpu")


@pytest.fixture
def hub_out_of_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache (returned), and a hub whose address refuses connections."""
    import huggingface_hub.constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # discard: nobody listens
    return cache


def in_hub_cache(cache: Path, hub_id: str, checkpoint: Path) -> Path:
    """``checkpoint`` moved into ``cache`` as the hub's cache keeps a fetched ``hub_id``; its snapshot folder."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / f"models--{hub_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots").mkdir()
    return Path(checkpoint.rename(repo / "snapshots" / commit))


def test_a_hub_id_neither_cached_nor_reachable_fails_at_once_naming_both(
    hub_out_of_reach: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline, a mistyped name waited 26 s on huggingface_hub's retries (five, each logged) before its error."""

    def asked(*args: object, **kwargs: object) -> None:
        raise AssertionError("the hub was asked, to retry for 23 s")

    monkeypatch.setattr(engine.loading.AutoConfig, "from_pretrained", asked)
    with pytest.raises(ModelLoadError) as failed:
        load_model("someorg/mistyped-model", device="cpu")
    message = str(failed.value)
    assert f"no copy of hub id 'someorg/mistyped-model' in the hub's cache ({hub_out_of_reach})" in message
    assert "the model hub cannot be asked: 127.0.0.1:9 does not answer" in message
    assert "Name an existing folder (./someorg/mistyped-model for one here)" in message
    # the id is still known without the hub: a server names its cached pages while the model loads (or fails to)
    assert engine.identity.model_id("someorg/mistyped-model") == "someorg/mistyped-model"


def test_a_hub_id_in_the_hub_cache_loads_offline_and_keeps_its_id(
    hub_out_of_reach: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model fetched once (the hub's cache layout) runs where the hub cannot be reached, and so does an adapter
    that names it as its base. transformers asked the hub for each file first, each ask retried five times: six
    minutes to load this tiny model offline."""
    import huggingface_hub.utils._http

    def asked() -> None:
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(huggingface_hub.utils._http, "get_session", asked)
    base = build_tiny_llama_base(tmp_path / "made")
    adapter = build_tiny_adapter(base, tmp_path / "adapter")
    in_hub_cache(hub_out_of_reach, "someorg/tiny-llama", base)
    loaded = load_model("someorg/tiny-llama", device="cpu")
    assert loaded.model_id == "someorg/tiny-llama"
    assert loaded.canvas_length > 0
    # an adapter whose genui.json names that hub id as its base
    spec = json.loads((adapter / "genui.json").read_text())
    (adapter / "genui.json").write_text(json.dumps({**spec, "base": "someorg/tiny-llama"}))
    assert load_model(adapter, device="cpu").model_id.startswith("adapter@")


def test_a_hub_copy_fetched_part_way_is_fetched_again_or_said_to_be_part_and_a_proxy_is_no_dead_hub(
    hub_out_of_reach: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch stopped part way leaves a copy with its config and tokenizer and no weights (transformers fetches
    file by file): it was loaded as whole on every start, and failed with "no file named model.safetensors" where
    from_pretrained would have finished it (a review of session 64's change)."""
    base = build_tiny_llama_base(tmp_path / "made")
    folder = in_hub_cache(hub_out_of_reach, "someorg/part", base)
    assert engine.identity.hub_source("someorg/part") == str(folder)  # whole: loaded from the cache
    assert engine.loading._settings_folder("someorg/part") == folder  # its generation_config.json, as a folder's
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    (folder / "training_args.bin").write_bytes(b"no weights")  # a .bin that holds none (a review)
    with pytest.raises(ModelLoadError, match=r"only part of hub id 'someorg/part' in the hub's cache"):
        engine.identity.hub_source("someorg/part")
    monkeypatch.setattr(engine.identity, "_unreachable", lambda endpoint: "")  # a hub that answers
    assert engine.identity.hub_source("someorg/part") == "someorg/part"  # for from_pretrained to finish it
    monkeypatch.undo()
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")  # the hub through a proxy: not probed directly
    assert engine.identity._unreachable("http://127.0.0.1:9") == ""
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.example:3128")  # huggingface_hub takes ALL_PROXY too
    assert engine.identity._unreachable("http://127.0.0.1:9") == ""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # but not for a host the proxy is bypassed for: probed
    assert "does not answer" in engine.identity._unreachable("http://127.0.0.1:9")


def test_a_device_name_that_is_not_one_fails_clearly(checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a device name"):
        load_model(checkpoint, device="gpu please")


def test_no_device_named_means_the_gpu_where_there_is_one_and_the_cpu_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for available, expected in ((True, "cuda"), (False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        assert engine.loading._device(None) == torch.device(expected)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("cuda:2", r"'cuda:2' does not exist; this machine has 2 CUDA GPU\(s\)"),
        ("mps", "MPS is not available here; use --device cpu"),
        ("meta", "'meta' is not supported; use cpu or cuda"),
    ],
)
def test_a_device_this_machine_lacks_is_named_with_what_it_has(
    monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with two GPUs and no MPS
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert engine.loading._device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(ModelLoadError, match=message):
        engine.loading._device(name)


@pytest.mark.parametrize("extension", [True, False])
def test_an_arm_cpu_computes_in_bfloat16_where_it_has_the_bf16_extension(
    monkeypatch: pytest.MonkeyPatch, extension: bool
) -> None:
    monkeypatch.setattr(engine.loading.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: not extension)  # x86's flags: not read
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: not extension)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: extension)
    assert engine.loading._cpu_has_bf16_units() is extension
    assert engine.loading.default_dtype(torch.device("cpu")) == (torch.bfloat16 if extension else torch.float32)


def test_load_errors_are_engine_errors() -> None:
    assert issubclass(ModelLoadError, EngineError)


def test_a_config_naming_no_architectures_says_so(tmp_path: Path) -> None:
    """It said a 'llama' checkpoint could not run, while saying Llama runs (found by review)."""
    base = build_tiny_llama_base(tmp_path / "llama")
    config = json.loads((base / "config.json").read_text())
    del config["architectures"]
    (base / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match='names no architectures.*"architectures": \\["LlamaForCausalLM"\\]'):
        load_model(base, device="cpu")


def test_a_config_transformers_cannot_read_is_not_said_to_be_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def unknown(*args: object, **kwargs: object) -> None:
        raise ValueError("The checkpoint you are trying to load has model type `newfangled`")

    monkeypatch.setattr(engine.loading.AutoConfig, "from_pretrained", unknown)
    monkeypatch.setattr(engine.identity, "_unreachable", lambda endpoint: "")  # a hub that answers
    with pytest.raises(ModelLoadError, match="cannot read a model config from owner/newfangled: The checkpoint"):
        load_model("owner/newfangled", device="cpu")


# A developer's own checkpoints (a review): each mistake names the folder and its fix, at load, not on every page.


def test_an_adapter_trained_on_another_base_names_genui_json_where_torch_printed_a_traceback(tmp_path: Path) -> None:
    """A genui.json without "base" runs the adapter on the pinned SmolLM2: a LoRA of another base's shapes was a
    55-line RuntimeError from peft, and `genui serve` exited with it."""
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path / "base"), tmp_path / "adapter")
    other = build_tiny_llama_base(tmp_path / "wider", positions=512)
    config = json.loads((other / "config.json").read_text())
    LlamaForCausalLM(LlamaConfig(**{**config, "hidden_size": 64, "intermediate_size": 96})).save_pretrained(other)
    spec = json.loads((adapter / "genui.json").read_text())
    (adapter / "genui.json").write_text(json.dumps({**spec, "base": str(other)}))
    with pytest.raises(ModelLoadError) as failed:
        load_model(adapter, device="cpu", dtype=torch.float32)
    message = str(failed.value)
    assert f"the adapter in {adapter} does not fit the base {other}, so it was trained on another" in message
    assert "size mismatch for base_model.model.model.layers.0.self_attn.q_proj.lora_A" in message
    assert message.endswith(f'write the base it was trained on as "base" in {adapter / "genui.json"}')
    assert "\n" not in message
    (adapter / "genui.json").write_text(json.dumps(spec))
    with pytest.raises(ModelLoadError) as failed:  # the base given: genui.json's is not the one to change
        load_model(adapter, device="cpu", dtype=torch.float32, base=other)
    assert str(failed.value).endswith("): pass the base it was trained on")


def test_a_runtime_error_loading_an_adapter_that_is_no_size_mismatch_is_not_blamed_on_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An out-of-memory error (a RuntimeError, as a size mismatch is) said the adapter was another base's."""
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    import peft

    monkeypatch.setattr(peft.PeftModel, "from_pretrained", out_of_memory)
    with pytest.raises(torch.OutOfMemoryError):
        load_model(adapter, device="cpu", dtype=torch.float32)


def test_a_tokenizer_with_more_tokens_than_the_model_embeds_is_refused_at_load(tmp_path: Path) -> None:
    """It loaded, the server said it was ready, and every page failed with "IndexError: index out of range"."""
    base = _tiny_llama_base(tmp_path)
    config = json.loads((base / "config.json").read_text())
    LlamaForCausalLM(LlamaConfig(**{**config, "vocab_size": 40})).save_pretrained(base)
    with pytest.raises(ModelLoadError) as failed:
        load_model(base, device="cpu", dtype=torch.float32)
    tokens = len(AutoTokenizer.from_pretrained(base))
    assert str(failed.value) == (
        f"{base}: its tokenizer has {tokens} tokens, and the model embeds 40 (vocab_size): the tokenizer is another"
        " model's; save the model's own beside its weights"
    )
    LlamaForCausalLM(LlamaConfig(**{**config, "vocab_size": tokens + 8})).save_pretrained(base)  # rows to spare: fine
    assert load_model(base, device="cpu", dtype=torch.float32).family == "causal-lm"
    # a pad token added in training, the embeddings never resized: named, with that fix
    LlamaForCausalLM(LlamaConfig(**{**config, "vocab_size": tokens})).save_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.add_special_tokens({"pad_token": "<pad-added>"})
    tokenizer.save_pretrained(base)
    with pytest.raises(ModelLoadError) as failed:
        load_model(base, device="cpu", dtype=torch.float32)
    assert str(failed.value) == (
        f"{base}: its tokenizer has tokens added past the {tokens} the model embeds (vocab_size): '<pad-added>';"
        " resize the model's embeddings (resize_token_embeddings) and save it again, or take them out of the tokenizer"
    )


def test_a_causal_lm_whose_context_is_shorter_than_genuis_canvas_is_told_what_to_run(tmp_path: Path) -> None:
    """It was told to set a shorter canvas in genui.json: a plain causal LM has none, and writing one makes the folder
    an adapter, which it is not."""
    base = build_tiny_llama_base(tmp_path, positions=48)
    with pytest.raises(ModelLoadError) as failed:
        load_model(base, device="cpu", dtype=torch.float32)
    assert str(failed.value) == (
        f"{base}: the model reads 48 positions (max_position_embeddings), and genui's canvas for a causal LM is 64"
        " tokens, with the prompt before it: run a model that reads more"
    )


def test_a_peft_adapter_without_genui_json_is_told_what_to_write(tmp_path: Path) -> None:
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    (adapter / "genui.json").unlink()
    with pytest.raises(ModelLoadError) as failed:
        load_model(adapter, device="cpu")
    message = str(failed.value)
    assert message.startswith(f"{adapter} holds a peft adapter but no genui.json, which says how genui runs it")
    spec = json.loads(message[message.index("{") : message.rindex("}") + 1])  # what to write, as it is written
    base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert spec == {"family": "adapted-causal-lm", "canvas_length": 64, "base": base}  # the base peft wrote down
    assert message.endswith("with the canvas it was trained with (genui adapt's is 64 tokens; docs/engine.md)")


def test_an_adapters_base_the_hub_cannot_give_names_its_genui_json(hub_out_of_reach: Path, tmp_path: Path) -> None:
    """The hub's message read as if the developer had typed the name, which genui.json gave."""
    adapter = build_tiny_adapter(_tiny_llama_base(tmp_path), tmp_path / "adapter")
    spec = json.loads((adapter / "genui.json").read_text())
    (adapter / "genui.json").write_text(json.dumps({**spec, "base": "someorg/somebase"}))
    with pytest.raises(ModelLoadError) as failed:
        load_model(adapter, device="cpu")
    assert isinstance(failed.value, engine.identity.ModelUnreachable)  # which a server waits out, its cache served
    message = str(failed.value)
    assert message.startswith(f'{adapter / "genui.json"} names its base "someorg/somebase": no folder')
    assert "no copy of hub id 'someorg/somebase' in the hub's cache" in message
    assert message.endswith('; or write another as "base"')
