"""Pages written in place and variations, in a real browser (Debian's Chromium, Playwright, uvicorn, a FakeEngine).

What the visitor had on screen must stay as it was: the tests compare the browser's own serialisation of the page
before and after. Never run `playwright install`: the tests drive /usr/bin/chromium.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from chromium import browser_page, collect_problems, served
from fakes import FakeEngine, eventually, example_sites

from genui.app import create_app

pytestmark = pytest.mark.browser
FINISHED = "#genui-content:not(.genui-live) .genui-page"  # a finished page (a page being written is .genui-live)
THREAD = "/forum/r/hacking/My_first_lisp"


@dataclass
class Server:
    url: str
    engine: FakeEngine


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    engine = FakeEngine(delay=0.01, steps=3)  # first versions quickly; each test slows it down to watch the edit
    with served(create_app(example_sites(), engine, db_path=tmp_path / "pages.sqlite3")) as url:
        yield Server(url, engine)


@pytest.fixture
def page() -> Iterator[Any]:
    with browser_page() as opened:
        yield opened


def varied(server: Server, page: Any) -> None:
    """/wiki/Lisp open, and its three variations asked for and written."""
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    page.click(".genui-vary button[type=submit]")
    page.wait_for_selector(".genui-keep button:text-is('Keep variation 3')", timeout=20_000)


def test_the_tab_says_a_threads_replies_are_being_written_and_its_own_title_again_when_they_cannot_be(
    server: Server, page: Any
) -> None:
    """The tab says "Writing: …" while a page is written, as a loading page's tab turns; where the replies to a post
    cannot be written, the thread stays on screen with its own title, which the failure does not name."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    title = page.title()
    assert title == "My first lisp — Greddit"
    server.engine.hold = threading.Event()  # the replies wait for their last frame
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "Hello")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector("#genui-draft.genui-in-place[data-step]", timeout=5_000)
    assert page.title() == "Writing: " + title
    server.engine.hold.set()
    page.wait_for_selector(FINISHED + " .reply p:text-is('Welcome, ada!')", timeout=15_000)
    assert page.title() == title
    server.engine.overloaded = 30  # the next reply's replies find the engine busy
    page.fill(".genui-reply textarea[name=text]", "Hello again")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector("#genui-content.genui-error", timeout=10_000)
    assert page.query_selector(".genui-inline .genui-post") is not None  # the thread and the post stay
    deadline = time.monotonic() + 5
    while page.title() != title and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert page.title() == title


SELECT_FIRST_PARAGRAPH = """() => {
    const text = document.querySelector("#genui-content .genui-page p").firstChild;
    const range = document.createRange();
    range.setStart(text, 3);
    range.setEnd(text, 12);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    return range.toString();
}"""


