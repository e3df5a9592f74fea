from __future__ import annotations

import html
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import FakeEngine, example_sites, visit
from starlette.testclient import TestClient
from test_app import HTMX, live_url

import genui.errors
import genui.generation
import genui.store
from genui.app import create_app
from genui.store import (
    BUSY_TIMEOUT_S,
    MAX_POST,
    MAX_USER,
    SAME_POST_S,
    SCHEMA_VERSION,
    EarlierVersionsDeleted,
    NotAPageCache,
    PageKey,
    PostRejected,
    ReadPostDeleted,
    Store,
    StoredPage,
    VersionTaken,
    is_busy,
)

KEY = PageKey(site="wiki", path="/wiki/Hash_table", query="", model="model-a", template="t1")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "pages.sqlite3")
    yield store
    store.close()


def save(store: Store, key: PageKey = KEY, version: int = 1, html: str = "<h1>Hash table</h1>") -> StoredPage:
    return store.save_page(key, version, seed=version - 1, title="Hash table", html=html, seconds=0.5)


def test_a_miss_then_a_hit_after_saving(store: Store) -> None:
    assert store.page(KEY) is None
    save(store)
    page = store.page(KEY)
    assert page is not None and page.html == "<h1>Hash table</h1>" and page.version == 1 and page.seed == 0


