"""One client may have only so many runs under way (genui serve --runs-per-client): one more is a 429 with
Retry-After, while other clients, and pages someone is already writing, are served as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import ClientFactory, FakeEngine, eventually, example_sites, pages_of, visit, ws_messages
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from test_app import HTMX, live_url
from test_replies import _failing_once

from genui.app import create_app
from genui.limits import PostRate, TooManyPosts
from genui.pages import Pages
from genui.sites import Site

THREAD = "/forum/r/hacking/My_first_lisp"
THREAD_PATH = "/r/hacking/My_first_lisp"
ORIGIN = {"Origin": "http://testserver"}


class AsClient:
    """Sets the ASGI client address from an ``X-As`` header: the tests' stand-in for visitors on other machines (or
    for uvicorn's proxy-headers middleware, which does the same from X-Forwarded-For)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            address = dict(scope["headers"]).get(b"x-as")
            if address:
                scope = {**scope, "client": (address.decode(), 1234)}
        await self.app(scope, receive, send)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, FakeEngine, Pages]]:
    failures = [1]  # the first reply's run fails, which leaves its post waiting
    # Slow enough that a page's run is still under way when the next request comes (about 3 s).
    engine = FakeEngine(delay=0.2, region=_failing_once(failures))
    db = tmp_path / "db.sqlite3"
    app = create_app(example_sites(), engine, db_path=db, runs_per_client=2, unclaimed_s=5.0)
    with TestClient(AsClient(app)) as client:
        yield client, engine, app.state.pages


def as_client(address: str, htmx: bool = True) -> dict[str, str]:
    return {"X-As": address, **(HTMX if htmx else {})}


def test_a_client_at_its_limit_gets_a_429_that_asks_again_and_others_are_served(
    served: tuple[TestClient, FakeEngine, Pages],
) -> None:
    client, engine, pages = served
    first = client.get("/wiki/Lisp", headers=as_client("10.0.0.1"))
    second = client.get("/wiki/Unix", headers=as_client("10.0.0.1"))
    assert first.status_code == second.status_code == 200 and "ws-connect" in second.text
    third = client.get("/wiki/Hacker", headers=as_client("10.0.0.1", htmx=False))
    assert third.status_code == 429 and third.headers["retry-after"] == "5"
    assert (
        "2 pages are being written for your address (or network) already. This page tries again in 5 s." in third.text
    )
    assert 'data-genui-retry="5" data-genui-retry-url="/wiki/Hacker"' in third.text  # asks again by itself
    # Joining a page someone is writing costs nothing; another client starts pages of its own.
    assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200
    assert client.get("/wiki/Hacker", headers=as_client("10.0.0.2")).status_code == 200
    assert len(engine.calls) == 3
    # Once one of its pages is written, the first client may ask for another.
    ws_messages(client, live_url(first.text))
    assert eventually(lambda: client.get("/wiki/Turing_machine", headers=as_client("10.0.0.1")).status_code == 200)


def test_a_click_away_from_a_page_being_written_is_not_refused_for_that_page(
    served: tuple[TestClient, FakeEngine, Pages],
) -> None:
    """The page on screen still counted until the click's answer replaced it, so --runs-per-client N let a visitor
    click on from N - 1 pages being written (1: every other click refused, a workshop host's review)."""
    client, engine, pages = served
    assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200
    assert client.get("/wiki/Unix", headers=as_client("10.0.0.1")).status_code == 200  # two under way: the limit
    leaving = {**as_client("10.0.0.1"), "HX-Current-URL": "http://testserver/wiki/Unix"}
    assert client.head("/wiki/Hacker", headers=leaving).status_code == 429  # a look starts and ends nothing
    unix = next(run for run in pages._running.values() if run.key.path == "/Unix")
    assert client.get("/wiki/Hacker", headers=leaving).status_code == 200  # Unix leaves the screen as it lands
    assert len(engine.calls) == 3
    assert unix.finished and unix.error is not None  # ended as it is left: never a run over the limit, whatever
    # the header says (a review: a client holding its page's socket open had one run more)
    # not so for a page it does not leave: a plain load (a new tab), or a click from a page no run writes
    assert client.get("/wiki/Turing_machine", headers=as_client("10.0.0.1", htmx=False)).status_code == 429
    elsewhere = {**as_client("10.0.0.1"), "HX-Current-URL": "http://testserver/wiki/Vim"}
    assert client.get("/wiki/Emacs", headers=elsewhere).status_code == 429


