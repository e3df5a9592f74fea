"""Candidates for a page's next version, written side by side by one batched engine call (``stream_variants``).

A ``Variations`` run is watched like a ``Generation``, but holds one draft per candidate; at the end each candidate
is a sanitised page kept in memory (never stored) under a random id, until a visitor keeps one, which stores it as
the page's next version. Candidates nobody keeps are forgotten (the newest ``KEPT_SETS`` finished sets are remembered).
A set has an address of its own (``/_genui/variations?site=..&id=..``), so a reload or Back shows it again while it
is remembered.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import cached_property

from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, QueuedFrame, StepFrame
from genui.claims import Claims
from genui.runtime import SiteRuntime
from genui.store import PageKey

KEPT_SETS = 64  # finished sets of candidates remembered for keeping, the newest (and every one being written)
STOPPED_SETS = 64  # sets that ended with nothing to keep, remembered to say so at their address (the newest)
log = logging.getLogger("genui")


class VariationsCancelled(EngineError):
    """A set nobody watched any more, or a server stopping: it ended with nothing to keep."""

    def __init__(self) -> None:
        super().__init__("the variations were cancelled")


@dataclass(frozen=True)
class Candidates:
    """What a watcher sees: each candidate's text so far (sanitised into ``drafts`` only if a watcher shows them),
    the finished pages, or an error."""

    texts: tuple[str, ...]
    render: Callable[[int, str], str] | None = field(default=None, repr=False, compare=False)
    pages: tuple[str, ...] | None = None  # sanitised, links rewritten: the candidates as they would be stored
    error: EngineError | None = None
    progress: tuple[int, int] | None = None  # (canvas, step), both 1-based, of the candidate least far on
    ahead: int = 0  # before the first step: runs the engine writes or has waiting before the set (QueuedFrame)

    @property
    def finished(self) -> bool:
        return self.pages is not None or self.error is not None

    @cached_property
    def drafts(self) -> tuple[str, ...]:
        # Lazy: a fast engine sends drafts far more often than a watcher shows them (one each draft interval).
        if self.pages is not None:
            return self.pages
        render = self.render
        return tuple(
            render(index, text) if render is not None and text else "" for index, text in enumerate(self.texts)
        )


class Variations:
    """One batched run writing ``n`` candidates of a page's next version."""

    def __init__(
        self,
        runtime: SiteRuntime,
        key: PageKey,
        url: str,  # the page's site-relative URL
        frames: Callable[[], AsyncIterator[Frame]],
        n: int,
        unclaimed_s: float,
        replied: int = 0,  # the newest reader post the candidates' prompt read (a thread's), kept as StoredPage.replied
        read: tuple[int, ...] = (),  # the ids of every reader post of the thread when it began: one gone, none is kept
        conversation: bool = False,  # candidates of a thread before its first post: the one kept gets the newest
        # version's readers' posts and replies after it (Pages.keep)
    ) -> None:
        self.id = secrets.token_urlsafe(12)
        self.runtime, self.key, self.url, self.n, self.replied = runtime, key, url, n, replied
        self.read, self.conversation = read, conversation
        self.seconds = 0.0
        self._latest = Candidates(("",) * n)
        self._drawn: dict[int, tuple[str, str]] = {}  # per candidate: its last draft's text and HTML
        self._changed = asyncio.Event()
        self._watchers = 0
        self._claims = Claims(unclaimed_s, self._abandon)  # placeholders handed out whose watcher has not come yet
        self._task = asyncio.get_running_loop().create_task(self._run(frames))
        self.claim()

    async def watch(self, interval: float = 0.0, heartbeat: float = 0.0) -> AsyncGenerator[Candidates, None]:
        """Every state until the end (a slow watcher skips to the newest); at most one draft each ``interval``.
        ``heartbeat``: where no new state comes for as long, the last one comes again, the same object."""
        self._watchers += 1
        self._claims.fulfil()
        try:
            seen: Candidates | None = None
            while True:
                latest, changed = self._latest, self._changed
                if latest is not seen:
                    seen = latest
                    yield latest
                    if latest.finished:
                        return
                    if interval > 0:
                        await asyncio.sleep(interval)
                        continue
                if latest is self._latest:
                    if heartbeat <= 0:
                        await changed.wait()
                        continue
                    try:
                        async with asyncio.timeout(heartbeat):  # (in this task, as Generation.watch)
                            await changed.wait()
                    except TimeoutError:
                        yield latest
        finally:
            self._watchers -= 1
            self._abandon()

    @property
    def pages(self) -> tuple[str, ...] | None:
        return self._latest.pages

    @property
    def finished(self) -> bool:
        return self._latest.finished

    @property
    def error(self) -> EngineError | None:
        """Why the set ended with nothing to keep, once it has."""
        return self._latest.error

    def cancel(self) -> asyncio.Task[None]:
        self._fail(VariationsCancelled())
        self._task.cancel()
        return self._task

    def claim(self, times: float = 1.0) -> None:
        """A visitor was handed the set's live placeholder (its first showing, a reload, Back): its stream connects a
        round trip later, and the set waits for it up to ``unclaimed_s`` seconds (``times`` as long: a stream whose
        connection broke) though its last watcher leaves meanwhile (a reload closes the old page's stream after the
        new page's request)."""
        if not self._latest.finished:
            self._claims.add(times)

    def _abandon(self) -> None:
        """Cancel the set when nobody watches it any more (or never came to), and no placeholder handed out waits for
        its watcher."""
        if self._watchers == 0 and not self._claims and not self._latest.finished:
            self.cancel()

    def _draft(self, variant: int, text: str) -> str:
        """A candidate's draft as HTML; rendered once, though the other candidates' drafts moved on meanwhile."""
        drawn = self._drawn.get(variant)
        if drawn is None or drawn[0] != text:
            drawn = self._drawn[variant] = (text, self.runtime.render(text, draft=True))
        return drawn[1]

    def _publish(self, latest: Candidates) -> None:
        self._latest = latest
        self._changed.set()
        self._changed = asyncio.Event()

    def _fail(self, error: EngineError) -> None:
        if not self._latest.finished:
            self._publish(Candidates(self._latest.texts, self._draft, error=error))

    async def _run(self, start: Callable[[], AsyncIterator[Frame]]) -> None:
        finished: list[dict[int, str]] = [{} for _ in range(self.n)]  # per candidate: canvas index -> final text
        shown = [""] * self.n  # per candidate: the text of its newest draft
        where = [(1, 0)] * self.n  # per candidate: (canvas, step), 1-based
        done: dict[int, str] = {}
        frames: AsyncIterator[Frame] | None = None
        try:
            frames = start()
            async for frame in frames:
                if not 0 <= frame.variant < self.n:
                    continue
                stable = finished[frame.variant]
                if isinstance(frame, QueuedFrame):
                    if self._latest.progress is None and frame.ahead != self._latest.ahead:
                        self._publish(Candidates(self._latest.texts, self._draft, ahead=frame.ahead))
                elif isinstance(frame, StepFrame | CanvasFrame):
                    if isinstance(frame, CanvasFrame):
                        stable[frame.canvas] = frame.text
                        where[frame.variant] = (frame.canvas + 1, frame.steps)
                    else:
                        where[frame.variant] = (frame.canvas + 1, frame.step)
                    text = "".join(text for index, text in sorted(stable.items()) if index < frame.canvas)
                    text += frame.text
                    if isinstance(frame, CanvasFrame) and frame.steps == 0 and shown[frame.variant].startswith(text):
                        continue  # an opening's canvas, already shown with the gaps filled in it: no step back
                    shown[frame.variant] = text
                    self._publish(Candidates(tuple(shown), self._draft, progress=min(where)))
                elif isinstance(frame, DoneFrame):
                    done[frame.variant] = frame.text
                    self.seconds = max(self.seconds, frame.seconds)
                    if len(done) == self.n:
                        page = self.runtime.page_of(self.key)  # whose route may follow links
                        pages = tuple(self.runtime.render(done[index], on=page) for index in range(self.n))
                        self._publish(Candidates(tuple(shown), pages=pages))
                        return
            raise EngineError("the engine's stream ended before every candidate was written")
        except EngineError as err:
            self._fail(err)
        except asyncio.CancelledError:
            self._fail(VariationsCancelled())
            raise
        except Exception as err:  # an engine bug must still end every watcher's wait
            log.exception("variations of %s failed", self.runtime.url(self.url))
            self._fail(EngineError(f"generation failed: {err}"))
        finally:
            self._claims.clear()
            close = getattr(frames, "aclose", None)
            if close is not None:
                await close()


