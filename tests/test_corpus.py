"""The corpus builder's parsing of Debian's dictionary entries and package descriptions, and the pages it writes."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fakes import example_sites

import lab.corpus
from lab.corpus import (
    Builder,
    Entry,
    Example,
    Package,
    Sources,
    Split,
    by_item,
    by_url,
    distinct,
    entry_item,
    folder_item,
    fortune_item,
    holdout,
    item_held_out,
    name_words,
    package_item,
    parse_entry,
    read_file_tree,
    read_translations,
    slug,
)

FOLDOC = """hash table
HT

   <algorithm, data> A {lookup table} designed to efficiently store
   non-contiguous {key}s that may have wide gaps.

   A second paragraph about {collision}s.

   (1997-12-31)
"""

JARGON = """high bit
 n.

    [from high-order bit]

    1. The most significant bit in a byte. See {meta bit} and more text here to pass the length filter.
"""


def test_foldoc_entry_keeps_paragraphs_references_and_categories() -> None:
    entry = parse_entry(FOLDOC, jargon=False)
    assert entry is not None
    assert entry.title == "hash table"
    assert entry.categories == ("algorithm", "data")
    assert entry.refs == ("lookup table", "key", "collision")
    assert len(entry.paragraphs) == 2 and entry.paragraphs[0].startswith("A {lookup table}")


def test_foldoc_domain_markers_after_a_sense_number_or_an_acronym_become_categories() -> None:
    """A reader sees no "<language>" in an article: FOLDOC marks each sense's domain, after its number too, and the
    corpus had taught the default model to write them (593 of 10,451 wiki pages held one, session 29)."""
    raw = (
        "ABC\n\n   1. <computer> The {Atanasoff-Berry Computer}, an early machine.\n\n"
        "   2. <language, programming> An {imperative language} for teaching, and compares x <= y.\n\n"
        "   <processor> (NS32000) <processor> The first of a series of microprocessors.\n"
    )
    entry = parse_entry(raw, jargon=False)
    assert entry is not None
    assert entry.categories == ("computer", "language", "programming", "processor")
    assert entry.paragraphs == (
        "1. The {Atanasoff-Berry Computer}, an early machine.",
        "2. An {imperative language} for teaching, and compares x <= y.",
        "(NS32000) The first of a series of microprocessors.",
    )


def test_jargon_entry_drops_part_of_speech_and_bracketed_etymology() -> None:
    entry = parse_entry(JARGON, jargon=True)
    assert entry is not None
    assert entry.paragraphs[0].startswith("1. The most significant bit")


def test_short_entries_are_skipped() -> None:
    assert parse_entry("tiny\n\n   <x> See {y}.\n", jargon=False) is None


def test_slugs_are_url_safe_and_holdout_is_stable() -> None:
    assert slug("C++ (language)") == "C++_(language)"
    assert holdout("wiki", "/wiki/Hash_table") == holdout("wiki", "/wiki/Hash_table")


TRANSLATION = """Package: hello
Description-md5: 0123
Description-en: example package based on GNU hello
 The GNU hello program produces a familiar, friendly greeting.
 .
 It allows non-programmers to use a classic computer science tool.