def test_a_click_away_from_a_page_another_visitor_watches_does_not_end_it(
    served: tuple[TestClient, FakeEngine, Pages],
) -> None:
    """A client at its limit, its stream of the page never opened, cancelled that page as it clicked away, while
    another visitor watched it land (an adversarial client's review)."""
    client, engine, pages = served
    assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200
    unix = client.get("/wiki/Unix", headers=as_client("10.0.0.1"))  # two under way: the limit
    leaving = {**as_client("10.0.0.1"), "HX-Current-URL": "http://testserver/wiki/Unix"}
    with client.websocket_connect(live_url(unix.text), headers=as_client("10.0.0.2")) as watching:
        watching.receive_text()  # another visitor watches Unix being written
        assert client.get("/wiki/Hacker", headers=leaving).status_code == 429  # Unix is theirs now too: it stays
        run = next(run for run in pages._running.values() if run.key.path == "/Unix")
        assert not run.finished and len(engine.calls) == 2


def test_a_reply_at_the_limit_is_refused_before_it_is_stored(served: tuple[TestClient, FakeEngine, Pages]) -> None:
    client, engine, pages = served
    visit(client, THREAD)
    for title in ("Lisp", "Unix"):
        assert client.get(f"/wiki/{title}", headers=as_client("10.0.0.1")).status_code == 200
    form = {"user": "ada", "text": "one too many"}
    refused = client.post(THREAD, data=form, headers={**as_client("10.0.0.1"), **ORIGIN})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
    assert (
        "Your reply was not posted: 2 pages are being written for your address (or network) already. Try again in 5 s."
        in refused.text
    )
    assert ">one too many</textarea>" in refused.text and 'value="ada"' in refused.text  # what was typed is kept
    assert "data-genui-retry" not in refused.text  # a POST is not asked again by itself
    assert pages.store.posts("forum", "/r/hacking/My_first_lisp") == []
    posted = client.post(THREAD, data=form, headers={**as_client("10.0.0.2"), **ORIGIN})
    assert posted.status_code == 200 and "one too many" in posted.text
    # A plain post to a thread not written yet starts no run (the 303's GET does): it is stored, limit or not.
    other = "/forum/r/hacking/Not_written_yet"
    plain = client.post(other, data=form, headers={"X-As": "10.0.0.1", **ORIGIN}, follow_redirects=False)
    assert plain.status_code == 303 and len(pages.store.posts("forum", "/r/hacking/Not_written_yet")) == 1


def test_a_thread_visited_at_the_limit_is_shown_as_stored_and_its_waiting_post_answered_later(
    served: tuple[TestClient, FakeEngine, Pages],
) -> None:
    client, engine, pages = served
    visit(client, THREAD)
    posted = client.post(THREAD, data={"user": "ada", "text": "hi there"}, headers=ORIGIN, follow_redirects=False)
    assert posted.status_code == 303
    assert eventually(lambda: not pages.busy())  # the replies' run failed: the post waits
    for title in ("Lisp", "Unix"):
        assert client.get(f"/wiki/{title}", headers=as_client("10.0.0.1")).status_code == 200
    shown = client.get(THREAD, headers=as_client("10.0.0.1"))  # at its limit: the thread as stored, the post below
    assert shown.status_code == 200 and "genui-in-place" not in shown.text and "hi there" in shown.text
    # Those two runs go first. Once they are over, the next visit starts the replies.
    assert eventually(lambda: not pages.busy())
    answering = client.get(THREAD, headers=as_client("10.0.0.1"))
    assert "genui-in-place" in answering.text and "Welcome, ada!" in ws_messages(client, live_url(answering.text))[-1]


