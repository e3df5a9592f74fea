"""Readers' replies in place: the thread as it was, byte for byte, then the new posts and the replies to them."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes import (
    SITES_DIR,
    ClientFactory,
    FakeEngine,
    eventually,
    example_sites,
    page_html,
    pages_of,
    region_writer,
    visit,
    ws_messages,
)
from starlette.testclient import TestClient
from test_app import HTMX, live_url, wait_until

from engine.frames import EngineError
from genui.app import create_app
from genui.edits import Infill
from genui.sites import Site, load_site
from genui.store import Store

THREAD = "/forum/r/hacking/My_first_lisp"


def test_an_htmx_reply_shows_the_post_at_once_and_appends_the_replies_to_the_thread_as_it_was(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    first = page_html(visit(client, THREAD).text)
    engine.delay = 0.02  # the replies take long enough for their drafts to be seen
    response = client.post(THREAD, data={"user": "ada", "text": "<b>Hi</b> & all"}, headers=HTMX)
    assert response.status_code == 200 and "ws-connect" in response.text
    assert response.headers["hx-replace-url"] == THREAD  # sent from any version, it shows the newest
    shown = '<p class="genui-post-text" dir="auto">&lt;b&gt;Hi&lt;/b&gt; &amp; all</p>'
    # The thread as it was, byte for byte, then the post, then the draft of the replies.
    assert f'<div class="genui-page">{first}<ol class="genui-postlist genui-inline">' in response.text
    assert shown in response.text and 'id="genui-draft" class="genui-draft genui-in-place"' in response.text
    assert "url=%2Fr%2Fhacking%2FMy_first_lisp&amp;v=2" in response.text
    messages = ws_messages(client, live_url(response.text))
    assert any('class="genui-draft genui-in-place"' in message for message in messages[:-1])
    assert "Welcome, ada!" in messages[-1]
    second = page_html(client.get(THREAD).text)
    assert second.startswith(first + '<ol class="genui-postlist genui-inline">') and shown in second
    # the replies start with the forum's reply opening (sites/forum/prompts/reply_opening.j2), then the model's text
    reply = '<div class="reply"><p class="meta"><b>bot1</b> · 1 point</p><p>Welcome, ada!</p></div>'
    assert second.endswith(f'</ol><div class="replies">\n{reply}</div>')
    assert page_html(client.get(THREAD + "?v=1").text) == first  # the thread's earlier state is still there
    (edit,) = engine.infills
    assert edit.after == "" and edit.before.startswith('<div class="thread">') and "hx-get" not in edit.before
    assert edit.before.endswith('</div><div class="replies">\n<div class="reply"><p class="meta"><b>')
    assert '<reply user="ada">&lt;b&gt;Hi&lt;/b&gt; & all</reply>' in edit.generation.prompt  # data in the prompt
    assert edit.generation.seed == 1 and len(engine.calls) == 1
    assert edit.region_tokens == 256  # half the forum's 512-token page budget: several canvases of replies


def test_every_post_is_shown_once_in_place_or_below_and_one_made_during_a_reply_is_answered_on_the_next_visit(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    first = page_html(visit(client, THREAD).text)
    engine.delay = 0.05  # bob's replies are still being written when cy posts
    response = client.post(THREAD, data={"user": "bob", "text": "answered"}, headers=HTMX)
    client.post(THREAD, data={"user": "cy", "text": "plain form"}, follow_redirects=False)  # stored, waits
    ws_messages(client, live_url(response.text))
    answered = page_html(client.get(THREAD + "?v=2").text)
    assert answered.startswith(first) and "answered" in answered and "plain form" not in answered
    engine.delay = 0.0
    # cy's post waits for replies, and no run is writing any: the next visit to the thread starts them.
    waiting = client.get(THREAD).text
    assert "url=%2Fr%2Fhacking%2FMy_first_lisp&amp;v=3" in waiting and "genui-in-place" in waiting
    assert "Welcome, cy!" in ws_messages(client, live_url(waiting))[-1] and len(engine.infills) == 2
    response = client.post(THREAD, data={"user": "ada", "text": "second"}, headers=HTMX)
    ws_messages(client, live_url(response.text))
    thread = client.get(THREAD).text
    assert re.findall(r'<p class="genui-post-text" dir="auto">(.*?)</p>', thread) == [
        "answered",
        "plain form",
        "second",
    ]
    assert page_html(thread).startswith(answered) and "Readers&#39; replies are in the thread above." in thread
    response = client.post(THREAD, data={"user": "cy", "text": "third"}, headers=HTMX)
    ws_messages(client, live_url(response.text))
    assert page_html(client.get(THREAD).text).startswith(page_html(thread))
    assert 'aria-current="page">5</a>' in client.get(THREAD).text  # v1 and four posts' replies


def test_a_visitor_arriving_while_the_replies_are_written_watches_them_land(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    engine.delay = 0.05
    client.post(THREAD, data={"user": "ada", "text": "hi"}, headers=HTMX)
    arriving = client.get(THREAD, headers=HTMX).text
    assert "url=%2Fr%2Fhacking%2FMy_first_lisp&amp;v=2" in arriving and "genui-in-place" in arriving
    assert "Welcome, ada!" in ws_messages(client, live_url(arriving))[-1] and len(engine.infills) == 1


def _failing_once(failures: list[int]) -> Callable[[Infill], str]:
    """The fake's reply writer, failing as often as ``failures`` has items (popping one each time)."""

    def flaky(edit: Infill) -> str:
        if failures:
            failures.pop()
            raise EngineError("the model fell over")
        return region_writer(edit)

    return flaky


