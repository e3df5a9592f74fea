"""The training objective on a tiny random model: masks, one-pass canvases, loss going down, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

from engine.config import EOS_ID, PAD_ID, TINY, make_config
from engine.gemma import encode_prompt
from lab import scratch as training
from lab.data import Packed, pack_jsonl
from lab.scratch import Batch, TrainConfig, _masks, diffusion_loss, main, make_batch
from lab.tokenizer import train_tokenizer


def _tiny() -> DiffusionGemmaForBlockDiffusion:
    torch.manual_seed(0)
    return DiffusionGemmaForBlockDiffusion(make_config(TINY)).eval()


def test_one_pass_over_all_canvases_matches_one_decoder_call_per_canvas() -> None:
    model = _tiny()
    c = model.config.canvas_length
    vocab = model.config.text_config.vocab_size
    prompt_len, k = 10, 2
    ids = torch.randint(7, vocab, (2, prompt_len + k * c))
    ids[1, :3] = PAD_ID  # row 1 is left-padded
    noisy = torch.randint(0, vocab, (2, k * c))
    enc_mask, dec_mask = _masks(Batch(ids, prompt_len, k), c)
    text_config = model.config.get_text_config()
    with torch.no_grad():
        cache = DynamicCache(config=text_config)
        model.model.encoder(
            input_ids=ids,
            attention_mask={"full_attention": enc_mask, "sliding_attention": enc_mask},
            cache=cache,
            position_ids=torch.arange(ids.shape[1])[None],
            use_cache=True,
        )
        together = model(
            decoder_input_ids=noisy,
            cache=cache,
            decoder_attention_mask={"full_attention": dec_mask, "sliding_attention": dec_mask},
            decoder_position_ids=torch.arange(prompt_len, prompt_len + k * c)[None],
        ).logits
        for canvas in range(k):
            alone = DynamicCache(config=text_config)
            model.model.encoder(input_ids=ids[:1, : prompt_len + canvas * c], cache=alone, use_cache=True)
            ref = model(decoder_input_ids=noisy[:1, canvas * c : (canvas + 1) * c], cache=alone).logits
            torch.testing.assert_close(together[:1, canvas * c : (canvas + 1) * c], ref, atol=1e-4, rtol=1e-4)
        unpadded = DynamicCache(config=text_config)
        model.model.encoder(input_ids=ids[1:, 3:prompt_len], cache=unpadded, use_cache=True)
        ref = model(decoder_input_ids=noisy[1:, :c], cache=unpadded).logits
        torch.testing.assert_close(together[1:, :c], ref, atol=1e-4, rtol=1e-4)


def test_no_next_token_loss_is_read_at_a_left_pad_position(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last left-pad position was trained to predict the prompt's first token: what the model gives there must
    change nothing of the loss."""
    model = _tiny()
    c = model.config.canvas_length
    vocab = model.config.text_config.vocab_size
    row = torch.randint(7, vocab, (1, 7 + c), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([torch.full((1, 3), PAD_ID), row], dim=1)
    cfg = TrainConfig(self_conditioning=0.0)

    def ar_loss() -> float:
        with torch.no_grad():
            _, parts = diffusion_loss(model, Batch(padded, 10, 1), cfg, torch.Generator().manual_seed(0), False)
        return parts["ar"]

    plain = ar_loss()
    logits = training._logits

    def far_off_at_the_pads(model: DiffusionGemmaForBlockDiffusion, hidden: torch.Tensor) -> torch.Tensor:
        out = logits(model, hidden)
        out[:, :3] = torch.linspace(-30.0, 30.0, out.shape[-1])  # the next-token logits at the three pads
        return out

    monkeypatch.setattr(training, "_logits", far_off_at_the_pads)
    assert ar_loss() == pytest.approx(plain, rel=1e-6)


def test_decoder_mask_hides_the_clean_copy_of_its_own_and_later_canvases() -> None:
    c, prompt_len, k = 4, 3, 2
    ids = torch.arange(1, prompt_len + k * c + 1)[None]
    _, dec = _masks(Batch(ids, prompt_len, k), c)
    dec = dec[0, 0]  # (K*C, L + K*C)
    length = prompt_len + k * c
    assert dec[0, :prompt_len].all() and not dec[0, prompt_len:length].any()  # canvas 0: prompt only
    assert dec[c, : prompt_len + c].all() and not dec[c, prompt_len + c : length].any()  # canvas 1: + clean canvas 0
    assert dec[0, length : length + c].all() and not dec[0, length + c :].any()  # its own noisy canvas only
    assert dec[c, length + c :].all() and not dec[c, length : length + c].any()


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    rows = [
        {
            "site": "wiki" if i % 2 else "forum",
            "path": f"/p{i}",
            "prompt": f"<page>{i}</page>",
            "html": f"<p>page number {i} says hello</p>",
            "holdout": i < 2,
        }
        for i in range(24)
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = train_tokenizer((t for r in rows for t in (r["prompt"], r["html"])), vocab_size=TINY.vocab_size)
    tok.save_pretrained(tmp_path / "tok")
    packed = pack_jsonl(corpus, tok, max_prompt=32, max_response=64)
    packed.save(tmp_path / "packed.npz")
    return tmp_path / "packed.npz", tmp_path / "tok"


def test_packed_corpus_round_trips_and_ends_every_response_with_eos(tmp_path: Path) -> None:
    packed_path, tok_path = _corpus(tmp_path)
    packed = Packed.load(packed_path)
    assert len(packed) == 24 and packed.holdout.sum() == 2
    assert set(packed.group_names) == {"wiki", "forum"}
    for i in range(len(packed)):
        assert packed.response(i)[-1] == EOS_ID
    from lab.tokenizer import load_tokenizer

    tok = load_tokenizer(tok_path)
    assert list(packed.prompt(3)) == encode_prompt(tok, "<page>3</page>")


def test_loss_goes_down_when_the_model_sees_the_same_batch_again(tmp_path: Path) -> None:
    packed = Packed.load(_corpus(tmp_path)[0])
    model = _tiny().train()
    batch = make_batch(packed, list(range(2, 10)), model.config.canvas_length, torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss, _ = diffusion_loss(model, batch, TrainConfig(), torch.Generator().manual_seed(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.slow
def test_training_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    packed, tok = _corpus(tmp_path)
    out = tmp_path / "run"
    args = [
        "--data",
        str(packed),
        "--tokenizer",
        str(tok),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--steps",
        "6",
        "--canvas-tokens",
        "64",
        "--shape",
        "tiny",
        "--log-every",
        "1",
    ]
    assert main([*args, "--minutes", "0.0001"]) == 0
    first = torch.load(out / "training_state.pt", weights_only=False)["step"]
    assert 1 <= first < 6
    assert main([*args, "--minutes", "5"]) == 0
    state = torch.load(out / "training_state.pt", weights_only=False)
    assert state["step"] == 6 and state["tokens"] > 0
    assert np.isfinite(state["heldout"])
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()


@pytest.mark.slow
def test_a_new_run_starts_from_another_checkpoints_weights_in_bf16_autocast(tmp_path: Path) -> None:
    packed, tok = _corpus(tmp_path)
    common = ["--data", str(packed), "--tokenizer", str(tok), "--device", "cpu", "--canvas-tokens", "64"]
    first = tmp_path / "first"
    assert main([*common, "--out", str(first), "--steps", "2", "--shape", "tiny"]) == 0
    # Mark the first run's weights so that starting from them cannot be mistaken for a fresh initialisation.
    marked = DiffusionGemmaForBlockDiffusion.from_pretrained(first)
    embedding = marked.get_input_embeddings().weight
    with torch.no_grad():
        embedding.fill_(0.37)
    marked.save_pretrained(first)
    second = tmp_path / "second"
    assert main([*common, "--out", str(second), "--steps", "3", "--init", str(first), "--precision", "bf16"]) == 0
    state = torch.load(second / "training_state.pt", weights_only=False)
    assert state["step"] == 3 and np.isfinite(state["heldout"])  # its own schedule, from step 0
    trained = DiffusionGemmaForBlockDiffusion.from_pretrained(second).get_input_embeddings().weight
    assert not torch.equal(trained, embedding)  # it trained on from there
    assert (trained - 0.37).abs().max().item() < 0.05
    with pytest.raises(SystemExit, match="already holds a run"):
        main([*common, "--out", str(second), "--init", str(first)])


@pytest.mark.slow
def test_a_fitted_schedule_ends_annealed_within_the_time_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run's clock advances by a fixed amount per reading, so the test does not depend on how busy the CPU is.
    readings = iter(range(10**6))
    monkeypatch.setattr(training, "clock", lambda: next(readings) * 0.05)
    packed, tok = _corpus(tmp_path)
    out = tmp_path / "run"
    argv = ["--data", str(packed), "--tokenizer", str(tok), "--out", str(out), "--device", "cpu", "--shape", "tiny"]
    argv += ["--canvas-tokens", "64", "--steps", "100000", "--minutes", "0.15", "--fit-schedule"]
    assert main(argv) == 0
    state = torch.load(out / "training_state.pt", weights_only=False)
    assert 20 < state["step"] == state["config"]["steps"] < 100000  # it ended by its schedule, not by the clock
    assert state["scheduler"]["_last_lr"][0] < 0.05 * TrainConfig.lr


def test_a_subset_can_pair_each_response_with_another_rows_prompt(tmp_path: Path) -> None:
    packed = Packed.load(_corpus(tmp_path)[0])
    rows, others = [3, 5, 7], [5, 7, 3]
    same, swapped = packed.subset(rows), packed.subset(rows, prompts_from=others)
    assert len(same) == 3 and same.holdout.all() and list(same.groups) == list(packed.groups[rows])
    for k, (row, other) in enumerate(zip(rows, others, strict=True)):
        assert list(same.prompt(k)) == list(packed.prompt(row))
        assert list(swapped.prompt(k)) == list(packed.prompt(other))
        assert list(swapped.response(k)) == list(packed.response(row))


def _copying(n: int = 8) -> Packed:
    """Pages that copy their prompt's token 11+i twice between fixed tokens; token 10 is in every prompt."""
    prompts = [[2, 10, 11 + i, 6] for i in range(n)]
    responses = [[20, 11 + i, 21, 11 + i, 10, EOS_ID] for i in range(n)]
    return Packed(
        np.concatenate(prompts).astype(np.uint16),
        np.cumsum([0, *map(len, prompts)]),
        np.concatenate(responses).astype(np.uint16),
        np.cumsum([0, *map(len, responses)]),
        np.zeros(n, np.int16),
        np.zeros(n, bool),
        ("copy",),
    )


def test_grounded_tokens_are_the_responses_rare_tokens_from_its_own_prompt() -> None:
    packed = _copying()
    common = training.common_prompt_tokens(packed, share=0.5)
    assert sorted(common.tolist()) == [2, 6, 10]
    batch = make_batch(packed, [3, 5], 4, torch.device("cpu"), common)
    assert batch.grounded is not None
    expected = [False] * batch.prompt_len + [False, True, False, True, False, False, False, False]
    assert batch.grounded.tolist() == [expected, expected]  # token 10 is in the page too, but common
    assert make_batch(packed, [3, 5], 4, torch.device("cpu")).grounded is None


def test_the_grounded_weight_changes_the_loss_but_not_the_reported_parts() -> None:
    packed = _copying()
    model = _tiny()
    c = model.config.canvas_length
    plain = make_batch(packed, list(range(8)), c, torch.device("cpu"))
    marked = make_batch(packed, list(range(8)), c, torch.device("cpu"), training.common_prompt_tokens(packed, 0.5))

    def run(batch: Batch, weight: float) -> tuple[float, dict[str, float]]:
        cfg = TrainConfig(grounded_weight=weight)
        loss, parts = diffusion_loss(model, batch, cfg, torch.Generator().manual_seed(0), self_conditioning=False)
        return loss.item(), parts

    base, base_parts = run(plain, 5.0)  # no grounded marks: the weight has nothing to act on
    same, _ = run(marked, 1.0)
    weighted, weighted_parts = run(marked, 5.0)
    assert same == pytest.approx(base, rel=1e-6)
    assert weighted != pytest.approx(base, rel=1e-3)
    assert weighted_parts["diffusion"] == pytest.approx(base_parts["diffusion"], rel=1e-6)
    assert weighted_parts["ar"] == pytest.approx(base_parts["ar"], rel=1e-6)
