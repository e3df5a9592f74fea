"""./dev's choices, with a stand-in for .venv's Python that records pip's calls and runs everything else for real."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """./dev and the files it installs from, beside a .venv whose python logs `-m pip ...` to pip.log."""
    for name in ("dev", "pyproject.toml", "setup.py", "constraints.txt"):
        shutil.copy2(ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = -m ] && [ "$2" = pip ]; then echo "$*" >>"{tmp_path}/pip.log"; exit 0; fi\n'
        # PyTorch's CPU index answers (no network here): the choice is then nvidia-smi's
        'case "$2" in *urlopen*) exit 0 ;; esac\n'
        # the base weights' fetch (engine.base), logged: a test fetches nothing
        f'case "$2" in *ensure_base*) echo fetched >>"{tmp_path}/base.log"; exit 0 ;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def command(path: Path, body: str) -> None:
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def setup(checkout: Path, gpus: str | None = None) -> list[str]:
    """Run `./dev setup` (with an nvidia-smi that runs ``gpus``, or none on PATH); the pip calls it made. apt-get
    and sudo are stand-ins too, where the machine lacks what the tests need."""
    bin_dir = checkout / "bin"
    bin_dir.mkdir(exist_ok=True)
    command(bin_dir / "apt-get", "exit 0")
    command(bin_dir / "sudo", 'if [ "$1" = -n ]; then shift; fi; exec "$@"')
    smi = bin_dir / "nvidia-smi"
    smi.unlink(missing_ok=True)
    if gpus is not None:
        command(smi, gpus)
    log = checkout / "pip.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(["bash", "dev", "setup"], cwd=checkout, env=env, check=True, capture_output=True)
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(sys.platform != "linux", reason="./dev chooses PyTorch's CPU build on Linux only")
def test_dev_installs_again_when_what_it_installs_from_changes_not_when_a_files_time_does(checkout: Path) -> None:
    first = setup(checkout)
    assert any("-e .[dev] -c constraints.txt" in call for call in first)
    assert setup(checkout) == []  # installed from these files already
    os.utime(checkout / "constraints.txt")  # a newer time, the same text (a checkout, a copy): nothing to do
    assert setup(checkout) == []
    with (checkout / "constraints.txt").open("a") as constraints:
        constraints.write("# changed\n")
    assert any("-e .[dev]" in call for call in setup(checkout))


@pytest.mark.skipif(sys.platform != "linux", reason="./dev chooses PyTorch's CPU build on Linux only")
def test_dev_takes_pytorchs_cuda_build_only_where_nvidia_smi_lists_a_gpu(checkout: Path) -> None:
    def torch_call(gpus: str | None) -> str:
        (checkout / ".venv" / ".genui-installed").unlink(missing_ok=True)
        return next(call for call in setup(checkout, gpus) if "torch==" in call)

    assert "download.pytorch.org/whl/cpu" in torch_call(None)
    assert "download.pytorch.org/whl/cpu" in torch_call("echo 'No devices were found'")  # a driver, no GPU
    assert "--index-url" not in torch_call("echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'")
    # a list written in more than one go (eight GPUs with MIG): read whole, not cut short and taken for no GPU
    assert "--index-url" not in torch_call("echo 'GPU 0: NVIDIA H100'; sleep 0.3; echo 'GPU 1: NVIDIA H100'")


def test_dev_setup_fetches_the_base_weights_so_serve_runs_offline_after(checkout: Path) -> None:
    """./dev setup installed everything but the default model's base weights, which the first serve fetched: a
    laptop set up at home had none on the train (a developer on a train's review)."""
    setup(checkout)
    assert (checkout / "base.log").read_text() == "fetched\n"


def test_dev_offline_after_a_pull_says_the_version_installed_before_still_runs(checkout: Path) -> None:
    """A pull changes what .venv was installed from, and ./dev installs again: offline that failed with pip's retries
    and nothing else, though .venv/bin/genui ran as before (a developer on a train's review)."""
    setup(checkout)
    genui = checkout / ".venv" / "bin" / "genui"
    command(genui, "exit 0")
    python = checkout / ".venv" / "bin" / "python"
    python.write_text(python.read_text().replace("exit 0; fi", "exit 1; fi", 1))  # pip fails: no index to reach
    (checkout / "constraints.txt").write_text((checkout / "constraints.txt").read_text() + "\n")
    env = {**os.environ, "PATH": f"{checkout / 'bin'}:/usr/bin:/bin"}
    ran = subprocess.run(["bash", "dev", "serve"], cwd=checkout, env=env, capture_output=True, text=True)
    assert ran.returncode == 1
    assert "installing genui's packages failed (is this machine offline?)" in ran.stderr
    assert ".venv/bin/genui serve" in ran.stderr
