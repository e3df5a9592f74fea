"""Load test: N concurrent clients for T seconds against `genui serve` on loopback.

    python bench/load.py                       # 50 clients, 60 s, the queued fake engine
    python bench/load.py --clients 10 --seconds 5 --json
    python bench/load.py --real-model models/genui-small --clients 8 --seconds 120

The server is `genui serve` itself (genui.cli.main in a subprocess on a free 127.0.0.1 port, sites wiki and forum,
a fresh SQLite file). Its engine is either QueuedEngine below, a stand-in with engine.Scheduler's queueing
semantics (a bounded queue that refuses with EngineOverloaded when full, micro-batches of up to max_batch requests
with equal settings, a Retry-After estimate from the recent batch time) that sleeps instead of computing, or with
--real-model PATH the real engine from engine.load_engine(PATH).

Clients loop, each request a weighted choice of four kinds:

- cached:     GET a page written during warm-up (the whole document, from the page cache);
- new:        GET a page nobody has asked for, as a browser without scripts does: the shell comes at once, and its
              <noscript> refresh leads to a URL that answers with a 303 to the page once it is written;
- regenerate: POST /_genui/regenerate for a warm page (waits for the new version, then 303);
- post:       POST a reply to a forum thread (303 once committed; no generation).

Each client has an address of its own (X-Forwarded-For, which uvicorn trusts from 127.0.0.1), as visitors on other
machines would: genui serve limits the runs one address has under way (--runs-per-client). With --greedy N, N more
connections share one address and ask for new pages only: a script, or with --crawl a crawler, which reads the
shell and never waits for the page (its run goes on for nobody until the server stops it).

A 503 or a 429 with Retry-After is the server saying "busy": the client waits that long before its next request
(unless --no-backoff). Anything else that is not a 2xx or 3xx, a timeout or a dropped connection is an error. A
probe asks for a cached page every second throughout, to show the server kept answering. At the end every
acknowledged post is read back, the server's peak RSS (VmHWM) is taken, and its log is searched for anything but
start-up and shutdown.

Prints a table, or with --json one JSON object. Exit status 1 when anything counted as an error happened.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.frames import (
    CanvasFrame,
    DoneFrame,
    EngineError,
    EngineOverloaded,
    Frame,
    GenerationRequest,
    StepFrame,
)
from engine.generation import batch_key

if TYPE_CHECKING:
    import httpx

ORDINARY = ("cached", "new", "regenerate", "post")  # what --mix weighs
KINDS = (*ORDINARY, "greedy")  # greedy: the --greedy connections' new pages
GREEDY_ADDRESS = "10.255.0.1"
DEFAULT_MIX = "cached=50,new=20,regenerate=10,post=20"
START_TIMEOUT_S = 300.0  # a real model may take minutes to load on a busy CPU
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
_POST = re.compile(r'<p class="genui-post-text"[^>]*>(.*?)</p></li>', re.S)  # dir="auto" since session 62
_WAIT = re.compile(r'<noscript><meta http-equiv="refresh" content="0; url=([^"]+)"></noscript>')
_PROGRESS = re.compile(r".*: +\d+%\|")  # a progress bar (transformers loading a checkpoint's weights)
# uvicorn's start-up and shutdown lines, and genui's two about loading the model (genui.app), each after its time
# (genui serve's log has one since session 62): the only lines a healthy server's log has with the access log off.
_LIFECYCLE = re.compile(
    r"(\d{4}-\d\d-\d\d [\d:,]+ )?INFO: +(Started server process|Waiting for application (startup|shutdown)|"
    r"Application (startup|shutdown) "
    r"complete|Uvicorn running on|Shutting down|Finished server process|loading the model; |model \S+ loaded in |"
    r"page cache |stopping: )"
)


# -- the stand-in engine ----------------------------------------------------------------------------------------


def page_writer(prompt: str, seed: int) -> str:
    """About 2 KB of page, the size of two 256-token canvases, with internal links and one foreign one."""
    match = re.search(r"<(?:title|thread|board)>(.*?)</", prompt)
    title = match.group(1) if match else "Home"
    slug = title.replace(" ", "_")
    paragraphs = "".join(
        f"<p>{title} is a topic in computing. Section {n} explains it with seed {seed}, and links to "
        f'<a href="/wiki/{slug}_{n}">{title} {n}</a>.</p>'
        for n in range(8)
    )
    return (
        f"<article><h1>{title}</h1>{paragraphs}"
        f'<h2>See also</h2><ul><li><a href="https://example.org/{slug}">elsewhere</a></li></ul></article>'
    )


@dataclass(eq=False)
class _Job:
    request: GenerationRequest
    frames: asyncio.Queue[Frame | EngineError | None] = field(default_factory=asyncio.Queue)
    cancelled: bool = False


# Tokens a canvas of the fake engine holds: a page of the wiki's 384 tokens is 2 canvases, and the forum's and the
# desktop's 512 too. (Until session 53 the canvases came from max_canvases, which the sites no longer set, and every
# page was 1 canvas.)
CANVAS_TOKENS = 256


def _batch_key(request: GenerationRequest) -> tuple[object, ...] | None:
    # as engine.Scheduler batches: equal settings (engine.generation.batch_key, which leaves the prompt, the seed and
    # the opening out), and a request with gaps in its opening alone. (Until session 53 the opening counted, so no two
    # wiki articles, whose openings hold their titles, shared a batch.)
    return None if request.gaps else batch_key(request)


def _canvases(request: GenerationRequest) -> int:
    if request.max_tokens is not None:
        return max(1, math.ceil(request.max_tokens / CANVAS_TOKENS))
    return max(1, request.max_canvases)


class QueuedEngine:
    """engine.Scheduler's behaviour without a model: bounded queue, micro-batches, streaming, cancellation.

    One batch runs at a time, for ``steps`` denoising steps of ``step_s`` seconds per canvas. It sleeps where the
    real worker thread would compute, so it measures the web layer, not the CPU cost of a model.
    """

    def __init__(
        self,
        max_queue: int = 8,
        max_batch: int = 4,
        batch_window_s: float = 0.01,
        step_s: float = 0.04,
        steps: int = 8,
        writer: Callable[[str, int], str] = page_writer,
    ) -> None:
        self.max_queue, self.max_batch, self.batch_window_s = max_queue, max_batch, batch_window_s
        self.step_s, self.steps, self.writer = step_s, steps, writer
        self._pending: deque[_Job] = deque()
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._batch_s = 1.0  # moving average of one batch, for retry_after (as engine.Scheduler)

    @property
    def model_id(self) -> str:
        return f"queued-fake-{self.steps}x{self.step_s}"

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        return self._frames(request)

    def fits(self, request: GenerationRequest) -> bool:
        return True

    async def close(self) -> None:
        self._closed = True
        for job in self._pending:
            job.frames.put_nowait(EngineError("the engine has closed"))
        self._pending.clear()
        if self._worker is not None:
            self._worker.cancel()

    async def _frames(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        job = _Job(request)
        self._submit(job)
        try:
            while (item := await job.frames.get()) is not None:
                if isinstance(item, EngineError):
                    raise item
                yield item
        finally:
            job.cancelled = True  # the consumer left, or the job is over: either way nobody reads its frames

    def _submit(self, job: _Job) -> None:
        if self._closed:
            raise EngineError("the engine has closed")
        self._pending = deque(j for j in self._pending if not j.cancelled)
        if len(self._pending) >= self.max_queue:
            waits = 1 + len(self._pending) / self.max_batch
            raise EngineOverloaded(retry_after=max(1.0, self._batch_s * waits))
        self._pending.append(job)
        self._wake.set()
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while not self._closed:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            await asyncio.sleep(self.batch_window_s)  # requests that arrive together share one batch
            first = self._pending.popleft()
            batch, key = [first], _batch_key(first.request)
            for job in list(self._pending):
                if key is not None and len(batch) < self.max_batch and _batch_key(job.request) == key:
                    self._pending.remove(job)
                    batch.append(job)
            started = time.perf_counter()
            await self._run([job for job in batch if not job.cancelled])
            self._batch_s = 0.8 * self._batch_s + 0.2 * (time.perf_counter() - started)

    async def _run(self, batch: list[_Job]) -> None:
        started = time.perf_counter()
        texts = [self.writer(job.request.prompt, job.request.seed) for job in batch]
        canvases = _canvases(batch[0].request) if batch else 1
        noise = random.Random(0)
        finished: list[list[CanvasFrame]] = [[] for _ in batch]
        for canvas in range(canvases):
            for step in range(1, self.steps + 1):
                await asyncio.sleep(self.step_s)
                if all(job.cancelled for job in batch):
                    return  # abandoned within one step, as the real worker is
                for job, text in zip(batch, texts, strict=True):
                    part = _canvas(text, canvas, canvases)
                    shown = len(part) * step // (self.steps + 1)
                    draft = part[:shown] + "".join(noise.choice("abcdefghij ") for _ in range(len(part) - shown))
                    job.frames.put_nowait(StepFrame(canvas, step, draft, accepted=shown, entropy=1.0 / step))
            for index, (job, text) in enumerate(zip(batch, texts, strict=True)):
                frame = CanvasFrame(canvas, self.steps, _canvas(text, canvas, canvases), tokens=256, seconds=0.0)
                finished[index].append(frame)
                job.frames.put_nowait(frame)
        seconds = time.perf_counter() - started
        for job, text, frames in zip(batch, texts, finished, strict=True):
            job.frames.put_nowait(DoneFrame(text, tuple(frames), tokens_per_forward=1.0, ttff_s=0.0, seconds=seconds))
            job.frames.put_nowait(None)


def _canvas(text: str, index: int, count: int) -> str:
    size = -(-len(text) // count)
    return text[index * size : (index + 1) * size]


# -- the server side --------------------------------------------------------------------------------------------


def die_with_parent() -> None:
    """Linux: SIGTERM this server when the process that started it dies, so a run killed mid-way leaves none behind."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def serve(args: argparse.Namespace) -> int:
    import uvicorn.config

    from genui.cli import main

    die_with_parent()
    # One access-log line per request would cost the server measurable CPU at these rates; errors still log.
    uvicorn.config.LOGGING_CONFIG["loggers"]["uvicorn.access"]["level"] = "WARNING"
    argv = ["serve", "--host", "127.0.0.1", "--port", "0", "--db", args.db, "--site", "wiki", "--site", "forum"]
    if args.read_ahead is not None:
        argv += ["--read-ahead", str(args.read_ahead)]
    if args.runs_per_client is not None:
        argv += ["--runs-per-client", str(args.runs_per_client)]
    if args.real_model:
        import torch

        from engine import load_engine

        torch.set_num_threads(args.torch_threads)  # more threads than free cores is catastrophically slow
        options = {"max_queue": args.max_queue, "max_batch": args.max_batch}
        code: int = main(
            argv,
            load_engine=lambda model, device, int8: load_engine(
                args.real_model, device, quantize="int8" if int8 else None, **options
            ),
        )
        return code
    engine = QueuedEngine(args.max_queue, args.max_batch, step_s=args.step_ms / 1000, steps=args.steps)
    code = main(argv, load_engine=lambda model, device, int8: engine)
    return code


