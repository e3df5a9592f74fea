"""The quality report's measures, on hand-written pages."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from engine_fixtures import build_tiny_llama_base
from fakes import example_sites

from genui.prompts import GAP
from genui.routing import SiteRouter
from genui.runtime import SiteRuntime
from genui.sanitize import sanitize_html
from lab import quality
from lab.adapt import main as adapt_main
from lab.corpus import Builder, Entry, Example, Package, Sources
from lab.quality import PageResult, distinct_2, doubled_words, report, shape, shared_phrases, skeleton_ok

SITES = {s.name: s for s in example_sites()}
ARTICLE = (
    '<article class="wiki"><h1>Hash table</h1><p>A table.</p><p>See <a href="/wiki/Array">array</a>.</p></article>'
)


def test_wiki_article_needs_its_title_in_h1_and_two_paragraphs() -> None:
    assert skeleton_ok("wiki", "/wiki/Hash_table", ARTICLE)
    assert not skeleton_ok("wiki", "/wiki/Linked_list", ARTICLE)
    assert not skeleton_ok("wiki", "/wiki/Hash_table", "<h1>Hash table</h1><p>only one</p>")
    assert not skeleton_ok("wiki", "/wiki/Hash_table", "<h1>Hash table</h1><p>one paragraph</p><p>&gt; 9</p>")


def test_a_wiki_article_is_checked_at_the_site_s_own_path_as_at_the_corpus_s_alias() -> None:
    """The corpus writes /wiki/{title}; the site serves /{title}, which the home page's links open."""
    assert skeleton_ok("wiki", "/Hash_table", ARTICLE)
    assert not skeleton_ok("wiki", "/Linked_list", ARTICLE)
    home = '<div class="home"><h1>Genpedia</h1><p>Welcome.</p></div>'
    assert skeleton_ok("wiki", "/", home)
    results = [PageResult("wiki", "/Hash_table", ARTICLE, [3], 1.0), PageResult("wiki", "/", home, [3], 1.0)]
    assert report(results, SITES, {"a"})[0].title_h1 == 1.0  # the home page is no article


def test_first_clicks_are_each_site_s_home_and_the_links_its_navigation_fixes() -> None:
    pages = quality.first_clicks(SITES)
    assert len(pages) == len(set(pages))
    for name in SITES:
        own = [url for site, url in pages if site == name]
        assert own[0] == "/"
        fixed = [link.url for section in SITES[name].navigation for link in section.links]
        assert own[1:] == list(dict.fromkeys(fixed))  # the written-pages sections add none
    assert ("os", "/terminal?cmd=ls") in pages and ("wiki", "/Hash_table") in pages


def test_unbalanced_html_is_not_well_formed() -> None:
    assert not shape("<div><p>open</div>").balanced
    assert not skeleton_ok("wiki", "/wiki/Hash_table", ARTICLE.removesuffix("</article>"))
    assert shape("<p>a<br>b</p>").balanced


@pytest.mark.parametrize(
    "broken",
    [
        "<p>A table.</p><p>It hashes p> keys.</p>",  # the end of a tag, shown as text
        "<p>A table.</p><p>keys &lt;/a&gt; values</p>",  # a closing tag, escaped by the sanitiser
        '<p>A table.</p><p>see a href="/wiki/Array" there</p>',  # an attribute shown as text
        '<p class="=">A table.</p><p>It hashes keys.</p>',  # a class the model broke
        '<p>A table.</p><p>See <a href="/wiki/a href=">array</a>.</p>',  # a link the model broke
    ],
)
def test_broken_markup_a_reader_would_see_fails_the_skeleton(broken: str) -> None:
    page = f'<article class="wiki"><h1>Hash table</h1>{broken}</article>'
    assert shape(page).balanced and not skeleton_ok("wiki", "/wiki/Hash_table", page)


def test_angle_brackets_that_are_text_do_not_fail_the_skeleton() -> None:
    """FOLDOC's pages mark a domain as "<language>", and quotes or comparisons use ">" and "<="."""
    body = '<p>1. &lt;language&gt; A Lisp.</p><p>If a &gt; b and ("&lt;=" is less-or-equal), then &gt; quoted.</p>'
    assert skeleton_ok("wiki", "/wiki/Hash_table", f'<article class="wiki"><h1>Hash table</h1>{body}</article>')


