"""The ways on genui adds below a site's pages from its [[navigation]] (genui/navigation.py): fixed links, and the
pages of a route already written, whatever the model wrote on the page itself."""

from __future__ import annotations

import html
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine, visit
from starlette.testclient import TestClient

from genui.navigation import Link, sections
from genui.runtime import SiteRuntime
from genui.sites import Site, load_site
from genui.store import PageKey, Store

HTMX = {"HX-Request": "true"}
SECTION = re.compile(r'<nav class="genui-nav genui-nav-(\w+)"[^>]*>(.*?)</nav>', re.S)
ANCHOR = re.compile(r'<a[^>]*\shref="([^"]+)"[^>]*>(.*?)</a>', re.S)


def navigation(text: str) -> dict[str, list[tuple[str, str]]]:
    """Heading -> [(label, href)] of every navigation section on a page ("" for a section without a heading)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for _, body in SECTION.findall(text):
        heading = re.search(r"<h2>(.*?)</h2>", body)
        links = [(html.unescape(label), html.unescape(href)) for href, label in ANCHOR.findall(body)]
        found[html.unescape(heading.group(1)) if heading else ""] = links
    return found


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "pages.sqlite3")
    yield store
    store.close()


def test_the_wiki_home_lists_the_articles_written_and_some_to_start_with(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = client_factory(all_sites)
    for url in ("/wiki/Lisp", "/wiki/Hash_table"):
        visit(client, url)
    shell = client.get("/wiki/")  # the home is being written: its shell already shows the ways on
    assert "ws-connect" in shell.text
    found = navigation(shell.text)
    assert found["Articles written so far"] == [("Hash table", "/wiki/Hash_table"), ("Lisp", "/wiki/Lisp")]
    assert ("Hash table", "/wiki/Hash_table") in found["Start with"] and len(found["Start with"]) == 6
    assert 'href="/wiki/Lisp" hx-get="/wiki/Lisp" hx-target="#genui-main"' in shell.text  # htmx navigation
    assert navigation(visit(client, "/wiki/").text) == found  # the finished page keeps them
    assert navigation(client.get("/wiki/", headers=HTMX).text) == found  # and so does the htmx fragment
    # an article lists the others written, not itself: an article whose text links nowhere is no dead end
    assert navigation(client.get("/wiki/Lisp").text) == {"More articles": [("Hash table", "/wiki/Hash_table")]}


def forum_with_threads(client_factory: ClientFactory, all_sites: list[Site]) -> TestClient:
    """A client of the example sites whose forum has three threads written, two on one board."""
    client = client_factory(all_sites)
    for url in ("/forum/r/linux/Kernel_panic", "/forum/r/science/Entropy", "/forum/r/linux/Vim_or_emacs"):
        visit(client, url)
    return client


def test_the_forum_lists_boards_and_threads_and_a_board_only_its_own(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = forum_with_threads(client_factory, all_sites)
    front = navigation(visit(client, "/forum/").text)
    assert front["Popular boards"][:2] == [("r/computers", "/forum/r/computers"), ("r/linux", "/forum/r/linux")]
    assert front["Threads"] == [
        ("Vim or emacs", "/forum/r/linux/Vim_or_emacs"),
        ("Entropy", "/forum/r/science/Entropy"),
        ("Kernel panic", "/forum/r/linux/Kernel_panic"),
    ]
    board = navigation(visit(client, "/forum/r/linux").text)
    assert [href for _, href in board["Threads"]] == ["/forum/r/linux/Vim_or_emacs", "/forum/r/linux/Kernel_panic"]
    assert navigation(visit(client, "/forum/r/debian").text) == {}  # nothing written there yet: no empty list
    thread = navigation(client.get("/forum/r/linux/Kernel_panic").text)
    assert thread == {"More on this board": [("Vim or emacs", "/forum/r/linux/Vim_or_emacs")]}  # not itself


def test_a_threads_listed_say_how_many_readers_replied_to_each(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """A forum's lists of threads said nothing of which ones readers were talking in (a forum user's wish)."""
    client = forum_with_threads(client_factory, all_sites)
    store = client.app.state.pages.store  # type: ignore[attr-defined]
    for user, text in (("ada", "Which kernel?"), ("bob", "Mine too.")):
        store.add_post("forum", "/r/linux/Kernel_panic", user, text)
    store.add_post("forum", "/r/linux/Vim_or_emacs", "cy", "ed.")
    text = visit(client, "/forum/").text
    items = re.findall(r'<li><a[^>]*href="/forum/r/(\w+/\w+)"[^>]*>[^<]*</a>(.*?)</li>', text, re.S)
    assert dict(items) == {
        "linux/Vim_or_emacs": ' <span class="genui-count">1 reply</span>',
        "science/Entropy": "",
        "linux/Kernel_panic": ' <span class="genui-count">2 replies</span>',
    }
    assert navigation(text)["Threads"][0] == ("Vim or emacs", "/forum/r/linux/Vim_or_emacs")  # the link's own text
    assert '<span class="genui-count">1 reply</span>' in client.get("/forum/r/linux/Kernel_panic").text  # its board's


def test_a_threads_count_of_replies_takes_its_sites_plural_forms(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    forms = (("one", "{n} ответ"), ("few", "{n} ответа"), ("many", "{n} ответов"), ("other", "{n} ответа"))
    russian = [
        replace(site, lang="ru", words=(("replies", forms),)) if site.name == "forum" else site for site in all_sites
    ]
    client = forum_with_threads(client_factory, russian)
    store = client.app.state.pages.store  # type: ignore[attr-defined]
    for n in range(5):
        store.add_post("forum", "/r/linux/Kernel_panic", f"u{n}", "Да.")
    store.add_post("forum", "/r/linux/Vim_or_emacs", "cy", "ed.")
    text = visit(client, "/forum/").text
    assert '<span class="genui-count">5 ответов</span>' in text and '<span class="genui-count">1 ответ</span>' in text


def test_the_desktop_shows_the_icons_of_its_config(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    text = visit(client_factory(all_sites), "/os/").text
    icons = navigation(text)[""]
    assert ("Terminal", "/os/terminal?cmd=ls") in icons and ("Home", "/os/files/home/user") in icons
    assert '<nav class="genui-nav genui-nav-icons" aria-label="Ways on from this page">' in text
    assert 'class="genui-icon" href="/os/settings/display"' in text


@pytest.mark.parametrize(
    ("url", "marked"),
    [
        ("/os/terminal?cmd=ls", "Terminal"),  # the icon's own address
        ("/os/terminal?cmd=pwd", "Terminal"),  # the same program, another command
        ("/os/settings/sound", "Settings"),
        ("/os/browser?url=example.org", "Browser"),
        ("/os/files/home/user/Downloads", "Home"),  # a folder in Home's
        ("/os/files/usr/share/doc/bash", "Documents"),
        ("/os/files/etc", None),  # a folder no icon's path holds
        ("/os/", None),
    ],
)
def test_the_desktops_icon_of_the_program_open_is_marked(
    client_factory: ClientFactory, all_sites: list[Site], url: str, marked: str | None
) -> None:
    """The icon of the screen open was marked only on the icon's own address (a review)."""
    text = client_factory(all_sites).get(url).text
    current = re.findall(r'class="genui-icon" href="[^"]*"[^>]*aria-current="page">([^<]*)</a>', text)
    assert current == ([marked] if marked else []), url


