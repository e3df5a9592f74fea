"""Lists written twice, once in the code and once in the docs or static/genui.js, checked against each other: a key,
a word or an option added to one and not the other drifts silently (a first-time contributor's review)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from genui import cli, sites
from genui.words import SCRIPT_WORDS, WORDS

ROOT = Path(__file__).resolve().parent.parent


def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line), to the next heading of any level."""
    return text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]


def table_keys(text: str) -> list[str]:
    """The keys a table's first column names, each in backquotes (`a`, `b` for two in one row)."""
    rows = re.findall(r"^\| ((?:`[^`]+`(?:, )?)+) \|", text, re.MULTILINE)
    return [key for row in rows for key in re.findall(r"`([^`]+)`", row)]


@pytest.mark.parametrize(
    ("heading", "keys"),
    [
        ("### Top-level keys", sites.TOP_KEYS),
        ("### `[[routes]]`", sites.ROUTE_KEYS),
        ("### `[model]`", sites.MODEL_KEYS),
        ("### `[[navigation]]`", sites.NAV_KEYS),
        ("### `[words]`", tuple(WORDS)),
    ],
)
def test_docs_sites_tables_name_every_key_a_site_toml_takes_and_no_other(heading: str, keys: tuple[str, ...]) -> None:
    assert sorted(table_keys(section(doc("sites.md"), heading))) == sorted(keys)


def test_genui_js_says_the_script_words_with_genuis_own_english_as_its_fallback() -> None:
    script = (ROOT / "static" / "genui.js").read_text(encoding="utf-8")
    said = dict(re.findall(r'say\(\s*"(\w+)",\s*(?:\{[^}]*\}|\w+),\s*("[^"]*"|\w+)\s*\)', script))
    constants = dict(re.findall(r'var (\w+) = ("[^"]*");', script))
    assert sorted(said) == sorted(set(re.findall(r'say\(\s*"(\w+)"', script)))  # each call read, its English too
    assert sorted(said) == sorted(SCRIPT_WORDS)  # a word genui.js says that a site's [words] could not say, or none
    assert {key: constants.get(value, value).strip('"') for key, value in said.items()} == {
        key: WORDS[key] for key in said
    }


@pytest.mark.parametrize("command", ["serve", "render", "new"])
def test_the_command_section_names_every_option_of_the_command(command: str) -> None:
    parser = cli._parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices
    said = section(doc("framework.md"), "## The command")
    options = {
        option
        for action in commands[command]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert sorted(option for option in options if option not in said) == []


@pytest.mark.parametrize(("folder", "name"), [("genui", "framework.md"), ("engine", "engine.md")])
def test_the_modules_table_names_every_module(folder: str, name: str) -> None:
    text = doc(name)
    files = sorted(path.name for path in (ROOT / folder).glob("*.py") if path.name != "__init__.py")
    assert [file for file in files if f"`{folder}/{file}`" not in text and f"`{file}`" not in text] == []
