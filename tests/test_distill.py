"""genui distill (lab.distill): which pages the writer is asked for, what it keeps, and that a run resumes."""

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


def test_a_url_the_corpus_holds_several_pages_at_is_one_job(corpus: Path) -> None:
    from genui.resources import bundled

    with corpus.open("a") as handle:  # the forum's front page, twice: one prompt
        handle.write(json.dumps({"site": "forum", "path": "/", "holdout": False, "prompt": "p", "html": "x"}) + "\n")
        handle.write(json.dumps({"site": "forum", "path": "/", "holdout": False, "prompt": "p", "html": "y"}) + "\n")
    jobs = distill.plan_jobs(corpus, bundled("sites"), set(), pages=10, seed=0)
    assert sorted((job.site, job.path) for job in jobs) == [
        ("forum", "/"),
        ("forum", "/r/emacs"),
        ("wiki", "/wiki/Hash_table"),
        ("wiki", "/wiki/Linked_list"),
    ]


def test_only_pages_with_the_site_skeleton_are_kept_and_a_run_resumes(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = build_tiny_llama_base(tmp_path / "tiny")
    written: list[str] = []
    real = distill.write_pages

    def pages(model: torch.nn.Module, tokenizer, jobs: list[distill.Job], args) -> list[str]:  # type: ignore[no-untyped-def]
        # the tiny random base writes noise; the wiki article gets a real body in place of its output
        texts = real(model, tokenizer, jobs, args)
        written.extend(job.path for job in jobs)
        return [
            f"{job.opening}<p>A table of keys.</p><p>It hashes them.</p></article>"
            if job.path == "/wiki/Hash_table"
            else text
            for job, text in zip(jobs, texts, strict=True)
        ]

    monkeypatch.setattr(distill, "write_pages", pages)
    out = tmp_path / "distilled.jsonl"
    common = ["--corpus", str(corpus), "--out", str(out), "--base", str(base), "--max-new-tokens", "8"]
    assert distill.main([*common, "--pages", "2"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 2 and [row["path"] for row in rows] == ["/wiki/Hash_table"]
    assert rows[0]["source"] == "base" and not rows[0]["holdout"]
    assert skeleton_ok("wiki", "/wiki/Hash_table", rows[0]["html"])
    assert distill.main([*common, "--pages", "5", "--batch", "2"]) == 0  # resumes: the kept page is not asked again
    assert written.count("/wiki/Hash_table") == 1 and "/wiki/Array" not in written
    assert distill.main([*common, "--pages", "5", "--site", "wiki"]) == 0
    assert written[-1] == "/wiki/Linked_list"  # only the wiki's pages, and not the one already kept


def test_a_batch_cuts_each_page_at_its_own_budget_and_an_adapted_writer_marks_its_rows(
    corpus: Path, tmp_path: Path
) -> None:
    import argparse

    from engine.loading import load_model

    base = build_tiny_llama_base(tmp_path / "tiny")
    loaded = load_model(base, device="cpu")
    args = argparse.Namespace(max_new_tokens=64, temperature=1.0, top_k=0, repetition_penalty=1.0)
    opening = len(loaded.tokenizer.encode("<h1>A</h1>", add_special_tokens=False))
    short = distill.Job("wiki", "/wiki/A", "<title>A</title>", "<h1>A</h1>", budget=opening + 2)  # the opening counts
    long = distill.Job("wiki", "/wiki/B", "<title>B but a longer prompt</title>", "", budget=40)
    torch.manual_seed(0)
    texts = distill.write_pages(loaded.model, loaded.tokenizer, [short, long], args)
    assert texts[0].startswith("<h1>A</h1>")
    widest = max(len(loaded.tokenizer.decode([index])) for index in range(len(loaded.tokenizer)))
    assert len(texts[0].removeprefix("<h1>A</h1>")) <= 2 * widest  # two tokens at most
    assert len(texts[1]) > len(texts[0])  # the random tiny model seldom ends a page at once
    writer = argparse.Namespace(model=str(base), base=None)
    assert distill.load_writer(writer, torch.device("cpu"))[2] == "self"


def test_a_missing_corpus_names_the_command_that_builds_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert distill.main(["--corpus", str(tmp_path / "nope.jsonl")]) == 2
    assert "genui corpus" in capsys.readouterr().err


def test_letter_soup_is_not_dictionary_english() -> None:
    from lab.quality import load_dictionary

    words = load_dictionary()
    assert distill.dictionary_share("<p>A hash table maps keys to values.</p>", words) == 1.0
    assert distill.dictionary_share("<p>HJNWEKTINM bartlefrakova gnusteve jw</p>", words) < 0.5


def test_a_row_a_killed_run_left_half_written_is_dropped_by_the_resume_and_by_the_pack(tmp_path: Path) -> None:
    from lab.data import _rows
    from lab.distill import drop_unfinished_row

    out = tmp_path / "distilled.jsonl"
    whole = json.dumps({"site": "wiki", "path": "/wiki/A", "html": "<h1>A</h1>"}) + "\n"
    out.write_text(whole + '{"site": "wiki", "path": "/wiki/B", "ht')  # killed mid-row
    assert [row["path"] for row in _rows([out])] == ["/wiki/A"]  # packing reads what is whole
    drop_unfinished_row(out)
    assert out.read_text() == whole  # the resume appends after the last whole row
    out.write_text(whole.rstrip("\n"))  # a last row whole but for its line break is kept
    assert [row["path"] for row in _rows([out])] == ["/wiki/A"]
    out.write_text(whole + '{"broken": \n')
    with pytest.raises(json.JSONDecodeError):  # a broken row inside the file is an error, not skipped
        list(_rows([out]))


def test_a_pages_opening_counts_in_its_budget_as_a_served_page_counts_it(tmp_path: Path) -> None:
    import argparse

    from engine.loading import load_model

    loaded = load_model(build_tiny_llama_base(tmp_path / "tiny"), device="cpu")
    asked: list[int] = []

    class Writer:  # the model's generate(), writing the letter "a" as long as it is asked
        device = torch.device("cpu")

        def generate(self, input_ids: torch.Tensor, max_new_tokens: int, **kwargs: object) -> torch.Tensor:
            asked.append(max_new_tokens)
            letter = loaded.tokenizer.encode("a", add_special_tokens=False)[0]
            return torch.cat([input_ids, torch.full((input_ids.shape[0], max_new_tokens), letter)], dim=1)

    args = argparse.Namespace(max_new_tokens=64, temperature=1.0, top_k=0, repetition_penalty=1.0)
    opening = len(loaded.tokenizer.encode("<h1>A</h1>", add_special_tokens=False))
    job = distill.Job("wiki", "/wiki/A", "<title>A</title>", "<h1>A</h1>", budget=opening + 3)
    (text,) = distill.write_pages(Writer(), loaded.tokenizer, [job], args)  # type: ignore[arg-type]
    assert asked == [3] and text == "<h1>A</h1>aaa"  # the page is its budget long, opening included


def test_a_base_neither_here_nor_to_be_had_is_refused_at_once_by_name(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped --base went to from_pretrained as a hub id: offline, a traceback after 50 s of the hub's retries."""
    import engine.identity

    monkeypatch.setattr(engine.identity, "_unreachable", lambda endpoint: "no network here")
    monkeypatch.chdir(tmp_path)
    args = ["--corpus", str(corpus), "--out", str(tmp_path / "d.jsonl"), "--base", "bsaes/llama", "--pages", "1"]
    with pytest.raises(SystemExit, match="genui distill: base 'bsaes/llama': no folder 'bsaes/llama' here"):
        distill.main(args)