def test_words_selected_in_a_thread_while_its_replies_are_written_stay_selected_to_quote_when_they_land(
    server: Server, page: Any
) -> None:
    """The swap that lands the replies took the selection with the nodes it was in: a reader who selected a line of the
    thread to quote it, while the replies to their own post were written, found nothing selected (a forum user's
    review)."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    server.engine.hold = threading.Event()
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "Hello")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector("#genui-draft.genui-in-place[data-step]", timeout=5_000)
    words = page.evaluate(SELECT_FIRST_PARAGRAPH)
    assert len(words) == 9
    server.engine.hold.set()
    page.wait_for_selector(FINISHED + " .reply p:text-is('Welcome, ada!')", timeout=15_000)
    # after the focus moved back to the post, too
    page.wait_for_selector("#genui-announce:text-matches('^The replies to your post')", timeout=5_000)
    assert page.evaluate("() => getSelection().toString()") == words
    page.click(".genui-reply .genui-quote")
    assert page.input_value(".genui-reply textarea[name=text]").startswith("> " + words.strip())


def test_a_reply_shows_at_once_and_its_replies_stream_in_below_the_thread_as_it_was(server: Server, page: Any) -> None:
    problems = collect_problems(page)
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    before = page.inner_html(FINISHED)
    server.engine.delay = 0.4  # the replies take about two seconds: long enough to see the post alone first
    server.engine.hold = threading.Event()  # and they wait for their last frame until their draft has been seen
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "Hello <b>there</b>")
    page.click(".genui-reply button[type=submit]")

    shown = page.wait_for_selector(".genui-inline .genui-post-text", timeout=3_000)
    assert shown is not None and shown.text_content() == "Hello <b>there</b>"  # escaped: text, not markup
    # said, and the focus on the post (it was "Writing: …", the focus at the thread's top: an accessibility review)
    page.wait_for_function("() => document.activeElement.matches('.genui-inline .genui-post')", timeout=3_000)
    assert page.text_content("#genui-announce") == "Your reply is posted; the replies to it are being written."
    # htmx settles a swapped element that keeps its id: for defaultSettleDelay (20 ms) #genui-content keeps the
    # finished page's class, then takes .genui-live. Wait for that, not for a query that can land inside the 20 ms.
    page.wait_for_selector("#genui-content.genui-live #genui-draft.genui-in-place", timeout=1_000)
    assert page.query_selector("p:text-is('Welcome, ada!')") is None  # the replies are still to come
    live = page.inner_html("#genui-content .genui-page")
    assert live.startswith(before + '<ol class="genui-postlist genui-inline">')  # the thread as it was
    page.wait_for_selector("#genui-draft.genui-in-place[data-step]", timeout=5_000)  # the replies denoising
    server.engine.hold.set()

    page.wait_for_selector(FINISHED + " .reply p:text-is('Welcome, ada!')", timeout=15_000)
    # the focus back on the post, with its replies below it (it went to the thread's top: an accessibility review)
    page.wait_for_function(
        "() => document.activeElement.matches('#genui-content:not(.genui-live) .genui-inline .genui-post')",
        timeout=3_000,
    )
    assert page.text_content("#genui-announce") == "The replies to your post are written, below it."
    assert page.evaluate("() => document.activeElement.querySelector('.genui-post-text').textContent") == (
        "Hello <b>there</b>"
    )
    after = page.inner_html(FINISHED).replace(' tabindex="-1"', "")  # what genui.js gave the focus to
    assert after.startswith(before) and after != before
    assert page.text_content(".genui-versions a[aria-current=page]") == "2"
    assert len(server.engine.calls) == 1 and len(server.engine.infills) == 1  # only the replies were written
    page.reload()
    assert page.inner_html(FINISHED) == after
    page.goto(server.url + THREAD + "?v=1")
    assert page.inner_html(FINISHED) == before
    assert problems == []


def test_a_second_reply_takes_the_focus_not_the_first_one_answered(server: Server, page: Any) -> None:
    """The focus went to the first post of the thread's earlier replies, above the screen (a forum user's review)."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    server.engine.delay = 0.5  # the replies take a few seconds: the post lands before them, on a busy machine too
    for text in ("first reply", "second reply"):
        page.fill(".genui-reply input[name=user]", "ada")
        page.fill(".genui-reply textarea[name=text]", text)
        page.click(".genui-reply button[type=submit]")
        page.wait_for_function(
            "text => document.activeElement.matches('.genui-inline .genui-post')"
            " && document.activeElement.querySelector('.genui-post-text').textContent === text",
            arg=text,
            timeout=5_000,
        )
        page.wait_for_selector(FINISHED + " .reply", timeout=15_000)