Package: bare
Description-md5: 4567
Description-en: a summary only
"""


def test_long_package_descriptions_come_from_apts_translation_lists(tmp_path: Path) -> None:
    (tmp_path / "deb.debian.org_debian_dists_bookworm_main_i18n_Translation-en").write_text(TRANSLATION)
    (tmp_path / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages").write_text("Package: hello\n")
    found = read_translations(tmp_path)
    assert set(found) == {"hello", "bare"}
    summary, _, rest = found["hello"].partition("\n")
    assert summary == "example package based on GNU hello"
    assert rest.splitlines() == [
        "The GNU hello program produces a familiar, friendly greeting.",
        ".",
        "It allows non-programmers to use a classic computer science tool.",
    ]


def test_a_shared_url_keeps_every_distinct_page_and_any_other_url_its_first() -> None:
    def page(path: str, html: str, shared: bool) -> Example:
        return Example("os", path, "prompt", html, holdout=False, shared=shared)

    pages = [
        page("/", "<p>a</p>", True),
        page("/", "<p>b</p>", True),
        page("/", "<p>a</p>", True),
        page("/files/etc", "<ul>1</ul>", False),
        page("/files/etc", "<ul>2</ul>", False),
    ]
    assert [(p.path, p.html) for p in distinct(pages)] == [
        ("/", "<p>a</p>"),
        ("/", "<p>b</p>"),
        ("/files/etc", "<ul>1</ul>"),
    ]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(self.get_starttag_text() or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_pages_hold_no_bracket_in_their_text_or_attributes() -> None:
    """genui's sanitiser reads a `>` in the model's text, and a `<` in a quoted value, as a tag the model broke
    (genui/mending.py, `_repair_tags`): that is only right while the pages the model learns from write them as
    entities, whatever their sources hold."""
    entry = Entry(
        title="less <than>",
        paragraphs=("<programming> If a > b and b < c, see {ordering}.", 'Written "x<y>" in C.'),
        refs=("ordering",),
        categories=("<math>",),
    )
    sources = Sources(
        entries={"less <than>": entry},
        fortunes={"linux": ["a -> b, <stdin> and x >= 1", "Use the source, Luke."]},
        packages=[Package("a<b", "1.0>", "utils", "x > y", "Reads <input> and writes > output.")],
        tree={"/home/user": {"a>b.txt", "<dir>", "x&y"}, "/home/user/<dir>": set()},
        names=["user", "hacker"],
    )
    builder = Builder({s.name: s for s in example_sites()}, seed=0, sources=sources)
    pages = [
        builder.wiki_article(entry),
        builder.forum_thread("linux"),
        builder.forum_board("linux"),
        builder.os_files("/home/user"),
        builder.os_viewer(sources.packages[0]),
        *(builder.os_terminal() for _ in range(6)),
        builder.os_browser(entry),
        *builder.os_home(random.Random(0), "user"),
    ]
    for page in pages:
        parser = _Text()
        parser.feed(page.html)
        parser.close()
        assert not [t for t in parser.text if "<" in t or ">" in t], page.path
        assert not [t for t in parser.tags if "<" in t[1:]], page.path
    assert "&gt;" in pages[0].html and "&lt;programming&gt;" in pages[0].html


def test_forum_counts_take_the_singular_for_one() -> None:
    """A board's list wrote `1 points` and `1 replies`, and the model wrote them on served boards (session 81)."""
    entry = Entry(title="less", paragraphs=("A pager, see {more}.",), refs=("more",), categories=("unix",))
    sources = Sources(
        entries={"less": entry},
        fortunes={"linux": ["Use the source, Luke.", "It works on my machine."]},
        packages=[Package("less", "1.0", "utils", "a pager", "Reads a file a screen at a time.")],
        tree={"/home/user": {"notes.txt"}},
        names=["user", "hacker"],
    )
    builder = Builder({s.name: s for s in example_sites()}, seed=0, sources=sources)
    pages = [builder.forum_board("linux").html for _ in range(60)] + [
        builder.forum_thread("linux").html for _ in range(60)
    ]
    counts = [m.group(1, 2) for page in pages for m in re.finditer(r"\b(\d+) (points?|repl(?:y|ies))\b", page)]
    assert not [c for c in counts if c[0] == "1" and c[1] in ("points", "replies")]
    assert not [c for c in counts if c[0] != "1" and c[1] in ("point", "reply")]
    assert ("1", "point") in counts and ("1", "reply") in counts  # the draws reach 1 in 60 pages of each


def test_the_file_tree_takes_each_package_s_first_paths_so_none_fills_it(tmp_path: Path) -> None:
    """dpkg lists a package's folders before its files: a cap per package keeps its shallow folders and lets every
    package in, where whole lists in name order let an SDK of 50,000 files fill the desktop."""
    sdk = ["/.", "/usr", "/usr/lib", "/usr/lib/sdk"] + [f"/usr/lib/sdk/m{i}.py" for i in range(500)]
    (tmp_path / "a-sdk.list").write_text("\n".join(sdk) + "\n")
    (tmp_path / "zsh.list").write_text("/.\n/bin\n/bin/zsh\n/usr/share/doc/zsh/README weird name\n")
    tree = read_file_tree(per_package=10, info=tmp_path)
    assert tree["/"] == {"usr", "bin"} and tree["/bin"] == {"zsh"}  # the last package is in
    assert len(tree["/usr/lib/sdk"]) == 10 - 3  # /usr, /usr/lib and /usr/lib/sdk count against the cap
    assert "/usr/share/doc/zsh" not in tree  # a path with a space is not a file name the pages can link


def _home_builder() -> Builder:
    entry = Entry("hash table", ("A {lookup table} of keys.", "A second paragraph."), ("lookup table",), ())
    sources = Sources(
        entries={"hash table": entry, "lisp": Entry("Lisp", ("A language of lists.",), (), ())},
        fortunes={"linux": ["Use the source, Luke.", "Real programmers use cat.", "Ed is the standard editor."]},
        packages=[Package(n, "1:2.0-1", "utils", f"{n} does things", "Long text. " * 10) for n in ("ed", "vim")],
        tree={"/usr": {"bin"}, "/usr/bin": {"ed"}},
        names=["user", "alice", "bob", "carol"],
    )
    return Builder({s.name: s for s in example_sites()}, seed=0, sources=sources)


