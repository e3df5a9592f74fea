"""genui trajectories (lab.trajectories) and consistency training on them (genui adapt --trajectories)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_fixtures import build_tiny_adapter, build_tiny_llama_base

from engine import load_model
from engine.frames import CanvasFrame, GenerationRequest
from engine.generation import plan_batch, run_plan
from engine.streaming import Row
from lab import adapt, trajectories
from lab.adapt import layout_page, pages_loss
from lab.trajectories import Trajectories, record


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def tiny_adapter(tiny_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_adapter(tiny_base, tmp_path_factory.mktemp("adapter"), canvas=8)


def test_recording_changes_nothing_and_keeps_the_canvas_each_step_read(tiny_adapter: Path) -> None:
    loaded = load_model(tiny_adapter, device="cpu")
    # whole steps and steps over the changed positions alike; no adaptive stop, so every canvas takes max_steps
    defaults = dataclasses.replace(loaded.defaults, max_steps=4, refresh_every=2, min_distinct=0)
    loaded = dataclasses.replace(loaded, defaults=defaults)
    request = GenerationRequest(prompt="<title>Hash</title>", max_tokens=24, opening="<h1>Hash", seed=3)
    frames: list[object] = []
    plan = plan_batch(loaded, [request], [Row(emit=frames.append)])
    tokens = run_plan(loaded, plan)[0].tolist()

    [(text, response, states, owners, prompt)] = record(loaded, [request])
    eos = loaded.denoiser.eos_id
    tokens = [eos if t == loaded.denoiser.pad_id else t for t in tokens]
    ended = tokens.index(eos) + 1 if eos in tokens else len(tokens)
    assert response.tolist() == tokens[:ended]  # the same page as without the recorder
    assert prompt == loaded.denoiser.encode_prompt(request.prompt)
    assert text.startswith("<h1>Hash")
    steps = [frame.steps for frame in frames if isinstance(frame, CanvasFrame)]
    canvases = -(-len(response) // 8)
    assert sorted(set(owners.tolist())) == list(range(canvases))
    # one canvas a step, whole or partial (refresh_every); fresh noise each step, so no repeat was left out
    assert [int((owners == canvas).sum()) for canvas in range(canvases)] == steps[:canvases] == [4] * canvases
    assert states[0].tolist() == plan.pins.tokens[0, :8].tolist()  # the first step read the pinned opening and noise
    opening = loaded.tokenizer.encode("<h1>Hash", add_special_tokens=False)
    assert (states[owners == 0][:, : len(opening)] == np.array(opening)).all()  # pinned at every step


def _page(prompt: int, response: int, canvases_with_states: list[int], length: int = 8) -> dict[str, object]:
    states = [np.full(length, 100 + 10 * c + s) for c in canvases_with_states for s in range(3)]
    return {
        "prompt": np.arange(3, 3 + prompt),
        "response": np.arange(20, 20 + response),
        "states": np.array(states).reshape(-1, length),
        "state_canvas": np.array([c for c in canvases_with_states for _ in range(3)], dtype=np.int16),
        "site": "wiki",
        "path": f"/wiki/{prompt}-{response}",
    }


def test_a_file_keeps_its_pages_and_a_pick_draws_each_canvas_from_its_own_states(tmp_path: Path) -> None:
    built = Trajectories.build(8, [_page(5, 12, [1]), _page(3, 16, [0, 1])])
    built.save(tmp_path / "t.npz")
    loaded = Trajectories.load(tmp_path / "t.npz")
    assert len(loaded) == 2 and loaded.paths == ("/wiki/5-12", "/wiki/3-16") and loaded.canvas_length == 8
    assert loaded.response(1).tolist() == list(range(20, 36)) and loaded.prompt(0).tolist() == list(range(3, 8))
    generator = torch.Generator().manual_seed(0)
    picks = [loaded.pick(1, generator) for _ in range(30)]
    assert {int(p[0, 0]) for p in picks} == {100, 101, 102} and {int(p[1, 0]) for p in picks} == {110, 111, 112}
    first = loaded.pick(0, generator)  # canvas 0 was never stepped (an opening that fills it): its final tokens
    assert first[0].tolist() == list(range(20, 28)) and int(first[1, 0]) in (110, 111, 112)
    for page, again in zip(built.pages(), loaded.pages(), strict=True):
        assert all(np.array_equal(page[key], again[key]) for key in ("prompt", "response", "states", "state_canvas"))


def test_a_recorded_canvas_is_fed_as_the_engine_feeds_it_and_scored_against_the_page_it_became() -> None:
    prompt = np.arange(100, 105, dtype=np.uint16)
    response = np.arange(200, 210, dtype=np.uint16)  # two canvases of 8, the second padded with end-of-text
    states = np.arange(300, 316).reshape(2, 8)
    page = layout_page(prompt, response, 8, eos=1, vocab=400, t=1.0, generator=torch.Generator(), states=states)
    n = 5 + 16
    canvases = page.input_ids[0, n:].view(2, 8)
    assert canvases[0].tolist() == [104, *range(300, 307)]  # the token before the canvas, then the state shifted
    assert canvases[1].tolist() == [207, *range(308, 315)]
    assert page.canvas_targets.tolist() == [*range(200, 210), *[1] * 6]
    assert page.ar_scale == 0.0
    with pytest.raises(ValueError, match=r"states must be \(2, 8\)"):
        layout_page(prompt, response, 8, eos=1, vocab=400, t=1.0, generator=torch.Generator(), states=states[:1])


def test_a_page_the_denoiser_wrote_adds_no_next_token_loss(tiny_base: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    states = np.random.default_rng(0).integers(3, 40, (2, 8))
    page = layout_page(np.arange(3, 8, dtype=np.uint16), np.arange(9, 21, dtype=np.uint16), 8, 1, 40, 0.0,
                       torch.Generator(), states=states)  # fmt: skip
    total, ([canvas], [ar]) = pages_loss(model, [page], ar_weight=0.5)
    assert ar > 0 and total.item() == pytest.approx(16 * canvas, rel=1e-5)


def _trajectories(path: Path, pages: int) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(pages):
        response = rng.integers(3, 40, 1 + i % 15)
        k = -(-len(response) // 8)
        rows.append(
            {
                "prompt": rng.integers(3, 40, 4),
                "response": np.append(response, 1),
                "states": rng.integers(3, 40, (2 * k, 8)),
                "state_canvas": np.repeat(np.arange(k), 2).astype(np.int16),
                "site": "wiki",
                "path": f"/wiki/{i}",
            }
        )
    Trajectories.build(8, rows).save(path)
    return path


def test_a_run_trains_on_trajectories_reports_their_held_out_loss_and_resumes(tiny_base: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"site": "wiki", "path": f"/wiki/{n}", "prompt": n, "html": f"<p>{n}</p>", "holdout": i == 0})
            + "\n"
            for i, n in enumerate(("Hash", "Array", "List", "Tree"))
        )
    )
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base)]
    assert adapt.main([*common, "--pack", str(corpus)]) == 0
    paths = _trajectories(tmp_path / "t.npz", 4 * adapt.HELDOUT_TRAJECTORIES)
    settings = ["--canvas-length", "8", "--canvas-tokens", "32", "--frozen-layers", "0", "--rank", "4"]
    with pytest.raises(SystemExit, match="--trajectory-share needs --trajectories"):
        adapt.main([*common, *settings, "--trajectory-share", "0.5", "--max-steps", "1"])
    with pytest.raises(SystemExit, match="recorded with 8-token canvases, and this run trains 16"):
        adapt.main([*common, "--canvas-length", "16", "--trajectories", str(paths), "--max-steps", "1"])
    run = [*common, *settings, "--trajectories", str(paths), "--trajectory-share", "0.5", "--eval-every", "2"]
    assert adapt.main([*run, "--max-steps", "2"]) == 0
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log[0]["trajectory"] > 0 and log[-1]["trajectory"] != log[0]["trajectory"]  # it moved: trained on
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert state["path_cursor"] > 0 and state["config"]["trajectory_share"] == 0.5
    assert adapt.main([*common, "--trajectories", str(paths), "--max-steps", "3"]) == 0  # resumes at step 2
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["path_cursor"] >= state["path_cursor"]


def test_the_command_keeps_pages_with_their_skeleton_and_a_run_resumes(
    tiny_adapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lab.distill

    corpus = tmp_path / "corpus.jsonl"
    rows = [("wiki", "/wiki/Hash_table", False), ("wiki", "/wiki/Array", True), ("wiki", "/wiki/Linked_list", False)]
    corpus.write_text(
        "".join(json.dumps({"site": s, "path": p, "prompt": "p", "html": "x", "holdout": h}) + "\n" for s, p, h in rows)
    )
    # the tiny random model writes noise: the check passes the hash table's page only
    monkeypatch.setattr(lab.distill, "skeleton_ok", lambda site, path, html: path == "/wiki/Hash_table")
    out = tmp_path / "t.npz"
    common = ["--corpus", str(corpus), "--out", str(out), "--model", str(tiny_adapter), "--min-words", "0"]
    assert trajectories.main([*common, "--pages", "5", "--batch", "2"]) == 0
    kept = Trajectories.load(out)
    assert kept.paths == ("/wiki/Hash_table",) and len(kept.states) >= 1
    assert trajectories.main([*common, "--pages", "5"]) == 0  # resumes: only the page not kept is tried again
    assert Trajectories.load(out).paths == ("/wiki/Hash_table",)
