"""The code gates CI holds every change to: ruff's lint and format (genui, engine, lab, tests, bench), and mypy
(strict) on genui/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "genui", "engine", "lab", "tests", "bench"],
        [sys.executable, "-m", "ruff", "format", "--check", "genui", "engine", "lab", "tests", "bench"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_code_passes_the_gate(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