def test_forum_thread_needs_a_post_and_two_replies_that_say_something() -> None:
    meta = '<p class="meta"><b>ann</b> · 3 points</p>'
    page = (
        f'<div class="thread"><h1>t</h1><div class="post">{meta}<p>Is it still used?</p></div><div class="replies">'
        f'<div class="reply">{meta}<p>It is.</p></div><div class="reply">{meta}<p>Yes, on VMS.</p></div></div></div>'
    )
    assert skeleton_ok("forum", "/r/computers/Hello", page)
    assert not skeleton_ok("forum", "/r/computers/Hello", page.replace('class="reply"', 'class="x"', 1))
    # A reply that is only its meta line, however long, is none; nor is a post.
    assert not skeleton_ok("forum", "/r/computers/Hello", page.replace("<p>It is.</p>", ""))
    assert not skeleton_ok("forum", "/r/computers/Hello", page.replace("<p>It is.</p>", "<p>&gt;</p>"))
    assert not skeleton_ok("forum", "/r/computers/Hello", page.replace("<p>Is it still used?</p>", ""))
    assert skeleton_ok("forum", "/r/computers/Hello", page.replace("<p>It is.</p>", "It is."))  # text is text


def test_forum_board_needs_a_list_of_two_threads_at_least() -> None:
    item = '<li><a href="/r/linux/{}">{}</a> <span class="meta">by u in linux · 3 points</span></li>'
    head = '<div class="board"><h1>r/linux</h1><ul class="threads">'
    page = f"{head}{item.format('A', 'a')}{item.format('B', 'b')}</ul></div>"
    assert skeleton_ok("forum", "/r/linux", page)
    one = f"{head}{item.format('A', 'a')}<li>no link</li></ul></div>"
    assert not skeleton_ok("forum", "/r/linux", one)  # what the board's opening and a stray item make
    assert not skeleton_ok("forum", "/r/linux", page.replace('class="threads"', 'class="x"'))


def test_os_screen_needs_a_window_with_a_title_bar() -> None:
    assert skeleton_ok("os", "/view/a", '<div class="window"><div class="titlebar">a</div><p>Some text</p></div>')
    assert not skeleton_ok("os", "/view/a", '<div class="window"><p>no bar</p></div>')


def _window(title: str, inner: str) -> str:
    return f'<div class="window"><div class="titlebar">{title}</div><div class="body">{inner}</div></div>'


def test_a_listing_links_into_its_own_folder_only_and_the_viewer_shows_no_listing() -> None:
    """A folder's listing whose entries open other folders (step 3850's Home icon: /view/usr/user/user) is not that
    folder's; a viewer that writes a listing (its Notes icon) shows no file."""

    def listing(folder: str, *hrefs: str) -> str:
        items = "".join(f'<li class="file"><a href="{h}">{h.rpartition("/")[2]}</a></li>' for h in hrefs)
        return _window(
            f"Files — {folder}", f'<p class="path"><a href="/files">..</a></p><ul class="files">{items}</ul>'
        )

    assert skeleton_ok("os", "/files/home/user", listing("/home/user", "/view/home/user/a.txt", "/files/home/user/src"))
    assert skeleton_ok("os", "/files/", listing("/", "/files/usr", "/view/README"))
    for wrong in ("/view/usr/user/user", "/files/home/user/", "/files/home/username/x", "/wiki/x"):
        assert not skeleton_ok("os", "/files/home/user", listing("/home/user", "/view/home/user/a.txt", wrong))
    text = _window("Viewer — /home/user/notes.txt", '<pre class="text">Use the source, Luke.</pre>')
    assert skeleton_ok("os", "/view/home/user/notes.txt", text)
    shown = listing("/home/user", "/view/home/user/notes/README").replace("Files", "Viewer")
    assert not skeleton_ok("os", "/view/home/user/notes.txt", shown)
    assert not skeleton_ok("os", "/view/home/user/notes.txt", _window("Viewer", '<p class="path">/home/user</p>'))


def _desktop_pages() -> list[Example]:
    """One page of each kind the desktop has, as the corpus builder writes them, from hand-written sources."""
    package = Package("fish", "1.0-1", "shells", "friendly shell", "A shell that is\nfriendly.\n\nIt has colours.")
    fish = Entry(title="FISH queue", paragraphs=("A joking way of pointing out a backlog.",), refs=(), categories=())
    sources = Sources(
        entries={"fish queue": fish},
        fortunes={"linux": ["Use the source, Luke."]},
        packages=[package],
        tree={"/home/user": {"notes.txt", "src", "x"}, "/home/user/src": set()},
        names=["user"],
    )
    builder = Builder(SITES, seed=0, sources=sources)
    terminal = next(p for p in iter(builder.os_terminal, None) if "cmd=fortune" not in p.path)
    return [
        builder.os_desktop(),
        builder.os_files("/home/user"),
        builder.os_viewer(package),
        builder.os_text("/home/user/notes.txt", "Use the source, Luke."),
        terminal,
        builder.os_settings("display"),
        builder.os_browser(fish),
    ]