def test_every_link_on_every_front_page_leads_to_a_page(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites, follow_redirects=False)
    for site in all_sites:
        visit(client, f"/{site.name}/r/linux/Kernel_panic" if site.name == "forum" else f"/{site.name}/")
        front = navigation(visit(client, f"/{site.name}/").text)
        links = [href for found in front.values() for _, href in found]
        assert links, site.name
        for href in links:
            response = visit(client, href)
            assert response.status_code == 200 and '<div class="genui-page"' in response.text, href
            assert '<header class="genui-bar">' in response.text, href  # every page keeps the site bar


def test_a_site_served_alone_links_without_a_mount(client_factory: ClientFactory, wiki: Site) -> None:
    client = client_factory([wiki])
    visit(client, "/Lisp")
    found = navigation(client.get("/").text)
    assert found["Articles written so far"] == [("Lisp", "/Lisp")] and ("Unix", "/Unix") in found["Start with"]


def test_only_pages_this_model_wrote_from_the_current_template_are_listed(wiki: Site, store: Store) -> None:
    runtime = SiteRuntime.build(wiki, "/wiki")
    home, article = runtime.router.resolve("/"), runtime.router.resolve("/Lisp")
    assert home is not None and article is not None
    template = runtime.prompts.version(article.route)
    for path, model, version in [("/Lisp", "m1", template), ("/Scheme", "m2", template), ("/Go", "m1", "old")]:
        key = PageKey("wiki", path, "", model, version)
        store.save_page(key, 1, 0, path.strip("/"), f"<h1>{path.strip('/')}</h1>", 0.1)
    store.save_page(PageKey("wiki", "/", "", "m1", runtime.prompts.version(home.route)), 1, 0, "Home", "", 0.1)
    shown = {section.heading: section.links for section in sections(runtime, home, store, "m1")}
    assert shown["Articles written so far"] == (Link("Lisp", "/wiki/Lisp"),)  # not the home, nor m2's, nor old
    assert shown["Start with"][0] == Link("Hacker", "/wiki/Hacker")
    assert "Articles written so far" not in {s.heading for s in sections(runtime, home, store, "m3")}
    assert sections(runtime, article, store, "m1") == []