def test_a_post_says_when_it_was_made_in_the_readers_own_time_and_its_time_is_its_link(server: Server) -> None:
    """A post's time is stored in UTC in the page, the same for every reader; genui.js shows it in the reader's own
    zone, and the time is the post's address: opened, the page goes to the post (a forum user's review)."""
    with browser_page(timezone_id="Asia/Kolkata", locale="en-GB") as page:  # UTC+5:30: the minutes move too
        problems = collect_problems(page)
        page.goto(server.url + THREAD)
        page.wait_for_selector(FINISHED + " h1", timeout=15_000)
        page.fill(".genui-reply input[name=user]", "ada")
        page.fill(".genui-reply textarea[name=text]", "what time is it?")
        page.click(".genui-reply button[type=submit]")
        page.wait_for_selector(FINISHED + " .reply", timeout=15_000)
        stamped = page.query_selector(".genui-inline .genui-post-time time")
        assert stamped is not None
        stamp, utc, shown = stamped.get_attribute("datetime"), stamped.get_attribute("title"), stamped.text_content()
        moment = datetime.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert utc == moment.strftime("%Y-%m-%d %H:%M UTC")  # as the page has it, kept as the tooltip
        local = moment + timedelta(hours=5, minutes=30)
        assert shown == f"{local.day} {local:%b %Y}, {local:%H:%M}"  # en-GB's medium date, short time, in Kolkata
        link = page.get_attribute(".genui-inline .genui-post-time", "href") or ""
        post = page.get_attribute(".genui-inline .genui-post", "id")
        assert link == f"#{post}" and post is not None and post.startswith("post-")
        page.set_viewport_size({"width": 800, "height": 300})  # short: the post is below the screen's fold
        page.goto(server.url + THREAD + link)
        page.wait_for_selector(FINISHED + " .reply", timeout=15_000)
        assert page.evaluate(f"document.getElementById('{post}').getBoundingClientRect().top") < 300
        assert page.evaluate("window.scrollY") > 0 and page.evaluate("document.querySelector(':target').id") == post
        assert problems == []


