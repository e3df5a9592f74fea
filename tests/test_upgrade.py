"""A page cache an earlier genui wrote: its pages are served again under today's keys, with links for this mount."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine, eventually, example_sites, page_html, pages_of, visit, ws_messages
from starlette.testclient import TestClient
from test_app import live_url

from genui.app import create_app
from genui.cli import main
from genui.runtime import SiteRuntime
from genui.sites import load_site
from genui.store import PageKey, Store
from genui.upgrade import adopt_earlier_pages, earlier_version, written_mount

THREAD = "/r/lisp/Macros"
MODEL = "owner/model-a"


def earlier_cache(path: Path, html: str) -> None:
    """A cache as genui wrote it before session 45: a forum thread under its route's version of then, no mount."""
    forum = load_site(SITES_DIR / "forum")
    thread = next(route for route in forum.routes if route.pattern == "/r/{board}/{thread}")
    with closing(sqlite3.connect(path)) as db:
        db.execute(
            "CREATE TABLE pages (site TEXT NOT NULL, path TEXT NOT NULL, query TEXT NOT NULL, model TEXT NOT NULL,"
            " template TEXT NOT NULL, posts INTEGER NOT NULL, version INTEGER NOT NULL, seed INTEGER NOT NULL,"
            " title TEXT NOT NULL, html TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL,"
            " answered INTEGER NOT NULL DEFAULT 0, replied INTEGER NOT NULL DEFAULT 0,"
            " PRIMARY KEY (site, path, query, model, template, posts, version))"
        )
        db.execute(
            "CREATE TABLE posts (id INTEGER PRIMARY KEY AUTOINCREMENT, site TEXT NOT NULL, path TEXT NOT NULL,"
            " user TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL)"
        )
        db.execute(
            "INSERT INTO pages VALUES ('forum', ?, '', ?, ?, 0, 1, 0, 'Macros', ?, 1.0, 1.0, 0, 0)",
            (THREAD, MODEL, earlier_version(forum, thread), html),
        )
        db.commit()


def test_a_thread_an_earlier_genui_stored_is_served_again_with_links_for_this_mount(tmp_path: Path) -> None:
    db = tmp_path / "genui.sqlite3"
    link = '<a href="/forum/r/lisp" hx-get="/forum/r/lisp" hx-target="#genui-main">lisp</a>'
    earlier_cache(db, f'<div class="thread"><h1>Macros</h1><p>in {link}</p></div>')
    engine = FakeEngine(model_id=MODEL)
    with TestClient(create_app([load_site(SITES_DIR / "forum")], engine, db_path=db)) as client:
        shown = page_html(client.get(THREAD).text)
    assert engine.calls == []  # served from the cache, not written again
    assert '<a href="/r/lisp" hx-get="/r/lisp" hx-target="#genui-main">lisp</a>' in shown  # written under /forum
    store = Store(db)
    forum = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    thread = next(route for route in forum.site.routes if route.pattern == "/r/{board}/{thread}")
    page = store.page(PageKey("forum", THREAD, "", MODEL, forum.prompts.version(thread)))
    assert page is not None and page.mount == "/forum"