@pytest.mark.parametrize("scripts", [True, False])
def test_replies_whose_run_failed_are_written_again_in_place_when_the_thread_asks(
    client_factory: ClientFactory, all_sites: list[Site], scripts: bool
) -> None:
    failures = [1]
    engine = FakeEngine(region=_failing_once(failures))
    client = client_factory(all_sites, engine)
    first = page_html(visit(client, THREAD).text)
    response = client.post(THREAD, data={"user": "ada", "text": "hi"}, headers=HTMX)
    wait_until(lambda: not failures)  # the replies' run has failed and is gone
    assert "url=%2Fr%2Fhacking%2FMy_first_lisp&amp;v=2" in response.text  # the run the placeholder waits for
    # the live thread asks for v=2 again: the replies are written again in place, not a whole new thread
    if scripts:
        assert "Welcome, ada!" in ws_messages(client, live_url(response.text))[-1]
        second = page_html(client.get(THREAD).text)
    else:  # where the shell's <noscript> refresh leads; the 303 goes to the thread once the replies are written
        second = page_html(client.get("/_genui/wait?site=forum&url=%2Fr%2Fhacking%2FMy_first_lisp&v=2").text)
    assert second.startswith(first) and second.endswith("Welcome, ada!</p></div></div>")
    assert len(engine.infills) == 2 and len(engine.calls) == 1


