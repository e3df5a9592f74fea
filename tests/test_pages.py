from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine

from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, GenerationRequest, StepFrame
from genui.generation import Generation, first_heading
from genui.pages import CUT, Job, NoSuchVersion, Pages
from genui.routing import BadRequest
from genui.runtime import SiteRuntime
from genui.sites import Site, load_site
from genui.store import PageKey, Store, StoredPage


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "pages.sqlite3")
    yield store
    store.close()


def make_pages(site: Site, store: Store, engine: object, unclaimed_s: float = 10.0) -> Pages:
    return Pages([SiteRuntime.build(site, "/wiki")], store, engine, unclaimed_s)  # type: ignore[arg-type]


def job(pages: Pages, url: str = "/Lisp", parent: str | None = None) -> Job:
    runtime = pages.sites["wiki"]
    location = runtime.router.resolve(url)
    assert location is not None
    return pages.job(runtime, location, parent)


class BrokenEngine(FakeEngine):
    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        return self._broken()

    async def _broken(self) -> AsyncIterator[Frame]:
        raise ZeroDivisionError("engine bug")
        yield  # pragma: no cover - makes this an async generator


@pytest.mark.parametrize(
    ("html", "title"),
    [
        ("<article><h1>Hash <b>table</b></h1><h1>Two</h1></article>", "Hash table"),
        ("<p>none</p>", ""),
        # a bidi override turns the browser's tab and the site's lists of pages around (a security review): out;
        # the marks a right-to-left title needs stay
        ("<h1>Invoice\u202efdp.exe</h1>", "Invoicefdp.exe"),
        ("<h1>\u2067abc\u2069 \u200fשלום</h1>", "abc \u200fשלום"),
    ],
)
def test_first_heading_is_the_page_title(html: str, title: str) -> None:
    assert first_heading(html) == title


def test_the_cache_key_names_model_template_and_posts(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, FakeEngine(model_id="m1"))
    key = job(pages).key
    assert (key.site, key.path, key.query, key.model, key.posts) == ("wiki", "/Lisp", "", "m1", 0)
    assert key.template == pages.sites["wiki"].prompts.version(wiki.routes[2])


async def test_the_finished_page_is_sanitised_linked_titled_and_stored(wiki: Site, store: Store) -> None:
    engine = FakeEngine(lambda p, s: '<h1 onclick="x()">Lisp</h1><a href="/wiki/Scheme">Scheme</a><script>1</script>')
    pages = make_pages(wiki, store, engine)
    page = await pages.generation(job(pages), 1).result()
    assert page.html == '<article class="wiki">\n<h1>Lisp</h1>\n<h1>Lisp</h1><a href="/wiki/Scheme" ' + (
        'hx-get="/wiki/Scheme" hx-target="#genui-main" hx-push-url="true" hx-swap="innerHTML show:window:top">'
        "Scheme</a></article>"
    )  # the route's opening first (sites/wiki/site.toml), then the model's text, sanitised
    assert page.title == "Lisp" and store.page(job(pages).key) == page


async def test_a_cached_page_is_found_without_rendering_a_prompt(wiki: Site, store: Store) -> None:
    engine = FakeEngine()
    pages = make_pages(wiki, store, engine)
    written = await pages.generation(job(pages), 1).result()
    engine.max_prompt_chars = 0  # from now on any prompt fitted would be refused with a BadRequest
    assert pages.open(job(pages)) == written and pages.open(job(pages), 1) == written


async def test_a_page_being_written_is_joined_without_rendering_a_prompt(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.01)
    pages = make_pages(wiki, store, engine)
    run = pages.open(job(pages))
    assert isinstance(run, Generation) and run.version == 1
    engine.max_prompt_chars = 0
    assert pages.open(job(pages)) is run and pages.open(job(pages), 1, write_next=False) is run
    assert isinstance(await run.result(), StoredPage) and len(engine.calls) == 1


async def test_an_explicit_version_must_be_stored_or_the_next_one(wiki: Site, store: Store) -> None:
    engine = FakeEngine()
    pages = make_pages(wiki, store, engine)
    with pytest.raises(NoSuchVersion, match="no version 1"):
        pages.open(job(pages), 1, write_next=False)  # a page's URL with ?v=1 does not start it
    with pytest.raises(NoSuchVersion, match="no version 2"):
        pages.open(job(pages), 2)
    assert engine.calls == [] and pages.running(job(pages), 1) is None
    run = pages.open(job(pages), 1)  # the stream of version 1 may start it
    assert isinstance(run, Generation)
    await run.result()
    assert isinstance(pages.open(job(pages), 1, write_next=False), StoredPage)