def test_a_page_written_under_a_url_that_now_redirects_is_not_listed(wiki: Site, store: Store) -> None:
    """A page cached at `/lisp` before the wiki's titles took a capital: its URL now leads to `/Lisp`, which is
    another page (or none yet), so the listing leaves it out rather than name one page and open another."""
    runtime = SiteRuntime.build(wiki, "")
    home, article = runtime.router.resolve("/"), runtime.router.resolve("/Lisp")
    assert home is not None and article is not None
    template = runtime.prompts.version(article.route)
    for path in ("/lisp", "/Unix_shell", "/hash table"):
        store.save_page(PageKey("wiki", path, "", "m", template), 1, 0, path.strip("/"), "", 0.1)
    listed = next(s for s in sections(runtime, home, store, "m") if s.heading == "Articles written so far").links
    assert listed == (Link("Unix_shell", "/Unix_shell"),)


def test_a_listing_stops_at_its_limit_newest_first(wiki: Site, store: Store) -> None:
    runtime = SiteRuntime.build(wiki, "")
    home, article = runtime.router.resolve("/"), runtime.router.resolve("/Lisp")
    assert home is not None and article is not None
    template = runtime.prompts.version(article.route)
    for n in range(40):  # more than the wiki's limit of 30
        store.save_page(PageKey("wiki", f"/Topic_{n}", "", "m", template), 1, 0, f"Topic {n}", "", 0.1)
    listed = next(s for s in sections(runtime, home, store, "m") if s.heading == "Articles written so far").links
    assert len(listed) == 30 and listed[0] == Link("Topic 39", "/Topic_39") and listed[-1].url == "/Topic_10"


def test_the_ways_on_do_not_wait_for_the_model(client_factory: ClientFactory, all_sites: list[Site]) -> None:
    client = client_factory(all_sites, FakeEngine(overloaded=1))
    shell = client.get("/forum/")
    assert [label for label, _ in navigation(shell.text)["Popular boards"]][0] == "r/computers"


def _wiki_with(tmp_path: Path, old: str, new: str, store: Store, written: tuple[str, ...]) -> SiteRuntime:
    """A copy of the wiki whose site.toml has ``old`` written as ``new``, with its articles ``written`` stored (the
    last the newest)."""
    root = tmp_path / "wiki"
    shutil.copytree(SITES_DIR / "wiki", root)
    toml = root / "site.toml"
    text = toml.read_text(encoding="utf-8")
    assert old in text
    toml.write_text(text.replace(old, new), encoding="utf-8")
    runtime = SiteRuntime.build(load_site(root), "")
    article = runtime.router.resolve("/Lisp")
    assert article is not None
    for path in written:
        store.save_page(PageKey("wiki", path, "", "m", runtime.prompts.version(article.route)), 1, 0, path[1:], "", 0.1)
        time.sleep(0.01)  # one after the other, newest first in the listing
    return runtime


def _listed(runtime: SiteRuntime, url: str, store: Store) -> tuple[Link, ...]:
    here = runtime.router.resolve(url)
    assert here is not None
    return {s.heading: s.links for s in sections(runtime, here, store, "m")}["Articles written so far"]


def test_a_page_is_listed_once_and_a_fixed_link_to_the_page_it_is_on_is_marked_current(
    tmp_path: Path, store: Store, client_factory: ClientFactory
) -> None:
    runtime = _wiki_with(
        tmp_path,
        'on = ["/"]\nheading = "Articles written so far"',
        'on = ["/", "/{title}"]\nheading = "Articles written so far"\nlinks = [{ label = "Lisp", url = "/Lisp" }]',
        store,
        ("/Go", "/Lisp"),
    )
    assert _listed(runtime, "/", store) == (Link("Lisp", "/Lisp"), Link("Go", "/Go"))  # Lisp, written too, once
    assert _listed(runtime, "/Lisp", store) == (Link("Lisp", "/Lisp", current=True), Link("Go", "/Go"))
    page = visit(client_factory([runtime.site]), "/Lisp").text
    assert 'hx-swap="innerHTML show:window:top" aria-current="page">Lisp</a></li>' in page


