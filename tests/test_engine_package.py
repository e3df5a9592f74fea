from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_checkpoint

import engine


def test_the_frame_types_import_without_torch() -> None:
    # The web layer imports engine.frames; it must not pay for loading torch and transformers.
    check = "import sys, engine.frames, engine; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", check], cwd=Path(engine.__file__).parent.parent).returncode == 0


def test_the_package_exports_the_engine() -> None:
    from engine.scheduler import Scheduler

    assert engine.Scheduler is Scheduler
    assert callable(engine.load_model) and issubclass(engine.ModelLoadError, engine.EngineError)
    assert set(engine.__all__) >= {"load_model", "load_engine", "Scheduler", "GenerationRequest", "DoneFrame"}
    with pytest.raises(AttributeError):
        _ = engine.nothing_here  # type: ignore[attr-defined]


async def test_load_engine_serves_a_checkpoint(tmp_path: Path) -> None:
    scheduler = engine.load_engine(build_tiny_checkpoint(tmp_path / "tiny"), device="cpu", max_queue=2)
    try:
        assert scheduler.max_queue == 2 and scheduler.canvas_length == 32
        assert scheduler.model_id.startswith("tiny@")
        assert next(scheduler.loaded.model.parameters()).dtype == torch.float32
    finally:
        await scheduler.close()
    async with engine.load_engine(build_tiny_checkpoint(tmp_path / "tiny"), "cpu", dtype="bfloat16") as scheduler:
        assert next(scheduler.loaded.model.parameters()).dtype == torch.bfloat16  # load_model's dtype, passed on
