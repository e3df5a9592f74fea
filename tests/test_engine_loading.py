from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_checkpoint
from transformers import LlamaConfig

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


def test_the_model_id_follows_the_weights(checkpoint: Path, tmp_path: Path) -> None:
    other = build_tiny_checkpoint(tmp_path / checkpoint.name, seed=1)
    assert load_model(checkpoint, device="cpu").model_id == load_model(checkpoint, device="cpu").model_id
    assert load_model(other, device="cpu").model_id != load_model(checkpoint, device="cpu").model_id


def test_a_missing_folder_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no model folder at .*nowhere"):
        load_model(tmp_path / "nowhere", device="cpu")


def test_a_missing_default_model_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.loading, "DEFAULT_MODEL", tmp_path / "genui-small")
    with pytest.raises(ModelLoadError, match="default model is missing .*--model"):
        load_model(device="cpu")


def test_a_checkpoint_of_another_architecture_is_refused(tmp_path: Path) -> None:
    LlamaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=16).save_pretrained(
        tmp_path
    )
    with pytest.raises(ModelLoadError, match="'llama' checkpoint.*diffusion_gemma"):
        load_model(tmp_path, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_a_gpu_that_is_not_there_fails_clearly(checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="no CUDA GPU.*--device cpu"):
        load_model(checkpoint, device="cuda")


def test_a_device_name_that_is_not_one_fails_clearly(checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a device name"):
        load_model(checkpoint, device="gpu please")


def test_load_errors_are_engine_errors() -> None:
    assert issubclass(ModelLoadError, EngineError)