def test_a_fixed_link_takes_no_place_of_a_written_page_under_the_sections_limit(tmp_path: Path, store: Store) -> None:
    runtime = _wiki_with(
        tmp_path,
        'pages = "/{title}"   # from the page cache, newest first\nlimit = 30',
        'pages = "/{title}"\nlimit = 2\nlinks = [{ label = "Lisp", url = "/Lisp" }]',
        store,
        ("/Go", "/Scheme", "/Lisp"),  # Lisp the newest
    )
    assert [link.label for link in _listed(runtime, "/", store)] == ["Lisp", "Scheme", "Go"]  # fixed, then two


def test_an_error_page_of_a_site_shows_the_ways_on_every_page_of_it_shows(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    """The desktop's 404 and busy pages dropped its icons, though every screen shows them so that a visitor is never
    stuck in one program (a desktop user's review). A section of some routes' pages only is no error page's."""
    client = client_factory(all_sites, FakeEngine())
    icons = navigation(visit(client, "/os/").text)[""]
    assert len(icons) == 6 and ("Home", "/os/files/home/user") in icons
    missing = client.get("/os/no/such/page")
    assert missing.status_code == 404 and navigation(missing.text) == {"": icons}
    version = client.get("/os/?v=9")  # a version that does not exist: an error page of a route's
    assert version.status_code == 404 and navigation(version.text) == {"": icons}
    assert client.get("/os/no/such/page", headers=HTMX).text.count('class="genui-icon"') == 6  # in a fragment too
    wiki = client.get("/wiki/no/such/page")  # the wiki's sections are some routes' only
    assert wiki.status_code == 404 and navigation(wiki.text) == {}


GAME = """\
name = "cards"
title = "Cards"
brief = "A trading-card game."
carry = ["coins"]

[[routes]]
pattern = "/"
template = "home.j2"
query = ["coins"]

[[routes]]
pattern = "/card/{name}"
template = "card.j2"
query = ["coins", "foil"]

[[navigation]]
on = ["/", "/card/{name}"]
heading = "Cards seen"
pages = "/card/{name}"
limit = 10
"""


def test_a_listed_page_is_led_to_in_the_state_a_site_carries_from_the_page_it_is_listed_on(
    tmp_path: Path, store: Store
) -> None:
    """A game's "Cards seen" listed each card with the coins it was seen with: a player with 3 coins who clicked one
    had 10 (a hackathon team's review). A carried key is the viewer's; a key that is not carried stays the page's."""
    (tmp_path / "prompts").mkdir()
    for name in ("home.j2", "card.j2"):
        (tmp_path / "prompts" / name).write_text("<page>{{ params }}</page>\n", encoding="utf-8")
    (tmp_path / "site.toml").write_text(GAME, encoding="utf-8")
    runtime = SiteRuntime.build(load_site(tmp_path), "")
    card = runtime.router.resolve("/card/Goblin")
    assert card is not None
    template = runtime.prompts.version(card.route)
    for path, query in [("/card/Goblin", "coins=10"), ("/card/Goblin", "coins=5"), ("/card/Troll", "coins=10&foil=1")]:
        store.save_page(PageKey("cards", path, query, "m", template), 1, 0, path.rsplit("/", 1)[1], "", 0.1)

    def seen(url: str) -> tuple[Link, ...]:
        path, _, query = url.partition("?")
        here = runtime.router.resolve(path, parse_qsl(query))
        assert here is not None
        return {s.heading: s.links for s in sections(runtime, here, store, "m")}["Cards seen"]

    assert seen("/?coins=3") == (
        Link("Troll", "/card/Troll?coins=3&foil=1"),  # its own foil, the player's coins
        Link("Goblin", "/card/Goblin?coins=3"),  # once, though seen with 5 coins and with 10
    )
    assert seen("/") == (Link("Troll", "/card/Troll?foil=1"), Link("Goblin", "/card/Goblin"))
    assert seen("/card/Goblin?coins=3") == (Link("Troll", "/card/Troll?coins=3&foil=1"),)  # not itself
    for coins in range(60):  # the Goblin seen in 60 states since: the Troll, older than them all, is listed still
        store.save_page(PageKey("cards", "/card/Goblin", f"coins={coins}", "m", template), 1, 0, "Goblin", "", 0.1)
    assert [link.label for link in seen("/?coins=3")] == ["Goblin", "Troll"]