def test_home_folders_give_the_desktop_icons_pages_to_learn_from() -> None:
    """The desktop's Home, Terminal and Notes icons open /files/home/user, a bare `ls` and /home/user/notes.txt;
    the corpus writes many of each (shared URLs), beside other users' homes, and every link on a home listing leads
    to a page of the corpus or to a file the viewer does not show (a .deb, music, a picture)."""
    pages = list(_home_builder().os_homes(users=3, own=5))
    by_path: dict[str, list[Example]] = {}
    for page in pages:
        by_path.setdefault(page.path, []).append(page)
    for icon in ("/files/home/user", "/terminal?cmd=ls", "/view/home/user/notes.txt"):
        assert len(by_path[icon]) == 5 and all(p.shared for p in by_path[icon]), icon
    assert {p.path for p in pages if p.path.startswith("/files/home/") and not p.shared} >= {
        f"/files/home/{u}" for u in ("alice", "bob", "carol")
    }
    assert by_path["/files/home"][0].html.count('<li class="dir">') == 4  # alice, bob, carol and user
    notes = by_path["/view/home/user/notes.txt"][0]
    assert '<pre class="text">' in notes.html and "Viewer — /home/user/notes.txt" in notes.html
    for page in pages:
        if page.path.startswith("/files/"):
            for href in re.findall(r'href="([^"]+)"', page.html):
                assert href in by_path or href.endswith((".deb", ".ogg", ".png")) or href == "/files", (page.path, href)
        if page.path.startswith("/terminal"):
            assert page.html.count("$ ") == 2 and "\n\n$ " not in page.html  # a listing, never an empty one
    assert all(p.prompt.startswith("<site>GenOS") for p in pages)


def test_home_folders_draw_from_an_rng_of_their_own() -> None:
    """They come after every other page (Builder.build) and leave the builder's RNG alone: adding them changed no
    page the corpus held before, and no held-out page."""
    builder = _home_builder()
    state = builder.rng.getstate()
    first = [(p.path, p.html) for p in builder.os_homes(users=3, own=2)]
    assert builder.rng.getstate() == state
    assert [(p.path, p.html) for p in _home_builder().os_homes(users=3, own=2)] == first  # and are the same each time


def test_user_names_leave_out_the_word_list_s_slurs() -> None:
    """wamerican holds slurs, and a name the corpus makes is a forum poster's and a /home folder's on the desktop;
    the words user names are drawn from are the word list's short lower-case words less better-profanity's."""
    words = ["apple", "Zebra", "nigger", "cunt", "faggot", "table", "x", "dictionary", "o'hare", "retard"]
    assert name_words(words) == ["apple", "table"]


def test_the_desktop_s_own_home_folder_takes_many_forms() -> None:
    """/files/home/user and a bare `ls` are written once per distinct page: with four optional things in the folder
    they had 8 forms, too few to learn from (session 29); seven give the 150 copies many."""
    pages = list(_home_builder().os_homes(users=0, own=150))
    for icon in ("/files/home/user", "/terminal?cmd=ls"):
        forms = {p.html for p in distinct(pages) if p.path == icon}
        assert len(forms) >= 40, (icon, len(forms))


# Sources whose every item writes a mark of its own into its text (never into a title or a name), so a test can
# find each item's text in whatever pages show it.
MARKED_ENTRIES = [
    Entry(
        f"Entry {i}",
        (
            f"Mark qxe{i}z is what entry {i} says, and this clause pads the paragraph past one hundred and fifty "
            "characters, so that the wiki's home page may feature it too.",
        ),
        (),
        ("test",),
    )
    for i in range(24)
]
MARKED_FORTUNES = {
    board: [f"Fortune {board} {i} says read the source well, friend qx{board}{i}z." for i in range(12)]
    for board in ("linux", "zippy")
}
MARKED_PACKAGES = [
    Package(f"pkg{i}", "1.0", "utils", f"tool qxs{i}z", f"Package text qxd{i}z, long enough.") for i in range(12)
]
MARKED_TREE = {f"/srv/d{i}": {f"qxa{i}z", f"qxb{i}z", f"qxc{i}z"} for i in range(12)}


def _marked_items() -> dict[str, list[str]]:
    """Each item of the marked sources, with the marks its text carries."""
    items = {entry_item(e): [e.paragraphs[0].split()[1]] for e in MARKED_ENTRIES}
    items |= {fortune_item(f): [f.split()[-1].rstrip(".")] for pool in MARKED_FORTUNES.values() for f in pool}
    items |= {package_item(p): [f"qxs{p.name[3:]}z", f"qxd{p.name[3:]}z"] for p in MARKED_PACKAGES}
    items |= {folder_item(d): sorted(names) for d, names in MARKED_TREE.items()}
    return items


