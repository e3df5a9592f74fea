"""The HTTP endpoints: a site's pages (show one, take a reply), regenerate, wait for a finished page, the index and
the sites' stylesheets.

A page in the cache is served whole. Otherwise the request starts the run writing it (or joins the one under way)
and answers at once with the site's shell around the live placeholder, whose WebSocket (genui/stream.py) watches
that run. A client without scripts follows the shell's <noscript> refresh to the wait URL instead, which answers
when the page is finished. Whatever goes wrong is raised and answered by the exception handlers (genui/errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response

from engine.frames import EngineError
from genui.assets import Revalidated, asset_name
from genui.edits import MAX_INSTRUCTION
from genui.errors import problem
from genui.generation import Generation
from genui.inputs import (
    FOREIGN_FORM,
    client_address,
    embedded_elsewhere,
    foreign_form,
    form_number,
    form_text,
    form_url,
    page_at,
    parent_url,
    same_origin,
    served_at,
    site_named,
    small_form,
)
from genui.pages import (
    BUSY,
    LOADING_RETRY_S,
    NOT_STARTED,
    UNREACHED_RETRY_S,
    Job,
    NoSuchVersion,
    Pages,
    ServerStopping,
    StillWriting,
    TooManyRuns,
)
from genui.routing import CONTROL, VERSION_KEY, BadRequest, Location, is_number, version, versioned
from genui.runtime import SiteRuntime
from genui.screens import SENT_FIELD, SENT_TOKEN, Screens, candidates_url, words_of
from genui.shell import is_htmx
from genui.store import PostRejected, StoredPage, when_free
from genui.variations import Variations, VariationsCancelled
from genui.words import WORDS, Refusal

NOWHERE = WORDS["no_page"]  # genui/errors.py says it in a site's words by this text
NO_ASSET = "This site has no such file."
EMBEDDED = "This page is written when a visitor opens it, not when another site's page asks for it."
NEWER = (
    "Version {n} of this page was written since this one was shown, and a rewrite of it would leave that out: open "
    "the page again, and rewrite its newest version."
)
CLIENT_GONE = 499  # nobody is listening any more; the status is for the log
# A wait URL answers by then, its page written or not (a 503 that asks again at once, and the run waits for it): a
# reverse proxy cuts a request it has heard nothing of (nginx after 60 s, with its bare 504, and the run was dropped).
WAIT_ANSWER_S = 45.0
log = logging.getLogger("genui")


def _pushed(url: str) -> dict[str, str]:
    """htmx's ``HX-Push-Url`` for a served URL. A header is Latin-1, so the URL goes percent-encoded (`/wiki/東京` as
    `/wiki/%E6%9D%B1%E4%BA%AC`), as Starlette sends a redirect's Location; its `%` escapes stay as they are."""
    return {"HX-Push-Url": quote(url, safe=":/%#?=@[]!$&'()*+,;")}


NO_EDITS = "This server writes no page again for its visitors: its operator turned that off (genui serve --no-edits)."
NO_ROUTE_EDITS = "This page is kept as first written: its site writes no page of its kind again (edits = false)."