@pytest.mark.parametrize("page", _desktop_pages(), ids=lambda page: page.path.partition("?")[0])
def test_a_desktop_page_needs_more_than_its_routes_opening(page: Example) -> None:
    """The openings pin every window and its title bar (a settings panel's names too), so the skeleton asks for what
    the model writes inside (a settings panel's values)."""
    runtime = SiteRuntime.build(SITES["os"], mount="")
    location = runtime.locate(page.path)
    assert location is not None
    opening = runtime.prompts.opening(location.route, location.params, location.query)
    fixed = opening.replace(GAP, "")  # a settings panel's gaps (engine.gaps) left empty: the opening alone
    assert skeleton_ok("os", page.path, page.html)
    assert not skeleton_ok("os", page.path, sanitize_html(fixed))


@pytest.mark.parametrize(
    "rows",
    [
        "<dt>Display</dt><dt>1</dt><dd>dd</dd><dd>dtdddtdddt</dd>",  # step 3850's /os/settings/display, seed 0
        "<dt>Resolution</dt><dd>1920 × 1080</dd><dt>Scale</dt>",
        "<dt>Resolution</dt><dd> </dd>",
    ],
)
def test_settings_need_each_name_followed_by_its_value(rows: str) -> None:
    page = f'<div class="window"><div class="titlebar">Settings</div><dl class="settings">{rows}</dl></div>'
    assert not skeleton_ok("os", "/settings/display", page)


def test_links_are_valid_only_when_they_hit_a_route_of_the_site() -> None:
    router = SiteRouter(SITES["wiki"])
    assert router.leads_to_page("/wiki/Array")
    assert router.leads_to_page("/search?q=x")
    assert not router.leads_to_page("/r/computers")
    assert not router.leads_to_page("https://example.com/wiki/Array")


def test_the_links_of_a_routes_opening_are_the_sites_not_the_models() -> None:
    """The settings panel's opening lists the other six panels: counted, one bad link the model wrote read 6 of 7."""
    runtime = SiteRuntime.build(SITES["os"], mount="")
    location = runtime.locate("/settings/display")
    assert location is not None
    opening = runtime.direct_request(location, 0).opening
    assert opening.count("<a href=") == 6
    raw = opening + '1920x1080 (<a href="/nosuch/help">help</a>)</dd></dl></div></div>'
    (row,) = report([PageResult("os", "/settings/display", sanitize_html(raw), [5], 1.0, raw=raw)], SITES, set())
    assert (row.valid_links, row.links) == (0.0, 1)
    alone = raw.removeprefix(opening)  # --no-openings: the model wrote all there is
    (row,) = report([PageResult("os", "/settings/display", sanitize_html(alone), [5], 1.0, raw=alone)], SITES, set())
    assert (row.valid_links, row.links) == (0.0, 1)


def test_distinct_2_is_one_for_all_new_bigrams_and_lower_for_repeats() -> None:
    assert distinct_2(["a b c"]) == 1.0
    assert distinct_2(["a b a b a b"]) < 0.5


def test_doubled_words_counts_a_word_next_to_itself_within_a_page() -> None:
    assert doubled_words(["a data structure", "of the"]) == 0.0
    assert doubled_words(["A data Data structure"]) == 1 / 3  # case aside
    assert doubled_words(["one page ends", "ends the next"]) == 0.0  # pages apart
    assert doubled_words([]) == 0.0


def test_report_measures_dictionary_words_per_site() -> None:
    pages = [PageResult("wiki", "/wiki/Hash_table", ARTICLE, [0, 10, 12], 1.0)]  # a first canvas all opening
    (row,) = report(pages, SITES, dictionary={"a", "table", "see", "array", "hash"})
    assert row.skeleton == 1.0
    assert row.dictionary_words == 1.0
    assert row.valid_links == 1.0 and row.links == 1
    # A link to the page itself leads to a page of the site, though genui serves it as its text.
    on_itself = [PageResult("wiki", "/Array", ARTICLE.replace("Hash table", "Array"), [3], 1.0)]
    assert report(on_itself, SITES, dictionary=set())[0].valid_links == 1.0
    assert row.steps_per_canvas == 11.0  # the median of the canvases denoised
    assert row.title_h1 == 1.0


