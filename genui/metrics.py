"""What a server has done and is doing, in Prometheus's text format (``/_genui/metrics``), read by prometheus_client.

Counted as it happens: the app's HTTP answers by handler and status, and their seconds (``Counted``, outermost, so
the host check's refusals too), the page requests answered from the cache or with a page being written, the streams
by how they ended, the runs that ended by kind and outcome, the written runs' seconds, tokens, canvases and denoising
steps, and readers' posts stored. Read when scraped: the server's status as ``/_genui/health`` says it, the model,
the runs under way, the engine's queue, and the process (memory, CPU, open files). Each app has its own registry, so
two apps in one process (the tests) count apart; every series of the sites served is there from the start at 0, so
that ``rate()`` and ``increase()`` see a first burst. Sets of variations are not counted as runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import genui
from engine.frames import EngineOverloaded
from genui.store import PageWithdrawn

if TYPE_CHECKING:
    from genui.generation import Generation
    from genui.pages import Pages

# OpenMetrics' `_created` series, which the text format gives as gauges named like counters (`genui_runs_created`,
# a time) and a fifth more series: not written (an SRE's review). The switch is the process's, turned as genui loads.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
KINDS = ("whole", "regenerate", "replies", "rewrite", "ahead")  # genui.pages.Run, and reading ahead
OUTCOMES = ("written", "cancelled", "overloaded", "withdrawn", "failed")
STREAM_ENDS = ("sent", "left", "dropped", "refused", "error")
STATUSES = ("ready", "loading", "failed", "stopping")  # as /_genui/health says them (Pages.status)
# each handler's codes from 0: served, and what an alert watches (too many, broken, busy)
CODES = ("200", "429", "500", "503")
# a page's seconds on a laptop CPU run from about 1 s (a short page, a fast machine) to a minute (a long thread on
# a slow one); its first frame comes within a fraction of a second unless the run waited for the engine
RUN_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0, 120.0)
FIRST_FRAME_BUCKETS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
NO_ROUTE = "none"  # the handler of a request no route took (a 404 from the router, a host refused before it)


class Metrics:
    """One app's counters and histograms, and the gauges read from its ``Pages`` when scraped."""

    def __init__(self, pages: Pages) -> None:
        self.registry = registry = CollectorRegistry()
        self.responses = Counter(
            "genui_http_responses",
            "HTTP responses the app sent, by handler (its route's path) and status code",
            ["handler", "code"],
            registry=registry,
        )
        self.durations = Histogram(
            "genui_http_request_duration_seconds",
            "Seconds from a request's arrival to its response's end, by handler (a page being written: its "
            "placeholder's answer; a page control posted without scripts: up to 45 s)",
            ["handler"],
            registry=registry,
        )
        self.shown = Counter(
            "genui_page_requests",
            "Pages asked for (GET): answered from the page cache (cached), or with a page being written (written: a "
            "run started or joined)",
            ["site", "answer"],
            registry=registry,
        )
        self.streams = Counter(
            "genui_streams",
            "Page streams (WebSockets) that ended: sent (the page, or why it could not be written), left (the "
            "visitor went to another page or closed it), dropped (the connection broke), refused (another site's "
            "page), error (a bug, in the log)",
            ["end"],
            registry=registry,
        )
        self.runs = Counter(
            "genui_runs",
            "Runs that ended: kind whole, regenerate, replies, rewrite or ahead (reading ahead); outcome written, "
            "cancelled (left unwatched, the server stopping, or reading ahead giving way to a visitor), overloaded "
            "(the engine's queue full), withdrawn (the page deleted meanwhile) or failed",
            ["site", "kind", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "genui_run_duration_seconds",
            "Seconds a written run took, from its request to the engine's last frame",
            ["site"],
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.first_frame = Histogram(
            "genui_run_first_frame_seconds",
            "Seconds from a written run's request to its first frame (waiting for the engine included)",
            ["site"],
            buckets=FIRST_FRAME_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter("genui_tokens", "Tokens the written runs wrote", ["site"], registry=registry)
        self.canvases = Counter(
            "genui_canvases",
            "Canvases the written runs denoised; stopped_early: the adaptive stop ended it before its step cap",
            ["site", "stopped_early"],
            registry=registry,
        )
        self.steps = Counter(
            "genui_denoising_steps", "Denoising steps of the written runs' canvases", ["site"], registry=registry
        )
        self.posts = Counter("genui_posts", "Readers' posts stored", ["site"], registry=registry)
        registry.register(_Now(pages))
        ProcessCollector(registry=registry)  # process_*: memory, CPU seconds, open files, start time (Linux)
        self._sites: set[str] = set()
        self.served(pages.sites)
        for end in STREAM_ENDS:
            self.streams.labels(end)

    def served(self, sites: Iterable[str]) -> None:
        """Every series of these sites, at 0 until counted: a series that appeared at its first count was at 1
        when first scraped, and ``increase()`` saw none of a first burst (an SRE's review)."""
        for site in set(sites) - self._sites:
            self._sites.add(site)
            for kind in KINDS:
                for outcome in OUTCOMES:
                    self.runs.labels(site, kind, outcome)
            for answer in ("cached", "written"):
                self.shown.labels(site, answer)
            for early in ("true", "false"):
                self.canvases.labels(site, early)
            for counter in (self.tokens, self.steps, self.posts, self.seconds, self.first_frame):
                counter.labels(site)

    def routes(self, routes: Iterable[BaseRoute]) -> None:
        """Every handler's answers of CODES, at 0 until counted (as ``served``)."""
        for route in routes:
            handler = getattr(route, "path", "") or NO_ROUTE
            for code in CODES:
                self.responses.labels(handler, code)

    def ended(self, generation: Generation, kind: str) -> None:
        """A run ended: counted by its outcome, and a written one's time and work."""
        site = generation.key.site
        self.served([site])  # a site made under --reload meanwhile
        error = generation.error
        if generation.page is not None:
            outcome = "written"
        elif generation.cancelled:
            outcome = "cancelled"
        elif isinstance(error, EngineOverloaded):
            outcome = "overloaded"
        elif isinstance(error, PageWithdrawn):
            outcome = "withdrawn"
        else:
            outcome = "failed"
        self.runs.labels(site, kind, outcome).inc()
        done = generation.done
        if outcome != "written" or done is None:
            return
        self.seconds.labels(site).observe(done.seconds)
        self.first_frame.labels(site).observe(done.ttff_s)
        for canvas in done.canvases:
            self.tokens.labels(site).inc(canvas.tokens)
            self.steps.labels(site).inc(canvas.steps)
            self.canvases.labels(site, "true" if canvas.stopped_early else "false").inc()

    def page_asked(self, site: str, cached: bool) -> None:
        self.served([site])
        self.shown.labels(site, "cached" if cached else "written").inc()

    def stream_ended(self, end: str) -> None:
        self.streams.labels(end).inc()

    def posted(self, site: str) -> None:
        self.served([site])
        self.posts.labels(site).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _Now(Collector):
    """The gauges, read from the app's state when scraped."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    def collect(self) -> Iterator[Metric]:
        pages = self.pages
        status = pages.status()
        yield GaugeMetricFamily(
            "genui_model_ready", "1 while the model can write pages, 0 else", value=float(status == "ready")
        )
        states = GaugeMetricFamily(
            "genui_status", "The server's status as /_genui/health says it: 1 for the one it is in", labels=["status"]
        )
        for each in STATUSES:
            states.add_metric([each], float(each == status))
        yield states
        model = InfoMetricFamily("genui_model", "The model pages are written with (the one loading, while it loads)")
        model.add_metric([], {"model": pages.model_id or ""})
        yield model
        build = InfoMetricFamily("genui_build", "The genui that serves")
        build.add_metric([], {"version": genui.__version__})
        yield build
        yield CounterMetricFamily(
            "genui_store_write_failures",
            "Writes to the page cache that failed as it could not store anything (its disk full, an I/O error, "
            "read-only): pages written for nothing, posts refused",
            value=pages.store.write_failures,
        )
        yield GaugeMetricFamily(
            "genui_store_failing",
            "1 while the page cache's last write failed so, until one succeeds (/_genui/health's storage_error)",
            value=float(pages.store.failing is not None),
        )
        runs = GaugeMetricFamily("genui_runs_active", "Runs under way: a visitor's, or reading ahead", labels=["run"])
        visitors, ahead = pages.under_way()
        runs.add_metric(["visitor"], visitors)
        runs.add_metric(["ahead"], ahead)
        yield runs
        requests = getattr(pages.engine, "requests", None)  # engine.Scheduler's; another TextEngine may not say
        if isinstance(requests, tuple):
            queue = GaugeMetricFamily(
                "genui_engine_requests",
                "The engine's jobs (a page, a thread's replies, a set of variations): waiting in its queue, or in its "
                "running batch",
                labels=["state"],
            )
            queue.add_metric(["waiting"], requests[0])
            queue.add_metric(["running"], requests[1])
            yield queue


class Counted:
    """ASGI middleware: counts every HTTP response the app sends by its handler (the path of the route that took the
    request) and status code, and times it (``Metrics.responses``, ``Metrics.durations``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        code = "500"  # Starlette's ServerErrorMiddleware, outside this one, answers an error raised through it

        async def counted(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            handler = getattr(scope.get("route"), "path", "") or NO_ROUTE  # set by the router on the same scope
            self.metrics.responses.labels(handler, code).inc()
            self.metrics.durations.labels(handler).observe(time.perf_counter() - began)
