"""What a busy CPU costs a visitor: pages written by `genui serve` while other processes want the same CPUs.

Starts `genui serve` (default model, a fresh page cache, no reading ahead) in a process of its own, starts
``--busy`` processes that each spin one CPU (`while True: pass`), and opens each page in Debian's Chromium as a
visitor does, one after the other, waiting until it is written whole. It reports the seconds the model took over each
page (as the page cache stores them) and the visitor's wall clock from the click to the page.

libgomp's threads spin at the end of each parallel region until the whole team arrives, so a busy process beside the
engine's team made every step wait for a time slice; engine.threads.ThreadShare fits the threads to the CPUs the
worker is given (docs/engine.md). ``--threads N`` sets OMP_NUM_THREADS for the server instead, which turns that off.

    python bench/busy_cpu.py [--busy 1] [--threads N] [--pages /wiki/Heap_sort /wiki/Binary_tree] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

PAGES = ("/wiki/Heap_sort", "/wiki/Binary_tree", "/wiki/Linked_list")
# the page is whole: no live placeholder, no stream, nothing still being denoised
WRITTEN = "() => !document.querySelector('[ws-connect], .genui-live') && !document.body.innerText.includes('denoising')"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=1, help="processes spinning a CPU each beside the server (1)")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the server (default: genui's own choice)")
    parser.add_argument("--pages", nargs="+", default=list(PAGES), help="pages to open, one after the other")
    parser.add_argument("--port", type=int, default=8197)
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args()
    if args.busy < 0 or (args.threads is not None and args.threads < 1):
        parser.error("--busy must be 0 or more and --threads 1 or more")
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    if args.threads is not None:
        env["OMP_NUM_THREADS"] = str(args.threads)
    base = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "pages.sqlite3"
        serve = [
            str(Path(sys.executable).with_name("genui")),
            "serve",
            "--port",
            str(args.port),
            "--db",
            str(db),
            "--read-ahead",
            "0",
        ]
        server = subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        busy: list[subprocess.Popen[bytes]] = []
        try:
            _wait_ready(base, server)
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
            walls = _open(base, args.pages)
        finally:
            for process in [*busy, server]:
                process.terminate()
                process.wait(30)
        with sqlite3.connect(db) as cache:
            stored = dict(cache.execute("SELECT '/wiki' || path, seconds FROM pages").fetchall())
    rows = [{"page": page, "model_s": stored.get(page), "wall_s": round(wall, 2)} for page, wall in walls.items()]
    threads = args.threads if args.threads is not None else "genui's"
    print(f"busy processes: {args.busy}; server threads: {threads}; CPUs: {len(os.sched_getaffinity(0))}")
    print(f"{'page':32} {'model_s':>8} {'wall_s':>8}")
    for row in rows:
        model = "-" if row["model_s"] is None else f"{row['model_s']:.2f}"
        print(f"{row['page']:32} {model:>8} {row['wall_s']:>8.2f}")
    if args.json:
        print(json.dumps({"busy": args.busy, "threads": args.threads, "pages": rows}))


def _wait_ready(base: str, server: subprocess.Popen[bytes], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"genui serve exited with {server.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base + "/_genui/health", timeout=5) as answer:
                if json.load(answer).get("status") == "ready":
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"genui serve was not ready within {timeout_s:.0f} s")


def _open(base: str, pages: list[str]) -> dict[str, float]:
    walls = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        tab = browser.new_page()
        for page in pages:
            started = time.perf_counter()
            tab.goto(base + page)
            tab.wait_for_function(WRITTEN, timeout=600_000)
            walls[page] = time.perf_counter() - started
        browser.close()
    return walls


if __name__ == "__main__":
    main()