def test_report_gives_the_share_of_denoised_canvases_the_adaptive_stop_ended() -> None:
    pages = [
        PageResult("wiki", "/wiki/Hash_table", ARTICLE, [0, 10, 24], 1.0, [False, True, False]),  # first: all opening
        PageResult("wiki", "/wiki/Linked_list", ARTICLE, [9, 12], 1.0, [True, True]),
    ]
    (row,) = report(pages, SITES, dictionary=set())
    assert row.stopped_early == 0.75
    (unknown,) = report([PageResult("wiki", "/wiki/Hash_table", ARTICLE, [], 0.0)], SITES, dictionary=set())
    assert unknown.stopped_early is None  # the corpus's own pages were never denoised


def test_title_h1_counts_only_articles_whose_heading_is_their_title() -> None:
    pages = [
        PageResult("wiki", "/wiki/Hash_table", ARTICLE, [1], 1.0),
        PageResult("wiki", "/wiki/Linked_list", ARTICLE, [1], 1.0),  # says "Hash table"
    ]
    (row,) = report(pages, SITES, dictionary=set())
    assert row.title_h1 == 0.5


def test_shared_phrases_is_high_for_pages_that_repeat_each_other() -> None:
    same = "the table maps keys to values in a flat array of buckets"
    assert shared_phrases([same, same]) == 1.0
    assert shared_phrases([same, "a linked list chains nodes one after another by pointer"]) == 0.0
    # the same page written with two seeds is one page, not two that share their phrases
    assert shared_phrases([same, same], ["/wiki/Hash_table", "/wiki/Hash_table"]) == 0.0
    assert shared_phrases([same, same, same], ["/wiki/Hash_table", "/wiki/Hash_table", "/wiki/Linked_list"]) == 1.0


def test_spread_gives_each_group_its_share_and_one_at_least_evenly_spaced() -> None:
    files, views, terminal = list(range(100)), list(range(100, 140)), list(range(200, 202))
    drawn = quality.spread([files, views, terminal], 10)
    assert [len(g) for g in drawn] == [6, 3, 1]  # 1 each, then the 7 left by size: 4.9, 2.0, 0.1
    assert drawn[0] == [0, 16, 33, 50, 66, 83] and drawn[1] == [100, 113, 126]  # across the group, not its start
    assert quality.spread([files, terminal], 200) == [files, terminal]  # fewer than asked: all of them
    assert [len(g) for g in quality.spread([files, views, terminal], 2)] == [1, 1, 0]  # too few for one each


def test_the_held_out_pages_come_from_every_route_of_a_site(tmp_path: Path) -> None:
    """The corpus writes a route's pages in one run; the first 20 held-out desktop pages were all file listings
    of one folder tree until session 27, so no viewer, terminal or browser page was ever measured."""
    rows = [{"site": "os", "path": f"/files/usr/lib/sdk/{i}", "html": "<p>x</p>"} for i in range(30)]
    rows += [{"site": "os", "path": f"/view/usr/share/doc/{i}/README", "html": "<p>y</p>"} for i in range(6)]
    rows += [{"site": "os", "path": "/terminal?cmd=ls", "html": "<p>z</p>"}]
    rows += [{"site": "os", "path": "/settings/display", "html": "<p>not held out</p>", "holdout": False}]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": "p", "holdout": True} | row) + "\n" for row in rows))
    routers = {"os": SiteRouter(SITES["os"])}
    assert quality.route_of(routers, "os", "/terminal?cmd=ls") == "/terminal"
    paths = [page.path for page in quality.corpus_pages(corpus, 6, routers)]
    assert paths[:3] == ["/files/usr/lib/sdk/0", "/files/usr/lib/sdk/10", "/files/usr/lib/sdk/20"]
    assert sum(p.startswith("/view/") for p in paths) == 2 and "/terminal?cmd=ls" in paths
    assert [page.path for page in quality.corpus_pages(corpus, 6, {})] == paths  # no site: the first segment


def test_no_held_out_page_is_drawn_at_a_url_the_corpus_trains_on(tmp_path: Path) -> None:
    """Split by item, some copies of a home page (one prompt, written 300 times) are held out for the entries they
    feature: the prompt is trained on all the same, so such a page measures nothing held out."""
    rows = [{"site": "wiki", "path": "/", "holdout": i == 3} for i in range(5)]
    rows += [{"site": "wiki", "path": "/wiki/Plus", "holdout": True}]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": "p", "html": "<p>x</p>"} | row) + "\n" for row in rows))
    drawn = quality.corpus_pages(corpus, 20, {"wiki": SiteRouter(SITES["wiki"])})
    assert [page.path for page in drawn] == ["/wiki/Plus"]


