"""What the web tests share: a scripted TextEngine (frames shaped like the real engine's, no model, no torch),
the example sites' folder, and the type of the ``client_factory`` fixture."""

from __future__ import annotations

import asyncio
import html
import random
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path

from httpx import Response
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from engine.frames import CanvasFrame, DoneFrame, EngineOverloaded, Frame, GenerationRequest, QueuedFrame, StepFrame
from genui.edits import Infill
from genui.pages import Pages
from genui.sites import Site, load_site

SITES_DIR = Path(__file__).resolve().parent.parent / "sites"
EXAMPLES = ("forum", "os", "wiki")  # the example sites: one a user adds beside them (genui new) is not the tests'


def example_sites() -> list[Site]:
    """The example sites, whatever else sites/ holds (a hackathon's own site, written there by genui new)."""
    return [load_site(SITES_DIR / name) for name in EXAMPLES]


ClientFactory = Callable[..., TestClient]  # client_factory(sites, engine=FakeEngine(), **TestClient options)
Writer = Callable[[str, int], str]  # (prompt, seed) -> the page's final text
InfillWriter = Callable[[Infill], str]  # an in-place edit -> the region's text


def wiki_writer(prompt: str, seed: int) -> str:
    """A wiki page in the corpus's vocabulary: the article named in the prompt, linking to two more."""
    match = re.search(r"<title>(.*?)</title>", prompt)
    title = match.group(1) if match else "Genpedia"
    slug = title.replace(" ", "_")
    return (
        f'<article class="wiki">\n<h1>{title}</h1>\n'
        f"<p>{title} is a topic in computing, written with seed {seed}.</p>"
        f'<h2>See also</h2><ul><li><a href="/wiki/{slug}_tree">{title} tree</a></li>'
        f'<li><a href="/wiki/{slug}_map">{title} map</a></li></ul></article>'
    )


def region_writer(edit: Infill) -> str:
    """An in-place edit: a thread's new reply to the newest post in the prompt, or a rewritten paragraph."""
    said = re.search(r"<rewrite>(.*?)</rewrite>", edit.generation.prompt)
    posts = re.findall(r'<reply user="([^"]*)">', edit.generation.prompt)
    seed = edit.generation.seed
    if said is None and not edit.after and posts:
        reply = f'<div class="reply"><p class="meta"><b>bot{seed}</b> · 1 point</p><p>Welcome, {posts[-1]}!</p></div>'
        opening = '<div class="replies">\n<div class="reply"><p class="meta"><b>'  # the forum's reply_opening.j2
        if edit.before.endswith(opening):  # continue the opening the model was given, as the model does
            return reply.removeprefix('<div class="reply"><p class="meta"><b>') + "</div>"
        return reply
    return f"<p>Rewritten with seed {seed}{': ' + said.group(1) if said else ''}.</p>"


