from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from engine_fixtures import build_tiny_adapter, build_tiny_checkpoint, build_tiny_llama_base
from transformers import DiffusionGemmaForBlockDiffusion

from engine.config import TINY, make_config
from engine.loading import load_model
from lab import bench

COLUMNS = {
    "engine",
    "device",
    "model",
    "params",
    "tokens",
    "tokens_by_run",
    "seconds_by_run",
    "canvases",
    "steps",
    "steps_by_canvas",
    "stopped",
    "ttff_s",
    "p50_s",
    "p95_s",
    "tokens_per_s",
    "ms_step",
    "fixed_s",
}


@pytest.fixture
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_bench_prints_one_json_object_with_a_row_per_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_thread: None
) -> None:
    checkpoint = build_tiny_checkpoint(tmp_path / "tiny")
    argv = ["--json", "--model", str(checkpoint), "--runs", "1", "--steps", "2", "--device", "cpu", "--tokens", "40"]
    assert bench.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    engines = ["diffusion", "autoregressive", "diffusion, served", "diffusion, 3 variations"]
    assert [row["engine"] for row in report["rows"]] == engines
    for row in report["rows"]:
        assert set(row) == COLUMNS
        assert row["device"] == "cpu" and row["params"] > 0
        assert 0 < row["ttff_s"] <= row["p50_s"] <= row["p95_s"] and row["tokens_per_s"] > 0
    diffusion, autoregressive, served, variations = report["rows"]
    # The page as served: up to two canvases (40 tokens), ending with the canvas that holds the end of text; the
    # autoregressive row writes as many tokens as it, and the served row the same page again.
    (written,) = diffusion["tokens_by_run"]
    canvases = diffusion["canvases"]
    assert 0 < written <= 32 * canvases <= 64 and diffusion["tokens"] == written
    assert autoregressive["tokens_by_run"] == served["tokens_by_run"] == [written]
    assert diffusion["steps"] == 2 and diffusion["steps_by_canvas"] == served["steps_by_canvas"] == [2] * canvases
    full, rest = divmod(written, 32)
    assert autoregressive["steps_by_canvas"] == [32] * full + ([rest] if rest else [])  # a token a step
    ar_canvases = len(autoregressive["steps_by_canvas"])
    for row, gaps in zip(report["rows"][:3], (canvases, written - ar_canvases, canvases), strict=True):
        assert row["ms_step"] > 0 and row["fixed_s"] > 0  # each canvas's steps after its first
        # one run, so its p50 is that run: the first steps and the rest, then the steps after them, rounded
        assert row["fixed_s"] + gaps * row["ms_step"] / 1000 == pytest.approx(row["p50_s"], abs=0.005)
    assert report["rows"][0]["stopped"] == report["rows"][2]["stopped"] == 0.0  # fixed steps: no adaptive stop
    assert report["rows"][1]["stopped"] is None  # decoding token by token has none
    # Three pages of the prompt in one batch: every page's text counted, the run timed to the last page's end.
    (together,) = variations["tokens_by_run"]
    assert 0 < together <= 3 * 64
    assert variations["tokens_per_s"] == pytest.approx(together / variations["p50_s"], rel=0.01)
    assert variations["steps"] == 2 and set(variations["steps_by_canvas"]) == {2} and variations["stopped"] == 0.0
    assert variations["ms_step"] is None and variations["fixed_s"] is None  # steps a batch's pages share
    times = variations["p50_s"] / diffusion["p50_s"]
    assert f"3 variations in one batch take {times:.2f}x one page's time (p50)" in " ".join(report["notes"])
    assert any("need CUDA" in note for note in report["notes"])
    assert any("x the autoregressive speed" in note for note in report["notes"])
    paired = autoregressive["seconds_by_run"][0] / diffusion["seconds_by_run"][0]
    assert f"{paired:.2f}x the median of each seed's page" in " ".join(report["notes"])
    assert any(note.startswith("served through the engine, the same pages take") for note in report["notes"])
    at_par = 1 + (autoregressive["p50_s"] - diffusion["fixed_s"]) / (diffusion["ms_step"] / 1000) / canvases
    assert f"matches autoregressive decoding at {at_par:.1f} steps a canvas" in " ".join(report["notes"])
    assert any(note.endswith("weights in float32") for note in report["notes"])  # a DiffusionGemma on the CPU