def test_a_reply_sent_again_at_the_limit_is_answered_as_its_first_copy_not_refused(tmp_path: Path) -> None:
    """A double click, or a resend after a lost answer, is the post already stored: not a new run that the client's
    limit could refuse. It gets the first copy's answer, and watches the run its first copy started if it is going."""
    engine = FakeEngine()
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3", runs_per_client=1)
    store = app.state.pages.store
    with TestClient(AsClient(app)) as client:
        visit(client, THREAD, headers={"X-As": "10.0.0.9"})
        ada, form = {**as_client("10.0.0.1"), **ORIGIN}, {"user": "ada", "text": "sent twice"}
        first = client.post(THREAD, data=form, headers=ada)
        assert "Welcome, ada!" in ws_messages(client, live_url(first.text))[-1]
        assert eventually(lambda: not app.state.pages.busy())  # the first copy's replies are written
        engine.delay = 0.3  # a page that takes a few seconds: the client's one run while it is sent again
        assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200
        again = client.post(THREAD, data=form, headers=ada)
        assert again.status_code == 200 and "sent twice" in again.text and "Welcome, ada!" in again.text
        plain = client.post(THREAD, data=form, headers={"X-As": "10.0.0.1", **ORIGIN}, follow_redirects=False)
        assert plain.status_code == 303 and plain.headers["location"] == THREAD
        new = client.post(THREAD, data={"user": "ada", "text": "a new post"}, headers=ada)
        assert new.status_code == 429 and ">a new post</textarea>" in new.text  # a new post still counts
        assert [(post.user, post.text) for post in store.posts("forum", "/r/hacking/My_first_lisp")] == [
            ("ada", "sent twice")
        ]
        assert len(engine.infills) == 1
        # A thread not written yet: the first copy starts writing it whole (the client's one run); the resend joins.
        bo, unwritten = {**as_client("10.0.0.2"), **ORIGIN}, "/forum/r/hacking/Not_written_yet"
        started = client.post(unwritten, data={"user": "bo", "text": "first!"}, headers=bo)
        assert started.status_code == 200 and "ws-connect" in started.text
        joined = client.post(unwritten, data={"user": "bo", "text": "first!"}, headers=bo)
        assert joined.status_code == 200 and live_url(joined.text) == live_url(started.text)
        assert len(store.posts("forum", "/r/hacking/Not_written_yet")) == 1


def test_a_reply_sent_again_after_its_run_failed_shows_the_stored_post_at_the_limit(tmp_path: Path) -> None:
    """The first copy's replies failed, so the resend would start their run again, but the client is at its limit:
    the post is stored, so the thread shows it waiting (no 429, no form asking to type it again)."""
    failures = [1]
    engine = FakeEngine(region=_failing_once(failures))
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3", runs_per_client=1)
    store = app.state.pages.store
    with TestClient(AsClient(app)) as client:
        visit(client, THREAD, headers={"X-As": "10.0.0.9"})
        ada, form = {**as_client("10.0.0.1"), **ORIGIN}, {"user": "ada", "text": "sent twice"}
        client.post(THREAD, data=form, headers=ada)
        assert eventually(lambda: not failures and not app.state.pages.busy())  # the first copy's run failed
        engine.delay = 0.3
        assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200  # the client's one run
        again = client.post(THREAD, data=form, headers=ada)
        assert again.status_code == 200 and "sent twice" in again.text and ">sent twice</textarea>" not in again.text
        plain = client.post(THREAD, data=form, headers={"X-As": "10.0.0.1", **ORIGIN}, follow_redirects=False)
        assert plain.status_code == 303 and plain.headers["location"] == THREAD
        assert [(post.user, post.text) for post in store.posts("forum", "/r/hacking/My_first_lisp")] == [
            ("ada", "sent twice")
        ]


