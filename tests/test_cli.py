from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fakes import EXAMPLES, SITES_DIR, FakeEngine

from engine.frames import EngineError
from genui.app import ROBOTS
from genui.arguments import sites_in
from genui.cli import main
from genui.sites import SiteConfigError, load_site
from genui.store import Store


def fake_loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
    return FakeEngine()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([], ["serve", "render", "new", "sites", "cache", "posts", "bench", "corpus", "train", "quality"]),
        (
            ["serve"],
            ["--site", "--sites-dir", "--host", "--port", "--model", "--device", "--int8", "--db"]
            + ["--read-ahead", "--runs-per-client", "FORWARDED_ALLOW_IPS", "--reload"],
        ),
        (["render"], ["SITE", "PATH", "--seed", "--json", "--model", "--device", "--int8"]),
        (["new"], ["NAME", "--description", "--dir"]),
        (["sites"], ["--sites-dir"]),
        (["posts"], ["show", "delete", "--db"]),
        (["posts", "show"], ["--db", "--site", "--thread", "--limit", "--json"]),
        (["posts", "delete"], ["ID", "--db"]),
        (["cache"], ["show", "prune", "forget", "warm", "export", "--db", "--site", "--sites-dir", "--model"]),
        (["cache", "show"], ["--db", "--site", "--model", "--json"]),
        (["cache", "prune"], ["--db", "--other-models", "--dry-run", "--vacuum"]),
        (["cache", "forget"], ["SITE", "PATH", "--db"]),
        (["cache", "warm"], ["SITE", "PATH", "--pages", "--db", "--model", "--device", "--int8"]),
    ],
)
def test_help_describes_every_option(capsys: pytest.CaptureFixture[str], argv: list[str], words: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and all(word in out for word in words)


def test_sites_lists_each_site_and_its_routes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in EXAMPLES:  # the examples alone: a site of a user's own in sites/ is theirs to get right
        shutil.copytree(SITES_DIR / name, tmp_path / name)
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "wiki  Genpedia" in out and " /{title} " in out and "/search?q" in out and "readers may post" in out
    assert "model: up to 512 tokens (the rest from" in out
    assert "follows links (url)" in out  # the desktop's browser
    assert main(["sites", "--sites-dir", str(tmp_path), "--site", "wikki"]) == 2
    said = one_line_error(capsys)
    assert "no site named 'wikki' under" in said and "(have: forum, os, wiki)" in said


def test_sites_lines_up_its_columns_however_long_a_pattern_and_shows_aliases_edits_and_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A text adventure's routes: a pattern longer than the 28 characters the column once had made its row stick out.
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki")
    toml = tmp_path / "wiki" / "site.toml"
    text = toml.read_text(encoding="utf-8").replace('pattern = "/search"', 'pattern = "/a/rather/long/route/to/search"')
    text = text.replace('query = ["q"]', 'query = ["q"]\nedits = false')
    toml.write_text(text.replace('stylesheet = "wiki.css"', 'stylesheet = "wiki.css"\ncarry = ["q"]'), "utf-8")
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  /")]
    assert [row.split()[0] for row in rows] == ["/", "/a/rather/long/route/to/search?q", "/{title}"]
    assert len({row.index(".j2") - len(row.split()[1]) for row in rows}) == 1  # the templates start in one column
    assert len({row.index("context:") for row in rows}) == 1
    assert rows[1].endswith("no edits") and rows[2].endswith("aliases: /wiki/{title}")
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    assert "  carries: q (query keys its pages' links carry on)" in capsys.readouterr().out


def test_sites_notes_a_route_whose_second_query_key_took_its_bar_form_away(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`query = ["q", "page"]` loaded, and the search box was gone with no word (a hackathon team's review)."""
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki")
    toml = tmp_path / "wiki" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('query = ["q"]', 'query = ["q", "page"]', 1), "utf-8")
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note: no form in the site bar (it asks one query key, and this route has 2)" in out
    toml.write_text(
        toml.read_text(encoding="utf-8").replace('query = ["q", "page"]', 'query = ["q", "page"]\nbar = false'), "utf-8"
    )
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    assert "no form in the site bar" not in capsys.readouterr().out  # said so: nothing to note


def test_sites_notes_an_opening_writing_what_the_sanitiser_drops_and_a_list_that_shows_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shop's "Add to basket" form in an opening loaded, and showed a dead button on every page; a navigation list
    of a route that stores no page loaded, and showed nothing (a hackathon team's review)."""
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki")
    opening = tmp_path / "wiki" / "prompts" / "article_opening.j2"
    opening.write_text(
        opening.read_text(encoding="utf-8") + '<form method="post"><INPUT name="n"><button>Add</button></form>\n',
        encoding="utf-8",
    )
    toml = tmp_path / "wiki" / "site.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace('cache = "forever"', 'cache = "none"', 3), encoding="utf-8")  # the articles too
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note: its opening writes <form>, <input>, which the sanitiser leaves out of every page" in out
    assert 'note: navigation[0] lists the pages of /{title}, which are never stored (cache = "none")' in out
    assert out.count("note: its opening") == 1  # the button stays (a button that does nothing, as the model's do)


def test_sites_shows_a_sites_own_sampler_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "garden", "--dir", str(tmp_path)]) == 0
    toml = tmp_path / "garden" / "site.toml"
    toml.write_text(toml.read_text().replace("# t_max", "t_max").replace("# t_min", "t_min"), encoding="utf-8")
    capsys.readouterr()
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    expected = "model: up to 512 tokens, temperature 0.5 -> 0.2 (the rest from"
    assert expected in capsys.readouterr().out


def test_new_writes_a_site_that_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "garden", "--description", "Plants and how to keep them.", "--dir", str(tmp_path)]) == 0
    assert load_site(tmp_path / "garden").brief == "Plants and how to keep them."
    out = capsys.readouterr().out
    assert "genui serve --site garden" in out
    assert "any other running genui serve serves the sites it started with, so restart it" in out
    assert "its pages are about computing whatever the brief says" in out  # what the default model can write