# -- the client side --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What one kind of request got."""

    latencies: list[float] = field(default_factory=list)  # seconds, of 2xx/3xx answers
    statuses: Counter[str] = field(default_factory=Counter)  # "2xx", "3xx", "503+retry-after", "429+retry-after", ...

    def record(self, status: str, seconds: float) -> None:
        self.statuses[status] += 1
        if status in ("2xx", "3xx"):
            self.latencies.append(seconds)

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status not in ("2xx", "3xx", *BUSY))

    def summary(self) -> dict[str, object]:
        ordered = sorted(self.latencies)
        return {
            "requests": sum(self.statuses.values()),
            "ok": len(ordered),
            "busy_503": self.statuses["503+retry-after"],
            "busy_429": self.statuses["429+retry-after"],
            "errors": self.errors,
            "p50_ms": _percentile(ordered, 50),
            "p95_ms": _percentile(ordered, 95),
            "p99_ms": _percentile(ordered, 99),
            "statuses": dict(sorted(self.statuses.items())),
        }


def _percentile(ordered: list[float], p: int) -> float | None:
    if not ordered:
        return None
    return round(1000 * ordered[min(len(ordered) - 1, max(0, -(-p * len(ordered) // 100) - 1))], 1)  # nearest rank


BUSY = ("503+retry-after", "429+retry-after")  # the server saying "not now", with when to ask again


def _status(status: int, retry_after: str | None) -> str:
    if status in (503, 429):
        return f"{status}+retry-after" if retry_after and retry_after.isdigit() else f"{status}-without-retry-after"
    if 200 <= status < 400:
        return f"{status // 100}xx"
    return str(status)


@dataclass
class Run:
    args: argparse.Namespace
    url: str
    warm: list[str]
    tallies: dict[str, Tally] = field(default_factory=lambda: {kind: Tally() for kind in KINDS})
    acknowledged: dict[str, list[str]] = field(default_factory=dict)  # thread -> post texts answered 303
    probes: list[float | None] = field(default_factory=list)  # seconds per probe, None when it failed


async def _written(client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """GET ``url`` and, when the page is still being written, its wait URL: the answer once the page is finished."""
    response = await client.get(url, headers=headers)
    wait = _WAIT.search(response.text) if response.status_code == 200 else None
    if wait is None:
        return response
    while True:  # a wait URL answers a page still being written after 45 s with a 503 that asks again at once
        response = await client.get(html.unescape(wait.group(1)), headers=headers)
        if not _still_writing(response):
            return response
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))


def _still_writing(response: httpx.Response) -> bool:
    """Whether a wait URL answered before its page was written (genui.views.WAIT_ANSWER_S), to be asked again."""
    return response.status_code == 503 and "still being written" in response.text


async def _client(run: Run, index: int, deadline: float, weights: list[float]) -> None:
    import httpx

    rng = random.Random(run.args.seed * 1000 + index)
    timeout = httpx.Timeout(run.args.timeout)
    greedy = index >= run.args.clients  # one of the --greedy connections
    address = GREEDY_ADDRESS if greedy else f"10.{index // 250}.{index % 250}.1"
    headers = {"X-Forwarded-For": address}
    async with httpx.AsyncClient(base_url=run.url, timeout=timeout, follow_redirects=False, headers=headers) as client:
        n = 0
        while time.monotonic() < deadline:
            kind = "greedy" if greedy else rng.choices(ORDINARY, weights)[0]
            n += 1
            started = time.perf_counter()
            thread, text = "", ""
            try:
                if kind == "cached":
                    response = await client.get(rng.choice(run.warm))
                elif kind == "greedy" and run.args.crawl:  # the shell only: its run goes on, for nobody, until it stops
                    response = await client.get(f"/wiki/Load_{index}_{n}")
                elif kind in ("new", "greedy"):
                    response = await _written(client, f"/wiki/Load_{index}_{n}")
                elif kind == "regenerate":
                    target = rng.choice(run.warm).removeprefix("/wiki")
                    response = await client.post("/_genui/regenerate", data={"site": "wiki", "url": target})
                else:
                    thread, text = f"/forum/r/load/Thread_{rng.randrange(8)}", f"reply {index}-{n} under load"
                    response = await client.post(thread, data={"user": f"client{index}", "text": text})
            except httpx.TimeoutException:
                run.tallies[kind].record("timeout", time.perf_counter() - started)
                continue
            except httpx.TransportError as error:
                run.tallies[kind].record(type(error).__name__, time.perf_counter() - started)
                await asyncio.sleep(0.1)
                continue
            status = _status(response.status_code, response.headers.get("retry-after"))
            run.tallies[kind].record(status, time.perf_counter() - started)
            if kind == "post" and status == "3xx":
                run.acknowledged.setdefault(thread, []).append(text)
            if status in BUSY and not run.args.no_backoff:
                await asyncio.sleep(min(float(response.headers["retry-after"]), max(0.0, deadline - time.monotonic())))


async def _probe(run: Run, deadline: float) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=run.url, timeout=run.args.timeout) as client:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                response = await client.get(run.warm[0])
                run.probes.append(time.perf_counter() - started if response.status_code == 200 else None)
            except httpx.HTTPError:
                run.probes.append(None)
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))


async def _warm_up(url: str, count: int, timeout: float) -> list[str]:
    """Write ``count`` pages before the clock starts; they are what the "cached" requests ask for."""
    import httpx

    pages = [f"/wiki/Warm_{n}" for n in range(count)]
    async with httpx.AsyncClient(base_url=url, timeout=timeout, follow_redirects=True) as client:

        async def fetch(number: int, page: str) -> None:
            address = {"X-Forwarded-For": f"10.253.{number // 250}.{number % 250}"}  # written side by side
            while (response := await _written(client, page, address)).status_code in (503, 429):
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            response.raise_for_status()

        await asyncio.gather(*(fetch(number, page) for number, page in enumerate(pages)))
    return pages


async def _lost_posts(run: Run) -> int:
    import httpx

    lost = 0
    async with httpx.AsyncClient(base_url=run.url, timeout=run.args.timeout) as client:
        for number, (thread, texts) in enumerate(run.acknowledged.items()):
            # htmx asks for the thread without waiting for a page: the posts come with the placeholder. Each from an
            # address of its own: an unwritten thread starts a run, and one address may start only so many at once.
            headers = {"HX-Request": "true", "X-Forwarded-For": f"10.254.{number // 250}.{number % 250}"}
            page = await client.get(thread, headers=headers)  # not a 200: every post of it counts as lost
            shown = Counter(html.unescape(text) for text in _POST.findall(page.text))
            lost += sum(max(0, n - shown[text]) for text, n in Counter(texts).items())
    return lost


async def _load(args: argparse.Namespace, url: str) -> tuple[Run, float]:
    warm = await _warm_up(url, args.warm, args.timeout)
    run = Run(args, url, warm)
    mix = dict(item.split("=") for item in args.mix.split(","))
    if set(mix) - set(ORDINARY):
        raise SystemExit(f"bench/load.py: --mix takes {', '.join(ORDINARY)}; greedy connections come from --greedy")
    weights = [float(mix.get(kind, 0)) for kind in ORDINARY]
    started = time.monotonic()
    deadline = started + args.seconds
    connections = args.clients + args.greedy
    await asyncio.gather(_probe(run, deadline), *(_client(run, i, deadline, weights) for i in range(connections)))
    return run, time.monotonic() - started


def _peak_rss_mib(pid: int) -> float | None:
    try:
        match = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
    return round(int(match.group(1)) / 1024, 1) if match else None


def _start(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = workdir / "server.log"
    command = [sys.executable, str(Path(__file__).resolve()), "serve", "--db", str(workdir / "load.sqlite3")]
    command += ["--max-queue", str(args.max_queue), "--max-batch", str(args.max_batch)]
    command += ["--step-ms", str(args.step_ms), "--steps", str(args.steps)]
    if args.read_ahead is not None:
        command += ["--read-ahead", str(args.read_ahead)]
    if args.runs_per_client is not None:
        command += ["--runs-per-client", str(args.runs_per_client)]
    if args.real_model:
        command += ["--real-model", args.real_model, "--torch-threads", str(args.torch_threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.torch_threads), "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = _LISTENING.search(log.read_text(encoding="utf-8", errors="replace"))
        if match:
            return server, f"http://127.0.0.1:{match.group(1)}", log
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    server.kill()
    raise SystemExit(f"the server did not start within {START_TIMEOUT_S:.0f} s")


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def measure(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="genui-load-") as folder:
        server, url, log = _start(args, Path(folder))
        try:
            run, seconds = asyncio.run(_load(args, url))
            lost = asyncio.run(_lost_posts(run))
            answering = server.poll() is None
            peak = _peak_rss_mib(server.pid)
        finally:
            _stop(server)
        log_lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    unexpected = [line for line in log_lines if not _LIFECYCLE.match(line) and not _PROGRESS.match(line)]
    kinds = {kind: run.tallies[kind].summary() for kind in KINDS if kind != "greedy" or args.greedy}
    every = Tally()  # the ordinary clients' requests: the greedy ones have their row of their own
    for kind, tally in run.tallies.items():
        if kind == "greedy":
            continue
        every.latencies += tally.latencies
        every.statuses.update(tally.statuses)
    total = every.summary()
    failed_probes = sum(1 for probe in run.probes if probe is None)
    answered = [probe for probe in run.probes if probe is not None]
    engine = (
        f"engine.load_engine({args.real_model!r}), queue {args.max_queue}, batch {args.max_batch}"
        if args.real_model
        else f"QueuedEngine: queue {args.max_queue}, batch {args.max_batch}, {args.steps} steps x {args.step_ms} ms"
        " per canvas, 2 canvases"
    )
    return {
        "clients": args.clients,
        "seconds": round(seconds, 1),
        "engine": engine,
        "mix": args.mix,
        "read_ahead": "genui serve's default" if args.read_ahead is None else args.read_ahead,
        "runs_per_client": "genui serve's default" if args.runs_per_client is None else args.runs_per_client,
        "greedy": args.greedy,
        "crawl": args.crawl,
        "backoff": not args.no_backoff,
        "warm_pages": len(run.warm),
        "kinds": kinds,
        "total": total,
        "throughput_rps": round(int(total["requests"]) / seconds, 1),  # type: ignore[call-overload]
        "ok_rps": round(int(total["ok"]) / seconds, 1),  # type: ignore[call-overload]
        "probes": len(run.probes),
        "failed_probes": failed_probes,
        "slowest_probe_ms": round(1000 * max(answered), 1) if answered else None,
        "server_answering_at_end": answering,
        "posts_acknowledged": sum(len(texts) for texts in run.acknowledged.values()),
        "posts_lost": lost,
        "peak_rss_mib": peak,
        "error_log": unexpected[:20],
        "error_log_lines": len(unexpected),
    }


def ok(result: dict[str, object]) -> bool:
    total = result["total"]
    assert isinstance(total, dict)
    kinds = result["kinds"]
    assert isinstance(kinds, dict)
    return (
        total["errors"] == 0
        and kinds.get("greedy", {"errors": 0})["errors"] == 0
        and result["failed_probes"] == 0
        and result["posts_lost"] == 0
        and result["error_log_lines"] == 0
        and bool(result["server_answering_at_end"])
    )


def print_table(result: dict[str, object]) -> None:
    print(f"genui load test: {result['clients']} clients for {result['seconds']} s against 127.0.0.1")
    print(f"engine: {result['engine']}; mix {result['mix']}; back off on 503: {result['backoff']}")
    print(f"read ahead: {result['read_ahead']}; runs per client: {result['runs_per_client']}")
    if result["greedy"]:
        crawl = ", the shell only (a crawler)" if result["crawl"] else ""
        print(f"greedy: {result['greedy']} more connections from one address, new pages only{crawl}")
    print()
    columns = [("requests", 8), ("ok", 7), ("busy_503", 7), ("busy_429", 7), ("errors", 6)]
    columns += [("p50_ms", 8), ("p95_ms", 8), ("p99_ms", 8)]
    headings = {"busy_503": "503+RA", "busy_429": "429+RA", "p50_ms": "p50 ms", "p95_ms": "p95 ms", "p99_ms": "p99 ms"}
    print(f"{'kind':<14} " + " ".join(f"{headings.get(key, key):>{width}}" for key, width in columns))
    kinds = result["kinds"]
    assert isinstance(kinds, dict)
    for name, row in [*kinds.items(), ("all but greedy" if result["greedy"] else "all", result["total"])]:
        cells = [("-" if row[key] is None else row[key], width) for key, width in columns]
        print(f"{name:<14} " + " ".join(f"{cell:>{width}}" for cell, width in cells))
    total = result["total"]
    assert isinstance(total, dict)
    print()
    whose = " (the ordinary clients)" if result["greedy"] else ""
    print(
        f"throughput{whose}: {result['throughput_rps']} requests/s ({result['ok_rps']} ok/s); "
        f"statuses: {total['statuses']}"
    )
    print(
        f"server: peak RSS {result['peak_rss_mib']} MiB; answered every probe: "
        f"{result['failed_probes'] == 0} ({result['probes']} probes, slowest {result['slowest_probe_ms']} ms)"
    )
    print(f"posts: {result['posts_acknowledged']} acknowledged, {result['posts_lost']} lost")
    print(f"server log beyond start-up/shutdown: {result['error_log_lines']} lines")
    for line in result["error_log"]:  # type: ignore[attr-defined]
        print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/load.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the clients run (default: %(default)s)")
    parser.add_argument("--mix", default=DEFAULT_MIX, help="request kinds and weights (default: %(default)s)")
    parser.add_argument("--warm", type=int, default=8, help="pages written before the clock starts (default: 8)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a request counts as an error")
    parser.add_argument("--no-backoff", action="store_true", help="retry at once after a 503 instead of waiting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-queue", type=int, default=8, help="the engine's queue bound (default: %(default)s)")
    parser.add_argument("--max-batch", type=int, default=4, help="requests per batch (default: %(default)s)")
    parser.add_argument("--step-ms", type=float, default=40.0, help="fake engine: ms per denoising step")
    parser.add_argument("--steps", type=int, default=8, help="fake engine: denoising steps per canvas")
    parser.add_argument("--real-model", metavar="PATH", help="serve this checkpoint with engine.load_engine instead")
    parser.add_argument("--torch-threads", type=int, default=1, help="real model: torch threads (default: 1)")
    parser.add_argument(
        "--read-ahead", type=int, metavar="N", help="pages the server reads ahead (default: genui serve's own)"
    )
    parser.add_argument(
        "--runs-per-client", type=int, metavar="N", help="the server's limit per address (default: genui serve's own)"
    )
    parser.add_argument("--greedy", type=int, default=0, metavar="N", help="connections from one address (see above)")
    parser.add_argument(
        "--crawl", action="store_true", help="the greedy connections read the page's shell only, as a crawler does"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    if (argv if argv is not None else sys.argv[1:])[:1] == ["serve"]:
        parser.add_argument("command")
        parser.add_argument("--db", required=True)
        return serve(parser.parse_args(argv))
    args = parser.parse_args(argv)
    if args.warm < 1:
        parser.error("--warm must be 1 or more: the cached and regenerate requests, and the probe, ask for those pages")
    result = measure(args)
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0 if ok(result) else 1


if __name__ == "__main__":
    sys.exit(main())