async def test_a_run_nobody_comes_to_watch_is_cancelled(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.01, steps=100)
    pages = make_pages(wiki, store, engine, unclaimed_s=0.05)
    run = pages.generation(job(pages), 1)
    for _ in range(200):
        if engine.cancelled:
            break
        await asyncio.sleep(0.01)
    assert engine.cancelled == 1 and engine.finished == 0 and pages.running(job(pages), 1) is None
    with pytest.raises(EngineError, match="cancelled"):
        await run.result()


async def test_a_watched_run_outlives_the_wait_for_a_watcher(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.02, steps=4)  # about 0.2 s, four times the wait
    pages = make_pages(wiki, store, engine, unclaimed_s=0.05)
    page = await pages.generation(job(pages), 1).result()
    assert page.html and engine.cancelled == 0 and engine.finished == 1


async def test_closing_cancels_every_run_and_ends_its_watchers(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.01, steps=100)
    pages = make_pages(wiki, store, engine)
    runs = [pages.generation(job(pages, url), 1) for url in ("/Lisp", "/Scheme")]
    watcher = asyncio.ensure_future(runs[0].result())
    await asyncio.sleep(0.03)
    await pages.close()
    with pytest.raises(EngineError, match="cancelled"):
        await watcher
    assert engine.cancelled == 2 and pages.running(job(pages), 1) is None


async def test_watchers_of_one_page_version_share_one_run(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.001)
    pages = make_pages(wiki, store, engine)
    first, second = pages.generation(job(pages), 1), pages.generation(job(pages), 1)
    assert first is second
    results = await asyncio.gather(first.result(), second.result())
    assert results[0] == results[1] and len(engine.calls) == 1
    assert pages.running(job(pages), 1) is None  # a finished run leaves the registry


async def test_different_versions_are_different_runs_with_their_own_seeds(wiki: Site, store: Store) -> None:
    engine = FakeEngine()
    pages = make_pages(wiki, store, engine)
    one, two = await asyncio.gather(pages.generation(job(pages), 1).result(), pages.generation(job(pages), 2).result())
    assert (one.seed, two.seed) == (0, 1) and store.versions(job(pages).key) == 2


async def test_snapshots_show_drafts_before_the_page(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, FakeEngine(steps=2))
    seen = [snapshot async for snapshot in pages.generation(job(pages), 1).watch()]
    drafts = [s for s in seen if not s.finished and s.step]
    assert drafts and seen[-1].page is not None
    assert [(s.canvas, s.step) for s in drafts][:2] == [(1, 1), (1, 2)]


async def test_when_the_last_watcher_leaves_the_run_is_cancelled(wiki: Site, store: Store) -> None:
    engine = FakeEngine(delay=0.01, steps=100)
    pages = make_pages(wiki, store, engine)
    generation = pages.generation(job(pages), 1)
    async with contextlib.aclosing(generation.watch()) as snapshots:
        async for snapshot in snapshots:
            if snapshot.step:
                break
    # Gone from the registry at once, so a visitor arriving now starts afresh instead of joining a dying run.
    assert pages.running(job(pages), 1) is None
    fresh = pages.generation(job(pages), 1)
    assert fresh is not generation
    for _ in range(100):
        if engine.cancelled:
            break
        await asyncio.sleep(0.01)
    assert engine.cancelled == 1
    with pytest.raises(EngineError, match="cancelled"):  # a late watcher of the cancelled run is not left waiting
        await generation.result()
    engine.delay, engine.steps = 0.0, 1
    assert (await fresh.result()).html


async def test_engine_errors_reach_every_watcher(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, FakeEngine(overloaded=3))
    generation = pages.generation(job(pages), 1)
    errors = await asyncio.gather(generation.result(), generation.result(), return_exceptions=True)
    assert all(isinstance(error, EngineError) for error in errors)


async def test_an_engine_bug_ends_the_watch_with_an_engine_error(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, BrokenEngine())
    with pytest.raises(EngineError, match="engine bug"):
        await pages.generation(job(pages), 1).result()


