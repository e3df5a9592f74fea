from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine, eventually, visit, ws_messages
from starlette.testclient import TestClient
from test_app import HTMX, live_url

from genui.app import create_app
from genui.cache import CURRENT, EARLIER, OTHER_MODEL, OTHER_SITE, route_versions, size_text
from genui.cli import main
from genui.runtime import SiteRuntime
from genui.sites import Site, load_site
from genui.store import PageKey, Store

MODEL = "owner/model-a"  # a hub id is its own model id: no files to read, no torch
OTHER = "owner/model-b"


@pytest.fixture
def sites_dir(tmp_path: Path) -> Path:
    root = tmp_path / "sites"
    for name in ("wiki", "forum"):
        shutil.copytree(SITES_DIR / name, root / name)
    return root


def version_of(sites_dir: Path, site: str, pattern: str) -> str:
    versions = route_versions(SiteRuntime.build(load_site(sites_dir / site), ""))
    return next(version for version, route in versions.items() if route == pattern)


def save(store: Store, site: str, path: str, model: str, template: str, versions: int = 1) -> None:
    for version in range(1, versions + 1):
        store.save_page(PageKey(site, path, "", model, template), version, version - 1, path, f"<p>{path}</p>", 0.1)


def cache(db: Path, sites_dir: Path, *argv: str) -> int:
    model = [] if argv[:1] == ("forget",) else ["--model", MODEL]  # forget deletes whatever model wrote the page
    return main(["cache", *argv, "--db", str(db), "--sites-dir", str(sites_dir), *model])


@pytest.fixture
def db(tmp_path: Path, sites_dir: Path) -> Path:
    """Pages of every standing: the wiki's articles by two models from a brief since edited, a thread with a reader's
    post, and a site that is not checked."""
    path = tmp_path / "genui.sqlite3"
    store = Store(path)
    article = version_of(sites_dir, "wiki", "/{title}")
    save(store, "wiki", "/Lisp", MODEL, article, versions=2)
    save(store, "wiki", "/Unix", MODEL, article)
    save(store, "wiki", "/Lisp", OTHER, article)
    thread = version_of(sites_dir, "forum", "/r/{board}/{thread}")
    save(store, "forum", "/r/lisp/Macros", MODEL, thread)
    store.add_post("forum", "/r/lisp/Macros", "ada", "How do macros expand?")
    save(store, "shop", "/", MODEL, "0123456789abcdef")
    edit = sites_dir / "wiki" / "site.toml"
    text = edit.read_text(encoding="utf-8")
    edit.write_text(text.replace("A free encyclopedia", "An encyclopedia"), encoding="utf-8")
    store.close()
    return path