def test_new_says_what_it_wrote_and_commands_that_paste(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "my sites"
    assert main(["new", "plain", "--dir", str(folder)]) == 0
    source = folder / "plain"
    (source / "plain.css").unlink()
    toml = source / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('stylesheet = "plain.css"\n', ""), encoding="utf-8")
    capsys.readouterr()
    assert main(["new", "copy", "--from", str(source), "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"created {folder / 'copy'}: site.toml, prompts/ (3 routes)\n") and "None" not in out
    assert f"--sites-dir '{folder}'" in out


def test_render_json_has_html_canvases_and_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "wiki", "/wiki/Hash_table", "--json", "--seed", "3"], load_engine=fake_loader) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"html", "canvases", "seconds"}
    assert "<h1>Hash table</h1>" in result["html"] and "seed 3" in result["html"]
    assert 'hx-get="/Hash_table_tree"' in result["html"]  # the model's /wiki/... link, as the wiki alone serves it
    assert result["canvases"] and all(set(c) == {"steps", "tokens", "seconds"} for c in result["canvases"])


def test_render_prompt_prints_what_the_model_would_read_and_loads_no_model(capsys: pytest.CaptureFixture[str]) -> None:
    """A site developer could not see the prompt their templates made without the model (a hackathon team's game:
    a trailing `{% include %}` left three blank lines)."""

    def no_model(*_: object) -> FakeEngine:
        raise AssertionError("render --prompt loaded a model")

    assert main(["render", "wiki", "/wiki/Hash_table", "--prompt"], load_engine=no_model) == 0
    out = capsys.readouterr().out
    assert "<title>Hash table</title>" in out and "--- the opening: the page starts with it, word for word ---" in out
    assert out.rstrip().endswith("<h1>Hash table</h1>")
    assert main(["render", "os", "/settings/display", "--prompt", "--json"], load_engine=no_model) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "<panel>display</panel>" in shown["prompt"] and shown["opening"].startswith('<div class="window">')
    assert isinstance(shown["gaps"], list)


def test_render_of_a_page_too_long_for_the_model_says_what_to_shorten_in_the_site(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed the engine's traceback and "ask for fewer canvases", which no render option does (a review of
    other checkpoints: a DiffusionGemma of 512 positions)."""
    engine = FakeEngine(max_prompt_chars=10)
    assert main(["render", "wiki", "/Hash_table"], load_engine=lambda *args: engine) == 2
    err = one_line_error(capsys)
    assert "the prompt and opening of wiki /Hash_table (fake-model): they are longer than the model can read" in err
    assert "lower model.tokens (site.toml)" in err and engine.calls == []


def test_render_of_a_page_whose_opening_fills_it_says_to_raise_its_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "wiki", "/Lisp"], load_engine=lambda *args: FakeEngine(max_opening_chars=5)) == 2
    err = one_line_error(capsys)
    assert "the opening leaves the model no room in the page's 384 tokens; raise model.tokens" in err, err


def test_render_of_a_page_longer_than_the_model_reads_says_to_lower_its_tokens_opening_or_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With an opening, it was told to raise them (a review of this session's change)."""
    engine = FakeEngine(max_opening_chars=5, max_tokens=100)  # the wiki's 384 tokens are more than it reads
    assert main(["render", "wiki", "/Lisp"], load_engine=lambda *args: engine) == 2
    err = one_line_error(capsys)
    assert "or lower model.tokens (site.toml)" not in err and "raise model.tokens" not in err, err
    # the page alone is too long: the model's context is short, and no template edit makes it fit (a review of
    # developers' own checkpoints: a model of 128 positions was told to shorten the site's brief)
    assert "the page's 384 tokens, written in whole canvases, are more than the model (fake-model) can read" in err
    assert "with no prompt at all; lower model.tokens (site.toml)" in err
    assert "or run a model that reads more" in err


