"""The tools a lent GPU's session runs first (bench/): what each call carries is checked here, not on the device."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import carry_sizes  # noqa: E402


def test_a_call_over_64_mib_with_the_working_tree_or_naming_a_missing_file_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], check=True)
    (tmp_path / "code.py").write_bytes(b"x" * (4 * 2**20))  # the tree: 4 MiB, with every call
    (tmp_path / ".gitignore").write_text("/data/\n")
    data = tmp_path / "data"
    data.mkdir()
    with (data / "part-aa").open("wb") as part:
        part.truncate(59 * 2**20)  # with the tree: 63 MiB and a few bytes
    with (data / "pack.npz").open("wb") as pack:
        pack.truncate(2 * 2**20)
    assert carry_sizes.main(["call 1=data/part-aa"]) == 0
    assert carry_sizes.main(["call 1=data/part-aa data/pack.npz"]) == 1
    assert "OVER the 64 MiB" in capsys.readouterr().out
    assert carry_sizes.main(["call 2=data/part-ab"]) == 1
    assert "carries data/part-ab, which is not there" in capsys.readouterr().err
