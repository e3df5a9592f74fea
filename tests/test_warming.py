"""genui cache warm: a site's pages written before anyone asks, each as the click would write it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakes import SITES_DIR, FakeEngine, wiki_writer

from engine.frames import GenerationRequest
from genui.cli import main
from genui.store import Store


class Loader:
    """The model loader genui's commands take, handing out one fake engine and remembering it."""

    def __init__(self) -> None:
        self.engine = FakeEngine()

    def __call__(self, model: str | None, device: str | None, int8: bool) -> FakeEngine:
        return self.engine


def warm(db: Path, *argv: str, loader: Loader, sites: Path = SITES_DIR) -> int:
    return main(["cache", "warm", "--db", str(db), "--sites-dir", str(sites), *argv], load_engine=loader)


def stored_urls(db: Path) -> int:
    store = Store(db)
    try:
        return sum(group.urls for group in store.page_groups())
    finally:
        store.close()


def test_warm_writes_the_front_page_and_then_its_links_as_a_click_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, loader = tmp_path / "genui.sqlite3", Loader()
    assert warm(db, "wiki", "--pages", "3", loader=loader) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in lines[:3]] == ["/", "/Genpedia_tree", "/Genpedia_map"]
    assert all("wrote" in line for line in lines[:3]) and lines[-1].startswith("wrote 3 pages")
    prompts = [call.prompt for call in loader.engine.calls]
    assert len(prompts) == 3 and all("<from>Genpedia</from>" in prompt for prompt in prompts[1:])  # the parent
    assert stored_urls(db) == 3

    assert warm(db, "wiki", "--pages", "2", loader=loader) == 0  # again: what is stored is passed through
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:5]] == ["cached", "cached", "cached", "wrote", "wrote"]
    assert stored_urls(db) == 5 and len(loader.engine.calls) == 5


def test_warm_starts_from_the_pages_named_and_says_what_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, loader, sites = tmp_path / "genui.sqlite3", Loader(), tmp_path / "sites"
    shutil.copytree(SITES_DIR / "os", sites / "os")
    toml = sites / "os" / "site.toml"
    text = toml.read_text(encoding="utf-8")
    start = text.index('pattern = "/terminal"')
    route = text[start : text.index("[[routes]]", start)]  # the terminal's route, never cached from here on
    assert 'cache = "forever"' in route
    toml.write_text(text.replace(route, route.replace('cache = "forever"', 'cache = "none"')), encoding="utf-8")
    assert warm(db, "os", "/terminal?cmd=ls", "/files/home", "--pages", "1", loader=loader, sites=sites) == 0
    out = capsys.readouterr().out
    assert "never cached" in out and "/terminal?cmd=ls" in out
    assert "wrote" in out and "/files/home" in out and stored_urls(db) == 1
    assert warm(db, "os", "/no/such/page", loader=loader, sites=sites) == 2
    assert "no route of site 'os' matches '/no/such/page'" in capsys.readouterr().err


def test_a_page_named_twice_is_warmed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, loader = tmp_path / "genui.sqlite3", Loader()
    assert warm(db, "wiki", "/Lisp", "/Lisp/", "//Lisp", "--pages", "2", loader=loader) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["wrote", "wrote"]  # it was "cached" twice in between
    assert lines[0].endswith(" /Lisp") and not lines[1].endswith(" /Lisp")


def test_a_file_that_is_not_a_page_cache_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database " * 100, encoding="utf-8")

    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        raise AssertionError("the model was loaded")

    assert main(["cache", "warm", "wiki", "--db", str(notes)], load_engine=loader) == 2
    assert "is not a page cache" in capsys.readouterr().err


def test_a_page_whose_prompt_fails_to_render_is_skipped_and_the_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sites = tmp_path / "sites"
    shutil.copytree(SITES_DIR / "wiki", sites / "wiki")
    article = sites / "wiki" / "prompts" / "article.j2"
    computed = "{% if params.title.endswith('_tree') %}{% include 'gone_' ~ params.title %}{% endif %}"
    article.write_text(computed + article.read_text(encoding="utf-8"), encoding="utf-8")
    db, loader = tmp_path / "genui.sqlite3", Loader()
    assert warm(db, "wiki", "--pages", "2", loader=loader, sites=sites) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"skipped  /Genpedia_tree: {article}: ")  # as a click would fail, and why
    assert "line 1: TemplateNotFound: 'gone_Genpedia_tree' is not a file in prompts/" in lines[1]
    assert lines[2].startswith("wrote") and lines[2].endswith("/Genpedia_map") and stored_urls(db) == 2


def test_warm_with_no_pages_to_write_loads_no_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        raise AssertionError("the model was loaded for no page")

    assert (
        main(
            ["cache", "warm", "wiki", "--pages", "0", "--db", str(tmp_path / "db"), "--sites-dir", str(SITES_DIR)],
            load_engine=refuse,
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[-1].startswith("wrote 0 pages")


def test_a_route_whose_own_prompt_is_too_long_is_skipped_and_the_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its EngineError ended the whole warm: the articles after it were never written (found by review)."""
    loader = Loader()

    def writer(prompt: str, seed: int) -> str:  # the front page links to a search first, then to articles
        return '<p><a href="/search?q=lisp">search</a></p>' + wiki_writer(prompt, seed)

    class Picky(FakeEngine):
        def fits(self, request: GenerationRequest) -> bool:  # the search route's own text is longer than it reads
            return "<page>search" not in request.prompt

    loader.engine = Picky(writer)
    db = tmp_path / "genui.sqlite3"
    assert warm(db, "wiki", "--pages", "3", loader=loader) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("skipped  /search?q=lisp: site wiki: the prompt and opening for /search") for line in lines
    ), lines
    assert sum(line.startswith("wrote  ") for line in lines) == 3 and stored_urls(db) == 3  # and the total's line
