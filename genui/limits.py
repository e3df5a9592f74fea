"""How many readers' posts one client may store a minute: each is a page-cache write synced to disk, and each is
loaded and sent again with every view of its thread, so one client posting in a loop would slow every visitor of
that thread and fill the disk. A reader types far fewer. Past the limit a post is a 429 with Retry-After that keeps
what was typed (genui.views), and nothing is stored.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from genui.words import Refusal

WINDOW_S = 60.0  # the span the limit counts posts over
SWEEP_AT = 10_000  # clients remembered before those with no post in the window are forgotten


class TooManyPosts(Refusal):
    """A client posted ``limit`` times in the last minute already: a 429 that says when one more is taken."""

    def __init__(self, limit: int, seconds: int) -> None:
        # said of the address, not of the visitor: behind a venue's NAT one who posted once was told "You posted 10
        # replies" (a forum host's review)
        said = "too_many_posts_one" if limit == 1 else "too_many_posts"
        super().__init__(429, "too_many_heading", said, {"Retry-After": str(seconds)}, n=limit, seconds=seconds)


class PostRate:
    """Up to ``per_minute`` posts by one client (its address) in any 60 s; 0: no limit."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 0:
            raise ValueError(f"per_minute must be 0 (no limit) or more, got {per_minute}")
        self.per_minute, self._clock = per_minute, clock
        self._posted: dict[str, deque[float]] = {}  # per client, when its posts in the window were stored

    def check(self, client: str | None) -> None:
        """Raise TooManyPosts when ``client`` (None: genui itself) may store no post now."""
        if not self.per_minute or client is None:
            return
        times = self._recent(client)
        if len(times) >= self.per_minute:
            raise TooManyPosts(self.per_minute, max(1, math.ceil(times[0] + WINDOW_S - self._clock())))

    def posted(self, client: str | None) -> None:
        """``client`` stored a post just now."""
        if not self.per_minute or client is None:
            return
        if len(self._posted) >= SWEEP_AT:
            for other in list(self._posted):
                if not self._recent(other):
                    del self._posted[other]
        self._recent(client).append(self._clock())

    def _recent(self, client: str) -> deque[float]:
        times = self._posted.setdefault(client, deque())
        while times and times[0] <= self._clock() - WINDOW_S:
            times.popleft()
        return times
