"""genui cache export: a site's cached pages as a folder of static HTML that works with no server and no model."""

from __future__ import annotations

import posixpath
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from chromium import browser_page, collect_problems
from fakes import SITES_DIR, FakeEngine, Writer, visit, wiki_writer
from starlette.testclient import TestClient

from genui.app import create_app
from genui.cli import main
from genui.export import NOT_EXPORTED, file_of
from genui.routing import Location
from genui.sites import load_site
from genui.store import Store

MODEL = "owner/model-x"
HREF = re.compile(r'<a\b[^>]*?\shref="([^"]*)"')


def written(
    db: Path, site: str, urls: list[str], post: tuple[str, str] | None = None, writer: Writer = wiki_writer
) -> None:
    """Write these pages of ``site`` into the page cache at ``db`` as visits would (a fake model), and a reader's
    post on a thread first if asked."""
    engine = FakeEngine(writer, model_id=MODEL)
    with TestClient(create_app([load_site(SITES_DIR / site)], engine, db_path=db)) as client:
        for url in urls:
            assert visit(client, url).status_code == 200, url
        if post is not None:
            thread, text = post
            answer = client.post(thread, data={"user": "ada", "text": text}, follow_redirects=False)
            assert answer.status_code == 303
            assert visit(client, thread).status_code == 200


