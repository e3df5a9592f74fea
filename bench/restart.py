"""What a visitor gets while `genui serve` restarts: when the port answers, when a page already in the cache is served,
and when the model is ready to write new ones.

    python bench/restart.py                 # the default model, 3 restarts
    python bench/restart.py --runs 5 --json
    python bench/restart.py --model PATH_OR_HUB_ID

First the server writes the wiki's front page into a fresh SQLite file (one `genui serve` run, which the model
writes at its own speed). Then it is started again on that file ``--runs`` times, and each time a client asks every
0.2 s for that page, for a page nobody wrote, and for /_genui/health, from the moment the process starts. Read-ahead
is off, so the engine writes nothing but what is asked for.

Prints a table of seconds after the process started, or with --json one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

CACHED = "/wiki/"  # written before the restarts
UNWRITTEN = "/wiki/A_page_nobody_asked_for"
HEALTH = "/_genui/health"
MARKS = ("port answers", "cached page served", "model ready")


def status(url: str, timeout: float = 10.0) -> int | None:
    """The HTTP status of a GET (following redirects), or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def served_whole(url: str, timeout: float = 10.0) -> bool:
    """Whether a GET answers 200 with the page itself: not the live placeholder (a stream to connect to) nor the
    no-script wait that a page not in the cache gets, which are 200s too."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            text = answer.read().decode("utf-8", "replace")
            return int(answer.status) == 200 and "ws-connect" not in text and "/_genui/wait" not in text
    except (urllib.error.URLError, OSError):
        return False


def start(db: Path, port: int, model: str | None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "genui.cli", "serve", "--port", str(port), "--db", str(db), "--read-ahead", "0"]
    if model:
        command += ["--model", model]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def write_front_page(db: Path, port: int, model: str | None, timeout: float) -> float:
    """Start the server, have it write the wiki's front page, stop it; the seconds that took."""
    server, started = start(db, port, model), time.monotonic()
    base = f"http://127.0.0.1:{port}"
    try:
        while status(base + HEALTH) != 200:
            if server.poll() is not None or time.monotonic() - started > timeout:
                raise SystemExit("bench/restart.py: the server did not get ready")
            time.sleep(0.5)
        query = "site=wiki&url=%2F&v=1"
        if status(f"{base}/_genui/wait?{query}", timeout) != 200:  # answers once the page is written
            raise SystemExit("bench/restart.py: the front page was not written")
        return time.monotonic() - started
    finally:
        stop(server)


def restart(db: Path, port: int, model: str | None, timeout: float) -> dict[str, float | None]:
    """Seconds after the process started at which each mark was first seen."""
    server, started = start(db, port, model), time.monotonic()
    base = f"http://127.0.0.1:{port}"
    seen: dict[str, float | None] = dict.fromkeys(MARKS)
    unwritten: set[int | None] = set()
    try:
        while seen["model ready"] is None and time.monotonic() - started < timeout and server.poll() is None:
            now = time.monotonic() - started
            health = status(base + HEALTH)
            if health is not None and seen["port answers"] is None:
                seen["port answers"] = now
            if health is not None and seen["cached page served"] is None and served_whole(base + CACHED):
                seen["cached page served"] = time.monotonic() - started
            if health == 503:
                unwritten.add(status(base + UNWRITTEN))  # asked for while loading: never written, never a 500
            if health == 200:
                seen["model ready"] = time.monotonic() - started
            time.sleep(0.2)
    finally:
        stop(server)
    if unwritten - {503}:
        raise SystemExit(f"bench/restart.py: a page not written answered {sorted(map(str, unwritten))} while loading")
    if seen["model ready"] is None or seen["cached page served"] is None:
        missing = [mark for mark in ("cached page served", "model ready") if seen[mark] is None]
        raise SystemExit(f"bench/restart.py: a restart never reached {' nor '.join(missing)} (--timeout {timeout:g} s)")
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="restarts to time (default: %(default)s)")
    parser.add_argument("--model", help="the checkpoint genui serve loads (default: the shipped model)")
    parser.add_argument("--port", type=int, default=8017)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a start counts as failed")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="genui-restart-") as folder:
        db = Path(folder) / "pages.sqlite3"
        written = write_front_page(db, args.port, args.model, args.timeout)
        runs = []
        for _ in range(args.runs):
            copy = Path(folder) / "restart.sqlite3"
            shutil.copy(db, copy)  # every restart from the same cache
            runs.append(restart(copy, args.port, args.model, args.timeout))
    medians = {
        mark: statistics.median(values) if (values := [run[mark] for run in runs if run[mark] is not None]) else None
        for mark in MARKS
    }
    result = {"front_page_written_s": round(written, 2), "runs": runs, "median_s": medians}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"wiki front page written in the first run: {written:.1f} s after the process started\n")
    print("| after the process started | " + " | ".join(f"run {n}" for n in range(1, len(runs) + 1)) + " | median |")
    print("| --- " * (len(runs) + 2) + "|")
    for mark in MARKS:
        cells = [f"{run[mark]:.2f} s" if run[mark] is not None else "never" for run in runs]
        median = medians[mark]
        cells.append(f"{median:.2f} s" if median is not None else "never")
        print(f"| {mark} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