class Views:
    """The HTTP endpoints of every site."""

    def __init__(self, pages: Pages, screens: Screens) -> None:
        self.pages, self.screens = pages, screens
        self._said_mount = False  # _check_mount said its finding in the log

    async def index(self, request: Request) -> Response:
        response = self.screens.index(request)
        if request.method != "HEAD":  # a HEAD starts nothing, reading ahead included
            self.pages.reader.index_shown()
        return response

    async def health(self, request: Request) -> Response:
        """200 once the model is ready; 503 while it loads (with Retry-After), after it failed to load, once the
        engine has stopped, or once the page cache's file was deleted or replaced."""
        pages = self.pages
        # an engine whose worker stopped for good (engine.Scheduler.failure) can write nothing more
        stopped = getattr(pages.engine, "failure", None)
        gone = pages.store.gone()
        not_started = None if pages.started or pages.engine is not None else NOT_STARTED
        status = pages.status()
        code, headers = (200 if status == "ready" else 503), {}
        if status == "loading":  # (its weights out of reach, genui tries again: still loading, the reason its error)
            headers = {"Retry-After": str(int(UNREACHED_RETRY_S if pages.unreached else LOADING_RETRY_S))}
        body = {
            "status": status,
            "model": pages.model_id,  # while it loads: the one being loaded, once known
            "error": gone or (pages.load_error if stopped is None else str(stopped)) or pages.unreached or not_started,
            "sites": list(pages.sites),
            "busy": pages.busy(),
            "reading_ahead": pages.reader.reading,
            "config_errors": dict(pages.config_errors),
            # the page cache's last write failed as it cannot store (a full disk): still 200, as cached pages are
            # served, but every page written is lost and every post refused until a write succeeds (said, where the
            # status stayed "ready": an operator's review)
            "storage_error": pages.store.failing,
        }
        return JSONResponse(body, code, {**headers, "Cache-Control": "no-store"})

    async def live(self, request: Request) -> Response:
        """200 while the server answers (its cached pages, readers' posts) and is not stopping, the model loading or
        not: a liveness probe's, or a load balancer's that should send visitors to cached pages while it loads;
        ``/_genui/health`` says whether new pages can be written."""
        stopping = self.pages.stopping.is_set()
        body = {"status": "stopping" if stopping else "serving", "model": self.pages.model_id}
        return JSONResponse(body, 503 if stopping else 200, {"Cache-Control": "no-store"})

    async def metrics(self, request: Request) -> Response:
        """The server's counters and gauges in Prometheus's text format (genui.metrics), for a scraper."""
        body = self.pages.metrics.text()  # in the event loop: it reads the runs under way, which the loop changes
        return Response(body, 200, {"Cache-Control": "no-store"}, media_type=CONTENT_TYPE_LATEST)

    async def intent(self, request: Request) -> Response:
        """A visitor's pointer rests on a link, or their keyboard's focus: the page it leads to is likely their next
        click, and is read ahead next (``ReadAhead.hinted``). The form's ``href`` is the link's, as the page shows
        it; the page the link is on is named as a click names it (``HX-Current-URL``). 204 whatever comes of it: a
        hint starts nothing while a visitor waits, and a link to a page genui does not keep is no error."""
        if not same_origin(request):
            raise HTTPException(403, foreign_form(request))
        form = await small_form(request)
        href = form_url(form, "href")  # as the link's href has it: a title's every other character may be %-encoded
        if not href:
            raise BadRequest("href names the link's address")
        served = served_at(self.pages, href)
        if served is not None:
            runtime, site_url = served
            location = runtime.locate(site_url)  # BadRequest: a malformed address, whether or not genui reads ahead
            reading = self.pages.engine is not None and self.pages.reader.links
            if location is not None and location.route.cache != "none" and reading:
                self.pages.reader.hinted(self.pages.job(runtime, location, parent_url(request, runtime)))
        return Response(status_code=204)

    def _check_mount(self, request: Request) -> None:
        """Said once in the log: an app mounted in another ASGI app (at the scope's ``root_path``) under another path
        than the one it writes its addresses under (a link, a script or a stream of each page would miss it), or
        whose lifespan nobody runs (an embedding developer's review: neither was said anywhere)."""
        if self._said_mount:
            return
        root = request.scope.get("root_path", "")
        if root and root != self.pages.base:
            self._said_mount = True
            log.error(
                "genui's app is mounted at %s but writes its addresses under %s: create it with base_path=%r",
                root,
                self.pages.base or "/",
                root,
            )
        if not self.pages.started:
            self._said_mount = True
            log.error("%s", NOT_STARTED)

    async def to_site(self, request: Request) -> Response:
        return RedirectResponse(site_named(self.pages, request.path_params["site"]).url("/"))

    async def stylesheet(self, request: Request) -> Response:
        path = site_named(self.pages, request.path_params["site"]).site.stylesheet_path()
        if path is None:
            raise HTTPException(404, "This site has no stylesheet.")
        if not path.is_file():  # read on each request: gone since the site loaded (renamed, a checkout meanwhile)
            raise HTTPException(404, "This site's stylesheet is not there any more.")
        # asked again on each page load: an edit shows on the next reload, where a browser kept its copy for minutes
        return FileResponse(path, media_type="text/css", headers={"Cache-Control": "no-cache"})

    async def asset(self, request: Request) -> Response:
        """A file of a site's assets folder (genui.assets), which a browser asks again about on each page."""
        site = site_named(self.pages, request.path_params["site"]).site
        name = asset_name(request.path_params["path"])
        if name is None:
            raise HTTPException(404, NO_ASSET)
        return await Revalidated(directory=site.assets_dir(), check_dir=False).get_response(name, request.scope)

    async def page(self, request: Request) -> Response:
        self._check_mount(request)
        name = request.path_params.get("site")
        runtime = _serving(
            request, next(iter(self.pages.sites.values())) if name is None else site_named(self.pages, name)
        )
        asked = version(request.query_params.get(VERSION_KEY))
        location = runtime.router.resolve("/" + request.path_params["path"], request.query_params.multi_items())
        if location is None:
            raise HTTPException(404, NOWHERE)
        if request.method not in ("GET", "HEAD", "POST"):  # the methods this page takes, and no others
            allowed = "GET, HEAD, POST" if location.route.posts else "GET, HEAD"
            said = "only_read_replied" if location.route.posts else "only_read"
            raise Refusal(405, "not_allowed_heading", said, {"Allow": allowed})
        # a query key the route does not take (`?utm=x`, a link of another site's) is no part of the page either
        extra = any(key not in location.route.query and key != VERSION_KEY for key in request.query_params)
        # and one given empty is the page without it (`?days=&budget=mid`, as a form with a field left blank sends it)
        extra = extra or any(key in location.route.query and key not in location.query for key in request.query_params)
        if location.aliased or extra:  # one URL per page; 308 keeps a reply's POST a POST
            url = runtime.url(location.url)
            return RedirectResponse(url if asked is None else versioned(url, asked), status_code=308)
        if request.method == "POST":
            return await self._reply(request, runtime, location)
        if location.blank:  # the bar's box with nothing in it, not a page written about nothing (a hackathon team's)
            return self.screens.blank(request, runtime, location)
        parent = parent_url(request, runtime)
        leaving = parent if is_htmx(request) and request.method == "GET" else None  # (a HEAD ends nothing)
        job = self.pages.job(runtime, location, parent, client_address(request), leaving)
        if request.method == "HEAD":
            return self._head(request, job, asked)
        if embedded_elsewhere(request):
            return self._stored(request, job, asked)
        if asked is None and (replies := self.pages.waiting_replies(job, self.screens.inline_posts)) is not None:
            self.pages.metrics.page_asked(runtime.site.name, cached=False)  # a page being written: its replies
            return self.screens.live(request, job, replies)
        return self._show(request, job, asked, write_next=False)

    def _stored(self, request: Request, job: Job, asked: int | None) -> Response:
        """A stored page as it is, with nothing started (inputs.embedded_elsewhere); a 403 where none is stored."""
        page = self.pages.page(job, asked)
        if page is None:
            raise HTTPException(403, EMBEDDED)
        return self.screens.page(request, job, page)

    def _head(self, request: Request, job: Job, asked: int | None) -> Response:
        """What a GET would answer, without its body, and nothing started: a HEAD is a crawler's or a link
        checker's look, which must not write a page (nor count against the client's runs, nor read ahead)."""
        page = self.pages.page(job, asked)
        if page is not None:
            return self.screens.page(request, job, page)
        newest = self.pages.versions(job)
        if asked is not None and (asked != newest + 1 or self.pages.running(job, asked) is None):
            raise NoSuchVersion(asked)
        if self.pages.running(job, newest + 1) is None:  # what a GET would refuse, refused alike (none starts a run)
            self.pages.ready()  # EngineLoading: 503
            self.pages.prompt(job)  # BadRequest (a URL too long for the model), PromptError
            self.pages.admit(job)  # TooManyRuns: 429
        # the page a GET would write, or the run writing it: its placeholder, which is never kept
        return Response(media_type="text/html", headers={"Cache-Control": "no-store"})

    async def regenerate(self, request: Request) -> Response:
        """Write the page's next version whole, or a thread's before its readers' posts (form: site, url)."""
        _, job = await self._page_form(request)
        slot = self.pages.versions(job) + 1
        running = self.pages.running(job, slot)
        # a section or replies being written in place; a Regenerate's own run (a second click) is joined
        if running is not None and not running.splice.whole and not self.pages.regenerating(job, slot):
            raise HTTPException(409, BUSY)
        generation = self.pages.regenerate(job, placeholder=is_htmx(request))
        target = versioned(job.url, generation.version) if job.cached else job.url
        if is_htmx(request):
            return self.screens.live(request, job, generation, headers=_pushed(target))
        return await self._written(request, job, generation, target)

    async def rewrite(self, request: Request) -> Response:
        """Write one section of a page version again (form: site, url, v, section, instruction); the new version
        keeps every other byte."""
        form, job = await self._page_form(request)
        asked = version(form_text(form, VERSION_KEY) or None)
        number = form_number(form, "section")
        said = form_text(form, "instruction", MAX_INSTRUCTION)
        if CONTROL.search(said):
            raise BadRequest("the instruction holds a control character; write it as plain text")
        self._not_stale(form, job)
        generation = self.pages.rewrite(job, asked, number, said)
        target = versioned(job.url, generation.version)
        if is_htmx(request):
            return self.screens.live(request, job, generation, headers=_pushed(target))
        return await self._written(request, job, generation, target)

    async def variations(self, request: Request) -> Response:
        """Write candidates of a page's next version side by side (form: site, url). The set has an address of its
        own, pushed into the tab's history: a reload or Back shows it again."""
        _, job = await self._page_form(request)
        variations = self.pages.vary(job)
        address = candidates_url(job, variations)
        if is_htmx(request):
            # the set claims its first showing itself (Variations), as a run does its placeholder's
            return self.screens.variations(request, job, variations, headers={"HX-Push-Url": address}, claim=False)
        # without scripts nothing streams: the finished candidates, at their address (a reload would post again);
        # past WAIT_ANSWER_S, the address that waits for them, as a page's wait URL does (see _written)
        result = asyncio.ensure_future(_candidates_written(variations))
        try:
            if not await _before_disconnect(request, result, WAIT_ANSWER_S, variations.claim):
                return Response(status_code=CLIENT_GONE)
        except StillWriting:
            return RedirectResponse(f"{address}&wait=1", status_code=303)
        return RedirectResponse(address, status_code=303)

    async def candidates(self, request: Request) -> Response:
        """A set of variations at its own address (query: site, id): being written, or each with a keep button; with
        ``wait`` (a stream that cannot connect, a client without scripts) a redirect there once they are written."""
        runtime = _serving(request, site_named(self.pages, request.query_params.get("site")))
        job, variations = self.pages.candidates(runtime, request.query_params.get("id", ""), client_address(request))
        if "wait" in request.query_params and request.method != "HEAD":
            # held for the wait's successor as for a placeholder's stream: a browser may send the wait twice (a
            # navigation replaced by another), and the first, gone, would leave the set to nobody
            variations.claim()
            result = asyncio.ensure_future(_candidates_written(variations))
            with contextlib.suppress(EngineError):  # a set that failed: its address says so (a 404), and forgets it
                # answered by WAIT_ANSWER_S as a page's wait is (StillWriting), the set held for the wait asked again
                if not await _before_disconnect(request, result, WAIT_ANSWER_S, variations.claim):
                    return Response(status_code=CLIENT_GONE)
            return RedirectResponse(candidates_url(job, variations), status_code=303)
        if variations.finished and variations.pages is None:  # failed or cancelled: nothing to show or keep
            # a set is written while it is on screen: one left, and come back to with Back, stopped meanwhile ("Not
            # found" read as if it had never been: a desktop user's review)
            left = isinstance(variations.error, VariationsCancelled)
            said = (
                "Those variations stopped when they were left, before they were all written: a set is written only"
                " while it is on screen."
                if left
                else "Those variations were not all written."
            )
            return self.screens.error(
                request, runtime, 404, "Variations stopped", said + " Ask for new ones.", back=self.screens.varied(job)
            )
        return self.screens.variations(request, job, variations)

    async def keep(self, request: Request) -> Response:
        """Keep one finished candidate as the page's next version (form: site, url, id, n)."""
        form, job = await self._page_form(request)
        page = await self.pages.keep(job, form_text(form, "id", 64), form_number(form, "n", 100) - 1)
        target = versioned(job.url, page.version)
        if is_htmx(request):
            return self.screens.page(request, job, page, headers=_pushed(target))
        return RedirectResponse(target, status_code=303)

    async def restore(self, request: Request) -> Response:
        """Store an older version of a page again as its newest (form: site, url, v): the one its address shows, and
        a static copy exports (a demo curator could only rewrite a section of the version they chose, to have it
        shown again)."""
        form, job = await self._page_form(request)
        asked = version(form_text(form, VERSION_KEY) or None)
        if asked is None:
            raise BadRequest("v names the version to make the newest")
        self._not_stale(form, job)
        page = await self.pages.restore(job, asked)
        target = job.url  # the newest: the page's own address
        if is_htmx(request):
            return self.screens.page(request, job, page, headers=_pushed(target))
        return RedirectResponse(target, status_code=303)

    def _not_stale(self, form: FormData, job: Job) -> None:
        """A 409 for a control sent from a tab shown before the page's newest version was written (its form's
        ``newest``; none: a client's own form): a rewrite or a restore of the version shown would leave the newer
        one's change out of the page visitors see (a second editor's rewrite: a demo curator's review)."""
        shown = form_text(form, "newest")
        if shown and (not is_number(shown, 7) or int(shown) < 1):
            raise BadRequest("newest takes the page's newest version as the form was shown, a number")
        newest = self.pages.versions(job)
        if shown and newest > int(shown):
            raise HTTPException(409, NEWER.format(n=newest))

    async def news(self, request: Request) -> Response:
        """A thread's posts stored after post ``after`` (query: site, url, after): the line that says so at the foot
        of the thread's screen, or 204 when there are none. static/genui.js asks while the thread is on screen: a
        class reading one thread saw none of the others' posts until each reloaded it (a teacher's review)."""
        runtime = _serving(request, site_named(self.pages, request.query_params.get("site")))
        location = runtime.locate(request.query_params.get("url", "/"))
        if location is None or not location.route.posts:
            raise HTTPException(404, NOWHERE)
        after = request.query_params.get("after", "")
        if not is_number(after, 18):
            raise BadRequest("after names the newest post the thread showed, a number")
        count, first = self.pages.store.newer_posts(runtime.site.name, location.path, int(after))
        if not count or first is None:
            return Response(status_code=204, headers={"Cache-Control": "no-store"})
        return self.screens.news(runtime, location, count, first)

    async def wait(self, request: Request) -> Response:
        """The page version named in the query, once it is finished: a redirect to its URL (a cached page), or the
        page itself (a route that is never cached, so its URL would only write another)."""
        runtime = _serving(request, site_named(self.pages, request.query_params.get("site")))
        job, asked = page_at(self.pages, runtime, request)
        if request.method == "HEAD" or embedded_elsewhere(request):  # what is stored; nothing started for one not
            page = self.pages.page(job, asked)
            if page is None and request.method == "HEAD":
                return self._head(request, job, asked)
            if page is None:
                raise HTTPException(403, EMBEDDED)
        else:
            shown = self.pages.replies_again(job, asked, self.screens.inline_posts) or self.pages.open(job, asked)
            page = shown if isinstance(shown, StoredPage) else await _finished(request, shown, WAIT_ANSWER_S)
        if page is None:
            return Response(status_code=CLIENT_GONE)
        if not job.cached:
            return self.screens.page(request, job, page)
        newest = page.version == self.pages.versions(job)
        return RedirectResponse(job.url if newest else versioned(job.url, page.version), status_code=303)

    async def _written(self, request: Request, job: Job, generation: Generation, target: str) -> Response:
        """A page control's run, for a client without scripts: to ``target`` once it is written; past WAIT_ANSWER_S,
        to the version's wait URL, which answers within as long again and is then asked again. The form's request
        held out until the page was written, however long, and a proxy's 60 s cut it off, which dropped the run (a
        text-browser reader's review). The run waits for the wait's request as for a placeholder's stream."""
        try:
            page = await _finished(request, generation, WAIT_ANSWER_S)
        except StillWriting:
            return RedirectResponse(self.screens.wait_url(job, generation), status_code=303)
        return RedirectResponse(target, status_code=303) if page else Response(status_code=CLIENT_GONE)

    async def _page_form(self, request: Request) -> tuple[FormData, Job]:
        """The form of one of genui's own page controls and the (cached) page it names: ``site`` and ``url``."""
        if not same_origin(request):
            raise HTTPException(403, foreign_form(request))
        if not self.pages.edits:
            raise HTTPException(403, NO_EDITS)
        form = await small_form(request)
        runtime = _serving(request, site_named(self.pages, form_text(form, "site", 64)))
        url = form_url(form) or "/"
        location = runtime.locate(url)
        if location is None:
            raise HTTPException(404, NOWHERE)
        if location.url != url:  # an alias, or an address written otherwise: another page's, or none genui showed
            raise BadRequest("url is not a page's address as genui writes it")
        if not location.route.edits:
            raise HTTPException(403, NO_ROUTE_EDITS)
        job = self.pages.job(runtime, location, client=client_address(request))
        # what the control refuses (busy, a version taken meanwhile) leads back to this page, not the site's front
        request.state.job = job
        return form, job

    def _show(self, request: Request, job: Job, asked: int | None = None, *, write_next: bool = True) -> Response:
        shown = self.pages.open(job, asked, write_next=write_next, placeholder=True)
        if request.method == "GET":
            self.pages.metrics.page_asked(job.runtime.site.name, isinstance(shown, StoredPage))
        if isinstance(shown, Generation):
            return self.screens.live(request, job, shown)
        return self.screens.page(request, job, shown)

    async def _reply(self, request: Request, runtime: SiteRuntime, location: Location) -> Response:
        if not location.route.posts:
            raise Refusal(405, "not_allowed_heading", "takes_no_replies", {"Allow": "GET, HEAD"})
        foreign = None if same_origin(request) else foreign_form(request)
        if foreign == FOREIGN_FORM:  # another site's page: refused before its form is read, nothing of it shown
            raise HTTPException(403, foreign)
        form = await small_form(request)
        user, text = form.get("user", ""), form.get("text", "")
        if not isinstance(user, str) or not isinstance(text, str):
            raise BadRequest("A reply is a name and a text.")
        token = form.get(SENT_FIELD)  # the reply form's own (screens.thread): a resend of it is the same post
        sent = token if isinstance(token, str) and SENT_TOKEN.fullmatch(token) else None
        client, site, path = client_address(request), runtime.site.name, location.path
        resent = None
        try:
            if foreign is not None:  # a proxy that drops the port: refused as any reason is, the text kept (a
                raise HTTPException(403, foreign)  # reader's reply was lost to it), with the fix
            resent = self.pages.store.resent(site, path, user.strip(), text, sent)  # PostRejected: whatever the model
            job = self.pages.job(runtime, location, client=client)  # before the model is named: EngineLoading
            if self.pages.engine is not None:
                self.pages.prompt(job)  # refuse before storing, not after: a page the model cannot write
            elif self.pages.page(job) is None:
                self.pages.ready()  # the model loading: a thread not written yet cannot be checked, nor shown with it
            # else the model is loading and the thread is written: the post is kept, and answered once it is ready
            if resent is None:  # a post sent again (SAME_POST_S) is stored already: no new run, answered as it was
                self.pages.post_rate.check(client)  # TooManyPosts
                if self.pages.reply_starts_run(job, is_htmx(request)):
                    # the client's runs (TooManyRuns): before storing, so nothing is half done (a run the client
                    # started while the post waited for the cache leaves it stored, waiting for the thread's next run)
                    self.pages.admit(job)
                # another process holding the cache (a prune, a second server) holds up no other visitor meanwhile
                _, stored = await when_free(
                    functools.partial(self.pages.store.stored_post, site, path, user.strip(), text, False, sent)
                )
                self.pages.post_rate.posted(client)
                if stored:  # not a second click's, stored meanwhile by the first
                    self.pages.metrics.posted(site)
        except Exception as err:  # refused: the thread, with what was typed kept in its form, and nothing stored
            answer = problem(err, asks_again=False)
            if answer is None:
                raise
            thread = self.pages.reply_form(runtime, location)  # the job, or the posts before the model is named
            if resent is not None:  # sent again, stored the first time (its answer lost): saved, whatever refuses
                # (not "try again": sent again a minute later, it would be a second post)
                say = words_of(runtime).say
                why = answer.said(words_of(runtime))[0]  # "loading the model", "busy"
                posts = self.screens.thread(thread)  # the post among them, and an empty form: nothing to send again
                return self.screens.error(
                    request,
                    runtime,
                    answer.status_code,
                    say("reply_saved_heading"),
                    say("reply_saved", why=why[:1].lower() + why[1:]),
                    answer.headers,
                    thread=posts,
                )
            invalid = err.field if isinstance(err, PostRejected) else ""  # the field the reason is about
            reason = answer.said(words_of(runtime))[1]  # a busy or loading model in the site's words
            english = answer.english(words_of(runtime))  # on an error page: marked so
            return self._not_posted(
                request, thread, answer.status_code, reason, user, text, answer.headers, invalid, english
            )
        # The thread as it was, byte for byte, then the new post and the replies written to it, streaming in. A
        # thread not written yet is written whole, with the post in its prompt.
        job = self.pages.job(runtime, location, client=client)
        try:
            appending = self.pages.append(job, self.screens.inline_posts, placeholder=is_htmx(request))
        except TooManyRuns:  # a resend whose first copy's run ended unwritten, the client at its limit: the post
            # is stored, and waits for the thread's next run (waiting_replies); the thread shows it as it is
            if not is_htmx(request):
                return RedirectResponse(job.url, status_code=303)
            return self._show(request, job, write_next=False)
        if not is_htmx(request):
            # A plain form: back to the thread, which shows the post at once and joins the replies' run (without
            # scripts, its refresh waits for them).
            return RedirectResponse(job.url, status_code=303)
        # The thread's newest version follows, whichever version the form was on: the address bar says so (a reload of
        # an older ?v= would not show the post's replies).
        newest = {"HX-Replace-Url": _pushed(job.url)["HX-Push-Url"]}
        if appending is not None:
            return self.screens.live(request, job, appending, headers=newest)
        try:
            response = self._show(request, job)  # a thread not written yet: written whole, the post in its prompt
            response.headers.update(newest)
            return response
        except TooManyRuns as err:  # a resend of a post stored before, the client at its limit: it waits, kept
            words = words_of(job.runtime)
            answer = problem(err, asks_again=False)
            assert answer is not None
            reason = words.say("reply_waits") + Markup(" ") + answer.shown(words)[1]
            posts = self.screens.thread(job)  # the post among them, and an empty form: nothing to send again
            return self.screens.error(
                request, job.runtime, 429, words.say("reply_saved_heading"), reason, err.headers, thread=posts
            )

    def _not_posted(
        self,
        request: Request,
        job: Job,
        status: int,
        reason: str,
        user: str,
        text: str,
        headers: Mapping[str, str] | None = None,
        invalid: str = "",
        english: bool = False,
    ) -> Response:
        """A refused reply: the thread with the reason above its form, which keeps what was typed (``invalid``: the
        field the reason is about, marked for screen readers and given the focus); a thread not written yet (or
        whose page cannot be read), an error page with the posts and the form (``english``: the reason is genui's
        English on a site in another language, and is marked so there)."""
        error = words_of(job.runtime).text("not_posted", reason=f"{reason[0].lower()}{reason[1:]}")
        try:
            page = self.pages.page(job) if job.key.model else None  # before the model is named: no cached page
        except sqlite3.Error:  # a cache that cannot be read either: the error page says what was refused
            page = None
        if page is not None:  # the thread stays on screen, the form where the visitor left it
            thread = self.screens.thread(job, page.answered, error=error, user=user, text=text, invalid=invalid)
            # its newest version, which a post goes below, whichever version the form was on: the address bar says
            # so, as for a reply posted (a reload of an older ?v= would show other text)
            shown = dict(headers or {})
            if is_htmx(request):
                shown["HX-Replace-Url"] = _pushed(job.url)["HX-Push-Url"]
            return self.screens.page(request, job, page, shown, status_code=status, thread=thread)
        thread = self.screens.thread(job, error=error, user=user, text=text, invalid=invalid)
        message = reason if reason.startswith("genui") else reason[0].upper() + reason[1:]  # genui is written so
        said = words_of(job.runtime).english(message) if english else message
        heading = words_of(job.runtime).say("reply_not_posted_heading")
        return self.screens.error(request, job.runtime, status, heading, said, headers, thread=thread)