def exported(tmp_path: Path, site: str, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "out"
    argv = ["cache", "export", site, str(out), "--db", str(tmp_path / "genui.sqlite3")]
    assert main([*argv, "--sites-dir", str(SITES_DIR), "--model", MODEL]) == 0
    assert f"open {out / 'index.html'}" in capsys.readouterr().out
    return out


def test_a_sites_cached_pages_become_files_that_link_to_each_other_and_need_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    written(db, "wiki", ["/", "/Lisp", "/Lisp_tree", "/search?q=lisp"])
    out = exported(tmp_path, "wiki", capsys)
    files = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert files == [
        "Lisp/index.html",
        "Lisp_tree/index.html",
        "_genui/css/wiki.css",
        "_genui/files.txt",
        "_genui/pages.html",
        "_genui/static/favicon.svg",
        "_genui/static/genui.css",
        "index.html",
        "search/~%3Fq=lisp/index.html",
    ]
    lisp = (out / "Lisp" / "index.html").read_text(encoding="utf-8")
    assert "<script" not in lisp and "<form" not in lisp and " hx-" not in lisp and "ws-connect" not in lisp
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';' in lisp
    assert '<meta name="referrer" content="same-origin">' in lisp
    assert 'href="../_genui/static/genui.css"' in lisp and 'href="../_genui/css/wiki.css"' in lisp
    assert 'href="../Lisp_tree/index.html"' in lisp  # the model's /wiki/Lisp_tree, written since
    # never written: a link to the copy's list of pages, with its address after the # (a site's styles match it)
    assert f'<a href="../_genui/pages.html#/Lisp_map" title="{NOT_EXPORTED}">Lisp map</a>' in lisp
    assert "Regenerate" not in lisp and "Every page here is written on the fly" not in lisp
    # the copy's list of its pages: the search, which no page of the copy links to (its form is gone), among them
    listed = (out / "_genui" / "pages.html").read_text(encoding="utf-8")
    assert HREF.findall(listed)[-4:] == [
        "../index.html",
        "../Lisp/index.html",
        "../Lisp_tree/index.html",
        "../search/~%253Fq=lisp/index.html",
    ]
    assert "<title>Every page in this copy — Genpedia</title>" in listed and "<code>/search?q=lisp</code>" in listed
    assert '<a href="../_genui/pages.html">Every page in this copy</a></footer>' in lisp
    for path in [*out.rglob("index.html"), out / "_genui" / "pages.html"]:  # every link leads to a file of the
        # export, from file:// or a web root
        for href in HREF.findall(path.read_text(encoding="utf-8")):
            if not href.startswith("#"):
                target = (path.parent / unquote(href.partition("#")[0])).resolve()
                assert target.is_file() and out.resolve() in target.parents, (path, href)


def test_a_threads_reader_posts_are_in_its_file_as_the_server_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written(tmp_path / "genui.sqlite3", "forum", ["/", "/r/lisp/Macros"], post=("/r/lisp/Macros", "Why <b>macros</b>?"))
    out = exported(tmp_path, "forum", capsys)
    thread = (out / "r" / "lisp" / "Macros" / "index.html").read_text(encoding="utf-8")
    assert "Why &lt;b&gt;macros&lt;/b&gt;?" in thread and "Welcome, ada!" in thread
    assert "<form" not in thread and "<textarea" not in thread


def test_an_export_into_a_folder_that_is_not_empty_or_of_an_empty_cache_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    written(db, "wiki", [])
    argv = ["cache", "export", "wiki", str(tmp_path / "out"), "--db", str(db), "--sites-dir", str(SITES_DIR)]
    assert main([*argv, "--model", MODEL]) == 2
    assert "holds no page of wiki" in capsys.readouterr().err
    written(db, "wiki", ["/"])
    assert main(argv) == 2  # the shipped model's pages: there are none, but another model's
    assert f"it holds pages of {MODEL}: name the model with --model" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me", encoding="utf-8")
    assert main([*argv, "--model", MODEL]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "out" / "mine.txt").read_text(encoding="utf-8") == "keep me"


@pytest.mark.browser
def test_chromium_opens_an_export_from_its_files_and_follows_its_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written(tmp_path / "genui.sqlite3", "wiki", ["/Lisp", "/Lisp_tree", "/"])
    out = exported(tmp_path, "wiki", capsys)
    with browser_page() as page:
        problems = collect_problems(page)
        page.goto((out / "Lisp" / "index.html").as_uri())
        assert page.title() == "Lisp — Genpedia"
        # the site's stylesheet applies under the export's Content-Security-Policy
        assert page.evaluate("getComputedStyle(document.querySelector('.genui-page h1')).fontFamily") != ""
        assert page.evaluate("document.styleSheets.length") == 2
        page.click("text=Lisp tree")
        page.wait_for_url("**/Lisp_tree/index.html")
        assert page.locator("h1").first.inner_text() == "Lisp tree"
        assert page.evaluate("document.scripts.length") == 0
        page.click(".genui-brand")
        page.wait_for_url(f"{out.as_uri()}/index.html")
    assert problems == []


@pytest.mark.browser
def test_pages_with_other_scripts_names_have_files_of_those_names_and_their_links_find_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`/Crème_brûlée` was the folder `Cr%C3%A8me_br%C3%BBl%C3%A9e`, linked as `Cr%25C3%25A8me…`: the copy's address
    bar read so, and its own address, typed, was no page (a review of a site in another language)."""
    written(
        tmp_path / "genui.sqlite3", "wiki", ["/", "/Crème_brûlée", "/Crème_brûlée_tree", "/東京", "/Crème_brûlée%3F"]
    )
    out = exported(tmp_path, "wiki", capsys)
    names = {str(path.relative_to(out)) for path in out.rglob("index.html")}
    assert {"Crème_brûlée/index.html", "Crème_brûlée_tree/index.html", "東京/index.html"} <= names, names
    assert "Crème_brûlée%3F/index.html" in names  # (the wiki's titles: spaces are _; what Windows refuses, escaped)
    with browser_page() as page:
        problems = collect_problems(page)
        page.goto((out / "Crème_brûlée" / "index.html").as_uri())
        page.click("text=Crème brûlée tree")
        page.wait_for_url("**/Cr%C3%A8me_br%C3%BBl%C3%A9e_tree/index.html")  # encoded once, as any address
        assert page.locator("h1").first.inner_text() == "Crème brûlée tree"
    assert problems == []


def test_names_no_file_system_refuses_and_no_page_takes_another_pages_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`/files/usr/index.html` beside `/files/usr` (whose file that name was), `Category:Lisp` (a link whose first
    segment holds a colon would read as a URL scheme), `What?` (Windows refuses `?` and `:` in a name), `~x`."""
    db = tmp_path / "genui.sqlite3"
    written(db, "os", ["/", "/files/usr", "/files/usr/index.html", "/files/a:b", "/files/What%3F", "/files/~x"])
    out = exported(tmp_path, "os", capsys)
    names = {str(path.relative_to(out)) for path in out.rglob("index.html")}
    assert names == {
        "index.html",
        "files/usr/index.html",
        "files/usr/~index.html/index.html",
        "files/a%3Ab/index.html",
        "files/What%3F/index.html",
        "files/~~x/index.html",
    }
    for name in names:
        assert not set('?:*"<>|\\') & set(name)


def test_a_path_too_long_for_a_disk_has_a_hashed_file_and_a_page_named_genui_is_no_asset_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of 29 segments of 16 emoji (a legal 499-character path, 5.6 KB percent-encoded) stopped the export
    with "File name too long" and left it half written; a wiki article `/_genui` would take genui's own files'
    folder (a security review)."""
    deep = "/files/" + "/".join(["\U0001f600" * 16] * 29)
    written(tmp_path / "genui.sqlite3", "os", ["/", deep])
    out = exported(tmp_path, "os", capsys)
    (long,) = [path for path in out.rglob("index.html") if path.parent != out]
    assert long.relative_to(out).parts[0] == "~long" and len(str(long.relative_to(out))) < 60
    assert "index.html" in {path.name for path in out.iterdir()} and (out / "_genui" / "static" / "genui.css").is_file()
    route = load_site(SITES_DIR / "wiki").routes[0]  # a catch-all route's page (no example site has one)
    for path, file in (("/_genui/static/genui.css", "~_genui/static/genui.css"), ("/_GENUI", "~_GENUI")):
        assert file_of(Location(route, path, {}, {})) == f"{file}/index.html"


def test_names_windows_keeps_or_changes_and_names_differing_only_in_case_are_files_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Windows keeps `NUL` and `com1.txt` for devices and drops a name's last `.`; macOS and Windows take `Notes` and
    `NOTES` for one name: each page still has a file no other page's is on any of them, and links find it."""
    pages = [
        "/files/NUL",
        "/files/com1.txt",
        "/files/COM¹",  # kept as it is since other scripts' names are, and Windows' device too (a review)
        "/files/etc.",
        "/files/etc",
        "/files/Notes",
        "/files/NOTES",
        "/files/notes",
    ]

    def writer(prompt: str, seed: int) -> str:  # a folder names its path and links to the next folder
        path = re.search(r"<path>/(.*?)</path>", prompt)
        if path is None:
            return "<p>desktop</p>"
        following = pages[(pages.index(f"/files/{path[1]}") + 1) % len(pages)]
        return f'<p>folder {path[1]}</p><p><a href="{following}">next</a></p>'

    written(tmp_path / "genui.sqlite3", "os", ["/", *pages], writer=writer)
    out = exported(tmp_path, "os", capsys)
    names = {str(path.relative_to(out)) for path in out.rglob("index.html")}
    assert names == {
        "index.html",
        "files/~NUL/index.html",
        "files/~com1.txt/index.html",
        "files/~COM¹/index.html",
        "files/etc%2E/index.html",
        "files/etc/index.html",
        "files/NOTES/index.html",  # the first of the three in the order of their URLs
        "files/Notes/~2/index.html",
        "files/notes/~3/index.html",
    }
    assert len({name.lower() for name in names}) == len(names)
    seen = set()
    for name in names - {"index.html"}:  # each file is one page, and its link leads to the next page's file
        shown = (out / name).read_text("utf-8")
        folder = re.search(r"<p>folder (.*?)</p>", shown)
        assert folder is not None, name
        seen.add(folder[1])
        following = pages[(pages.index(f"/files/{folder[1]}") + 1) % len(pages)].removeprefix("/files/")
        href = re.search(r'<a href="([^"]*)">next</a>', shown)
        assert href is not None, name
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(href[1])))
        assert f"<p>folder {following}</p>" in (out / target).read_text("utf-8"), (name, href[1])
    assert seen == {page.removeprefix("/files/") for page in pages}


