"""A site's own files: its folder's ``assets/`` (a logo, a book's cover, a stylesheet's background or font), served
as they are at ``/_genui/assets/NAME/...``.

The only images a page shows are these: an ``<img>`` whose ``src`` names a file of the site's assets that is an
image (``is_image``) is kept by the sanitiser, and any other loses its place to its ``alt`` text. A model's image of
anything else would be a request the browser sends by itself, to a page that does not exist (and every GET of a
site's route may start a generation); one of these is a file on disk, which starts nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ASSETS_PATH = "/_genui/assets/"  # then the site's name, then the file's path in its assets folder
# what an <img> may show: the image types every browser of the last years draws
IMAGE_SUFFIXES = frozenset({".apng", ".avif", ".bmp", ".gif", ".ico", ".jpeg", ".jpg", ".png", ".svg", ".webp"})


class Revalidated(StaticFiles):
    """Files a browser asks again about (a 304 when unchanged) on each page it loads: without a Cache-Control a
    browser may keep its copy for a tenth of the file's age unasked, so after genui is upgraded in place (or a site's
    logo is replaced) its new pages could show the old file for hours."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


class Compressed:
    """Static files gzipped where the browser takes it (GZipMiddleware), each copy's ETag its own: the compressed copy's
    is weak (`W/"…"`), as nginx makes it, since one strong ETag for two bodies tells a cache they are byte for byte
    the same (a note left by earlier sessions). A browser's If-None-Match with either still gets its 304."""

    def __init__(self, app: ASGIApp, minimum_size: int = 1024) -> None:
        self.app = GZipMiddleware(app, minimum_size=minimum_size)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked = dict(scope.get("headers") or []).get(b"if-none-match", b"")

        async def weakened(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                etag = headers.get("etag")
                # a 304 to the compressed copy's tag too (a cache takes a 304's headers for the copy it holds)
                compressed = headers.get("content-encoding") == "gzip" or (
                    message["status"] == 304 and asked.startswith(b"W/")
                )
                if etag and compressed and not etag.startswith("W/"):
                    headers["etag"] = "W/" + etag
            await send(message)

        await self.app(scope, receive, weakened)


def asset_url(site: str, name: str) -> str:
    """The URL of ``name`` (a path inside the site's assets folder, ``covers/Dune.jpg``)."""
    return f"{ASSETS_PATH}{quote(site, safe='')}/{quote(name.lstrip('/'))}"


def asset_name(path: str) -> str | None:
    """A file's path inside an assets folder as a URL's path gives it, or None for one genui does not serve: empty,
    ``.`` or ``..`` anywhere, a hidden file or folder (``.git``, ``.DS_Store``), a backslash."""
    segments = path.split("/")
    if not path or "\\" in path or any(not part or part.startswith(".") for part in segments):
        return None
    return path


def asset_file(folder: Path, site: str, url: str) -> Path | None:
    """The file of a site's assets folder (``folder``) that ``url`` names, as a browser reads the URL (its query and
    fragment aside); None when it names none (another URL, a file not there, a link out of the folder)."""
    parts = urlsplit(url)
    prefix = f"{ASSETS_PATH}{site}/"
    path = unquote(parts.path)
    if parts.scheme or parts.netloc or not path.startswith(prefix):
        return None
    name = asset_name(path[len(prefix) :])
    if name is None:
        return None
    try:
        root = folder.resolve()
        found = (folder / name).resolve()
    except (OSError, RuntimeError):  # a link loop
        return None
    return found if found.is_relative_to(root) and found.is_file() else None


def is_image(folder: Path, site: str, url: str) -> bool:
    """Whether ``url`` names an image of the site's assets: what an ``<img src>`` of its pages may show."""
    found = asset_file(folder, site, url)
    return found is not None and found.suffix.lower() in IMAGE_SUFFIXES