class VariationSets:
    """The variation runs under way and the finished ones still to keep, by id."""

    def __init__(self) -> None:
        self._sets: OrderedDict[str, Variations] = OrderedDict()

    def add(self, variations: Variations) -> Variations:
        """Remember ``variations``, forgetting the oldest sets that ended with nothing to keep (failed, cancelled)
        past STOPPED_SETS (their address says why, again and again, a reload or Back: "Those variations are gone"
        read as if they had never been), then the oldest finished sets past KEPT_SETS. A set still being written is
        never dropped: someone is watching it, and the engine's own limits bound how many there are."""
        stopped = [set_id for set_id, other in self._sets.items() if other.finished and other.pages is None]
        for set_id in stopped[: max(0, len(stopped) - STOPPED_SETS)]:
            del self._sets[set_id]
        self._sets[variations.id] = variations
        finished = [set_id for set_id, other in self._sets.items() if other.finished and other.pages is not None]
        for set_id in finished[: max(0, len(finished) - KEPT_SETS)]:
            del self._sets[set_id]
        return variations

    @property
    def running(self) -> bool:
        """Whether a set is still being written."""
        return any(not variations.finished for variations in self._sets.values())

    @property
    def writing(self) -> int:
        """How many sets are being written."""
        return sum(not variations.finished for variations in self._sets.values())

    def get(self, set_id: str) -> Variations | None:
        return self._sets.get(set_id)

    def forget(self, set_id: str) -> None:
        self._sets.pop(set_id, None)

    async def close(self) -> None:
        for variations in list(self._sets.values()):
            await wait_cancelled(variations.cancel())
        self._sets.clear()


async def wait_cancelled(task: asyncio.Task[None]) -> None:
    """Wait for a run ``task`` just cancelled to end, at shutdown: its cancellation and its own failure are its
    watchers' news, but the closer's own cancellation (a second Ctrl-C, a timeout) goes on up."""
    try:
        await task
    except asyncio.CancelledError:
        if (closing := asyncio.current_task()) is not None and closing.cancelling():
            raise
    except Exception:  # noqa: BLE001 - see above
        pass
