"""What a server has done and is doing, in Prometheus's text format (``/_genui/metrics``), read by prometheus_client.

Counted as it happens: the HTTP answers by status (``Counted``, outermost, so the host check's refusals too), the
runs that ended by kind and outcome, the written runs' seconds, tokens, canvases and denoising steps, and readers'
posts stored. Read when scraped: the model's state, the runs under way, the engine's queue. Each app has its own
registry, so two apps in one process (the tests) count apart. Sets of variations are not counted as runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.frames import EngineOverloaded
from genui.store import PageWithdrawn

if TYPE_CHECKING:
    from genui.generation import Generation
    from genui.pages import Pages

CONTENT_TYPE = CONTENT_TYPE_LATEST
# a page's seconds on a laptop CPU run from about 1 s (a short page, a fast machine) to a minute (a long thread on
# a slow one); its first frame comes within a second unless the run waited for the engine
RUN_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0, 120.0)
FIRST_FRAME_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class Metrics:
    """One app's counters and histograms, and the gauges read from its ``Pages`` when scraped."""

    def __init__(self, pages: Pages) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.responses = Counter(
            "genui_http_responses", "HTTP responses sent, by status code", ["code"], registry=registry
        )
        self.runs = Counter(
            "genui_runs",
            "Runs that ended: kind whole, regenerate, replies, rewrite or ahead (reading ahead); outcome written, "
            "cancelled (left unwatched, or the server stopping), overloaded (the engine's queue full, or the model "
            "loading), withdrawn (the page deleted meanwhile) or failed",
            ["site", "kind", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "genui_run_seconds", "Seconds a written run took, from its request to its last frame", ["site"],
            buckets=RUN_BUCKETS, registry=registry,
        )  # fmt: skip
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
            "Canvases the written runs denoised; stopped early: the adaptive stop ended it before its step cap",
            ["site", "stopped_early"],
            registry=registry,
        )
        self.steps = Counter(
            "genui_denoising_steps", "Denoising steps of the written runs' canvases", ["site"], registry=registry
        )
        self.posts = Counter("genui_posts", "Readers' posts stored", ["site"], registry=registry)
        self.registry.register(_Now(pages))

    def ended(self, generation: Generation, kind: str) -> None:
        """A run ended: counted by its outcome, and a written one's time and work."""
        site = generation.key.site
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

    def posted(self, site: str) -> None:
        self.posts.labels(site).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _Now(Collector):
    """The gauges, read from the app's state when scraped."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    def collect(self) -> Iterator[Metric]:
        pages = self.pages
        engine = pages.engine
        ready = engine is not None and getattr(engine, "failure", None) is None and pages.store.gone() is None
        yield GaugeMetricFamily("genui_model_ready", "1 while the model can write pages, 0 else", value=int(ready))
        info = InfoMetricFamily("genui_model", "The model pages are written with (the one loading, while it loads)")
        info.add_metric([], {"model": pages.model_id or ""})
        yield info
        runs = GaugeMetricFamily("genui_runs_active", "Runs under way: a visitor's, or reading ahead", labels=["run"])
        visitors, ahead = pages.under_way()
        runs.add_metric(["visitor"], visitors)
        runs.add_metric(["ahead"], ahead)
        yield runs
        requests = getattr(engine, "requests", None)  # engine.Scheduler's; another TextEngine may not say
        if isinstance(requests, tuple):
            queue = GaugeMetricFamily(
                "genui_engine_requests", "The engine's requests: waiting in its queue, or in its running batch",
                labels=["state"],
            )  # fmt: skip
            queue.add_metric(["waiting"], requests[0])
            queue.add_metric(["running"], requests[1])
            yield queue


class Counted:
    """ASGI middleware: counts every HTTP response by its status code (``Metrics.responses``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def counted(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.responses.labels(str(message["status"])).inc()
            await send(message)

        try:
            await self.app(scope, receive, counted)
        except Exception:
            if not started:  # Starlette's ServerErrorMiddleware, outside this one, answers 500
                self.metrics.responses.labels("500").inc()
            raise
