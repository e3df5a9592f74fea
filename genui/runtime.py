"""A site as served: its config with the router, prompt renderer and link rewriter for the mount it lives under."""

from __future__ import annotations

import functools
import html
import logging
import re
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl

from engine.frames import GenerationRequest
from genui.assets import is_image
from genui.links import LinkRewriter, remount
from genui.prompts import GAP, OTHER_SAMPLE, SAMPLE_VALUES, PromptError, PromptRenderer, split_gaps
from genui.routing import BadRequest, Location, SiteRouter
from genui.sanitize import sanitize_html
from genui.sections import sections
from genui.sites import Problems, Route, Site, SiteConfigError
from genui.store import PageKey, StoredPage

log = logging.getLogger("genui")

# A link the model wrote with nothing in it (`<a href="/r/science/The_world_Your_world_is"></a>`, a board's listing
# in session 48): the sanitiser drops it as an element left empty, and the listing loses that thread. Given the title
# of the page it leads to, it is an entry a reader can see and follow (where the route's links' text names its pages,
# `link_text`, the page that title names: `/r/linux/Kernel__news` reads `Kernel news` and opens it). Only a link
# written whole as the model writes one, an href and nothing else, is read: a copy the parser makes of a link left
# open is no such link.
BARE_LINK = re.compile(r"""(<a\s+href\s*=\s*(["'])([^"'<>]*)\2\s*>)[ \t\r\n]*(</a>)""", re.IGNORECASE)


_TAG = re.compile(r"<[^>]*>")


@functools.lru_cache(maxsize=1024)
def _pinned_by(opening: str) -> frozenset[int]:
    """SiteRuntime.pinned_sections of a rendered opening, kept: it sanitises the opening, 3.3 ms for a settings
    panel's, at every view of a page (a load test)."""
    first, after = split_gaps(opening)
    filled = sanitize_html(GAP.join((first, *after, "")), allow_images=False)  # the model's text marked
    return frozenset(
        part.number
        for part in sections(filled)
        if html.unescape(_TAG.sub("", filled[part.start : part.end])).replace(GAP, "").strip()
    )