def _serving(request: Request, runtime: SiteRuntime) -> SiteRuntime:
    """Record the site a request is for, so that an error page is shown in that site's shell."""
    request.state.runtime = runtime
    return runtime


async def _finished(request: Request, generation: Generation, within: float | None = None) -> StoredPage | None:
    """Wait for the whole page (raising the engine's error); None if the client went away first, which leaves the
    run to be cancelled unless someone else watches it. Past ``within`` seconds, StillWriting: the run waits for the
    request asked again as for a placeholder handed out (``Generation.claim``)."""
    result = asyncio.ensure_future(generation.result())
    return result.result() if await _before_disconnect(request, result, within, generation.claim) else None


async def _candidates_written(variations: Variations) -> None:
    async with contextlib.aclosing(variations.watch()) as states:
        async for state in states:
            if state.error is not None:
                raise state.error


async def _before_disconnect(
    request: Request, work: asyncio.Future[Any], within: float | None = None, on_time: Callable[[], None] | None = None
) -> bool:
    """Await ``work`` (raising its error) unless the client goes away first (False; the work is cancelled), or the
    server begins to stop (ServerStopping: the request is answered, and asks again, instead of holding the stop up
    until its page is written), or ``within`` seconds pass (StillWriting, after ``on_time()``, before the work is
    cancelled)."""
    gone = asyncio.ensure_future(_disconnected(request))
    pages: Pages = request.app.state.pages
    stopping = asyncio.ensure_future(pages.stopping.wait())
    timer = asyncio.ensure_future(asyncio.sleep(math.inf if within is None else within))
    late = False
    try:
        await asyncio.wait({work, gone, stopping, timer}, return_when=asyncio.FIRST_COMPLETED)
        late = timer.done() and not work.done() and not gone.done() and not stopping.done()
        if late and on_time is not None:
            on_time()
    finally:
        for task in (work, gone, stopping, timer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if work.cancelled():
        if stopping.done() and not stopping.cancelled():
            raise ServerStopping()
        if late:
            raise StillWriting()
        return False
    work.result()
    return True


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