def test_render_prints_the_sanitised_html(capsys: pytest.CaptureFixture[str]) -> None:
    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        return FakeEngine(lambda prompt, seed: '<h1 onclick="x()">Hi</h1><script>alert(1)</script>')

    assert main(["render", str(SITES_DIR / "wiki"), "/"], load_engine=loader) == 0
    assert capsys.readouterr().out.strip() == "<h1>Hi</h1>"


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "wiki", "/search?query=lisp"],
        ["cache", "forget", "wiki", "/search?query=lisp"],
        ["cache", "warm", "wiki", "/search?query=lisp"],
    ],
)
def test_a_page_named_with_a_query_key_its_route_does_not_take_is_refused_before_a_model_loads(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`/search?query=lisp` on a route with query = ["q"] was the search for "": written by a model loaded for it, or
    forgotten in its place (found by a new developer)."""
    loaded: list[str] = []

    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        loaded.append("loaded")
        return FakeEngine()

    Store(tmp_path / "db.sqlite3").close()
    db = ["--db", str(tmp_path / "db.sqlite3")] if argv[0] == "cache" else []
    assert main([*argv, "--sites-dir", str(SITES_DIR), *db], load_engine=loader) == 2
    err = capsys.readouterr().err
    assert "'/search?query=lisp' sets 'query', which its route '/search' does not take (its query keys: 'q')" in err
    assert loaded == []


def test_int8_reaches_the_model_loader(capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[bool] = []

    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        asked.append(int8)
        return FakeEngine()

    assert main(["render", "wiki", "/"], load_engine=loader) == 0
    assert main(["render", "wiki", "/", "--int8"], load_engine=loader) == 0
    assert asked == [False, True]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_a_path_no_route_matches_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "wiki", "/no/such/page"], load_engine=fake_loader) == 2
    assert "no route of site 'wiki' matches '/no/such/page'" in one_line_error(capsys)


def test_a_bad_site_config_is_a_one_line_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad").mkdir()
    toml = 'name = "bad"\nbrief = "A site."\n[[routes]]\npattern = "/"\ntemplate = "home.j2"\n'
    (tmp_path / "bad" / "site.toml").write_text(toml, encoding="utf-8")
    (tmp_path / "bad" / "prompts").mkdir()
    (tmp_path / "bad" / "prompts" / "home.j2").write_text("The home page of {{ site.brief }}", encoding="utf-8")
    argv = ["serve", "--sites-dir", str(tmp_path), "--port", "0", "--db", ":memory:"]
    assert main(argv, load_engine=lambda *args: pytest.fail("no engine for sites that do not load")) == 2
    err = one_line_error(capsys)
    assert str(tmp_path / "bad" / "site.toml") in err and "key 'title'" in err and "Fix:" in err
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 2  # genui sites says it of each site, on its own line
    said = [line for line in capsys.readouterr().out.splitlines() if "does not load" in line]
    assert len(said) == 1 and str(tmp_path / "bad" / "site.toml") in said[0] and "key 'title'" in said[0]


def test_every_problem_of_every_site_is_said_in_one_run_a_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hackathon team fixed a site one error a run: every part of a config that can be checked on its own is, in
    every site, and each problem is a line that names its file, key and fix."""
    for name in ("one", "two"):
        shutil.copytree(SITES_DIR / "wiki", tmp_path / name)
        toml = tmp_path / name / "site.toml"
        text = toml.read_text(encoding="utf-8").replace('name = "wiki"', f'name = "{name}"', 1)
        toml.write_text(text, encoding="utf-8")
    one = tmp_path / "one" / "site.toml"
    text = one.read_text(encoding="utf-8").replace("title =", "titel =", 1).replace("\n", '\nlang = "english"\n', 1)
    one.write_text(text + '\n[[navigation]]\nheading = "More"\non = ["/nowhere/{x}"]\n', encoding="utf-8")
    (tmp_path / "two" / "prompts" / "search.j2").write_text("{{ params.nothing.deeper }}", encoding="utf-8")
    argv = ["serve", "--sites-dir", str(tmp_path), "--port", "0", "--db", ":memory:"]
    assert main(argv, load_engine=lambda *args: pytest.fail("no engine for sites that do not load")) == 2
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("genui serve: ") and "Fix:" in line for line in lines), lines
    keys = {(Path(line.split(": ")[1]).parent.name, line.split("key '")[1].split("'")[0]) for line in lines}
    assert {("one", "titel"), ("one", "lang"), ("one", "navigation[3].on")} <= keys, lines
    assert any("two" in line and "search.j2" in line for line in lines), lines  # the other site's template too
    assert not any("key 'title'" in line for line in lines), lines  # the slip is said once, not again as missing
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 2
    said = [line for line in capsys.readouterr().out.splitlines() if "does not load" in line]
    assert len(said) == len(lines) and all(line.startswith("  does not load: ") for line in said), said


def test_render_of_a_bar_route_with_nothing_asked_is_refused_as_a_server_writes_no_page_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = FakeEngine()
    assert main(["render", "wiki", "/search?q=%20"], load_engine=lambda *args: engine) == 2
    assert "asks for nothing" in one_line_error(capsys) and engine.calls == []


def test_a_model_that_will_not_load_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    def loader(model: str | None, device: str | None, int8: bool) -> FakeEngine:
        raise EngineError(f"cannot read a model config from {model}: no such folder")

    assert main(["render", "wiki", "/", "--model", "/no/such/model"], load_engine=loader) == 2
    assert "/no/such/model" in one_line_error(capsys)


def test_an_unknown_site_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--site", "nope"], load_engine=fake_loader) == 2
    assert "no site named 'nope'" in one_line_error(capsys)


def apps_made(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """The options genui serve gives create_app, one dict a call, with no app made and no server started."""
    import uvicorn

    import genui.cli

    made: list[dict[str, object]] = []

    def create_app(*args: object, **options: object) -> object:
        made.append(options)
        return object()

    async def serve(self: uvicorn.Server) -> None:
        pass

    monkeypatch.setattr(genui.cli, "create_app", create_app)
    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    return made


def test_serve_reads_ahead_as_many_links_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    made = apps_made(monkeypatch)
    wiki = ["serve", "--site", "wiki", "--port", "0"]
    assert main(wiki, load_engine=fake_loader) == 0
    assert main([*wiki, "--read-ahead", "0"], load_engine=fake_loader) == 0
    assert [options["read_ahead"] for options in made] == [3, 0]
    assert main([*wiki, "--reload"], load_engine=fake_loader) == 0
    assert [options["reload"] for options in made] == [False, False, True]
    assert main([*wiki, "--runs-per-client", "0"], load_engine=fake_loader) == 0
    assert [options["runs_per_client"] for options in made] == [3, 3, 3, 0]


def test_serve_with_reload_starts_though_a_site_beside_the_others_does_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It exited with the broken site's error, --reload or not (a hackathon team's review); without --reload it
    still does: a server for visitors starts with every site or none."""
    for name in ("garden", "club"):
        assert main(["new", name, "--dir", str(tmp_path)]) == 0
    toml = tmp_path / "club" / "site.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("title =", "titel =", 1), encoding="utf-8")
    capsys.readouterr()
    made = apps_made(monkeypatch)
    argv = ["serve", "--sites-dir", str(tmp_path), "--port", "0", "--db", ":memory:"]
    assert main([*argv, "--reload"], load_engine=fake_loader) == 0
    err = capsys.readouterr().err
    assert "note: not served until it loads" in err and "key 'titel'" in err and "club" in err
    assert made[0]["mounted"] is True and made[0]["sites_dir"] == tmp_path
    assert main(argv, load_engine=fake_loader) == 2 and "key 'titel'" in one_line_error(capsys)  # its slip alone
    assert len(made) == 1


def test_serve_serves_the_robots_txt_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = apps_made(monkeypatch)
    wiki = ["serve", "--site", "wiki", "--port", "0"]
    policy = tmp_path / "robots.txt"
    policy.write_text("User-agent: *\nDisallow: /_genui/\n", encoding="utf-8")
    assert main([*wiki, "--robots", str(policy)], load_engine=fake_loader) == 0
    assert main(wiki, load_engine=fake_loader) == 0
    assert [options["robots"] for options in made] == ["User-agent: *\nDisallow: /_genui/\n", ROBOTS]
    policy.write_bytes(b"User-agent: \xff\n")
    with pytest.raises(SystemExit):
        main([*wiki, "--robots", str(policy)], load_engine=fake_loader)
    assert f"argument --robots: {policy} is not UTF-8 text" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*wiki, "--robots", str(tmp_path / "none.txt")], load_engine=fake_loader)
    assert "none.txt: No such file or directory" in capsys.readouterr().err
    assert len(made) == 2


def test_a_port_in_use_is_a_one_line_error_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    """uvicorn said `[Errno 98] ... address already in use` after the model had begun to load, and exited 3."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        loader = lambda *args: pytest.fail("no model loads for a server that cannot listen")  # noqa: E731
        assert main(["serve", "--site", "wiki", "--port", taken, "--db", ":memory:"], load_engine=loader) == 2
    err = one_line_error(capsys)
    assert f"127.0.0.1:{taken} is in use" in err and "--port N" in err
    assert main(["serve", "--host", "no-such-host.invalid", "--port", "0"], load_engine=loader) == 2
    assert "--host no-such-host.invalid: no address of this machine" in one_line_error(capsys)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--port", "70000"], load_engine=loader)
    assert exited.value.code == 2 and "expected a port from 0 to 65535, got '70000'" in capsys.readouterr().err