@dataclass(frozen=True, slots=True)
class SiteRuntime:
    """A site as served: its config, router, prompt renderer and the mount point its links are rewritten for."""

    site: Site
    mount: str  # "" when the site is served at /, else "/name"; under the server's base ("/demo/name") where it has one
    router: SiteRouter
    prompts: PromptRenderer
    links: LinkRewriter
    base: str = ""  # the path every URL of the server is under (genui serve --base-path): its own endpoints' too

    @classmethod
    def build(cls, site: Site, mount: str, base: str = "") -> SiteRuntime:
        problems = Problems()  # the routes' patterns and links, and the templates, each tried though one is wrong
        router = problems.check(SiteRouter, site)
        prompts = problems.check(PromptRenderer, site)
        problems.raise_found()
        assert router is not None and prompts is not None
        _check_opening_links(site, router, prompts)
        return cls(site, mount, router, prompts, LinkRewriter(mount, router.link_target, router.link_reading), base)

    def locate(self, site_url: str) -> Location | None:
        """The page at a site-relative URL, query included (``/search?q=lisp``). Raises BadRequest if malformed."""
        return self.router.locate(site_url)

    def page_key(self, location: Location, model: str) -> PageKey:
        """The page-cache key of a routed page, written by ``model`` (no post of a thread read: a Job loads them)."""
        return PageKey(
            site=self.site.name,
            path=location.path,
            query=location.query_string,
            model=model,
            template=self.prompts.version(location.route),
        )

    def page_of(self, key: PageKey) -> Location | None:
        """The page a cache key names (what ``render(on=)`` takes); None where it is no page of this site's routes."""
        try:
            return self.router.resolve(key.path, parse_qsl(key.query, keep_blank_values=True))
        except BadRequest:
            return None

    def url(self, site_url: str) -> str:
        """The served URL of a site-relative URL."""
        return self.mount + site_url

    def remounted(self, page: StoredPage) -> StoredPage:
        """A stored page with its links for this mount: one server may serve a site alone at / (genui serve --site)
        and another beside other sites under /name, from one cache. A page whose mount is not known (an earlier
        genui's, whose links could not tell: genui.upgrade) is shown as stored."""
        if page.mount is None or page.mount == self.mount:
            return page
        return replace(page, html=remount(page.html, page.mount, self.mount), mount=self.mount)

    def request(self, prompt: str, seed: int, opening: str = "") -> GenerationRequest:
        """What the engine is asked for one page of this site; ``opening`` is a rendered opening, gaps and all."""
        model = self.site.model
        opening, gaps = split_gaps(opening)
        return GenerationRequest(
            prompt=prompt,
            max_tokens=model.tokens,
            max_steps=model.steps,
            seed=seed,
            opening=opening,
            gaps=gaps,
            t_max=model.t_max,
            t_min=model.t_min,
            entropy_bound=model.entropy_bound,
        )

    def direct_request(self, location: Location, seed: int, opening: bool = True) -> GenerationRequest:
        """The request for a page opened directly, with no page it came from and no posts (``genui render``, the
        quality report); ``opening=False`` leaves out the route's opening, so the model writes the whole page."""
        route, params, query = location.route, location.params, location.query
        text = self.prompts.opening(route, params, query) if opening else ""
        return self.request(self.prompts.render(route, params, query), seed, text)

    def pinned_sections(self, location: Location) -> frozenset[int]:
        """The numbers of a page's sections (genui.sections) that hold text its route's opening writes, which every
        version keeps: a rewrite of one took the opening's heading out of the page, or a settings panel's names with
        its values. A section the opening only starts (a post's ``<div class="post">``) or fills with gaps alone is
        the model's, and may be rewritten."""
        if location.route.opening is None:
            return frozenset()
        return _pinned_by(self.prompts.opening(location.route, location.params, location.query))

    def render(self, text: str, *, draft: bool = False, on: Location | None = None) -> str:
        """Model text -> HTML fit for the page: sanitised, then links rewritten. ``on``: the page it is, whose
        route may follow its links (``Route.follow_links``: a web page in the desktop's browser)."""
        # Images of the site's own files only (genui.assets): any other same-site <img src> is a GET the browser
        # sends by itself, and every GET of a site route may start a generation. A draft shows none: its URLs are
        # still noise.
        if draft:
            return sanitize_html(text, allow_images=False, draft=True)  # drafts keep no link targets to rewrite
        links = self.links
        if on is not None:  # its links are the web page's (``follow_links``), and a link to itself is none
            links = LinkRewriter(self.mount, functools.partial(self._target, on=on), self.router.link_reading)
        titled = functools.partial(self._titled, on=on)
        return links(sanitize_html(BARE_LINK.sub(titled, text), image=self.shows_image))

    def _target(self, href: str, text: str, on: Location) -> str | None:
        """``SiteRouter.link_target`` of a page's link, a link left as its text said in the log at INFO (shown under
        genui serve --reload): a game's actions turned to plain text with no word why (a hackathon team's)."""
        target = self.router.link_target(href, text, on=on)
        if target is None and log.isEnabledFor(logging.INFO):
            why = "it leads to the page it is on" if self.router.link_target(href, text) else "no route serves it"
            why = "it leads to no web address" if on.route.follow_links is not None else why
            log.info("%s: the link to %r is left as its text (%r): %s", self.url(on.url), href[:200], text[:60], why)
        return target

    def shows_image(self, url: str) -> bool:
        """Whether an ``<img src>`` of this site's pages may be ``url``: an image of its assets folder."""
        return is_image(self.site.assets_dir(), self.site.name, url)

    def _titled(self, bare: re.Match[str], on: Location | None = None) -> str:
        """A link written with no text, given the title of the page it leads to (or left to the sanitiser to drop)."""
        target = self.router.link_target(html.unescape(bare[3]).strip(), on=on)
        title = self.router.link_title(target) if target is not None else ""
        return f"{bare[1]}{html.escape(title, quote=False)}{bare[4]}" if title else bare[0]