def _marked_pages(split: Split | None = None) -> list[Example]:
    """Pages of every route that draws on a source item, built from the marked sources."""
    sources = Sources(
        {e.title.lower(): e for e in MARKED_ENTRIES},
        MARKED_FORTUNES,
        MARKED_PACKAGES,
        {**MARKED_TREE, "/srv": {f"d{i}" for i in range(12)}},
        ["user", "alice", "bob", "carol", "dave"],
    )
    sites = {s.name: s for s in example_sites()}
    # a budget no page reaches, so every item a page draws is shown
    builder = Builder(sites, seed=0, char_budget=10_000, sources=sources, **({"split": split} if split else {}))
    return [
        *(builder.wiki_article(e) for e in MARKED_ENTRIES),
        *(builder.os_browser(e) for e in MARKED_ENTRIES),
        *(page for q in ("mark", "entry 1", "pads") if (page := builder.wiki_search(q))),
        *(builder.wiki_home() for _ in range(10)),
        *(builder.forum_thread(board) for _ in range(60) for board in MARKED_FORTUNES),
        *(builder.forum_board("linux") for _ in range(3)),
        *(builder.os_desktop() for _ in range(10)),
        *(builder.os_files(d) for d in sorted(MARKED_TREE)),
        *(builder.os_viewer(p) for p in MARKED_PACKAGES),
        *(builder.os_terminal() for _ in range(60)),
        *(builder.os_settings(panel) for panel in ("display", "sound")),
        *builder.os_homes(users=4, own=30),
    ]


def test_the_item_split_holds_out_every_page_that_shows_a_held_out_item_on_any_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An entry feeds its article, its page in the desktop's browser, search snippets, "What is" threads and
    Documents files; a fortune threads, replies, notes and the terminal; a package its README, `apt show` and to-do
    lists; a folder its listing and `ls`. Split by URL, a held-out page shared text with training pages (session
    53); split by item, no training page shows a held-out item."""
    monkeypatch.setattr(lab.corpus, "HOLDOUT_PER_MILLE", 250)  # a quarter of the items, so the few here have some
    pages = _marked_pages(by_item)
    items = _marked_items()
    held = {item for item in items if item_held_out(item)}
    assert 0 < len(held) < len(items)
    routes: set[str] = set()
    for item in held:
        showing = [p for p in pages if any(m in p.html or m in p.prompt for m in items[item])]
        assert showing and all(p.holdout for p in showing), (item, [p.path for p in showing if not p.holdout])
        routes |= {f"{p.site}:{p.path.split('?')[0].split('/')[1]}" for p in showing}
    drawing = {"wiki:wiki", "wiki:search", "wiki:", "forum:r", "os:browser", "os:view", "os:terminal", "os:files"}
    assert routes >= drawing  # every route that draws on an item, the wiki's home ("wiki:") too
    for page in pages:
        shown = [item for item, marks in items.items() if any(m in page.html or m in page.prompt for m in marks)]
        if page.holdout and shown:
            assert set(shown) & held, page.path  # held out for an item it shows


def test_the_url_split_is_the_default_and_holds_out_the_pages_it_always_did() -> None:
    """The shipped adapter trained on a corpus split by URL, and its quality figures are measured on that corpus's
    held-out pages: the split stays the same hash of site and path, and choosing a split changes no page."""
    assert [i for i in range(600) if holdout("wiki", f"/wiki/Entry_{i}")] == [183, 204, 335, 486, 497, 574]
    assert [i for i in range(400) if holdout("forum", f"/r/linux/Fortune_{i}")] == [207, 343]
    default, by_path, by_source = _marked_pages(), _marked_pages(by_url), _marked_pages(by_item)
    assert all(page.holdout == holdout(page.site, page.path) for page in default)
    assert [p.holdout for p in by_path] == [p.holdout for p in default]
    assert [(p.site, p.path, p.prompt, p.html, p.shared) for p in by_source] == [
        (p.site, p.path, p.prompt, p.html, p.shared) for p in default
    ]


def test_a_machine_without_the_text_packages_is_told_which_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without dict-foldoc, `genui corpus` was a FileNotFoundError traceback for /usr/share/dictd/foldoc.dict.dz."""
    monkeypatch.setattr(lab.corpus, "DICTD", tmp_path / "dictd")
    monkeypatch.setattr(lab.corpus, "FORTUNES", tmp_path / "fortunes")
    with pytest.raises(SystemExit, match="apt-get install dict-foldoc dict-jargon fortunes"):
        Sources.read()
