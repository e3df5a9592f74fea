"""Crash safety: kill -9 a genui server in the middle of writes, restart it on the same database, and check.

The server is ``genui serve`` itself (genui.cli.main in a subprocess, bound to a free loopback port) with a fake
engine whose pages end in a checksum footer, so a page that was cut short or mixed up anywhere between the engine
and the browser cannot pass for a whole one. Each cycle drives every workload at once, kills the server with
SIGKILL at a random moment, starts it again on the same SQLite file and has every workload read back, through the
app, everything it has been told was stored, in this cycle and all earlier ones.

Reusing it for a feature that stores user content: write a Workload and hand it to CrashHarness.

    class Bookmarks:
        name = "bookmarks"
        async def drive(self, client, cycle, stop): ...  # write until ``stop`` is set; remember what got a success
        async def verify(self, client, db): ...          # after a restart: problems found, read through the app
        def counts(self): ...                            # numbers for the report

    report = CrashHarness(tmp_path).run([Bookmarks(), ForumPosts()], cycles=3)
    assert report.problems == []

``drive`` must treat an httpx.TransportError as the kill (the request may or may not have been stored) and end.
Run by hand: ``python tests/crash_harness.py run --cycles 5`` (``--json`` for one JSON object).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import html
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

HERE = Path(__file__).resolve()
HTMX = {"HX-Request": "true"}
START_TIMEOUT_S = 60.0  # a cold Python start on a busy 2-core machine takes seconds
REQUEST_TIMEOUT_S = 20.0
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
_FOOTER = re.compile(r'<footer class="crash-sum">sha256:([0-9a-f]{64}):(\d+)</footer>')
_PAGE = re.compile(r'<div class="genui-page">(.*?)</div>\n</div>', re.S)
_POST = re.compile(r'<p class="genui-post-text"[^>]*>(.*?)</p></li>', re.S)
_WAIT = re.compile(r'<noscript><meta http-equiv="refresh" content="0; url=([^"]+)"></noscript>')


# -- pages with a checksum --------------------------------------------------------------------------------------


def checksum_writer(prompt: str, seed: int) -> str:
    """A page that carries its own checksum: an article, then a footer with the article's sha256 and length.

    Plain markup the sanitiser keeps byte for byte, so the checksum holds on the page genui serves.
    """
    match = re.search(r"<(?:title|thread)>(.*?)</(?:title|thread)>", prompt)
    title = re.sub(r"[^A-Za-z0-9 _-]", "", match.group(1) if match else "Home")
    paragraphs = "".join(f"<p>Paragraph {n} of {title}, written with seed {seed}.</p>" for n in range(6))
    body = f'<article class="crash"><h1>{title}</h1>{paragraphs}</article>'
    return body + f'<footer class="crash-sum">sha256:{hashlib.sha256(body.encode()).hexdigest()}:{len(body)}</footer>'


def page_problem(page_html: str) -> str | None:
    """Why ``page_html`` (the model's part of a served page) is not a whole page the engine wrote; None if it is."""
    footer = _FOOTER.search(page_html)
    if footer is None:
        return "no checksum footer (cut short?)"
    # What comes before the article is the route's opening (sites/*/site.toml), which the engine pins, unsummed.
    start = page_html.find('<article class="crash">')
    if start < 0:
        return "no article"
    body = page_html[start : footer.start()]
    if len(body) != int(footer.group(2)) or hashlib.sha256(body.encode()).hexdigest() != footer.group(1):
        return "checksum mismatch"
    if re.sub(r"</[a-z0-9]+>", "", page_html[footer.end() :]).strip():  # the sanitiser closes what the opening opened
        return "text after the footer"
    return None


async def get_finished(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET a page as a browser without scripts does: a page being written answers with the site's shell, whose
    <noscript> refresh leads to a URL that answers (a redirect to the page) once the page is finished."""
    response = await client.get(url)
    wait = _WAIT.search(response.text)
    if wait is None:
        return response
    while True:  # a page still being written after 45 s: the wait answers a 503 that asks again at once
        response = await client.get(html.unescape(wait.group(1)), follow_redirects=True)
        if response.status_code != 503 or "still being written" not in response.text:
            return response
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))


def served_page(response_text: str) -> str | None:
    """The model's part of a page genui served from its cache, or None when it served a live placeholder."""
    match = _PAGE.search(response_text)
    return html.unescape(match.group(1)) if match and "data-version=" in response_text else None


# -- the server -------------------------------------------------------------------------------------------------


def wait_ready(url: str, seconds: float) -> None:
    """Until ``/_genui/health`` answers 200: genui serve answers before its model has loaded (503 until then)."""
    deadline = time.monotonic() + seconds
    while httpx.get(url + "/_genui/health", timeout=5).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server's model did not load within {seconds:.0f} s")
        time.sleep(0.05)


class ServerProcess:
    """``genui serve`` with the checksum engine in a subprocess; its log goes to ``log`` (appended across restarts)."""

    def __init__(self, db: Path, log: Path, sites: Sequence[str], delay: float) -> None:
        self.db, self.log, self.sites, self.delay = db, log, list(sites), delay
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        offset = self.log.stat().st_size if self.log.exists() else 0
        command = [sys.executable, str(HERE), "serve", "--db", str(self.db), "--delay", str(self.delay)]
        for site in self.sites:
            command += ["--site", site]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with self.log.open("rb") as log:
                log.seek(offset)
                match = _LISTENING.search(log.read().decode("utf-8", "replace"))
            if match:
                self.url = f"http://127.0.0.1:{match.group(1)}"
                wait_ready(self.url, max(1.0, deadline - time.monotonic()))  # it answers before its model is loaded
                return self.url
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}; see {self.log}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the server did not start within {START_TIMEOUT_S} s; see {self.log}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash or the OOM killer."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), falling back to SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def peak_rss_kib(self) -> int | None:
        """VmHWM of the running server, in KiB."""
        if self.process is None:
            return None
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        return int(match.group(1)) if match else None


# -- workloads --------------------------------------------------------------------------------------------------


class Workload(Protocol):
    name: str

    async def drive(self, client: httpx.AsyncClient, cycle: int, stop: asyncio.Event) -> None:
        """Write concurrently until ``stop`` is set or the server is gone; remember what got a success answer."""

    async def verify(self, client: httpx.AsyncClient, db: Path) -> list[str]:
        """After a restart: everything acknowledged so far is there, nothing is corrupt. Returns the problems."""

    def counts(self) -> dict[str, int]:
        """Numbers for the report."""


@dataclass
class ForumPosts:
    """Replies posted to a few threads by concurrent writers (plain form posts, answered 303 once committed)."""

    writers: int = 6
    threads: int = 3
    site_mount: str = "/forum"
    name: str = "posts"
    acknowledged: dict[str, str] = field(default_factory=dict)  # text -> thread path
    attempted: dict[str, str] = field(default_factory=dict)
    in_flight_at_kill: int = 0
    stored_unanswered: set[str] = field(default_factory=set)  # in flight at a kill, committed all the same
    problems: list[str] = field(default_factory=list)

    def thread(self, n: int) -> str:
        return f"/r/crash/Thread_{n % self.threads}"

    async def drive(self, client: httpx.AsyncClient, cycle: int, stop: asyncio.Event) -> None:
        async def writer(index: int) -> None:
            n = 0
            while not stop.is_set():
                await asyncio.sleep(0)  # an in-process app (ASGITransport) may never suspend on its own
                thread, text = self.thread(n + index), f"post c{cycle} w{index} n{n} {random.getrandbits(32):08x}"
                self.attempted[text] = thread
                try:
                    response = await client.post(self.site_mount + thread, data={"user": f"w{index}", "text": text})
                except httpx.TransportError:
                    self.in_flight_at_kill += 1
                    return
                if response.status_code == 303:
                    self.acknowledged[text] = thread
                else:
                    self.problems.append(f"post to {thread}: status {response.status_code}")
                n += 1

        await asyncio.gather(*(writer(index) for index in range(self.writers)))

    async def verify(self, client: httpx.AsyncClient, db: Path) -> list[str]:
        problems, self.problems = self.problems, []
        stored = _query(db, "SELECT path, text FROM posts WHERE site = 'forum' ORDER BY id")
        for n in range(self.threads):
            thread = self.thread(n)
            # An htmx request on an uncached thread shows its posts around a placeholder (the run it starts is
            # nobody's to watch, and stops unwatched).
            response = await client.get(self.site_mount + thread, headers=HTMX)
            shown = [html.unescape(text) for text in _POST.findall(response.text)]
            in_db = [text for path, text in stored if path == thread]
            if shown != in_db:
                problems.append(f"{thread}: the app shows {len(shown)} posts, the database holds {len(in_db)}")
            for text in {t for t, path in self.acknowledged.items() if path == thread} - set(shown):
                problems.append(f"{thread}: acknowledged post lost: {text!r}")
            problems += [f"{thread}: post shown twice: {t!r}" for t in set(shown) if shown.count(t) > 1]
            problems += [f"{thread}: post nobody wrote: {t!r}" for t in shown if self.attempted.get(t) != thread]
            self.stored_unanswered |= {t for t in shown if t not in self.acknowledged}
        return problems

    def counts(self) -> dict[str, int]:
        return {
            "attempted": len(self.attempted),
            "acknowledged": len(self.acknowledged),
            "in_flight_at_kill": self.in_flight_at_kill,
            "in_flight_but_stored": len(self.stored_unanswered),
        }


@dataclass
class GeneratedPages:
    """New pages generated (plain GETs followed, as without scripts, to the finished page), cached pages read again,
    regenerations."""

    clients: int = 3
    site_mount: str = "/wiki"
    name: str = "pages"
    acknowledged: set[str] = field(default_factory=set)  # URLs served whole with a 200
    versions: dict[str, int] = field(default_factory=dict)  # each URL's newest version served whole (a regeneration's)
    attempted: set[str] = field(default_factory=set)
    served: int = 0  # whole pages checked while the server ran
    verified_after_restart: int = 0
    in_flight_at_kill: int = 0
    problems: list[str] = field(default_factory=list)

    async def drive(self, client: httpx.AsyncClient, cycle: int, stop: asyncio.Event) -> None:
        async def reader(index: int) -> None:
            n = 0
            while not stop.is_set():
                await asyncio.sleep(0)
                if n % 3 == 2 and self.acknowledged:
                    url, method = random.choice(sorted(self.acknowledged)), "regenerate"
                else:
                    url, method = f"/Crash_{cycle}_{index}_{n}", "get"
                    self.attempted.add(url)
                try:
                    if method == "get":
                        response = await get_finished(client, self.site_mount + url)
                    else:
                        response = await client.post(
                            "/_genui/regenerate", data={"site": "wiki", "url": url}, follow_redirects=True
                        )
                except httpx.TransportError:
                    self.in_flight_at_kill += 1
                    return
                n += 1
                if response.status_code != 200:
                    self.problems.append(f"{method} {url}: status {response.status_code}")
                    continue
                self.acknowledged.add(url)
                served = int(response.url.params.get("v") or 1)  # Regenerate lands on ?v=N of the version it wrote
                self.versions[url] = max(self.versions.get(url, 0), served)
                self._check(url, response.text, "while serving")

        await asyncio.gather(*(reader(index) for index in range(self.clients)))

    def _check(self, url: str, text: str, when: str) -> None:
        page = served_page(text)
        problem = "not served from the cache" if page is None else page_problem(page)
        if problem is not None:
            self.problems.append(f"{url} {when}: {problem}")
        else:
            self.served += 1

    async def verify(self, client: httpx.AsyncClient, db: Path) -> list[str]:
        for url in sorted(self.attempted):
            response = await client.get(self.site_mount + url, headers=HTMX)  # a placeholder unless stored
            if served_page(response.text) is not None:
                self._check(url, response.text, "after restart")
                self.verified_after_restart += 1
            elif url in self.acknowledged:
                self.problems.append(f"{url}: served whole before the kill, missing after the restart")
        for url, newest in sorted(self.versions.items()):  # every version served whole, a regeneration's too
            for number in range(1, newest + 1):
                response = await client.get(f"{self.site_mount}{url}?v={number}", headers=HTMX)
                if served_page(response.text) is None:
                    self.problems.append(f"{url}?v={number}: served whole before the kill, missing after the restart")
        whole: dict[str, list[str]] = {}  # versions of each page that passed, oldest first
        joined: dict[tuple[str, ...], str] = {}  # each page's version read last, whole
        rows = _query(
            db, "SELECT path, query, model, template, version, continues, html FROM pages ORDER BY 1, 2, 3, 4, version"
        )
        for key, query, model, template, version, continues, stored_html in rows:
            # an earlier version stored as what follows the one before it (genui.store._compact) is read whole
            page = (key, query, model, template)
            page_html = joined.get(page, "") + stored_html if continues else stored_html
            joined[page] = page_html
            problem = page_problem(page_html)
            if problem is not None and any(page_html.startswith(earlier) for earlier in whole.get(key, ())):
                problem = None  # a thread's replies written in place: an earlier whole version byte for byte, then more
            if problem is not None:
                self.problems.append(f"database row {key} v{version}: {problem}")
            else:
                whole.setdefault(key, []).append(page_html)
        problems, self.problems = self.problems, []
        return problems

    def counts(self) -> dict[str, int]:
        return {
            "attempted": len(self.attempted),
            "acknowledged": len(self.acknowledged),
            "checked_while_serving": self.served,
            "verified_after_restart": self.verified_after_restart,
            "in_flight_at_kill": self.in_flight_at_kill,
        }


def _query(db: Path, sql: str) -> list[tuple[str, ...]]:
    """Read the database directly, beside the running server (WAL lets a reader in)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(connection.execute(sql).fetchall())
    finally:
        connection.close()


# -- the harness ------------------------------------------------------------------------------------------------


@dataclass
class CrashReport:
    cycles: int
    kill_after_s: list[float]
    counts: dict[str, dict[str, int]]
    problems: list[str]
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {
            "cycles": self.cycles,
            "kill_after_s": self.kill_after_s,
            "counts": self.counts,
            "problems": self.problems,
            "seconds": self.seconds,
        }


class CrashHarness:
    """Drives workloads against a server on a fresh SQLite file, kills it, restarts it, verifies; ``cycles`` times."""

    def __init__(
        self,
        workdir: Path,
        sites: Sequence[str] = ("forum", "wiki"),
        seed: int = 0,
        delay: float = 0.01,
        kill_after: tuple[float, float] = (0.5, 1.5),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.db = workdir / "crash.sqlite3"
        self.log = workdir / "server.log"
        self.server = ServerProcess(self.db, self.log, sites, delay)
        self.random = random.Random(seed)
        self.kill_after = kill_after

    def run(self, workloads: Sequence[Workload], cycles: int = 3) -> CrashReport:
        started = time.monotonic()
        kills: list[float] = []
        problems: list[str] = []
        try:
            self.server.start()
            for cycle in range(cycles):
                delay = round(self.random.uniform(*self.kill_after), 3)
                kills.append(delay)
                asyncio.run(self._drive(workloads, cycle, delay))
                self.server.start()  # on the same database, as after a real crash
                problems += [f"cycle {cycle}: {p}" for p in asyncio.run(self._verify(workloads))]
            problems += [f"server log: {line}" for line in self._log_errors()]
        finally:
            self.server.stop()
        counts = {workload.name: workload.counts() for workload in workloads}
        return CrashReport(cycles, kills, counts, problems, round(time.monotonic() - started, 1))

    async def _drive(self, workloads: Sequence[Workload], cycle: int, kill_after: float) -> None:
        stop = asyncio.Event()
        async with _client(self.server.url) as client:
            driving = [asyncio.ensure_future(w.drive(client, cycle, stop)) for w in workloads]
            await asyncio.sleep(kill_after)
            self.server.kill()
            stop.set()
            await asyncio.wait_for(asyncio.gather(*driving), REQUEST_TIMEOUT_S)

    async def _verify(self, workloads: Sequence[Workload]) -> list[str]:
        async with _client(self.server.url) as client:
            found = [await w.verify(client, self.db) for w in workloads]
        return [f"{w.name}: {p}" for w, problems in zip(workloads, found, strict=True) for p in problems]

    def _log_errors(self) -> list[str]:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return [line for line in text.splitlines() if "Traceback" in line or line.startswith(("ERROR", "CRITICAL"))]


def _client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, follow_redirects=False)


# -- command line: the server side, and a run by hand -----------------------------------------------------------


def die_with_parent() -> None:
    """Linux: SIGTERM this server when the process that started it dies, so a run killed mid-way leaves none behind."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _serve(args: argparse.Namespace) -> int:
    from fakes import FakeEngine  # tests/ is this script's folder, so it is on sys.path

    from genui.cli import main

    die_with_parent()
    # One canvas holds a whole page, so the footer always fits (sites cap the canvases a page may have).
    engine = FakeEngine(checksum_writer, canvas_chars=4096, steps=4, delay=args.delay)
    # Every worker connects from 127.0.0.1: no limit per client here (tests/test_fairness.py checks those).
    argv = ["serve", "--host", "127.0.0.1", "--port", "0", "--db", args.db, "--runs-per-client", "0"]
    argv += ["--posts-per-minute", "0"]
    for site in args.site:
        argv += ["--site", site]
    code: int = main(argv, load_engine=lambda model, device, int8: engine)
    return code


def _run(args: argparse.Namespace) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="genui-crash-") as workdir:
        harness = CrashHarness(Path(workdir), seed=args.seed, delay=args.delay)
        report = harness.run([ForumPosts(), GeneratedPages()], cycles=args.cycles)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(f"{report.cycles} kill -9 cycles in {report.seconds} s (killed after {report.kill_after_s} s)")
        for name, counts in report.counts.items():
            print(f"  {name:<6} " + ", ".join(f"{key} {value}" for key, value in counts.items()))
        print("  problems: " + ("none" if not report.problems else "\n    " + "\n    ".join(report.problems)))
    return 1 if report.problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crash_harness", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="the server side (what the harness starts)")
    serve.add_argument("--db", required=True)
    serve.add_argument("--site", action="append", required=True)
    serve.add_argument("--delay", type=float, default=0.01, help="seconds per engine frame")
    serve.set_defaults(run=_serve)
    run = commands.add_parser("run", help="kill -9 cycles against forum posts and generated pages")
    run.add_argument("--cycles", type=int, default=3)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--delay", type=float, default=0.01, help="seconds per engine frame")
    run.add_argument("--json", action="store_true")
    run.set_defaults(run=_run)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
