"""genui posts: a moderator lists readers' posts and deletes one, and no page keeps its text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine, page_html, visit, ws_messages
from test_app import live_url

from genui.cli import main
from genui.sites import Site
from genui.store import PageKey, Store, StoredPost

THREAD = "/forum/r/hacking/My_first_lisp"
PATH = "/r/hacking/My_first_lisp"  # as the forum stores it


def stored_html(db: Path) -> list[str]:
    store = Store(db)
    try:
        groups = [group for group in store.page_groups() if group.site == "forum"]
        keys = [PageKey("forum", PATH, "", group.model, group.template) for group in groups]
        return [page.html for key in keys for n in range(1, store.versions(key) + 1) if (page := store.page(key, n))]
    finally:
        store.close()


def posted(db: Path, posts: list[tuple[str, str]]) -> Path:
    """``db`` with these posts (name, text) added to the thread, in turn."""
    store = Store(db)
    try:
        for user, text in posts:
            store.add_post("forum", PATH, user, text)
    finally:
        store.close()
    return db


def posts_of(db: Path) -> list[StoredPost]:
    store = Store(db)
    try:
        return store.posts("forum", PATH)
    finally:
        store.close()


def test_a_deleted_post_leaves_no_page_holding_it_and_the_thread_answers_the_rest_again(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine()
    client = client_factory(all_sites, engine)
    db = tmp_path / "db0.sqlite3"
    visit(client, THREAD)  # version 1, no posts
    for user, text in (("troll", "something nasty"), ("ada", "a fair question")):
        assert client.post(THREAD, data={"user": user, "text": text}, follow_redirects=False).status_code == 303
        visit(client, THREAD)  # the replies to it, written in place: versions 2 and 3
    assert sum("something nasty" in html for html in stored_html(db)) == 2

    assert main(["posts", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["posts"]
    assert [(post["user"], post["thread"]) for post in listed] == [("ada", PATH), ("troll", PATH)]  # newest first
    troll = listed[1]["id"]

    assert main(["posts", "delete", str(troll), "--db", str(db)]) == 0
    assert f"deleted post {troll} by troll on forum {PATH}, and 2 versions" in capsys.readouterr().out
    assert len(stored_html(db)) == 1  # version 1, from before the post: the versions left still run from 1
    shown = page_html(visit(client, THREAD).text)  # ada's post waits for a reply: this visit writes it in place
    assert "a fair question" in shown and "something nasty" not in shown and "troll" not in shown
    assert not any("something nasty" in html for html in stored_html(db))
    assert "something nasty" not in engine.infills[-1].generation.prompt


def test_deleting_an_early_post_says_the_later_posts_replies_go_too_and_a_dry_run_deletes_nothing(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = client_factory(all_sites, FakeEngine())
    db = tmp_path / "db0.sqlite3"
    visit(client, THREAD)  # version 1, no posts
    for user, text in (("troll", "something nasty"), ("ada", "a fair question"), ("bob", "and another")):
        assert client.post(THREAD, data={"user": user, "text": text}, follow_redirects=False).status_code == 303
        visit(client, THREAD)  # the replies to it, written in place: versions 2, 3 and 4
    troll = posts_of(db)[0].id
    said = f"post {troll} by troll on forum {PATH}, and 3 versions of the thread that read or showed it, with the "
    said += "replies to 2 later posts (the thread's next visit answers them again, in one run)"

    assert main(["posts", "delete", "--dry-run", str(troll), "--db", str(db)]) == 0
    assert capsys.readouterr().out == f"would delete {said}\n"  # a long thread's moderator sees what goes first
    assert len(stored_html(db)) == 4 and len(posts_of(db)) == 3  # nothing went

    assert main(["posts", "delete", str(troll), "--db", str(db)]) == 0
    assert capsys.readouterr().out == f"deleted {said}\n"
    assert len(stored_html(db)) == 1 and len(posts_of(db)) == 2


def test_posts_lists_one_threads_posts_and_an_unknown_id_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    first = store.add_post("forum", "/r/lisp/Macros", "ada", "How do\nmacros expand?")
    store.add_post("forum", "/r/unix/Pipes", "bob", "Pipes!")
    store.close()
    assert main(["posts", "--db", str(db), "--thread", "/r/lisp/Macros"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.lstrip().startswith(str(first.id)) and line.endswith("forum /r/lisp/Macros  ada: How do macros expand?")
    for limit, listed in (("1", 1), ("0", 2)):  # 0: all, as 0 turns off the other counts ("no posts", it said)
        assert main(["posts", "--db", str(db), "--limit", limit]) == 0
        assert len(capsys.readouterr().out.splitlines()) == listed
    assert main(["posts", "delete", "999", str(first.id), "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert "no post 999" in captured.err and f"deleted post {first.id}" in captured.out  # the others still go
    assert main(["posts", "delete", "--db", str(db)]) == 2  # no ids, and no --older-than
    assert "ids" in capsys.readouterr().err


def test_posts_lists_a_posts_control_characters_as_escapes_not_as_terminal_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A post may hold ESC sequences (cursor up, erase line, a window title) and a right-to-left override: printed
    raw they would hide or fake other posts in the moderator's listing."""
    db = tmp_path / "genui.sqlite3"
    Store(db).close()
    with sqlite3.connect(db) as earlier:  # stored by a genui before posts with control characters were refused
        earlier.execute(
            "INSERT INTO posts (site, path, user, text, created) VALUES (?, ?, ?, ?, ?)",
            (
                "forum",
                "/r/lisp/Macros",
                "eve",
                "hi\x1b[1A\x1b[2Kinnocent\x1b]0;pwned\x07 \u202egnp.exe \U0001f600",
                1.0,
            ),
        )
    earlier.close()
    assert main(["posts", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "eve: hi\\x1b[1A\\x1b[2Kinnocent\\x1b]0;pwned\\x07 \\u202egnp.exe \U0001f600" in out
    # a thread's path stored before paths with C1 and bidi controls were refused: escaped too, listed and deleted
    store = Store(db)
    odd = store.add_post("forum", "/r/linux/Hi\x9d0;pwned\x9c\x9b2J\u202eevil", "mal", "hello")
    store.close()
    assert main(["posts", "--db", str(db)]) == 0
    assert main(["posts", "delete", str(odd.id), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert not any(char in out for char in "\x9d\x9c\x9b\u202e")
    assert out.count("/r/linux/Hi\\x9d0;pwned\\x9c\\x9b2J\\u202eevil") == 2


def test_posts_names_sites_as_genui_serve_does_and_an_id_given_twice_is_deleted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    post = store.add_post("forum", "/r/lisp/Macros", "ada", "hi")
    store.close()
    folder = str(SITES_DIR / "forum")  # a site folder, as every genui command takes one
    assert main(["posts", "--db", str(db), "--site", folder, "--thread", "/r/lisp/Macros"]) == 0
    assert "ada: hi" in capsys.readouterr().out
    assert main(["posts", "--db", str(db), "--site", "fourm", "--sites-dir", str(SITES_DIR)]) == 2  # a typo
    assert "fourm" in capsys.readouterr().err
    assert main(["posts", "--db", str(db), "--site", "wiki", "--sites-dir", str(SITES_DIR)]) == 0  # no posts yet
    assert "no posts" in capsys.readouterr().out
    assert main(["posts", "delete", str(post.id), str(post.id), "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("deleted post") == 1 and captured.err == ""


def test_a_deleted_post_takes_a_rewrite_made_after_it_though_the_rewrite_keeps_an_older_replied(
    tmp_path: Path,
) -> None:
    # A section rewrite keeps the replied of the version it rewrote, yet its prompt had every post made by then.
    store = Store(tmp_path / "genui.sqlite3")
    key = PageKey("forum", PATH, "", "m", "t")
    store.save_page(key, 1, 0, "Thread", "<p>thread</p>", 0.1)
    kept = store.add_post("forum", PATH, "ada", "an early question")
    store.save_page(key, 2, 1, "Thread", "<p>thread, ada answered</p>", 0.1, answered=kept.id, replied=kept.id)
    troll = store.add_post("forum", PATH, "troll", "something nasty")
    store.save_page(key, 3, 2, "Thread", "<p>rewritten after the troll</p>", 0.1, answered=kept.id, replied=kept.id)
    store.save_page(key, 4, 3, "Thread", "<p>troll answered</p>", 0.1, answered=troll.id, replied=troll.id)
    deleted = store.delete_post(troll.id)
    assert deleted is not None and deleted.versions == 2
    assert store.versions(key) == 2 and store.page(key) == store.page(key, 2)
    assert [post.user for post in store.posts("forum", PATH)] == ["ada"]
    assert store.delete_post(troll.id) is None


def test_a_deleted_post_leaves_a_version_stored_after_it_by_a_run_that_began_before_it(tmp_path: Path) -> None:
    """A spam post made while the replies to an earlier post were being written: the version those replies were
    stored in never read it nor shows it, and stays when it goes (a moderator's review: it went, and the thread's
    next visit wrote those replies again). A version from before genui kept what a run read still goes."""
    store = Store(tmp_path / "genui.sqlite3")
    key = PageKey("forum", PATH, "", "m", "t")
    store.save_page(key, 1, 0, "Thread", "<p>thread</p>", 0.1, read=())
    bob = store.add_post("forum", PATH, "bob", "a real question")
    spam = store.add_post("forum", PATH, "spammer", "buy now")  # made while the run below was writing
    store.save_page(key, 2, 1, "Thread", "<p>bob answered</p>", 0.1, answered=bob.id, replied=bob.id, read=[bob.id])
    dry = store.delete_post(spam.id, dry_run=True)
    assert dry is not None and dry.versions == 0
    deleted = store.delete_post(spam.id)
    assert deleted is not None and deleted.versions == 0 and store.versions(key) == 2
    # the same version as a genui before session 81 stored it, with nothing kept of what its run read
    later = store.add_post("forum", PATH, "spammer", "buy now again")
    store.save_page(key, 3, 2, "Thread", "<p>bob answered again</p>", 0.1, answered=bob.id, replied=bob.id)
    deleted = store.delete_post(later.id)
    assert deleted is not None and deleted.versions == 1 and store.versions(key) == 2
    # a version whose run read the post goes with it, though it answered and replied to none
    read = store.add_post("forum", PATH, "carol", "read by the rewrite")
    store.save_page(
        key, 3, 2, "Thread", "<p>rewritten</p>", 0.1, answered=bob.id, replied=bob.id, read=[bob.id, read.id]
    )
    deleted = store.delete_post(read.id)
    assert deleted is not None and deleted.versions == 1 and store.versions(key) == 2


def test_a_post_deleted_while_its_replies_are_being_written_is_in_no_version_stored(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    """`genui posts delete` beside a server writing the replies to that very post (another process, the same
    file): the run ends after the deletion, what it wrote from the post is not stored, and whoever waits for it,
    watching the stream or with scripts off, is told why."""
    engine = FakeEngine(delay=0.05)
    client = client_factory(all_sites, engine)
    db = tmp_path / "db0.sqlite3"
    visit(client, THREAD)  # version 1, no posts

    def delete_while_answered(text: str) -> str:
        """Post ``text``, start the run writing the replies to it, delete the post; the thread's answer then."""
        posted = client.post(THREAD, data={"user": "troll", "text": text}, follow_redirects=False)
        assert posted.status_code == 303
        started = engine.finished
        live = client.get(THREAD).text  # the replies start being written in place, and the answer comes at once
        moderator = Store(db)
        try:
            troll = moderator.posts("forum", PATH)[-1]
            assert moderator.delete_post(troll.id) is not None and engine.finished == started  # the run goes on
        finally:
            moderator.close()
        assert text in engine.infills[-1].generation.prompt
        return live

    live = delete_while_answered("something nasty")
    assert "has been deleted meanwhile" in ws_messages(client, live_url(live))[-1]  # the stream says so
    delete_while_answered("something worse")
    told = visit(client, THREAD)  # with scripts off, the wait for that run says so
    assert told.status_code == 409 and "has been deleted meanwhile" in told.text
    stored = stored_html(db)
    assert len(stored) == 1 and not any("something" in html for html in stored)
    shown = page_html(visit(client, THREAD).text)  # the thread as stored, with no post waiting
    assert "something" not in shown and "troll" not in shown and len(stored_html(db)) == 1


def test_posts_lists_one_names_posts_to_clear_out_a_spammer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A host cleaning up after a spammer listed every post and picked theirs out by eye (a forum host's review)."""
    db = tmp_path / "pages.sqlite3"
    store = Store(db)
    for user, text in (("ada", "a question"), ("Zoë", "spam one"), ("bob", "an answer"), ("Zoë", "spam two")):
        store.add_post("forum", PATH, user, text)
    store.close()
    assert main(["posts", "--user", "Zoe\u0308", "--json", "--db", str(db)]) == 0  # typed decomposed: the same name
    listed = json.loads(capsys.readouterr().out)["posts"]
    assert [(post["user"], post["text"]) for post in listed] == [("Zoë", "spam two"), ("Zoë", "spam one")]
    assert main(["posts", "delete", *(str(post["id"]) for post in listed), "--db", str(db)]) == 0
    assert [post.user for post in posts_of(db)] == ["ada", "bob"]
    assert main(["posts", "--user", "Zoë", "--db", str(db)]) == 0
    assert capsys.readouterr().out.endswith("no posts\n")


def test_a_deleted_post_is_gone_from_the_files_bytes_and_its_write_ahead_log_while_a_server_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a SQLite built without secure delete (its default) a deleted post stayed in the file's free pages, and in
    every backup made after; while a server held the file, its write-ahead log kept 13 copies (a data-protection
    review)."""
    connect = sqlite3.connect

    def as_most_builds(*args: object, **kwargs: object) -> sqlite3.Connection:
        made = connect(*args, **kwargs)  # type: ignore[arg-type]
        made.execute("PRAGMA secure_delete=OFF")  # this machine's Python turns it on at build time
        return made

    monkeypatch.setattr(sqlite3, "connect", as_most_builds)
    db = tmp_path / "genui.sqlite3"
    server = Store(db)  # a server holding the file, idle between requests
    for n in range(3):
        server.add_post("forum", PATH, "dave", f"DAVE-SECRET {n} " + "x" * 300)
    server.add_post("forum", PATH, "ada", "kept")
    ids = [post.id for post in server.posts("forum", PATH) if post.user == "dave"]
    assert main(["posts", "delete", *map(str, ids), "--db", str(db)]) == 0
    assert "note:" not in capsys.readouterr().err  # the log emptied: nothing said of it
    wal = db.with_name(db.name + "-wal")
    for file in (db, wal):
        assert b"DAVE-SECRET" not in (file.read_bytes() if file.exists() else b""), file
    assert [post.text for post in server.posts("forum", PATH)] == ["kept"]
    server.close()


def test_listing_a_names_posts_says_when_more_are_stored_than_it_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader's request for every post they made was answered with the newest 50 and no word (a data-protection
    review)."""
    db = posted(tmp_path / "genui.sqlite3", [("heavy", f"post {n}") for n in range(52)])
    assert main(["posts", "--db", str(db), "--user", "heavy", "--json"]) == 0
    said = capsys.readouterr()
    listed = json.loads(said.out)
    assert len(listed["posts"]) == 50 and listed["more"] is True and "--limit 0 lists them all" in said.err
    assert main(["posts", "--db", str(db), "--user", "heavy", "--json", "--limit", "0"]) == 0
    said = capsys.readouterr()
    assert len(json.loads(said.out)["posts"]) == 52 and json.loads(said.out)["more"] is False and said.err == ""


def test_posts_holding_some_words_are_listed_to_find_the_quotes_of_a_post_to_erase(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader's erased post stayed in another's that quoted it, and nothing found those (a data-protection
    review)."""
    quoted = [("alice", "My student id is S1234567"), ("carol", "> My student id is S1234567\n\nNice one")]
    db = posted(tmp_path / "genui.sqlite3", [*quoted, ("bo", "100% sure_thing")])
    assert main(["posts", "--db", str(db), "--text", "student ID is s1234567", "--json"]) == 0
    assert [post["user"] for post in json.loads(capsys.readouterr().out)["posts"]] == ["carol", "alice"]
    assert main(["posts", "--db", str(db), "--text", "100% sure_", "--json"]) == 0  # % and _ as themselves
    assert [post["user"] for post in json.loads(capsys.readouterr().out)["posts"]] == ["bo"]
    assert main(["posts", "--db", str(db), "--text", "0%_s", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["posts"] == []
    # words across a line break, as the listing shows the post on one line (a moderator's review found none)
    assert main(["posts", "--db", str(db), "--text", "S1234567  Nice one", "--json"]) == 0
    assert [post["user"] for post in json.loads(capsys.readouterr().out)["posts"]] == ["carol"]
    posted(db, [("zoe", "Cafe\u0301 CRÈME")])  # an accent typed as a combining mark
    assert main(["posts", "--db", str(db), "--text", "café crème", "--json"]) == 0  # (a review)
    assert [post["user"] for post in json.loads(capsys.readouterr().out)["posts"]] == ["zoe"]


def test_posts_older_than_a_retention_period_are_deleted_with_the_versions_that_show_them(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data-protection officer's retention period (session 72's review: genui deleted no post by itself), as a
    daily cron job runs it: the posts made before it, a dry run first; a site's or a thread's only; none is no
    error."""
    client = client_factory(all_sites, FakeEngine())
    db = tmp_path / "db0.sqlite3"
    visit(client, THREAD)  # version 1, no posts
    for user, text in (("older", "said longer ago"), ("old", "said long ago"), ("new", "said today")):
        assert client.post(THREAD, data={"user": user, "text": text}, follow_redirects=False).status_code == 303
        visit(client, THREAD)  # versions 2, 3 and 4
    with sqlite3.connect(db) as db_file:  # the thread written 200 days ago, the first two posts 100 and 40 days ago
        for days, user, version in ((200, None, 1), (100, "older", 2), (40, "old", 3)):
            db_file.execute("UPDATE posts SET created = created - ? * 86400 WHERE user = ?", (days, user))
            db_file.execute("UPDATE pages SET created = created - ? * 86400 WHERE version = ?", (days, version))
    db_file.close()

    assert main(["posts", "delete", "--older-than", "30", "--dry-run", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("would delete post ") == 2 and "would delete 2 posts made before " in out, out
    assert len(posts_of(db)) == 3 and len(stored_html(db)) == 4  # nothing went

    assert main(["posts", "--site", "wiki", "delete", "--older-than", "30", "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("no posts of wiki made before ")
    assert main(["posts", "--site", "wikki", "delete", "--older-than", "30", "--db", str(db)]) == 2  # a typo
    assert "wikki" in capsys.readouterr().err

    # the site named by its folder, as the listing takes it: it found no post, and said so with exit 0 (a review)
    assert (
        main(
            ["posts", "delete", "--site", str(SITES_DIR / "forum"), "--older-than", "60", "--dry-run", "--db", str(db)]
        )
        == 0
    )
    assert "would delete 1 post of forum made before " in capsys.readouterr().out
    assert main(["posts", "delete", "--site", "forum", "--older-than", "60", "--db", str(db)]) == 0
    assert "deleted 1 post of forum made before " in capsys.readouterr().out
    assert [post.user for post in posts_of(db)] == ["old", "new"]
    assert len(stored_html(db)) == 1  # the versions that read "older", and so the later ones
    assert main(["posts", "delete", "--older-than", "30", "--db", str(db)]) == 0
    assert [post.user for post in posts_of(db)] == ["new"]
    assert len(stored_html(db)) == 1  # the thread as it was before them; the next visit answers "new" again
    assert not any("said long" in html for html in stored_html(db))
    shown = page_html(visit(client, THREAD).text)
    assert "said today" in shown and "said long" not in shown


def test_a_spammers_posts_are_deleted_by_name_in_one_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clearing a spammer's 20 posts took their ids piped through awk (a moderator's review): `--user NAME` deletes
    every post under that name, a thread's or a site's only with --thread or --site, older ones only with
    --older-than, a dry run first; a look-alike name (a Cyrillic s) is another name, and its posts stay."""
    db = posted(tmp_path / "db.sqlite3", [("spammer", f"buy now {n}") for n in range(3)] + [("ada", "hello")])
    posted(db, [("\u0455pammer", "buy later")])
    store = Store(db)
    try:
        store.add_post("forum", "/r/linux/Other", "spammer", "buy here too")
    finally:
        store.close()
    assert main(["posts", "delete", "--user", "spammer", "--thread", "/r/linux/Other", "--db", str(db)]) == 0
    assert "deleted 1 post by spammer of /r/linux/Other" in capsys.readouterr().out
    assert main(["posts", "delete", "--user", "spammer", "--dry-run", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("would delete post ") == 3 and out.endswith("would delete 3 posts by spammer\n"), out
    assert len(posts_of(db)) == 5
    assert main(["posts", "delete", "--user", "spammer", "--older-than", "1", "--db", str(db)]) == 0
    assert "no posts by spammer made before " in capsys.readouterr().out  # all made today
    assert main(["posts", "--user", "spammer", "delete", "--db", str(db)]) == 0  # the name before the action too
    assert "deleted 3 posts by spammer" in capsys.readouterr().out
    assert [post.user for post in posts_of(db)] == ["ada", "\u0455pammer"]
    assert main(["posts", "delete", "1", "--user", "ada", "--db", str(db)]) == 2
    assert "not both" in capsys.readouterr().err
    assert [post.user for post in posts_of(db)] == ["ada", "\u0455pammer"]


def test_a_thread_that_holds_no_post_is_said_to_a_listing_and_to_a_retention_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt thread, or one given as served (`/forum/r/...`), listed nothing and deleted nothing with no word:
    a cron job's retention run would find nothing there, forever (a moderator's review)."""
    db = posted(tmp_path / "db.sqlite3", [("ada", "hello")])
    assert main(["posts", "--db", str(db), "--site", "forum", "--thread", PATH, "--json"]) == 0
    said = capsys.readouterr()
    assert len(json.loads(said.out)["posts"]) == 1 and said.err == ""
    assert main(["posts", "--db", str(db), "--site", "forum", "--thread", PATH + "_typo"]) == 0
    said = capsys.readouterr()
    assert said.out == "no posts\n" and f"no thread at {PATH}_typo holds a post" in said.err
    assert "genui posts --site forum" in said.err
    assert main(["posts", "--db", str(db), "--thread", THREAD]) == 0  # the served address, not the site's own
    assert "no thread at /forum/r/" in capsys.readouterr().err
    assert main(["posts", "--db", str(db), "--site", "forum", "--thread", PATH, "--user", "bob"]) == 0
    assert capsys.readouterr().err == ""  # the thread holds posts, none of them bob's: nothing to say
    args = ["posts", "--site", "forum", "--thread", PATH + "_typo", "delete", "--older-than", "1", "--db", str(db)]
    assert main(args) == 0
    said = capsys.readouterr()
    assert "(1 day ago)" in said.out and "no thread at " in said.err
    posted(db, [("bob", "again")])
    assert main(["posts", "--db", str(db), "--limit", "1"]) == 0
    assert "note: the newest post; more are stored" in capsys.readouterr().err


def test_posts_delete_takes_ids_or_a_retention_period(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = posted(tmp_path / "db.sqlite3", [("ada", "hello")])
    store = Store(db)
    try:  # a form sent twice stores one post: the second is said to be the first's (genui_posts_total counts one)
        first, stored = store.stored_post("forum", PATH, "bob", "hi", sent="a" * 32)
        again, stored_again = store.stored_post("forum", PATH, "bob", "hi", sent="a" * 32)
        assert stored and not stored_again and again == first
        store.delete_post(first.id)
    finally:
        store.close()
    assert main(["posts", "delete", "1", "--older-than", "30", "--db", str(db)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["posts", "--site", "forum", "delete", "1", "--db", str(db)]) == 2  # ids name posts of any site
    assert "--older-than" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's own usage error: at least a day
        main(["posts", "delete", "--older-than", "0", "--db", str(db)])
    assert len(posts_of(db)) == 1
