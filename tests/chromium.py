"""Debian's Chromium as every browser test launches it (never a downloaded browser)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Headless as root, and nothing that phones home: the machines' network is closed beyond the package registries.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