def test_a_reply_that_got_no_answer_leaves_the_next_page_said_as_itself(server: Server, page: Any) -> None:
    """Sent offline, the reply landed nothing, and the next page being written was said as "Your reply is posted"
    (a review of this session's change)."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    server.engine.delay = 0.2
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "lost")
    page.context.set_offline(True)
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector(".genui-form-error, .genui-request-error, [role=alert]", timeout=5_000)
    page.context.set_offline(False)
    page.click("a.genui-brand")  # the forum's front page, being written
    page.wait_for_function("() => document.getElementById('genui-announce').textContent !== ''", timeout=10_000)
    assert "reply" not in (page.text_content("#genui-announce") or "")


def test_a_refused_reply_is_said_and_the_field_it_is_about_takes_the_focus(server: Server, page: Any) -> None:
    """A reply refused for its name (the browser's own check passed by) left the focus at the page's top, said
    "Loaded: …" as for a page that posted, and nothing tied the reason to the fields (an accessibility audit)."""
    problems = collect_problems(page)
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    valid = "(field, name) => { field.value = name; return field.checkValidity(); }"
    for name, takes in (("太郎", True), ("محمد", True), ("Zoë", True), ("Ada L.", False), ("ada.l", False)):
        assert page.eval_on_selector(".genui-reply input[name=user]", valid, name) is takes, name  # as the server
    page.eval_on_selector(".genui-reply input[name=user]", "field => field.removeAttribute('pattern')")
    page.fill(".genui-reply input[name=user]", "Ada L.")
    page.fill(".genui-reply textarea[name=text]", "Hello")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector(".genui-form-error", timeout=5_000)
    # said once the swap settles, a moment after the reason is on the page
    page.wait_for_function("() => document.getElementById('genui-announce').textContent.startsWith('Your reply')")
    said = page.text_content("#genui-announce") or ""
    # said once: "Not posted: Your reply was not posted: …" said it twice (an accessibility review)
    assert said.startswith("Your reply was not posted: ") and said == page.text_content(".genui-form-error")
    assert page.evaluate("() => document.activeElement.name") == "user"
    assert page.get_attribute("input[name=user]", "aria-describedby") == "genui-form-error"
    assert page.get_attribute("textarea[name=text]", "aria-describedby") == "genui-form-error"
    assert page.input_value("textarea[name=text]") == "Hello" and server.engine.infills == []
    assert page.get_attribute("input[name=user]", "aria-invalid") == "true"
    assert page.get_attribute("textarea[name=text]", "aria-invalid") is None
    # refused for its text (spaces pass the browser's own check), the text takes the focus, not the name (a visual
    # review: the focus went to the name, which was fine)
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "   ")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector(".genui-form-error:text('the post is empty')", timeout=5_000)
    # the focus moves once the swap settles, a moment after the reason is on the page (a fresh clone's run read it
    # before then)
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'text'", timeout=5_000)
    assert page.get_attribute("textarea[name=text]", "aria-invalid") == "true"
    assert page.get_attribute("input[name=user]", "aria-invalid") is None
    assert [problem for problem in problems if "status of 400" not in problem] == []  # the refusals' own 400s


def test_rewriting_a_paragraph_leaves_the_rest_of_the_page_byte_identical(server: Server, page: Any) -> None:
    problems = collect_problems(page)
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    before = page.inner_html(FINISHED)
    paragraph = "<p>Lisp is a topic in computing, written with seed 0.</p>"
    assert before.count(paragraph) == 1
    server.engine.delay = 0.2
    page.select_option("select[name=section]", "2")  # 1: the heading, 2: the paragraph
    shown = page.evaluate("() => document.querySelector('select[name=section]').selectedIndex + 1")
    page.fill("input[name=instruction]", "shorter")
    page.click(".genui-rewrite button[type=submit]")

    page.wait_for_selector("#genui-content.genui-live #genui-draft.genui-in-place", timeout=3_000)
    live = page.inner_html("#genui-content .genui-page")
    assert live.startswith(before.split(paragraph)[0]) and live.endswith(before.split(paragraph)[1])

    page.wait_for_selector(FINISHED + " p:text-is('Rewritten with seed 1: shorter.')", timeout=15_000)
    # the focus on the section rewritten, and said (it went to the page's top: an accessibility review)
    page.wait_for_function(
        "() => document.activeElement.textContent === 'Rewritten with seed 1: shorter.'", timeout=3_000
    )
    assert page.text_content("#genui-announce") == f"Rewritten: section {shown} of Lisp — Genpedia"
    after = page.inner_html(FINISHED).replace(' tabindex="-1"', "")  # what genui.js gave the focus to
    assert after == before.replace(paragraph, "<p>Rewritten with seed 1: shorter.</p>")
    assert page.url == server.url + "/wiki/Lisp?v=2"
    page.reload()
    assert page.inner_html(FINISHED) == after
    page.goto(server.url + "/wiki/Lisp?v=1")
    assert page.inner_html(FINISHED) == before
    assert problems == []


def test_three_variations_stream_side_by_side_and_the_kept_one_survives_a_reload(server: Server, page: Any) -> None:
    problems = collect_problems(page)
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    server.engine.delay = 0.1
    page.click(".genui-vary button[type=submit]")

    page.wait_for_selector("#genui-content.genui-live.genui-variations", timeout=3_000)
    for n in (1, 2, 3):  # every candidate denoises on screen before any is finished
        page.wait_for_selector(f"#genui-variant-{n}.genui-draft:not(:empty)", timeout=5_000)
    assert page.query_selector(".genui-keep") is None

    page.wait_for_selector(".genui-keep button:text-is('Keep variation 3')", timeout=20_000)
    headings = [element.text_content() for element in page.query_selector_all(".genui-candidate .genui-page h1")]
    assert headings == ["Lisp (variation 1)", "Lisp (variation 2)", "Lisp (variation 3)"]
    # the set's own heading, over the variations' h2s (it had none: an accessibility review)
    assert page.text_content("#genui-content > h1") == "3 variations of Lisp: keep one as its next version."
    bodies = [element.inner_html() for element in page.query_selector_all(".genui-candidate .genui-page")]
    assert len(set(bodies)) == 3
    assert len(server.engine.variations) == 1 and server.engine.variations[0][1] == 3  # one batched call

    keeps: list[str] = []
    page.on("request", lambda request: keeps.append(request.url) if "/_genui/keep" in request.url else None)
    # Two of them clicked at once (a double click across two buttons): the first is kept, the second dropped, not
    # answered with a 404 ("Those variations are gone") swapped over the page just kept.
    page.evaluate("() => { const b = document.querySelectorAll('.genui-keep button'); b[1].click(); b[2].click() }")
    page.wait_for_selector("#genui-content[data-version='2'] .genui-page h1", timeout=10_000)  # the kept page
    page.wait_for_timeout(500)
    assert len(keeps) == 1 and page.query_selector("#genui-content[data-version='2'] .genui-page h1") is not None
    assert page.url == server.url + "/wiki/Lisp?v=2" and page.query_selector(".genui-candidate") is None
    page.reload()
    assert page.text_content(FINISHED + " h1") == "Lisp (variation 2)"
    page.goto(server.url + "/wiki/Lisp")  # the newest version is the kept one
    assert page.text_content(FINISHED + " h1") == "Lisp (variation 2)"
    assert page.inner_html(FINISHED) == bodies[1]
    assert problems == []


def test_a_set_of_variations_outlives_a_reload_and_back_after_keeping_one_shows_the_version_varied(
    server: Server, page: Any
) -> None:
    """The set had no address: a reload mid-write lost it (and cancelled it), and Back after a Keep showed the page's
    plain URL, which is its newest version: the one just kept."""
    problems = collect_problems(page)
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    first = page.inner_html(FINISHED)
    server.engine.delay = 0.1
    page.click(".genui-vary button[type=submit]")
    page.wait_for_selector("#genui-variant-1.genui-draft:not(:empty)", timeout=5_000)
    address = page.url
    assert address.startswith(server.url + "/_genui/variations?site=wiki&id=")
    page.reload()  # while they are written
    page.wait_for_selector(".genui-keep button:text-is('Keep variation 3')", timeout=20_000)
    assert page.url == address and len(server.engine.variations) == 1 and server.engine.cancelled == 0
    page.click(".genui-keep button:text-is('Keep variation 2')")
    page.wait_for_selector("#genui-content[data-version='2'] .genui-page h1", timeout=10_000)
    assert page.url == server.url + "/wiki/Lisp?v=2"
    page.go_back()
    page.wait_for_selector("#genui-content[data-version='1'] .genui-page h1", timeout=10_000)
    assert page.url == server.url + "/wiki/Lisp?v=1" and page.inner_html(FINISHED) == first
    page.go_forward()
    page.wait_for_selector("#genui-content[data-version='2'] .genui-page h1", timeout=10_000)
    assert page.text_content(FINISHED + " h1") == "Lisp (variation 2)"
    assert problems == []


def test_a_link_inside_a_candidate_leaves_the_set_behind_back_and_writes_its_page_from_the_page_varied(
    server: Server, page: Any
) -> None:
    """Only a Keep takes the set's place in history: a link's page did, and Back skipped the set."""
    problems = collect_problems(page)
    varied(server, page)
    address = page.url
    page.click(".genui-candidate >> nth=1 >> text=Lisp tree")
    page.wait_for_selector(FINISHED + " h1:text-is('Lisp tree')", timeout=15_000)
    assert page.url == server.url + "/wiki/Lisp_tree"
    assert "<from>Lisp</from>" in server.engine.calls[-1].prompt  # the page the candidates are of is its parent
    page.go_back()
    page.wait_for_selector(".genui-keep button:text-is('Keep variation 3')", timeout=10_000)
    assert page.url == address
    assert problems == []


@pytest.mark.parametrize("query", ["", "?utm_source=feed"])  # a key the route does not take: the same page
def test_back_after_regenerate_shows_the_version_that_was_on_screen(server: Server, page: Any, query: str) -> None:
    problems = collect_problems(page)
    page.goto(server.url + "/wiki/Lisp" + query)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    assert page.url == server.url + "/wiki/Lisp"  # at its own address (session 73: redirected, as an alias is)
    first = page.inner_html(FINISHED)
    page.click(".genui-regenerate button[type=submit]")
    page.wait_for_selector("#genui-content[data-version='2'] .genui-page h1", timeout=10_000)
    assert page.url == server.url + "/wiki/Lisp?v=2" and page.inner_html(FINISHED) != first
    page.go_back()  # the plain URL would be the newest version, the one just written
    page.wait_for_selector("#genui-content[data-version='1'] .genui-page h1", timeout=10_000)
    assert page.url == server.url + "/wiki/Lisp?v=1" and page.inner_html(FINISHED) == first
    page.go_forward()
    page.wait_for_selector("#genui-content[data-version='2'] .genui-page h1", timeout=10_000)
    assert problems == []


def test_a_refused_page_control_says_why_below_the_toolbar_and_the_page_and_the_text_stay(
    server: Server, page: Any
) -> None:
    """A Rewrite while another version of the page is being written is a 409: said below the toolbar, where a
    dropped connection is said, not swapped in over the page with the instruction typed."""
    problems = collect_problems(page)
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    before = page.inner_html(FINISHED)
    server.engine.delay = 0.5  # another visitor's Regenerate is writing version 2 meanwhile
    regenerate = urllib.request.Request(
        server.url + "/_genui/regenerate", data=b"site=wiki&url=%2FLisp", headers={"HX-Request": "true"}
    )
    with urllib.request.urlopen(regenerate, timeout=10) as answer:
        assert answer.status == 200  # its placeholder: the run waits for that visitor's stream
    page.fill("input[name=instruction]", "shorter, please")
    page.click("#genui-toolbar button:text-is('Rewrite')")
    said = page.wait_for_selector("#genui-toolbar .genui-send-error", timeout=5_000)
    assert said is not None and "being written right now" in (said.text_content() or "")
    assert page.inner_html(FINISHED) == before and page.input_value("input[name=instruction]") == "shorter, please"
    assert not [problem for problem in problems if "409" not in problem]  # the 409 itself is logged as a resource


def test_a_keep_refused_while_another_version_is_written_says_so_by_its_candidate_and_the_set_stays(
    server: Server, page: Any
) -> None:
    problems = collect_problems(page)
    varied(server, page)
    server.engine.delay = 0.5  # another visitor's Regenerate is writing version 2 meanwhile
    regenerate = urllib.request.Request(
        server.url + "/_genui/regenerate", data=b"site=wiki&url=%2FLisp", headers={"HX-Request": "true"}
    )
    with urllib.request.urlopen(regenerate, timeout=10) as answer:
        assert answer.status == 200
    page.click(".genui-keep button:text-is('Keep variation 2')")
    said = page.wait_for_selector(".genui-candidate .genui-send-error", timeout=5_000)
    assert said is not None and "being written right now" in (said.text_content() or "")
    assert len(page.query_selector_all(".genui-candidate")) == 3  # the set is still there to keep from
    assert not [problem for problem in problems if "409" not in problem]


def test_words_selected_in_the_thread_are_quoted_in_a_reply_and_shown_set_off(server: Server, page: Any) -> None:
    """A forum's reader could not say which words of a reply they answered (a forum user's review, left alone since
    session 63): the reply form's button quotes the words selected in the thread, and the post shows them as a
    quote."""
    problems = collect_problems(page)
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    quote = page.locator(".genui-reply .genui-quote")
    assert quote.is_visible()  # shown by genui.js: without scripts it would do nothing
    quote.click()  # nothing selected: it says how
    assert page.text_content(".genui-quote-hint") == "Select words in the thread, then quote them in your reply"
    assert page.input_value(".genui-reply textarea") == ""
    page.fill(".genui-reply textarea", "First thought.")
    chosen = page.evaluate(
        """() => {
            const paragraph = document.querySelector('.genui-page p');
            const range = document.createRange();
            range.selectNodeContents(paragraph);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
            return paragraph.textContent.trim();
        }"""
    )
    page.evaluate("() => getSelection().removeAllRanges()")  # a phone's tap clears it before the button's click
    quote.click()
    assert page.input_value(".genui-reply textarea") == f"First thought.\n\n> {chosen}\n\n"
    assert (
        page.evaluate("() => document.activeElement.name") == "text"
        and page.query_selector(".genui-quote-hint") is None
    )
    page.keyboard.type("Quite so.")
    page.fill(".genui-reply input[name=user]", "ada")
    page.click(".genui-reply button[type=submit]")
    post = page.wait_for_selector(".genui-inline .genui-post-text", timeout=5_000)
    assert post is not None
    blocks = post.eval_on_selector_all(":scope > *", "els => els.map(e => [e.tagName, e.textContent])")
    assert blocks == [["P", "First thought."], ["BLOCKQUOTE", chosen], ["P", "Quite so."]]
    assert problems == []


def test_a_quote_cut_to_the_replys_room_never_cuts_an_emoji_in_half(server: Server, page: Any) -> None:
    """The quote is cut to what the field's maxlength leaves, in UTF-16 units: a cut inside an emoji left half of it,
    which the browser posts as U+FFFD (session 70's note)."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    room = page.eval_on_selector(".genui-reply textarea", "field => field.maxLength")
    # then "\n\n" before the quote and after it, which leaves 5 units: "> 😀" and half the next 😀
    page.fill(".genui-reply textarea", "x" * (room - 9))
    page.evaluate(
        """() => {
            const paragraph = document.querySelector('.genui-page p');
            paragraph.textContent = '\\u{1F600}'.repeat(6);
            const range = document.createRange();
            range.selectNodeContents(paragraph);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }"""
    )
    page.click(".genui-reply .genui-quote")
    value = page.input_value(".genui-reply textarea")
    assert value.endswith("\n\n> \U0001f600\n\n"), value[-12:]
    assert not page.eval_on_selector(
        ".genui-reply textarea", "field => /[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])/.test(field.value)"
    )


def test_a_readers_name_is_filled_in_after_their_first_post(server: Server, page: Any) -> None:
    """A reader typed their name at every post (a forum host's review): the browser keeps the last one posted under,
    and a reply form's empty name box takes it, as served, so a page asking again by itself is not held back."""
    page.goto(server.url + THREAD)
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    assert page.input_value(".genui-reply input[name=user]") == ""
    page.fill(".genui-reply input[name=user]", "ada")
    page.fill(".genui-reply textarea[name=text]", "Hello")
    page.click(".genui-reply button[type=submit]")
    page.wait_for_selector(FINISHED + " .reply p:text-is('Welcome, ada!')", timeout=15_000)
    assert page.input_value(".genui-reply input[name=user]") == "ada"  # the form as it came back with the thread
    page.goto(server.url + "/forum/r/hacking/Another_thread")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    user = ".genui-reply input[name=user]"
    assert page.input_value(user) == "ada"
    assert page.eval_on_selector(user, "field => field.value === field.defaultValue")  # no text a reload would lose
    page.fill(user, "b y")  # a name that is none is not kept: the form refuses it
    page.fill(".genui-reply textarea[name=text]", "Hi")
    page.click(".genui-reply button[type=submit]")
    page.goto(server.url + "/forum/r/hacking/A_third")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    assert page.input_value(user) == "ada"


def test_a_rewrite_stopped_leads_back_to_the_page_as_it_is_stored(server: Server, page: Any) -> None:
    """A new version stopped is never stored: its own address (?v=2) would be a 404, so the line that says it
    stopped leads to the page's, which shows the version that was there."""
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    before = page.inner_html(FINISHED)
    server.engine.delay = 0.3
    page.select_option("select[name=section]", "2")
    page.click(".genui-rewrite button[type=submit]")
    page.wait_for_selector("#genui-content.genui-live #genui-draft.genui-in-place", timeout=3_000)
    page.click(".genui-stop")
    page.wait_for_selector("#genui-content.genui-stopped", timeout=3_000)
    assert eventually(lambda: server.engine.cancelled == 1, 5.0)
    assert page.url == server.url + "/wiki/Lisp?v=2"  # the version that was being written
    page.click("#genui-progress a:text-is('Open the page again')")
    page.wait_for_url(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=10_000)
    assert page.inner_html(FINISHED) == before


def test_variations_stopped_end_their_run_and_lead_back_to_the_page_varied(server: Server, page: Any) -> None:
    page.goto(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1", timeout=15_000)
    server.engine.delay = 0.3
    page.click(".genui-vary button[type=submit]")
    page.wait_for_selector("#genui-variant-1.genui-draft:not(:empty)", timeout=5_000)
    page.keyboard.press("Escape")
    page.wait_for_selector("#genui-content.genui-stopped", timeout=3_000)
    assert eventually(lambda: server.engine.cancelled >= 1, 5.0)
    page.wait_for_timeout(1_000)  # no candidate lands after the stop
    assert page.query_selector(".genui-keep") is None
    page.click("#genui-progress a:text-is('Open the page again')")
    page.wait_for_url(server.url + "/wiki/Lisp")
    page.wait_for_selector(FINISHED + " h1:text-is('Lisp')", timeout=10_000)
