"""Where the XSS payloads live: the shared corpora beside the repo (../shared/security/xss) and genui's own."""

from __future__ import annotations

from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "security" / "xss"
CORPUS_FILES = [
    "bleach_payloads.json",
    "dompurify_payloads.json",
    "dompurify_xss_exec_payloads.json",
    "h5sc_payloads.json",
]
HTMX_PAYLOADS = Path(__file__).with_name("xss_payloads_htmx.json")
