from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import EXAMPLES, SITES_DIR, ClientFactory, FakeEngine, visit

from engine.identity import DEFAULT_MODEL
from genui.cli import main
from genui.prompts import PromptRenderer
from genui.routing import SiteRouter
from genui.runtime import SiteRuntime
from genui.scaffold import FRONT_OPENING, FRONT_OPENINGS, NoExample, create_site, title_from_name
from genui.sites import SiteConfigError, load_site, load_sites


def test_a_new_site_loads_and_renders_every_prompt(tmp_path: Path) -> None:
    site = create_site("recipes", "A cookbook of quick dinners.", tmp_path)
    assert site == load_site(tmp_path / "recipes")
    assert (site.title, site.brief, site.stylesheet) == ("Recipes", "A cookbook of quick dinners.", "recipes.css")
    renderer, router = PromptRenderer(site), SiteRouter(site)
    for url, query in [("/", []), ("/Pancakes", []), ("/search", [("q", "soup")])]:
        location = router.resolve(url, query)
        assert location is not None
        prompt = renderer.render(location.route, location.params, location.query)
        assert prompt.startswith("<site>Recipes: A cookbook of quick dinners.</site>")
    article = router.resolve("/Pancakes", [])
    assert article is not None
    assert renderer.opening(article.route, article.params) == '<article class="wiki">\n<h1>Pancakes</h1>\n'
    home = router.resolve("/", [])
    assert home is not None
    assert renderer.opening(home.route, home.params) == (
        '<div class="home">\n<h1>Welcome to Recipes</h1>\n<p>A cookbook of quick dinners.</p>\n'
        '<h2>Featured article: <a href="/wiki/'
    )


def test_a_new_sites_pages_are_its_urls_and_the_models_article_links_lead_to_them(tmp_path: Path) -> None:
    # The default model writes article links the way the wiki's corpus has them: /wiki/Title.
    router = SiteRouter(create_site("recipes", "A cookbook.", tmp_path))
    search = router.resolve("/search", [("q", "soup")])
    assert search is not None and search.route.template == "search.j2"
    assert router.link_target("/wiki/Pancakes") == "/Pancakes"


def test_the_description_survives_quotes_backslashes_and_newlines(tmp_path: Path) -> None:
    site = create_site("quotes", 'He said "hi" \\o/\n and left\x00.', tmp_path)
    assert site.brief == 'He said "hi" \\o/ and left .'


def test_an_existing_folder_is_never_overwritten(tmp_path: Path) -> None:
    create_site("twice", "first", tmp_path)
    with pytest.raises(FileExistsError):
        create_site("twice", "second", tmp_path)
    assert load_site(tmp_path / "twice").brief == "first"


@pytest.mark.parametrize("name", ["Bad Name", "../escape", ".hidden", ""])
def test_a_bad_name_is_a_config_error_and_leaves_nothing_behind(tmp_path: Path, name: str) -> None:
    with pytest.raises(SiteConfigError) as caught:
        create_site(name, "x", tmp_path / "sites")
    assert caught.value.key == "name" and caught.value.fix
    leftovers = list((tmp_path / "sites").glob("*")) if (tmp_path / "sites").exists() else []
    assert leftovers == []
    assert not (tmp_path / "escape").exists()


def test_title_from_name() -> None:
    assert title_from_name("my-recipes") == "My Recipes" and title_from_name("x_y") == "X Y"


def test_the_sampler_keys_the_scaffold_comments_out_load_as_the_shipped_models_when_uncommented(
    tmp_path: Path,
) -> None:
    # A site that uncomments them keeps the default model's sampler: the comments may not drift from its settings.
    create_site("recipes", "A cookbook.", tmp_path)
    toml = tmp_path / "recipes" / "site.toml"
    text = toml.read_text(encoding="utf-8")
    for key in ("steps", "t_max", "t_min", "entropy_bound"):
        assert f"# {key} = " in text
        text = text.replace(f"# {key} = ", f"{key} = ")
    toml.write_text(text, encoding="utf-8")
    model = load_site(tmp_path / "recipes").model
    shipped = json.loads((DEFAULT_MODEL / "generation_config.json").read_text(encoding="utf-8"))
    assert (model.steps, model.t_max, model.t_min, model.entropy_bound) == (
        shipped["max_denoising_steps"],
        shipped["t_max"],
        shipped["t_min"],
        shipped["entropy_bound"],
    )