def test_an_option_is_never_taken_from_its_first_letters(capsys: pytest.CaptureFixture[str]) -> None:
    """`genui sites --site wiki` was read as `--sites-dir wiki`: "no sites under wiki" (it has a --site now)."""
    with pytest.raises(SystemExit) as exited:
        main(["sites", "--sit", "wiki"])
    assert exited.value.code == 2 and "unrecognized arguments: --sit wiki" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cache", "show", "--sites-d", "x"])
    assert "--sites-d" in capsys.readouterr().err


def test_an_option_after_an_action_that_does_not_take_it_names_the_action_that_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`genui posts delete 3 --text x` gave the top-level usage; before the action, it said which takes it."""
    db = str(tmp_path / "pages.db")
    assert main(["posts", "delete", "3", "--db", db, "--text", "ada"]) == 2
    assert "--text is not an option of posts delete (only of show)" in one_line_error(capsys)
    assert main(["posts", "--text", "ada", "delete", "3", "--db", db]) == 2
    assert "--text is not an option of posts delete (only of show)" in one_line_error(capsys)
    # between the action and its ids, its value was read as an id: "expected a whole number, got 'ada'"
    assert main(["posts", "delete", "--text", "ada", "3", "--db", db]) == 2
    assert "--text is not an option of posts delete (only of show)" in one_line_error(capsys)
    assert main(["cache", "forget", "--json", "/wiki/Lisp", "--db", db]) == 2
    assert "--json is not an option of cache forget (only of pages, show)" in one_line_error(capsys)
    assert not Path(db).exists()


@pytest.mark.parametrize("count", ["-1", "two", "1.5", "9" * 30])
def test_a_read_ahead_that_is_not_a_count_is_a_usage_error(capsys: pytest.CaptureFixture[str], count: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--read-ahead", count], load_engine=fake_loader)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--read-ahead" in err
    assert f"expected 0 or a positive whole number up to 9223372036854775807, got {count!r}" in err


def test_bench_hands_every_argument_to_the_engine_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    bench = types.ModuleType("lab.bench")
    bench.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lab.bench", bench)
    assert main(["bench", "--help", "--canvases", "2"]) == 0
    assert seen == [["--help", "--canvases", "2"]]


def test_a_path_the_file_system_refuses_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    assert main(["new", "club", "--dir", str(afile / "sites")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("genui new: ") and "Not a directory" in err and "Traceback" not in err
    assert f"cannot write the site at {afile / 'sites'}" in err


@pytest.mark.parametrize(("name", "tried"), [("My Recipes!", "; try my-recipes"), ("Café", "; try cafe"), ("42", " (")])
def test_a_name_that_is_no_site_name_is_said_so_with_one_that_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, tried: str
) -> None:
    """It named `sites/My Recipes!/site.toml`, a file that is nowhere, and no name to use instead."""
    assert main(["new", name, "--dir", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert f"{name!r} is not a site name" in err and f"- or _{tried}" in err and "site.toml:" not in err
    assert list(tmp_path.iterdir()) == []


def test_new_takes_a_sites_file_for_its_folder_and_refuses_an_empty_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "club", "--description", " ", "--dir", str(tmp_path)]) == 2
    assert "--description is empty" in one_line_error(capsys)  # it was the default brief, said nowhere
    assert main(["new", "club", "--dir", str(tmp_path)]) == 0
    assert main(["new", "copy", "--from", str(tmp_path / "club" / "site.toml"), "--dir", str(tmp_path)]) == 0
    assert load_site(tmp_path / "copy").brief == load_site(tmp_path / "club").brief
    assert main(["new", "other", "--from", str(tmp_path / "nowhere"), "--dir", str(tmp_path)]) == 2
    assert f"by its path ({tmp_path / 'nowhere'})" in one_line_error(capsys)  # an absolute path, with no ./


@pytest.mark.parametrize(
    "argv",
    [
        ["cache", "forget", "wiki", "/Caf\udce9", "--sites-dir", str(SITES_DIR)],  # a Latin-1 terminal's "Café"
        ["posts", "--thread", "/\udcff"],
        ["posts", "--thread", "/r/lisp/\udcff"],
    ],
)
def test_an_argument_that_is_not_utf8_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db = tmp_path / "genui.sqlite3"
    store = Store(db)
    store.add_post("forum", "/r/lisp/Macros", "ada", "hi")
    store.close()
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err and err.count("\n") == 1
    assert Store(db).recent_posts()[0].post.text == "hi"


def test_sites_says_which_site_does_not_load_and_serving_another_leaves_it_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A half-written new site beside the others: `genui sites` says it does not load (its templates are tried as
    genui serve tries them), and naming another site serves that one, with a note."""
    for name in ("garden", "club"):
        assert main(["new", name, "--dir", str(tmp_path)]) == 0
    article = tmp_path / "club" / "prompts" / "article.j2"
    article.write_text(article.read_text(encoding="utf-8") + "{{ params.nosuch }}\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "club  " in out and "does not load:" in out and "article.j2" in out and "garden  " in out
    (tmp_path / "club" / "site.toml").write_text("title = \n", encoding="utf-8")  # not even TOML now
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 2  # each site on its own: garden is listed all the same
    out = capsys.readouterr().out
    assert f"club  ({tmp_path / 'club'})\n  does not load: " in out and "site.toml" in out and "garden  " in out
    assert main(["sites", "--sites-dir", str(tmp_path), "--site", "garden"]) == 0  # one site checked, on its own
    out, err = capsys.readouterr()
    assert "garden  " in out and "club" not in out and "left out, not asked for and not loading" in err
    assert main(["sites", "--sites-dir", str(tmp_path), "--site", "club"]) == 2  # it may be the broken one: said
    assert "does not load: " in capsys.readouterr().out
    assert main(["sites", "--sites-dir", str(tmp_path), "--site", "gardn"]) == 2  # a slip is said as one (a review)
    out, err = capsys.readouterr()
    assert "no site named 'gardn'" in err and "(have: garden)" in err and "left out, not asked for" in err
    assert [site.name for site in sites_in(tmp_path, ["garden"])] == ["garden"]
    assert "left out, not asked for and not loading" in capsys.readouterr().err
    with pytest.raises(SiteConfigError):
        sites_in(tmp_path, ["club"])  # the one asked for may be the one that does not load: its error
    with pytest.raises(SiteConfigError):
        sites_in(tmp_path, None)


def test_a_site_genui_new_wrote_here_but_not_in_the_sites_folder_named_is_pointed_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`genui new club` run in a project writes ./sites/club; commands read the installed sites folder by default."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "club"]) == 0
    capsys.readouterr()
    assert main(["serve", "--site", "club"], load_engine=fake_loader) == 2
    assert "no site named 'club'" in (said := one_line_error(capsys)) and "add --sites-dir sites" in said


@pytest.mark.parametrize("argv", [["sites"], ["cache", "warm", "wiki"], ["serve"]])
def test_a_sites_folder_that_is_a_site_itself_is_said_to_be_so(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    wiki = SITES_DIR / "wiki"
    assert main([*argv, "--sites-dir", str(wiki)]) == 2
    said = capsys.readouterr().err
    assert f"{wiki} is a site's folder, not a folder of sites" in said and f"--sites-dir {SITES_DIR.resolve()}" in said


def test_output_read_by_a_reader_gone_away_ends_quietly_as_a_shells_writer() -> None:
    """`genui sites | head`: it ended "genui sites: [Errno 32] Broken pipe" with a usage error's status."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "genui"), "sites", "--sites-dir", str(SITES_DIR)],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, b"")


def test_output_in_an_encoding_without_a_sites_letters_escapes_them_and_does_what_it_was_asked(tmp_path: Path) -> None:
    """On Windows' cp1252 (or a file redirected there) a Japanese site's title ended `genui sites` as "an argument is
    not UTF-8 text", and `genui cache forget` so, after it had forgotten the page (a review of sites in other
    languages)."""
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "sites" / "hyakka")
    toml = tmp_path / "sites" / "hyakka" / "site.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(re.sub(r'^title = ".*"$', 'title = "百科事典"', text, count=1, flags=re.M), encoding="utf-8")
    genui = str(Path(sys.executable).parent / "genui")
    cp1252 = {**os.environ, "PYTHONIOENCODING": "cp1252"}
    done = subprocess.run(
        [genui, "sites", "--sites-dir", str(tmp_path / "sites")], capture_output=True, env=cp1252, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert b"\\u767e\\u79d1\\u4e8b\\u5178" in done.stdout and b"not UTF-8" not in done.stderr


def test_genui_sites_notes_what_a_routes_templates_read_that_its_context_leaves_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`context = ["parent"]` replaces the default ["brief"]: site.brief rendered as "" with no word (a new developer
    took it to add to the default). A note, not an error: a template shared by routes may guard on what one lacks."""
    shutil.copytree(SITES_DIR / "wiki", tmp_path / "wiki")
    toml = tmp_path / "wiki" / "site.toml"
    text = toml.read_text(encoding="utf-8")
    assert 'context = ["brief", "parent"]' in text
    toml.write_text(text.replace('context = ["brief", "parent"]', 'context = ["parent"]', 1), encoding="utf-8")
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note: its templates read site.brief, which its context leaves out" in out
    assert out.count("note:") == 1  # the examples' other routes read what their contexts give


def test_genui_sites_notes_a_route_readers_post_on_whose_templates_never_read_the_posts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`posts = true` on the scaffold's article route, whose template reads no `posts`: readers' posts were kept and
    shown, and the model's replies never saw them, with no word why (a hackathon team's review)."""
    shutil.copytree(SITES_DIR / "forum", tmp_path / "forum")
    thread = tmp_path / "forum" / "prompts" / "thread.j2"
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    assert "never read posts" not in capsys.readouterr().out  # the forum's thread.j2 reads them
    read = re.sub(r"\{%-? *for [^%]*\bposts\b.*?endfor *-?%\}", "", thread.read_text(encoding="utf-8"), flags=re.S)
    thread.write_text(read, encoding="utf-8")
    assert "posts" not in read
    assert main(["sites", "--sites-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note: readers may post here (posts = true), but its templates never read posts" in out
    assert "read them in thread.j2" in out and out.count("never read posts") == 1


def test_serve_refuses_headers_past_its_limit_and_logs_genuis_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's default (httptools) answered a request with a 100 MB header, and held the memory of ten unfinished
    ones (an operator's review); genui's own errors went to Python's last-resort handler, with no level or time."""
    import uvicorn
    from chromium import served

    import genui.cli

    made: list[uvicorn.Config] = []

    async def serve(self: uvicorn.Server) -> None:
        made.append(self.config)

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    db = ":memory:"
    assert main(["serve", "--site", "wiki", "--port", "0", "--db", db], load_engine=fake_loader) == 0
    (config,) = made
    assert config.access_log  # each request's line, unless --no-access-log
    assert main(["serve", "--site", "wiki", "--port", "0", "--db", db, "--no-access-log"], load_engine=fake_loader) == 0
    assert not made[-1].access_log
    monkeypatch.undo()
    loggers = config.log_config["loggers"]  # type: ignore[index]
    assert loggers["genui"]["level"] == "WARNING" and loggers["genui"]["handlers"] == ["default"]
    assert all("%(asctime)s" in formatter["fmt"] for formatter in config.log_config["formatters"].values())  # type: ignore[index]
    with served(config.app, config=config) as url:  # type: ignore[arg-type]
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(b"GET /wiki/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (genui.cli.HEADERS_LIMIT + 1))
            answer = client.recv(1024)
        assert answer.startswith(b"HTTP/1.1 4")  # refused before the header ends, not read on and on
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(b"GET /_genui/health HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"a" * 8192 + b"\r\n\r\n")
            assert client.recv(1024).startswith(b"HTTP/1.1 ")  # a header of a proxy's size is read


def _served_config(monkeypatch: pytest.MonkeyPatch, argv: list[str], loader: Any = None) -> Any:
    """The uvicorn configuration genui serve makes for ``argv`` (its app included), without serving it."""
    import uvicorn

    made: list[uvicorn.Config] = []

    async def serve(self: uvicorn.Server) -> None:
        made.append(self.config)

    with monkeypatch.context() as patched:
        patched.setattr(uvicorn.Server, "serve", serve)
        assert main(argv, load_engine=loader or fake_loader) == 0
    (config,) = made
    return config


def _websocket(host: str, port: str, url: str, page: str) -> socket.socket:
    """A connection whose WebSocket handshake for ``page``'s stream was accepted."""
    import base64

    client = socket.create_connection((host, int(port)), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    client.sendall(
        f"GET /_genui/ws?site=wiki&url={page} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: {url}\r\n\r\n".encode()
    )
    assert client.recv(4096).startswith(b"HTTP/1.1 101")
    return client


def _text_frame(payload: bytes) -> bytes:
    """A client's WebSocket text frame (masked, as a client's must be), of under 126 bytes."""
    mask = os.urandom(4)
    return bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_websocket_messages_that_are_no_utf8_are_logged_once_a_while_without_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each such message logged uvicorn's traceback, and genui's own for the frame it then could not send: fifteen
    lines a message, which any client could send as fast as it liked (a security review)."""
    import time

    from chromium import served

    slow = lambda model, device, int8: FakeEngine(delay=0.05, steps=40)  # noqa: E731 - frames while it is sent
    config = _served_config(monkeypatch, ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:"], slow)
    capfd.readouterr()
    with served(config.app, config=config) as url:
        host, port = url.removeprefix("http://").split(":")
        for _ in range(3):
            with _websocket(host, port, url, "/Hash_table") as client:
                client.sendall(_text_frame(b"\xff\xfe no text"))
                answer = b""
                while b"\x88\x02\x03\xef" not in answer:  # uvicorn closes with 1007, after the frames sent so far
                    answer += client.recv(65536) or pytest.fail(f"no close frame: {answer[-80:]!r}")
                time.sleep(0.3)  # answering no close: the stream's next frames go to a socket closed on its side
    logged = capfd.readouterr().err
    assert logged.count("Invalid UTF-8 sequence received from client.") == 1, logged
    assert "Traceback" not in logged and "failed" not in logged, logged


@pytest.mark.parametrize("access_log", [True, False])
def test_no_access_log_logs_no_line_for_a_websocket_either(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], access_log: bool
) -> None:
    """uvicorn logs a WebSocket's opening as a server message, with the client's address and the page's URL: with
    --no-access-log every page a browser with scripts opened was still logged (a data-protection review)."""

    from chromium import served

    argv = ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:", *([] if access_log else ["--no-access-log"])]
    config = _served_config(monkeypatch, argv)
    capfd.readouterr()
    with served(config.app, config=config) as url:
        host, port = url.removeprefix("http://").split(":")
        _websocket(host, port, url, "/Private_matter").close()
        urllib.request.urlopen(url + "/_genui/live", timeout=10).read()
    logged = capfd.readouterr()
    said = logged.out + logged.err
    assert ("Private_matter" in said) == access_log and ("/_genui/live" in said) == access_log, said
    assert "Application startup complete" in said  # the server's own messages stay


@pytest.mark.parametrize("terminal", [True, False])
def test_a_servers_log_that_is_no_terminal_has_no_progress_bars(
    terminal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Served from systemd (its log a file or journald), the model's load wrote transformers' "Loading weights" bars
    into the log, each redrawn with carriage returns (an operator's read of the log); a terminal still shows them."""
    from transformers.utils import logging as transformers_logging

    monkeypatch.setattr(transformers_logging, "_tqdm_active", True)  # (enable_progress_bar warns where the env is set)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal, raising=False)
    _served_config(monkeypatch, ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:"])
    assert transformers_logging.is_progress_bar_enabled() == terminal


def test_a_json_log_has_one_object_a_line_with_an_access_lines_parts_as_fields(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A log store (Loki, Elasticsearch) parsed genui's text lines with a pattern of its own: --log-format json writes
    each as a JSON object, a request's client, method, path and status among its fields."""
    from chromium import served
    from transformers.utils import logging as transformers_logging

    argv = ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:", "--log-format", "json"]
    config = _served_config(monkeypatch, argv)
    assert not transformers_logging.is_progress_bar_enabled()  # a bar's redrawn line is no JSON
    capfd.readouterr()
    import logging
    import warnings

    try:
        with served(config.app, config=config) as url:
            urllib.request.urlopen(url + "/_genui/live?who=me", timeout=10).read()
            host, port = url.removeprefix("http://").split(":")
            _websocket(host, port, url, "/Streamed").close()
            logging.getLogger("engine.scheduler").warning("a batch failed")  # the engine's, and others', alike
            logging.getLogger("transformers.modeling_utils").warning("a weight was not used")
            with warnings.catch_warnings():
                warnings.simplefilter("always")  # shown, as outside the tests, not raised
                warnings.warn("a deprecation", UserWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
    logged = capfd.readouterr()
    lines = [line for line in (logged.out + logged.err).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line an object: none half text
    said = {record["message"].split(":")[-1].strip(): record["logger"] for record in records}
    assert said["a batch failed"] == "engine.scheduler" and said["a weight was not used"].startswith("transformers")
    assert any("a deprecation" in record["message"] for record in records)
    assert not any("color_message" in record for record in records)  # uvicorn's message again, in terminal escapes
    (access,) = [record for record in records if record["logger"] == "uvicorn.access"]
    assert access["method"] == "GET" and access["path"] == "/_genui/live?who=me" and access["status"] == 200
    assert access["client"].startswith("127.0.0.1:") and access["level"] == "INFO"
    assert access["time"].startswith(str(datetime.date.today().year)) and "T" in access["time"]
    # a page's stream, which uvicorn logs as a server message: its client and path were in the text alone
    (stream,) = [record for record in records if record["message"].endswith("[accepted]")]
    assert stream["method"] == "WebSocket" and stream["path"] == "/_genui/ws?site=wiki&url=/Streamed"
    assert stream["status"] == 101 and stream["client"].startswith("127.0.0.1:") and stream["logger"] == "uvicorn.error"
    assert any(record["message"] == "Application startup complete." for record in records)


def test_genui_sites_points_at_the_sites_genui_new_made_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run where `genui new` wrote a site, `genui sites` listed the examples only, and said nothing of it (serve,
    render and cache say "./sites/NAME is one: add --sites-dir sites")."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "club"]) == 0
    capsys.readouterr()
    assert main(["sites"]) == 0
    said = capsys.readouterr()
    assert "club" not in said.out and "note: ./sites holds sites too (club): genui sites --sites-dir sites" in said.err
    assert main(["sites", "--sites-dir", "sites"]) == 0
    assert "note:" not in capsys.readouterr().err
    # asked for by name, it says what to add, as serve and render do (it said only "no site named 'club'")
    assert main(["sites", "--site", "club"]) == 2
    assert (
        "no site named 'club'" in (said := one_line_error(capsys))
        and "; ./sites/club is one: add --sites-dir sites" in said
    )


def test_genui_serve_says_so_where_genui_new_made_a_site_it_does_not_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run where `genui new` wrote a site, `genui serve` served the examples and said nothing of it, where sites,
    render and cache point at ./sites (a hackathon team's review)."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "club"]) == 0
    capsys.readouterr()
    _served_config(monkeypatch, ["serve", "--port", "0", "--db", str(tmp_path / "db.sqlite3")])
    assert (
        f"note: ./sites holds sites too (club): genui serve --sites-dir sites serves them (this serves {SITES_DIR})"
        in capsys.readouterr().err
    )
    for served_there in (["--sites-dir", "sites"], ["--site", "wiki"]):  # ./sites served, or a site named: no note
        _served_config(monkeypatch, ["serve", "--port", "0", "--db", str(tmp_path / "db.sqlite3"), *served_there])
        assert "./sites holds" not in capsys.readouterr().err


def test_the_servers_stop_tells_the_app_before_it_waits_for_requests_under_way(tmp_path: Path) -> None:
    import asyncio

    import uvicorn

    from genui.app import create_app
    from genui.cli import GRACE_S, _stopping_server

    app = create_app([load_site(SITES_DIR / "wiki")], FakeEngine(), db_path=tmp_path / "db.sqlite3")

    async def stop() -> tuple[bool, bool]:
        server = _stopping_server(uvicorn.Config(app, timeout_graceful_shutdown=GRACE_S), app)
        server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
        await asyncio.sleep(0)
        return server.should_exit, app.state.pages.stopping.is_set()

    assert asyncio.run(stop()) == (True, True)


LOADING_FOR_EVER = """
import sys, time
import genui.cli as cli

def loading(model, device, int8):  # torch at work in the loading thread when the server is stopped
    import torch
    weights = torch.randn(256, 256)
    while True:
        weights = torch.tanh(weights @ weights)

cli._default_loader = loading
sys.exit(cli.main(["serve", "--port", "0", "--db", sys.argv[1]]))
"""


def test_genui_serve_stopped_while_its_model_loads_exits_cleanly(tmp_path: Path) -> None:
    """Ctrl+C while the model loaded aborted the process (status 134, "terminate called without an active
    exception": the interpreter's exit tore torch down under the loading thread; a workshop host's review)."""
    script = tmp_path / "serve.py"
    script.write_text(LOADING_FOR_EVER, encoding="utf-8")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, str(script), str(tmp_path / "db.sqlite3")], stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 60
            while b"loading the model" not in log.read_bytes():
                assert time.monotonic() < deadline and server.poll() is None, log.read_text()
                time.sleep(0.1)
            time.sleep(1.0)  # well into the load
            server.send_signal(signal.SIGINT)
            code = server.wait(timeout=30)
        finally:
            server.kill()
    said = log.read_text()
    assert code == 130 and "terminate called" not in said, said  # as a shell tells Ctrl+C
    assert "genui serve: stopped while the model was loading" in said


def test_genui_serve_queue_sets_how_many_pages_wait_for_the_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workshop's twenty clicks at once met a queue of 8: the rest got busy pages that retried by themselves, each
    retry with no place in line (a workshop host's review)."""
    made: dict[str, object] = {}

    class Stop(Exception):
        pass

    def create_app(*args: object, **kwargs: object) -> None:
        made.update(kwargs)
        raise Stop

    monkeypatch.setattr("genui.cli.create_app", create_app)
    engine = types.SimpleNamespace(max_queue=8)
    argv = ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:", "--queue", "20"]
    with pytest.raises(Stop):
        main(argv, load_engine=lambda *args: engine)  # type: ignore[arg-type,return-value]
    assert made["load_engine"]() is engine and engine.max_queue == 20  # type: ignore[operator]
    engine.max_queue = 2  # a loader's own queue (bench/load.py's) stays as it is without --queue
    with pytest.raises(Stop):
        main(argv[:-2], load_engine=lambda *args: engine)  # type: ignore[arg-type,return-value]
    assert made["load_engine"]() is engine and engine.max_queue == 2  # type: ignore[operator]
    for wrong in ("0", "1001", "x"):
        with pytest.raises(SystemExit):
            main([*argv[:-1], wrong])
        assert "expected a whole number from 1 to 1000" in capsys.readouterr().err


def test_genui_serve_off_loopback_says_the_address_to_open_and_that_every_name_is_answered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvicorn said "running on http://0.0.0.0:8000", which no browser opens, and nothing said that every host name
    was answered (a workshop host's review)."""
    import uvicorn

    async def serve(self: uvicorn.Server) -> None:
        pass

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    monkeypatch.setattr("genui.cli.network_address", lambda ipv6=False: "192.168.1.23")
    with socket.socket() as free:  # a port no server holds, for the address said
        free.bind(("0.0.0.0", 0))
        port = free.getsockname()[1]
    argv = ["serve", "--site", "wiki", "--port", str(port), "--db", ":memory:", "--host", "0.0.0.0"]
    assert main(argv, load_engine=lambda *args: FakeEngine()) == 0
    said = capsys.readouterr().err
    assert f"note: other machines on this network open http://192.168.1.23:{port}/" in said
    assert "every host name is answered" in said and "--allowed-host NAME" in said
    assert main([*argv, "--allowed-host", "mylaptop.local"], load_engine=lambda *args: FakeEngine()) == 0
    said = capsys.readouterr().err
    assert f"http://192.168.1.23:{port}/" in said and "every host name" not in said
    assert main([*argv[:-2]], load_engine=lambda *args: FakeEngine()) == 0  # on loopback: nothing to say
    assert "note:" not in capsys.readouterr().err


SERVE_FAKE = """
import sys
import websockets.http11  # imported before genui serve starts: its limits are raised all the same
sys.path.insert(0, sys.argv[3])
import genui.cli as cli
from fakes import FakeEngine

cli._default_loader = lambda model, device, int8: FakeEngine()
sys.exit(cli.main(["serve", "--site", "wiki", "--port", sys.argv[2], "--db", sys.argv[1]]))
"""


def _handshake(port: int, path: str, headers: str = "") -> bytes:
    """A WebSocket handshake for ``path`` on genui serve at ``port``: the first bytes of its answer (b"" for none in
    10 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n"
        )
        client.sendall(request.encode())
        try:
            return client.recv(64)
        except TimeoutError:
            return b""


def test_genui_serve_answers_a_long_stream_handshake_and_refuses_an_overlong_one_at_once(tmp_path: Path) -> None:
    """A stream whose address passed 8 KB (a wiki title of 500 CJK characters, linked from a page like it), or a
    browser's 8 KB of cookies, was never answered: websockets' 414 or 431 was queued and not sent, and the socket
    stayed open, neither opened nor closed (an adversarial client's review)."""
    script = tmp_path / "serve.py"
    script.write_text(SERVE_FAKE, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "serve.log"
    tests = str(Path(__file__).resolve().parent)
    with log.open("wb") as out:
        env = {key: value for key, value in os.environ.items() if not key.startswith("WEBSOCKETS_")}
        server = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "db"), str(port), tests], stdout=out, stderr=out, env=env
        )
        try:
            deadline = time.monotonic() + 60
            while b"Uvicorn running" not in log.read_bytes():
                assert time.monotonic() < deadline and server.poll() is None, log.read_text()
                time.sleep(0.1)
            title = quote("漢" * 500)
            long = f"/_genui/ws?site=wiki&url=/{title}&v=1&from=/{title}"
            assert len(long) > 9000 and _handshake(port, long).startswith(b"HTTP/1.1 101 ")
            assert _handshake(port, "/_genui/ws", f"Cookie: {'a' * 9000}\r\n").startswith(b"HTTP/1.1 101 ")
            many = "".join(f"X-{n}: y\r\n" for n in range(5000))  # 40 KB: under h11's limit, over websockets' count
            assert _handshake(port, "/_genui/ws", many).startswith(b"HTTP/1.1 431 ")
        finally:
            server.kill()
            server.wait()


def test_serve_says_which_page_cache_it_serves_and_whether_it_is_new(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A --db with a typo in a service's unit served a new, empty cache, and nothing said so: the forum's posts
    seemed gone, kept in the other file (an operator's review)."""
    from chromium import served

    db = tmp_path / "typo" / "genui.sqlite3"
    for held in ("new: nothing stored in it yet", "readers' posts and pages kept in it"):
        config = _served_config(monkeypatch, ["serve", "--site", "wiki", "--port", "0", "--db", str(db)])
        with served(config.app, config=config):
            pass
        assert f"INFO:     page cache {db} ({held})" in capfd.readouterr().err
    # and what it does to the cache by itself, such as threads carried to a new config, which the docs said the log
    # says: it was INFO under genui's WARNING, and never shown (the same review)
    assert config.log_config["loggers"]["genui.cache"]["level"] == "INFO"
