"""Adaptation training (lab.adapt) on a tiny random Llama: the page layout, a run that resumes, and its export."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_fixtures import build_tiny_llama_base
from safetensors.torch import load_file, save_file
from torch import serialization

from engine import load_model
from engine.denoise import DenoiseSettings, denoise
from engine.generation import left_pad
from engine.identity import DEFAULT_MODEL
from lab import adapt
from lab.adapt import (
    CERTAINTY_TEMPERATURE,
    certain_entropy,
    heldout_rows,
    layout_page,
    main,
    page_loss,
    pages_loss,
)
from lab.data import Packed


def test_a_canvas_sees_the_clean_prefix_before_it_and_all_of_itself() -> None:
    prompt = np.arange(100, 105, dtype=np.uint16)  # P = 5
    response = np.arange(200, 210, dtype=np.uint16)  # R = 10: two canvases of 8, the second padded
    page = layout_page(prompt, response, canvas=8, eos=1, vocab=300, t=0.0, generator=torch.Generator())
    n = 5 + 16
    assert page.input_ids.shape == (1, n + 16)
    mask = page.mask[0, 0]
    second = slice(n + 8, n + 16)  # canvas 1 covers positions 13..20; its inputs are positions 12..19
    assert mask[second, :12].all() and not mask[second, 12:n].any()  # the prefix up to, not including, x[12]
    assert mask[second, second].all() and not mask[second, n : n + 8].any()  # itself, both ways; not canvas 0
    assert page.position_ids[0, n + 8 :].tolist() == list(range(12, 20))
    assert page.input_ids[0, n + 8 :].tolist() == [int(page.input_ids[0, 12]), *range(208, 210), *[1] * 5]
    assert page.canvas_targets.tolist() == [*range(200, 210), *[1] * 6]  # the response, then end-of-text
    assert page.ar_targets.tolist() == list(range(200, 210))


def test_noise_replaces_canvas_tokens_but_never_the_token_before_the_canvas() -> None:
    prompt = np.arange(100, 105, dtype=np.uint16)
    response = np.arange(200, 216, dtype=np.uint16)
    page = layout_page(prompt, response, canvas=8, eos=1, vocab=50, t=1.0, generator=torch.Generator().manual_seed(0))
    canvases = page.input_ids[0, -16:].view(2, 8)
    clean = page.input_ids[0, :21]
    assert canvases[0, 0] == clean[4] and canvases[1, 0] == clean[12]
    assert (canvases[:, 1:] < 50).all()  # every other input is noise at t = 1 (noise ids are below vocab=50)


def test_plausible_noise_is_doubled_tokens_and_tokens_from_the_page() -> None:
    prompt = np.arange(100, 105, dtype=np.uint16)
    response = np.arange(200, 264, dtype=np.uint16)
    generator = torch.Generator().manual_seed(0)
    page = layout_page(prompt, response, canvas=8, eos=1, vocab=50, t=1.0, generator=generator, plausible=1.0)
    n = 5 + 64
    clean = page.input_ids[0, :n]
    canvases = page.input_ids[0, n:].view(8, 8)
    noised = canvases[:, 1:]
    assert not (noised < 50).any()  # no uniform noise: every noised input is a token of the page
    assert torch.isin(noised, clean).all()
    source = page.position_ids[0, n:].view(8, 8)[:, 1:]
    doubled = noised == clean[source - 1]  # repeats the clean token before it
    assert 0.3 < doubled.float().mean() < 0.7  # half of them, give or take the 56 draws
    half = layout_page(prompt, response, canvas=8, eos=1, vocab=50, t=1.0, generator=generator, plausible=0.5)
    assert 0.3 < (half.input_ids[0, n:].view(8, 8)[:, 1:] < 50).float().mean() < 0.7  # the rest stays uniform


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("base"))


def test_pages_in_one_forward_score_and_train_as_they_do_one_at_a_time(tiny_base: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    pages = [  # different lengths, so two of them are padded
        layout_page(
            np.arange(3, 3 + p, dtype=np.uint16), np.arange(9, 9 + r, dtype=np.uint16), 8, 1, 40, 0.6, generator
        )
        for p, r in ((5, 10), (12, 3), (2, 20))
    ]
    alone = [page_loss(model, page, 0.5) for page in pages]
    for page, (_, canvas_ce, _) in zip(pages, alone, strict=True):  # padding changes nothing a page reads
        logits = model(input_ids=page.input_ids, attention_mask=page.mask, position_ids=page.position_ids).logits[0]
        reference = torch.nn.functional.cross_entropy(logits[-len(page.canvas_targets) :].detach(), page.canvas_targets)
        assert canvas_ce == pytest.approx(reference.item(), abs=1e-5)
    weighted = sum(len(page.canvas_targets) * loss for page, (loss, _, _) in zip(pages, alone, strict=True))
    weighted.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    together, (canvas_ces, ar_ces) = pages_loss(model, pages, 0.5)
    together.backward()
    assert torch.allclose(together, weighted.detach(), atol=1e-4)
    assert canvas_ces == pytest.approx([c for _, c, _ in alone], abs=1e-5)
    assert ar_ces == pytest.approx([a for _, _, a in alone], abs=1e-5)
    assert all(torch.allclose(p.grad, g, atol=1e-5) for p, g in zip(model.parameters(), expected, strict=True))


def test_certain_entropy_is_the_tempered_entropy_where_the_argmax_is_right_and_zero_elsewhere() -> None:
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 3
    targets = logits.argmax(dim=-1)
    targets[::2] = (targets[::2] + 1) % 50  # slots 0, 2, 4 predict the wrong token
    reference = torch.distributions.Categorical(logits=logits / CERTAINTY_TEMPERATURE).entropy()
    got = certain_entropy(logits, targets)
    assert torch.allclose(got[1::2], reference[1::2], atol=1e-5) and (reference[1::2] > 0).all()
    assert (got[::2] == 0).all()


def test_the_certainty_term_adds_its_weight_times_the_certain_entropy_of_the_canvas_slots(tiny_base: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    page = layout_page(np.arange(3, 8, dtype=np.uint16), np.arange(9, 29, dtype=np.uint16), 8, 1, 40, 0.6, generator)
    logits = model(input_ids=page.input_ids, attention_mask=page.mask, position_ids=page.position_ids).logits[0]
    slots = logits[-len(page.canvas_targets) :].detach()
    page.canvas_targets[::2] = slots[::2].argmax(dim=-1)  # half the slots right, so the term has something to weigh
    entropy = certain_entropy(slots, page.canvas_targets)
    assert (entropy[::2] > 0).all()
    plain, (canvas_ce, _) = pages_loss(model, [page], 0.5)
    weighted, (same_ce, _) = pages_loss(model, [page], 0.5, certainty=2.0)
    assert weighted.item() == pytest.approx(plain.item() + 2.0 * entropy.sum().item(), rel=1e-5)
    assert same_ce == canvas_ce  # the reported cross-entropy stays the cross-entropy
    weighted.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_a_run_trains_resumes_and_exports_an_adapter_the_engine_loads(
    tiny_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"site": "wiki", "path": f"/wiki/{n}", "prompt": f"<title>{n}</title>", "html": f"<h1>{n}</h1><p>x</p>"}
        for n in ("Hash", "Array", "List", "Tree", "Heap", "Queue")
    ]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base)]
    assert main([*common, "--pack", str(corpus)]) == 0
    settings = ["--canvas-length", "8", "--canvas-tokens", "16", "--frozen-layers", "0", "--rank", "4"]
    assert (
        main([*common, *settings, "--max-steps", "2", "--eval-every", "2", "--save-every", "1", "--batch-pages", "2"])
        == 0
    )
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert [entry["step"] for entry in log] == [0, 1, 2] and "heldout" in log[-1]
    export = tmp_path / "export"
    capsys.readouterr()
    assert main([*common, "--max-steps", "3", "--export", str(export)]) == 0  # resumes at step 2
    assert "note:" not in capsys.readouterr().err  # nothing given that the run has otherwise
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert [entry["step"] for entry in log] == [0, 1, 2, 3]
    # A lent GPU's call ends at a fixed time: past it, a resumed run takes no step. A setting given anew is said to
    # be ignored, not silently dropped.
    elsewhere = str(tmp_path / "another_base")
    resumed = ["--max-steps", "5", "--stop-at", str(time.time() - 1), "--lr", "9e-4", "--init", str(export)]
    assert main([*common, *resumed, "--base", elsewhere]) == 0
    assert [entry["step"] for entry in json.loads((tmp_path / "run" / "log.json").read_text())] == [0, 1, 2, 3]
    err = capsys.readouterr().err
    assert "note: --lr 0.0009 is not this run's" in err
    assert f"note: --base {elsewhere} is not this run's: it resumes on its own base, {tiny_base}" in err
    assert f"note: --init {export} starts new runs only" in err
    spec = json.loads((export / "genui.json").read_text())
    assert spec["canvas_length"] == 8 and spec["base"] == str(tiny_base)  # the base it was trained on
    # A new adapter is measured with the sampler settings the shipped one runs with, so the two compare.
    shipped = json.loads((DEFAULT_MODEL / "generation_config.json").read_text())
    assert json.loads((export / "generation_config.json").read_text()) == shipped

    loaded = load_model(export, device="cpu")
    assert loaded.family == "adapted-causal-lm" and loaded.canvas_length == 8
    input_ids, mask = left_pad([loaded.denoiser.encode_prompt("<title>Hash</title>")], 0, loaded.device)
    tokens = denoise(
        loaded.denoiser,
        input_ids,
        mask,
        DenoiseSettings(max_canvases=2, max_steps=3, entropy_bound=2.0),
        torch.Generator().manual_seed(0),
    )
    assert tokens.shape[1] in (8, 16)

    # A soup of two exports is their mean, matrix by matrix, and loads as the export does.
    other = tmp_path / "other"
    shutil.copytree(export, other)
    weights = load_file(export / "adapter_model.safetensors")
    shifted = {name: tensor + 0.25 for name, tensor in weights.items()}
    save_file(shifted, other / "adapter_model.safetensors")
    souped = tmp_path / "soup"
    assert main(["--soup", str(export), str(other), "--export", str(souped)]) == 0
    mean = load_file(souped / "adapter_model.safetensors")
    assert mean.keys() == weights.keys()
    for name, tensor in weights.items():
        assert torch.allclose(mean[name].float(), (tensor.float() + shifted[name].float()) / 2, atol=1e-2)
        assert not torch.equal(mean[name], tensor)
    assert load_model(souped, device="cpu").canvas_length == 8
    # Adapters that differ in more than their weights are refused, by name.
    spec["canvas_length"] = 16
    (other / "genui.json").write_text(json.dumps(spec))
    with pytest.raises(SystemExit):
        main(["--soup", str(export), str(other), "--export", str(tmp_path / "soup2")])
    assert f"{other}: its adapter_config.json or genui.json differs" in capsys.readouterr().err
    assert not (tmp_path / "soup2").exists()

    # A run past its schedule is refused: transformers' cosine would climb again after --steps.
    with pytest.raises(SystemExit, match="past the run's schedule of 3000 steps"):
        main([*common, "--max-steps", "3001"])
    # An --init adapter of another rank is refused, not loaded in part.
    with pytest.raises(SystemExit, match="was trained with r = 4, this run has 8"):
        other_rank = ["--canvas-length", "8", "--frozen-layers", "0", "--rank", "8", "--max-steps", "1"]
        new_run = ["--out", str(tmp_path / "run2"), "--packed", str(packed), "--base", str(tiny_base)]
        main([*new_run, "--init", str(export), *other_rank])
    # A checkpoint a lent GPU wrote (its tensors tagged cuda:0) exports on this CPU-only machine.
    gpu_run = tmp_path / "gpu_run"
    shutil.copytree(tmp_path / "run", gpu_run)
    payload = torch.load(gpu_run / "checkpoint.pt", weights_only=False)
    generator = payload["generator"].untyped_storage().data_ptr()  # a CUDA run's noise generator is a CPU one
    tag = serialization.location_tag
    serialization.location_tag = lambda storage: "cpu" if storage.data_ptr() == generator else "cuda:0"
    try:
        torch.save(payload, gpu_run / "checkpoint.pt")
    finally:
        serialization.location_tag = tag
    assert main(["--out", str(gpu_run), "--export-only", "--export", str(tmp_path / "from_gpu")]) == 0
    assert load_model(tmp_path / "from_gpu", device="cpu").canvas_length == 8


def test_a_relative_base_travels_with_a_run_and_its_adapter_loads_from_anywhere_on_its_machine(
    tiny_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`genui adapt --base llama` wrote "base": "llama" into genui.json: the adapter loaded only where ./llama was,
    elsewhere after a minute of the hub's retries (a review of other checkpoints). Recording the folder's absolute path
    instead broke a run copied to another machine, a lent GPU's (a review of the fix): the base is kept as given,
    with the folder it was found at beside it."""
    from engine.loading import ModelLoadError

    machine = tmp_path / "gpu"
    shutil.copytree(tiny_base, machine / "llama")
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"site": "wiki", "path": f"/wiki/{n}", "prompt": n, "html": f"<h1>{n}</h1>"} for n in ("A", "B", "C")]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    monkeypatch.chdir(machine)
    common = ["--out", "run", "--packed", "packed.npz", "--base", "llama"]
    assert main([*common, "--pack", str(corpus)]) == 0
    settings = ["--canvas-length", "8", "--canvas-tokens", "16", "--frozen-layers", "0", "--rank", "4"]
    assert main([*common, *settings, "--max-steps", "1", "--export", "export"]) == 0
    spec = json.loads((machine / "export" / "genui.json").read_text())
    assert spec["base"] == "llama" and spec["base_folder"] == str((machine / "llama").resolve())
    monkeypatch.chdir(tmp_path)  # the same machine, another folder: found where it was
    assert load_model(machine / "export", device="cpu").canvas_length == 8
    here = tmp_path / "cpu"  # the run copied to another machine, where the first one's folders are not
    shutil.copytree(machine, here)
    shutil.rmtree(machine)
    monkeypatch.chdir(here)
    assert main([*common, "--max-steps", "2"]) == 0  # resumes on ./llama here
    assert main(["--out", "run", "--export-only", "--export", "export2"]) == 0
    assert json.loads((here / "export2" / "genui.json").read_text())["base"] == "llama"
    assert load_model(here / "export2", device="cpu").canvas_length == 8
    (here / "export2" / "genui.json").write_text(json.dumps({**spec, "base": "/elsewhere/llama", "base_folder": None}))
    started = time.monotonic()
    with pytest.raises(ModelLoadError, match="genui.json names its base '/elsewhere/llama', which is no folder here"):
        load_model(here / "export2", device="cpu")
    assert time.monotonic() - started < 10  # said at once, not after the hub's retries