def test_a_new_sites_home_lists_its_pages_and_where_to_start(tmp_path: Path, client_factory: ClientFactory) -> None:
    site = create_site("recipes", "A cookbook.", tmp_path)
    assert [section.heading for section in site.navigation] == ["Pages written so far", "Start with", "More pages"]
    client = client_factory([site])
    visit(client, "/Pancakes")
    home = visit(client, "/").text
    assert '<h2>Pages written so far</h2>\n<ul>\n<li><a href="/Pancakes"' in home
    for url in ("/Getting_started", "/History", "/Glossary"):
        assert f'href="{url}"' in home and visit(client, url).status_code == 200


@pytest.mark.parametrize("example", ["forum", "os", "wiki"])
def test_a_site_from_an_example_is_the_example_under_its_new_name(tmp_path: Path, example: str) -> None:
    source = load_site(SITES_DIR / example)
    site = create_site("club", None, tmp_path, example=example)
    assert (site.name, site.title, site.brief) == ("club", "Club", source.brief)
    assert site.navigation == source.navigation
    for template in (source.prompts_dir).iterdir():
        assert (site.prompts_dir / template.name).read_bytes() == template.read_bytes()
    # The same routes; a front page the example writes from its own title alone gets the corpus's first lines.
    front = site.routes[0]
    assert site.routes[1:] == source.routes[1:] and front.pattern == "/"
    if example in FRONT_OPENINGS:
        assert source.routes[0].opening is None and front == replace(source.routes[0], opening=FRONT_OPENING)
        assert (site.prompts_dir / FRONT_OPENING).read_text(encoding="utf-8") == FRONT_OPENINGS[example]
    else:
        assert front == source.routes[0] and front.opening is not None  # the desktop's home has its own
    # Its stylesheet styles the new site's pages (body.site-club) and names it, not the example.
    assert site.stylesheet == source.stylesheet and site.stylesheet is not None
    css = (site.root / site.stylesheet).read_text(encoding="utf-8")
    assert f".site-{example}" not in css and source.title not in css
    assert css.count(".site-club") == (source.root / source.stylesheet).read_text().count(f".site-{example}") > 0


def test_a_forum_from_the_example_keeps_a_readers_post_and_writes_its_replies(
    tmp_path: Path, client_factory: ClientFactory
) -> None:
    site = create_site("club", "A chess club's forum.", tmp_path, example="forum")
    assert site.brief == "A chess club's forum."
    engine = FakeEngine()
    client = client_factory([site], engine)
    thread = "/r/chess/Openings_for_beginners"
    assert visit(client, thread).status_code == 200
    posted = client.post(thread, data={"user": "ann", "text": "Try the London."}, follow_redirects=False)
    assert posted.status_code == 303
    assert "Try the London." in visit(client, thread).text
    assert len(engine.calls) == 1 and len(engine.infills) == 1  # the thread, then the replies to the post
    assert engine.calls[0].prompt.startswith("<site>Club: A chess club's forum.</site>")


def test_an_unknown_example_names_the_ones_there_are(tmp_path: Path) -> None:
    with pytest.raises(NoExample, match="^--from blog: no example site or site folder of that name; name one of "):
        create_site("club", None, tmp_path, example="blog")
    assert list(tmp_path.iterdir()) == []


def test_a_site_folder_can_be_the_example(tmp_path: Path) -> None:
    mine = create_site("mine", "My own.", tmp_path / "a")
    copy = create_site("copy", None, tmp_path / "b", example=str(mine.root))
    assert (copy.name, copy.brief, copy.routes) == ("copy", "My own.", mine.routes)  # a site of one's own as it is


