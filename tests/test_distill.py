"""genui distill (lab.distill): which pages the base is asked to write, what it keeps, and that a run resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_llama_base

from lab import distill
from lab.quality import skeleton_ok

ROWS = [
    {"site": "wiki", "path": "/wiki/Hash_table", "holdout": False},
    {"site": "wiki", "path": "/wiki/Array", "holdout": True},
    {"site": "wiki", "path": "/wiki/Linked_list", "holdout": False},
    {"site": "forum", "path": "/r/emacs", "holdout": False},
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({**row, "prompt": "p", "html": "<p>x</p>"}) + "\n" for row in ROWS))
    return path


def test_jobs_are_training_pages_with_the_prompt_and_opening_the_site_sends(corpus: Path) -> None:
    from genui.resources import bundled

    jobs = distill.plan_jobs(corpus, bundled("sites"), {("wiki", "/wiki/Linked_list")}, pages=10, seed=0)
    assert sorted((job.site, job.path) for job in jobs) == [("forum", "/r/emacs"), ("wiki", "/wiki/Hash_table")]
    article = next(job for job in jobs if job.path == "/wiki/Hash_table")
    assert "<title>Hash table</title>" in article.prompt and "<h1>Hash table</h1>" in article.opening
    assert article.budget == 384  # sites/wiki/site.toml


def test_only_pages_with_the_site_skeleton_are_kept_and_a_run_resumes(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = build_tiny_llama_base(tmp_path / "tiny")
    written: list[str] = []
    real = distill.write_page

    def page(model: torch.nn.Module, tokenizer, job: distill.Job, args) -> str:  # type: ignore[no-untyped-def]
        # the tiny random base writes noise; half of the pages get a real wiki body after its real output
        text = real(model, tokenizer, job, args)
        if job.path == "/wiki/Hash_table":
            text = f"{job.opening}<p>A table of keys.</p><p>It hashes them.</p></article>"
        written.append(job.path)
        return text

    monkeypatch.setattr(distill, "write_page", page)
    out = tmp_path / "distilled.jsonl"
    common = ["--corpus", str(corpus), "--out", str(out), "--base", str(base), "--max-new-tokens", "8"]
    assert distill.main([*common, "--pages", "2"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 2 and [row["path"] for row in rows] == ["/wiki/Hash_table"]
    assert rows[0]["source"] == "base" and not rows[0]["holdout"]
    assert skeleton_ok("wiki", "/wiki/Hash_table", rows[0]["html"])
    assert distill.main([*common, "--pages", "5"]) == 0  # resumes: the kept page is not asked for again
    assert written.count("/wiki/Hash_table") == 1 and "/wiki/Array" not in written


def test_a_missing_corpus_names_the_command_that_builds_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert distill.main(["--corpus", str(tmp_path / "nope.jsonl")]) == 2
    assert "genui corpus" in capsys.readouterr().err


def test_letter_soup_is_not_dictionary_english() -> None:
    from lab.quality import load_dictionary

    words = load_dictionary()
    assert distill.dictionary_share("<p>A hash table maps keys to values.</p>", words) == 1.0
    assert distill.dictionary_share("<p>HJNWEKTINM bartlefrakova gnusteve jw</p>", words) < 0.5
