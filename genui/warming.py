"""Writing a site's pages before anyone asks (``genui cache warm``): a demo on a laptop's CPU, where a page takes
tens of seconds, is then clicked through from the cache.

From the pages named (the front page unless told), breadth first along the links each page shows (the model's, then
the site's navigation, as reading ahead takes them: genui.readahead.reading_list), each page written exactly as the
click would write it: the same route, prompt, parent and seed, so the page stored is the one the click would have
produced. Pages already stored are not written again, but their links are followed, so warming again goes further.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from genui.generation import Generation
from genui.pages import Job, Pages, RouteTooLong
from genui.prompts import PromptError
from genui.readahead import reading_list
from genui.routing import BadRequest
from genui.store import PageWithdrawn

ALL_LINKS = 1000  # the links of one page followed: all of them


@dataclass(frozen=True, slots=True)
class Warmed:
    """One page on the way: written now (``seconds``), found stored, or skipped (``problem``)."""

    url: str  # the served URL
    seconds: float | None = None  # how long writing it took; None when it was stored already or skipped
    problem: str = ""  # why it was skipped


async def warm(pages: Pages, start: list[Job], count: int, report: Callable[[Warmed], None]) -> int:
    """Write up to ``count`` pages not stored yet, from the ``start`` pages along their links, breadth first;
    ``report`` hears of each page on the way. How many were written. The engine's errors are raised: the pages
    written before stay stored."""
    waiting = deque({job.key: job for job in start}.values())  # a page named twice (`/` and `/x/..`) is one
    seen = {job.key for job in start}
    written = 0
    while waiting and written < count:
        job = waiting.popleft()
        if not job.cached:
            report(Warmed(job.url, problem='its route is never cached (cache = "none")'))
            continue
        began = time.monotonic()
        try:
            shown = pages.open(job)
            page = await shown.result() if isinstance(shown, Generation) else shown
        except (BadRequest, PromptError, RouteTooLong) as err:  # no prompt to be had: a click would fail the same way
            report(Warmed(job.url, problem=str(err) or type(err).__name__))
            continue
        except PageWithdrawn:  # `genui posts delete` or `cache forget` meanwhile: not stored, warmed next time
            report(Warmed(job.url, problem="what it was written from was deleted meanwhile"))
            continue
        if isinstance(shown, Generation):
            written += 1
            report(Warmed(job.url, seconds=time.monotonic() - began))
        else:
            report(Warmed(job.url))
        for linked in reading_list(pages, job, page.html, ALL_LINKS):
            if linked.key not in seen:
                seen.add(linked.key)
                waiting.append(linked)
    return written