def test_the_database_runs_in_wal_mode(tmp_path: Path, store: Store) -> None:
    with closing(sqlite3.connect(tmp_path / "pages.sqlite3")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # and a commit is synced before it returns (FULL, 2): a saved post survives a crash of the machine, not only of
    # the process (a connection's own setting, so read on the store's)
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_pages_survive_reopening(tmp_path: Path) -> None:
    first = Store(tmp_path / "db.sqlite3")
    first_page = save(first)
    first.close()
    second = Store(tmp_path / "db.sqlite3")
    page = second.page(KEY)
    assert page == first_page and (page.html, page.version, page.seed, page.title) == (
        "<h1>Hash table</h1>",
        1,
        0,
        "Hash table",
    )
    second.close()


@pytest.mark.parametrize(
    "changed",
    [{"model": "model-b"}, {"template": "t2"}, {"query": "q=x"}, {"posts": 7}, {"site": "forum"}, {"path": "/wiki/X"}],
)
def test_every_key_field_separates_pages(store: Store, changed: dict[str, object]) -> None:
    save(store)
    assert store.page(replace(KEY, **changed)) is None  # type: ignore[arg-type]


def test_versions_are_kept_and_the_newest_is_the_default(store: Store) -> None:
    save(store, version=1, html="first")
    save(store, version=2, html="second")
    newest, first = store.page(KEY), store.page(KEY, 1)
    assert store.versions(KEY) == 2
    assert newest is not None and newest.html == "second" and newest.version == 2
    assert first is not None and first.html == "first"
    assert store.page(KEY, 3) is None


def test_a_thread_of_many_replies_takes_space_in_its_replies_not_their_square(tmp_path: Path) -> None:
    db = tmp_path / "pages.sqlite3"
    thread = PageKey("forum", "/r/lisp/Macros", "", "m", "t")
    written = ['<div class="thread"><h1>Macros</h1></div>']
    with closing(Store(db)) as store:
        store.save_page(thread, 1, 0, "Macros", written[0], 0.1, mount="/forum")
        for version in range(2, 201):  # each reply: the thread as it was, byte for byte, then more
            written.append(written[-1] + f'<div class="reply"><p>Reply {version}: {"words " * 40}</p></div>')
            saved = store.save_page(thread, version, 0, "Macros", written[-1], 0.1, mount="/forum")
            assert saved.html == written[-1]
            if version == 100:  # as a genui of layout 1 that has the file open reads the newest version: whole
                with closing(sqlite3.connect(db)) as raw:
                    newest = "SELECT html FROM pages WHERE path = '/r/lisp/Macros' ORDER BY version DESC LIMIT 1"
                    assert raw.execute(newest).fetchone() == (written[-1],)
    with closing(Store(db)) as store:  # read back after reopening: every version whole, byte for byte
        assert [store.page(thread, n).html for n in range(1, 201)] == written  # type: ignore[union-attr]
        (size,) = [group.size for group in store.page_groups()]
    whole = sum(len(html) for html in written)
    assert size < 4 * len(written[-1]) < whole / 20, (size, whole)  # in its replies, not their square
    with closing(sqlite3.connect(db)) as raw:
        rows = raw.execute("SELECT version, continues, LENGTH(html) FROM pages ORDER BY version").fetchall()
    assert rows[-1][1] == 0 and rows[0][1] == 0  # the newest and the first stored whole
    run = 0
    for version, continues, stored in rows:  # reading a version joins at most about twice its bytes
        run = run + stored if continues else 0
        assert run <= len(written[version - 1]), version


def test_a_version_a_genui_that_kept_no_mount_wrote_stays_whole_for_the_upgrade_to_read(store: Store) -> None:
    thread = PageKey("forum", "/r/lisp/Macros", "", "m", "t")
    store.save_page(thread, 1, 0, "Macros", "<h1>Macros</h1>", 0.1)  # no mount: as genui before session 45 wrote
    store.save_page(thread, 2, 0, "Macros", "<h1>Macros</h1><p>one</p>", 0.1)
    store.save_page(thread, 3, 0, "Macros", "<h1>Macros</h1><p>one</p><p>two</p>", 0.1, mount="/forum")
    unkept = store.unkept_mounts("forum", ["t"])  # genui.upgrade reads these pages' links
    assert [html for *_, html in unkept] == ["<h1>Macros</h1>", "<h1>Macros</h1><p>one</p>"]


def test_a_version_left_after_deleting_a_post_is_stored_whole_and_the_next_continues_it(tmp_path: Path) -> None:
    thread, db = PageKey("forum", "/r/lisp/Macros", "", "m", "t"), tmp_path / "pages.sqlite3"
    newest = "SELECT continues, html FROM pages ORDER BY version DESC LIMIT 1"  # as a genui of layout 1 reads it
    with closing(Store(db)) as store, closing(sqlite3.connect(db)) as raw:
        store.save_page(thread, 1, 0, "Macros", "<h1>Macros</h1>", 0.1, mount="/forum")
        first = store.add_post("forum", "/r/lisp/Macros", "ada", "one")
        store.save_page(thread, 2, 0, "Macros", "<h1>Macros</h1><p>one</p>", 0.1, answered=first.id, mount="/forum")
        second = store.add_post("forum", "/r/lisp/Macros", "bob", "two")
        html = "<h1>Macros</h1><p>one</p><p>two</p>"
        store.save_page(thread, 3, 0, "Macros", html, 0.1, answered=second.id, mount="/forum")
        assert raw.execute("SELECT continues FROM pages WHERE version = 2").fetchone() == (1,)  # what follows v1
        store.delete_post(second.id)  # takes version 3, which shows it; version 2 is the newest again
        assert raw.execute(newest).fetchone() == (0, "<h1>Macros</h1><p>one</p>")  # stored whole again
        assert store.versions(thread) == 2
        saved = store.save_page(thread, 3, 1, "Macros", "<h1>Macros</h1><p>one</p><p>three</p>", 0.1, mount="/forum")
        assert saved.html == store.page(thread, 3).html == "<h1>Macros</h1><p>one</p><p>three</p>"  # type: ignore[union-attr]
        assert store.page(thread, 2).html == "<h1>Macros</h1><p>one</p>"  # type: ignore[union-attr]


def test_a_new_page_cache_is_its_owners_only_and_an_old_one_keeps_its_mode(tmp_path: Path) -> None:
    """Readers' names and posts were in a file every local account could read, 0644 under the usual umask (a
    moderator's review)."""
    made = tmp_path / "new.sqlite3"
    with closing(Store(made)) as store:
        store.add_post("forum", "/r/lisp/Macros", "ada", "hello")
        assert made.stat().st_mode & 0o777 == 0o600 and Path(f"{made}-wal").stat().st_mode & 0o777 == 0o600
    shared = tmp_path / "shared.sqlite3"
    with closing(Store(shared)):
        pass
    shared.chmod(0o640)  # its owner's choice (a group that backs it up): kept
    with closing(Store(shared)) as store:
        store.add_post("forum", "/r/lisp/Macros", "ada", "hello")
    assert shared.stat().st_mode & 0o777 == 0o640


def test_saving_a_version_twice_keeps_the_first(store: Store) -> None:
    save(store, html="first")
    again = store.save_page(KEY, 1, seed=0, title="", html="second", seconds=0.1)
    assert again.html == "first" and store.versions(KEY) == 1


def test_a_failed_write_leaves_nothing_and_the_store_keeps_working(store: Store) -> None:
    with pytest.raises(sqlite3.Error):
        store.save_page(KEY, 1, seed=0, title="x", html=object(), seconds=0.1)  # type: ignore[arg-type]
    assert store.page(KEY) is None
    save(store)
    assert store.page(KEY) is not None


def test_title_is_the_newest_page_at_the_url_whatever_the_model(store: Store) -> None:
    save(store)
    store.save_page(replace(KEY, model="model-b"), 1, seed=0, title="Hash tables", html="", seconds=0.1)
    assert store.title("wiki", "/wiki/Hash_table") == "Hash tables"
    assert store.title("wiki", "/wiki/Elsewhere") is None


def test_posts_are_stored_in_order_per_thread(store: Store) -> None:
    first = store.add_post("forum", "/r/a/T", "ada", "  hello  ")
    store.add_post("forum", "/r/a/Other", "bob", "elsewhere")
    second = store.add_post("forum", "/r/a/T", "bob", "<b>hi</b>")
    posts = store.posts("forum", "/r/a/T")
    assert [(p.user, p.text) for p in posts] == [("ada", "hello"), ("bob", "<b>hi</b>")]
    assert first.id < second.id


def test_the_same_post_sent_twice_at_once_is_stored_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A double click, or a form sent again after its answer was lost: one post. The same words later, from someone
    else, or to another thread, are posts of their own."""
    first = store.add_post("forum", "/r/a/T", "ada", "me too")
    assert store.add_post("forum", "/r/a/T", "ada", " me too\r\n") == first
    store.add_post("forum", "/r/a/T", "bob", "me too")
    store.add_post("forum", "/r/a/U", "ada", "me too")
    later = time.time() + SAME_POST_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    store.add_post("forum", "/r/a/T", "bob", "me too")
    assert [p.user for p in store.posts("forum", "/r/a/T")] == ["ada", "bob", "bob"]


def test_a_post_sent_again_is_told_apart_by_the_same_rule_add_post_keeps(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``resent`` says beforehand what add_post will do: return the stored post (the form sent again) or store one."""
    assert store.resent("forum", "/r/a/T", "ada", "me too") is None
    first = store.add_post("forum", "/r/a/T", "ada", "me too")
    assert (
        store.resent("forum", "/r/a/T", "ada", " me too\r\n")
        == first
        == store.add_post("forum", "/r/a/T", "ada", "me too")
    )
    assert (
        store.resent("forum", "/r/a/U", "ada", "me too") is None
        and store.resent("forum", "/r/a/T", "bob", "me too") is None
    )
    with pytest.raises(PostRejected):
        store.resent("forum", "/r/a/T", "bad name", "me too")
    later = time.time() + SAME_POST_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    assert store.resent("forum", "/r/a/T", "ada", "me too") is None
    assert len(store.posts("forum", "/r/a/T")) == 1


def test_a_form_sent_again_is_its_post_though_others_came_between_and_a_minute_passed(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resend was told apart only from the thread's newest post within 60 s: a post by another in between, and it
    was stored twice (a forum user's review, left alone last session). The reply form's token tells it."""
    first = store.add_post("forum", "/r/a/T", "ada", "me too", sent="form-token-0000001")
    store.add_post("forum", "/r/a/T", "bob", "between")
    later = time.time() + SAME_POST_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    assert store.resent("forum", "/r/a/T", "ada", "me too", "form-token-0000001") == first
    assert store.add_post("forum", "/r/a/T", "ada", "me too", sent="form-token-0000001") == first
    # the same form with other words (the first answer lost, the text changed), or another form: posts of their own
    store.add_post("forum", "/r/a/T", "ada", "me too, really", sent="form-token-0000001")
    store.add_post("forum", "/r/a/T", "ada", "me too", sent="form-token-0000002")
    store.add_post("forum", "/r/a/U", "ada", "me too", sent="form-token-0000001")  # another thread
    assert [p.text for p in store.posts("forum", "/r/a/T")] == ["me too", "between", "me too, really", "me too"]


def test_a_post_keeps_its_first_lines_indentation_and_tabs_but_no_blank_lines_around_it(store: Store) -> None:
    """Pasted code lost its first line's indentation: `    def f():` was stored as `def f():` under an indented
    body (a forum user's review)."""
    text = "\r\n  \r\n    def f():\r\n\treturn 1\u200d\U0001f44d \r\n\r\n"
    assert store.add_post("forum", "/r/a/T", "ada", text).text == "    def f():\n\treturn 1\u200d\U0001f44d"


def test_a_posts_line_breaks_count_as_a_browser_counts_them(store: Store) -> None:
    """A browser sends a textarea's line breaks as CRLF, and its maxlength counts each as one character."""
    text = ("x" * 99 + "\r\n") * 20  # 2,000 characters as the textarea counts them
    assert store.add_post("forum", "/r/a/T", "ada", text).text == text.replace("\r\n", "\n").strip()


@pytest.mark.parametrize(
    ("user", "text"),
    [
        ("", "hi"),
        ("a b", "hi"),
        ("x" * (MAX_USER + 1), "hi"),
        ("ada", "   "),
        ("ada", "x" * (MAX_POST + 1)),
        ("ada\u202elive", "hi"),  # a right-to-left override, which turns the names after it around
        ("ada.l", "hi"),
        ("\u0301ada", "hi"),  # a combining mark on no letter
        ("太郎\u3000", "hi"),  # an ideographic space
        ("\u3164", "hi"),  # a Hangul filler: a name no one sees
        ("ada\u034f", "hi"),  # a combining grapheme joiner: another "ada"
        ("ada\ufe0f", "hi"),  # a variation selector
        ("a\u200cda", "hi"),  # a zero-width non-joiner between Latin letters shows nothing: another "ada"
        ("東\u200c京", "hi"),  # nor between Han
        ("ا\u200cبجد", "hi"),  # nor after an alef, which joins no letter after it: "ابجد" (a review)
        ("ء\u200cب", "hi"),  # nor after a hamza, which joins none
        ("क्\u200cx", "hi"),  # nor after a virama, before a letter of another script
        ("علی\u200c\u200cرضا", "hi"),  # two of them
        ("\u200dada", "hi"),  # a joiner on nothing
        ("a·b", "hi"),  # a middle dot but in l·l
        ("ジョン・", "hi"),  # a katakana middle dot on no letter after it
        ("col・lega", "hi"),  # nor in a name with no Japanese letter: it reads as col·lega (a review)
        ("ب\u06e5\u200cب", "hi"),  # a non-joiner after a small waw, which joins nothing
        ("a" + "\u0301" * 6, "hi"),  # marks stacked on one letter (NFC composes the first)
        # posts that showed as a blank box, or sent a terminal's escapes on to the model (a forum user's review)
        ("ada", "\u200b\u200b"),  # zero-width spaces
        ("ada", "\u2800\u2800"),  # blank Braille patterns
        ("ada", "\u202e"),  # a right-to-left override alone
        ("ada", "\u3000\n\u3164"),  # an ideographic space, a Hangul filler
        ("ada", "bell\x07 escape\x1b[31mred"),
        ("ada", "a\x00b"),
        ("ada", "a\x85b"),  # a C1 control (NEL)
    ],
)
def test_bad_posts_are_rejected_and_not_stored(store: Store, user: str, text: str) -> None:
    with pytest.raises(PostRejected):
        store.add_post("forum", "/r/a/T", user, text)
    assert store.posts("forum", "/r/a/T") == []


def test_written_lists_each_url_of_one_template_once_newest_first(store: Store) -> None:
    article = replace(KEY, path="/Lisp", template="article")
    save(store, article)
    save(store, replace(article, path="/Under_score"))
    save(store, replace(KEY, path="/Other_model", template="article", model="model-b"))
    save(store, replace(KEY, path="/Home", template="home"))
    save(store, replace(article, posts=3), html="<h1>Lisp</h1>")  # the same URL again, with a newer key
    store.save_page(replace(article, posts=4), 1, seed=0, title="Lisp again", html="", seconds=0.1)
    written = store.written("wiki", "model-a", "article")
    assert [(page.path, page.title) for page in written] == [("/Lisp", "Lisp again"), ("/Under_score", "Hash table")]
    assert [page.path for page in store.written("wiki", "model-a", "article", prefix="/Under_")] == ["/Under_score"]
    assert store.written("wiki", "model-a", "article", prefix="/U%") == []  # LIKE wildcards are literal
    assert store.written("wiki", "model-a", "article", prefix="/Under%score") == []
    assert len(store.written("wiki", "model-a", "article", limit=1)) == 1
    save(store, replace(article, path="/under_score"))  # a prefix is matched with its case, as a URL is
    assert [page.path for page in store.written("wiki", "model-a", "article", prefix="/under_")] == ["/under_score"]


def test_a_page_keeps_the_newest_post_it_shows_in_place(store: Store) -> None:
    store.save_page(KEY, 1, seed=0, title="t", html="thread", seconds=0.1)
    store.save_page(KEY, 2, seed=1, title="t", html="thread + replies", seconds=0.1, answered=7)
    first, second = store.page(KEY, 1), store.page(KEY)
    assert first is not None and first.answered == 0 and second is not None and second.answered == 7


def test_a_page_keeps_the_newest_post_it_was_written_after(store: Store) -> None:
    store.save_page(KEY, 1, seed=0, title="t", html="thread", seconds=0.1, replied=3)  # posts 1-3 in its prompt
    store.save_page(KEY, 2, seed=1, title="t", html="thread + replies", seconds=0.1, answered=7)
    first, second = store.page(KEY, 1), store.page(KEY)
    assert first is not None and (first.answered, first.replied) == (0, 3)
    assert second is not None and (second.answered, second.replied) == (7, 7)  # answered in place: replied to


def old_pages_table(db: sqlite3.Connection, answered: bool) -> None:
    """The pages table as an earlier genui made it: before replies in place (no ``answered``), or before waiting
    posts (no ``replied``)."""
    db.execute(
        "CREATE TABLE pages (site TEXT NOT NULL, path TEXT NOT NULL, query TEXT NOT NULL, model TEXT NOT NULL,"
        " template TEXT NOT NULL, posts INTEGER NOT NULL, version INTEGER NOT NULL, seed INTEGER NOT NULL,"
        " title TEXT NOT NULL, html TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL,"
        + (" answered INTEGER NOT NULL DEFAULT 0," if answered else "")
        + " PRIMARY KEY (site, path, query, model, template, posts, version))"
    )


def test_a_database_from_before_waiting_posts_estimates_what_each_version_replied_to(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        old_pages_table(db, answered=True)
        db.execute(
            "CREATE TABLE posts (id INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT NOT NULL, path TEXT NOT NULL,"
            " user TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL)"
        )
        for number, created in enumerate((5.0, 15.0, 25.0, 35.0), 1):  # posts 1-4; post 4 on another thread
            thread = KEY.path if number < 4 else "/other"
            db.execute("INSERT INTO posts VALUES (?, ?, ?, 'ada', 'hi', ?)", (number, KEY.site, thread, created))
        key = (KEY.site, KEY.path, KEY.query, KEY.model, KEY.template, 0)
        # version 1 written whole at t=10 (after post 1), version 2 answered posts 2 in place, version 3 at t=40
        for version, created, answered in ((1, 10.0, 0), (2, 20.0, 2), (3, 40.0, 0)):
            db.execute(
                "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, 0, 'T', 'html', 1.0, ?, ?)",
                (*key, version, created, answered),
            )
        db.commit()
    store = Store(path)
    assert [(page.answered, page.replied) for page in (store.page(KEY, v) for v in (1, 2, 3)) if page] == [
        (0, 1),
        (2, 2),
        (0, 3),
    ]
    assert {page.mount for page in (store.page(KEY, v) for v in (1, 2, 3)) if page} == {None}  # read from its links
    stored = store.save_page(KEY, 4, 3, "T", "html", 1.0, mount="/forum")
    assert stored.mount == "/forum" and store.page(KEY) == stored
    store.close()
    assert Store(path).page(KEY, 3) is not None  # opened again: nothing more to do


def test_a_database_from_before_replies_in_place_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        old_pages_table(db, answered=False)
        row = ("wiki", "/wiki/Hash_table", "", "model-a", "t1", 0, 1, 0, "T", "old", 1.0, 1.0)
        db.execute("INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        db.commit()
    store = Store(path)
    old = store.page(KEY)
    assert old is not None and old.html == "old" and old.answered == 0
    save(store, version=2)
    store.close()


def test_a_page_written_from_a_post_deleted_since_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    store = Store(tmp_path / "genui.sqlite3")
    try:
        key = PageKey("forum", "/r/lisp/Macros", "", "m", "t")
        kept, gone = (store.add_post("forum", "/r/lisp/Macros", user, "hello") for user in ("ada", "troll"))
        store.delete_post(gone.id)
        with pytest.raises(ReadPostDeleted):
            store.save_page(key, 1, 0, "Macros", "<p>hello troll</p>", 0.1, read=(kept.id, gone.id))
        assert store.versions(key) == 0
        assert store.save_page(key, 1, 0, "Macros", "<p>hello ada</p>", 0.1, read=(kept.id, kept.id)).version == 1
    finally:
        store.close()


def test_a_version_whose_version_before_it_is_gone_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "genui.sqlite3")
    try:
        store.save_page(KEY, 1, seed=0, title="t", html="one", seconds=0.1)
        assert store.forget(KEY.site, KEY.path) == 1  # genui cache forget, while version 2 is being written
        with pytest.raises(EarlierVersionsDeleted):
            store.save_page(KEY, 2, seed=1, title="t", html="two", seconds=0.1)
        assert store.versions(KEY) == 0 and store.save_page(KEY, 1, seed=0, title="t", html="one", seconds=0.1)
    finally:
        store.close()


def test_a_version_written_from_a_forgotten_one_is_refused_though_that_number_was_written_again(
    tmp_path: Path,
) -> None:
    """A thread's replies run keeps its newest version's HTML. Forgotten meanwhile, and written again as version 1 by
    another process, the page must not get back the forgotten text as version 2."""
    store = Store(tmp_path / "genui.sqlite3")
    try:
        secret = store.save_page(KEY, 1, seed=0, title="t", html="<p>SECRET</p>", seconds=0.1)
        base = (secret.version, secret.created)
        assert store.forget(KEY.site, KEY.path) == 1
        time.sleep(0.01)  # another process writes version 1 again
        fresh = store.save_page(KEY, 1, seed=0, title="t", html="<p>fresh</p>", seconds=0.1)
        with pytest.raises(EarlierVersionsDeleted):
            store.save_page(KEY, 2, seed=1, title="t", html="<p>SECRET</p><p>reply</p>", seconds=0.1, base=base)
        assert store.versions(KEY) == 1
        kept = store.save_page(
            KEY, 2, seed=1, title="t", html="<p>fresh</p><p>reply</p>", seconds=0.1, base=(1, fresh.created)
        )
        assert kept.version == 2
    finally:
        store.close()


def test_a_full_disk_is_reported_as_itself_not_as_a_failed_rollback(tmp_path: Path) -> None:
    # SQLite rolls a transaction back by itself when the disk is full; a second ROLLBACK hid the cause
    store = Store(tmp_path / "genui.sqlite3")
    with sqlite3.connect(tmp_path / "genui.sqlite3") as probe:
        pages = probe.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # the disk fills up
    with pytest.raises(sqlite3.OperationalError, match="full"):
        store.save_page(PageKey("wiki", "/Lisp", "", "m", "t"), 1, 0, "Lisp", "x" * 50_000, 0.1)
    store._db.execute(f"PRAGMA max_page_count = {10**6}")  # room again: the store works on
    store.save_page(PageKey("wiki", "/Lisp", "", "m", "t"), 1, 0, "Lisp", "<p>Lisp</p>", 0.1)
    assert store.versions(PageKey("wiki", "/Lisp", "", "m", "t")) == 1


def _hold_write_lock(db: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the file's write lock (genui cache prune --vacuum, a second server's long write)."""
    script = (
        "import sqlite3, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE'); print('held', flush=True)\n"
        f"time.sleep({seconds}); c.execute('COMMIT')\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_commit_refused_while_another_process_reads_is_rolled_back_and_the_next_save_keeps(
    tmp_path: Path,
) -> None:
    db = tmp_path / "genui.sqlite3"
    with closing(Store(db)) as store, closing(sqlite3.connect(db, isolation_level=None)) as reader:
        store._db.execute("PRAGMA journal_mode=DELETE")  # outside WAL a reader holds off a commit (a copied file, NFS)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM pages").fetchone()  # a read lock, held
        with pytest.raises(sqlite3.OperationalError) as refused:
            store.save_page(KEY, 1, 0, "Hash table", "<p>x</p>", 0.1, wait=False)
        assert is_busy(refused.value) and not store._db.in_transaction  # not left open, holding the file
        reader.execute("COMMIT")
        assert store.save_page(KEY, 1, 0, "Hash table", "<p>x</p>", 0.1, wait=False).version == 1


def test_a_reply_while_another_process_holds_the_cache_is_a_503_that_keeps_what_was_typed(tmp_path: Path) -> None:
    db = tmp_path / "genui.sqlite3"
    app = create_app(example_sites(), FakeEngine(), db_path=db)
    thread = "/forum/r/hacking/My_first_lisp"
    with TestClient(app) as client:
        assert visit(client, thread).status_code == 200
        holder = _hold_write_lock(db, 3)
        started = time.monotonic()
        refused = client.post(thread, data={"user": "ada", "text": "a reply"}, headers={"Origin": "http://testserver"})
        waited = time.monotonic() - started
        holder.communicate()
        assert refused.status_code == 503 and refused.headers["retry-after"] == "2" and "a reply" in refused.text
        assert waited < 2.5  # the busy timeout, not the default 5 s with the whole server standing still
        assert app.state.pages.store.posts("forum", "/r/hacking/My_first_lisp") == []


def test_a_page_written_while_another_process_holds_the_cache_is_said_not_kept_and_kept_once_it_is_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(genui.generation, "KEEP_WAIT_S", 0.6)  # how long a written page waits for the cache
    db = tmp_path / "genui.sqlite3"
    engine = FakeEngine()
    engine.hold = threading.Event()  # the page's last frame waits until its visitor watches
    app = create_app(example_sites(), engine, db_path=db)
    with TestClient(app) as client, closing(sqlite3.connect(db, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # held past the store's busy timeout (genui cache prune --vacuum, say)
        live = client.get("/wiki/Lisp", headers=HTMX)
        with client.websocket_connect(live_url(live.text)) as socket:
            socket.receive_text()  # a draft: the visitor watches the page being written
            engine.hold.set()
            while "genui-error" not in (said := socket.receive_text()):
                pass
        assert "The page was written, but another process held the page cache for 0.6 s, so it was not kept" in said
        assert "/wiki/Lisp was written but not kept: the page cache was held for 0.6 s" in caplog.text
        waited = visit(client, "/wiki/Lisp")  # without scripts: the wait ends in an error page, not a hang
        assert waited.status_code == 503 and "it was not kept" in waited.text
        assert waited.headers["Retry-After"] == str(genui.errors.CACHE_BUSY_RETRY_S)
        assert other.execute("SELECT COUNT(*) FROM pages").fetchone() == (0,)  # nothing half stored
        other.execute("ROLLBACK")  # the other process lets go: the next visit writes the page and keeps it
        page = visit(client, "/wiki/Lisp")
        assert page.status_code == 200 and "Lisp is a topic in computing" in page.text
        assert other.execute("SELECT version FROM pages WHERE path = '/Lisp'").fetchall() == [(1,)]


@contextmanager
def cache_held(tmp_path: Path) -> Iterator[tuple[TestClient, FakeEngine, sqlite3.Connection]]:
    """A served app whose page cache another connection holds (BEGIN IMMEDIATE) until it rolls back; the engine
    holds each page's last frame until ``engine.hold`` is set."""
    db = tmp_path / "genui.sqlite3"
    engine = FakeEngine()
    engine.hold = threading.Event()
    app = create_app(example_sites(), engine, db_path=db)
    with (
        TestClient(app) as client,
        closing(sqlite3.connect(db, isolation_level=None, check_same_thread=False)) as other,
    ):
        other.execute("BEGIN IMMEDIATE")
        yield client, engine, other


def test_a_page_written_while_another_process_holds_the_cache_for_a_while_is_kept_once_it_lets_go(
    tmp_path: Path,
) -> None:
    with cache_held(tmp_path) as (client, engine, other):  # held for 2.5 s: past the busy timeout, within KEEP_WAIT_S
        live = client.get("/wiki/Lisp", headers=HTMX)
        with client.websocket_connect(live_url(live.text)) as socket:
            socket.receive_text()
            engine.hold.set()
            threading.Timer(2.5, lambda: other.execute("ROLLBACK")).start()
            started = time.monotonic()
            while "genui-live" in (said := socket.receive_text()) or "genui-progress" in said:
                pass
        assert "genui-error" not in said and "Lisp is a topic in computing" in said
        assert time.monotonic() - started >= 2.0  # it waited for the other process, and was kept then
        assert other.execute("SELECT version FROM pages WHERE path = '/Lisp'").fetchall() == [(1,)]
        assert len(engine.calls) == 1  # written once


def test_a_page_waiting_to_be_kept_is_kept_though_its_watcher_leaves(tmp_path: Path) -> None:
    with cache_held(tmp_path) as (client, engine, other):
        live = client.get("/wiki/Lisp", headers=HTMX)
        with client.websocket_connect(live_url(live.text)) as socket:
            socket.receive_text()
            engine.hold.set()
            time.sleep(0.5)  # the page is written and waits for the cache
        time.sleep(0.5)  # the visitor has gone: nobody watches the run any more
        other.execute("ROLLBACK")
        deadline = time.monotonic() + 10
        while not (kept := other.execute("SELECT version FROM pages WHERE path = '/Lisp'").fetchall()):
            assert time.monotonic() < deadline, "the page was never kept"
            time.sleep(0.1)
        assert kept == [(1,)] and len(engine.calls) == 1


def test_a_new_cache_another_process_is_opening_is_waited_for_not_refused(tmp_path: Path) -> None:
    """genui serve and genui cache warm on a fresh install, or two servers started together: switching a file to WAL
    answers "locked" at once, without the busy timeout, while the other holds it (here: for 0.3 s)."""
    db = tmp_path / "new.sqlite3"
    holder = _hold_write_lock(db, 0.3)
    try:
        Store(db).close()  # it waits for the other, then opens
    finally:
        holder.communicate()


@pytest.mark.parametrize("stamp", [0, 74])  # a browser's history stamps its own user_version: no newer genui's
def test_another_programs_database_is_refused_untouched(tmp_path: Path, stamp: int) -> None:
    db = tmp_path / "theirs.sqlite3"
    with closing(sqlite3.connect(db)) as theirs:
        theirs.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
        theirs.execute(f"PRAGMA user_version = {stamp}")
        theirs.commit()
    assert_refused_untouched(db, "is not a page cache: it has no pages table$")


def test_the_wal_file_is_cut_back_after_a_big_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration rewrites every row: the WAL grew as large as the file and stayed so while the server ran."""
    monkeypatch.setattr(genui.store, "JOURNAL_LIMIT", 256 * 1024)
    store = Store(tmp_path / "pages.sqlite3")
    big = "<p>" + "x" * 20_000 + "</p>"
    with store._transaction() as db:  # one big write, as a migration's
        for n in range(150):
            key = replace(KEY, path=f"/wiki/P{n}")
            db.execute(
                "INSERT INTO pages (site, path, query, model, template, posts, version, seed, title, html, seconds,"
                " created) VALUES (?, ?, ?, ?, ?, ?, 1, 0, 't', ?, 0.1, 0)",
                (key.site, key.path, key.query, key.model, key.template, key.posts, big),
            )
    wal = Path(f"{tmp_path / 'pages.sqlite3'}-wal")
    assert wal.stat().st_size > 2_000_000
    store._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    save(store)  # the next write starts the WAL over, cut back to the limit
    assert wal.stat().st_size <= 256 * 1024
    store.close()


def test_a_newer_genuis_page_cache_is_refused_untouched_and_this_ones_is_stamped(tmp_path: Path) -> None:
    """A newer genui stamps a higher layout; this one could take its pages for an earlier config's and prune them."""
    db = tmp_path / "genui.sqlite3"
    Store(db).close()
    with closing(sqlite3.connect(db)) as stamped:
        assert stamped.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        stamped.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        stamped.execute("PRAGMA journal_mode = DELETE")
    assert_refused_untouched(db, "a newer genui .* another --db")


def test_an_earlier_genuis_cache_keeps_its_layout_until_a_row_only_this_one_reads_is_stored(tmp_path: Path) -> None:
    """Opened to list its posts or pages, a layout-1 genui's cache stays one that genui can open; it becomes this
    layout's only with the first version stored as what follows the one before it, which layout 1 would misread."""
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    store.save_page(KEY, 1, seed=0, title="t", html="<p>post</p>", seconds=0.1, mount="")
    store.close()
    with closing(sqlite3.connect(db)) as earlier:  # as a genui of layout 1 left it
        earlier.execute("ALTER TABLE pages DROP COLUMN continues")
        earlier.execute("PRAGMA user_version = 1")
    Store(db).close()  # genui posts, genui cache show
    with closing(sqlite3.connect(db)) as look:
        assert look.execute("PRAGMA user_version").fetchone() == (1,)
    store = Store(db)
    store.save_page(KEY, 2, seed=1, title="t", html="<p>post</p><p>reply</p>", seconds=0.1, mount="")
    store.save_page(KEY, 3, seed=2, title="t", html="<p>post</p><p>reply</p><p>more</p>", seconds=0.1, mount="")
    store.close()  # version 2 is now stored as what follows version 1
    with closing(sqlite3.connect(db)) as look:
        assert look.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert look.execute("SELECT continues FROM pages WHERE version = 2").fetchone() == (1,)


def assert_refused_untouched(db: Path, match: str) -> None:
    """Opening ``db`` is refused with ``match`` said, and the file is as it was: no byte changed, no WAL made."""
    before = db.read_bytes()
    with pytest.raises(NotAPageCache, match=match):
        Store(db)
    assert db.read_bytes() == before and not Path(f"{db}-wal").exists()


def test_a_variation_kept_while_the_cache_is_held_can_be_kept_once_it_is_free(tmp_path: Path) -> None:
    from test_edits import keep_form

    db = tmp_path / "genui.sqlite3"
    app = create_app(example_sites(), FakeEngine(), db_path=db)
    with TestClient(app, follow_redirects=False) as client:
        visit(client, "/wiki/Lisp", follow_redirects=True)
        posted = client.post("/_genui/variations", data={"site": "wiki", "url": "/Lisp"})
        candidates = client.get(posted.headers["location"]).text
        holder = _hold_write_lock(db, 2)
        busy = client.post("/_genui/keep", data=keep_form(candidates, 2))
        holder.communicate()
        assert busy.status_code == 503 and busy.headers["retry-after"] == "2"
        kept = client.post("/_genui/keep", data=keep_form(candidates, 2))  # the chosen one is still there
        assert kept.status_code == 303 and "(variation 2)" in client.get("/wiki/Lisp?v=2").text


def test_a_version_a_visitor_chose_is_never_another_processes_page_returned_as_theirs(
    store: Store, tmp_path: Path
) -> None:
    """Two servers on one file: a kept variation or a rewrite goes in as the next version, or not at all."""
    save(store)
    with closing(Store(tmp_path / "pages.sqlite3")) as other:
        save(other, version=2, html="<h1>Hash table</h1><p>the other server's</p>")
    with pytest.raises(VersionTaken):
        store.save_page(KEY, 2, 1, "Hash table", "<h1>Hash table</h1><p>chosen</p>", 0.5, exact=True)
    assert store.page(KEY, 2).html.endswith("the other server's</p>")  # type: ignore[union-attr]
    same = store.save_page(KEY, 2, 1, "Hash table", "<h1>Hash table</h1><p>the other server's</p>", 0.5, exact=True)
    assert same.version == 2  # the same text stored first is no clash
    kept = store.save_page(KEY, 3, 2, "Hash table", "<h1>Hash table</h1><p>chosen</p>", 0.5, exact=True)
    assert kept.version == 3 and kept.html.endswith("chosen</p>")
    taken = store.save_page(KEY, 3, 2, "Hash table", "<h1>Hash table</h1><p>a click's</p>", 0.5)
    assert taken.html.endswith("chosen</p>")  # a click's page: the one stored first wins, as before


@pytest.mark.parametrize("held_s", [0.8, 2.0])  # let go within the wait (stored), or past it (a 503, nothing stored)
@pytest.mark.parametrize("write", ["reply", "keep"])
def test_a_write_waiting_for_a_cache_another_process_holds_holds_no_other_visitor_up(
    tmp_path: Path, held_s: float, write: str
) -> None:
    """A reply's or a kept variation's write waited on SQLite's busy timeout on the server's event loop: every other
    visitor's request stood still for up to a second with it."""
    from chromium import served
    from test_edits import keep_form

    db = tmp_path / "genui.sqlite3"
    with served(create_app(example_sites(), FakeEngine(), db_path=db)) as url:
        thread = url + "/forum/r/hacking/My_first_lisp"
        form = {"user": "ada", "text": "Hello there"}
        with urllib.request.urlopen(thread, timeout=10) as shell:  # a browser without scripts goes to wait for it
            wait = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', shell.read().decode())
        assert wait is not None
        with urllib.request.urlopen(url + html.unescape(wait.group(1)), timeout=10) as written:
            written.read()
        if write == "keep":
            varied = urllib.parse.urlencode({"site": "forum", "url": "/r/hacking/My_first_lisp"}).encode()
            with urllib.request.urlopen(url + "/_genui/variations", data=varied, timeout=10) as candidates:
                thread, form = url + "/_genui/keep", keep_form(candidates.read().decode(), 2)
        answers: list[int] = []

        def send() -> None:
            try:
                with urllib.request.urlopen(thread, data=urllib.parse.urlencode(form).encode(), timeout=10) as answer:
                    answers.append(answer.status)
            except urllib.error.HTTPError as refused:
                answers.append(refused.code)

        holder = _hold_write_lock(db, held_s)
        sending = threading.Thread(target=send)
        sending.start()
        time.sleep(0.2)  # the write waits for the cache
        started = time.monotonic()
        with urllib.request.urlopen(url + "/_genui/health", timeout=10) as health:
            assert health.status == 200
        answered_s = time.monotonic() - started
        sending.join(timeout=10)
        holder.communicate()
        assert answered_s < 0.3, answered_s  # it waited for the busy timeout, or the other process (0.6 s and more)
        with closing(sqlite3.connect(db)) as look:
            posts = look.execute("SELECT user, text FROM posts").fetchall()
            versions = look.execute("SELECT version FROM pages WHERE path = '/r/hacking/My_first_lisp'").fetchall()
        stored = held_s < BUSY_TIMEOUT_S
        assert answers == [200 if stored else 503]
        if write == "reply":
            assert posts == ([("ada", "Hello there")] if stored else [])
        else:
            assert len(versions) == (2 if stored else 1)


def test_keeps_that_waited_for_the_cache_check_again_what_began_meanwhile(tmp_path: Path) -> None:
    """Two tabs keep from one set, and a Regenerate begins, while another process holds the cache: the first keep
    is the next version; the second finds the set kept (a 404, not the same page stored twice); a keep whose version
    a Regenerate has begun to write meanwhile is a 409, not stored under that run (whose visitor would be shown
    the variation as the page written for them)."""
    from chromium import served
    from test_edits import keep_form

    db, engine = tmp_path / "genui.sqlite3", FakeEngine()
    with served(create_app(example_sites(), engine, db_path=db)) as url:

        def post(path: str, form: dict[str, str], answers: list[int], headers: dict[str, str] | None = None) -> None:
            request = urllib.request.Request(url + path, urllib.parse.urlencode(form).encode(), headers or {})
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    answers.append(answer.status)
            except urllib.error.HTTPError as refused:
                answers.append(refused.code)

        def candidates() -> dict[str, str]:
            varied = urllib.parse.urlencode({"site": "wiki", "url": "/Lisp"}).encode()
            with urllib.request.urlopen(url + "/_genui/variations", data=varied, timeout=10) as written:
                return keep_form(written.read().decode(), 2)

        with urllib.request.urlopen(url + "/_genui/wait?site=wiki&url=%2FLisp&v=1", timeout=10) as written:
            written.read()  # version 1
        keep, answers = candidates(), list[int]()
        holder = _hold_write_lock(db, 0.6)
        tabs = [threading.Thread(target=post, args=("/_genui/keep", keep, answers)) for _ in range(2)]
        for tab in tabs:
            tab.start()
        for tab in tabs:
            tab.join(timeout=10)
        holder.communicate()
        assert sorted(answers) == [200, 404]
        with closing(sqlite3.connect(db)) as look:
            assert look.execute("SELECT version FROM pages WHERE path = '/Lisp'").fetchall() == [(1,), (2,)]

        keep, kept, regenerated_answer = candidates(), list[int](), list[int]()
        engine.delay = 0.3  # a Regenerate's run, still writing version 3 when the cache is free again
        holder = _hold_write_lock(db, 0.6)
        keeping = threading.Thread(target=post, args=("/_genui/keep", keep, kept))
        keeping.start()
        time.sleep(0.2)
        post("/_genui/regenerate", {"site": "wiki", "url": "/Lisp"}, regenerated_answer, {"HX-Request": "true"})
        keeping.join(timeout=10)
        holder.communicate()
        # the Regenerate's placeholder, and the keep refused (each its own list: on a busy machine the keep's answer
        # came back before the placeholder's, once in the full suite)
        assert regenerated_answer == [200] and kept == [409]
        with urllib.request.urlopen(url + "/_genui/wait?site=wiki&url=%2FLisp&v=3", timeout=20) as regenerated:
            assert "(variation" not in regenerated.read().decode()  # the page written for it, not the variation


def test_readers_post_under_names_in_any_script(store: Store) -> None:
    """Only A-Z, a-z, digits, - and _ were names: every reader of a Japanese or Arabic forum was refused (a
    walkthrough of sites in other languages)."""
    for user in ("太郎", "محمد", "Zoë", "अमित", "ada_l", "Ωmega-2"):
        assert store.add_post("forum", "/r/a/T", user, "hi").user == user
    # Persian's non-joiner, an Indic conjunct's joiner, Catalan's l·l, a Japanese name's middle dot: refused, though
    # each is a name as its script writes it (a review of sites in other languages)
    for user in ("علی\u200cرضا", "क्\u200dष", "col·lega", "ジョン・スミス"):
        assert store.add_post("forum", "/r/a/T", user, "hi").user == user
    decomposed = "Zoe\u0308"  # typed with a combining diaeresis: the same name as Zoë
    assert store.add_post("forum", "/r/a/T", decomposed, "again").user == "Zoë"


def test_each_error_sqlite_gives_a_command_comes_with_its_fix(tmp_path: Path) -> None:
    """genui serve said "attempt to write a readonly database" and "disk I/O error" and no more (an operator's
    review); each is SQLite's own error here, with what to do about it."""
    from genui.store import fix_for

    db = tmp_path / "x.sqlite3"
    with closing(sqlite3.connect(db)) as made:
        made.execute("CREATE TABLE t (x)")
        made.commit()
    with (
        closing(sqlite3.connect(db.as_uri() + "?mode=ro", uri=True)) as read_only,
        pytest.raises(sqlite3.OperationalError) as caught,
    ):
        read_only.execute("INSERT INTO t VALUES (1)")
    assert "make its folder writable" in fix_for(caught.value)
    # a -shm file a run on a read-only file left read-only: the file made writable again, the error came again, and
    # the fix spoke of the folder (an operator's review); it names the file (run as root here: access is simulated)
    shm = tmp_path / "x.sqlite3-shm"
    shm.write_bytes(b"")
    shm.chmod(0o444)
    import genui.store

    real_access = os.access
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(
            genui.store.os, "access", lambda path, mode: not str(path).endswith("-shm") and real_access(path, mode)
        )
        fix = fix_for(caught.value, db)
    assert fix == f"make {shm} (mode 444) writable (chmod u+w), or run as the owner", fix
    with closing(sqlite3.connect(db)) as small:
        small.execute(f"PRAGMA max_page_count = {small.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(sqlite3.OperationalError) as caught:
            small.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    assert "its disk may be full" in fix_for(caught.value)
    with (
        closing(sqlite3.connect(db, timeout=0)) as one,
        closing(sqlite3.connect(db, timeout=0)) as two,
    ):
        one.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as caught:
            two.execute("BEGIN IMMEDIATE")
    assert fix_for(caught.value) == "try again, or stop what holds it"
    assert ".recover" in fix_for(sqlite3.DatabaseError("database disk image is malformed"))