def test_runs_whose_pages_end_in_different_canvases_are_summarised_canvas_by_canvas() -> None:
    def run(tokens: int, steps: list[int]) -> bench.Run:
        return bench.Run(0.1, 1.0, tokens, steps, steps, [True] * len(steps), 0.05, 0.2)

    pages = {0: run(100, [19, 18]), 1: run(40, [17]), 2: run(150, [20, 21, 4])}
    summary = bench.time_runs(3, lambda seed: pages.get(seed, run(1, [1])))
    assert summary["tokens_by_run"] == [100, 40, 150] and summary["tokens"] == 100 and summary["canvases"] == 2
    assert summary["steps_by_canvas"] == [19, 19.5, 4]  # over the runs that reached each canvas
    assert summary["steps"] == 18.5  # over every canvas: a one-canvas run's 17 weighs as one canvas, not one run
    slower = {**summary, "seconds_by_run": [2.0, 5.0, 3.0]}  # the same pages, decoded 2x, 5x and 3x as long
    assert bench.paired_speedup(summary, slower) == 3.0


def test_bench_prints_a_table_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str], one_thread: None) -> None:
    checkpoint = build_tiny_checkpoint(tmp_path / "tiny")
    argv = ["--model", str(checkpoint), "--runs", "1", "--steps", "1", "--device", "cpu", "--dtype", "bfloat16"]
    assert bench.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(bench.format_table([]).split())
    assert lines[1].startswith("diffusion ") and lines[2].startswith("autoregressive")
    assert lines[3].startswith("diffusion, served") and lines[4].startswith("diffusion, 3 variations")
    assert "note: torch threads: 1; weights in bfloat16" in lines


def test_bench_says_when_the_weights_are_laid_out_for_onednn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_thread: None
) -> None:
    adapter = build_tiny_adapter(build_tiny_llama_base(tmp_path), tmp_path / "adapter")
    argv = ["--model", str(adapter), "--runs", "1", "--steps", "1", "--device", "cpu", "--dtype", "bfloat16"]
    assert bench.main(argv) == 0
    assert (
        "note: torch threads: 1; weights in bfloat16, laid out once for oneDNN (engine.prepack); grouped-query "
        "attention reads its keys and values in place (engine.attention)"
    ) in capsys.readouterr().out.splitlines()


def test_bench_reports_a_missing_model_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--model", str(tmp_path / "missing"), "--device", "cpu"]) == 2
    assert "no model folder" in capsys.readouterr().err


def test_a_page_longer_than_the_model_holds_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_thread: None
) -> None:
    checkpoint = build_tiny_checkpoint(tmp_path / "tiny")
    argv = ["--model", str(checkpoint), "--runs", "1", "--steps", "1", "--device", "cpu", "--tokens", "100000"]
    assert bench.main(argv) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the tiny checkpoint's own progress bars
    assert err.startswith("genui bench: ") and "exceeds the model's 512 positions" in err


def test_the_reference_shape_is_diffusiongemma_26b_a4b() -> None:
    config = bench.reference_config()
    with torch.device("meta"):  # shapes only: no memory
        model = DiffusionGemmaForBlockDiffusion._from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    assert 25.0e9 < params < 25.5e9  # 26B-A4B: ~25.2B in all, with encoder and decoder sharing their weights
    active = config.text_config.top_k_experts / config.text_config.num_experts
    assert active == 8 / 128


def test_random_weights_are_materialised_tied_and_finite() -> None:
    model = bench.build_random(make_config(TINY), torch.device("cpu"), torch.float32)
    encoder = model.model.encoder.language_model.layers[0].self_attn.q_proj.weight
    decoder = model.model.decoder.layers[0].self_attn.q_proj.weight
    assert encoder.data_ptr() == decoder.data_ptr()  # allocated once
    assert all(torch.isfinite(tensor).all() for tensor in [*model.parameters(), *model.buffers()])