def shown(db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """genui cache --json: {"db", "groups": [{"site", "route", "model", "state", "pages", "versions", ...}], "posts"}"""
    assert cache(db, sites_dir, "--json") == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_show_says_which_pages_a_server_of_these_sites_on_this_model_looks_up(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shown(db, sites_dir, capsys)
    states = {(g["site"], g["model"], g["state"]): (g["pages"], g["versions"]) for g in result["groups"]}
    assert states == {
        ("wiki", MODEL, EARLIER): (2, 3),  # the brief is in the route's version: every article before the edit
        ("wiki", OTHER, EARLIER): (1, 1),
        ("forum", MODEL, CURRENT): (1, 1),
        ("shop", MODEL, OTHER_SITE): (1, 1),
    }
    assert result["posts"] == {"forum": 1}
    assert cache(db, sites_dir) == 0
    out = capsys.readouterr().out
    assert "/r/{board}/{thread}" in out and "readers' posts: forum 1" in out
    assert "genui cache prune would delete 4 versions" in out


def test_prune_deletes_the_earlier_configs_pages_and_keeps_posts_and_other_sites(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cache(db, sites_dir, "prune", "--dry-run") == 0
    assert "would delete 4 versions of 3 pages" in capsys.readouterr().out
    assert len(shown(db, sites_dir, capsys)["groups"]) == 4
    assert cache(db, sites_dir, "prune") == 0
    assert "deleted 4 versions" in capsys.readouterr().out
    groups = shown(db, sites_dir, capsys)["groups"]
    assert {(g["site"], g["state"]) for g in groups} == {("forum", CURRENT), ("shop", OTHER_SITE)}
    store = Store(db)
    assert [post.user for post in store.posts("forum", "/r/lisp/Macros")] == ["ada"]


def test_prune_carries_a_threads_conversation_to_the_current_config_before_it_deletes_the_earlier_ones(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edit of the forum's brief left every thread's replies under an earlier config, which prune deleted: a
    thread with readers' posts is carried to the current config first, as a server carries it at its next visit."""
    path = tmp_path / "threads.sqlite3"
    store = Store(path)
    thread = version_of(sites_dir, "forum", "/r/{board}/{thread}")
    save(store, "forum", "/r/lisp/Macros", MODEL, thread, versions=2)
    store.add_post("forum", "/r/lisp/Macros", "ada", "How do macros expand?")
    save(store, "forum", "/r/lisp/Quiet", MODEL, thread)  # no reader posted: an earlier config's page, pruned
    store.close()
    toml = sites_dir / "forum" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("A friendly forum", "A forum"), encoding="utf-8")
    now = version_of(sites_dir, "forum", "/r/{board}/{thread}")
    carried = PageKey("forum", "/r/lisp/Macros", "", MODEL, now)
    assert cache(path, sites_dir, "prune", "--dry-run") == 0
    assert "would delete 3 versions of 2 pages" in capsys.readouterr().out
    states = {(g["state"], g["versions"]) for g in shown(path, sites_dir, capsys)["groups"]}
    assert states == {(EARLIER, 3), (CURRENT, 2)}  # as prune would leave it, on a copy
    assert cache(path, sites_dir, "export", "forum", str(tmp_path / "out")) == 0  # the thread as a server shows it
    assert "exported 1 page of forum" in capsys.readouterr().out
    assert Store(path).versions(carried) == 0  # none of them changed the file
    assert cache(path, sites_dir, "prune") == 0
    assert "deleted 3 versions" in capsys.readouterr().out
    store = Store(path)
    page = store.page(carried)
    assert page is not None and page.version == 2 and page.html == "<p>/r/lisp/Macros</p>"
    assert store.versions(PageKey("forum", "/r/lisp/Quiet", "", MODEL, now)) == 0
    assert [post.user for post in store.posts("forum", "/r/lisp/Macros")] == ["ada"]
    # another model's thread of today's config is that model's to serve, not copied to this one (a review)
    save(store, "forum", "/r/lisp/Theirs", OTHER, now)
    store.add_post("forum", "/r/lisp/Theirs", "bob", "Mine?")
    store.close()
    assert cache(path, sites_dir, "prune") == 0
    assert Store(path).versions(PageKey("forum", "/r/lisp/Theirs", "", MODEL, now)) == 0
    assert cache(path, sites_dir, "prune", "--other-models") == 0  # which deletes it: carried first
    assert Store(path).versions(PageKey("forum", "/r/lisp/Theirs", "", MODEL, now)) == 1


def test_prune_with_other_models_deletes_what_they_wrote_from_the_current_config(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "models.sqlite3"
    store = Store(db)
    article = version_of(sites_dir, "wiki", "/{title}")
    save(store, "wiki", "/Lisp", MODEL, article)
    save(store, "wiki", "/Lisp", OTHER, article)
    store.close()
    assert sorted(g["state"] for g in shown(db, sites_dir, capsys)["groups"]) == [CURRENT, OTHER_MODEL]
    assert cache(db, sites_dir, "prune") == 0 and "deleted 0 versions" in capsys.readouterr().out
    assert cache(db, sites_dir, "prune", "--other-models") == 0 and "deleted 1 version;" in capsys.readouterr().out
    assert [(g["model"], g["state"]) for g in shown(db, sites_dir, capsys)["groups"]] == [(MODEL, CURRENT)]


def test_forget_deletes_every_version_of_one_page_by_any_url_that_names_it(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cache(db, sites_dir, "forget", "wiki", "/wiki/Lisp") == 0  # the alias names /Lisp
    assert "forgot 3 versions of wiki /Lisp" in capsys.readouterr().out
    store = Store(db)
    left = {(g.site, g.model): g.urls for g in store.page_groups()}
    assert left == {("wiki", MODEL): 1, ("forum", MODEL): 1, ("shop", MODEL): 1}  # /Unix, the thread, the shop


@pytest.mark.parametrize(
    "address",
    ["/forum/r/lisp/Macros", "http://127.0.0.1:8000/forum/r/lisp/Macros", "https://genui.example/r/lisp/Macros"],
)
def test_forget_takes_a_pages_address_as_the_browser_shows_it(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str], address: str
) -> None:
    """Copied from the address bar of a server of several sites, `/forum/r/lisp/Macros` was "no route matches"
    (a hackathon team's walkthrough)."""
    assert cache(db, sites_dir, "forget", "forum", address) == 0
    said = capsys.readouterr().out  # the thread's conversation goes, its posts stay (a forum host's review)
    assert "forgot 1 version of forum /r/lisp/Macros" in said and "again; its 1 reader post stays, to be" in said
    # a version's address, as the toolbar's links show it, names its page ("sets 'v', which its route does not take")
    assert cache(db, sites_dir, "forget", "wiki", "http://127.0.0.1:8000/wiki/Lisp?v=2") == 0
    assert "forgot 3 versions of wiki /Lisp;" in capsys.readouterr().out
    # a whole URL's /wiki/ is the wiki's front page, not an article "Wiki" (a review of the first form of this)
    assert cache(db, sites_dir, "forget", "wiki", "http://127.0.0.1:8000/wiki/") == 2  # (not written here)
    assert "no version of wiki / is stored" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["forget", "wiki", "/a/b/c"], "no route of site 'wiki' matches '/a/b/c'"),
        (["forget", "nowhere", "/"], "no site named 'nowhere'"),
        # a typo was "forgot 0 versions of wiki /Nope; its next visit writes it again" (a demo curator's review)
        (["forget", "wiki", "/Nope"], "no version of wiki /Nope is stored (genui cache pages lists what is)"),
    ],
)
def test_a_wrong_cache_command_is_a_one_line_error(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    before = db.read_bytes()
    assert cache(db, sites_dir, *argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert db.read_bytes() == before


def test_options_may_come_before_or_after_the_action(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["--db", str(db), "--sites-dir", str(sites_dir), "--model", MODEL]
    assert main(["cache", *options, "prune", "--dry-run"]) == 0
    assert main(["cache", "prune", "--dry-run", *options]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second == "would delete 4 versions of 3 pages; readers' posts are kept"
    assert main(["cache", "forget", "--db", str(db), "--sites-dir", str(sites_dir), "wiki", "/Unix"]) == 0
    assert "forgot 1 version of wiki /Unix" in capsys.readouterr().out


def test_show_checks_only_the_sites_named(db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cache(db, sites_dir, "show", "--json", "--site", "forum") == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert {(g["site"], g["state"]) for g in groups} == {
        ("wiki", OTHER_SITE),  # not checked: left alone by prune
        ("forum", CURRENT),
        ("shop", OTHER_SITE),
    }


def test_pages_stored_under_a_posts_key_are_an_earlier_configs(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "legacy.sqlite3"
    store = Store(db)
    thread = version_of(sites_dir, "forum", "/r/{board}/{thread}")
    store.save_page(PageKey("forum", "/r/lisp/Macros", "", MODEL, thread, posts=3), 1, 0, "Macros", "<p>x</p>", 0.1)
    store.close()
    assert [g["state"] for g in shown(db, sites_dir, capsys)["groups"]] == [EARLIER]


def test_prune_vacuum_shrinks_the_file(tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "big.sqlite3"
    store = Store(db)
    for n in range(200):
        store.save_page(PageKey("wiki", f"/Page_{n}", "", MODEL, "0123456789abcdef"), 1, 0, "", "x" * 4000, 0.1)
    store.close()
    before = db.stat().st_size
    assert cache(db, sites_dir, "prune", "--vacuum") == 0
    out = capsys.readouterr().out
    assert "deleted 200 versions" in out and db.stat().st_size < before / 4
    assert f"{db}: " in out and out.rstrip().endswith(size_text(db.stat().st_size))


def test_a_file_that_is_not_a_page_cache_is_an_error_and_is_left_alone(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database, though long enough to look like one " * 20, encoding="utf-8")
    other = tmp_path / "other.sqlite3"
    with contextlib.closing(sqlite3.connect(other)) as made:
        made.execute("CREATE TABLE things (x)")
    alike = tmp_path / "alike.sqlite3"  # another program's pages and posts
    with contextlib.closing(sqlite3.connect(alike)) as made:
        made.execute("CREATE TABLE pages (id, body)")
        made.execute("CREATE TABLE posts (id, body)")
    closer = []  # tables with a page cache's first columns, or all its columns but a post's INTEGER PRIMARY KEY id
    for number, (pages, posts) in enumerate(
        [
            ("site, path, html", "site, path, user, text"),
            (
                "site, path, query, model, template, posts, version, seed, title, html, seconds, created",
                "id TEXT, site, path, user, text, created",
            ),
        ]
    ):
        closer.append(tmp_path / f"closer{number}.sqlite3")
        with contextlib.closing(sqlite3.connect(closer[-1])) as made:
            made.execute(f"CREATE TABLE pages ({pages})")
            made.execute(f"CREATE TABLE posts ({posts})")
            made.execute("INSERT INTO posts (site, path, user, text) VALUES ('a', '/', 'u', 't')")
            made.commit()
    for path in (text, other, alike, *closer):
        before = path.read_bytes()
        assert cache(path, sites_dir) == 2
        assert "is not a page cache" in capsys.readouterr().err
        assert path.read_bytes() == before


def test_a_cache_an_earlier_genui_made_before_posts_is_read_and_a_damaged_one_is_named_so(
    db: Path, tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """genui serve takes a page cache from a genui that kept no posts yet (it adds the table): so do the commands.
    A damaged file is said to be damaged, with what to do, not "not a page cache"."""
    with contextlib.closing(sqlite3.connect(db)) as made:
        made.execute("DROP TABLE posts")
        made.execute("PRAGMA user_version = 0")
    assert cache(db, sites_dir) == 0
    damaged = tmp_path / "damaged.sqlite3"
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree, past the header
    damaged.write_bytes(bytes(data))
    capsys.readouterr()
    assert cache(damaged, sites_dir) == 2
    err = capsys.readouterr().err
    assert "is damaged" in err and ".recover" in err


def test_a_missing_cache_file_is_an_error_and_is_not_made(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.sqlite3"
    assert cache(missing, sites_dir) == 2
    assert "no page cache at" in capsys.readouterr().err and not missing.exists()


def test_a_repeatable_option_given_before_and_after_the_action_counts_both_times(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cache", "--site", "wiki", "show", "--site", "forum", "--json", "--db", str(db)]
    assert main([*argv, "--sites-dir", str(sites_dir), "--model", MODEL]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert {g["site"] for g in groups if g["state"] != OTHER_SITE} == {"wiki", "forum"}


def test_a_cache_file_whose_name_has_url_characters_is_opened(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = db.with_name("c#1?x%20.sqlite3")
    db.rename(odd)
    assert cache(odd, sites_dir) == 0 and "readers' posts: forum 1" in capsys.readouterr().out


def test_prune_vacuum_beside_a_reader_says_the_file_shrinks_later(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.closing(sqlite3.connect(db)) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM pages").fetchone()  # a read under way, as a server's would be
        assert cache(db, sites_dir, "prune", "--vacuum") == 0
    out = capsys.readouterr().out
    assert "deleted 4 versions" in out and "it shrinks once the server reading it lets go" in out


def test_a_cache_a_writer_holds_is_a_one_line_error(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")  # a write under way past genui's 5 s busy timeout
        assert cache(db, sites_dir, "prune", "--vacuum") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "database is locked" in err and "try again" in err
    assert cache(db, sites_dir, "prune", "--dry-run") == 0 and "would delete 4 versions" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["cache", "--json", "prune"], "--json is not an option of cache prune (only of pages, show)"),
        (["cache", "--site", "wiki", "forget", "wiki", "/Lisp"], "--site is not an option of cache forget"),
        (["posts", "--limit", "3", "delete", "1"], "--limit is not an option of posts delete (only of show)"),
    ],
)
def test_an_option_given_before_an_action_that_does_not_take_it_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    before = db.read_bytes()
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert db.read_bytes() == before  # nothing pruned, forgotten or deleted


def test_a_version_written_while_its_page_is_forgotten_is_not_stored(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    """`genui cache forget` beside a server writing the page's next version: the versions before it are gone, so it
    is not stored (the versions run from 1), its watcher is told why, and the next visit writes version 1 again."""
    engine = FakeEngine(delay=0.2)  # a run of about 2 s: time to forget its page meanwhile
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")  # version 1
    form = {"site": "wiki", "url": "/Lisp"}
    live = client.post("/_genui/regenerate", data=form, headers={**HTMX, "Origin": "http://testserver"}).text
    with concurrent.futures.ThreadPoolExecutor(1) as watcher:
        messages = watcher.submit(ws_messages, client, live_url(live))  # a visitor watches version 2 being written
        time.sleep(0.3)  # into the run of about 2 s
        store = Store(tmp_path / "db0.sqlite3")  # genui cache forget, beside the server
        try:
            assert store.forget("wiki", "/Lisp") == 1 and engine.finished == 1  # version 2 is still being written
        finally:
            store.close()
        assert "earlier versions were deleted" in messages.result(timeout=30)[-1]
    with contextlib.closing(sqlite3.connect(tmp_path / "db0.sqlite3")) as db:
        assert db.execute("SELECT COUNT(*) FROM pages WHERE site = 'wiki' AND path = '/Lisp'").fetchone() == (0,)
    assert "?v=2" not in visit(client, "/wiki/Lisp").text and len(engine.calls) == 3  # version 1, written again


def _keys(path: Path) -> list[tuple[str, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT site, path, query, model, template, posts FROM pages").fetchall()


def test_a_rewrite_of_a_page_forgotten_and_written_again_meanwhile_is_not_stored(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    """A rewrite keeps its version's other bytes. Forgotten while it runs, and written again as version 1 by another
    process, the page would get the forgotten text back as version 2: it is not stored, and its watcher is told."""
    engine = FakeEngine(delay=0.2)
    client = client_factory(all_sites, engine)
    visit(client, "/wiki/Lisp")  # version 1
    (key,) = {PageKey(*row) for row in _keys(tmp_path / "db0.sqlite3")}
    form = {"site": "wiki", "url": "/Lisp", "section": "2"}
    live = client.post("/_genui/rewrite", data=form, headers={**HTMX, "Origin": "http://testserver"}).text
    with concurrent.futures.ThreadPoolExecutor(1) as watcher:
        messages = watcher.submit(ws_messages, client, live_url(live))
        time.sleep(0.1)
        store = Store(tmp_path / "db0.sqlite3")  # genui cache forget, then another server writing version 1 again
        try:
            assert store.forget("wiki", "/Lisp") == 1
            store.save_page(key, 1, seed=0, title="Lisp", html="<h1>Lisp</h1><p>fresh</p>", seconds=0.1)
        finally:
            store.close()
        assert "earlier versions were deleted" in messages.result(timeout=30)[-1]
    with contextlib.closing(sqlite3.connect(tmp_path / "db0.sqlite3")) as db:
        rows = db.execute("SELECT version, html FROM pages WHERE site = 'wiki' AND path = '/Lisp'").fetchall()
    assert rows == [(1, "<h1>Lisp</h1><p>fresh</p>")]


def test_an_empty_path_forgets_nothing(db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `genui cache forget wiki "$PAGE"` with PAGE unset must not forget the front page
    before = Store(db).page_groups()
    assert cache(db, sites_dir, "forget", "wiki", "") == 2
    assert "name the page's site-relative URL" in capsys.readouterr().err and Store(db).page_groups() == before


def test_a_cache_another_process_holds_exclusively_is_one_it_cannot_read_not_another_programs(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as holder:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        assert cache(db, sites_dir) == 2
    err = capsys.readouterr().err
    assert f"cannot read {db}: database is locked" in err and "not a page cache" not in err


@pytest.mark.parametrize(
    ("error", "said"),
    [
        ("database is locked", "stop the server that uses it, and prune again"),
        ("database or disk is full", "VACUUM needs about the file's size free on its disk"),
        ("disk I/O error", "(disk I/O error)\n"),
    ],
)
def test_a_vacuum_that_fails_says_why_not_always_to_stop_a_server(
    db: Path,
    sites_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: str,
    said: str,
) -> None:
    def failing(self: Store) -> bool:
        exc = sqlite3.OperationalError(error)
        exc.sqlite_errorname = "SQLITE_BUSY" if "locked" in error else "SQLITE_FULL"  # type: ignore[attr-defined]
        raise exc

    monkeypatch.setattr(Store, "vacuum", failing)
    assert cache(db, sites_dir, "prune", "--vacuum") == 2
    err = capsys.readouterr().err
    assert said in err and ("stop the server" in err) == ("locked" in error)


def test_a_backup_taken_while_a_server_writes_holds_every_post_it_acknowledged_and_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp genui.sqlite3` while serving lacked 213 of 767 acknowledged posts (they were in its -wal), and a copy
    taken around a checkpoint was damaged (an operator's review): genui cache backup copies it whole."""
    from starlette.testclient import TestClient

    from genui.app import create_app

    db, out = tmp_path / "live.sqlite3", tmp_path / "backup.sqlite3"
    forum = load_site(SITES_DIR / "forum")
    thread = "/r/lisp/Macros"
    with TestClient(create_app([forum], FakeEngine(), db_path=db)) as client:
        visit(client, thread)
        for n in range(30):
            assert client.post(thread, data={"user": "ada", "text": f"post {n}"}, follow_redirects=False).is_redirect
        assert Path(f"{db}-wal").stat().st_size > 0  # what the server committed is in its -wal, not yet in the file
        assert main(["cache", "backup", str(out), "--db", str(db)]) == 0
        said = capsys.readouterr().out
        assert said.startswith(f"{db} -> {out}: ") and said.rstrip().endswith("30 posts")
        # readers' names and posts, for its owner only, as the page cache and its -wal and -shm are (a review)
        for private in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), out):
            assert private.stat().st_mode & 0o777 == 0o600, private
        assert main(["cache", "backup", str(out), "--db", str(db)]) == 2  # never over a file
        assert f"{out} exists" in capsys.readouterr().err
        client.post(thread, data={"user": "bob", "text": "after the backup"}, follow_redirects=False)
    # restored as the help says: the server stopped, the -wal and -shm gone, the copy in the file's place
    for leftover in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    out.replace(db)
    with TestClient(create_app([forum], FakeEngine(), db_path=db)) as client:
        shown = visit(client, thread).text
    assert all(f"post {n}</p>" in shown for n in range(30)) and "after the backup" not in shown


def test_a_backup_leaves_an_earlier_genuis_file_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A backup opened the file through Store, which brings an earlier genui's file up to today's layout: it changed
    the file it copied (and failed on a read-only one; an operator's upgrade review)."""
    db, out = tmp_path / "earlier.sqlite3", tmp_path / "backup.sqlite3"
    with contextlib.closing(sqlite3.connect(db)) as earlier:  # the columns every genui made its tables with
        earlier.execute(
            "CREATE TABLE pages (site TEXT, path TEXT, query TEXT, model TEXT, template TEXT, posts INTEGER,"
            " version INTEGER, seed INTEGER, title TEXT, html TEXT, seconds REAL, created REAL,"
            " PRIMARY KEY (site, path, query, model, template, posts, version))"
        )
        earlier.execute(
            "CREATE TABLE posts (id INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT, path TEXT, user TEXT, text TEXT,"
            " created REAL)"
        )
        earlier.execute(
            "INSERT INTO posts (site, path, user, text, created) VALUES ('forum', '/r/a/b', 'ada', 'hi', 1)"
        )
        earlier.commit()
    before = db.read_bytes()
    assert main(["cache", "backup", str(out), "--db", str(db)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("0 page versions, 1 post")
    assert db.read_bytes() == before


def test_cache_show_points_at_the_sites_genui_new_made_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run where `genui new` wrote a site, `genui cache` listed its pages as another site's and said no more, where
    genui sites says "./sites holds sites too" (a hackathon team's walkthrough)."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "club"]) == 0
    store = Store(tmp_path / "genui.sqlite3")
    save(store, "club", "/", MODEL, "t1")
    store.close()
    capsys.readouterr()
    assert main(["cache", "--db", "genui.sqlite3", "--model", MODEL]) == 0
    said = capsys.readouterr()
    assert (
        "other site" in said.out and "note: ./sites holds club, listed as other site: add --sites-dir sites" in said.err
    )
    assert main(["cache", "--db", "genui.sqlite3", "--model", MODEL, "--sites-dir", "sites"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_a_site_renamed_is_said_in_the_log_and_its_pages_and_posts_follow_it_by_cache_rename(
    sites_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A site whose name changed was served from nothing, its readers' posts left under the old name with no word
    of them (a hackathon team's review)."""
    db, thread = tmp_path / "genui.sqlite3", "/r/hacking/My_first_lisp"
    engine = FakeEngine(model_id=MODEL)
    with TestClient(create_app([load_site(sites_dir / "forum")], engine, db_path=db)) as client:
        assert visit(client, thread).status_code == 200
        assert client.post(thread, data={"user": "ada", "text": "kept"}, follow_redirects=False).status_code == 303
        assert eventually(lambda: "Welcome, ada!" in visit(client, thread).text)
    toml = sites_dir / "forum" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('name = "forum"', 'name = "board"'), encoding="utf-8")
    renamed = load_site(sites_dir / "forum")
    with caplog.at_level(logging.WARNING, "genui"), TestClient(create_app([renamed], engine, db_path=db)) as client:
        assert "kept" not in visit(client, thread).text  # served from nothing: written again
    said = [record.getMessage() for record in caplog.records if "was served as 'forum' before" in record.getMessage()]
    assert len(said) == 1 and "run genui cache rename forum board" in said[0] and "1 readers' post(s)" in said[0]
    capsys.readouterr()
    assert main(["cache", "rename", "forum", "board", "--db", str(db)]) == 2  # the page written since is the new name's
    assert (
        "'board' holds 1 page version(s) already (written since the rename): add --replace" in capsys.readouterr().err
    )
    assert main(["cache", "rename", "forum", "board", "--db", str(db), "--replace"]) == 0
    assert capsys.readouterr().out == (
        "forum is board now: 2 page versions and 1 reader post moved, after deleting 1 page version of board's\n"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, "genui"), TestClient(create_app([renamed], engine, db_path=db)) as client:
        page = visit(client, thread).text
        assert "kept" in page and "Welcome, ada!" in page and 'aria-current="page">2</a>' in page
    assert not [record for record in caplog.records if "served as" in record.getMessage()]  # said no more
    assert main(["cache", "rename", "forum", "board", "--db", str(db)]) == 2
    assert "holds nothing of a site named 'forum'" in capsys.readouterr().err


def test_a_rename_takes_the_pages_images_of_the_sites_assets_with_it(tmp_path: Path) -> None:
    """asset() writes the site's name into a page's images: after a rename they named a folder no site has."""
    store = Store(tmp_path / "genui.sqlite3")
    logo = '<p><img src="/_genui/assets/shop/logo.png" alt="Shop"></p>'
    for version in (1, 2, 3):  # the earlier ones stored as what follows the one before (_compact)
        store.save_page(PageKey("shop", "/", "", MODEL, "t"), version, 0, "Shop", logo * version, 0.1)
    store.save_page(PageKey("other", "/", "", MODEL, "t"), 1, 0, "Other", logo, 0.1)  # another site's: left alone
    assert store.rename_site("shop", "maps") == (3, 0, 0)
    renamed = logo.replace("/shop/", "/maps/")
    assert [store.page(PageKey("maps", "/", "", MODEL, "t"), v).html for v in (1, 2, 3)] == [
        renamed * n for n in (1, 2, 3)
    ]  # type: ignore[union-attr]
    assert store.page(PageKey("other", "/", "", MODEL, "t")).html == logo  # type: ignore[union-attr]
    store.close()


def test_a_rename_to_a_name_no_site_can_have_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "rename", "forum", "Board", "--db", str(tmp_path / "genui.sqlite3")]) == 2
    assert "'Board' is no site's name" in capsys.readouterr().err


def _aged(db: Path, days: float, seen_days: float | None = None, **key: str) -> None:
    """Every version of the pages matching ``key`` written ``days`` ago, and shown ``seen_days`` ago (never: None)."""
    now = time.time()
    where = " AND ".join(f"{name} = ?" for name in key) or "1"
    seen = None if seen_days is None else now - seen_days * 86_400
    with contextlib.closing(sqlite3.connect(db)) as made, made:
        made.execute(
            f"UPDATE pages SET created = ?, seen = ? WHERE {where}", (now - days * 86_400, seen, *key.values())
        )


def test_prune_unseen_deletes_the_pages_nobody_was_shown_and_keeps_threads_with_posts(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A public server's cache grew by every page a click wrote, with no bound but deleting a config's or a model's
    pages whole (session 64's note): --unseen lets go of what nobody reads."""
    _aged(db, 40)  # every page written 40 days ago, none shown since
    _aged(db, 40, 2, site="wiki", path="/Unix", model=MODEL)  # but this one, shown two days ago
    # the wiki's pages are an earlier config's (the fixture edits its brief): counted once, as that
    assert cache(db, sites_dir, "prune", "--unseen", "30", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "would delete 4 versions of 3 pages" in out and "and 0 versions of 0 pages not shown in 30 days" in out
    (sites_dir / "wiki" / "site.toml").write_text(
        (sites_dir / "wiki" / "site.toml").read_text().replace("An encyclopedia", "A free encyclopedia")
    )  # the config as it is: only --unseen deletes them
    assert cache(db, sites_dir, "prune", "--unseen", "30", "--dry-run") == 0
    out = capsys.readouterr().out
    # the wiki's /Lisp by both models (3 versions); /Unix was shown, the thread holds a post, the shop is not checked
    assert "would delete 0 versions of 0 pages" in out and "and 3 versions of 2 pages not shown in 30 days" in out
    assert len(_keys(db)) == 6  # a dry run deletes nothing
    _aged(db, 40, None, site="wiki")  # /Unix unshown too
    assert cache(db, sites_dir, "prune", "--unseen", "30") == 0
    assert "and 4 versions of 3 pages not shown in 30 days" in capsys.readouterr().out
    assert {(site, path) for site, path, *_ in _keys(db)} == {("forum", "/r/lisp/Macros"), ("shop", "/")}
    assert [post.user for post in Store(db).posts("forum", "/r/lisp/Macros")] == ["ada"]


@pytest.mark.parametrize("days", ["0", "-3", "1.5", "forever"])
def test_prune_unseen_takes_a_whole_number_of_days(
    db: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str], days: str
) -> None:
    with pytest.raises(SystemExit):
        cache(db, sites_dir, "prune", "--unseen", days)
    assert f"expected a whole number of days from 1 to 36500, got {days!r}" in capsys.readouterr().err


def test_a_page_shown_from_the_cache_is_noted_as_seen_and_an_earlier_cache_counts_as_seen_when_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pages.sqlite3"
    with TestClient(create_app([load_site(SITES_DIR / "wiki")], FakeEngine(), db_path=path)) as client:
        visit(client, "/Lisp")  # written: its run's page, not yet shown from the cache
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("SELECT seen FROM pages").fetchall() == [(None,)]
        before = time.time()
        assert client.get("/Lisp").status_code == 200  # shown from the cache: noted within a minute, or at shutdown
    with contextlib.closing(sqlite3.connect(path)) as db:
        ((seen,),) = db.execute("SELECT seen FROM pages").fetchall()
        assert seen >= before
        db.execute("ALTER TABLE pages DROP COLUMN seen")  # as a genui before noting them made it
        db.commit()
    opened = time.time()
    Store(path).close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        ((seen,),) = db.execute("SELECT seen FROM pages").fetchall()
        assert seen >= opened  # none of its pages is taken for unread: nothing noted their readers before


def test_pages_shown_while_another_process_holds_the_cache_are_noted_the_next_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from genui.seen import Seen

    path = tmp_path / "pages.sqlite3"
    store = Store(path)
    save(store, "wiki", "/Lisp", MODEL, "t")
    seen = Seen(store, every=0.0)  # noted at each page shown
    key = PageKey("wiki", "/Lisp", "", MODEL, "t")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # a writer in another process: nothing waits for it
        before, started = time.time(), time.monotonic()
        seen.shown(key, 1)
        assert time.monotonic() - started < 1.0
        other.execute("ROLLBACK")
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT seen FROM pages").fetchall() == [(None,)]
    seen.note()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT seen FROM pages").fetchone()[0] >= before  # the mark kept, noted now
    path.unlink()  # gone: said once in the log, and the page is served all the same
    with caplog.at_level(logging.WARNING, logger="genui"):
        seen.shown(key, 1)
        seen.shown(key, 1)
    assert sum("could not note" in record.getMessage() for record in caplog.records) == 1
    store.close()


def test_a_page_shown_is_noted_a_minute_later_though_no_other_page_is_shown(tmp_path: Path) -> None:
    """The note waited for the next page shown a minute after the last note: on a quiet server the last pages shown
    were noted only at shutdown, or never after a crash, and pruned as unread (a review)."""
    import asyncio

    from genui.seen import Seen

    path = tmp_path / "pages.sqlite3"
    store = Store(path)
    save(store, "wiki", "/Lisp", MODEL, "t")

    async def show_once() -> None:
        seen = Seen(store, every=0.1)
        seen.shown(PageKey("wiki", "/Lisp", "", MODEL, "t"), 1)
        await asyncio.sleep(0.4)  # nothing else happens

    asyncio.run(show_once())
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT seen FROM pages").fetchone()[0] is not None
    store.close()


def test_pages_lists_what_a_server_shows_newest_first_with_versions_and_posts(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A curator could count pages by route (genui cache show) but not see which: forget's own error pointed there."""
    path = tmp_path / "genui.sqlite3"
    store = Store(path)
    article = version_of(sites_dir, "wiki", "/{title}")
    save(store, "wiki", "/Lisp", MODEL, article, versions=2)
    save(store, "wiki", "/Lisp", OTHER, article)  # another model's: its server shows it, not this one
    save(store, "wiki", "/Old", MODEL, "0123456789abcdef")  # an earlier config's
    save(store, "forum", "/r/lisp/Macros", MODEL, version_of(sites_dir, "forum", "/r/{board}/{thread}"))
    store.add_post("forum", "/r/lisp/Macros", "ada", "How do macros expand?")
    title = "Unix\x1b[2J\u202e"  # a title a terminal would obey: cleared screen, text turned right to left
    store.save_page(PageKey("wiki", "/Unix", "", MODEL, article), 1, 0, title, "<p>Unix</p>", 0.1)
    store.close()

    assert cache(path, sites_dir, "pages", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    rows = [(p["site"], p["url"], p["versions"], p["newest"], p["posts"]) for p in listed["pages"]]
    assert rows == [("wiki", "/Unix", 1, 1, None), ("forum", "/r/lisp/Macros", 1, 1, 1), ("wiki", "/Lisp", 2, 2, None)]
    assert listed["model"] == MODEL and listed["more"] is False and listed["pages"][2]["seen"] is None

    assert cache(path, sites_dir, "pages") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["site", "address", "title", "versions", "written", "last", "shown", "posts"]
    assert lines[1].startswith("wiki   /Unix           Unix\\x1b[2J\\u202e") and lines[2].rstrip().endswith(" 1")
    assert len(lines) == 4 and lines[3].split()[:4] == ["wiki", "/Lisp", "/Lisp", "2"]

    assert cache(path, sites_dir, "pages", "--site", "forum", "--limit", "1") == 0
    out, err = capsys.readouterr()
    assert "/r/lisp/Macros" in out and "/Unix" not in out and err == ""
    assert cache(path, sites_dir, "pages", "--limit", "1") == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2 and "the newest 1 page; more are stored: --limit 0 lists them all" in err


def test_pages_of_a_cache_without_any_say_so(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "genui.sqlite3"
    Store(path).close()
    assert cache(path, sites_dir, "pages", "--site", "wiki") == 0
    assert capsys.readouterr().out == f"no pages of wiki by {MODEL} in {path}\n"


def test_prune_other_models_without_a_model_keeps_the_pages_of_the_model_a_server_runs(
    tmp_path: Path, sites_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A curator who served another checkpoint ran prune --other-models without --model (a cron line) and lost every
    page of it: the default model's are what it keeps."""
    from genui.arguments import model_id_of

    path = tmp_path / "genui.sqlite3"
    store = Store(path)
    article = version_of(sites_dir, "wiki", "/{title}")
    save(store, "wiki", "/Lisp", model_id_of(None), article)
    save(store, "wiki", "/Unix", OTHER, article)  # the newest: the model the server runs now
    store.close()
    argv = ["cache", "prune", "--other-models", "--db", str(path), "--sites-dir", str(sites_dir)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "wiki's newest page" in err and f"was written by {OTHER}, not the default model" in err
    assert "Name the model its server runs with --model" in err
    with contextlib.closing(Store(path)) as kept:
        assert kept.page(PageKey("wiki", "/Unix", "", OTHER, article)) is not None
    assert main([*argv, "--model", OTHER]) == 0  # named: the default model's page goes, as asked
    with contextlib.closing(Store(path)) as kept:
        assert kept.page(PageKey("wiki", "/Lisp", "", model_id_of(None), article)) is None
    # the default model's newest: nothing to refuse
    with contextlib.closing(Store(path)) as store:
        save(store, "wiki", "/Lisp", model_id_of(None), article)
    assert main(argv) == 0 and "deleted 1 version" in capsys.readouterr().out