def test_a_thread_written_whole_with_its_posts_in_the_prompt_leaves_none_waiting(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    other = "/forum/r/hacking/Unwritten"
    client.post(other, data={"user": "ada", "text": "first!"}, follow_redirects=False)  # stored before any version
    first = visit(client, other)
    assert "first!" in first.text and len(engine.calls) == 1  # written whole, the post in its prompt
    assert "<reply" in engine.calls[0].prompt and "first!" in engine.calls[0].prompt
    for _ in range(2):  # the post is shown below the thread, and no visit answers it again
        assert client.get(other).status_code == 200 and "genui-in-place" not in client.get(other).text
    form = {"site": "forum", "url": "/r/hacking/Unwritten"}
    regenerated = client.post("/_genui/regenerate", data=form, headers={**HTMX, "Origin": "http://testserver"})
    ws_messages(client, live_url(regenerated.text))
    assert len(engine.calls) == 2 and "first!" in engine.calls[1].prompt
    assert "genui-in-place" not in client.get(other).text and engine.infills == []


def test_a_variation_asked_for_before_a_threads_first_post_is_kept_with_the_conversation_since(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Its candidates read no post, as a thread's first version does: the one kept takes the replies written to a post
    since, after it. Until session 71 it was stored alone, the post left waiting and answered again."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    origin = {"Origin": "http://testserver"}
    candidates = client.post("/_genui/variations", data=form, headers=origin).text  # finished, nothing kept yet
    reply = client.post(THREAD, data={"user": "ada", "text": "meanwhile"}, headers={**HTMX, **origin})
    ws_messages(client, live_url(reply.text))  # version 2: the thread with ada's replies in place
    keep = re.search(r'<form class="genui-keep"(.*?)value="1">', candidates, re.S)
    assert keep is not None
    fields = dict(re.findall(r'name="([a-z]+)" value="([^"]*)"', keep.group(0)))
    assert client.post("/_genui/keep", data=fields, headers=origin, follow_redirects=False).status_code == 303
    # Version 3 is a candidate written before ada posted, with her post and its replies after it: none waits.
    thread = client.get(THREAD).text
    assert 'aria-current="page">3</a>' in thread and "(variation 1)</h1>" in thread
    assert "Welcome, ada!" in page_html(thread) and "genui-in-place" not in thread
    assert len(engine.infills) == 1


def test_variations_written_from_a_post_deleted_since_are_not_kept(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    origin = {"Origin": "http://testserver"}
    client.post(THREAD, data={"user": "troll", "text": "something nasty"}, follow_redirects=False)
    visit(client, THREAD)  # version 1, written whole with the post in its prompt
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    candidates = client.post("/_genui/variations", data=form, headers=origin).text  # finished, nothing kept yet
    assert "something nasty" in engine.variations[-1][0].prompt
    moderator = Store(tmp_path / "db0.sqlite3")  # genui posts delete, beside the server
    try:
        (troll,) = moderator.posts("forum", "/r/hacking/My_first_lisp")
        moderator.delete_post(troll.id)
    finally:
        moderator.close()
    keep = re.search(r'<form class="genui-keep"(.*?)value="1">', candidates, re.S)
    assert keep is not None
    fields = dict(re.findall(r'name="([a-z]+)" value="([^"]*)"', keep.group(0)))
    refused = client.post("/_genui/keep", data=fields, headers=origin, follow_redirects=False)
    assert refused.status_code == 409 and "has been deleted meanwhile" in refused.text
    assert "something nasty" not in page_html(visit(client, THREAD).text)  # the thread is written again without it


@pytest.mark.parametrize("scripts", [True, False])
def test_the_next_versions_url_answers_no_post_the_newest_version_already_read(
    client_factory: ClientFactory, all_sites: list[Site], scripts: bool
) -> None:
    # no GET (a crawler, another site's <img>) starts replies to posts the thread was written after
    engine = FakeEngine()
    client = client_factory(all_sites, engine, follow_redirects=False)
    other = "/forum/r/hacking/Unwritten"
    client.post(other, data={"user": "ada", "text": "first!"})
    visit(client, other)
    assert "first!" in engine.calls[0].prompt  # written whole: the post in its prompt, none waiting
    query = "site=forum&url=%2Fr%2Fhacking%2FUnwritten&v=2"
    if scripts:
        messages = ws_messages(client, f"/_genui/ws?{query}")
        assert "There is no version 2 of this page." in messages[-1]
    else:
        assert client.get(f"/_genui/wait?{query}").status_code == 404
    assert engine.infills == [] and len(engine.calls) == 1 and client.get(f"{other}?v=2").status_code == 404


def test_the_replies_to_a_post_are_written_though_the_poster_leaves_before_they_land(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A poster who went on to another page cancelled the replies: the post waited unanswered until someone opened
    the thread again, who then waited for them (a forum user's review)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    pages_of(client).unclaimed_s = 0.1  # only now: a slow round trip to the wait URL above let the first run go
    engine.delay = 0.05
    live = live_url(client.post(THREAD, data={"user": "ada", "text": "bye"}, headers=HTMX).text)
    with client.websocket_connect(live) as socket:
        socket.receive_text()  # a frame, then the visitor leaves (a normal close)
    time.sleep(1.0)  # past unclaimed_s: nobody watches the run any more
    assert engine.cancelled == 0 and "Welcome, ada!" in page_html(client.get(f"{THREAD}?v=2").text)


def test_a_post_made_while_anothers_replies_are_written_is_answered_next(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """The second poster watched the first's replies land, and their own post stayed unanswered, with no word of it,
    until someone opened the thread again (a forum user's review): its page says so, and asks again by itself."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    engine.delay = 0.05
    first = live_url(client.post(THREAD, data={"user": "ada", "text": "first"}, headers=HTMX).text)
    second = live_url(client.post(THREAD, data={"user": "bob", "text": "second"}, headers=HTMX).text)
    assert first == second  # bob joins ada's run
    landed = ws_messages(client, second)[-1]
    assert "Welcome, ada!" in landed and "Welcome, bob!" not in landed
    assert (
        "The newest posts are answered next" in landed
        and f'data-genui-retry="3" data-genui-retry-url="{THREAD}"' in landed
    )
    engine.hold = threading.Event()  # a visitor's page being written elsewhere: the engine is theirs first
    assert "ws-connect" in client.get("/wiki/Unwritten_page").text
    shown = client.get(THREAD).text  # shown as stored, and with no asking again: every reader would, every 3 s
    assert "genui-in-place" not in shown and "answered next" not in shown and "data-genui-retry" not in shown
    engine.hold.set()
    assert eventually(lambda: not pages_of(client).busy())
    again = client.get(THREAD).text  # what the page asks for again: bob's replies, being written
    assert "genui-in-place" in again and "Welcome, bob!" in ws_messages(client, live_url(again))[-1]
    final = client.get(THREAD)
    assert final.status_code == 200, final.text[-600:]
    assert "answered next" not in page_html(final.text)  # none waits any more


def test_replies_the_busy_engine_could_not_write_leave_the_thread_and_the_post_on_screen(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """The failure replaced the whole thread, the post with it, with "The model is busy" (a forum user's review)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    thread = page_html(visit(client, THREAD).text)
    engine.overloaded = 2.0
    live = live_url(client.post(THREAD, data={"user": "ada", "text": "while busy"}, headers=HTMX).text)
    failed = ws_messages(client, live)[-1]
    assert "The model is busy. This page tries again in 2 s." in failed and 'data-genui-retry="2"' in failed
    assert thread in failed and '<p class="genui-post-text" dir="auto">while busy</p>' in failed
    assert "<h1>Busy</h1>" not in failed and "data-document-title" not in failed  # the thread's heading and title
    engine.overloaded = None
    again = client.get(THREAD).text  # where it asks again: the replies, written in place
    assert "Welcome, ada!" in ws_messages(client, live_url(again))[-1]


def test_an_older_version_does_not_list_the_posts_a_later_one_answered(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """?v=2 of a thread listed every later post below it, with no replies and no word that they came later: they
    read as never answered (a forum user's review)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    for user in ("ada", "bob"):
        ws_messages(
            client, live_url(client.post(THREAD, data={"user": user, "text": f"hi from {user}"}, headers=HTMX).text)
        )
    older = client.get(f"{THREAD}?v=2").text
    assert "hi from ada" in older and "hi from bob" not in older
    assert f'<a href="{THREAD}"' in older and "Posts made after this version, with the replies to them" in older
    newest = client.get(THREAD).text
    assert "Welcome, bob!" in newest and "Posts made after this version" not in newest


def test_a_post_that_joins_replies_under_way_holds_their_run_for_its_own_stream(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A second post while the first's replies are written joins their run (its own replies wait for the next), and
    is handed its placeholder: the run waits for that stream though the first visitor leaves before it connects."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    engine.delay = 0.05
    first = live_url(client.post(THREAD, data={"user": "ada", "text": "first"}, headers=HTMX).text)
    with client.websocket_connect(first) as socket:
        socket.receive_text()
        second = live_url(client.post(THREAD, data={"user": "bob", "text": "second"}, headers=HTMX).text)
    time.sleep(0.5)  # the first visitor's stream has closed; the second's has not connected yet
    assert engine.cancelled == 0
    assert "Welcome, ada!" in ws_messages(client, second)[-1] and len(engine.infills) == 1


def test_a_regenerate_of_a_thread_with_a_post_waiting_is_written_again_whole_when_its_run_is_gone(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A post waits for its replies (made while the model loaded); the visitor regenerates the thread, and the run
    ends unwatched (the socket dropped). The reconnect wrote v2 as v1 with replies in place: not what was asked."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    pages_of(client).unclaimed_s = 0.1  # only now: a slow round trip to the wait URL above let the first run go
    pages_of(client).store.add_post("forum", "/r/hacking/My_first_lisp", "alice", "hello there")
    engine.delay, engine.steps = 0.05, 10
    answer = client.post("/_genui/regenerate", data={"site": "forum", "url": "/r/hacking/My_first_lisp"}, headers=HTMX)
    assert answer.headers["HX-Push-Url"] == THREAD + "?v=2"
    wait_until(lambda: engine.cancelled == 1)  # nobody came to watch it
    engine.delay = 0.0
    again = ws_messages(client, live_url(answer.text))[-1]
    assert "written with seed 1" in again and "Welcome, alice" not in again
    assert [call.seed for call in engine.calls] == [0, 1, 1] and engine.infills == []


@pytest.mark.parametrize("headers", [HTMX, {}])
def test_a_refused_reply_keeps_the_thread_on_screen_with_the_reason_at_its_form(
    client_factory: ClientFactory, all_sites: list[Site], headers: dict[str, str]
) -> None:
    """A reply refused (a name with a space, a post of blanks) replaced the thread with an error page headed "Reply
    not posted" whose link led to the forum's front page (found in a visitor's walkthrough)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    first = page_html(visit(client, THREAD).text)
    client.post(THREAD, data={"user": "ada", "text": "kept"}, headers={})  # a post shown below or in place
    shown = client.get(THREAD).text
    refused = client.post(THREAD, data={"user": "Ada Lovelace", "text": "typed\nhere"}, headers=headers)
    assert refused.status_code == 400 and page_html(refused.text) == page_html(shown) and first in refused.text
    assert "<h1>Reply not posted</h1>" not in refused.text and "Back to" not in refused.text
    # the tab says it was refused, where the reason is at the foot of the thread (a text-browser reader's review)
    title = "Reply not posted — My first lisp — Greddit"
    assert f"<title>{title}</title>" in refused.text or f'data-document-title="{title}"' in refused.text
    form = refused.text[refused.text.index('<form class="genui-reply"') :]
    assert '<p id="genui-form-error" class="genui-form-error">Your reply was not posted: a name is 1 to 32' in form
    assert 'value="Ada Lovelace"' in form and ">typed\nhere</textarea>" in form
    assert refused.text.count(">kept</p>") == 1  # the post stored before, once: in place or below, not both
    if headers:  # the newest version is shown, whichever the form was on: the address bar says which
        assert refused.headers["hx-replace-url"] == THREAD
    stored = client.app.state.pages.store.posts("forum", THREAD.removeprefix("/forum"))  # type: ignore[attr-defined]
    assert [post.text for post in stored] == ["kept"]


def test_a_routes_reply_form_says_its_own_words(client_factory: ClientFactory, tmp_path: Path) -> None:
    """A recipe site's form to send a recipe read "Replies from readers", "Reply", "Post reply", and nothing could
    say otherwise (a hackathon team's walkthrough)."""
    root = tmp_path / "forum"
    shutil.copytree(SITES_DIR / "forum", root)
    toml = root / "site.toml"
    words = 'reply_form = { heading = "Recipes from readers", text = "Your recipe", button = "Send it" }'
    toml.write_text(toml.read_text().replace("posts = true", f"posts = true\n{words}", 1))
    client = client_factory([load_site(root)], FakeEngine())
    page = client.get("/r/hacking/My_first_lisp").text
    form = page[page.index('<section id="genui-posts"') :]
    assert "<h2>Recipes from readers</h2>" in form and "<label>Your recipe <textarea" in form
    assert '<button type="submit">Send it</button>' in form and "<label>Name <input" in form  # the rest as they were


POSTED = re.compile(
    r'<li class="genui-post" id="post-(\d+)"><p class="genui-post-meta"><b dir="auto">([^<]*)</b> · '
    r'<a class="genui-post-time" href="#post-(\d+)"><time datetime="([^"]+)">([^<]+)</time></a></p>'
)


def test_a_readers_post_says_when_it_was_made_and_links_to_itself(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Posts had no time and no address of their own (a forum user's review): listed below the thread while they wait,
    and in place with their replies, each has its id as a place on the page, and a time in UTC that links to it."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    engine.hold = threading.Event()  # its replies are under way: the first version lists it below the thread
    sent = time.time()
    assert client.post(THREAD, data={"user": "ada", "text": "when?"}, follow_redirects=False).status_code == 303
    waiting = client.get(THREAD + "?v=1").text
    ((number, user, link, stamp, shown),) = POSTED.findall(waiting)
    assert user == "ada" and link == number and '<ol class="genui-postlist">' in waiting  # the list below
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(when.timestamp() - sent) < 5 and shown == when.strftime("%Y-%m-%d %H:%M UTC")
    engine.hold.set()
    assert eventually(lambda: not pages_of(client).busy())
    thread = client.get(THREAD).text
    assert "Welcome, ada!" in thread and POSTED.findall(thread) == [
        (number, user, link, stamp, shown)
    ]  # in place now, once, the same
    assert '<ol class="genui-postlist genui-inline">' in thread and thread.count(f'id="post-{number}"') == 1


def test_a_reply_form_sent_again_after_anothers_post_stores_its_post_once(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A resend after a lost answer, once someone else had posted: stored twice (a forum user's review)."""
    client = client_factory(all_sites, FakeEngine())
    thread = visit(client, THREAD).text
    token = re.search(r'<input type="hidden" name="sent" value="([A-Za-z0-9_-]{16,})">', thread)
    assert token is not None
    form = {"user": "ada", "text": "sent once", "sent": token[1]}
    assert client.post(THREAD, data=form, follow_redirects=False).status_code == 303
    assert client.post(THREAD, data={"user": "bob", "text": "between"}, follow_redirects=False).status_code == 303
    assert client.post(THREAD, data=form, follow_redirects=False).status_code == 303  # its answer was lost: again
    posts = pages_of(client).store.posts("forum", "/r/hacking/My_first_lisp")
    assert [post.text for post in posts] == ["sent once", "between"]
    again = visit(client, THREAD).text  # the form shown next has a token of its own
    assert token[1] not in again and 'name="sent"' in again


@pytest.mark.parametrize(
    ("text", "blocks"),
    [
        ("No quote here.\n> but not at the start", [(False, "No quote here."), (True, "but not at the start")]),
        ("> one\n>two\n>\n> three\nMine.", [(True, "one\ntwo\n\nthree"), (False, "Mine.")]),
        ("Only mine.", [(False, "Only mine.")]),
        (">> nested\n", [(True, "> nested")]),
        ("a > b", [(False, "a > b")]),
        (">>> 1 + 1\n2", [(False, ">>> 1 + 1\n2")]),  # a Python prompt pasted
    ],
)
def test_a_posts_lines_that_start_with_a_greater_than_sign_are_its_quotes(
    text: str, blocks: list[tuple[bool, str]]
) -> None:
    from genui.shell import post_blocks

    assert post_blocks(text) == blocks


def test_a_quote_in_a_post_is_shown_set_off_and_escaped_and_the_model_reads_it_as_written(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    visit(client, THREAD)
    text = "> the <b>REPL</b> & macros\nWhy so?"
    response = client.post(THREAD, data={"user": "ada", "text": text}, headers=HTMX)
    assert "Welcome, ada!" in ws_messages(client, live_url(response.text))[-1]
    shown = page_html(client.get(THREAD).text)
    assert (
        '<div class="genui-post-text"><blockquote class="genui-quoted" dir="auto">the &lt;b&gt;REPL&lt;/b&gt; &amp;'
        ' macros</blockquote><p dir="auto">Why so?</p></div>'
    ) in shown
    (edit,) = engine.infills
    assert "&gt; the &lt;b&gt;REPL&lt;/b&gt; & macros\nWhy so?" in edit.generation.prompt


def test_the_quote_buttons_hint_on_a_site_in_another_language_is_plain_text(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """genui's English on a French site is marked lang="en" in a span, which in the button's attribute ended it early:
    the button read 'Select words…">Quote the selection' (a review)."""
    from dataclasses import replace

    sites = [replace(site, lang="fr") if site.name == "forum" else site for site in all_sites]
    client = client_factory(sites, FakeEngine())
    shown = visit(client, THREAD).text
    hint = 'data-genui-hint="Select words in the thread, then quote them in your reply"'
    assert hint in shown and '<span lang="en">Quote the selection</span></button>' in shown


def answered_thread(db: Path, *others: str) -> str:
    """THREAD written, with ada's post answered in place, in the page cache at ``db`` (and ``others`` written); its
    HTML as served."""
    with TestClient(create_app(example_sites(), FakeEngine(), db_path=db)) as client:
        visit(client, THREAD)
        for other in others:
            visit(client, other)
        response = client.post(THREAD, data={"user": "ada", "text": "Macros?"}, headers=HTMX)
        ws_messages(client, live_url(response.text))
        return page_html(client.get(THREAD).text)


def edited_sites(tmp_path: Path) -> list[Site]:
    """The example sites with the forum's brief edited: every forum route's version changes."""
    sites_dir = tmp_path / "sites"
    shutil.copytree(SITES_DIR, sites_dir)
    toml = sites_dir / "forum" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("A friendly forum", "A forum"), encoding="utf-8")
    return [load_site(sites_dir / name) for name in ("forum", "os", "wiki")]


def test_a_threads_conversation_is_carried_to_an_edited_site_and_to_a_new_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A thread is stored under its route's version and the model: an edit of the forum's brief, or a new model,
    wrote every thread with readers' posts again whole, their replies gone and the posts listed below it unanswered
    (a forum host's review). The thread with posts is carried over as it was; one without is written anew."""
    db = tmp_path / "pages.sqlite3"
    conversation = answered_thread(db, "/forum/r/hacking/Quiet")
    assert "Welcome, ada!" in conversation
    edited = edited_sites(tmp_path)
    for engine in (FakeEngine(), FakeEngine(model_id="another-model")):
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="genui"),
            TestClient(create_app(edited, engine, db_path=db)) as client,
        ):
            shown = client.get(THREAD).text
            assert page_html(shown) == conversation and 'aria-current="page">2</a>' in shown
            assert "No replies from readers yet" not in shown and engine.calls == [] and engine.infills == []
            assert page_html(visit(client, "/forum/r/hacking/Quiet").text) and len(engine.calls) == 1
        (said,) = [record.getMessage() for record in caplog.records if "carried" in record.getMessage()]
        assert said.startswith("forum/r/hacking/My_first_lisp: its 2 versions, with readers' posts, carried from")
    assert "model fake-model to this model" in said
    with contextlib.closing(sqlite3.connect(db)) as read:
        keys = read.execute(
            "SELECT model, COUNT(*) FROM pages WHERE path = '/r/hacking/My_first_lisp' GROUP BY model, template"
        ).fetchall()
    # the first config's versions stay (to prune), each copy beside them
    assert sorted(keys) == [("another-model", 2), ("fake-model", 2), ("fake-model", 2)]


@pytest.mark.parametrize("headers", [HTMX, {}])
def test_regenerating_a_thread_writes_its_thread_anew_and_keeps_its_conversation(
    client_factory: ClientFactory, all_sites: list[Site], headers: dict[str, str]
) -> None:
    """Regenerate wrote a thread with readers' replies whole again: every post listed below it, none answered, the
    replies gone from the newest version (a forum host's review). The thread before its first post is written anew,
    as its first version was, and the posts and replies follow as they were."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    first = page_html(visit(client, THREAD).text)
    response = client.post(THREAD, data={"user": "ada", "text": "Macros?"}, headers=HTMX)
    ws_messages(client, live_url(response.text))
    conversation = page_html(client.get(THREAD).text)
    assert conversation.startswith(first) and "Welcome, ada!" in conversation
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    regenerated = client.post("/_genui/regenerate", data=form, headers=headers, follow_redirects=False)
    if headers:
        assert conversation[len(first) :] in regenerated.text  # shown below the thread as it is written anew
        ws_messages(client, live_url(regenerated.text))
    else:
        assert regenerated.status_code == 303 and regenerated.headers["location"] == THREAD + "?v=3"
    third = client.get(THREAD)
    assert 'aria-current="page">3</a>' in third.text
    head = page_html(third.text)[: -len(conversation) + len(first)]
    assert head != first and "written with seed 2" in head  # the thread anew
    assert page_html(third.text) == head + conversation[len(first) :]  # its conversation as it was
    assert "No replies from readers yet" not in third.text and "Macros?" not in third.text.split("</main>")[1]
    assert "Macros?" not in engine.calls[-1].prompt and engine.calls[-1].seed == 2  # written as its first version
    assert len(engine.infills) == 1  # the replies once, no more


def test_variations_of_a_thread_vary_its_thread_and_the_one_kept_keeps_its_conversation_as_it_is_then(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    """Variations of a thread with readers' replies in place were whole pages written with the posts in their prompt:
    the one kept listed every post below it, none answered (session 70's note). They are the thread before its first
    post, as Regenerate writes it; the one kept gets the newest version's conversation after it, replies written
    between the variations and the keep included."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    origin = {"Origin": "http://testserver"}
    first = page_html(visit(client, THREAD).text)
    reply = client.post(THREAD, data={"user": "ada", "text": "Macros?"}, headers={**HTMX, **origin})
    ws_messages(client, live_url(reply.text))
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    candidates = client.post("/_genui/variations", data=form, headers=origin).text  # finished, nothing kept yet
    assert "Macros?" not in engine.variations[-1][0].prompt  # written as its first version, without the posts
    assert "posts and the replies to them follow the one kept, as they are now" in candidates
    assert "Welcome, ada!" not in candidates and "(variation 2)</h1>" in candidates
    reply = client.post(THREAD, data={"user": "bob", "text": "Hygiene?"}, headers={**HTMX, **origin})
    ws_messages(client, live_url(reply.text))  # version 3: bob's post answered in place, after the variations
    conversation = page_html(client.get(THREAD).text)[len(first) :]
    assert "Welcome, ada!" in conversation and "Welcome, bob!" in conversation
    keep = re.search(r'<form class="genui-keep"(.*?)value="2">', candidates, re.S)
    assert keep is not None
    fields = dict(re.findall(r'name="([a-z]+)" value="([^"]*)"', keep.group(0)))
    assert client.post("/_genui/keep", data=fields, headers=origin, follow_redirects=False).status_code == 303
    kept = client.get(THREAD).text
    assert 'aria-current="page">4</a>' in kept
    shown = page_html(kept)
    assert "(variation 2)</h1>" in shown and shown.endswith(conversation)  # the thread varied, its conversation kept
    assert "No replies from readers yet" not in kept and "genui-in-place" not in kept  # nothing waits to be answered
    assert "Macros?" not in kept.split("</main>")[1] and len(engine.infills) == 2  # no post listed below, none again
    # A set kept after the thread was forgotten (genui cache forget, beside the server) has no conversation to keep.
    candidates = client.post("/_genui/variations", data=form, headers=origin).text
    keep = re.search(r'<form class="genui-keep"(.*?)value="1">', candidates, re.S)
    assert keep is not None
    operator = Store(tmp_path / "db0.sqlite3")
    try:
        assert operator.forget("forum", "/r/hacking/My_first_lisp") == 4
    finally:
        operator.close()
    fields = dict(re.findall(r'name="([a-z]+)" value="([^"]*)"', keep.group(0)))
    refused = client.post("/_genui/keep", data=fields, headers=origin, follow_redirects=False)
    assert refused.status_code == 409 and "ask for new variations" in refused.text


def test_variations_asked_while_a_threads_first_replies_are_written_are_not_kept_over_its_conversation(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Variations asked for while a thread's first post's replies are written in place are whole pages (no
    conversation yet); kept once the replies landed, the conversation was dropped: the post listed below the thread,
    never answered, as its replied covered it (a review of session 71)."""
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    origin = {"Origin": "http://testserver"}
    visit(client, THREAD)
    engine.delay = 0.05  # the replies are still being written as the variations are asked for
    reply = client.post(THREAD, data={"user": "ada", "text": "Macros?"}, headers={**HTMX, **origin})
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    candidates = client.post("/_genui/variations", data=form, headers=origin).text
    ws_messages(client, live_url(reply.text))  # version 2: ada's post answered in place
    keep = re.search(r'<form class="genui-keep"(.*?)value="2">', candidates, re.S)
    assert keep is not None
    fields = dict(re.findall(r'name="([a-z]+)" value="([^"]*)"', keep.group(0)))
    refused = client.post("/_genui/keep", data=fields, headers=origin, follow_redirects=False)
    assert refused.status_code == 409 and "ask for new variations" in refused.text
    assert "Welcome, ada!" in page_html(client.get(THREAD).text)  # the conversation stays the newest version


@pytest.mark.parametrize("how", ["a visit", "a plain reply", "a reply while the model loads"])
def test_a_post_waiting_on_a_thread_carried_to_a_new_model_is_answered_at_once(tmp_path: Path, how: str) -> None:
    """A thread carried to a new model (a genui upgrade's adapter) at its first visit kept its conversation, but a post
    waiting for replies (its run cut short by a restart), or one sent from a page opened before the upgrade without
    scripts, was shown unanswered and no run started: the carrying visit looked for the newest version before the
    carry (an operator's upgrade review). Now that visit answers it in place; a reply posted while the model loads
    is stored, not refused as if the thread were not written."""
    db = tmp_path / "pages.sqlite3"
    conversation = answered_thread(db)
    if how == "a visit":  # stored, its replies' run cut short by the restart into the new release
        Store(db).add_post("forum", "/r/hacking/My_first_lisp", "bob", "And hygiene?")
    engine = FakeEngine(model_id="another-model")
    if how == "a reply while the model loads":
        gate = threading.Event()

        def load() -> FakeEngine:
            gate.wait(10)
            return engine

        app = create_app(example_sites(), db_path=db, load_engine=load, identify_model=lambda: engine.model_id)
    else:
        gate = None
        app = create_app(example_sites(), engine, db_path=db)
    with TestClient(app) as client:
        if how != "a visit":
            posted = client.post(THREAD, data={"user": "bob", "text": "And hygiene?"}, follow_redirects=False)
            assert posted.status_code == 303
        if gate is not None:
            gate.set()
            eventually(lambda: client.get("/_genui/health").status_code == 200)
        shown = visit(client, THREAD).text
        assert engine.calls == [] and len(engine.infills) == 1  # the replies in place, not the thread whole
        assert page_html(shown).startswith(conversation) and "Welcome, bob!" in shown


def test_a_threads_regenerate_clicked_twice_is_one_run_and_one_that_stopped_says_so(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A thread's Regenerate writes in place (its conversation kept), which a second click, scripts off, was refused
    as a rewrite under way is (a 409 "being written right now" in place of the page, where a whole page's Regenerate
    is joined); and a run of it that stopped unwatched said "The rewrite of a section stopped"."""
    engine = FakeEngine(delay=0.02)
    client = client_factory(all_sites, engine, follow_redirects=False, app_options={"unclaimed_s": 0.2})
    visit(client, THREAD, follow_redirects=True)
    response = client.post(THREAD, data={"user": "ada", "text": "Macros?"}, headers=HTMX)
    ws_messages(client, live_url(response.text))
    form = {"site": "forum", "url": "/r/hacking/My_first_lisp"}
    answers: list[int | str | None] = []

    def click() -> None:
        answer = client.post("/_genui/regenerate", data=form)
        answers.extend([answer.status_code, answer.headers.get("location")])

    written = len(engine.calls)  # the thread's first version
    first = threading.Thread(target=click)
    first.start()
    assert eventually(lambda: len(engine.calls) == written + 1)
    click()  # the second click, while the first one's run is under way
    first.join()
    assert answers == [303, THREAD + "?v=3"] * 2 and len(engine.calls) == written + 1
    engine.hold = threading.Event()  # a run of it whose stream never connects: it stops unfinished
    url = live_url(client.post("/_genui/regenerate", data=form, headers=HTMX).text)
    wait_until(lambda: client.get("/_genui/health").json()["busy"] is False)
    said = "The thread&#39;s new version stopped before it was finished: nothing changed."
    response = client.get(url.replace("/_genui/ws?", "/_genui/wait?"))
    assert response.status_code == 404 and said in response.text and "rewrite of a section" not in response.text


def test_a_thread_carried_while_another_process_holds_the_cache_is_asked_again_not_written_whole(
    tmp_path: Path,
) -> None:
    """The carry does not wait for the cache (the event loop's); busy, it left the thread to be written whole as the
    new key's version 1, which no later visit carries to any more: the conversation was lost to the edited site."""
    db = tmp_path / "pages.sqlite3"
    conversation = answered_thread(db)
    engine = FakeEngine()
    edited = edited_sites(tmp_path)
    with TestClient(create_app(edited, engine, db_path=db)) as client:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # another process writing (a second server, a prune)
            busy = client.get(THREAD)
            other.execute("COMMIT")
        assert busy.status_code == 503 and "Retry-After" in busy.headers and engine.calls == []
        assert page_html(client.get(THREAD).text) == conversation and engine.calls == []


NEWS = re.compile(r'data-genui-news="([^"]+)"')


def news_url(text: str) -> str:
    """Where a thread's page asks whether readers posted since it was shown."""
    match = NEWS.search(text)
    assert match is not None, text[:300]
    return match.group(1).replace("&amp;", "&")


def test_a_thread_says_how_many_posts_were_made_since_it_was_shown_and_links_the_first(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = client_factory(all_sites, FakeEngine())
    shown = visit(client, THREAD).text
    asked = news_url(shown)
    assert asked.endswith("after=0") and client.get(asked).status_code == 204  # nothing since
    store = pages_of(client).store
    first = store.add_post("forum", "/r/hacking/My_first_lisp", "ada", "One")
    store.add_post("forum", "/r/hacking/My_first_lisp", "bea", "Two")
    answer = client.get(asked)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    assert "2 posts were made to this thread since it was shown." in answer.text
    assert f'href="/forum/r/hacking/My_first_lisp#post-{first.id}"' in answer.text
    assert 'data-genui-count="2"' in answer.text and 'hx-get="/forum/r/hacking/My_first_lisp#post-' in answer.text
    # The thread shown again names the posts it shows: nothing is new to it.
    again = news_url(visit(client, THREAD).text)
    assert again != asked and client.get(again).status_code == 204


def test_one_post_since_is_said_in_the_sites_words_and_forms(client_factory: ClientFactory, tmp_path: Path) -> None:
    folder = tmp_path / "forum"
    shutil.copytree(SITES_DIR / "forum", folder)
    toml = folder / "site.toml"
    toml.write_text(
        toml.read_text().replace(
            "[[routes]]", '[words]\nnew_posts = { one = "{n} nouveau", other = "{n} nouveaux" }\n\n[[routes]]', 1
        )
    )
    client = client_factory([load_site(folder)], FakeEngine())
    asked = news_url(visit(client, "/r/hacking/My_first_lisp").text)
    pages_of(client).store.add_post("forum", "/r/hacking/My_first_lisp", "ada", "Un")
    assert ">1 nouveau <a " in client.get(asked).text


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("site=forum&url=/r/hacking/My_first_lisp&after=x", 400),
        ("site=forum&url=/r/hacking/My_first_lisp&after=", 400),
        ("site=forum&url=/r/hacking/My_first_lisp&after=99999999999999999999", 400),
        ("site=forum&url=/r/hacking/My_first_lisp", 400),
        ("site=wiki&url=/Lisp&after=0", 404),  # a page of no thread
        ("site=nowhere&url=/r/hacking/My_first_lisp&after=0", 404),
        ("site=forum&url=/r/hacking/Never_written&after=0", 204),  # posts may come before its page: none here
    ],
)
def test_a_malformed_news_request_is_a_4xx(
    client_factory: ClientFactory, all_sites: list[Site], query: str, status: int
) -> None:
    assert client_factory(all_sites, FakeEngine()).get(f"/_genui/news?{query}").status_code == status


def test_the_replies_to_a_post_offer_no_stop_as_they_are_written_though_every_reader_leaves(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Stop closed the stream and said "Stopped." while the replies went on being written and stored (a review): a
    thread's replies to a reader's post have no Stop; its Regenerate, which a reader may stop, has one."""
    client = client_factory(all_sites, FakeEngine(delay=0.05))
    visit(client, THREAD)
    posted = client.post(THREAD, data={"user": "ada", "text": "Hello"}, headers=HTMX)
    assert "ws-connect" in posted.text and 'class="genui-stop"' not in posted.text
    ws_messages(client, live_url(posted.text))
    again = client.post("/_genui/regenerate", data={"site": "forum", "url": "/r/hacking/My_first_lisp"}, headers=HTMX)
    assert "ws-connect" in again.text and 'class="genui-stop"' in again.text
