"""Sites served under a base path (create_app's base_path, genui serve --base-path): a reverse proxy that serves genui
at https://example.org/demo/ beside other things passes each address on as it is, and every URL a page holds, its
links, genui's scripts and endpoints and the site's images, is under /demo."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import threading
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium import browser_page, collect_problems, served
from fakes import SITES_DIR, ClientFactory, FakeEngine, eventually, example_sites, pages_of, visit, ws_messages
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from test_assets import images_writer, shop_site

from engine.frames import EngineError
from genui.app import create_app
from genui.arguments import base_path, located
from genui.cli import main
from genui.scaffold import create_site
from genui.sites import Site, SiteConfigError, load_site

BASE = "/demo"
FINISHED = "#genui-content:not(.genui-live) .genui-page h1"  # the finished page's heading (a draft is .genui-live)


class _Addresses(HTMLParser):
    """Every address a document holds: its links, scripts, stylesheets, images, forms and streams."""

    ATTRIBUTES = frozenset({"href", "src", "action", "hx-get", "hx-post", "ws-connect", "content"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in self.ATTRIBUTES or name.startswith("data-genui-") and value.startswith("/"):
                self.found.append(value.split("url=", 1)[1] if name == "content" and "url=" in value else value)


def addresses(html: str) -> list[str]:
    """The addresses on this server that ``html`` holds (paths, not fragments or other servers')."""
    parser = _Addresses()
    parser.feed(html)
    return [value for value in parser.found if value.startswith("/")]


def outside(html: str) -> list[str]:
    """The addresses in ``html`` that are not under BASE."""
    return [value for value in addresses(html) if not value.startswith(BASE + "/")]


LOADED = threading.Event()  # set by the test that loads with _never_loads as it ends: the load ends then


def _never_loads() -> FakeEngine:
    LOADED.wait()  # the model loads for as long as the test runs (a load left under way holds the process's exit)
    raise EngineError("the test has ended")


def under(client_factory: ClientFactory, sites: list[Site], engine: FakeEngine | None = None) -> TestClient:
    return client_factory(sites, engine or FakeEngine(), app_options={"base_path": BASE})


def test_every_address_a_page_holds_is_under_the_base_path(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = under(client_factory, all_sites)
    index = client.get(f"{BASE}/")
    assert index.status_code == 200 and f'href="{BASE}/wiki/"' in index.text and not outside(index.text)

    written = client.get(f"{BASE}/wiki/Lisp")  # the shell around the live placeholder
    assert written.status_code == 200 and addresses(written.text) and not outside(written.text)
    live = re.search(r'ws-connect="([^"]+)"', written.text)
    assert live is not None and live[1].startswith(f"{BASE}/_genui/ws?")
    messages = ws_messages(client, live[1].replace("&amp;", "&"))
    assert messages and not outside("".join(messages))

    page = visit(client, f"{BASE}/wiki/Lisp")  # as a browser without scripts: the wait URL, then the page
    assert page.status_code == 200 and f'hx-get="{BASE}/wiki/Lisp_tree"' in page.text and not outside(page.text)
    files = [value for value in addresses(page.text) if "/_genui/static/" in value or "/_genui/css/" in value]
    assert len(files) == 6  # the icon, genui's stylesheet and three scripts, the site's stylesheet: each there
    assert all(client.get(address).status_code == 200 for address in files), files


def test_a_thread_under_the_base_path_takes_a_reply_and_its_toolbar_writes_again(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = under(client_factory, all_sites, FakeEngine())
    thread = f"{BASE}/forum/r/hacking/My_first_lisp"
    shown = visit(client, thread)
    assert f'action="{thread}"' in shown.text and f'action="{BASE}/_genui/regenerate"' in shown.text
    posted = client.post(thread, data={"user": "ada", "text": "nice"}, follow_redirects=False)
    assert posted.status_code == 303 and posted.headers["location"] == thread
    answered = visit(client, thread).text
    assert '<b dir="auto">ada</b>' in answered and "Welcome, ada!" in answered and not outside(answered)
    again = client.post(
        f"{BASE}/_genui/regenerate",
        data={"site": "forum", "url": thread.removeprefix(f"{BASE}/forum")},  # as its toolbar's form has it
        headers={"origin": "http://testserver"},
        follow_redirects=False,
    )
    assert again.status_code == 303 and again.headers["location"].startswith(thread)


def test_a_click_under_the_base_path_names_its_parent_page(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    engine = FakeEngine()
    client = under(client_factory, all_sites, engine)
    visit(client, f"{BASE}/wiki/Lisp")
    visit(client, f"{BASE}/wiki/Lisp_tree", headers={"hx-current-url": f"http://testserver{BASE}/wiki/Lisp"})
    assert "<from>Lisp</from>" in engine.calls[-1].prompt


def test_addresses_with_the_base_path_cut_off_are_answered_as_a_proxy_that_cuts_it_passes_them_on(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """nginx's proxy_pass with a / after the port, Caddy's handle_path: "/" was redirected to /demo/, which the proxy
    cut to "/" again, for ever (a hackathon team's review)."""
    engine = FakeEngine()
    client = under(client_factory, all_sites, engine)
    index = client.get("/", follow_redirects=False)
    assert index.status_code == 200 and f'href="{BASE}/wiki/"' in index.text and not outside(index.text)
    page = visit(client, "/wiki/Lisp")  # the wait URL it leads to is under the base path, and answered
    assert page.status_code == 200 and f'hx-get="{BASE}/wiki/Lisp_tree"' in page.text and not outside(page.text)
    assert client.get("/_genui/static/genui.js").status_code == 200
    assert client.get("/_genui/health").json()["status"] == "ready"
    assert client.get(BASE, follow_redirects=False).headers["location"] == f"{BASE}/"
    assert client.get("/robots.txt").text.startswith("#")  # asked for at the host's root, as a crawler asks
    icon = client.get("/favicon.ico", follow_redirects=False)
    assert icon.headers["location"] == f"{BASE}/_genui/static/favicon.svg"
    assert client.get(icon.headers["location"]).status_code == 200
    assert client.get(f"{BASE}/_genui/nothing").status_code == 404 and client.get("/_genui/nothing").status_code == 404
    assert len(engine.calls) == 1  # Lisp, once: the same page by either address


def test_a_page_asked_for_too_soon_with_the_base_path_cut_off_asks_again_under_it(
    client_factory: ClientFactory, wiki: Site, tmp_path: Path
) -> None:
    app = create_app([wiki], db_path=tmp_path / "db.sqlite3", base_path=BASE, load_engine=_never_loads)
    try:
        with TestClient(app) as client:
            for asked in ("/Lisp", f"{BASE}/Lisp"):
                answer = client.get(asked)
                assert answer.status_code == 503 and f'data-genui-retry-url="{BASE}/Lisp"' in answer.text, asked
    finally:
        LOADED.set()


def test_one_cache_serves_a_site_under_a_base_path_and_at_the_root(
    client_factory: ClientFactory, all_sites: list[Site], tmp_path: Path
) -> None:
    db = tmp_path / "shared.sqlite3"
    with TestClient(create_app(all_sites, FakeEngine(), db_path=db, base_path=BASE)) as client:
        assert f'hx-get="{BASE}/wiki/Lisp_tree"' in visit(client, f"{BASE}/wiki/Lisp").text
    engine = FakeEngine()
    with TestClient(create_app(all_sites, engine, db_path=db)) as client:
        page = client.get("/wiki/Lisp").text
        assert 'hx-get="/wiki/Lisp_tree"' in page and BASE not in page and not engine.calls


def test_a_single_site_under_a_base_path(client_factory: ClientFactory, wiki: Site) -> None:
    client = under(client_factory, [wiki])
    page = visit(client, f"{BASE}/Lisp")
    assert page.status_code == 200 and f'hx-get="{BASE}/Lisp_tree"' in page.text and not outside(page.text)
    assert f'href="{BASE}/"' in page.text  # the site's own front page, its brand link
    assert client.get(BASE, follow_redirects=False).headers["location"] == f"{BASE}/"


def test_a_sites_images_are_shown_under_the_base_path(client_factory: ClientFactory, tmp_path: Path) -> None:
    client = under(client_factory, [shop_site(tmp_path)], FakeEngine(images_writer))
    page = visit(client, f"{BASE}/Old_maps").text
    assert page.count(f'src="{BASE}/_genui/assets/shop/logo.png"') == 2  # the opening's and the model's
    assert client.get(f"{BASE}/_genui/assets/shop/logo.png").status_code == 200 and not outside(page)
    with sqlite3.connect(pages_of(client).store.path) as db:
        (stored,) = db.execute("SELECT html FROM pages").fetchone()
    assert 'src="/_genui/assets/shop/logo.png"' in stored and BASE not in stored  # kept as any server serves it


@pytest.mark.parametrize("bad", ["/a/../b", "/a//b", "/a b", "/a?b", "/%2e"])
def test_a_base_path_that_is_no_path_prefix_is_refused(all_sites: list[Site], bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="/demo"):
        create_app(all_sites, FakeEngine(), db_path=tmp_path / "db.sqlite3", base_path=bad)


@pytest.mark.parametrize(
    ("base", "sites", "said"),
    [
        ("/wiki", ["wiki", "forum"], "site wiki's address (/wiki/…)"),
        ("/forum/x", ["wiki", "forum"], "site forum's address"),
        ("/files", ["os"], "site os's route /files/{path:path}"),
        ("/_genui", ["wiki"], "genui's own addresses"),
    ],
)
def test_a_base_path_that_begins_like_a_sites_own_addresses_is_refused(
    base: str, sites: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Behind a proxy that cuts the base path off, /wiki/wiki/ reached genui as /wiki/, the list of sites (a review)."""
    loaded = [load_site(SITES_DIR / name) for name in sites]
    with pytest.raises(ValueError, match="could not be told") as refused:
        create_app(loaded, FakeEngine(), db_path=tmp_path / "db.sqlite3", base_path=base)
    assert said in str(refused.value) and base in str(refused.value)
    argv = ["serve", "--base-path", base, "--port", "1", *(f"--site={name}" for name in sites)]
    assert main(argv) == 2 and said in capsys.readouterr().err


def test_a_base_path_beside_a_site_named_otherwise_or_a_route_with_a_value_first_is_taken(
    tmp_path: Path, wiki: Site
) -> None:
    create_app([wiki], FakeEngine(), db_path=tmp_path / "a.sqlite3", base_path="/wiki")  # /{title}: a value
    create_app(example_sites(), FakeEngine(), db_path=tmp_path / "b.sqlite3", base_path="/demo/wiki")


@pytest.mark.parametrize("given", ["demo", "/demo", "/demo/", "demo/"])
def test_genui_serve_takes_a_base_path_with_or_without_its_slashes(given: str) -> None:
    assert base_path(given) == BASE
    assert base_path("/") == ""


@pytest.mark.parametrize("bad", ["/a b", "/a/../b", "/a//b", "/a?b", "/é"])
def test_genui_serve_refuses_a_base_path_that_is_no_path_and_says_what_one_is(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--base-path", bad, "--port", "1"])
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and "--base-path" in said and "/demo" in said and repr(bad) in said


class CutOff:
    """A reverse proxy that cuts the base path off each address it passes on (Caddy's handle_path, nginx's
    proxy_pass with a / after the port), in front of an app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"].startswith(BASE + "/"):
            path = scope["path"].removeprefix(BASE)
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)


@pytest.mark.browser
@pytest.mark.parametrize("proxy", ["as it is", "cut off"])
def test_in_a_browser_a_site_under_a_base_path_is_browsed_written_live_replied_to_and_gone_back_in(
    tmp_path: Path, proxy: str
) -> None:
    engine = FakeEngine(delay=0.05, steps=4)
    app = create_app(example_sites(), engine, db_path=tmp_path / "pages.sqlite3", base_path=BASE)
    with served(app if proxy == "as it is" else CutOff(app)) as url, browser_page() as page:  # type: ignore[arg-type]
        problems = collect_problems(page)
        page.on("response", lambda answer: problems.append(answer.url) if answer.status >= 400 else None)
        page.goto(f"{url}{BASE}")  # leads to the sites' list
        page.wait_for_url(f"{url}{BASE}/")
        page.click("text=Genpedia")
        page.wait_for_selector(FINISHED, timeout=15_000)
        assert page.url == f"{url}{BASE}/wiki/"

        engine.hold = threading.Event()  # the page waits for its last frame until its draft has been seen
        page.click("text=Genpedia tree")
        page.wait_for_selector("#genui-draft[data-step]", timeout=10_000)  # the live stream, under the base path
        engine.hold.set()
        page.wait_for_selector(f"{FINISHED}:text-is('Genpedia tree')", timeout=15_000)
        assert page.url == f"{url}{BASE}/wiki/Genpedia_tree" and "<from>Genpedia</from>" in engine.calls[-1].prompt
        page.go_back()
        page.wait_for_selector(f"{FINISHED}:text-is('Genpedia')", timeout=15_000)
        assert page.url == f"{url}{BASE}/wiki/"

        page.goto(f"{url}{BASE}/forum/r/hacking/My_first_lisp")
        page.wait_for_selector(FINISHED, timeout=15_000)
        page.fill(".genui-reply input[name=user]", "ada")
        page.fill(".genui-reply textarea[name=text]", "Hello from under a base path")
        page.click(".genui-reply button[type=submit]")
        page.wait_for_selector("#genui-content:not(.genui-live) .reply p:text-is('Welcome, ada!')", timeout=15_000)
        assert page.url == f"{url}{BASE}/forum/r/hacking/My_first_lisp"
        calls = len(engine.calls)
        page.click(".genui-regenerate button")
        page.wait_for_selector("#genui-content.genui-live", state="detached", timeout=15_000)
        assert len(engine.calls) == calls + 1 and page.url.startswith(f"{url}{BASE}/forum/r/hacking/My_first_lisp")
        assert page.evaluate("window.getComputedStyle(document.body).fontFamily")  # genui.css was there
    assert not problems, problems


def test_with_reload_a_site_edited_or_made_meanwhile_is_served_under_the_base_path(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    sites = tmp_path / "sites"
    for name in ("forum", "wiki"):
        shutil.copytree(SITES_DIR / name, sites / name)
    client = client_factory(
        [load_site(sites / "forum"), load_site(sites / "wiki")],
        FakeEngine(),
        reload=True,
        sites_dir=sites,
        app_options={"base_path": BASE},
    )
    pages = pages_of(client)
    create_site("garden", "Plants and how to keep them.", sites)
    assert eventually(lambda: "garden" in pages.sites)
    front = visit(client, f"{BASE}/garden/")
    assert front.status_code == 200 and f'href="{BASE}/garden/"' in front.text and not outside(front.text)
    assert f'href="{BASE}/garden/"' in client.get(f"{BASE}/").text
    named = Path(shutil.copytree(sites / "garden", sites / "demo"))  # a site named like the base path: refused
    toml = named / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('name = "garden"', 'name = "demo"'), "utf-8")
    assert eventually(lambda: "demo" in pages.config_errors)
    assert "begins the server's base path /demo" in pages.config_errors["demo"] and "demo" not in pages.sites
    toml = sites / "wiki" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('title = "Genpedia"', 'title = "Hackopedia"'), "utf-8")
    assert eventually(lambda: "Hackopedia" in client.get(f"{BASE}/wiki/Lisp").text)
    assert not outside(visit(client, f"{BASE}/wiki/Lisp").text)


@pytest.mark.parametrize(
    ("address", "mounts", "page"),
    [
        ("http://hack.example/team3/wiki/Lisp", [], "/Lisp"),  # under the site's name, further in
        ("http://hack.example/team3/wiki/", [], "/"),
        ("http://hack.example/team3/", ["/team3"], "/"),  # one site served alone under it, as the cache knows
        ("http://hack.example/team3/Lisp", ["", "/team3", "/wiki"], "/Lisp"),
        ("http://hack.example/wiki/Lisp", ["/team3/wiki"], "/Lisp"),  # as before: under its name
        ("/team3", [], "/Team3"),  # a site-relative URL is read as one
        ("/team3/wiki/Lisp", [], "/Lisp"),  # a path copied from an access log, under the site's name further in
        ("/team3/Lisp", ["/team3"], "/Lisp"),
    ],
)
def test_a_pages_address_under_a_base_path_names_it_on_the_command_line(
    wiki: Site, address: str, mounts: list[str], page: str
) -> None:
    assert located(wiki, address, mounts).url == page


def test_cache_forget_and_posts_take_an_address_under_a_base_path_as_a_browser_shows_it(
    all_sites: list[Site], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "pages.sqlite3"
    with TestClient(create_app([load_site(SITES_DIR / "wiki")], FakeEngine(), db_path=db, base_path=BASE)) as client:
        visit(client, f"{BASE}/")
    with TestClient(create_app(all_sites, FakeEngine(), db_path=db, base_path=BASE)) as client:
        client.post(f"{BASE}/forum/r/linux/Kernel_news", data={"user": "ada", "text": "hi"})
    sites = str(SITES_DIR)
    assert main(["cache", "forget", "wiki", f"http://hack.example{BASE}/", "--db", str(db), "--sites-dir", sites]) == 0
    assert "forgot 1 version of wiki /;" in capsys.readouterr().out  # the front page, not an article "Demo"
    thread = f"https://hack.example{BASE}/forum/r/linux/Kernel_news"
    assert main(["posts", "--site", "forum", "--thread", thread, "--db", str(db), "--sites-dir", sites]) == 0
    assert "ada" in capsys.readouterr().out


# -- in another ASGI app ----------------------------------------------------------------------------------------


def host_app(genui_app: Starlette, *, lifespan: bool = True) -> Starlette:
    """An application of a developer's own with genui mounted at /demo, and its lifespan run by the host's, as
    docs/framework.md ("In another ASGI app") shows it."""

    @contextlib.asynccontextmanager
    async def both(app: Starlette) -> AsyncIterator[None]:
        async with genui_app.router.lifespan_context(genui_app):
            yield

    async def ping(request: Request) -> Response:
        return PlainTextResponse("pong")

    routes = [Route("/api/ping", ping), Mount(BASE, app=genui_app)]
    return Starlette(routes=routes, lifespan=both if lifespan else None)


def test_mounted_in_another_app_with_its_lifespan_run_genui_serves_its_pages_under_the_mount(
    all_sites: list[Site], tmp_path: Path
) -> None:
    engine = FakeEngine()
    genui_app = create_app(all_sites, engine, db_path=tmp_path / "db.sqlite3", base_path=BASE)
    with TestClient(host_app(genui_app)) as client:
        assert client.get("/api/ping").text == "pong"
        page = visit(client, f"{BASE}/wiki/Lisp")
        assert page.status_code == 200 and f'hx-get="{BASE}/wiki/Lisp_tree"' in page.text and not outside(page.text)
        assert client.get(f"{BASE}/_genui/static/htmx.min.js").status_code == 200
        assert client.get(f"{BASE}/_genui/health").json()["status"] == "ready"


def test_mounted_with_no_lifespan_run_or_under_another_path_genui_says_so(
    all_sites: list[Site], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Mounted, genui's lifespan never ran: every page said "no model is loaded", and health "failed" with no error;
    mounted with no base path, each page's scripts and links missed it. Neither was said anywhere (an embedding
    developer's review)."""
    genui_app = create_app(all_sites, db_path=tmp_path / "db.sqlite3", base_path=BASE, load_engine=FakeEngine)
    with TestClient(host_app(genui_app, lifespan=False)) as client:
        page = client.get(f"{BASE}/wiki/Lisp")
        assert page.status_code >= 500 and "must run its lifespan" in page.text
        assert "must run its lifespan" in client.get(f"{BASE}/_genui/health").json()["error"]
    assert caplog.text.count("must run its lifespan") == 1

    caplog.clear()
    unprefixed = create_app(all_sites, FakeEngine(), db_path=tmp_path / "other.sqlite3")
    with TestClient(host_app(unprefixed)) as client:
        client.get(f"{BASE}/wiki/Lisp")
        client.get(f"{BASE}/wiki/Unix")
    assert (
        caplog.text.count(f"mounted at {BASE} but writes its addresses under /: create it with base_path='{BASE}'") == 1
    )


# create_app's arguments as a developer embedding genui gives them wrong (a review): said at once, and what to pass


@pytest.mark.parametrize(
    ("sites", "said"),
    [
        ("one", "sites: a list of sites, [load_site(...)] for one, not the site 'wiki' alone"),
        ("path", "sites: a list of sites, not the path "),
        ("strings", "sites[0]: a Site, as genui.sites.load_site(folder) gives one, not "),
    ],
)
def test_sites_given_as_no_list_of_sites_are_a_type_error_saying_what_to_pass(
    sites: str, said: str, tmp_path: Path
) -> None:
    wiki = load_site(SITES_DIR / "wiki")
    given = {"one": wiki, "path": SITES_DIR, "strings": [str(SITES_DIR / "wiki")]}[sites]
    with pytest.raises(TypeError) as refused:
        create_app(given, FakeEngine(), db_path=tmp_path / "db.sqlite3")  # type: ignore[arg-type]
    assert str(refused.value).startswith(said)


def test_two_sites_of_one_name_are_refused_naming_both_files(tmp_path: Path) -> None:
    """A copy of the wiki with another title: the index listed the copy alone, the wiki gone unsaid."""
    copy = tmp_path / "wiki_fast"
    shutil.copytree(SITES_DIR / "wiki", copy)
    toml = copy / "site.toml"
    toml.write_text(toml.read_text().replace('title = "Genpedia"', 'title = "Fast Genpedia"', 1))
    with pytest.raises(SiteConfigError) as refused:
        create_app([load_site(SITES_DIR / "wiki"), load_site(copy)], FakeEngine(), db_path=tmp_path / "db.sqlite3")
    assert f"{toml}: key 'name': 'wiki' is the name of {SITES_DIR / 'wiki' / 'site.toml'} too" in str(refused.value)


@pytest.mark.parametrize(
    ("given", "error", "said"),
    [
        ({"engine": FakeEngine}, TypeError, "engine: an engine object (engine.load_engine(model), or one of your own"),
        ({"engine": "smollm"}, TypeError, "to load one as the app starts, pass load_engine=lambda:"),
        ({"load_engine": FakeEngine()}, TypeError, "load_engine: a function that loads and returns an engine"),
        ({"hosts": "localhost"}, TypeError, "hosts: a collection of host names, ['localhost'], not one string"),
        ({"runs_per_client": "3"}, TypeError, "runs_per_client: a whole number, 0 or more, not '3'"),
        ({"read_ahead": -1}, ValueError, "read_ahead: a whole number, 0 or more, not -1"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_refused_as_the_app_is_made_not_on_every_request(
    given: dict[str, object], error: type[Exception], said: str, tmp_path: Path
) -> None:
    """An engine's class or a model's name was taken, and every page and /_genui/health a 500; a host name given as a
    string was split into letters, and every request refused."""
    arguments: dict[str, object] = {"engine": FakeEngine(), **given}
    if "load_engine" in given:
        arguments.pop("engine")
    with pytest.raises(error) as refused:
        create_app([load_site(SITES_DIR / "wiki")], db_path=tmp_path / "db.sqlite3", **arguments)  # type: ignore[arg-type]
    assert said in str(refused.value)


def test_load_site_given_its_site_toml_says_to_name_the_folder() -> None:
    with pytest.raises(SiteConfigError) as refused:
        load_site(SITES_DIR / "wiki" / "site.toml")
    message = str(refused.value)
    assert "a site is its folder, not its site.toml" in message and f"name {SITES_DIR / 'wiki'}" in message
    assert "site.toml/site.toml" not in message
