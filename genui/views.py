"""The HTTP side of a site: show a page (cached, live, or generated to the end), take a reply, regenerate.

A plain GET works without JavaScript: on a cache miss it waits for the whole page and serves it finished. An htmx
request on a miss gets a placeholder that opens the live stream (genui/stream.py) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from starlette.datastructures import FormData
from starlette.requests import HTTPConnection, Request
from starlette.responses import RedirectResponse, Response

from engine.frames import EngineError, EngineOverloaded
from genui.pages import Generation, Job, Pages, SiteRuntime
from genui.routing import VERSION_KEY, BadRequest, Location
from genui.shell import Shell, is_htmx
from genui.store import MAX_POST, MAX_USER, PostRejected, StoredPage

MAX_FORM_BYTES = 16 * 1024  # a reply is at most MAX_POST characters; anything much bigger is not a reply
WS_PATH = "/_genui/ws"
REGENERATE_PATH = "/_genui/regenerate"


def same_origin(connection: HTTPConnection) -> bool:
    """False for a browser request made by another site's page (browsers send Origin with every POST and WebSocket)."""
    origin = connection.headers.get("origin")
    if origin is None:
        return True
    try:
        return urlsplit(origin).netloc == connection.headers.get("host")
    except ValueError:  # not a URL at all ("http://["): no page of this site sent it
        return False


def is_number(raw: str, digits: int) -> bool:
    """``raw`` is 1 to ``digits`` ASCII digits. (str.isdigit() also takes "²", which int() refuses, and int() refuses
    more than 4,300 digits.)"""
    return raw.isascii() and raw.isdigit() and len(raw) <= digits


def versioned(url: str, version: int) -> str:
    return f"{url}{'&' if '?' in url else '?'}{urlencode({VERSION_KEY: version})}"


def guessed_title(location: Location) -> str:
    """A title for a page not written yet: its query, or its last path parameter ("Hash_table" -> "Hash table")."""
    if location.query:
        return next(iter(location.query.values()))
    if location.params:
        last = list(location.params.values())[-1].rstrip("/").rsplit("/", 1)[-1]
        return last.replace("_", " ")
    return ""