def test_a_page_written_with_a_footer_of_its_own_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def writer(prompt: str, seed: int) -> str:
        return "<article><h1>Lisp</h1><footer><p>Written in 1958.</p></footer><p>After it.</p></article>"

    written(tmp_path / "genui.sqlite3", "wiki", ["/"], writer=writer)
    home = (exported(tmp_path, "wiki", capsys) / "index.html").read_text(encoding="utf-8")
    assert "<footer><p>Written in 1958.</p></footer><p>After it.</p>" in home
    assert home.count("A static copy of pages written by") == 1 and home.count("</footer>") == 2


def test_the_copys_footer_is_in_the_sites_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A French site's copy said "A static copy of pages written by … with genui." in English, with no [words] key
    to say it otherwise (a hackathon team's walkthrough)."""
    sites = tmp_path / "sites"
    shutil.copytree(SITES_DIR / "wiki", sites / "wiki")
    toml = sites / "wiki" / "site.toml"
    toml.write_text(
        toml.read_text("utf-8")
        + '\n[words]\ncopy_footer = "Copie statique de pages écrites par {model}."\n'
        + 'not_in_copy = "absente de cette copie"\n'
    )
    db = tmp_path / "genui.sqlite3"
    with TestClient(create_app([load_site(sites / "wiki")], FakeEngine(model_id="a<b"), db_path=db)) as client:
        assert visit(client, "/").status_code == 200
    out = tmp_path / "out"
    assert (
        main(["cache", "export", "wiki", str(out), "--db", str(db), "--sites-dir", str(sites), "--model", "a<b"]) == 0
    )
    home = (out / "index.html").read_text("utf-8")
    assert "Copie statique de pages écrites par <code>a&lt;b</code>." in home and "A static copy" not in home
    assert 'title="absente de cette copie"' in home and NOT_EXPORTED not in home  # its links to pages not copied


def test_a_colon_in_a_pages_name_is_no_scheme_in_its_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written(tmp_path / "genui.sqlite3", "wiki", ["/Category:Lisp", "/"])
    home = (exported(tmp_path, "wiki", capsys) / "index.html").read_text(encoding="utf-8")
    assert 'href="./Category%253ALisp/index.html"' in home  # the file Category%3ALisp/index.html


def test_a_thread_says_nothing_of_a_model_loading_in_its_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A post made while no model was loaded waits for its replies; the copy, fetched while the app's model "loads",
    must not say that genui is loading it."""
    db = tmp_path / "genui.sqlite3"
    written(db, "forum", ["/", "/r/lisp/Macros"])
    Store(db).add_post("forum", "/r/lisp/Macros", "ada", "Still there?")
    thread = (exported(tmp_path, "forum", capsys) / "r" / "lisp" / "Macros" / "index.html").read_text(encoding="utf-8")
    assert "Still there?" in thread and "loading its model" not in thread and "Open the thread again" not in thread


def test_the_desktops_icons_keep_their_look_in_the_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sites/os/os.css draws each icon by where it leads (`a.genui-icon[href*="/terminal"]`): the copy's shortest
    relative links (`terminal/~%253Fcmd=ls/index.html`, `index.html` for the screen open) made every icon of the
    exported desktop a plain folder (a publisher's review). Each link now goes up to the copy's folder and down the
    page's whole path, from every page; an icon of a page not in the copy kept its look too."""
    # each icon's label, and what os.css looks for in its link
    # (the browser's page is not in the copy: its icon leads to the copy's list of pages, and looks as it does)
    icons = {
        "Home": "/files/",
        "Terminal": "/terminal",
        "Settings": "/settings",
        "Notes": "/view/",
        "Browser": "/browser",
    }
    urls = ["/files/home/user", "/terminal?cmd=ls", "/settings/display", "/view/home/user/notes.txt"]
    written(tmp_path / "genui.sqlite3", "os", ["/", *urls])
    out = exported(tmp_path, "os", capsys)
    for path in out.rglob("index.html"):
        page = path.read_text(encoding="utf-8")
        for label, look in icons.items():
            (href,) = re.findall(rf'<a class="genui-icon" href="([^"]*)"[^>]*>{label}<', page)
            assert look in href, (path, href)


def test_an_export_is_no_visit_and_says_what_of_the_site_it_leaves_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exporting noted every page as shown, so `prune --unseen` kept pages no reader had seen for months; and pages
    another model wrote, or an earlier config of the site wrote, were left out of the copy without a word ("exported
    1 page" of a site of six: a publisher's review)."""
    root = Path(shutil.copytree(SITES_DIR / "wiki", tmp_path / "sites" / "wiki"))
    db = tmp_path / "genui.sqlite3"

    def write(model: str, urls: list[str]) -> None:
        with TestClient(create_app([load_site(root)], FakeEngine(model_id=model), db_path=db)) as client:
            for url in urls:
                assert visit(client, url).status_code == 200, url

    write(MODEL, ["/Scheme", "/Forth"])  # then the articles' prompt is edited: these two are an earlier config's
    article = root / "prompts" / "article.j2"
    article.write_text(article.read_text(encoding="utf-8") + "{# tweaked #}\n", encoding="utf-8")
    write(MODEL, ["/", "/Lisp"])
    write("other/model", ["/Lisp", "/Prolog", "/ML"])
    store = Store(db)
    store._db.execute("UPDATE pages SET seen = 1000, created = 1000")  # written and last shown long ago
    store.close()
    out = tmp_path / "out"
    argv = ["cache", "export", "wiki", str(out), "--db", str(db), "--sites-dir", str(tmp_path / "sites")]
    assert main([*argv, "--model", MODEL]) == 0
    said = capsys.readouterr().out
    # /Lisp, which other/model wrote too, is in the copy: not said left out (a review of the first count)
    assert "left out 2 pages written by other/model (--model other/model exports those)" in said
    assert "left out 2 pages written from an earlier config of the site's routes" in said
    assert "exported 2 pages of wiki" in said and (out / "Lisp" / "index.html").is_file()
    store = Store(db)
    assert store._db.execute("SELECT MAX(seen) FROM pages").fetchone() == (1000,)  # nothing shown to a reader
    store.close()


def test_a_copy_into_a_file_or_a_folder_it_cannot_write_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file named as the copy's folder was "not an empty folder", and one under a file or in /proc a Python error
    ("[Errno 20] Not a directory"; a publisher's review)."""
    written(tmp_path / "genui.sqlite3", "wiki", ["/", "/Lisp"])
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    argv = ["--db", str(tmp_path / "genui.sqlite3"), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(["cache", "export", "wiki", str(afile), *argv]) == 2
    assert f"{afile} is a file, not a folder: name a new folder" in capsys.readouterr().err
    assert main(["cache", "export", "wiki", str(afile / "sub"), *argv]) == 2
    said = capsys.readouterr().err
    assert f"cannot write the copy in {afile / 'sub'}: Not a directory" in said and "name a folder you can" in said
    assert afile.read_text(encoding="utf-8") == "mine"


def test_a_querys_letters_stay_as_they_are_in_its_files_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path's letters of any script stay as they are in its folder's name, and a query's were encoded twice
    (`search/~%3Fq=caf%25C3%25A9+au+lait`: a publisher's review); queries that differ still have files apart."""
    queries = ["/search?q=café au lait", "/search?q=a%2Bb", "/search?q=a+b", "/search?q=etc.", "/search?q=etc"]
    written(tmp_path / "genui.sqlite3", "wiki", ["/", *queries])
    out = exported(tmp_path, "wiki", capsys)
    assert sorted(path.parent.name for path in (out / "search").glob("*/index.html")) == [
        "~%3Fq=a%20b",
        "~%3Fq=a%2Bb",
        "~%3Fq=café%20au%20lait",
        "~%3Fq=etc",
        "~%3Fq=etc%2E",  # a name's last dot, which Windows drops: one folder with the other's there
    ]


def test_a_copy_without_its_front_page_opens_on_its_list_of_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no front page in the cache, the copy's folder had no index.html: a web host answered 403 at its root (a
    publisher's review). Its list of pages is its index.html then."""
    written(tmp_path / "genui.sqlite3", "wiki", ["/Lisp", "/Scheme"])
    out = tmp_path / "out"
    argv = ["cache", "export", "wiki", str(out), "--db", str(tmp_path / "genui.sqlite3"), "--model", MODEL]
    assert main([*argv, "--sites-dir", str(SITES_DIR)]) == 0
    assert f"exported 2 pages of wiki to {out}; open {out / 'index.html'}" in capsys.readouterr().out
    front = (out / "index.html").read_text(encoding="utf-8")
    assert HREF.findall(front)[-2:] == ["./Lisp/index.html", "./Scheme/index.html"]
    assert '<link rel="stylesheet" href="./_genui/css/wiki.css">' in front and '<body class="genui site-wiki">' in front


def test_export_page_copies_only_the_pages_named_and_links_the_others_to_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A publisher picking a demo's best pages (genui cache pages lists them) had to export the whole site."""
    written(tmp_path / "genui.sqlite3", "wiki", ["/", "/Lisp", "/Lisp_tree", "/Unix"])
    out = tmp_path / "out"
    argv = ["cache", "export", "wiki", str(out), "--db", str(tmp_path / "genui.sqlite3"), "--model", MODEL]
    argv += ["--sites-dir", str(SITES_DIR), "--page", "/Lisp", "--page", "http://127.0.0.1:8000/wiki/Lisp_tree"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "left out 2 pages not named with --page" in said and "exported 2 pages of wiki" in said
    files = sorted(str(path.relative_to(out)) for path in out.rglob("index.html"))
    assert files == ["Lisp/index.html", "Lisp_tree/index.html", "index.html"]  # index.html: the list, no front page
    lisp = (out / "Lisp" / "index.html").read_text(encoding="utf-8")
    assert (
        'href="../Lisp_tree/index.html"' in lisp
        and f'href="../_genui/pages.html#/Lisp_map" title="{NOT_EXPORTED}"' in lisp
    )

    shutil.rmtree(out)
    assert main([*argv, "--page", "/Nowhere"]) == 2
    assert "holds no page of wiki at /Nowhere" in capsys.readouterr().err and not out.exists()


def test_export_replace_writes_a_copy_again_in_the_place_of_the_one_before_and_only_of_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publisher exporting again after the site grew had to empty the folder their web server serves first, which
    showed readers a site half gone meanwhile; --replace writes beside it, then swaps, and refuses other folders. The
    publisher's own files beside the copy (a GitHub Pages CNAME, .git) stay (a review)."""
    db = tmp_path / "genui.sqlite3"
    written(db, "wiki", ["/", "/Lisp"])
    out = exported(tmp_path, "wiki", capsys)
    out.chmod(0o751)  # as a publisher set it for their web server
    (out / "CNAME").write_text("wiki.example.org\n", encoding="utf-8")
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    argv = ["cache", "export", "wiki", str(out), "--db", str(db), "--sites-dir", str(SITES_DIR), "--model", MODEL]
    assert main(argv) == 2
    assert "or pass --replace to write this copy again in its place" in capsys.readouterr().err
    written(db, "wiki", ["/Scheme"])
    assert main([*argv, "--replace", "--page", "/", "--page", "/Scheme"]) == 0
    assert "exported 2 pages of wiki" in capsys.readouterr().out
    assert (out / "Scheme" / "index.html").is_file() and not (out / "Lisp").exists()  # the earlier copy's, gone
    assert (out / "CNAME").read_text(encoding="utf-8") == "wiki.example.org\n" and (out / ".git" / "HEAD").is_file()
    assert (out.stat().st_mode & 0o777) == 0o751
    assert sorted(path.name for path in tmp_path.iterdir()) == ["genui.sqlite3", "out"]  # nothing left beside it

    monkeypatch.chdir(out / "Scheme")  # a shell inside the folder: renamed away, it would be left in none
    assert main([*argv, "--replace"]) == 2
    assert "this shell's folder is inside" in capsys.readouterr().err and (out / "Scheme").is_dir()
    monkeypatch.chdir(tmp_path)

    written(db, "wiki", ["/Prolog"])
    (out / "Prolog").write_text("mine", encoding="utf-8")  # a file of the publisher's where the new copy writes a page
    assert main([*argv, "--replace"]) == 2
    assert "is no file of the earlier copy, and the new copy writes one of that name" in capsys.readouterr().err
    assert (out / "Prolog").read_text(encoding="utf-8") == "mine" and (out / "Scheme").is_dir()
    (out / "Prolog").unlink()

    def full(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)  # a disk that fills while the new copy is written
    written(db, "wiki", ["/Prolog"])
    assert main([*argv, "--replace"]) == 2
    said = capsys.readouterr().err
    assert "No space left on device" in said and f"the earlier copy in {out} is as it was" in said, said
    monkeypatch.undo()
    assert (out / "Scheme" / "index.html").is_file() and not (out / "Prolog").exists()
    assert (out / "CNAME").is_file() and (out / ".git" / "HEAD").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["genui.sqlite3", "out"]

    (out / "_genui" / "files.txt").unlink()  # a copy an earlier genui wrote: its files not told from the CNAME
    assert main([*argv, "--replace"]) == 2
    assert "does not list its own files" in capsys.readouterr().err and (out / "CNAME").is_file()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    argv[3] = str(mine)
    assert main([*argv, "--replace"]) == 2
    assert "holds files but no copy genui wrote" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