@pytest.mark.slow
def test_the_report_runs_end_to_end_on_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`genui quality --packed` on a tiny adapted checkpoint: every column, the loss ones included."""
    monkeypatch.setattr(quality, "load_dictionary", lambda: {"page", "wiki", "forum"})  # no wamerican needed
    rows = [
        {"site": site, "path": path, "prompt": f"<page>{site} {i}</page>", "html": f"<p>{site} page {i}</p>"}
        for i in range(12)
        for site, path in (("wiki", f"/Page_{i}"), ("forum", f"/r/board{i}"))
    ]
    for i, row in enumerate(rows):
        row["holdout"] = i < 8
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    base = build_tiny_llama_base(tmp_path / "tiny")
    run, packed, model = tmp_path / "run", tmp_path / "packed.npz", tmp_path / "model"
    common = ["--out", str(run), "--packed", str(packed), "--base", str(base)]
    assert adapt_main([*common, "--pack", str(corpus)]) == 0
    settings = ["--canvas-length", "32", "--canvas-tokens", "64", "--frozen-layers", "0", "--rank", "4"]
    assert adapt_main([*common, *settings, "--max-steps", "2", "--export", str(model)]) == 0
    capsys.readouterr()

    argv = ["--model", str(model), "--corpus", str(corpus), "--packed", str(packed), "--per-site", "2"]
    saved = tmp_path / "pages.jsonl"
    sweep = ["--steps", "3", "--entropy-bound", "40"]  # a sampler sweep's overrides reach every request
    assert quality.main([*argv, *sweep, "--device", "cpu", "--json", "--save-pages", str(saved)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sampler"] == {"max_steps": 3, "entropy_bound": 40.0}
    sites = {row["site"]: row for row in result["sites"]}
    pages = [json.loads(line) for line in saved.read_text().splitlines()]  # the pages behind the numbers
    assert sorted((p["site"], p["path"]) for p in pages) == [
        ("forum", "/r/board0"),
        ("forum", "/r/board2"),
        ("wiki", "/Page_0"),
        ("wiki", "/Page_2"),
    ]
    assert all(isinstance(p["html"], str) and p["steps"] and p["seconds"] > 0 for p in pages)
    assert all(p["raw"] and sanitize_html(p["raw"]) == p["html"] for p in pages)  # the model's own text is kept
    assert set(sites) == {"wiki", "forum"}
    for row in sites.values():
        assert row["pages"] == 2 and 1 <= row["steps_per_canvas"] <= 3
        assert math.isfinite(row["heldout_loss"]) and math.isfinite(row["prompt_gain"])
    # the reference: the corpus's own held-out pages through the same measures ("wiki page 0": all words known)
    corpus_rows = {row["site"]: row for row in result["corpus"]}
    assert set(corpus_rows) == {"wiki", "forum"} and corpus_rows["wiki"]["pages"] == 2
    assert corpus_rows["wiki"]["dictionary_words"] == 1.0 and corpus_rows["wiki"]["heldout_loss"] is None

    # --first-clicks: the forum's home page and the boards its navigation names, each page's verdict listed
    first = ["--model", str(model), "--first-clicks", "--site", "forum", "--steps", "2", "--device", "cpu", "--json"]
    assert quality.main([*first, "--save-pages", str(tmp_path / "clicks.jsonl")]) == 0
    clicks = json.loads(capsys.readouterr().out)
    assert clicks["pages_measured"] == "first clicks" and clicks["corpus"] == []
    assert [(p["site"], p["path"]) for p in clicks["pages"]] == quality.first_clicks({"forum": SITES["forum"]})
    assert clicks["sites"][0]["pages"] == len(clicks["pages"]) and all(p["steps"] for p in clicks["pages"])
    assert clicks["sites"][0]["skeleton"] == sum(p["skeleton"] for p in clicks["pages"]) / len(clicks["pages"])
    again = ["--first-clicks", "--rescore", str(tmp_path / "clicks.jsonl"), "--json", "--corpus", "nowhere.jsonl"]
    assert quality.main(again) == 0  # the saved pages' verdicts again, with no model and no corpus
    assert json.loads(capsys.readouterr().out)["pages"] == clicks["pages"]

    # several seeds: each page written once a seed, pooled into one report, each verdict saying its seed
    seeds = tmp_path / "seeds.jsonl"
    assert quality.main([*first, "--seed", "0", "1", "--save-pages", str(seeds)]) == 0
    pooled = json.loads(capsys.readouterr().out)
    assert pooled["seed"] == [0, 1]
    assert [(p["path"], p["seed"]) for p in pooled["pages"]] == [
        (path, seed) for seed in (0, 1) for _, path in quality.first_clicks({"forum": SITES["forum"]})
    ]
    assert pooled["pages"][: len(clicks["pages"])] == [{**p, "seed": 0} for p in clicks["pages"]]  # seed 0 as alone
    assert pooled["sites"][0]["pages"] == 2 * len(clicks["pages"])
    assert pooled["sites"][0]["skeleton"] == sum(p["skeleton"] for p in pooled["pages"]) / len(pooled["pages"])
    assert [json.loads(line)["seed"] for line in seeds.read_text().splitlines()] == [p["seed"] for p in pooled["pages"]]

    # the saved pages report the same again, with no model loaded
    assert quality.main(["--corpus", str(corpus), "--per-site", "2", "--rescore", str(saved), "--json"]) == 0
    rescored = {row["site"]: row for row in json.loads(capsys.readouterr().out)["sites"]}
    for site, row in rescored.items():
        expected = {**sites[site], "heldout_loss": None, "prompt_gain": None}
        assert row == expected


def _held_out_article(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A corpus of one held-out article, and a dictionary that knows its words."""
    monkeypatch.setattr(quality, "load_dictionary", lambda: {"a", "table"})
    corpus = tmp_path / "corpus.jsonl"
    row = {"site": "wiki", "path": "/wiki/Hash_table", "prompt": "p", "html": ARTICLE, "holdout": True}
    corpus.write_text(json.dumps(row) + "\n")
    return corpus