def test_a_run_needs_its_pack_made_with_its_bases_tokenizer(
    tiny_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pack of another tokenizer's ids trained on other words without a word, or died on an IndexError in the
    first forward; a run with no pack died on a FileNotFoundError and left its run folder behind."""
    from transformers import AutoTokenizer

    corpus = tmp_path / "corpus.jsonl"
    rows = [{"site": "wiki", "path": f"/wiki/{n}", "prompt": n, "html": f"<h1>{n}</h1>"} for n in ("A", "B", "C")]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    packed = tmp_path / "packed.npz"
    run = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--max-steps", "1", "--frozen-layers", "0"]
    with pytest.raises(SystemExit, match=f"no pack at {packed}; make one from a corpus first"):
        main([*run, "--base", str(tiny_base)])
    assert not (tmp_path / "run").exists()
    assert main(["--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]) == 0
    other = tmp_path / "other_base"
    shutil.copytree(tiny_base, other)
    tokenizer = AutoTokenizer.from_pretrained(other)
    tokenizer.add_tokens(["<another-word>"])
    tokenizer.save_pretrained(other)
    with pytest.raises(SystemExit, match="was packed with another tokenizer than"):
        main([*run, "--base", str(other)])


def test_a_base_neither_here_nor_to_be_had_is_refused_at_once_by_name(
    tiny_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --base went to from_pretrained as a hub id: offline, a traceback about huggingface.co after 50 s
    of retries, for a pack as for a run, and an empty run folder behind it."""
    import engine.identity

    monkeypatch.setattr(engine.identity, "_unreachable", lambda endpoint: "no network here")
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"site": "wiki", "path": f"/{n}", "prompt": n, "html": f"<h1>{n}</h1>"} for n in ("A", "B", "C")]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    packed = tmp_path / "packed.npz"
    monkeypatch.chdir(tmp_path)
    typo = "bsaes/llama"  # a folder here mistyped reads as a hub id too
    started = time.monotonic()
    with pytest.raises(SystemExit, match=f"genui adapt: base '{typo}': no folder '{typo}' here.*no network here"):
        main(["--packed", str(packed), "--base", typo, "--pack", str(corpus)])
    assert main(["--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]) == 0
    with pytest.raises(SystemExit, match=f"genui adapt: base '{typo}': no folder"):
        main(["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", typo, "--max-steps", "1"])
    assert time.monotonic() - started < 10
    with pytest.raises(SystemExit) as exit:
        main(["--packed", str(packed), "--base", str(tiny_base), "--pack", str(tmp_path / "corpsu.jsonl")])
    assert exit.value.code == 2 and "corpsu.jsonl: no such file; build the corpus with genui corpus" in (
        capsys.readouterr().err
    )


def test_a_base_of_another_shape_is_refused_by_name(tiny_base: Path, tmp_path: Path) -> None:
    """A GPT-2 (no .model.layers) died on an AttributeError deep in the adapter's set-up."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    gpt2 = tmp_path / "gpt2"
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=len(tokenizer))).save_pretrained(gpt2)
    tokenizer.save_pretrained(gpt2)
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"site": "wiki", "path": f"/{n}", "prompt": n, "html": f"<h1>{n}</h1>"} for n in ("A", "B", "C")]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    packed = tmp_path / "packed.npz"
    assert main(["--packed", str(packed), "--base", str(gpt2), "--pack", str(corpus)]) == 0
    run = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(gpt2), "--frozen-layers", "0"]
    with pytest.raises(SystemExit, match=f"{gpt2} holds a GPT2LMHeadModel; genui adapts Llama-shaped causal LMs"):
        main([*run, "--max-steps", "1"])


def test_pack_repeats_the_training_pages_of_the_routes_it_is_told(tiny_base: Path, tmp_path: Path) -> None:
    rows = [
        ("os", "/settings/display", False),
        ("os", "/settings/sound", True),  # held out: packed once whatever matches it
        ("os", "/files/settings/display", False),  # the whole path must match
        ("os", "/", False),
        ("forum", "/", False),
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"site": s, "path": p, "prompt": f"<page>{s}{p}</page>", "html": f"<p>{p}</p>", "holdout": h})
            + "\n"
            for s, p, h in rows
        )
    )
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]
    # the first match counts: /settings/display once, though the second repeat matches it too
    repeats = ["--repeat", "os:/settings/display=1", "--repeat", "os:/settings/.*=3", "--repeat", "os:/=2"]
    assert main([*common, *repeats]) == 0
    pages = Packed.load(packed)
    assert len(pages) == 1 + 1 + 1 + 2 + 1
    assert pages.holdout.tolist() == [False, True, False, False, False, False]
    assert [pages.group_names[g] for g in pages.groups] == ["os"] * 5 + ["forum"]
    assert main([*common, "--repeat", "os:/settings/.*=3"]) == 0
    assert len(Packed.load(packed)) == 3 + 1 + 1 + 1 + 1


def test_pack_repeats_a_route_by_its_query_and_refuses_a_repeat_that_matches_no_page(
    tiny_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [("/terminal?cmd=ls", False), ("/terminal?cmd=ls%20/home/user", False), ("/terminal?cmd=pwd", False)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"site": "os", "path": p, "prompt": f"<page>{p}</page>", "html": "<pre>$</pre>", "holdout": h})
            + "\n"
            for p, h in rows
        )
    )
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]
    # sessions 29-33 wrote this one, which matched no page while only the path (query aside) was matched
    assert main([*common, "--repeat", "os:/terminal\\?cmd=ls(%20/home.*)?=4"]) == 0
    assert len(Packed.load(packed)) == 4 + 4 + 1
    assert main([*common, "--repeat", "os:/terminal=2"]) == 0  # the path alone still matches every command
    assert len(Packed.load(packed)) == 2 + 2 + 2
    packed.unlink()
    for mistaken in ("wiki:/terminal.*=2", "os:/terminal\\?cmd=cd=2", "os:/terminal~<p>=2"):
        with pytest.raises(SystemExit) as exit_:
            main([*common, "--repeat", "os:/terminal=2", "--repeat", mistaken])
        assert exit_.value.code == 2
        assert "no training page of the corpus matches it (sites: os)" in capsys.readouterr().err
        assert not packed.exists()  # nothing half-made is left to train on


def test_pack_repeats_only_the_pages_whose_html_holds_the_shape_it_is_told(tiny_base: Path, tmp_path: Path) -> None:
    pages = {
        "/wiki/One": "<article>\n<h1>One</h1>\n<p>a</p>\n</article>",
        "/wiki/Two": "<article>\n<h1>Two</h1>\n<p>a</p>\n<p>b</p>\n</article>",  # the paragraphs on two lines
        "/wiki/Three": "<article><h1>Three</h1><p>a</p><p>b</p><p>c</p></article>",
    }
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"site": "wiki", "path": p, "prompt": f"<title>{p}</title>", "html": h, "holdout": False}) + "\n"
            for p, h in pages.items()
        )
    )
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]
    assert main([*common, "--repeat", "wiki:/wiki/.*~</p>.*<p>=3"]) == 0
    assert len(Packed.load(packed)) == 1 + 3 + 3
    assert main([*common, "--repeat", "wiki:/wiki/.*~<p>c</p>=2", "--repeat", "wiki:/wiki/T.*=4"]) == 0
    assert len(Packed.load(packed)) == 1 + 4 + 2  # the first match counts, the HTML's included


@pytest.mark.parametrize(
    "bad", ["os:/settings/.*", "os=3", ":/x=3", "os:/x=0", "os:(=2", "os:/x=²", "os:/x~=2", "os:/x~(p=2", "os:~<p>=2"]
)
def test_pack_refuses_a_repeat_it_cannot_read_and_says_how_to_write_one(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--out", str(tmp_path / "run"), "--pack", str(tmp_path / "c.jsonl"), "--repeat", bad])
    assert exit_.value.code == 2
    assert f"--repeat {bad!r}" in capsys.readouterr().err


def test_a_run_without_a_run_folder_is_refused_with_the_flag_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--steps", "1"])
    assert exit.value.code == 2 and "name it with --out DIR" in capsys.readouterr().err


def _packed(sites: list[tuple[int, bool]]) -> Packed:
    """A pack of one-token pages: (group, held out) a row."""
    n = len(sites)
    tokens = np.ones(n, np.uint16)
    return Packed(
        tokens,
        np.arange(n + 1),
        tokens,
        np.arange(n + 1),
        np.array([g for g, _ in sites], np.int16),
        np.array([h for _, h in sites], bool),
        ("wiki", "forum", "os"),
    )


def test_the_held_out_loss_reads_every_site_spread_over_each_site_s_rows() -> None:
    """The corpus writes every wiki article first, and the first 24 held-out rows were all the wiki's: a run's
    held-out loss reads each site's share, from the first of its held-out rows to the last, the sites taking turns
    (heldout_loss gives the k-th row the k-th noise level)."""
    packed = _packed([(0, i % 3 == 0) for i in range(120)] + [(1, i % 2 == 0) for i in range(40)] + [(2, True)] * 3)
    rows = heldout_rows(packed, 24)
    groups = packed.groups[rows].tolist()
    assert len(rows) == 24 and packed.holdout[rows].all()
    assert groups[:6] == [0, 1, 2, 0, 1, 2] and groups.count(2) == 3  # the os has 3: the others share the rest
    assert sorted([groups.count(0), groups.count(1)]) == [10, 11]
    wiki = sorted(r for r, g in zip(rows, groups, strict=True) if g == 0)
    assert wiki[0] == 0 and wiki[-1] > 100  # from the first held-out article to near the last
    held = np.flatnonzero(packed.holdout)
    # genui quality measures each site's held-out pages as a subset: all of them, in their order
    wiki_held = held[packed.groups[held] == 0].tolist()
    assert heldout_rows(packed.subset(wiki_held), len(wiki_held)).tolist() == list(range(len(wiki_held)))


def write_corpus(corpus: Path, rows: list[tuple[str, str, bool]]) -> None:
    """A corpus of one-heading pages at (site, path, held out) rows."""
    corpus.write_text(
        "".join(
            json.dumps({"site": s, "path": p, "prompt": f"<p>{p}</p>", "html": f"<h1>{p}</h1>", "holdout": h}) + "\n"
            for s, p, h in rows
        )
    )


def test_a_resumed_run_measures_its_held_out_loss_on_the_rows_its_log_began_with(
    tiny_base: Path, tmp_path: Path
) -> None:
    """A run records the rows of its held-out loss; one whose checkpoint records none (before session 54) measures
    the first held-out rows, as its log did, so a log never changes what its held-out column means midway."""
    corpus = tmp_path / "corpus.jsonl"
    rows = [("wiki", f"/wiki/{i}", i < 30) for i in range(34)] + [("forum", f"/r/b/{i}", i < 2) for i in range(4)]
    write_corpus(corpus, rows)
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base)]
    assert main([*common, "--pack", str(corpus)]) == 0
    settings = ["--canvas-length", "8", "--canvas-tokens", "16", "--frozen-layers", "0", "--rank", "4"]
    assert main([*common, *settings, "--max-steps", "1", "--eval-every", "1"]) == 0
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    state = torch.load(checkpoint, weights_only=False)
    assert state["heldout_rows"] == heldout_rows(Packed.load(packed)).tolist()
    assert {34, 35} <= set(state["heldout_rows"])  # the forum's held-out pages
    del state["heldout_rows"]  # a checkpoint from before session 54
    torch.save(state, checkpoint)
    assert main([*common, "--max-steps", "2", "--eval-every", "1"]) == 0
    assert torch.load(checkpoint, weights_only=False)["heldout_rows"] == list(range(24))


def test_a_run_resumed_on_another_pack_is_refused_and_says_how_to_go_on(tiny_base: Path, tmp_path: Path) -> None:
    """A run's training order and held-out rows are drawn from its pack's rows: resumed on a pack built again (another
    split, another corpus) they would name other rows, so the run says so instead of training on."""
    corpus = tmp_path / "corpus.jsonl"
    rows = [("wiki", f"/wiki/{i}", i < 2) for i in range(8)]
    write_corpus(corpus, rows)
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base)]
    assert main([*common, "--pack", str(corpus)]) == 0
    settings = ["--canvas-length", "8", "--canvas-tokens", "16", "--frozen-layers", "0", "--rank", "4"]
    assert main([*common, *settings, "--max-steps", "1"]) == 0
    assert main([*common, "--max-steps", "2"]) == 0  # the same pack: resumed
    corpus.write_text(corpus.read_text().replace('"holdout": false', '"holdout": true', 1))  # another split
    packed.unlink()
    assert main([*common, "--pack", str(corpus)]) == 0
    with pytest.raises(SystemExit, match="trained on another pack than .*resume it with the pack it began on"):
        main([*common, "--max-steps", "3"])


def test_pack_leaves_out_a_page_longer_than_it_packs_instead_of_cutting_it(
    tiny_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut page ends in an end-of-text its HTML never reached: the model would learn to end a page anywhere."""
    monkeypatch.setattr(adapt, "MAX_RESPONSE", 64)
    long_page = "<div>" + "<p>a reply of some words</p>" * 40 + "</div>"
    rows = [("forum", "/r/a/short", "<div><p>short</p></div>"), ("forum", "/r/a/long", long_page)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"site": s, "path": p, "prompt": f"<page>{p}</page>", "html": h, "holdout": False}) + "\n"
            for s, p, h in rows
        )
    )
    packed = tmp_path / "packed.npz"
    assert (
        main(["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)])
        == 0
    )
    pages = Packed.load(packed)
    assert len(pages) == 1 and len(pages.response(0)) < 64  # the short page, whole
    assert "1 pages packed" in (said := capsys.readouterr().err) and "1 rows left out, longer than" in said


def test_the_lease_scripts_parse_and_training_for_no_minutes_is_refused_not_run_without_limit(
    tmp_path: Path,
) -> None:
    """bench/gpu_train.sh runs only on a lent GPU, so its mistakes cost a lease: each script must parse, and
    MINUTES=0 (which genui adapt reads as no limit, training on until the call is killed before its export) is
    refused with the value to write."""
    bench = Path(__file__).resolve().parent.parent / "bench"
    for script in sorted(bench.glob("*.sh")):
        subprocess.run(["bash", "-n", str(script)], check=True)
    env = {**os.environ, "OUT": str(tmp_path / "out"), "MINUTES": "0"}
    (tmp_path / "out").mkdir()
    ran = subprocess.run(
        ["bash", str(bench / "gpu_train.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 2 and "write MINUTES=0.1" in ran.stderr


def test_pack_refuses_pages_another_file_trains_on_where_the_corpus_holds_them_out(
    tiny_base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pages distilled against a corpus of another split carry `holdout: false` at URLs this corpus holds out: packed,
    the held-out pages' prompts would be trained on."""

    def page(path: str, holdout: bool) -> str:
        return json.dumps(
            {"site": "wiki", "path": path, "prompt": f"<t>{path}</t>", "html": "<p>x</p>", "holdout": holdout}
        )

    corpus, distilled = tmp_path / "corpus.jsonl", tmp_path / "distilled.jsonl"
    corpus.write_text(page("/wiki/Plus", True) + "\n" + page("/wiki/Minus", False) + "\n")
    distilled.write_text(page("/wiki/Minus", False) + "\n")
    packed = tmp_path / "packed.npz"
    common = ["--out", str(tmp_path / "run"), "--packed", str(packed), "--base", str(tiny_base), "--pack"]
    assert main([*common, str(corpus), str(distilled)]) == 0 and len(Packed.load(packed)) == 3
    distilled.write_text(page("/wiki/Plus", False) + "\n")
    with pytest.raises(SystemExit):
        main([*common, str(corpus), str(distilled)])
    said = capsys.readouterr().err
    assert f"{distilled} trains on 1 page(s) at URLs that {corpus} holds out (wiki /wiki/Plus)" in said
    # Split by item, a home page's copies are held out for the entries some of them feature, and trained on in the
    # others: its prompt is the corpus's to train on, and pages distilled at it are no leak.
    corpus.write_text(page("/", True) + "\n" + page("/", False) + "\n" + page("/wiki/Minus", False) + "\n")
    distilled.write_text(page("/", False) + "\n")
    assert main([*common, str(corpus), str(distilled)]) == 0


def test_a_run_stopped_and_resumed_trains_as_the_run_that_never_stopped(tiny_base: Path, tmp_path: Path) -> None:
    """A lease trains in one call and resumes in the next: the resumed run takes the same pages, noise and learning
    rates from its checkpoint, and ends with the weights the uninterrupted run ends with. (The two runs differed from
    their third step: the adapter's first weights were drawn from torch's unseeded generator, so two runs of one
    seed were two runs.)"""
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"site": "wiki", "path": f"/wiki/{n}", "prompt": f"<title>{n}</title>", "html": f"<h1>{n}</h1><p>{n} x y</p>"}
        for n in ("Hash", "Array", "List", "Tree", "Heap", "Queue", "Stack", "Graph")
    ]
    corpus.write_text("".join(json.dumps({**r, "holdout": i == 0}) + "\n" for i, r in enumerate(rows)))
    packed = tmp_path / "packed.npz"
    pack = ["--out", str(tmp_path / "pack"), "--packed", str(packed), "--base", str(tiny_base), "--pack", str(corpus)]
    assert main(pack) == 0
    settings = ["--packed", str(packed), "--base", str(tiny_base), "--canvas-length", "8", "--canvas-tokens", "16"]
    settings += ["--frozen-layers", "0", "--rank", "4", "--batch-pages", "2", "--save-every", "1", "--eval-every", "2"]
    settings += ["--warmup", "1", "--lr", "1e-3", "--seed", "5"]
    assert main(["--out", str(tmp_path / "whole"), *settings, "--max-steps", "4"]) == 0
    assert main(["--out", str(tmp_path / "parts"), *settings, "--max-steps", "2"]) == 0
    assert main(["--out", str(tmp_path / "parts"), *settings, "--max-steps", "4"]) == 0  # resumed at step 2
    logs = [json.loads((tmp_path / run / "log.json").read_text()) for run in ("whole", "parts")]
    assert [entry["step"] for entry in logs[1]] == [0, 1, 2, 3, 4]
    losses = [[(entry.get("canvas", 0.0), entry.get("ar", 0.0)) for entry in log[1:]] for log in logs]
    assert [value for pair in losses[0] for value in pair] == pytest.approx(
        [value for pair in losses[1] for value in pair], rel=1e-5
    )
    assert logs[0][-1]["heldout"] == pytest.approx(logs[1][-1]["heldout"], rel=1e-5)
    for run in ("whole", "parts"):
        assert main(["--out", str(tmp_path / run), "--export-only", "--export", str(tmp_path / f"{run}-x")]) == 0
    whole, parts = (load_file(tmp_path / f"{run}-x" / "adapter_model.safetensors") for run in ("whole", "parts"))
    assert whole.keys() == parts.keys() and all(torch.allclose(whole[k], parts[k], atol=1e-6) for k in whole)


def test_every_setting_of_a_run_says_what_it_is_and_its_default_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    """genui adapt --help listed --frozen-layers, --rank, --lr and the rest bare: a user learned that --frozen-layers
    is 10 from the error on a 2-layer base (an ML engineer's review of the lab workflow)."""
    with pytest.raises(SystemExit):
        adapt.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for setting in dataclasses.fields(adapt.AdaptConfig):
        flag = "--" + setting.name.replace("_", "-")
        entry, default = shown.split(f"{flag} {setting.name.upper()} ", 1)[1].split(" (default: ", 1)
        assert re.search(r"--[a-z-]+ [A-Z_]+ ", entry) is None, flag  # its own help, not the next option's
        assert entry and default.startswith(f"{setting.default})"), flag
    assert "steps between checkpoints (default: 10)" in shown
