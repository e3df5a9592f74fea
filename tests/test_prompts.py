from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakes import SITES_DIR

from genui.prompts import GAP, Parent, Post, PromptError, PromptRenderer, split_gaps
from genui.sites import Site, SiteConfigError, load_site


def copy_site(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(SITES_DIR / name, root)
    return root


def test_article_prompt_carries_title_and_parent(wiki: Site) -> None:
    renderer = PromptRenderer(wiki)
    article = wiki.routes[2]
    prompt = renderer.render(article, {"title": "Hash_table"}, parent=Parent("/wiki/Lisp", "Lisp"))
    assert "<title>Hash table</title>" in prompt and "<from>Lisp</from>" in prompt
    assert prompt.startswith(f"<site>{wiki.title}: {wiki.brief}</site>")


def test_parent_and_posts_are_dropped_when_the_route_does_not_ask_for_them(wiki: Site) -> None:
    renderer = PromptRenderer(wiki)
    home = wiki.routes[0]
    prompt = renderer.render(home, {}, parent=Parent("/x", "X"), posts=[Post("ada", "hi")])
    assert "X" not in prompt and "ada" not in prompt


def test_posts_go_into_a_thread_prompt_as_data() -> None:
    forum = load_site(SITES_DIR / "forum")
    thread = forum.routes[2]
    prompt = PromptRenderer(forum).render(
        thread, {"board": "lisp", "thread": "Macros"}, posts=[Post("ada", "{{ 7*7 }} {% raw %}")]
    )
    assert '<reply user="ada">{{ 7*7 }} {% raw %}</reply>' in prompt


def test_url_text_is_data_never_template_code(wiki: Site) -> None:
    prompt = PromptRenderer(wiki).render(wiki.routes[1], {}, {"q": "{{ site.__class__ }}"})
    assert "<query>{{ site.__class__ }}</query>" in prompt


def test_only_declared_query_keys_reach_the_template(wiki: Site) -> None:
    prompt = PromptRenderer(wiki).render(wiki.routes[1], {}, {"q": "lisp", "other": "secret"})
    assert "lisp" in prompt and "secret" not in prompt


def test_version_changes_when_the_template_source_changes(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    before = PromptRenderer(load_site(root))
    (root / "prompts" / "article.j2").write_text("<page>article</page>\n{{ params.title }}\n", encoding="utf-8")
    after = PromptRenderer(load_site(root))
    site = load_site(root)
    assert before.version(site.routes[2]) != after.version(site.routes[2])
    assert before.version(site.routes[0]) == after.version(site.routes[0])


def test_a_template_syntax_error_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "home.j2").write_text("{% if %}", encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("home.j2") and caught.value.fix


@pytest.mark.parametrize(
    ("source", "said", "fix"),
    [
        ('<p>\n{{ params.title | replace("_", " ") }\n', "line 2: unexpected '}'", "Fix: fix the template syntax"),
        ("<p>\n\n{{ params.title | titel }}\n", "line 3: No filter named 'titel'. Fix: use one of Jinja2", "Jinja2"),
    ],
)
def test_a_template_syntax_error_names_its_line(tmp_path: Path, source: str, said: str, fix: str) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "article.j2").write_text(source, encoding="utf-8")
    with pytest.raises(SiteConfigError, match="article.j2") as caught:
        PromptRenderer(load_site(root))
    assert said in str(caught.value) and fix in str(caught.value) and ".." not in str(caught.value)


def test_a_mistake_only_a_visit_without_the_query_meets_is_a_config_error_where_that_visit_writes_a_page(
    tmp_path: Path,
) -> None:
    """A route of two query keys and no form writes a page with neither given: every key is "" and the template's
    other branch renders. The site bar's search writes none with its box empty (Location.blank): no page meets it."""
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "search.j2").write_text(
        "{% if query.q %}<query>{{ query.q }}</query>{% else %}<query>{{ site.titel }}</query>{% endif %}\n"
    )
    PromptRenderer(load_site(root))  # /search, its box empty, is the bar's and no page
    toml = root / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('query = ["q"]', 'query = ["q", "page"]'), "utf-8")
    with pytest.raises(SiteConfigError, match="search.j2.*titel"):
        PromptRenderer(load_site(root))


def test_the_sandbox_refuses_unsafe_attribute_access(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "home.j2").write_text("{{ site.__class__.__mro__ }}", encoding="utf-8")
    site = load_site(root)
    with pytest.raises(Exception, match="unsafe|undefined"):
        PromptRenderer(site).render(site.routes[0], {})