def test_rescoring_sanitises_a_saved_page_again_from_the_model_s_own_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--rescore` measures the sanitiser of today on pages saved earlier: `html` is rebuilt from `raw`."""
    corpus = _held_out_article(tmp_path, monkeypatch)
    stale = PageResult("wiki", "/wiki/Hash_table", "<p>stale</p>", [5], 1.0, [True], raw=ARTICLE + "<script>x</script>")
    older = PageResult("wiki", "/wiki/Hash_table", ARTICLE, [5], 1.0, [True])  # saved before `raw` was kept
    saved = tmp_path / "pages.jsonl"
    saved.write_text("".join(json.dumps(dataclasses.asdict(p)) + "\n" for p in (stale, older)))

    pages = quality.saved_pages(saved)
    assert pages[0].html == sanitize_html(ARTICLE) and "script" not in pages[0].html
    assert pages[1].html == ARTICLE
    assert quality.main(["--corpus", str(corpus), "--rescore", str(saved), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["resanitised"] == 1 and result["sites"][0]["skeleton"] == 1.0

    saved.write_text("not json\n")
    assert quality.main(["--corpus", str(corpus), "--rescore", str(saved)]) == 2
    assert "not a file of pages saved by --save-pages" in capsys.readouterr().err


def test_rescoring_pages_the_corpus_does_not_hold_out_asks_for_first_clicks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first click's page rescored as held out would be labelled held out, against no corpus reference."""
    corpus = _held_out_article(tmp_path, monkeypatch)
    home = PageResult("wiki", "/", "<h1>Genpedia</h1><p>a</p>", [5], 1.0, [True])
    article = PageResult("wiki", "/wiki/Hash_table", ARTICLE, [5], 1.0, [True])
    saved = tmp_path / "pages.jsonl"
    saved.write_text("".join(json.dumps(dataclasses.asdict(p)) + "\n" for p in (home, article)))
    assert quality.main(["--corpus", str(corpus), "--rescore", str(saved), "--json"]) == 2
    assert "1 page(s) that" in (err := capsys.readouterr().err) and "(wiki /)" in err and "--first-clicks" in err
    assert quality.main(["--corpus", str(corpus), "--rescore", str(saved), "--json", "--first-clicks"]) == 0
    assert json.loads(capsys.readouterr().out)["pages_measured"] == "first clicks"


def test_site_chooses_the_sites_reported_on_and_a_missing_site_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--site` keeps one site's held-out pages; a `--sites-dir` without a site the corpus holds is a clear error,
    not a KeyError from deep in the report."""
    monkeypatch.setattr(quality, "load_dictionary", lambda: {"a", "table"})
    rows = [
        {"site": "wiki", "path": "/wiki/Hash_table", "prompt": "p", "html": ARTICLE, "holdout": True},
        {"site": "forum", "path": "/forum/", "prompt": "p", "html": "<p>board</p>", "holdout": True},
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert quality.main(["--corpus", str(corpus), "--list", "--site", "wiki"]) == 0
    assert capsys.readouterr().out == "wiki\t/wiki/Hash_table\n"
    assert quality.main(["--corpus", str(corpus), "--list", "--site", "blog"]) == 2
    assert "--site blog" in capsys.readouterr().err

    only_wiki = tmp_path / "sites"
    only_wiki.mkdir()
    (only_wiki / "wiki").symlink_to(Path(__file__).resolve().parent.parent / "sites" / "wiki")
    saved = tmp_path / "pages.jsonl"
    page = PageResult("wiki", "/wiki/Hash_table", ARTICLE, [5], 1.0, [True])
    saved.write_text(json.dumps(dataclasses.asdict(page)) + "\n")
    common = ["--corpus", str(corpus), "--sites-dir", str(only_wiki), "--rescore", str(saved), "--json"]
    assert quality.main(common) == 2
    err = capsys.readouterr().err
    assert "has no site forum" in err and "--site" in err
    assert quality.main([*common, "--site", "wiki"]) == 0
    assert [row["site"] for row in json.loads(capsys.readouterr().out)["sites"]] == ["wiki"]


def test_the_skeleton_is_judged_on_the_page_as_served_and_the_links_on_what_the_model_wrote() -> None:
    """A thread link written with spaces is a working link once served (genui quotes it); a link run on into the
    text that no route serves is shown as its text. Both are markup debris in the sanitised page alone."""
    board = (
        '<div class="board"><h1>r/linux</h1><ul class="threads">'
        '<li><a href="/r/linux/Hop tomorrow">Hop tomorrow</a></li>'
        '<li><a href="/r/linux/Kernel_news">Kernel news</a></li></ul></div>'
    )
    article = ARTICLE.replace("<p>A table.</p>", '<p>A <a href="/wiki/apt_support/apt support">table</a>.</p>')
    pages = [
        PageResult("forum", "/r/linux", board, [5], 1.0),
        PageResult("wiki", "/wiki/Hash_table", article, [5], 1.0),
    ]
    assert not skeleton_ok("forum", "/r/linux", board) and not skeleton_ok("wiki", "/wiki/Hash_table", article)
    forum, wiki = report(pages, SITES, dictionary=set())
    assert forum.skeleton == 1.0 and wiki.skeleton == 1.0
    assert forum.valid_links == 1.0  # a space is a page the forum serves
    assert wiki.valid_links == 0.5 and wiki.links == 2  # the run-on link counts against the model all the same
    broken = board.replace('class="threads"', 'class="thr"eads"')
    (still,) = report([PageResult("forum", "/r/linux", broken, [5], 1.0)], SITES, dictionary=set())
    assert still.skeleton == 0.0


def test_links_written_with_no_text_count_and_a_browser_pages_links_open_in_the_browser() -> None:
    bare = '<div class="board"><h1>r/linux</h1><ul class="threads"><li><a href="/r/linux/Kernel_news"></a></li>'
    bare += '<li><a href="/r/nowhere/at/all/x"></a></li></ul></div>'
    (forum,) = report([PageResult("forum", "/r/linux", sanitize_html(bare), [5], 1.0, raw=bare)], SITES, set())
    assert forum.links == 2 and forum.valid_links == 0.5  # the sanitiser drops both; genui serves the first
    web = '<div class="window"><div class="titlebar">Browser</div><p class="address">x</p>'
    web += '<p>See <a href="/wiki/Unix">Unix</a>.</p></div>'
    (desktop,) = report([PageResult("os", "/browser?url=genpedia.org/wiki/Unix", web, [5], 1.0)], SITES, set())
    assert desktop.links == 1 and desktop.valid_links == 1.0  # the browser opens it; the desktop has no /wiki route


def test_single_letters_are_dictionary_words_only_as_a_and_i() -> None:
    dictionary = {"a", "i", "d", "e", "f", "hash"}
    assert quality.dictionary_share(["I saw a hash"], dictionary) == 3 / 4
    assert quality.dictionary_share(["d4e5f6"], dictionary) == 0.0  # a hash's letters are no words
    assert quality.dictionary_share([], dictionary) == 0.0


def test_distinct_2_takes_each_seeds_pages_apart() -> None:
    one = PageResult("wiki", "/wiki/Hash_table", ARTICLE, [5], 1.0, seed=0)
    again = dataclasses.replace(one, seed=1)  # the same page written with another seed
    (alone,) = report([one], SITES, set())
    (both,) = report([one, again], SITES, set())
    assert both.distinct_2 == alone.distinct_2 == 1.0


def test_a_percent_encoded_title_is_its_h1() -> None:
    article = '<article class="wiki"><h1>TCP/IP</h1><p>A protocol.</p><p>Two paragraphs.</p></article>'
    assert skeleton_ok("wiki", "/wiki/TCP%2FIP", article)
    (row,) = report([PageResult("wiki", "/wiki/TCP%2FIP", article, [5], 1.0)], SITES, set())
    assert row.title_h1 == 1.0


def test_rescore_reports_only_the_sites_asked_for_and_per_site_takes_a_positive_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quality, "load_dictionary", lambda: {"a", "table"})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"site": "wiki", "path": "/wiki/Hash_table", "html": ARTICLE, "holdout": True}))
    board = PageResult("forum", "/r/linux", "<p>board</p>", [5], 1.0)
    saved = tmp_path / "pages.jsonl"
    saved.write_text(
        "".join(
            json.dumps(dataclasses.asdict(p)) + "\n" for p in (board, dataclasses.replace(board, site="nosuchsite"))
        )
    )
    assert quality.main(["--corpus", str(corpus), "--rescore", str(saved), "--json"]) == 2
    assert "has no site nosuchsite" in capsys.readouterr().err  # named, not a KeyError
    assert (
        quality.main(["--corpus", str(corpus), "--rescore", str(saved), "--json", "--site", "forum", "--first-clicks"])
        == 0
    )
    assert [row["site"] for row in json.loads(capsys.readouterr().out)["sites"]] == ["forum"]
    with pytest.raises(SystemExit):
        quality.main(["--corpus", str(corpus), "--per-site", "0", "--list"])
    assert "not a positive count" in capsys.readouterr().err


def test_well_formed_as_written_reads_the_models_own_text_which_the_skeleton_sees_mended() -> None:
    """The sanitiser closes every tag, so the page as served is well-formed by construction: whether the model
    closed them is a column of its own."""
    unclosed = ARTICLE.replace("</p></article>", "</article></p>")  # a stray end tag, a paragraph left open
    pages = [
        PageResult("wiki", "/wiki/Hash_table", sanitize_html(unclosed), [5], 1.0, raw=unclosed),
        PageResult("wiki", "/wiki/Hash_table", ARTICLE, [5], 1.0, raw=ARTICLE),
    ]
    (row,) = report(pages, SITES, dictionary=set())
    assert row.skeleton == 1.0 and row.well_formed == 0.5
    (corpus,) = report([PageResult("wiki", "/wiki/Hash_table", ARTICLE, [], 0.0)], SITES, dictionary=set())
    assert corpus.well_formed is None  # no text of a model's to judge


def test_a_pack_of_another_tokenizer_or_none_at_all_is_refused_before_any_page_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held-out loss of a pack made for another base's tokenizer was reported as any other (its ids are other
    words to the model); a --packed that was not there was a traceback once every page had been written."""
    from engine_fixtures import build_tiny_adapter
    from transformers import AutoTokenizer

    monkeypatch.setattr(quality, "load_dictionary", lambda: {"page"})
    rows = [{"site": "wiki", "path": f"/Page_{i}", "prompt": f"p {i}", "html": "<p>page</p>"} for i in range(4)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({**row, "holdout": i < 2}) + "\n" for i, row in enumerate(rows)))
    base = build_tiny_llama_base(tmp_path / "tiny")
    model = build_tiny_adapter(base, tmp_path / "model")
    other = tmp_path / "other"
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.add_tokens(["<another-word>"])
    tokenizer.save_pretrained(other)
    packed = tmp_path / "other.npz"
    assert adapt_main(["--packed", str(packed), "--base", str(other), "--pack", str(corpus)]) == 0
    capsys.readouterr()
    argv = ["--model", str(model), "--corpus", str(corpus), "--per-site", "1", "--device", "cpu"]
    written = []
    monkeypatch.setattr(quality, "generate_pages", lambda *args: written.append(args))
    assert quality.main([*argv, "--packed", str(packed)]) == 2
    assert "was packed with another tokenizer than" in capsys.readouterr().err and not written
    assert quality.main([*argv, "--packed", str(tmp_path / "nope.npz")]) == 2
    assert "nope.npz: no such file" in capsys.readouterr().err and not written
    assert quality.main(["--corpus", str(tmp_path / "none.jsonl")]) == 2
    assert "build it with `genui corpus --text-only --out" in capsys.readouterr().err
