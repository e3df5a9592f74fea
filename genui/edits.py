"""Edits of a stored page: what genui asks an engine for when it writes part of a page and keeps the rest.

The engine's in-place editing (``engine.infill``) rewrites a region between a ``before`` and an ``after`` text that
come back byte for byte; its variations (``stream_variants``) write n candidates of one prompt in one batched call.
genui builds the infill request here with the fields of ``engine.infill.InfillRequest`` rather than importing it,
because that module loads torch and the web layer stays free of it (the engine reads the fields, nothing else).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from engine.frames import Frame, GenerationRequest, TextEngine

VARIANTS = 3  # candidates one "variations" request writes side by side
MAX_INSTRUCTION = 200  # characters of a visitor's instruction for a rewrite
_GENUI_ATTRS = re.compile(r'\s(?:hx-[a-z:-]+|aria-current)="[^"]*"')
_GENUI_BLOCKS = re.compile(r'<ol class="genui-postlist genui-inline">.*?</ol>', re.S)
_ANCHOR = re.compile(r'<a\s(?:[^>"]|"[^"]*")*>')  # an <a> start tag as the sanitiser writes it: values in "


@dataclass(frozen=True, slots=True)
class Infill:
    """Rewrite ``region_tokens`` tokens between ``before`` and ``after`` (engine.infill.InfillRequest's fields)."""

    generation: GenerationRequest  # its prompt comes first; seed, steps and temperatures apply
    before: str
    after: str
    region_tokens: int


@runtime_checkable
class EditingEngine(TextEngine, Protocol):
    """An engine that can also write variations and edit in place (engine.scheduler.Scheduler, the tests' fake)."""

    @property
    def canvas_length(self) -> int: ...

    def stream_variants(self, request: GenerationRequest, n: int) -> AsyncIterator[Frame]: ...

    def infill(self, request: Infill) -> AsyncIterator[Frame]: ...


_REWRITE_TAG = re.compile(r"</?rewrite", re.IGNORECASE)


def editing(engine: TextEngine | None) -> EditingEngine | None:
    """``engine`` when it can edit pages in place and write variations; None otherwise."""
    return engine if isinstance(engine, EditingEngine) else None


def model_text(stored_html: str, mount: str = "") -> str:
    """Stored HTML as the model's own text to read: without genui's navigation attributes and readers' posts (the
    posts are in the prompt already, as data), its links as the site's own (``/r/linux/Kernel_news``, not the
    ``/forum/r/linux/Kernel_news`` of a site served under ``mount``): a link the model copies from it must lead
    where it led."""
    html = _ANCHOR.sub(lambda tag: _unmounted(tag[0], mount), stored_html) if mount else stored_html
    return _GENUI_ATTRS.sub("", _GENUI_BLOCKS.sub("", html))


def _unmounted(tag: str, mount: str) -> str:
    """An ``<a>`` tag whose link is genui's (it carries ``hx-get``) under ``mount``, with its href the site's own.
    Text, not a parse: what the model reads is a page cut anywhere, which a parser would close or mend."""
    if f' hx-get="{mount}/' not in tag:
        return tag
    return tag.replace(f' href="{mount}/', ' href="/', 1)


def with_instruction(prompt: str, said: str) -> str:
    """The page's prompt with a visitor's instruction for the rewrite: data in the prompt, like a reader's post,
    inside genui's own tag, which the instruction cannot close or open again (its `<rewrite` written `&lt;rewrite`)."""
    said = _REWRITE_TAG.sub(lambda tag: "&lt;" + tag[0][1:], said)
    return f"{prompt}<rewrite>{said}</rewrite>\n" if said else prompt


def fitted_before(engine: EditingEngine, request: GenerationRequest, before: str, room: int | None = None) -> str:
    """The longest tail of ``before`` that fits the model after the prompt, with ``room`` tokens (default one
    canvas) left for the region.

    ``before`` is only what the model reads; the page keeps its own bytes, so a long page is cut from the front,
    at a tag boundary.
    """
    probe = replace(request, max_tokens=room or engine.canvas_length, opening="", gaps=())

    def fits(tail: str) -> bool:
        return engine.fits(replace(probe, prompt=request.prompt + tail))

    if fits(before):
        return before
    starts = [found.start() for found in re.finditer("<", before) if found.start() > 0]  # the tails it may keep
    low, high = 0, len(starts)  # the first start whose tail fits is in starts[low:high + 1]; len(starts): none
    while low < high:  # a shorter tail fits wherever a longer one does
        middle = (low + high) // 2
        if fits(before[starts[middle] :]):
            high = middle
        else:
            low = middle + 1
    return before[starts[low] :] if low < len(starts) else ""


def reply_tokens(engine: EditingEngine, request: GenerationRequest) -> int:
    """Room for a thread's new replies: half the site's page budget (``tokens`` in site.toml), at least a canvas.
    The model ends them sooner with its end-of-text."""
    budget = request.max_tokens or engine.canvas_length
    return max(engine.canvas_length, budget // 2)


def region_tokens(engine: EditingEngine, section_html: str) -> int:
    """Room for a rewritten section: about its own length in tokens with some slack, within one canvas."""
    estimate = len(section_html) // 3 + 16  # a token is three to four characters of HTML
    return max(16, min(engine.canvas_length, estimate))