class FakeEngine:
    """Writes ``writer(prompt, seed)`` in canvases of ``canvas_chars`` characters, ``steps`` draft frames each.

    Drafts reveal the final text left to right with noise after it, plus ``draft_extra`` (to test that drafts are
    sanitised). ``delay`` seconds pass after every frame. Records every request and every cancelled stream.
    Variations write ``writer(prompt, seed)`` with " (variation i)" after the first ``</h1>``, their frames
    interleaved; an in-place edit writes ``region(edit)`` as one canvas and ends with before + region + after.
    """

    def __init__(
        self,
        writer: Writer = wiki_writer,
        *,
        canvas_chars: int = 160,
        steps: int = 3,
        delay: float = 0.0,
        model_id: str = "fake-model",
        overloaded: float | None = None,
        draft_extra: str = "",
        max_prompt_chars: int | None = None,
        max_opening_chars: int | None = None,
        max_tokens: int | None = None,
        region: InfillWriter = region_writer,
    ) -> None:
        self.region = region
        self.writer, self.canvas_chars, self.steps, self.delay = writer, canvas_chars, steps, delay
        self.max_prompt_chars = max_prompt_chars  # fits() refuses longer prompts, as a model's positions would
        self.max_opening_chars = max_opening_chars  # and longer openings, as a page's tokens would
        self.max_tokens = max_tokens  # and pages of more tokens, as a model's positions would
        self.overloaded, self.draft_extra = overloaded, draft_extra
        self._model_id = model_id
        self.canvas_length = 256  # tokens a canvas, as the real engine says it (the progress line counts canvases)
        self.calls: list[GenerationRequest] = []  # stream() requests
        self.variations: list[tuple[GenerationRequest, int]] = []  # stream_variants() requests and their n
        self.infills: list[Infill] = []  # infill() requests
        self.cancelled = 0
        self.finished = 0
        # Set to a threading.Event, runs hold their final frame until it is set: a test sees a draft for certain,
        # however late a browser's stream connects.
        self.hold: threading.Event | None = None

    @property
    def model_id(self) -> str:
        return self._model_id

    async def close(self) -> None:
        pass

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        self.calls.append(request)
        return self._frames(request, self._text(request))

    def fits(self, request: GenerationRequest) -> bool:
        opening = len(request.opening) + sum(len(after) for after in request.gaps)
        if self.max_opening_chars is not None and opening > self.max_opening_chars:
            return False
        if self.max_tokens is not None and (request.max_tokens or 0) > self.max_tokens:
            return False
        return self.max_prompt_chars is None or len(request.prompt) <= self.max_prompt_chars

    def stream_variants(self, request: GenerationRequest, n: int) -> AsyncIterator[Frame]:
        self.variations.append((request, n))
        return self._variants(request, n)

    def infill(self, request: Infill) -> AsyncIterator[Frame]:
        self.infills.append(request)
        generation = replace(request.generation, max_tokens=None, max_canvases=1, opening="")
        region = self.region(request)
        return self._frames(generation, region, wrap=(request.before, request.after), size=len(region) + 1)

    def _text(self, request: GenerationRequest) -> str:
        text = self.writer(request.prompt, request.seed)
        if not text.startswith(request.opening):  # the engine's contract: the text starts with the opening
            text = request.opening + text
        return text

    async def _variants(self, request: GenerationRequest, n: int) -> AsyncIterator[Frame]:
        text = self._text(request)
        streams = [
            self._frames(request, text.replace("</h1>", f" (variation {index + 1})</h1>", 1), variant=index)
            for index in range(n)
        ]
        while streams:  # side by side: one frame of each in turn
            for stream in list(streams):
                try:
                    yield await anext(stream)
                except StopAsyncIteration:
                    streams.remove(stream)

    async def _frames(
        self,
        request: GenerationRequest,
        text: str,
        variant: int = 0,
        wrap: tuple[str, str] = ("", ""),
        size: int | None = None,
    ) -> AsyncIterator[Frame]:
        if self.overloaded is not None:
            raise EngineOverloaded(self.overloaded)
        started = time.perf_counter()
        size = size or self.canvas_chars
        most = request.max_canvases if request.max_tokens is None else -(-request.max_tokens // self.canvas_length)
        canvases = [text[i : i + size] for i in range(0, len(text), size)][:most]
        noise = random.Random(request.seed + variant)
        finished: list[CanvasFrame] = []
        try:
            for index, final in enumerate(canvases):
                for step in range(1, self.steps + 1):
                    shown = len(final) * step // (self.steps + 1)
                    tail = "".join(noise.choice("abcdefghij ") for _ in range(len(final) - shown))
                    draft = final[:shown] + self.draft_extra + tail
                    yield StepFrame(index, step, draft, accepted=shown, entropy=1.0 / step, variant=variant)
                    await asyncio.sleep(self.delay)
                frame = CanvasFrame(index, self.steps, final, len(final.split()), seconds=0.01, variant=variant)
                finished.append(frame)
                yield frame
                await asyncio.sleep(self.delay)
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        while self.hold is not None and not self.hold.is_set():
            await asyncio.sleep(0.01)
        self.finished += 1
        seconds = time.perf_counter() - started
        whole = wrap[0] + "".join(canvases) + wrap[1]
        yield DoneFrame(whole, tuple(finished), tokens_per_forward=1.0, ttff_s=0.0, seconds=seconds, variant=variant)


async def after_places(places: Sequence[int], frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
    """``frames`` after a QueuedFrame for each of ``places`` (a place in line, as engine.Scheduler tells one), 0.3 s
    apart: past a stream's interval between two messages, so that each is said."""
    for ahead in places:
        yield QueuedFrame(ahead)
        await asyncio.sleep(0.3)
    async for frame in frames:
        yield frame


def pages_of(client: TestClient) -> Pages:
    """The Pages of a started app's client."""
    pages = client.app.state.pages  # type: ignore[attr-defined]
    assert isinstance(pages, Pages)
    return pages


def ws_messages(client: TestClient, url: str) -> list[str]:
    """Every WebSocket message the server sends before it closes the socket normally."""
    received: list[str] = []
    with client.websocket_connect(url) as socket:
        while True:
            try:
                received.append(socket.receive_text())
            except WebSocketDisconnect as closed:
                assert closed.code == 1000
                return received


NOSCRIPT_REFRESH = re.compile(r'<noscript><meta http-equiv="refresh" content="0; url=([^"]+)"></noscript>')


def wait_url(response: Response) -> str | None:
    """Where a page being written sends a browser without scripts (its <noscript> refresh); None for other pages."""
    match = NOSCRIPT_REFRESH.search(response.text)
    return html.unescape(match.group(1)) if match else None


def visit(client: TestClient, url: str, **kwargs: object) -> Response:
    """GET ``url`` as a browser without scripts does: a page being written answers with the site's shell at once,
    whose refresh leads to the wait URL, which redirects to the page (or serves it) once it is finished."""
    response = client.get(url, **kwargs)  # type: ignore[arg-type]
    target = wait_url(response)
    if target is None:
        return response
    kwargs["follow_redirects"] = True
    return client.get(target, **kwargs)  # type: ignore[arg-type]


# a stored page's own HTML, as served (and a thread's note that its newest posts are answered next)
PAGE = re.compile(r'<div class="genui-page">(.*?)</div>\n(?:<p class="genui-quiet" role="status"[^\n]*\n)?</div>', re.S)


def page_html(text: str) -> str:
    """The stored page's own HTML inside a served document (which must carry its version)."""
    match = PAGE.search(text)
    assert match is not None and "data-version=" in text, text[:300]
    return match.group(1)


def eventually(check: Callable[[], bool], within: float = 10.0) -> bool:
    """Whether ``check()`` comes true within ``within`` seconds (asked every 20 ms)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()
