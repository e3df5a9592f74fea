"""genui's own templates (templates/): the page shell, its fragments, and the pieces the stream sends.

One template serves both the full page and the htmx fragment: a request with ``HX-Request`` gets block ``main``
rendered alone, anything else the whole document, and both carry ``Vary: HX-Request`` so no cache mixes them up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import HTTPConnection
from starlette.responses import HTMLResponse

from genui.assets import ASSETS_PATH
from genui.links import navigation_attrs
from genui.resources import bundled
from genui.security import htmx_config_meta

TEMPLATES_DIR = bundled("templates")
FRAGMENT_BLOCK = "main"


def posted_at(created: float) -> dict[str, str]:
    """When a reader's post was made, as a ``<time>`` holds it: ``iso`` for its datetime attribute, ``text`` in UTC
    for whoever reads the HTML as it is (a page exported, no scripts); static/genui.js shows it in the reader's time."""
    moment = datetime.fromtimestamp(created, UTC)
    return {"iso": moment.strftime("%Y-%m-%dT%H:%M:%SZ"), "text": moment.strftime("%Y-%m-%d %H:%M UTC")}


def post_blocks(text: str) -> list[tuple[bool, str]]:
    """A reader's post as its blocks, each (quoted, text): its runs of lines that start with ``>`` (a quote, as mail
    and forums write one; static/genui.js's Quote button writes them so), each line without its ``>`` and the space
    after it, and the text between them. A line that starts with ``>>>`` is a Python prompt pasted, not a quote."""
    blocks: list[tuple[bool, list[str]]] = []
    for line in text.split("\n"):
        quoted = line.startswith(">") and not line.startswith(">>>")
        if quoted:
            line = line[2:] if line.startswith("> ") else line[1:]
        if blocks and blocks[-1][0] == quoted:
            blocks[-1][1].append(line)
        else:
            blocks.append((quoted, [line]))
    return [(quoted, "\n".join(lines).strip("\n")) for quoted, lines in blocks if "".join(lines).strip()]


# An <img> of a site's assets/, as the sanitiser leaves it: its attributes quoted, the src one of ASSETS_PATH's.
_ASSET_IMAGE = re.compile(r'(<img\b(?:\s+[\w:-]+(?:="[^"]*")?)*?\s+src=")(?=' + re.escape(ASSETS_PATH) + ")")


def images_under(html: str, base: str) -> str:
    """A page's HTML as stored, with its images of the site's assets/ under ``base`` (genui serve --base-path): the
    cache keeps them at /_genui/assets/…, as every server of it serves them, whatever its base."""
    return _ASSET_IMAGE.sub(lambda found: found[1] + base, html) if base else html


def is_htmx(request: HTTPConnection) -> bool:
    return request.headers.get("hx-request") == "true"


class Shell:
    """Renders templates/ for responses and for stream messages."""

    def __init__(self, directory: Path = TEMPLATES_DIR, base: str = "") -> None:
        """``base``: the path every URL of the server is under ("" or "/demo": genui serve --base-path)."""
        self.env = Environment(
            loader=FileSystemLoader(directory),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            # read once: genui's own templates change with its code, and a server whose files were updated in place
            # (git pull) read the new templates beside its old Python, and answered 500 (a soak test)
            auto_reload=False,
        )
        self.env.globals.update(
            {
                "nav": navigation_attrs,
                "htmx_config": htmx_config_meta(),
                "posted_at": posted_at,
                "post_blocks": post_blocks,
                "base": base,
            }
        )
        self.env.filters["served"] = lambda html: images_under(html, base)  # a stored page's HTML as served here

    def response(
        self,
        request: HTTPConnection,
        template: str,
        context: Mapping[str, Any],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        """The full page, or block ``main`` alone for htmx; always with ``Vary: HX-Request``."""
        fragment = is_htmx(request)
        compiled = self.env.get_template(template)
        variables = {**context, "fragment": fragment}
        if fragment:
            body = "".join(compiled.blocks[FRAGMENT_BLOCK](compiled.new_context(variables)))
        else:
            body = compiled.render(variables)
        response = HTMLResponse(body, status_code=status_code, headers=dict(headers or {}))
        response.headers["Vary"] = "HX-Request"
        return response

    def part(self, name: str, *args: Any) -> str:
        """One macro of parts.html, rendered on its own (a stream message, or a piece of one)."""
        macro = getattr(self.env.get_template("parts.html").module, name)
        return str(macro(*args))