def test_an_opening_is_html_with_the_url_text_escaped(wiki: Site) -> None:
    renderer = PromptRenderer(wiki)
    article, home = wiki.routes[2], wiki.routes[0]
    opening = renderer.opening(article, {"title": "AT&T_<b>{{ 7*7 }}"})
    assert opening == '<article class="wiki">\n<h1>AT&amp;T &lt;b&gt;{{ 7*7 }}</h1>\n'
    assert renderer.opening(home, {}) == ""  # a route without an opening


def test_version_changes_when_the_opening_changes(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    before = PromptRenderer(load_site(root))
    (root / "prompts" / "article_opening.j2").write_text("<h2>{{ params.title }}</h2>\n", encoding="utf-8")
    site = load_site(root)
    after = PromptRenderer(site)
    assert before.version(site.routes[2]) != after.version(site.routes[2])
    assert before.version(site.routes[0]) == after.version(site.routes[0])
    assert after.opening(site.routes[2], {"title": "Lisp"}) == "<h2>Lisp</h2>\n"


def test_an_index_past_a_lists_end_loads_and_its_page_says_to_check_the_length(tmp_path: Path) -> None:
    """`params.title.split("_")[1]` on `/Pancakes` was told to "use the variables a template is given" (a hackathon
    team's walkthrough): the fix is to check the list's length."""
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "article.j2").write_text('{{ params.title.split("_")[1] }}', encoding="utf-8")
    site = load_site(root)
    renderer = PromptRenderer(site)  # loads: "Sample" has one part, another title two
    assert renderer.render(site.routes[2], {"title": "Hash_table"}) == "table"
    with pytest.raises(PromptError) as caught:
        renderer.render(site.routes[2], {"title": "Pancakes"})
    assert "has no element 1" in caught.value.public and "check its length first" in caught.value.public


@pytest.mark.parametrize(
    ("site", "file", "key"),
    [("wiki", "article_opening.j2", "opening"), ("forum", "reply_opening.j2", "reply_opening")],
)
def test_a_syntax_error_in_an_opening_is_a_config_error_naming_the_file_and_its_key(
    tmp_path: Path, site: str, file: str, key: str
) -> None:
    """The key is the route's for the file, as a rendering error's is (the docs say so): it was `template`."""
    root = copy_site(tmp_path, site)
    (root / "prompts" / file).write_text("<h1>{{ params.title </h1>", encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith(file) and caught.value.key == key and caught.value.fix


def test_an_opening_s_gaps_split_it_into_the_pieces_the_model_writes_between(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "article_opening.j2").write_text(
        "<h1>{{ params.title }}</h1><p>Born {{ gap() }}, died {{ gap() }}.</p>", encoding="utf-8"
    )
    site = load_site(root)
    opening = PromptRenderer(site).opening(site.routes[2], {"title": "Ada"})
    assert split_gaps(opening) == ("<h1>Ada</h1><p>Born ", (", died ", ".</p>"))
    assert split_gaps("<h1>Ada</h1>") == ("<h1>Ada</h1>", ())


@pytest.mark.parametrize("depth", [120, 400])
def test_a_template_nested_too_deeply_to_compile_is_a_config_error(tmp_path: Path, depth: int) -> None:
    root = copy_site(tmp_path, "wiki")
    nested = "{% if 1 %}" * depth + "x" + "{% endif %}" * depth
    (root / "prompts" / "article.j2").write_text(nested, encoding="utf-8")
    with pytest.raises(SiteConfigError, match="article.j2: key 'template': nested too deeply to compile"):
        PromptRenderer(load_site(root))


def test_a_lookup_by_a_urls_value_loads_and_an_import_of_a_name_not_there_does_not(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    article = root / "prompts" / "article.j2"
    article.write_text('{% set known = {"Lisp": "a language"} %}{{ known[params.title] }}', encoding="utf-8")
    site = load_site(root)
    assert PromptRenderer(site).render(site.routes[2], {"title": "Lisp"}) == "a language"  # "Sample" fails alone
    # by a query's value too: a search's address with nothing asked writes no page, and one sent empty where a page is
    # written is that page's to meet ("'dict object' has no attribute ''" refused it at load: a hackathon team's review)
    search = root / "prompts" / "search.j2"
    search.write_text('{% set origin = {"pizza": "Italy"} %}<origin>{{ origin[query.q] }}</origin>', encoding="utf-8")
    site = load_site(root)
    assert PromptRenderer(site).render(site.routes[1], {}, {"q": "pizza"}) == "<origin>Italy</origin>"
    toml = root / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('query = ["q"]', 'query = ["q", "page"]'), "utf-8")
    site = load_site(root)  # two keys and no form: /search alone is a page, which fails, and the config loads
    assert PromptRenderer(site).render(site.routes[1], {}, {"q": "pizza", "page": ""}) == "<origin>Italy</origin>"
    (root / "prompts" / "macros.j2").write_text("{% macro shown() %}x{% endmacro %}", encoding="utf-8")
    article.write_text('{% from "macros.j2" import nope %}{{ nope() }}', encoding="utf-8")
    with pytest.raises(SiteConfigError, match="does not export the requested name"):  # fails on every page
        PromptRenderer(load_site(root))


@pytest.mark.parametrize(
    ("line", "fails"),
    [
        ("{{ params.title + 1 }}", "TypeError"),
        ("{{ 1 // 0 }}", "ZeroDivisionError"),
        ("{{ params.title() }}", "TypeError"),
    ],
)
def test_a_template_line_that_fails_whatever_the_values_is_a_config_error_at_load(
    tmp_path: Path, line: str, fails: str
) -> None:
    """It loaded, and every page of the route was a 500 "Template error"; under --reload the edit was taken up in
    place of the last good config (a site developer's review)."""
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "article.j2").write_text(f"<page>\n{line}", encoding="utf-8")
    with pytest.raises(SiteConfigError, match=rf"line 2: {fails}"):
        PromptRenderer(load_site(root))


