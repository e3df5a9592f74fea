"""Where genui's own files live: beside the packages in a source checkout, inside the package once installed.

A checkout keeps ``templates/``, ``static/`` and ``sites/`` at the repository root, next to ``genui/``; a wheel
carries the same folders as ``genui/_bundle/*`` (setup.py maps them in), so ``pip install .`` gives a
working ``genui serve`` too. Every default path goes through ``bundled``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent


def bundled(name: str) -> Path:
    """The folder ``name`` (templates, static or sites) of this installation."""
    installed = PACKAGE / "_bundle" / name
    return installed if installed.is_dir() else CHECKOUT / name


def data_dir() -> Path:
    """Where the page cache goes by default: ``var/`` in a checkout, the user's data folder once installed."""
    if not (PACKAGE / "_bundle").is_dir():  # a checkout
        return CHECKOUT / "var"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "genui"