def test_a_site_folder_whose_name_line_cannot_be_rewritten_is_named_with_the_fix(tmp_path: Path) -> None:
    source = tmp_path / "mine"
    shutil.copytree(SITES_DIR / "wiki", source)
    toml = source / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('name = "wiki"', '"name" = "wiki"'), encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        create_site("club", None, tmp_path / "sites", example=str(source))
    assert caught.value.file == str(toml) and caught.value.key == "name" and "on one line" in caught.value.fix
    assert not (tmp_path / "sites" / "club").exists()


def test_a_site_folder_with_a_dangling_link_or_a_stylesheet_not_in_utf8(tmp_path: Path) -> None:
    source = tmp_path / "mine"
    shutil.copytree(SITES_DIR / "wiki", source)
    (source / "notes.txt").symlink_to(tmp_path / "gone.txt")  # an editor's leftover: skipped
    assert create_site("club", None, tmp_path / "sites", example=str(source)).name == "club"
    (source / "wiki.css").write_bytes("body { content: 'caf\xe9'; }".encode("latin-1"))
    with pytest.raises(SiteConfigError) as caught:
        create_site("club2", None, tmp_path / "sites", example=str(source))
    assert caught.value.file == str(source / "wiki.css") and "UTF-8" in caught.value.fix


def test_a_multi_line_brief_it_cannot_rewrite_is_the_key_named(tmp_path: Path) -> None:
    source = tmp_path / "mine"
    shutil.copytree(SITES_DIR / "wiki", source)
    toml = source / "site.toml"
    text = toml.read_text(encoding="utf-8")
    brief = next(line for line in text.splitlines() if line.startswith("brief = "))
    toml.write_text(text.replace(brief, 'brief = """\nA wiki\nover lines."""'), encoding="utf-8")
    assert load_site(source).brief == "A wiki\nover lines."
    with pytest.raises(SiteConfigError) as caught:
        create_site("club", "A club's wiki.", tmp_path / "sites", example=str(source))
    assert caught.value.key == "brief" and caught.value.file == str(toml)
    assert create_site("club", None, tmp_path / "sites", example=str(source)).brief == "A wiki\nover lines."


def test_a_copys_stylesheet_is_retitled_only_where_the_title_is_shown(tmp_path: Path) -> None:
    source = create_site("code", None, tmp_path / "a").root
    css = source / "code.css"
    css.write_text(css.read_text(encoding="utf-8") + 'pre { font-family: "Fira Code"; }\n', encoding="utf-8")
    copy = create_site("notes", None, tmp_path / "b", example=str(source))
    text = (copy.root / "code.css").read_text(encoding="utf-8")
    assert text.startswith("/* Notes: the look") and 'font-family: "Fira Code"' in text
    # A site with an empty title does not load (the header and the tab would show nothing): no copy is made of it.
    toml = source / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('title = "Code"', 'title = ""'), encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        create_site("other", None, tmp_path / "b", example=str(source))
    assert caught.value.key == "title" and caught.value.file == str(toml) and not (tmp_path / "b" / "other").exists()


def test_a_new_sites_folder_is_made_under_the_umask(tmp_path: Path) -> None:
    earlier = os.umask(0o022)
    try:
        made = create_site("club", None, tmp_path).root
        copied = create_site("copy", None, tmp_path, example="wiki").root
    finally:
        os.umask(earlier)
    assert stat.S_IMODE(made.stat().st_mode) == 0o755 and stat.S_IMODE(copied.stat().st_mode) == 0o755


def test_a_draft_left_by_a_killed_run_is_no_site(tmp_path: Path) -> None:
    create_site("club", None, tmp_path)
    shutil.copytree(tmp_path / "club", tmp_path / ".club-1a2b3c4d")  # what SIGTERM mid-copy leaves
    assert [site.name for site in load_sites(tmp_path)] == ["club"]