# A link's href in an opening, and one the opening leaves open at its end for the model to finish (`<a href="/wiki/`).
_OPENING_HREF = re.compile(r"""<a\s[^>]*?(?<![\w-])href\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_OPENING_SRC = re.compile(r"""<img\s[^>]*?(?<![\w-])src\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_OPENING_HREF_LEFT_OPEN = re.compile(r"""<a\s[^>]*?(?<![\w-])href\s*=\s*(["'])([^"'<>]*)$""", re.IGNORECASE)


def _check_opening_links(site: Site, router: SiteRouter, prompts: PromptRenderer) -> None:
    """Refuse an opening whose site-relative links lead to no route, rendered with the trial render's values: the
    sanitiser would drop each such link from every page, and one the opening leaves open (`<a href="/wiki/`, the
    model writing the rest) would lead nowhere whatever the model writes. A route renamed without its alias did so
    (a hackathon team's walkthrough). A route that follows links (the desktop's browser) is left alone: its pages'
    links are the web page's, each one a page of the route."""
    for index, route in enumerate(site.routes):
        if route.opening is None or route.follow_links is not None:  # a web page's links are the web page's
            continue
        params = {name: SAMPLE_VALUES[0] for name in route.params}
        query = {key: SAMPLE_VALUES[1] for key in route.query}
        try:
            first, after = split_gaps(prompts.opening(route, params, query))
        except PromptError:  # the trial render said what it had to; a failure of these values' own is the page's
            continue
        text = first + "".join(after)
        _check_opening_images(site, index, route, prompts, text)
        hrefs = [(match[2], False) for match in _OPENING_HREF.finditer(text)]
        if (left_open := _OPENING_HREF_LEFT_OPEN.search(text)) is not None:
            hrefs.append((left_open[2], True))
        for href, open_ended in hrefs:
            href = html.unescape(href).strip()
            if not href.startswith("/") or href.startswith("//"):
                continue  # a place on the page (#x), or no link of the site's: the sanitiser's to drop, as ever
            if router.serves_some_path_from(href) if open_ended else router.link_target(href) is not None:
                continue
            shown = f"{href}…" if open_ended else href
            patterns = ", ".join(other.pattern for other in site.routes)
            # the file the link is written in: a panel the opening includes, not the opening, where it is there
            holder = prompts.written_in(route.opening, href)
            where = "" if holder == route.opening else f" (in {holder}, which it includes)"
            raise SiteConfigError(
                site.root / "site.toml",
                f"routes[{index}].opening",
                f"{route.opening} links to {shown}{where}, which no route serves (routes: {patterns})",
                "link to one of the routes, or give the route it means that path as an alias",
            )


def _check_opening_images(site: Site, index: int, route: Route, prompts: PromptRenderer, text: str) -> None:
    """Refuse an opening's image that is no image of the site's assets folder (genui.assets), rendered with the trial
    render's values (``text``): the sanitiser would leave its alt text in its place on every page. One whose src
    changes with the page's values (a cover named by the page's title, rendered again with others) is the page's
    own: a title with no cover shows its alt text."""
    shown = [html.unescape(match[2]).strip() for match in _OPENING_SRC.finditer(text)]
    if not shown:
        return
    params = dict.fromkeys(route.params, OTHER_SAMPLE)
    try:
        first, after = split_gaps(prompts.opening(route, params, dict.fromkeys(route.query, OTHER_SAMPLE)))
    except PromptError:  # a failure of these values' own: the page's
        return
    fixed = {html.unescape(match[2]).strip() for match in _OPENING_SRC.finditer(first + "".join(after))}
    for src in shown:
        if src not in fixed or is_image(site.assets_dir(), site.name, src):
            continue
        folder = site.assets_dir()
        raise SiteConfigError(
            site.root / "site.toml",
            f"routes[{index}].opening",
            f"{route.opening} shows the image {src}, which is no image of {folder} (a page shows only those)",
            f'put the image in {folder} and write its src as {{{{ asset("NAME.png") }}}}',
        )
