"""Where the XSS payloads live: four public corpora vendored unchanged in tests/xss/ (see SOURCES.md there) and
genui's own htmx payloads in tests/xss_payloads_htmx.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS_DIR = Path(__file__).with_name("xss")
CORPUS_FILES = [
    "bleach_payloads.json",
    "dompurify_payloads.json",
    "dompurify_xss_exec_payloads.json",
    "h5sc_payloads.json",
]
HTMX_PAYLOADS = Path(__file__).with_name("xss_payloads_htmx.json")
PAYLOAD_FILES = [*CORPUS_FILES, HTMX_PAYLOADS.name]


def load_payloads(name: str) -> list[str]:
    """The attack strings of one payload file, by file name; a missing file fails the test instead of skipping it."""
    path = HTMX_PAYLOADS if name == HTMX_PAYLOADS.name else CORPUS_DIR / name
    if not path.exists():
        pytest.fail(f"XSS payloads not found at {path}: they ship with the tests, restore the file from git")
    payloads = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(payloads, list) and all(isinstance(p, str) for p in payloads), path
    return payloads
