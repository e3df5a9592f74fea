"""Placeholders handed out for a run whose stream has not connected yet (genui.generation, genui.variations)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Claims:
    """Each claim holds a run up to ``seconds`` though nobody watches it yet: a placeholder's stream connects a round
    trip after it is handed out, and a reload closes the old page's stream after the new page's request. As each
    claim lapses, ``lapsed`` is called (the run then looks whether anyone is left)."""

    def __init__(self, seconds: float, lapsed: Callable[[], None]) -> None:
        self._seconds, self._lapsed = seconds, lapsed
        self._handles: list[asyncio.TimerHandle] = []

    def add(self, times: float = 1.0) -> None:
        """A placeholder handed out, held ``times`` the claims' seconds (a connection that broke: longer)."""

        def lapse() -> None:  # nobody came for it
            self._handles.remove(handle)
            self._lapsed()

        handle = asyncio.get_running_loop().call_later(self._seconds * times, lapse)
        self._handles.append(handle)

    def fulfil(self) -> None:
        """A watcher came: the oldest placeholder's, as likely as any."""
        if self._handles:
            self._handles.pop(0).cancel()

    def clear(self) -> bool:
        """Drop every claim (the run ended): whether any was still waiting for its watcher."""
        waiting = bool(self._handles)
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()
        return waiting

    def __bool__(self) -> bool:
        return bool(self._handles)