@pytest.mark.parametrize(
    "line",
    [
        "{{ 10 // (params.title | int) }}",  # a number passes
        '{{ params.title.split("-")[1] }}',  # a value with a dash
        '{% include "topics/" ~ params.title ~ ".j2" %}',  # a title that names a file (a review of this change)
        # a parent deeper than the sample's
        '{% if parent %}{{ "{} {}".format(*parent.path.split("/")[1:3]) }}{% endif %}',
    ],
)
def test_a_template_line_that_some_values_pass_loads(tmp_path: Path, line: str) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "topics").mkdir()
    (root / "prompts" / "topics" / "Lisp.j2").write_text("a language", encoding="utf-8")
    (root / "prompts" / "article.j2").write_text(line, encoding="utf-8")
    PromptRenderer(load_site(root))


@pytest.mark.parametrize(
    ("site", "file", "key"),
    [
        ("wiki", "article_opening.j2", "opening"),
        ("forum", "reply_opening.j2", "reply_opening"),
        ("wiki", "article.j2", "template"),
    ],
)
def test_a_template_that_fails_at_load_is_named_with_the_routes_key_for_it(
    tmp_path: Path, site: str, file: str, key: str
) -> None:
    root = copy_site(tmp_path, site)
    (root / "prompts" / file).write_text("{{ params.nosuch }}", encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith(file) and caught.value.key == key and f"key '{key}'" in str(caught.value)


def test_url_text_cannot_make_a_gap(wiki: Site) -> None:
    opening = PromptRenderer(wiki).opening(wiki.routes[2], {"title": f"A{GAP}B"})
    assert GAP not in opening and "<h1>AB</h1>" in opening


@pytest.mark.parametrize("marked", ["e", "safe", "forceescape"])
def test_url_or_page_text_makes_no_gap_through_a_filter_that_marks_it_safe(tmp_path: Path, marked: str) -> None:
    root = copy_site(tmp_path, "wiki")
    shown = f"<h1>{{{{ params.title | {marked} }}}}</h1>"
    template = shown + f"{{% if parent %}}<p>{{{{ parent.title | {marked} }}}}</p>{{% endif %}}"
    (root / "prompts" / "article_opening.j2").write_text(template, encoding="utf-8")
    site = load_site(root)
    opening = PromptRenderer(site).opening(site.routes[2], {"title": f"A{GAP}B"}, parent=Parent("/X", f"C{GAP}D"))
    assert GAP not in opening and split_gaps(opening)[1] == () and "AB" in opening and "CD" in opening


def test_a_gap_in_a_reply_opening_is_a_config_error_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "forum")
    (root / "prompts" / "reply_opening.j2").write_text('<div class="reply">{{ gap() }}', encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    error = caught.value
    assert error.file.endswith("reply_opening.j2") and error.key == "gap()"
    assert "route's opening" in error.fix


def versions(root: Path) -> list[str]:
    site = load_site(root)
    renderer = PromptRenderer(site)
    return [renderer.version(route) for route in site.routes]


def edit(file: Path, old: str, new: str) -> None:
    text = file.read_text(encoding="utf-8")
    assert old in text
    file.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_version_changes_with_the_settings_of_site_toml_a_page_is_written_with(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    first = versions(root)
    edit(root / "site.toml", "A free encyclopedia", "An encyclopedia")  # the brief: every wiki route reads it
    second = versions(root)
    assert all(a != b for a, b in zip(first, second, strict=True))
    edit(root / "site.toml", "tokens = 384", "tokens = 256")  # [model]
    third = versions(root)
    assert all(a != b for a, b in zip(second, third, strict=True))
    edit(root / "site.toml", 'heading = "Start with"', 'heading = "Begin with"')  # navigation is shown, not written
    assert versions(root) == third


def test_the_brief_is_in_the_version_of_a_route_that_reads_it_only(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    edit(root / "site.toml", 'template = "home.j2"\ncontext = ["brief"]', 'template = "home.j2"\ncontext = []')
    (root / "prompts" / "home.j2").write_text("<page>home</page>\n", encoding="utf-8")
    home_before, *others_before = versions(root)
    edit(root / "site.toml", "A free encyclopedia", "An encyclopedia")
    home_after, *others_after = versions(root)
    assert home_before == home_after
    assert all(a != b for a, b in zip(others_before, others_after, strict=True))


def test_version_changes_with_a_template_the_prompt_includes(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    (prompts / "parts").mkdir()
    (prompts / "parts" / "rules.j2").write_text("Write short paragraphs.\n", encoding="utf-8")
    (prompts / "parts" / "voice.j2").write_text("{% include 'parts/rules.j2' %}\n", encoding="utf-8")
    edit(prompts / "article.j2", "<page>article</page>", "{% include 'parts/voice.j2' %}<page>article</page>")
    before = versions(root)
    (prompts / "parts" / "rules.j2").write_text("Write long paragraphs.\n", encoding="utf-8")  # two includes deep
    after = versions(root)
    assert before[2] != after[2] and before[:2] == after[:2]
    site = load_site(root)
    assert "Write long paragraphs." in PromptRenderer(site).render(site.routes[2], {"title": "Lisp"})


def test_a_prompt_that_includes_a_name_it_computes_hashes_every_template(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    edit(prompts / "article.j2", "<page>article</page>", "{% include 'part_' ~ 'a.j2' %}<page>article</page>")
    (prompts / "part_a.j2").write_text("A\n", encoding="utf-8")
    before = versions(root)
    (prompts / "part_b.j2").write_text("B\n", encoding="utf-8")  # it might be the one included
    after = versions(root)
    assert before[2] != after[2] and before[:2] == after[:2]


def test_a_missing_include_is_a_config_error_naming_the_file_that_includes_it(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    edit(root / "prompts" / "article.j2", "<page>article</page>", "{% include 'parts/gone.j2' %}<page>article</page>")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("article.j2") and "parts/gone.j2" in caught.value.problem
    assert caught.value.fix


def test_a_syntax_error_in_an_included_template_names_that_template(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "rules.j2").write_text("{% if %}", encoding="utf-8")
    edit(root / "prompts" / "article.j2", "<page>article</page>", "{% include 'rules.j2' %}<page>article</page>")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("rules.j2") and "Jinja2" in caught.value.problem


@pytest.mark.parametrize(
    ("pulls_in", "part"),
    [
        ("{% import 'macros.j2' as m %}{{ m.rules() }}", "{% macro rules() %}Be brief.{% endmacro %}"),
        ("{% from 'macros.j2' import rules %}{{ rules() }}", "{% macro rules() %}Be brief.{% endmacro %}"),
        ("{% include '/macros.j2' %}", "Be brief."),  # Jinja2 reads it from the prompts folder too
        ("{% include ['gone.j2', 'macros.j2'] %}", "Be brief."),  # the first that exists
        ("{% include 'gone.j2' ignore missing %}{% include 'macros.j2' %}", "Be brief."),
    ],
)
def test_version_changes_with_a_template_imported_or_included_in_any_form(
    tmp_path: Path, pulls_in: str, part: str
) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    (prompts / "macros.j2").write_text(part, encoding="utf-8")
    edit(prompts / "article.j2", "<page>article</page>", pulls_in + "<page>article</page>")
    before = versions(root)
    (prompts / "macros.j2").write_text(part.replace("brief", "thorough"), encoding="utf-8")
    after = versions(root)
    assert before[2] != after[2] and before[:2] == after[:2]
    site = load_site(root)
    assert "Be thorough." in PromptRenderer(site).render(site.routes[2], {"title": "Lisp"})


def test_version_changes_with_the_template_a_prompt_extends(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    (prompts / "base.j2").write_text("<site>{{ site.title }}</site>\n{% block page %}{% endblock %}", encoding="utf-8")
    (prompts / "article.j2").write_text(
        "{% extends 'base.j2' %}{% block page %}<page>article</page>{% endblock %}", encoding="utf-8"
    )
    before = versions(root)
    edit(prompts / "base.j2", "<site>", "<site name>")
    assert versions(root)[2] != before[2]


def test_an_optional_include_that_appears_later_changes_the_version(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    edit(prompts / "article.j2", "<page>article</page>", "{% include 'extra.j2' ignore missing %}<page>article</page>")
    before = versions(root)  # loads: the missing template may be missing
    (prompts / "extra.j2").write_text("Mention the year.\n", encoding="utf-8")
    assert versions(root)[2] != before[2]


@pytest.mark.parametrize(
    "pulls_in",
    [
        "{% include ['gone.j2', 'also_gone.j2'] %}",  # none of the list exists
        "{% include 'part_' ~ 'a.j2' %}{% include 'gone.j2' %}",  # a computed name does not end the checks
    ],
)
def test_a_missing_include_in_any_form_is_a_config_error(tmp_path: Path, pulls_in: str) -> None:
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "part_a.j2").write_text("A\n", encoding="utf-8")
    edit(root / "prompts" / "article.j2", "<page>article</page>", pulls_in + "<page>article</page>")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("article.j2") and "gone.j2" in caught.value.problem


def test_version_changes_with_the_sites_title_and_a_routes_query_keys(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    first = versions(root)
    edit(root / "site.toml", 'title = "Genpedia"', 'title = "Hackopedia"')
    second = versions(root)
    assert all(a != b for a, b in zip(first, second, strict=True))
    edit(root / "site.toml", 'query = ["q"]', 'query = ["q", "lang"]')  # the search route's
    third = versions(root)
    assert third[1] != second[1] and third[0] == second[0] and third[2] == second[2]


def test_a_gap_in_a_template_a_reply_opening_includes_is_a_config_error(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "forum")
    prompts = root / "prompts"
    (prompts / "reply_meta.j2").write_text("<b>{{ gap() }}</b>", encoding="utf-8")
    (prompts / "reply_opening.j2").write_text('<div class="replies">{% include "reply_meta.j2" %}', encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.key == "gap()"


def test_a_required_include_is_checked_though_a_list_found_it_missing_first(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    (prompts / "b.j2").write_text("B\n", encoding="utf-8")
    (prompts / "c.j2").write_text("{% include 'nope.j2' %}", encoding="utf-8")
    pulls_in = "{% include 'c.j2' %}{% include ['nope.j2', 'b.j2'] %}"
    edit(prompts / "article.j2", "<page>article</page>", pulls_in + "<page>article</page>")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("c.j2") and "nope.j2" in caught.value.problem


def test_a_computed_include_hashes_the_other_files_without_reading_them_as_templates(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    prompts = root / "prompts"
    (prompts / "part_a.j2").write_text("A\n", encoding="utf-8")
    (prompts / "notes.bin").write_bytes(b"\xff\xfe {% not a template")
    edit(prompts / "article.j2", "<page>article</page>", "{% include 'part_' ~ 'a.j2' %}<page>article</page>")
    before = versions(root)  # loads: a stray file is no template error
    (prompts / "notes.bin").write_bytes(b"\xff\xfe changed")
    assert versions(root)[2] != before[2]


@pytest.mark.parametrize(
    ("template", "added", "problem", "fix"),
    [
        ("article.j2", "{{ params.nosuch }}", "has no attribute 'nosuch'", "params.<the pattern's names>"),
        ("article.j2", "{{ parent.title }}", "'None' has no attribute 'title'", "guard the ones that may be missing"),
        ("article.j2", "{% include 'article.j2' %}", "RecursionError", "break the cycle"),
        ("article.j2", "{{ gap() }}", "'gap' is undefined", "gap() is for openings only"),
        ("article_opening.j2", "{{ site.nosuch }}", "UndefinedError", "guard the ones that may be missing"),
        # Only a click's page has a parent, and only a thread's page with posts: a mistake there fails those.
        ("article.j2", "{% if parent %}{{ parent.url }}{% endif %}", "no attribute 'url'", "has .path and .title"),
        ("article.j2", "{% if parent %}{{ parent.title | titlecase }}{% endif %}", "No filter named", "correct"),
        ("article.j2", "{{ params.title.capitalise() }}", "no attribute 'capitalise'", "str's methods"),
        ("article.j2", "{% if params.title is blank %}x{% endif %}", "No test named 'blank'", "correct the template"),
    ],
)
def test_a_template_that_fails_on_every_page_is_a_config_error_at_load_naming_file_and_line(
    tmp_path: Path, template: str, added: str, problem: str, fix: str
) -> None:
    """Rendered with sample values at load: what would fail every page of the route (a variable it is not given,
    a parent a first visit has not, a template including itself, an opening's call in a prompt) is found then,
    not as a failed page."""
    root = copy_site(tmp_path, "wiki")
    file = root / "prompts" / template
    lines = file.read_text(encoding="utf-8").count("\n")
    file.write_text(file.read_text(encoding="utf-8") + added + "\n", encoding="utf-8")
    with pytest.raises(PromptError) as caught:
        PromptRenderer(load_site(root))
    error = caught.value
    assert error.file == str(file) and f"line {lines + 1}:" in error.problem
    assert problem in error.problem and fix in error.fix
    assert error.public.startswith(f"wiki/prompts/{template}: ") and str(tmp_path) not in error.public


def test_a_template_that_may_fail_on_the_sample_values_alone_still_loads(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    split = '{% set words = params.title.split("_") %}<page>article {{ words[1] }}</page>'
    edit(root / "prompts" / "article.j2", "<page>article</page>", split)
    site = load_site(root)
    renderer = PromptRenderer(site)  # "Sample" has no second word: a page's value might
    assert "<page>article table</page>" in renderer.render(site.routes[2], {"title": "Hash_table"})


def test_a_template_that_fails_on_some_values_fails_those_pages_only(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    edit(root / "prompts" / "article.j2", "<page>article</page>", "{{ 1 // (params.title | length - 4) }}")
    site = load_site(root)
    renderer = PromptRenderer(site)  # loads: "Sample" divides
    article = site.routes[2]
    assert "<title>Hash table</title>" in renderer.render(article, {"title": "Hash table"})
    with pytest.raises(PromptError, match=r"line 2: ZeroDivisionError") as caught:
        renderer.render(article, {"title": "Lisp"})
    assert caught.value.public.startswith("wiki/prompts/article.j2: rendering it failed at line 2")


def test_a_template_that_fails_on_a_threads_first_visit_is_a_config_error(tmp_path: Path) -> None:
    """`{{ posts[0].user }}` fails on every thread's first visit (no posts yet), whatever the URL: found at load,
    while the same lookup guarded by `{% if posts %}` loads."""
    root = copy_site(tmp_path, "forum")
    file = root / "prompts" / "thread.j2"
    source = file.read_text(encoding="utf-8")
    file.write_text(source + "{% if posts %}{{ posts[0].user }}{% endif %}\n", encoding="utf-8")
    PromptRenderer(load_site(root))
    file.write_text(source + "{{ posts[0].user }}\n", encoding="utf-8")
    with pytest.raises(PromptError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file == str(file) and "no element 0" in caught.value.problem


def test_a_first_visits_failure_that_other_values_pass_is_left_to_the_pages(tmp_path: Path) -> None:
    """Only a first visit takes the branch, and it fails on "Sample" alone (no second word): a thread titled
    `Macros_in_Lisp` renders, so the site loads."""
    root = copy_site(tmp_path, "forum")
    file = root / "prompts" / "thread.j2"
    file.write_text(
        file.read_text(encoding="utf-8") + '{% if not posts %}{{ params.thread.split("_")[1] }}{% endif %}\n'
    )
    PromptRenderer(load_site(root))


def test_a_template_two_routes_share_names_the_route_it_fails_for(tmp_path: Path) -> None:
    root = copy_site(tmp_path, "wiki")
    toml = root / "site.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace(
            "[[routes]]", '[[routes]]\npattern = "/reviews/{book}"\ntemplate = "article.j2"\n\n[[routes]]', 1
        ),
        encoding="utf-8",
    )
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    said = str(caught.value)
    assert "article.j2" in said and "(for the route /reviews/{book}, which has params.book). Fix:" in said


@pytest.mark.parametrize(
    ("file", "text", "key", "problem"),
    [
        ("article.j2", "\ufeff<site>{{ site.title }}</site>\n", "template", "byte order mark"),
        ("article_opening.j2", "\ufeff<h1>{{ params.title }}</h1>\n", "opening", "byte order mark"),
        ("article.j2", "", "template", "it is empty"),
        ("article.j2", " \n\n", "template", "it is empty"),
    ],
)
def test_a_prompt_file_with_a_byte_order_mark_or_nothing_in_it_is_a_config_error(
    tmp_path: Path, file: str, text: str, key: str, problem: str
) -> None:
    """A mark was kept in every prompt (site.toml with one was refused already), and an empty template made every
    page's prompt "": both loaded and served (found by a new developer's walkthrough)."""
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / file).write_text(text, encoding="utf-8")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith(file) and caught.value.key == key and problem in caught.value.problem


@pytest.mark.parametrize(
    ("opening", "refused"),
    [
        ('<dl><dt>Scale</dt><dd title="{{ gap() }}">x</dd></dl>', True),
        ("<dl><dt>Scale</dt><dd class={{ gap() }}>x</dd></dl>", True),
        ("<dl><dt>Scale</dt><dd>{{ gap() }}</dd></dl>", False),
        ('<p title="a &gt; b">{{ gap() }}</p>', False),
    ],
)
def test_a_gap_inside_a_tag_is_a_config_error_naming_the_opening(tmp_path: Path, opening: str, refused: bool) -> None:
    """docs/sites.md says a gap belongs in text (it ends at a tag, not at a quote), and one in an attribute loaded."""
    root = copy_site(tmp_path, "os")
    (root / "prompts" / "settings_opening.j2").write_text(opening, encoding="utf-8")
    if not refused:
        PromptRenderer(load_site(root))
        return
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert caught.value.file.endswith("settings_opening.j2") and caught.value.key == "opening"
    assert "inside a tag" in caught.value.problem and "<dd>{{ gap() }}</dd>" in caught.value.fix


def test_a_variable_undefined_in_an_imported_macro_says_to_import_with_context(tmp_path: Path) -> None:
    """Jinja2 imports a file without the template's variables unless told: the fix named the variables alone."""
    root = copy_site(tmp_path, "wiki")
    (root / "prompts" / "parts.j2").write_text("{% macro title() %}{{ params.title }}{% endmacro %}", encoding="utf-8")
    article = root / "prompts" / "article.j2"
    article.write_text("{% import 'parts.j2' as parts %}" + article.read_text(encoding="utf-8") + "{{ parts.title() }}")
    with pytest.raises(SiteConfigError) as caught:
        PromptRenderer(load_site(root))
    assert "with context" in caught.value.fix, caught.value
    (root / "prompts" / "article.j2").write_text(article.read_text().replace("as parts %}", "as parts with context %}"))
    PromptRenderer(load_site(root))  # as the fix says


def test_a_posts_angle_brackets_are_entities_in_a_prompt_and_escaped_once_in_an_opening(tmp_path: Path) -> None:
    """The prompt's escaping reached the openings too, which escape every value themselves: a post `a<b` showed as
    `a&lt;b` on the page (a review of this session's change)."""
    root = copy_site(tmp_path, "forum")
    (root / "prompts" / "reply_opening.j2").write_text("{% for post in posts %}<p>{{ post.text }}</p>{% endfor %}")
    site = load_site(root)
    route = next(route for route in site.routes if route.reply_opening)
    renderer = PromptRenderer(site)
    params = {name: "x" for name in route.params}
    posts = [Post("ada", "if a<b && c>d")]
    assert "if a&lt;b && c&gt;d" in renderer.render(route, params, {}, None, posts)
    assert renderer.reply_opening(route, params, {}, None, posts) == "<p>if a&lt;b &amp;&amp; c&gt;d</p>"