def test_genui_cache_counts_an_earlier_genuis_pages_as_current_so_prune_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    earlier_cache(db, '<div class="thread"><h1>Macros</h1></div>')
    argv = ["cache", "prune", "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(argv) == 0 and "deleted 0 versions" in capsys.readouterr().out
    assert main(["cache", "--json", "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert (group["site"], group["state"], group["route"]) == ("forum", "current", "/r/{board}/{thread}")


@pytest.mark.parametrize(
    ("site", "html", "mount"),
    [
        ("forum", '<a href="/forum/r/lisp" hx-get="/forum/r/lisp">a</a>', "/forum"),
        ("forum", '<a href="/r/lisp" hx-get="/r/lisp">a</a>', ""),
        # the wiki's /wiki/Lisp is a page from / (an alias) and from /wiki: its links cannot tell
        ("wiki", '<a href="/wiki/Lisp" hx-get="/wiki/Lisp">a</a>', None),
        ("wiki", "<p>no links</p>", None),
        # one link no route serves any more does not outvote the rest
        ("forum", '<a href="/forum/r/a" hx-get="/forum/r/a">a</a><a href="/forum/x" hx-get="/forum/x">b</a>', "/forum"),
    ],
)
def test_the_mount_an_earlier_page_was_written_for_is_read_from_its_links(
    site: str, html: str, mount: str | None
) -> None:
    runtime = SiteRuntime.build(next(s for s in example_sites() if s.name == site), "")
    assert written_mount(runtime, html) == mount


def test_pages_of_two_routes_that_shared_an_earlier_version_each_go_to_their_own_route(tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    toml = root / "site.toml"
    notes = '[[routes]]\npattern = "/notes/{title}"\ntemplate = "article.j2"\nopening = "article_opening.j2"\n\n'
    toml.write_text(toml.read_text(encoding="utf-8").replace("[[routes]]", notes + "[[routes]]", 1), "utf-8")
    runtime = SiteRuntime.build(load_site(root), "")
    note, article = (next(r for r in runtime.site.routes if r.pattern == p) for p in ("/notes/{title}", "/{title}"))
    shared = earlier_version(runtime.site, article)
    assert earlier_version(runtime.site, note) == shared  # the same files: once the same version
    store = Store(tmp_path / "genui.sqlite3")
    for path in ("/Lisp", "/notes/Lisp"):
        store.save_page(PageKey("wiki", path, "", MODEL, shared), 1, 0, "Lisp", "<p>Lisp</p>", 0.1)
    assert adopt_earlier_pages(store, runtime) == 2
    for path, route in (("/Lisp", article), ("/notes/Lisp", note)):
        assert store.page(PageKey("wiki", path, "", MODEL, runtime.prompts.version(route))) is not None


def test_warming_a_cache_an_earlier_genui_wrote_passes_its_pages_by_and_prune_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    earlier_cache(db, '<div class="thread"><h1>Macros</h1><p>old replies</p></div>')
    engine = FakeEngine(model_id=MODEL)
    warm = ["cache", "warm", "forum", THREAD, "--pages", "1", "--db", str(db), "--sites-dir", str(SITES_DIR)]
    assert main(warm, load_engine=lambda *_: engine) == 0
    assert engine.calls == [] and "cached" in capsys.readouterr().out  # a stored page: not written again
    assert main(["cache", "prune", "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]) == 0
    with closing(sqlite3.connect(db)) as reader:
        assert reader.execute("SELECT COUNT(*) FROM pages WHERE html LIKE '%old replies%'").fetchone() == (1,)


def test_a_move_leaves_alone_a_page_that_took_the_rowid_of_one_deleted_meanwhile(tmp_path: Path) -> None:
    # pages has no INTEGER PRIMARY KEY: a rowid freed by another process's forget goes to the next page stored
    db = tmp_path / "genui.sqlite3"
    upkeep, server = Store(db), Store(db)
    runtime = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    board, thread = (
        next(r for r in runtime.site.routes if r.pattern == p) for p in ("/r/{board}", "/r/{board}/{thread}")
    )
    earlier = earlier_version(runtime.site, thread)
    upkeep.save_page(PageKey("forum", THREAD, "", MODEL, earlier), 1, 0, "Macros", '<a href="/forum/r/lisp">x</a>', 0.1)
    ((rowid, template, _, _, html),) = upkeep.unkept_mounts("forum", [earlier])  # read ...
    server.forget("forum", THREAD)  # ... meanwhile the thread is forgotten and a board page stored in its rowid
    key = PageKey("forum", "/r/lisp", "", MODEL, runtime.prompts.version(board))
    server.save_page(key, 1, 0, "lisp", "<p>board</p>", 0.1, mount="")
    assert upkeep.move_pages([(rowid, template, runtime.prompts.version(thread), written_mount(runtime, html))]) == 0
    page = server.page(key)
    assert page is not None and page.mount == "" and page.html == "<p>board</p>"


def test_a_pages_versions_move_all_or_none_onto_a_key_written_since(tmp_path: Path) -> None:
    """Today's key holds a version 1 already (the page written since, with --reload, say): the earlier versions 1-3
    stay where they were, whole, rather than 2 and 3 landing on today's 1 and the earlier 1 left to be pruned."""
    runtime = SiteRuntime.build(load_site(SITES_DIR / "wiki"), "")
    article = next(r for r in runtime.site.routes if r.pattern == "/{title}")
    earlier, today = earlier_version(runtime.site, article), runtime.prompts.version(article)
    store = Store(tmp_path / "genui.sqlite3")
    for version in (1, 2, 3):
        store.save_page(PageKey("wiki", "/Lisp", "", MODEL, earlier), version, version - 1, "Lisp", f"old {version}", 1)
        store.save_page(PageKey("wiki", "/Scheme", "", MODEL, earlier), version, version - 1, "Scheme", "s", 1)
    store.save_page(PageKey("wiki", "/Lisp", "", MODEL, today), 1, 0, "Lisp", "new 1", 1.0)
    assert adopt_earlier_pages(store, runtime) == 3  # Scheme's three
    assert store.versions(PageKey("wiki", "/Lisp", "", MODEL, today)) == 1
    kept = [store.page(PageKey("wiki", "/Lisp", "", MODEL, earlier), v) for v in (1, 2, 3)]
    assert [page.html for page in kept if page is not None] == ["old 1", "old 2", "old 3"]
    assert store.versions(PageKey("wiki", "/Scheme", "", MODEL, today)) == 3


def test_a_reload_adopts_an_earlier_genuis_pages_of_the_files_as_they_are_now(tmp_path: Path) -> None:
    """Served while a template was being edited, the earlier pages were not adopted at start; put back as it was,
    the reload adopts them before any visit writes the page again."""
    root = Path(shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki"))
    site = load_site(root)
    article = next(r for r in site.routes if r.pattern == "/{title}")
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    store.save_page(
        PageKey("wiki", "/Lisp", "", MODEL, earlier_version(site, article)), 1, 0, "Lisp", "<h1>Old</h1>", 1
    )
    store.close()
    template = root / "prompts" / "article.j2"
    source = template.read_text(encoding="utf-8")
    template.write_text(source + "\n", encoding="utf-8")  # an edit under way when the server starts
    engine = FakeEngine(model_id=MODEL)
    with TestClient(create_app([load_site(root)], engine, db_path=db, reload=True)) as client:
        pages = pages_of(client)
        before = pages.sites["wiki"]
        template.write_text(source, encoding="utf-8")  # put back while serving
        assert eventually(lambda: pages.sites["wiki"] is not before)
        assert "<h1>Old</h1>" in page_html(client.get("/Lisp").text) and engine.calls == []


async def test_a_reload_while_another_process_holds_the_cache_serves_the_new_config_and_adopts_later(
    tmp_path: Path,
) -> None:
    from genui.pages import Pages
    from genui.reload import SiteReloader

    root = Path(shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki"))
    site = load_site(root)
    article = next(r for r in site.routes if r.pattern == "/{title}")
    store = Store(tmp_path / "genui.sqlite3")
    store.save_page(
        PageKey("wiki", "/Lisp", "", MODEL, earlier_version(site, article)), 1, 0, "Lisp", "<h1>Old</h1>", 1
    )
    pages = Pages([SiteRuntime.build(site, "")], store, FakeEngine(model_id=MODEL))  # type: ignore[arg-type]
    before = pages.sites["wiki"]
    with closing(sqlite3.connect(tmp_path / "genui.sqlite3", isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # genui cache prune --vacuum, say
        assert SiteReloader(pages).reload("wiki")
        other.execute("ROLLBACK")
    assert pages.sites["wiki"] is not before and pages.config_errors == {}
    assert SiteReloader(pages).reload("wiki")  # the next reload adopts them
    assert store.page(PageKey("wiki", "/Lisp", "", MODEL, pages.sites["wiki"].prompts.version(article))) is not None
    store.close()


def test_posts_and_pages_stored_under_a_url_a_route_now_moves_go_to_its_page(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The forum's boards took `case = { board = "lower" }` in session 60: a reply posted to `/r/Linux/Kernel_news`
    before is a reply to `/r/linux/Kernel_news`, the thread the old URL now leads to, and is shown there."""
    db = tmp_path / "genui.sqlite3"
    forum = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    thread = next(route for route in forum.site.routes if route.pattern == "/r/{board}/{thread}")
    version = forum.prompts.version(thread)
    store = Store(db)
    post = store.add_post("forum", "/r/Linux/Kernel_news", "ada", "Which kernel do you run?")
    store.save_page(PageKey("forum", "/r/Linux/Kernel_news", "", MODEL, version), 1, 0, "Kernel news", "<p>A</p>", 1)
    # the same thread at both spellings: the one at its own URL stays, the other is left where it was
    store.save_page(PageKey("forum", "/r/Lisp/Macros", "", MODEL, version), 1, 0, "Macros", "<p>old</p>", 1)
    store.save_page(PageKey("forum", "/r/lisp/Macros", "", MODEL, version), 1, 0, "Macros", "<p>new</p>", 1)
    store.close()
    engine = FakeEngine(model_id=MODEL)
    with (
        caplog.at_level(logging.INFO, logger="genui"),
        TestClient(create_app([forum.site], engine, db_path=db)) as client,
    ):
        shown = client.get("/r/linux/Kernel_news").text
        macros = page_html(client.get("/r/lisp/Macros").text)
    assert "Which kernel do you run?" in shown and "<p>A</p>" in shown and engine.calls == []
    # said at the start, as a thread carried to a new config is (an operator's upgrade review)
    assert "site forum: 1 reader's post and 1 page version stored under an address its routes now move" in caplog.text
    assert "/r/Linux/Kernel_news -> /r/linux/Kernel_news" in caplog.text
    assert "<p>new</p>" in macros
    store = Store(db)
    assert [p.id for p in store.posts("forum", "/r/linux/Kernel_news")] == [post.id]
    assert store.posts("forum", "/r/Linux/Kernel_news") == []
    assert store.page(PageKey("forum", "/r/Lisp/Macros", "", MODEL, version)) is not None  # left, never served
    store.close()


def test_genui_cache_prune_deletes_a_page_left_under_a_url_that_leads_to_another_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    wiki = SiteRuntime.build(load_site(SITES_DIR / "wiki"), "")
    version = wiki.prompts.version(next(route for route in wiki.site.routes if route.pattern == "/{title}"))
    store = Store(db)
    for path in ("/lisp", "/Lisp", "/unix"):
        store.save_page(PageKey("wiki", path, "", MODEL, version), 1, 0, path.strip("/"), f"<p>{path}</p>", 1)
    store.close()
    common = ["--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(["cache", *common]) == 0
    assert "1 page stored under a URL that now leads to another copy of it (wiki /lisp)" in capsys.readouterr().out
    assert main(["cache", "prune", *common]) == 0 and "deleted 1 version" in capsys.readouterr().out
    store = Store(db)
    assert store.page(PageKey("wiki", "/lisp", "", MODEL, version)) is None
    assert store.page(PageKey("wiki", "/Unix", "", MODEL, version)) is not None  # moved: its own URL held none
    assert store.page(PageKey("wiki", "/Lisp", "", MODEL, version)) is not None
    store.close()


def test_genui_posts_lists_a_threads_posts_stored_under_a_url_it_now_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    store.add_post("forum", "/r/Linux/Kernel_news", "ada", "Which kernel?")
    store.close()
    argv = ["posts", "--db", str(db), "--sites-dir", str(SITES_DIR), "--site", "forum"]
    assert main([*argv, "--thread", "/r/Linux/Kernel_news"]) == 0
    assert "forum /r/linux/Kernel_news  ada: Which kernel?" in capsys.readouterr().out


def test_what_says_it_changes_nothing_moves_nothing_and_reports_as_a_server_would_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`genui cache`, `cache prune --dry-run` and `genui posts --thread` brought the cache up to date in the file
    itself: posts moved by a listing, on a file a live server (perhaps of another config) was using."""
    db = tmp_path / "genui.sqlite3"
    wiki = SiteRuntime.build(load_site(SITES_DIR / "wiki"), "")
    version = wiki.prompts.version(next(route for route in wiki.site.routes if route.pattern == "/{title}"))
    store = Store(db)
    for path in ("/lisp", "/Lisp"):
        store.save_page(PageKey("wiki", path, "", MODEL, version), 1, 0, path.strip("/"), f"<p>{path}</p>", 1)
    store.add_post("forum", "/r/Linux/Kernel_news", "ada", "Which kernel?")
    store.close()

    def stored() -> list[tuple[str, ...]]:
        with closing(sqlite3.connect(db)) as look:
            pages = look.execute("SELECT site, path FROM pages ORDER BY path").fetchall()
            return pages + look.execute("SELECT site, path FROM posts").fetchall()

    before = stored()
    common = ["--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(["cache", *common]) == 0
    assert "1 page stored under a URL that now leads to another copy of it (wiki /lisp)" in capsys.readouterr().out
    assert main(["cache", "prune", "--dry-run", *common]) == 0
    assert "and 1 page stored under a URL" in capsys.readouterr().out
    argv = ["posts", "--db", str(db), "--sites-dir", str(SITES_DIR), "--site", "forum"]
    assert main([*argv, "--thread", "/r/Linux/Kernel_news"]) == 0
    assert "forum /r/linux/Kernel_news  ada: Which kernel?" in capsys.readouterr().out
    assert stored() == before
    assert main(["cache", "prune", *common]) == 0 and "deleted 1 version" in capsys.readouterr().out
    assert stored() != before


def test_genui_cache_judges_a_site_by_the_folder_a_server_served_it_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `genui new wiki --dir mine` served with --sites-dir mine: a prune without it judged its pages by the bundled
    wiki's routes, every one an earlier config's, and deleted them all."""
    mine = tmp_path / "mine"
    shutil.copytree(SITES_DIR / "wiki", mine / "wiki")
    (mine / "wiki" / "prompts" / "article.j2").write_text("<p>{{ params.title }}</p>\n", encoding="utf-8")
    db = tmp_path / "genui.sqlite3"
    with TestClient(create_app([load_site(mine / "wiki")], FakeEngine(model_id=MODEL), db_path=db)) as client:
        assert "<h1>Lisp</h1>" in visit(client, "/Lisp").text
    common = ["--db", str(db), "--model", MODEL]
    forget = ["cache", "forget", "wiki", "/Lisp"]  # it deleted what the bundled wiki's routes read the URL as
    for command in (["cache"], ["cache", "prune"], ["cache", "prune", "--dry-run"], forget):
        options = common[:2] if command is forget else common  # forget: every model's versions
        assert main([*command, *options, "--sites-dir", str(SITES_DIR)]) == 2
        assert f"wiki was last served from {(mine / 'wiki').resolve()}" in capsys.readouterr().err
    assert main(["cache", "prune", *common, "--sites-dir", str(mine)]) == 0
    assert "deleted 0 versions" in capsys.readouterr().out
    assert main([*forget, *common[:2], "--sites-dir", str(mine)]) == 0
    assert "forgot 1 version of wiki /Lisp" in capsys.readouterr().out


def two_spellings(db: Path) -> tuple[int, int]:
    """`/r/Linux/Kernel_news` and `/r/linux/Kernel_news` as two threads, each with a post answered in place: the
    ids of ada's post (the first spelling's) and bob's."""
    forum = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    thread = next(route for route in forum.site.routes if route.pattern == "/r/{board}/{thread}")
    store = Store(db)
    ids = []
    for path, user, said in (("/r/Linux/Kernel_news", "ada", "Which kernel?"), ("/r/linux/Kernel_news", "bob", "6.1")):
        key = PageKey("forum", path, "", MODEL, forum.prompts.version(thread))
        post = store.add_post("forum", path, user, said)
        store.save_page(key, 1, 0, "Kernel news", "<p>Kernel news</p>", 1, mount="")
        html = f"<p>Kernel news</p><p>{said}</p><p>a reply</p>"
        store.save_page(key, 2, 1, "Kernel news", html, 1, answered=post.id, replied=post.id, mount="")
        ids.append(post.id)
    store.close()
    return ids[0], ids[1]


def test_a_post_moved_into_a_thread_that_answered_later_posts_is_shown_and_answered(tmp_path: Path) -> None:
    """`/r/Linux/Kernel_news` and `/r/linux/Kernel_news` were two threads, each with a post answered in place. Moved
    into the second, the first's post had an id below what its versions show and answer: in none of them, shown
    below none, answered never."""
    db = tmp_path / "genui.sqlite3"
    two_spellings(db)
    engine = FakeEngine(model_id=MODEL)
    with TestClient(create_app([load_site(SITES_DIR / "forum")], engine, db_path=db)) as client:
        live = client.get("/r/linux/Kernel_news", headers={"HX-Request": "true"}).text
        assert "Which kernel?" in live and "6.1" in live  # bob's in the thread; ada's below it
        assert "Welcome, ada!" in ws_messages(client, live_url(live))[-1]  # and answered in place
    store = Store(db)
    posts = store.posts("forum", "/r/linux/Kernel_news")
    assert [post.user for post in posts] == ["bob", "ada"] and store.posts("forum", "/r/Linux/Kernel_news") == []
    store.close()


def test_genui_posts_lists_a_thread_with_its_moved_posts_by_their_own_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Listed from a copy brought up to date, a post stored again there was shown under the copy's id: `genui posts
    delete` of it deleted another reader's post (found by review)."""
    db = tmp_path / "genui.sqlite3"
    ada, bob = two_spellings(db)
    argv = [
        "posts",
        "--db",
        str(db),
        "--sites-dir",
        str(SITES_DIR),
        "--site",
        "forum",
        "--thread",
        "/r/Linux/Kernel_news",
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:2]] == [str(bob), str(ada)], lines
    assert all("forum /r/linux/Kernel_news" in line for line in lines[:2])
    store = Store(db)
    assert [post.id for post in store.posts("forum", "/r/Linux/Kernel_news")] == [ada]  # moved nothing
    store.close()


def test_posts_moved_into_a_thread_keep_their_order_and_the_versions_moved_with_them_their_marks(
    tmp_path: Path,
) -> None:
    """Only the posts below the thread's marks were stored again: a later post of the old spelling then came before
    an earlier one, and a version moved along (another model's) kept marks that named posts no longer there."""
    db = tmp_path / "genui.sqlite3"
    forum = SiteRuntime.build(load_site(SITES_DIR / "forum"), "")
    thread = next(route for route in forum.site.routes if route.pattern == "/r/{board}/{thread}")
    version = forum.prompts.version(thread)
    old, new = "/r/Linux/Kernel_news", "/r/linux/Kernel_news"
    store = Store(db)
    ada = store.add_post("forum", old, "ada", "first")
    bob = store.add_post("forum", new, "bob", "second")
    store.add_post("forum", old, "carol", "third")
    store.save_page(PageKey("forum", new, "", MODEL, version), 1, 0, "K", "<p>K</p><p>second</p>", 1, answered=bob.id)
    other = PageKey("forum", old, "", "owner/model-b", version)  # another model's thread, moved along
    store.save_page(other, 1, 0, "K", "<p>K</p><p>first</p>", 1, answered=ada.id, replied=ada.id)
    assert store.rehome("forum", {old: new})[:2] == (2, 1)
    moved = store.posts("forum", new)
    assert [post.user for post in moved] == ["bob", "ada", "carol"]
    page = store.page(replace(other, path=new))
    assert page is not None and page.answered == moved[1].id  # ada's new id: what it showed
    store.close()


def test_a_trial_copy_with_no_room_names_the_temporary_folder_not_the_page_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "genui.sqlite3"
    two_spellings(db)

    def full(self: Store, path: Path) -> Store:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "copy_to", full)
    assert main(["cache", "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]) == 2
    err = capsys.readouterr().err
    assert "cannot copy the page cache into" in err and "TMPDIR" in err and str(db) not in err


def test_genui_cache_export_exports_an_earlier_genuis_pages_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`genui cache` counted them current while the export said the cache held no page (found by review)."""
    db = tmp_path / "genui.sqlite3"
    earlier_cache(db, '<div class="thread"><h1>Macros</h1><p>An earlier genui wrote this.</p></div>')

    def rows() -> list[tuple[object, ...]]:
        with closing(sqlite3.connect(db)) as look:
            return look.execute("SELECT site, path, template, version, html FROM pages").fetchall()

    before = rows()
    out = tmp_path / "out"
    argv = ["cache", "export", "forum", str(out), "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(argv) == 0, capsys.readouterr().err
    assert "exported 1 page of forum" in capsys.readouterr().out
    assert "An earlier genui wrote this." in (out / "r" / "lisp" / "Macros" / "index.html").read_text("utf-8")
    assert rows() == before  # the earlier genui's row, under its version of then
