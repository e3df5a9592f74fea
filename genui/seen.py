"""When each cached page was last shown, for ``genui cache prune --unseen``: a public server's page cache grows by
every page a visitor's click writes, and the pages nobody reads again are the ones to let go.

A page shown from the cache costs no write of its own: the pages shown are noted in the page cache together,
``NOTE_EVERY_S`` after the first of them, in one transaction that waits for no other process (one holding the cache
has them noted the next time), and at shutdown. A crash loses the last minute's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time

from genui.store import PageKey, Store, is_busy

NOTE_EVERY_S = 60.0
KEPT = 100_000  # pages shown and not noted yet, at most (a cache held by another process for long): the oldest go

log = logging.getLogger("genui")


class Seen:
    def __init__(self, store: Store, every: float = NOTE_EVERY_S) -> None:
        self.store, self.every = store, every
        self._shown: dict[tuple[PageKey, int], float] = {}
        self._timer: asyncio.TimerHandle | None = None  # the next note, while pages shown wait for it
        self._failed = False  # said once, until a note succeeds again
        self.noting = True  # False: pages shown are not noted (genui cache export reads them all)

    def shown(self, key: PageKey, version: int) -> None:
        """Version ``version`` of the page was shown now."""
        if not self.noting:
            return
        self._shown.pop((key, version), None)  # newest last
        self._shown[key, version] = time.time()
        if len(self._shown) > KEPT:
            del self._shown[next(iter(self._shown))]
        self._later()

    def _later(self) -> None:
        """Note the pages shown ``every`` seconds from now, unless a note is due already (outside an event loop: now,
        where ``every`` is 0)."""
        if self._timer is not None:
            return
        try:
            self._timer = asyncio.get_running_loop().call_later(self.every, self.note)
        except RuntimeError:  # no loop running
            if self.every <= 0:
                self.note()

    def note(self) -> None:
        """Note the pages shown since the last note in the page cache."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._shown:
            return
        shown, self._shown = self._shown, {}
        try:
            self.store.note_seen(shown)
        except sqlite3.Error as err:  # FileGone, a read-only file, a full disk: pages are served all the same
            if is_busy(err):
                self._shown = {**shown, **self._shown}  # the next time
                with contextlib.suppress(RuntimeError):  # (no loop running: the next page shown, or shutdown)
                    self._timer = asyncio.get_running_loop().call_later(self.every, self.note)
                return
            if not self._failed:
                log.warning("could not note which cached pages were shown (genui cache prune --unseen): %s", err)
            self._failed = True
        else:
            self._failed = False