def test_random_weights_are_the_same_for_a_seed_and_leave_the_callers_random_state() -> None:
    state = torch.get_rng_state()
    one, again = (bench.build_random(make_config(TINY), torch.device("cpu"), torch.float32) for _ in range(2))
    other = bench.build_random(make_config(TINY), torch.device("cpu"), torch.float32, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(one.parameters(), again.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(one.buffers(), again.buffers(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(one.parameters(), other.parameters(), strict=True))


def test_every_layers_scale_is_one_as_its_module_makes_it() -> None:
    # transformers initialises only the decoder layers' layer_scalar: the encoder layers' kept the memory to_empty
    # found, and about one CI run in a dozen drew a non-finite scale that failed the reference rows' test.
    for _ in range(3):
        model = bench.build_random(make_config(TINY), torch.device("cpu"), torch.bfloat16)
        scales = {name: buffer for name, buffer in model.named_buffers() if name.endswith("layer_scalar")}
        assert any(".encoder." in name for name in scales) and any(".decoder." in name for name in scales)
        assert all(torch.equal(scale, torch.ones_like(scale)) for scale in scales.values())


def test_a_gpu_too_small_for_the_reference_rows_gets_a_note_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(*_: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 968.00 MiB")

    monkeypatch.setattr(bench, "build_random", out_of_memory)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)  # nothing to free on a machine without CUDA
    loaded = SimpleNamespace(device=torch.device("cuda"))
    rows, note = bench.reference_section(loaded, runs=3)  # type: ignore[arg-type]
    assert rows == [] and note.startswith("26B-A4B-shaped rows skipped: cuda ran out of memory")


def test_the_reference_rows_use_diffusiongemma_settings_not_the_default_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    # On a lent H200 the shipped model's refresh_every (a causal LM's partial recompute) reached the random
    # DiffusionGemma, whose denoiser cannot do it, and the crash lost the rows already measured.
    monkeypatch.setattr(bench, "reference_config", lambda: make_config(TINY))
    monkeypatch.setattr(bench, "REFERENCE_STEPS", (2,))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    loaded = load_model(build_tiny_checkpoint(tmp_path / "tiny"), device="cpu")
    loaded = dataclasses.replace(loaded, defaults=dataclasses.replace(loaded.defaults, refresh_every=4))
    rows, note = bench.reference_section(loaded, runs=1)
    assert [row["engine"] for row in rows] == ["diffusion", "autoregressive"], note
    assert rows[0]["steps"] == 2 and rows[0]["model"] == "random DiffusionGemma-26B-A4B shape"


def test_a_reference_row_that_fails_leaves_a_note_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")

    monkeypatch.setattr(bench, "reference_rows", broken)
    rows, note = bench.reference_section(SimpleNamespace(device=torch.device("cuda")), runs=3)  # type: ignore[arg-type]
    assert rows == []
    assert note == "26B-A4B-shaped rows failed: RuntimeError: CUDA error: an illegal memory access was encountered"


def test_break_even_counts_each_canvas_first_step_in_the_fixed_cost() -> None:
    # 4 canvases; 1 s for the prompt and the canvases' first steps; 100 ms for every step after; 10 s autoregressive
    diffusion, autoregressive = {"ms_step": 100.0, "fixed_s": 1.0}, {"p50_s": 10.0}
    note = bench.break_even(diffusion, autoregressive, canvases=4)
    # at par: 1 + (10 - 1) / 0.1 / 4 = 23.5; a third: 1 + (10 / 3 - 1) / 0.1 / 4 = 6.8
    assert note.endswith("matches autoregressive decoding at 23.5 steps a canvas and is 3x faster at 6.8")
    slow = bench.break_even({"ms_step": 100.0, "fixed_s": 4.0}, autoregressive, canvases=4)
    assert slow.endswith("3x is out of reach")  # the fixed cost alone is more than a third of 10 s
    assert "no break-even" in bench.break_even({"ms_step": 0.0, "fixed_s": 1.0}, autoregressive, canvases=4)


def test_steps_by_canvas_takes_each_canvas_s_median_over_the_runs() -> None:
    # A page that ends after two canvases on most runs: the canvases after its end settle fast, which the median over
    # all of a page's canvases hides and the per-canvas column shows.
    pages = {0: [17, 18, 3, 3], 1: [14, 16, 5, 3], 2: [18, 22, 19, 9], 3: [20, 13, 3, 3]}  # key 3: the warm-up's seed

    def once(seed: int) -> bench.Run:
        steps = pages[seed]
        return bench.Run(0.1, 1.0, 256, steps, steps, [True] * 4, 0.05, 0.2)

    row = bench.time_runs(3, once)
    assert row["steps_by_canvas"] == [17, 18, 5, 3]
    assert row["steps"] == 15  # over the timed runs' twelve canvases (the median of their medians was 10)