async def test_uncached_routes_are_never_stored(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    site = load_site(root)
    site = replace(site, routes=tuple(replace(route, cache="none") for route in site.routes))
    pages = make_pages(site, store, FakeEngine())
    page = await pages.generation(job(pages), 1).result()
    assert page.html and store.versions(job(pages).key) == 0 and pages.page(job(pages)) is None


async def test_a_page_never_cached_written_before_its_stream_came_is_that_streams(tmp_path: Path, store: Store) -> None:
    """A GET hands out the placeholder of a route never cached; the run ends before the placeholder's stream connects
    (a fast engine, a slow network): the stream gets that page, not a second run. Held no longer than a claim."""
    site = load_site(SITES_DIR / "wiki")
    site = replace(site, routes=tuple(replace(route, cache="none") for route in site.routes))
    engine = FakeEngine()
    pages = make_pages(site, store, engine, unclaimed_s=0.2)
    run = pages.open(job(pages), placeholder=True)
    assert isinstance(run, Generation)
    while not run.finished:
        await asyncio.sleep(0.01)
    assert pages.open(job(pages)) is run and len(engine.calls) == 1  # the stream, connecting now
    later = pages.open(job(pages))  # another visit writes its own page, as a route never cached does
    assert isinstance(later, Generation) and later is not run
    await later.result()
    assert len(engine.calls) == 2
    unwatched = pages.open(job(pages), placeholder=True)
    assert isinstance(unwatched, Generation)
    while not unwatched.finished:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # nobody came for it
    again = pages.open(job(pages))
    assert isinstance(again, Generation) and again is not unwatched
    await again.result()
    assert len(engine.calls) == 4


async def test_a_stored_parent_gives_its_title_to_the_prompt(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, FakeEngine())
    await pages.generation(job(pages, "/Scheme"), 1).result()
    child = pages.prompt(job(pages, "/Lisp", parent="/Scheme"))
    assert child.parent is not None and child.parent.title == "Scheme" and "<from>Scheme</from>" in child.text
    assert pages.prompt(job(pages, "/Lisp", parent="/Unwritten")).parent is None
    assert pages.prompt(job(pages, "/Scheme", parent="/Scheme")).parent is None  # a page is not its own parent


def forum_job(pages: Pages, url: str, parent: str | None = None) -> Job:
    runtime = pages.sites["forum"]
    location = runtime.router.resolve(url)
    assert location is not None
    return pages.job(runtime, location, parent)


def test_long_replies_leave_the_prompt_oldest_first_and_the_thread_stays_writable(store: Store) -> None:
    forum = load_site(SITES_DIR / "forum")
    pages = Pages([SiteRuntime.build(forum, "")], store, FakeEngine(max_prompt_chars=2500))
    for n in range(6):
        store.add_post("forum", "/r/lisp/Macros", f"user{n}", f"reply {n} " + "x" * 900)
    job = forum_job(pages, "/r/lisp/Macros")
    assert len(job.posts) == 6  # the page still shows every reply
    prompt = pages.prompt(job).text
    assert len(prompt) <= 2500
    assert "reply 5 " in prompt and "reply 4 " in prompt and "reply 0 " not in prompt  # newest kept
    assert prompt.count("<reply ") == 2  # as many as fit: a third would not
    unbounded = Pages([SiteRuntime.build(forum, "")], store, FakeEngine())
    whole = forum_job(unbounded, "/r/lisp/Macros")
    assert unbounded.prompt(whole).text.count("<reply ") == 6 and whole.key == job.key


def test_a_post_too_long_to_read_whole_goes_into_the_prompt_cut_not_left_out(store: Store) -> None:
    """A post that alone leaves the prompt too long for the model was left out, and counted as read: the replies
    never saw it. The model now reads as much of it as fits, marked as cut."""
    forum = load_site(SITES_DIR / "forum")
    bare = Pages([SiteRuntime.build(forum, "")], store, FakeEngine()).prompt
    room = len(bare(forum_job(Pages([SiteRuntime.build(forum, "")], store, FakeEngine()), "/r/lisp/Macros")).text)
    pages = Pages([SiteRuntime.build(forum, "")], store, FakeEngine(max_prompt_chars=room + 600))
    text = "Here is why macros matter. " + " ".join(f"w{n}" for n in range(400))  # about 2,000 characters
    store.add_post("forum", "/r/lisp/Macros", "ada", text)
    prompt = pages.prompt(forum_job(pages, "/r/lisp/Macros")).text
    assert len(prompt) <= room + 600 and prompt.count("<reply ") == 1
    assert "Here is why macros matter. w0 w1" in prompt and f"{CUT}</reply>" in prompt and "w399" not in prompt


def test_a_url_too_long_for_the_model_is_a_bad_request(store: Store) -> None:
    forum = load_site(SITES_DIR / "forum")
    pages = Pages([SiteRuntime.build(forum, "")], store, FakeEngine(max_prompt_chars=400))
    long = forum_job(pages, "/r/lisp/" + "Macros_" * 40)  # its cache key is there to look up
    with pytest.raises(BadRequest, match="longer than the model can read"):
        pages.generation(long, 1)
    assert "<thread>Macros</thread>" in pages.prompt(forum_job(pages, "/r/lisp/Macros")).text


async def test_a_draft_never_steps_back_to_an_opening_s_canvas(wiki: Site) -> None:
    """An opening with gaps shows the page growing gap by gap (engine.gaps), then its canvases come back pinned
    whole (no step); those must not replace the longer draft already on screen with its first canvas alone."""
    filled = '<article class="wiki">\n<h1>Lisp</h1>\n<p>Born 1958'

    async def frames() -> AsyncIterator[Frame]:
        for frame in (
            StepFrame(1, 1, filled, 2, 0.0),  # after the gap: the page so far
            CanvasFrame(0, 0, filled[:20], 20, 0.0),  # the filled opening's canvases, taken as they are
            CanvasFrame(1, 0, filled[20:], 20, 0.0),
            StepFrame(2, 1, ", by McCarthy", 3, 0.5),
            CanvasFrame(2, 1, ", by McCarthy.</p>", 3, 0.1),
            DoneFrame(filled + ", by McCarthy.</p>", (), 1.0, 0.0, 0.1),
        ):
            await asyncio.sleep(0.02)  # the watcher sees every draft
            yield frame

    runtime = SiteRuntime.build(wiki, mount="/wiki")
    key = PageKey("wiki", "/Lisp", "", "m", "t")
    run = Generation(runtime, key, 1, frames, None, 8, None, lambda generation: None, 10.0)
    seen = [snapshot.text async for snapshot in run.watch() if not snapshot.finished]
    assert filled in seen and seen[-1] == filled + ", by McCarthy.</p>"
    assert [len(text) for text in seen] == sorted(len(text) for text in seen), seen  # the draft only grows


FOLLOWED = '<a href="/os/browser?url=genpedia.org%2Fwiki%2FLisp" hx-get='  # follow_links = "url" on the browser


def browser_job(store: Store) -> tuple[Pages, Job]:
    """The desktop's browser on genpedia.org/wiki/Unix, whose fake model links to /wiki/Lisp."""
    engine = FakeEngine(lambda p, s: '<p>See <a href="/wiki/Lisp">Lisp</a>.</p>')
    pages = Pages([SiteRuntime.build(load_site(SITES_DIR / "os"), "/os")], store, engine, 10.0)  # type: ignore[arg-type]
    runtime = pages.sites["os"]
    location = runtime.router.locate("/browser?url=genpedia.org/wiki/Unix")
    assert location is not None
    return pages, pages.job(runtime, location)


async def test_a_finished_browser_page_keeps_its_links_in_the_browser(store: Store) -> None:
    pages, job = browser_job(store)
    page = await pages.generation(job, 1).result()
    assert FOLLOWED in page.html


async def test_variations_of_a_browser_page_keep_their_links_in_the_browser(store: Store) -> None:
    pages, job = browser_job(store)
    await pages.generation(job, 1).result()
    variations = pages.vary(pages.job(job.runtime, job.location))
    async for _ in variations.watch():
        pass
    assert variations.pages is not None and all(FOLLOWED in page for page in variations.pages)


async def test_closing_stops_the_runs_and_a_closer_cancelled_meanwhile_stays_cancelled(
    wiki: Site, store: Store
) -> None:
    engine = FakeEngine(delay=0.05, steps=50)
    pages = make_pages(wiki, store, engine)
    run = pages.open(job(pages))
    assert isinstance(run, Generation)
    await asyncio.sleep(0.1)  # the run is under way
    closing = asyncio.ensure_future(pages.close())
    await asyncio.sleep(0)  # close() awaits the cancelled run
    closing.cancel()  # a shutdown that is itself cancelled (a second Ctrl-C, a timeout)
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert run.finished and engine.cancelled == 1


class SilentEngine(FakeEngine):
    """An engine whose stream ends with no final frame (a bug, or a killed worker)."""

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        return self._nothing()

    async def _nothing(self) -> AsyncIterator[Frame]:
        return
        yield  # pragma: no cover - makes this an async generator


async def test_an_engine_stream_that_ends_without_its_page_fails_its_watchers(wiki: Site, store: Store) -> None:
    pages = make_pages(wiki, store, SilentEngine())
    with pytest.raises(EngineError, match="without a final frame"):
        await pages.generation(job(pages), 1).result()
    assert store.versions(job(pages).key) == 0 and pages.running(job(pages), 1) is None


async def test_variations_nobody_watches_or_whose_watcher_leaves_are_cancelled(wiki: Site, store: Store) -> None:
    """Three rows of engine time each: a set nobody comes to watch within the wait, or whose last watcher leaves, is
    cancelled (the engine's stream closed)."""
    engine = FakeEngine(delay=0.02, steps=50)
    pages = make_pages(wiki, store, engine, unclaimed_s=0.05)
    await pages.generation(job(pages), 1).result()  # variations are of a written page
    unwatched = pages.vary(job(pages))
    for _ in range(200):
        if unwatched.finished:
            break
        await asyncio.sleep(0.01)
    assert unwatched.finished and unwatched.pages is None and engine.cancelled == 1
    left = pages.vary(job(pages))
    async with contextlib.aclosing(left.watch()) as states:
        async for _ in states:
            break  # the watcher leaves after the first state
    for _ in range(200):
        if left.finished:
            break
        await asyncio.sleep(0.01)
    states = [state async for state in left.watch()]  # its end, as a watcher coming now reads it
    assert left.pages is None and states[-1].error is not None and "cancelled" in str(states[-1].error)


async def test_a_set_whose_claimed_watcher_came_and_left_is_cancelled_at_once(wiki: Site, store: Store) -> None:
    """The watcher a set's placeholder waited for came: its claim is spent, so its leaving ends the set then, not
    once the claim lapses (engine time nobody watches, for up to unclaimed_s)."""
    engine = FakeEngine(delay=0.02, steps=50)
    pages = make_pages(wiki, store, engine, unclaimed_s=5.0)
    await pages.generation(job(pages), 1).result()
    varied = pages.vary(job(pages))
    async with contextlib.aclosing(varied.watch()) as states:
        async for _ in states:
            break
    for _ in range(50):
        if varied.finished:
            break
        await asyncio.sleep(0.01)
    assert varied.finished and varied.pages is None
    states = [state async for state in varied.watch()]
    assert states[-1].error is not None and "cancelled" in str(states[-1].error)


async def test_variations_shown_again_wait_for_their_new_watcher_though_the_old_one_left(
    wiki: Site, store: Store
) -> None:
    """A reload of a set being written: its new request claims it, then the old page's stream closes. The set was
    cancelled with that close, and the reload found it failed."""
    engine = FakeEngine(delay=0.02, steps=50)
    pages = make_pages(wiki, store, engine, unclaimed_s=0.3)
    await pages.generation(job(pages), 1).result()
    varied = pages.vary(job(pages))
    async with contextlib.aclosing(varied.watch()) as states:
        async for _ in states:
            await asyncio.sleep(0.4)  # past the first showing's claim
            varied.claim()  # the reload's request
            break  # and the old page's stream closes
    await asyncio.sleep(0.1)
    assert not varied.finished and engine.cancelled == 0
    states = [state async for state in varied.watch()]  # the reloaded page's stream
    assert varied.pages is not None and len(states[-1].drafts) == 3 and engine.cancelled == 0


@pytest.mark.parametrize(
    ("parent", "post"),
    [
        ("/r/linux/" + "Kernel_" * 40 + "news", "my question about kernels"),  # too long to read even alone
        ("/r/linux/Kernel_news_of_the_week", "my long question about kernels " * 8),  # fits, not beside the post
    ],
)
async def test_a_parent_that_leaves_no_room_for_a_readers_newest_post_leaves_the_prompt(
    tmp_path: Path, store: Store, parent: str, post: str
) -> None:
    """The parent goes after the oldest posts, but before the last: a post left out of the prompt is marked read,
    and would never be answered."""
    shutil.copytree(SITES_DIR / "forum", tmp_path / "forum")
    template = tmp_path / "forum" / "prompts" / "thread.j2"
    template.write_text(template.read_text() + "{% if parent %}<from>{{ parent.title }}</from>{% endif %}\n")
    engine = FakeEngine()
    pages = Pages([SiteRuntime.build(load_site(tmp_path / "forum"), "")], store, engine)
    await pages.generation(forum_job(pages, parent), 1).result()  # the thread the reader came from
    store.add_post("forum", "/r/linux/Kernel_news", "ada", post)
    alone = pages.prompt(forum_job(pages, "/r/linux/Kernel_news")).text
    assert post.strip() in alone
    assert pages.prompt(forum_job(pages, "/r/linux/Kernel_news", parent=parent)).parent is not None
    engine.max_prompt_chars = len(alone)  # the post fits without the parent
    prompt = pages.prompt(forum_job(pages, "/r/linux/Kernel_news", parent=parent))
    assert prompt.parent is None and prompt.text == alone