def test_a_path_to_a_folder_named_like_an_example_is_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = create_site("wiki", "My own wiki.", tmp_path).root
    monkeypatch.chdir(tmp_path)
    assert create_site("club", None, tmp_path / "out", example="./wiki").brief == "My own wiki."
    assert create_site("club2", None, tmp_path / "out", example=str(mine) + "/").brief == "My own wiki."
    assert create_site("club3", None, tmp_path / "out", example="wiki").brief != "My own wiki."  # the example's


def test_a_name_another_site_in_the_folder_has_is_refused(tmp_path: Path) -> None:
    create_site("club", None, tmp_path)
    (tmp_path / "club").rename(tmp_path / "club-old")
    with pytest.raises(FileExistsError, match="club-old/site.toml is already a site named 'club'"):
        create_site("club", None, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["club-old"]


def test_an_example_that_genui_serve_would_refuse_is_refused_before_copying(tmp_path: Path) -> None:
    source = create_site("mine", None, tmp_path / "a").root
    (source / "prompts" / "home.j2").write_text("{{ nowhere.title }}\n", encoding="utf-8")
    load_site(source)  # it loads; its trial render fails
    with pytest.raises(SiteConfigError) as caught:
        create_site("club", None, tmp_path / "b", example=str(source))
    assert caught.value.file.startswith(str(source)) and "nowhere" in str(caught.value)
    assert not (tmp_path / "b").exists()  # the folder it would have made is not left either


def test_a_dir_that_is_a_file_or_a_dangling_link_at_the_name_is_said_plainly(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        create_site("club", None, tmp_path / "afile")
    (tmp_path / "club").symlink_to(tmp_path / "gone")
    with pytest.raises(FileExistsError, match="club already exists"):
        create_site("club", None, tmp_path)


def test_a_site_from_another_in_the_same_folder_is_found_by_its_bare_name(tmp_path: Path) -> None:
    """`genui new x --from blog --dir sites`, where sites/blog is one's own site: it was "no example site of that
    name", with a fix naming only the examples."""
    create_site("blog", "A blog about tea.", tmp_path)
    site = create_site("notes", directory=tmp_path, example="blog")
    assert site.brief == "A blog about tea." and (tmp_path / "notes" / "site.toml").is_file()
    with pytest.raises(NoExample) as refused:  # it named nope/site.toml, a file there is none of
        create_site("other", directory=tmp_path, example="nope")
    assert str(refused.value) == (
        "--from nope: no example site or site folder of that name; name one of forum, os, wiki, a site folder by its"
        f" path (./nope), or a site in {tmp_path}"
    )


def test_an_opening_whose_link_leads_to_no_route_is_refused_at_load(tmp_path: Path) -> None:
    """A team renamed the scaffold's /{title} to /recipe/{title} and dropped its alias: the front page's opening still
    ended `<a href="/wiki/`, so every front page's featured link led nowhere and was dropped, and nothing said so."""
    root = create_site("rec", None, tmp_path).root
    toml = root / "site.toml"
    text = toml.read_text(encoding="utf-8")
    text = text.replace('"/{title}"', '"/recipe/{title}"')
    text = re.sub(r'aliases = \["/wiki/\{title\}"\].*', "", text)
    text = re.sub(r'url = "/(\w+)"', r'url = "/recipe/\1"', text)
    toml.write_text(text, encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        SiteRuntime.build(load_site(root), "")
    assert caught.value.key == "routes[0].opening" and caught.value.file == str(toml)
    assert "home_opening.j2 links to /wiki/…, which no route serves" in str(caught.value)
    opening = root / "prompts" / "home_opening.j2"
    opening.write_text(opening.read_text(encoding="utf-8").replace('href="/wiki/', 'href="/recipe/'), encoding="utf-8")
    SiteRuntime.build(load_site(root), "")  # the link the model finishes leads to the renamed route: it loads
    opening.write_text('<p><a href="/nowhere/at/all">x</a> <a href="#top">top</a></p>\n', encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        SiteRuntime.build(load_site(root), "")
    assert "links to /nowhere/at/all, which no route serves" in str(caught.value)
    # A link written in a file the opening includes is said to be there (the error named the opening only)
    (root / "prompts" / "_panel.j2").write_text('<p><a href="/nowhere/in/a/panel">x</a></p>\n', encoding="utf-8")
    opening.write_text('<h1>Home</h1>\n{% include "_panel.j2" %}\n', encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        SiteRuntime.build(load_site(root), "")
    said = "home_opening.j2 links to /nowhere/in/a/panel (in _panel.j2, which it includes), which no route serves"
    assert said in str(caught.value)
    # An href left open loads where some route's path could start so (a review of the check's first form refused
    # `<a href="/`, the model choosing the page, and a route's literal text past the opening's end).
    for left_open in ('<ul><li><a href="/', '<a href="/reci', '<a href="/recipe/Pan', '<a data-href="/x" href="/'):
        opening.write_text(f"<h1>Home</h1>\n{left_open}", encoding="utf-8")
        SiteRuntime.build(load_site(root), "")
    # A scaffold's own /{title}: `/recette/` starts none of its paths, a title holding no slash (it loaded, and the
    # sanitiser dropped the link from every front page: a hackathon team's walkthrough)
    create_site("cuisine", None, tmp_path)
    scaffolded = tmp_path / "cuisine" / "prompts" / "home_opening.j2"
    scaffolded.write_text('<div class="home">\n<h1>x</h1>\n<h2>Featured: <a href="/recette/', encoding="utf-8")
    with pytest.raises(SiteConfigError, match=r"links to /recette/…, which no route serves"):
        SiteRuntime.build(load_site(tmp_path / "cuisine"), "")
    scaffolded.write_text('<div class="home">\n<h1>x</h1>\n<h2>Featured: <a href="/Cr', encoding="utf-8")
    SiteRuntime.build(load_site(tmp_path / "cuisine"), "")


def test_an_opening_on_a_route_that_follows_links_may_link_anywhere(tmp_path: Path) -> None:
    """The desktop's browser opens every link of its web page on its own route (follow_links): a bookmark in its
    opening, `/wiki/Unix`, is a web page's link, not the site's."""
    root = create_site("desk", None, tmp_path, example="os").root
    site = load_site(root)
    index, browser = next((i, route) for i, route in enumerate(site.routes) if route.follow_links)
    assert browser.opening is not None
    opening = root / "prompts" / browser.opening
    opening.write_text('<div class="window"><p><a href="/wiki/Unix">Unix</a></p>\n', encoding="utf-8")
    SiteRuntime.build(load_site(root), "")


def test_a_new_site_takes_its_title_and_language_from_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A French team's site was "Cuisine" and English until site.toml was edited by hand; genui new had no way to say
    either (a note of session 63)."""
    folder = tmp_path / "sites"
    argv = ["new", "cuisine", "--title", "La Cuisine */ x", "--lang", "fr", "--dir", str(folder)]
    assert main(argv) == 0
    # its own text stays English, which a team took --help to say it would not (a hackathon team's review)
    said = capsys.readouterr().out
    assert "its pages are fr, but its own text is English until you translate it" in said and "[words]" in said
    assert "reply_form" in said and "bar =" in said  # a French scaffold's search box said "Search" (a review)
    site = load_site(folder / "cuisine")
    assert (site.title, site.lang) == ("La Cuisine */ x", "fr")
    css = (folder / "cuisine" / "cuisine.css").read_text(encoding="utf-8")
    assert css.startswith("/* La Cuisine * / x:")  # the title cannot end the stylesheet's comment
    assert main(["new", "salon", "--from", "forum", "--lang", "fr", "--title", "Le Salon", "--dir", str(folder)]) == 0
    copied = load_site(folder / "salon")
    forum = [route.pattern for route in load_site(SITES_DIR / "forum").routes]
    assert (copied.title, copied.lang, [route.pattern for route in copied.routes]) == ("Le Salon", "fr", forum)
    # a copy's stylesheet shows the title in comments and in content: strings, each as it can hold it (a review)
    assert main(["new", "quote", "--from", "wiki", "--title", 'Say "hi" */ C:\\x', "--dir", str(folder)]) == 0
    wiki_css = (folder / "quote" / "wiki.css").read_text(encoding="utf-8")
    assert 'Say \\"hi\\" */ C:\\\\x' in wiki_css and 'Say "hi" * / C:\\x' in wiki_css
    # French and Japanese titles keep their no-break and full-width spaces
    capsys.readouterr()
    assert main(["new", "nbsp", "--title", "La Cuisine\u202f: recettes", "--dir", str(folder)]) == 0
    assert load_site(folder / "nbsp").title == "La Cuisine\u202f: recettes"
    assert "translate" not in capsys.readouterr().out  # English: nothing to say
    for wrong, said in ((["--lang", "french"], "no language tag"), (["--title", " "], "--title takes one line")):
        assert main(["new", "other", *wrong, "--dir", str(folder)]) == 2
        assert said in capsys.readouterr().err and not (folder / "other").exists()


def test_the_scaffolds_form_example_loads_once_its_lines_are_uncommented(tmp_path: Path) -> None:
    """genui new shows how a page asks for several values (a route's form), commented out: taken as it says, it loads
    and draws its form (a hackathon team's trip planner found no way to ask for more than one)."""
    root = create_site("cmp", None, tmp_path).root
    toml = root / "site.toml"
    text = toml.read_text(encoding="utf-8")
    block = text[text.index('# [[routes]]\n# pattern = "/compare"') :].split("\n\n", 1)[0]
    toml.write_text(text.replace(block, "\n".join(line.removeprefix("# ") for line in block.splitlines())), "utf-8")
    (root / "prompts" / "compare.j2").write_text("<page>{{ query.first }} and {{ query.second }}</page>\n", "utf-8")
    site = load_site(root)
    compare = next(route for route in site.routes if route.pattern == "/compare")
    assert compare.form == (("first", "Compare"), ("second", "with")) and compare.form_words == "Compare"
    assert SiteRuntime.build(site, "").locate("/compare?first=Lisp&second=Scheme").route is compare  # type: ignore[union-attr]
    # and a link to it, as the comment says: the form has no box in the site bar, and was reached by nothing (a review)
    said = re.search(r'^# (\{ label = "Compare", url = "/compare" \})\.$', text, re.M)
    assert said is not None
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace("links = [\n", f"links = [\n  {said.group(1)},\n", 1), "utf-8")
    start = next(s for s in SiteRuntime.build(load_site(root), "").site.navigation if s.heading == "Start with")
    assert start.links[0].url == "/compare"


def test_a_stylesheets_dark_look_is_only_for_a_browser_whose_chrome_goes_dark_with_it(tmp_path: Path) -> None:
    """genui's chrome goes dark by light-dark() (2024 on); a browser older than it that read a site's dark block
    showed a new site's article as genui's dark ink on the block's dark page, 1.03:1 (a dark-mode reader's review).
    Every dark block, the examples' and genui new's, is inside `@supports (color: light-dark(...))`."""
    made = create_site("night", directory=tmp_path / "sites")
    sheets = [SITES_DIR / name / f"{name}.css" for name in EXAMPLES] + [made.root / "night.css"]
    for sheet in sheets:
        css = re.sub(r"/\*.*?\*/", "", sheet.read_text(encoding="utf-8"), flags=re.S)
        guarded = re.findall(
            r"@supports \(color: light-dark\(#000, #fff\)\) \{\s*@media screen and \(prefers-color-scheme: dark\)", css
        )
        assert css.count("prefers-color-scheme: dark") == len(guarded) == 1, sheet
        assert ":root { color-scheme: dark; }" in css, sheet