class Views:
    """Endpoints for the pages of every site, and the template contexts the stream shares with them."""

    def __init__(self, pages: Pages, shell: Shell, index_url: str | None) -> None:
        self.pages, self.shell, self.index_url = pages, shell, index_url

    # -- contexts -----------------------------------------------------------------------------------------------

    def site_context(self, runtime: SiteRuntime, title: str) -> dict[str, Any]:
        site = runtime.site
        forms = [
            {"action": runtime.url(route.pattern), "key": route.query[0], "label": route.pattern.strip("/").title()}
            for route in site.routes
            if len(route.query) == 1 and not route.params
        ]
        return {
            "site": site,
            "home_url": runtime.url("/"),
            "forms": forms,
            "index_url": self.index_url,
            "model_id": self.pages.engine.model_id if self.pages.engine else "no model",
            "document_title": f"{title} — {site.title}" if title else site.title,
            "thread": None,
        }

    def toolbar(self, job: Job, current: int, versions: int) -> dict[str, Any] | None:
        if not job.cached:
            return None
        url = job.runtime.url(job.location.url)
        return {
            "site": job.runtime.site.name,
            "url": job.location.url,
            "current": current,
            "versions": [(number, versioned(url, number)) for number in range(1, versions + 1)],
        }

    def thread(self, job: Job, error: str = "", user: str = "", text: str = "") -> dict[str, Any] | None:
        if not job.location.route.posts:
            return None
        return {
            "posts": job.posts,
            "action": job.runtime.url(job.location.url),
            "error": error,
            "user": user,
            "text": text,
            "max_user": MAX_USER,
            "max_text": MAX_POST,
        }

    def live_url(self, job: Job, version: int) -> str:
        query = {"site": job.runtime.site.name, "url": job.location.url, VERSION_KEY: str(version)}
        if job.parent is not None:
            query["from"] = job.parent.path
        return f"{WS_PATH}?{urlencode(query)}"

    def page_context(self, job: Job, page: StoredPage | None, version: int) -> dict[str, Any]:
        title = page.title if page is not None and page.title else guessed_title(job.location)
        context = self.site_context(job.runtime, title)
        versions = self.pages.versions(job)
        context.update(
            page=page,
            live_url=None if page is not None else self.live_url(job, version),
            toolbar=self.toolbar(job, page.version, versions) if page is not None else None,
            thread=self.thread(job),
        )
        return context

    # -- endpoints ----------------------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        runtime = self._runtime(request)
        if runtime is None:
            return self.not_found(request, None)
        try:
            version = _version(request)
            location = runtime.router.resolve(_site_path(request), request.query_params.multi_items())
        except BadRequest as err:
            return self.error(request, runtime, 400, "Bad request", str(err))
        if location is None:
            return self.not_found(request, runtime)
        if location.aliased:  # one URL per page; 308 keeps a reply's POST a POST
            url = runtime.url(location.url)
            return RedirectResponse(url if version is None else versioned(url, version), status_code=308)
        if request.method == "POST":
            return await self._reply(request, runtime, location)
        try:
            job = self.pages.job(runtime, location, self._parent_url(request, runtime))
        except BadRequest as err:  # the URL's own text is more than the model can read
            return self.error(request, runtime, 400, "Bad request", str(err))
        return await self._show(request, job, version)

    async def regenerate(self, request: Request) -> Response:
        if not same_origin(request):
            return self.error(request, None, 403, "Forbidden", "That form belongs to another site.")
        form = await _small_form(request)
        if isinstance(form, Response):
            return form
        runtime = self.pages.sites.get(str(form.get("site", "")))
        if runtime is None:
            return self.not_found(request, None)
        try:
            location = runtime.locate(str(form.get("url", "")))
        except BadRequest as err:
            return self.error(request, runtime, 400, "Bad request", str(err))
        if location is None:
            return self.not_found(request, runtime)
        try:
            job = self.pages.job(runtime, location)
        except BadRequest as err:
            return self.error(request, runtime, 400, "Bad request", str(err))
        version = self.pages.versions(job) + 1
        target = versioned(runtime.url(location.url), version) if job.cached else runtime.url(location.url)
        if is_htmx(request):
            headers = {"HX-Push-Url": target}
            return self.shell.response(request, "page.html", self.page_context(job, None, version), headers=headers)
        page = await self._finish(request, runtime, self.pages.generation(job, version))
        return page if isinstance(page, Response) else RedirectResponse(target, status_code=303)

    async def _show(self, request: Request, job: Job, version: int | None) -> Response:
        page = self.pages.page(job, version)
        if page is None:
            versions = self.pages.versions(job)
            if version is not None and (version != versions + 1 or self.pages.running(job, version) is None):
                message = f"There is no version {version} of this page."
                return self.error(request, job.runtime, 404, "No such version", message)
            version = version or versions + 1
            if is_htmx(request):
                return self.shell.response(request, "page.html", self.page_context(job, None, version))
            finished = await self._finish(request, job.runtime, self.pages.generation(job, version))
            if isinstance(finished, Response):
                return finished
            page = finished
        return self.shell.response(request, "page.html", self.page_context(job, page, page.version))

    async def _reply(self, request: Request, runtime: SiteRuntime, location: Location) -> Response:
        if not location.route.posts:
            return self.error(request, runtime, 405, "Method not allowed", "This page takes no replies.")
        if not same_origin(request):
            return self.error(request, runtime, 403, "Forbidden", "That form belongs to another site.")
        form = await _small_form(request)
        if isinstance(form, Response):
            return form
        user, text = form.get("user", ""), form.get("text", "")
        if not isinstance(user, str) or not isinstance(text, str):
            return self.error(request, runtime, 400, "Bad request", "A reply is a name and a text.")
        try:
            self.pages.job(runtime, location)  # refuse before storing, not after: a page the model cannot write
        except BadRequest as err:
            return self.error(request, runtime, 400, "Bad request", str(err))
        try:
            self.pages.store.add_post(runtime.site.name, location.path, user.strip(), text)
        except PostRejected as err:
            job = self.pages.job(runtime, location)
            thread = self.thread(job, error=f"Your reply was not posted: {err}.", user=user, text=text)
            return self.error(request, runtime, 400, "Reply not posted", str(err).capitalize() + ".", thread=thread)
        if not is_htmx(request):
            return RedirectResponse(runtime.url(location.url), status_code=303)
        # The new post is part of the thread's cache key, so this is a fresh page written with the reply in its prompt.
        return await self._show(request, self.pages.job(runtime, location), None)

    async def _finish(self, request: Request, runtime: SiteRuntime, generation: Generation) -> StoredPage | Response:
        """Wait for the whole page; give up (and let the generation be cancelled) if the client goes away."""
        result = asyncio.ensure_future(generation.result())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (result, gone):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if result.cancelled():
            return Response(status_code=499)  # nobody is listening; the status is for the log
        try:
            return result.result()
        except EngineOverloaded as err:
            headers = {"Retry-After": str(math.ceil(err.retry_after))}
            return self.error(request, runtime, 503, "Busy", "The model is busy. Try again soon.", headers=headers)
        except EngineError as err:
            return self.error(request, runtime, 503, "Not available", f"The page could not be written: {err}")

    # -- errors -------------------------------------------------------------------------------------------------

    def not_found(self, request: HTTPConnection, runtime: SiteRuntime | None) -> Response:
        return self.error(request, runtime, 404, "Not found", "No page lives at this address.")

    def error(
        self,
        request: HTTPConnection,
        runtime: SiteRuntime | None,
        status_code: int,
        heading: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        thread: dict[str, Any] | None = None,
    ) -> Response:
        """An error page: in the site's shell when there is a site, on the index page otherwise."""
        if runtime is None:
            context: dict[str, Any] = {
                "sites": [r.site for r in self.pages.sites.values()],
                "document_title": f"{heading} — genui",
                "heading": heading,
                "message": message,
            }
            return self.shell.response(request, "index.html", context, status_code, headers)
        context = self.site_context(runtime, heading)
        context.update(heading=heading, message=message, thread=thread)
        return self.shell.response(request, "error.html", context, status_code, headers)

    # -- request parts ------------------------------------------------------------------------------------------

    def _runtime(self, request: Request) -> SiteRuntime | None:
        name = request.path_params.get("site")
        if name is None:
            return next(iter(self.pages.sites.values()))
        return self.pages.sites.get(name)

    def _parent_url(self, request: Request, runtime: SiteRuntime) -> str | None:
        """The site-relative URL of the page this request came from (htmx names it; a plain click has a Referer)."""
        raw = request.headers.get("hx-current-url") or request.headers.get("referer")
        if not raw:
            return None
        try:
            parts = urlsplit(raw)
        except ValueError:  # "http://[": not a URL, so no page of this site
            return None
        path = unquote(parts.path)
        if runtime.mount:
            if path != runtime.mount and not path.startswith(runtime.mount + "/"):
                return None
            path = path[len(runtime.mount) :] or "/"
        return f"{path}?{parts.query}" if parts.query else path


def _site_path(request: Request) -> str:
    return "/" + str(request.path_params.get("path", ""))


def _version(request: Request) -> int | None:
    raw = request.query_params.get(VERSION_KEY)
    if raw is None:
        return None
    if not is_number(raw, 7) or not 1 <= int(raw) <= 1_000_000:
        raise BadRequest(f"?{VERSION_KEY}= takes a version number")
    return int(raw)


async def _small_form(request: Request) -> FormData | Response:
    length = request.headers.get("content-length", "")
    if not is_number(length, 20):
        return Response("A form needs a Content-Length.", status_code=411)
    if int(length) > MAX_FORM_BYTES:
        return Response("That form is too large.", status_code=413)
    # No form of genui's takes a file; an uploaded one would be a temporary file nobody closes (a 400 instead).
    return await request.form(max_files=0)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
