"""Causal LMs with sliding-window layers (Gemma2 and Gemma3 mix them with full ones; Mistral and Qwen2 may slide in
every layer): genui's steps read the whole cache, and give those layers their window in the mask, as transformers
would. Each loaded and said it was ready, then failed every page longer than its window with a tensor-size error
that visitors saw (a review of other checkpoints)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_fixtures import build_tiny_llama_base
from transformers import AutoTokenizer, Gemma2Config, Gemma2ForCausalLM, MistralConfig, MistralForCausalLM

from engine.causal import CausalDenoiser

WINDOW = 6  # far shorter than prompt and canvas: every step reads keys beyond it
CANVAS = 8
SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_base(tmp_path_factory.mktemp("sliding"))


def _model(kind: str, vocab: int) -> torch.nn.Module:
    torch.manual_seed(0)
    common = {**SHAPE, "vocab_size": vocab, "num_key_value_heads": 2, "sliding_window": WINDOW, "pad_token_id": 0}
    if kind == "mixed":  # Gemma2: a sliding layer, then a full one
        config = Gemma2Config(**common, head_dim=8, layer_types=["sliding_attention", "full_attention"])
        return Gemma2ForCausalLM(config).eval()
    return MistralForCausalLM(MistralConfig(**common)).eval()  # every layer slides


@pytest.mark.parametrize("kind", ["mixed", "every"])
def test_a_sliding_window_models_canvas_gets_the_logits_transformers_gives_the_whole_sequence(
    tokenizer_folder: Path, kind: str
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    model = _model(kind, len(tokenizer))
    denoiser = CausalDenoiser(model, tokenizer, CANVAS)
    assert denoiser.window == WINDOW
    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, len(tokenizer), (2, 14), generator=generator)
    canvas = torch.randint(3, len(tokenizer), (2, CANVAS), generator=generator)
    real = torch.ones((2, 14), dtype=torch.long)
    real[1, :3] = 0  # a left-padded row, as a batch has
    whole = torch.cat([prompt, canvas[:, :-1]], dim=-1)
    whole_real = torch.cat([real, torch.ones((2, CANVAS - 1), dtype=torch.long)], dim=-1)
    with torch.inference_mode():
        # transformers' own masks, sliding windows included, over the whole sequence at once
        expected = model(
            input_ids=whole, attention_mask=whole_real, position_ids=(whole_real.cumsum(-1) - 1).clamp(min=0)
        ).logits[:, 13:]
        prefix = denoiser.prefill(prompt, real)
        inputs = torch.cat([prefix.last[:, None], canvas[:, :-1]], dim=-1)
        causal = denoiser._forward(prefix, inputs, both_ways=False, logits=True)  # a commit's forward
        assert causal is not None
        prefix.cache.crop(-CANVAS)
        torch.testing.assert_close(causal[0], expected[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(causal[1, 3:], expected[1, 3:], atol=1e-5, rtol=1e-5)  # past the padding
        # a step that runs only the changed positions, when all of them changed, is a whole step
        step = denoiser.denoise(prefix, canvas, None)
        changed = torch.randint(3, len(tokenizer), (2, CANVAS), generator=generator)
        again = denoiser.denoise_changed(prefix, changed, neighbours=CANVAS)
        torch.testing.assert_close(again, denoiser.denoise(prefix, changed, None), atol=1e-5, rtol=1e-5)
        assert not torch.equal(step, again)


def test_adaptation_reads_a_sliding_eager_models_clean_text_as_transformers_does(tokenizer_folder: Path) -> None:
    """Training's mask went to Gemma2's eager attention as a boolean, added to the scores as 0 or 1: every position
    read the whole page, future and padding included, and adapting such a base trained on text it will never see."""
    import numpy as np

    from lab.adapt import layout_page, page_loss

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    model = _model("mixed", len(tokenizer))
    assert model.config._attn_implementation == "eager"
    prompt, response = np.arange(3, 8, dtype=np.uint16), np.arange(9, 29, dtype=np.uint16)
    page = layout_page(prompt, response, CANVAS, 1, len(tokenizer), 0.6, torch.Generator().manual_seed(0))
    _, _, ar_ce = page_loss(model, page, 0.5)
    clean = page.input_ids[:, : len(prompt) + 3 * CANVAS]  # the prompt and the page, as written
    with torch.inference_mode():
        logits = model(input_ids=clean).logits[0]  # transformers' own masks: causal, a window of WINDOW
    reference = torch.nn.functional.cross_entropy(logits[page.ar_positions], page.ar_targets)
    assert ar_ce == pytest.approx(reference.item(), abs=1e-5)