def test_a_head_request_starts_nothing_and_counts_against_no_limit(
    served: tuple[TestClient, FakeEngine, Pages],
) -> None:
    """A HEAD is a crawler's or a link checker's look: the status a GET would get, and no page written for it."""
    client, engine, pages = served
    for title in ("Crawled", "Checked", "Looked_at"):
        assert client.head(f"/wiki/{title}", headers=as_client("10.0.0.1")).status_code == 200
    # the wait URL (where a page without script waits for its run) writes nothing for a HEAD either
    waited = client.head("/_genui/wait?site=wiki&url=/Never_seen", headers=as_client("10.0.0.1"))
    assert waited.status_code == 200 and waited.headers["cache-control"] == "no-store"
    assert engine.calls == [] and not pages.busy()
    assert client.head("/wiki/Crawled?v=2", headers=as_client("10.0.0.1")).status_code == 404
    visit(client, "/wiki/Lisp")
    stored = client.head("/wiki/Lisp", headers=as_client("10.0.0.1"))
    assert stored.status_code == 200 and stored.headers["content-type"].startswith("text/html")
    moved = client.head("/_genui/wait?site=wiki&url=/Lisp", headers=as_client("10.0.0.1"), follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == "/wiki/Lisp"  # as a GET of it answers
    # its limit untouched: the client's next two pages are written
    for title in ("Unix", "Hacker"):
        assert client.get(f"/wiki/{title}", headers=as_client("10.0.0.1")).status_code == 200
    # and at its limit, a HEAD gets the GET's 429, as a URL too long for the model gets its 400
    assert client.head("/wiki/Turing_machine", headers=as_client("10.0.0.1")).status_code == 429
    assert client.head("/wiki/" + "Long_" * 2000, headers=as_client("10.0.0.3")).status_code == 400
    assert len(engine.calls) == 3


def test_a_reply_to_a_thread_another_client_is_writing_joins_its_run_at_the_limit(tmp_path: Path) -> None:
    """Joining a run someone else started costs nothing, a reply's too: it is stored, and waits for the next run."""
    engine = FakeEngine(delay=0.2)
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3", runs_per_client=1)
    store = app.state.pages.store
    with TestClient(AsClient(app)) as client:
        unwritten = "/forum/r/hacking/Being_written"
        assert client.get(unwritten, headers=as_client("10.0.0.2")).status_code == 200  # bo's run writes it
        assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200  # ada at her limit
        form, ada = {"user": "ada", "text": "me too"}, {**as_client("10.0.0.1"), **ORIGIN}
        joined = client.post(unwritten, data=form, headers=ada)
        assert joined.status_code == 200 and "ws-connect" in joined.text
        assert [post.text for post in store.posts("forum", "/r/hacking/Being_written")] == ["me too"]
        assert len(engine.calls) == 2


def test_a_reply_sent_again_to_a_thread_not_written_says_it_is_saved_at_the_limit(tmp_path: Path) -> None:
    """The first copy started writing the thread, which nobody watched; the resend would start it again, but the
    client is at its limit: the post is stored, so the answer says so, with nothing left to send again."""
    engine = FakeEngine(delay=0.1)
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3", runs_per_client=1, unclaimed_s=0.2)
    store, pages = app.state.pages.store, app.state.pages
    with TestClient(AsClient(app)) as client:
        unwritten, ada = "/forum/r/hacking/Brand_new", {**as_client("10.0.0.1"), **ORIGIN}
        form = {"user": "ada", "text": "first words"}
        assert client.post(unwritten, data=form, headers=ada).status_code == 200  # its run is never watched
        assert eventually(lambda: engine.cancelled == 1 and not pages.busy())
        assert client.get("/wiki/Lisp", headers=as_client("10.0.0.1")).status_code == 200  # the client's one run
        again = client.post(unwritten, data=form, headers=ada)
        assert again.status_code == 429 and again.headers["retry-after"] == "5"
        assert "Your reply is saved, and waits for the thread to be written." in again.text
        assert "first words" in again.text and ">first words</textarea>" not in again.text
        assert [post.text for post in store.posts("forum", "/r/hacking/Brand_new")] == ["first words"]


def test_a_client_posting_past_its_limit_a_minute_gets_a_429_that_keeps_its_text(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Nothing limited posts: one client stored 300 in 1.6 s (each an fsynced write, each loaded and sent again with
    every view of the thread). A post sent again is no new post, and counts nothing."""
    client = client_factory(all_sites, FakeEngine(), app_options={"posts_per_minute": 3})
    visit(client, THREAD)
    for number in range(3):
        posted = client.post(THREAD, data={"user": "ada", "text": f"post {number}"}, follow_redirects=False)
        assert posted.status_code == 303, posted.text
    again = client.post(THREAD, data={"user": "ada", "text": "post 2"}, follow_redirects=False)
    assert again.status_code == 303  # the last one sent again: answered as it was
    refused = client.post(THREAD, data={"user": "ada", "text": "one too many"}, headers=HTMX, follow_redirects=False)
    assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert (
        "Your reply was not posted: 3 replies were posted from your address (or network) in the last minute, the most"
        " it may post."
        in refused.text
        and ">one too many</textarea>" in refused.text
    )
    assert [post.text for post in pages_of(client).store.posts("forum", THREAD_PATH)] == ["post 0", "post 1", "post 2"]


def test_the_post_limit_counts_the_last_minute_of_each_client() -> None:
    now = [0.0]
    rate = PostRate(2, clock=lambda: now[0])
    rate.posted("a")
    now[0] = 30.0
    rate.posted("a")
    rate.check("b")  # another client
    rate.check(None)  # genui itself
    with pytest.raises(TooManyPosts) as refused:
        rate.check("a")
    assert refused.value.headers == {"Retry-After": "30"}  # when the first leaves the window
    now[0] = 60.5
    rate.check("a")
    PostRate(0).check("a")  # no limit


def test_the_addresses_of_one_ipv6_64_are_one_client_and_ipv4_ones_each_their_own(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """One host holds a whole /64 and may take any address in it: five of them had five clients' shares of
    --posts-per-minute and --runs-per-client (a security review)."""
    client = client_factory(all_sites, FakeEngine(), app_options={"posts_per_minute": 2})
    visit(client, THREAD)
    app = client.app

    def posted_from(host: str, text: str) -> int:
        other = TestClient(app, client=(host, 50000))  # no lifespan of its own: the app runs in `client`'s
        return other.post(THREAD, data={"user": "eve", "text": text}, follow_redirects=False).status_code

    answers = [posted_from(f"2001:db8:1:2::{n:x}", f"from {n}") for n in range(1, 5)]
    assert answers == [303, 303, 429, 429]
    assert posted_from("2001:db8:1:3::1", "another /64") == 303
    assert [posted_from(f"192.0.2.{n}", f"v4 {n}") for n in range(1, 4)] == [303, 303, 303]
    assert posted_from("::ffff:192.0.2.1", "mapped") == 303  # 192.0.2.1's second
    assert posted_from("::ffff:192.0.2.1", "mapped again") == 429


def test_the_addresses_of_the_servers_own_ipv6_link_are_each_their_own_client(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """Every device on a LAN has an address in one /64 (and a link-local one): a workshop's laptops, reaching the
    server at its own address in that /64, shared one client's share (a workshop host's review)."""
    client = client_factory(all_sites, FakeEngine(), app_options={"posts_per_minute": 1})
    visit(client, THREAD)
    app = client.app

    def posted_from(host: str, text: str, server: str = "[2001:db8:1:2::23]") -> int:
        other = TestClient(app, client=(host, 50000), base_url=f"http://{server}:8000")
        return other.post(THREAD, data={"user": "eve", "text": text}, follow_redirects=False).status_code

    assert [posted_from(f"2001:db8:1:2::{n:x}", f"lan {n}") for n in range(1, 4)] == [303, 303, 303]
    assert [posted_from(f"fe80::{n:x}", f"link {n}", "[fe80::23]") for n in range(1, 4)] == [303, 303, 303]
    assert posted_from("2001:db8:1:2::1", "again") == 429  # each its own share still
    # reached at another address (a proxy's, a public one), the /64 is one client as before
    assert posted_from("2001:db8:1:2::5", "five", "127.0.0.1") == 303
    assert posted_from("2001:db8:1:2::6", "six", "127.0.0.1") == 429


def test_a_click_away_from_a_thread_whose_replies_are_being_written_counts_them(tmp_path: Path) -> None:
    """A thread's replies go on with nobody watching: leaving the thread ends nothing, so its run is no run left
    (a review: the discount let a client have a second run under --runs-per-client 1)."""
    engine = FakeEngine(delay=0.2)
    app = create_app(example_sites(), engine, db_path=tmp_path / "db.sqlite3", runs_per_client=1, unclaimed_s=5.0)
    with TestClient(AsClient(app)) as client:
        visit(client, THREAD)  # written whole, by nobody's run once it is stored
        posted = client.post(THREAD, data={"user": "ada", "text": "hi"}, headers={**as_client("10.0.0.1"), **ORIGIN})
        assert posted.status_code == 200 and len(engine.infills) == 1  # the replies' run, this client's
        leaving = {**as_client("10.0.0.1"), "HX-Current-URL": f"http://testserver{THREAD}"}
        assert client.get("/forum/r/hacking", headers=leaving).status_code == 429
        assert len(engine.calls) == 1 and not any(run.finished for run in app.state.pages._clients)
