"""What genui shows: a page (finished, or live while the model writes it), an error, the index of sites, and the
messages of the live stream.

Each screen is a template of templates/ rendered by the Shell with the context that template expects; the endpoints
(views.py), the stream (stream.py) and the error handlers (errors.py) only decide which screen to show.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.requests import HTTPConnection
from starlette.responses import Response

from genui.edits import MAX_INSTRUCTION, VARIANTS, editing
from genui.generation import Generation, Snapshot
from genui.navigation import everywhere, sections
from genui.pages import LOADING_RETRY_S, Job, Pages
from genui.previews import preview
from genui.routing import MAX_QUERY_VALUE, VERSION_KEY, Location, guessed_title, url_path, versioned
from genui.runtime import SiteRuntime
from genui.sections import Section
from genui.sections import sections as page_sections
from genui.shell import Shell
from genui.store import MAX_POST, MAX_USER, USER_PATTERN, StoredPage, StoredPost
from genui.variations import Candidates, Variations
from genui.words import Words

WS_PATH = "/_genui/ws"  # the live stream of one page version
VARIATIONS_WS_PATH = "/_genui/ws/variations"  # the live stream of a set of variations
WAIT_PATH = "/_genui/wait"  # the same page version, answered once it is finished (for clients without scripts)
REGENERATE_PATH = "/_genui/regenerate"
REWRITE_PATH = "/_genui/rewrite"  # write one section of a page again
VARIATIONS_PATH = "/_genui/variations"  # write candidates of a page's next version side by side
KEEP_PATH = "/_genui/keep"  # keep one candidate as the page's next version
RESTORE_PATH = "/_genui/restore"  # store an older version again as the page's newest
NEWS_PATH = "/_genui/news"  # a thread's posts since those it showed: the line that says so, or nothing (204)
INTENT_PATH = "/_genui/intent"  # the link a visitor's pointer rests on: the page read ahead next
HEALTH_PATH = "/_genui/health"  # whether the model is ready, as JSON, for a load balancer or a script
METRICS_PATH = "/_genui/metrics"  # counters and gauges in Prometheus's text format (genui.metrics)
LIVE_PATH = "/_genui/live"  # whether the server answers at all (cached pages while the model loads), as JSON
REPLIES_AGAIN_S = 3  # seconds before a thread whose newest posts wait for replies is loaded again, which writes them
SENT_FIELD = "sent"  # the reply form's hidden field: its own token (Store.add_post's ``sent``)
SENT_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")  # a token as the form has it (secrets.token_urlsafe), or none


def query_form(runtime: SiteRuntime, location: Location) -> dict[str, Any] | None:
    """The form of the route of the page at ``location`` (``Route.form``), its fields filled in with what the page
    asked, and the route's other query keys the page has (a game's carried state) sent on unseen; None where the
    route has none."""
    route = location.route
    if not route.form:
        return None
    asked = {key for key, _ in route.form}
    return {
        "action": runtime.url(route.pattern),
        "fields": [{"key": key, "label": label, "value": location.query.get(key, "")} for key, label in route.form],
        "kept": [(key, value) for key, value in sorted(location.query.items()) if key not in asked],
        "button": route.form_words,
        "most": MAX_QUERY_VALUE,  # characters a query value may have
    }


def candidates_url(job: Job, variations: Variations) -> str:
    """The address of a set of variations: it shows the set again (a reload, Back) while genui remembers it."""
    return f"{job.runtime.base}{VARIATIONS_PATH}?{urlencode({'site': job.runtime.site.name, 'id': variations.id})}"


VERSIONS_SHOWN = 9  # a toolbar's version links at most: the first, the newest ones and the one shown


def shown_versions(count: int, current: int) -> list[int | None]:
    """The versions a toolbar links, 1 to ``count``: all of them, or the first, the current one and the newest ones
    up to VERSIONS_SHOWN, a None where some are left out (one client made 300 versions of a page, and its toolbar
    linked every one: 51 KB)."""
    if count <= VERSIONS_SHOWN:
        return list(range(1, count + 1))
    kept = {1, current, *range(count - (VERSIONS_SHOWN - 3), count + 1)}
    shown: list[int | None] = []
    for number in sorted(kept):
        if shown and shown[-1] is not None and number > shown[-1] + 1:
            shown.append(None)
        shown.append(number)
    return shown


class Screens:
    """genui's own pages and stream messages, for every site."""

    def __init__(self, shell: Shell, pages: Pages, index_url: str | None) -> None:
        self.shell, self.pages, self.index_url = shell, pages, index_url
        # Whether the newest page shown of each route (site, pattern) had sections to rewrite: a page of it being
        # written keeps the room of the toolbar that one had (the rewrite box takes a second line on a phone).
        self._sectioned: dict[tuple[str, str], bool] = {}

    # -- responses ----------------------------------------------------------------------------------------------

    def page(
        self,
        request: HTTPConnection,
        job: Job,
        page: StoredPage,
        headers: Mapping[str, str] | None = None,
        *,
        status_code: int = 200,
        thread: dict[str, Any] | None = None,
    ) -> Response:
        """A finished page: the whole document, or the fragment for htmx. ``thread``: its posts and reply form in
        place of those it has (``thread()``: a refused reply's reason, and what was typed), with ``status_code``."""
        context = self._page_context(job, page)
        if thread is not None:
            context["thread"] = thread
        if thread is not None and thread.get("error"):
            # the tab says so, where the reason is at the foot of a long thread, above the form that kept the text:
            # a 400 read as the thread itself, a reply posted (a text-browser reader's review)
            refused = words_of(job.runtime).text("reply_not_posted_heading")
            context["document_title"] = f"{refused} — {context['document_title']}"
        return self.shell.response(request, "page.html", context, status_code, headers)

    def live(
        self, request: HTTPConnection, job: Job, generation: Generation, headers: Mapping[str, str] | None = None
    ) -> Response:
        """A page being written: the site's shell around a placeholder that opens the page's live stream.

        Without scripts the placeholder does nothing, so the document also carries a refresh (inside <noscript>)
        to the wait URL, which answers when the page is finished.
        """
        query = self._watch_query(job, generation)
        context = self._page_context(job, None, generation.splice.answered)
        base = job.runtime.base
        context.update(
            live_url=f"{base}{WS_PATH}?{query}",
            wait_url=self.wait_url(job, generation),
            splice=generation.splice,
            again_url=job.url,  # where a page stopped leads (parts.stop_button)
        )
        # a first version with no section to rewrite lands with one line of controls: a phone keeps one line's room
        # for it, not two (the desktop's windows moved up 40 px as they landed; a desktop user's review)
        context["toolbar_short"] = generation.version == 1 and self._route_sectioned(job) is False
        # a later version lands with its versions' links, a line of their own on a phone, whose room it keeps too
        context["toolbar_versions"] = generation.version > 1
        response = self.shell.response(request, "page.html", context, headers=headers)
        response.headers["Cache-Control"] = "no-store"  # a placeholder is not the page: never keep it
        return response

    def variations(
        self,
        request: HTTPConnection,
        job: Job,
        variations: Variations,
        headers: Mapping[str, str] | None = None,
        *,
        claim: bool = True,
    ) -> Response:
        """Candidates of the page's next version: streaming side by side, or (finished) each with a keep button.

        While they are written the placeholder names the set's wait URL, which answers once they are: where the
        stream cannot connect (static/genui.js), and for clients without scripts (a refresh inside <noscript>).
        ``claim``: the placeholder claims the set (False for a set just made, which claims its first showing)."""
        context = self._page_context(job, None)
        query = urlencode({"site": job.runtime.site.name, "id": variations.id})
        context.update(
            variations=self._candidates(job, variations),
            variations_url=f"{job.runtime.base}{VARIATIONS_WS_PATH}?{query}",
            again_url=job.url,  # where a set stopped leads: the page varied, as it is
        )
        context["toolbar_later"] = False  # the candidates land with none: one kept is a page of its own
        # the tab says what is on screen, not the page varied, whose title it had (an accessibility review)
        of = context["variations"]["of"]["title"]
        said = words_of(job.runtime).text("variations_title", n=variations.n, page=of)
        context["document_title"] = f"{said} — {job.runtime.site.title}"
        if not variations.finished:
            context["wait_url"] = f"{candidates_url(job, variations)}&wait=1"
            if claim and request.scope.get("method") != "HEAD":  # a HEAD opens no stream
                variations.claim()  # its stream connects a round trip later, though a reload closed the one before
        response = self.shell.response(request, "page.html", context, headers=headers)
        response.headers["Cache-Control"] = "no-store"  # candidates are no page of the site's
        return response

    def error(
        self,
        request: HTTPConnection,
        runtime: SiteRuntime | None,
        status_code: int,
        heading: str | Markup,
        message: str | Markup,
        headers: Mapping[str, str] | None = None,
        thread: dict[str, Any] | None = None,
        back: Mapping[str, str] | None = None,
        form: dict[str, Any] | None = None,
    ) -> Response:
        """An error page: in the site's shell when there is a site, on the index page otherwise. ``back`` (url,
        title): the page to go back to, where the error is of one (the site's front page otherwise). ``form``: a
        route's form (query_form()), shown above the message."""
        if runtime is None:
            return self.index(request, status_code, plain(heading), plain(message), headers)
        context = self._site_context(runtime, plain(heading))  # (the tab's title: text; the heading may be marked)
        # A page asked for too soon (503 with Retry-After) asks again by itself, as its message says; only a GET's.
        retry = (headers or {}).get("Retry-After") if request.scope.get("method") == "GET" else None
        # The URL asked for, as a path: never "//host/…", which a browser would take for another site; under the
        # base path, which a proxy may have cut off (create_app's base_path).
        path, base = "/" + request.scope["path"].lstrip("/"), runtime.base
        under = path if not base or path == base or path.startswith(base + "/") else base + path
        here = url_path(under) + (f"?{request.url.query}" if request.url.query else "")
        refresh = {"seconds": retry, "url": here} if retry else None
        context.update(heading=heading, message=message, thread=thread, refresh=refresh, back=back)
        context.update(navigation=everywhere(runtime), query_form=form)
        return self.shell.response(request, "error.html", context, status_code, headers)

    def blank(self, request: HTTPConnection, runtime: SiteRuntime, location: Location) -> Response:
        """The page of an address of a route the site bar asks with, with nothing asked (``/search``): its box's
        label as its heading, and where to type; or of a route with a form (``/plan``): the form, to fill in.
        Nothing is written or stored."""
        route = location.route
        if route.form:
            form = query_form(runtime, location)
            said = words_of(runtime).text("blank_form")
            return self.error(request, runtime, 200, route.form_words, said, form=form)
        label = route.bar_label or ""
        return self.error(request, runtime, 200, label, words_of(runtime).text("blank", field=label))

    def news(self, runtime: SiteRuntime, location: Location, count: int, first: int) -> Response:
        """The line at the foot of a thread's screen that says how many posts it has had since it was shown, with a
        link to the thread as it is now, at the first of them."""
        url = f"{runtime.url(location.url)}#post-{first}"
        line = self.shell.part("news", count, url, words_of(runtime).say)
        return Response(line, media_type="text/html", headers={"Cache-Control": "no-store"})

    def varied(self, job: Job) -> dict[str, str]:
        """The page a set of variations is of, as its address names it (url, title): its newest version's title."""
        newest = self.pages.page(job)
        return {
            "url": job.url,
            "title": newest.title
            if newest and newest.title
            else guessed_title(job.location, lang=job.runtime.site.lang),
        }

    def index(
        self,
        request: HTTPConnection,
        status_code: int = 200,
        heading: str = "",
        message: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """The list of sites (several sites served together), or an error outside any site."""
        context = {
            "sites": [runtime.site for runtime in self.pages.sites.values()],
            "document_title": f"{heading} — genui" if heading else "genui",
            "heading": heading,
            "message": message,
        }
        return self.shell.response(request, "index.html", context, status_code, headers)

    # -- stream messages ----------------------------------------------------------------------------------------

    def frame(self, job: Job, snapshot: Snapshot, in_place: bool = False) -> str:
        return self.shell.part("frame", snapshot, in_place, words_of(job.runtime).say)

    def progress(self, job: Job, snapshot: Snapshot | None, ahead: int = 0) -> str:
        """The progress line alone: how far the model is, or (None) that the page waits for it, behind ``ahead``
        runs."""
        return self.shell.part("progress", snapshot, words_of(job.runtime).say, ahead)

    def candidates_frame(self, job: Job, candidates: Candidates) -> str:
        return self.shell.part(
            "candidates_frame", candidates.drafts, candidates.progress, words_of(job.runtime).say, candidates.ahead
        )

    def candidates_final(self, job: Job, variations: Variations) -> str:
        """The finished candidates, each with a keep button; they replace the placeholder, ending the stream."""
        return self.shell.part("candidates", self._candidates(job, variations))

    def inline_posts(self, posts: Sequence[StoredPost]) -> str:
        """Readers' posts as a thread shows them in place, followed by the replies written to them."""
        return self.shell.part("inline_posts", posts)

    def final(self, job: Job, page: StoredPage) -> str:
        """The finished page with its toolbar; it replaces the placeholder, which ends the stream client-side."""
        context = self._page_context(job, page)
        following = context["thread"]["next"] if context["thread"] else None
        return (
            self.shell.part("toolbar", context["toolbar"])
            + "\n"
            + self.shell.part("content", page, context["document_title"], following, context["say"])
        )

    def failed(
        self,
        message: str | Markup,
        retry_url: str | None,
        retry_after: str | None = None,
        words: Words | None = None,
        heading: str | Markup = "",
        site: str = "",
        kept: str = "",
    ) -> str:
        """A run that failed, in place of the page; with ``retry_after`` (seconds) it goes to ``retry_url`` by itself
        after that long (static/genui.js). ``words``: the site's (genui's English when None). ``heading`` heads it,
        and names the browser's tab with the site's title (``site``), as an error page does. ``kept``: stored HTML
        shown below it (a thread whose replies could not be written, with the post)."""
        refresh = {"seconds": retry_after, "url": retry_url} if retry_after and retry_url else None
        heading_text = plain(heading)  # (the tab's title: text; the heading may be marked)
        title = (
            "" if kept else f"{heading_text} — {site}" if heading and site else heading_text or site
        )  # kept: the page's
        say = (words or Words()).say
        return self.shell.part("failed", message, retry_url, refresh, say, heading, title, kept)

    # -- contexts -----------------------------------------------------------------------------------------------

    def thread(
        self,
        job: Job,
        answered: int = 0,
        error: str = "",
        user: str = "",
        text: str = "",
        invalid: str = "",
        shown: StoredPage | None = None,
    ) -> dict[str, Any] | None:
        """The readers' posts below a page that it does not show in place yet (those after ``answered``), and the
        reply form (with what was typed, after a refused reply). ``shown``: the version on screen, if stored."""
        if not job.location.route.posts:
            return None
        below = [post for post in job.posts if post.id > answered]
        newest: StoredPage | None = None  # read only where it is needed, and not again where it is on screen
        if below and not error and (shown is not None or self.pages.loading):
            current = shown is not None and shown.version == self.pages.versions(job)
            newest = shown if current else self.pages.page(job)
        later = False  # posts an older version on screen is followed by, which the newest shows with their replies
        if shown is not None and newest is not None and shown.version < newest.version:
            # listed below it, they read as never answered (a forum user's review): the newest version has them
            later = any(post.id <= newest.answered for post in below)
            below = [post for post in below if post.id > newest.answered]
        waiting = newest is not None and self.pages.waiting(job, newest)
        refresh: dict[str, Any] | None = None  # the posts' note: they are answered once the model has loaded
        following: dict[str, Any] | None = None  # the page's: they are answered next
        if waiting and self.pages.loading:
            # Posts stored while the model loads get their replies once it is ready: the thread is loaded again then
            # (static/genui.js asks /_genui/health), which starts them. Not on a refused reply's page: what was typed
            # stays.
            refresh = {
                "seconds": math.ceil(LOADING_RETRY_S),
                "url": job.url,
                "when_ready": job.runtime.base + HEALTH_PATH,
            }
        elif waiting and shown is not None and newest is not None and shown.version == newest.version:
            # Posted while another's replies were written (they joined that run): the stream's last message (final,
            # alone: a GET shows none, or every reader would reload the thread every few seconds while the engine is
            # busy) loads the newest version again, which writes their replies (a second poster's post was left
            # unanswered, with no word of it: a forum user's review).
            following = {"seconds": REPLIES_AGAIN_S, "url": job.url} if editing(self.pages.engine) else None
        # what static/genui.js asks, while the thread is on screen, for the posts stored after those it shows
        since = {
            "site": job.runtime.site.name,
            "url": job.location.url,
            "after": max((p.id for p in job.posts), default=0),
        }
        return {
            "say": words_of(job.runtime).say,
            "posts": below,
            "news": f"{job.runtime.base}{NEWS_PATH}?{urlencode(since)}",
            "refresh": refresh,
            "next": following,
            "later": later,
            "answered": answered,
            "action": job.url,
            "error": error,
            "invalid": invalid,  # the field a refused reply's reason is about ("user", "text"; "" for the form)
            "user": user,
            "text": text,
            "words": job.location.route.reply_words,
            "max_user": MAX_USER,
            "user_rule": words_of(job.runtime).text("user_rule", n=MAX_USER),
            "user_pattern": USER_PATTERN,
            "max_text": MAX_POST,
            # this form's own token: the same post sent again from it is stored once, whatever came between
            "sent": secrets.token_urlsafe(16),
            "sent_field": SENT_FIELD,
        }

    def _site_context(self, runtime: SiteRuntime, title: str) -> dict[str, Any]:
        site = runtime.site
        forms = [
            {
                "action": runtime.url(route.pattern),
                "key": route.query[0],
                "label": route.bar_label,
                "button": route.bar_button or route.bar_label,
                "route": route,
            }
            for route in site.routes
            if route.bar_label is not None
        ]
        words = words_of(runtime)
        return {
            "site": site,
            "say": words.say,
            "script_words": words.for_script(),
            "home_url": runtime.url("/"),
            "forms": forms,
            "index_url": self.index_url,
            "model": self._model(),
            # where genui.js tells it the link pointed at
            "hint_url": runtime.base + INTENT_PATH if self.pages.reader.links else None,
            # a front page titled as its site ("The Lamp — The Lamp" in the tab: a hackathon team's game) once
            "document_title": f"{title} — {site.title}" if title and title != site.title else site.title,
            "thread": None,
            "query_form": None,  # the page's route's form (query_form()), above the page
            "navigation": [],
            "live_url": None,
            "wait_url": None,
            "refresh": None,  # {"seconds", "url"}: the page asks again by itself (templates/parts.html, asks_again)
            "splice": None,
            "variations": None,
            "variations_url": None,
            "config_error": self.pages.config_errors.get(site.name),
            "preview": None,  # a page's card where its address is shared (genui/previews.py)
        }

    def _model(self) -> Markup:
        """The model the footer names: its id, set as code, or words where none is named (the footer's "written on
        the fly by no model", set as code, read as a joke on a server whose model failed to load)."""
        engine, model = self.pages.engine, self.pages.model_id
        if engine is not None:
            return Markup("<code>{}</code>").format(engine.model_id)
        if self.pages.loading and model:
            return Markup("<code>{}</code> (loading)").format(model)
        if self.pages.loading:
            return Markup("a model still loading")
        return Markup("a model that did not load" if self.pages.load_error else "a model not loaded yet")

    def _page_context(self, job: Job, page: StoredPage | None, answered: int = 0) -> dict[str, Any]:
        title = (
            page.title if page is not None and page.title else guessed_title(job.location, lang=job.runtime.site.lang)
        )
        context = self._site_context(job.runtime, title)
        for form in context["forms"]:  # the bar's box of the page's own route says what it asked (a reload, a link)
            if form["route"] is job.location.route:
                form["value"] = job.location.query.get(form["key"], "")
        context["query_form"] = query_form(job.runtime, job.location)  # its own form's, all it asked
        context["preview"] = preview(job.runtime, page, title)
        answered = page.answered if page is not None else answered
        context.update(page=page, toolbar=self._toolbar(job, page), thread=self.thread(job, answered, shown=page))
        context["toolbar_later"] = page is None and job.cached and self._edits(job)  # Regenerate, once it lands
        context["toolbar_short"] = context["toolbar_versions"] = False  # (a page being written: live())
        if (model := self.pages.model_id) is not None:
            context["navigation"] = sections(job.runtime, job.location, self.pages.store, model)
        return context

    def _edits(self, job: Job) -> bool:
        """Whether visitors may write the page's next versions: the server lets them (not --no-edits), and its
        route does (not edits = false)."""
        return self.pages.edits and job.location.route.edits

    def _editable(self, job: Job) -> bool:
        """Whether a page's toolbar offers its rewrite and variations. While the model loads, the controls it will
        answer are there already (genui's engine edits); a click before it is ready is told when to try again, as
        Regenerate's is."""
        engine = self.pages.engine
        return self._edits(job) and (editing(engine) is not None if engine is not None else self.pages.loading)

    def _route_sectioned(self, job: Job) -> bool | None:
        """Whether the newest page shown of the job's route had sections to rewrite; before one is shown since the
        server started, whether the route's newest page stored has; None before any is."""
        route = (job.runtime.site.name, job.location.route.pattern)
        if not self._editable(job):
            return False  # no rewrite box: one line
        if route not in self._sectioned and job.cached:
            runtime, model = job.runtime, job.key.model
            for written in self.pages.store.written(route[0], model, job.key.template, limit=1):
                location = runtime.page_of(replace(job.key, path=written.path, query=written.query))
                page = self.pages.store.page(runtime.page_key(location, model)) if location is not None else None
                if location is not None and page is not None:
                    self._sectioned[route] = bool(_rewritable(runtime, location, page.html))
        return self._sectioned.get(route)

    def _toolbar(self, job: Job, page: StoredPage | None) -> dict[str, Any] | None:
        if page is None or not job.cached:
            return None
        versions = self.pages.versions(job)
        if not self._edits(job) and versions < 2:  # nothing to offer: no controls, no other version
            return None
        editable = self._editable(job)
        sections = _rewritable(job.runtime, job.location, page.html) if editable else []
        if editable:
            self._sectioned[job.runtime.site.name, job.location.route.pattern] = bool(sections)
        return {
            "say": words_of(job.runtime).say,
            "regenerate": self._edits(job),
            # an older version, stored again as the newest (a thread's versions follow its readers' posts: none)
            "restore": self._edits(job) and page.version < versions and not job.location.route.posts,
            "site": job.runtime.site.name,
            "url": job.location.url,
            "current": page.version,
            "newest": versions,  # as the page was shown: a rewrite from a tab left open meanwhile is refused
            "versions": [
                (number, None if number is None else versioned(job.url, number))
                for number in shown_versions(versions, page.version)
            ],
            "sections": sections,
            "variations": VARIANTS if editable else 0,
            "max_instruction": MAX_INSTRUCTION,
        }

    def _candidates(self, job: Job, variations: Variations) -> dict[str, Any]:
        return {
            "say": words_of(job.runtime).say,
            "of": self.varied(job),  # a set's address may be reloaded, shared, or come back to: the way to its page
            "site": job.runtime.site.name,
            "url": job.location.url,
            "id": variations.id,
            "count": variations.n,
            "pages": variations.pages,
            "conversation": variations.conversation,
            "address": candidates_url(job, variations),
        }

    def wait_url(self, job: Job, generation: Generation) -> str:
        """The address that answers once the run's page is finished (for clients without scripts)."""
        return f"{job.runtime.base}{WAIT_PATH}?{self._watch_query(job, generation)}"

    def _watch_query(self, job: Job, generation: Generation) -> str:
        query = {"site": job.runtime.site.name, "url": job.location.url, VERSION_KEY: str(generation.version)}
        if generation.parent is not None:  # a run started again from this URL is written from the same parent
            query["from"] = generation.parent.path
        return urlencode(query)


def _rewritable(runtime: SiteRuntime, location: Location, html: str) -> list[Section]:
    """The sections of a page a visitor may have rewritten: not those its route's opening writes, nor one with no
    text, which is none to choose by its words ("6. p", an empty paragraph)."""
    pinned = runtime.pinned_sections(location)
    return [part for part in page_sections(html) if part.snippet and part.number not in pinned]


def words_of(runtime: SiteRuntime) -> Words:
    """The words of genui's own parts of the site's pages: its [words], else genui's English."""
    return Words(dict(runtime.site.words), runtime.site.lang)


def plain(text: str | Markup) -> str:
    """``text`` as plain text: HTML (genui's words, marked with their language) with its tags left out."""
    return text.striptags() if isinstance(text, Markup) else text
