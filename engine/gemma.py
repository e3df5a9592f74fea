"""DiffusionGemma as a denoiser for engine.denoise: its causal encoder fills the KV cache, its bidirectional decoder
denoises a canvas against it, through the model's own modules and mask builders.

Positions, masks and self-conditioning are prepared the way ``DiffusionGemmaForBlockDiffusion.generate()`` prepares
them, so the shared loop reproduces that method (tests/test_engine_denoise.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache, PreTrainedTokenizerBase

from engine.config import BOS_ID, RESPONSE_ID
from engine.denoise import cache_rows


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """The encoder input DiffusionGemma was trained on: <bos> prompt <response>. The prompt's text makes no special
    token (it holds what visitors wrote: engine.causal.encode_prompt)."""
    return [BOS_ID, *tokenizer.encode(prompt, add_special_tokens=False, split_special_tokens=True), RESPONSE_ID]


@dataclass(eq=False)
class GemmaPrefix:
    cache: DynamicCache
    attention_mask: torch.Tensor  # (B, T) bool: real tokens of the cached sequence
    length: int  # positions so far; the canvas being denoised starts here
    decoder_masks: dict | None = None  # the decoder's masks for the current length, built once per canvas


class GemmaDenoiser:
    def __init__(self, model: DiffusionGemmaForBlockDiffusion, tokenizer: PreTrainedTokenizerBase) -> None:
        text = model.config.text_config
        self.model = model
        self.tokenizer = tokenizer
        self.canvas_length = int(model.config.canvas_length)
        self.vocab_size = int(text.vocab_size)
        eos = model.generation_config.eos_token_id or text.eos_token_id
        # Gemma configs may list several ends (<eos>, <end_of_turn>); generate() ends a page at any of them, and the
        # loop writes each as the first (engine.denoise)
        ends = [int(end) for end in (eos if isinstance(eos, list | tuple) else [eos])]
        self.eos_id = ends[0]
        self.other_ends = tuple(dict.fromkeys(end for end in ends[1:] if end != self.eos_id))
        pad = model.generation_config.pad_token_id
        self.pad_id = int(pad if pad is not None else text.pad_token_id)
        self.max_positions = int(text.max_position_embeddings)
        self.self_conditioning = True

    def encode_prompt(self, prompt: str) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _encode(self, prefix: GemmaPrefix, input_ids: torch.Tensor, start: int) -> None:
        b, t = input_ids.shape
        positions = torch.arange(start, start + t, dtype=torch.int32, device=input_ids.device).unsqueeze(0)
        encoder = self.model.model.encoder
        masks = encoder.create_masks_for_generate(
            config=self.model.config,
            inputs_embeds=torch.empty((b, t, 0), dtype=self.model.dtype, device=input_ids.device),
            attention_mask=prefix.attention_mask,
            cache=prefix.cache,
            position_ids=positions,
        )
        encoder(input_ids=input_ids, attention_mask=masks, cache=prefix.cache, position_ids=positions)

    def prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> GemmaPrefix:
        cache = DynamicCache(config=self.model.config.get_text_config(decoder=True))
        prefix = GemmaPrefix(cache, attention_mask.bool(), input_ids.shape[1])
        self._encode(prefix, input_ids, 0)
        return prefix

    def denoise(
        self, prefix: GemmaPrefix, canvas: torch.Tensor, self_conditioning: torch.Tensor | None
    ) -> torch.Tensor:
        if prefix.decoder_masks is None:
            prefix.decoder_masks = self.model.model.decoder.create_diffusion_decoder_attention_mask(
                config=self.model.config,
                inputs_embeds=canvas.unsqueeze(-1),  # only its shape is read
                cache=prefix.cache,
                decoder_attention_mask=F.pad(prefix.attention_mask, (0, self.canvas_length), value=True),
            )
        length = prefix.length
        positions = torch.arange(length, length + self.canvas_length, dtype=torch.int32, device=canvas.device)
        if self_conditioning is not None:
            self_conditioning = self_conditioning.to(self.model.model.decoder.embed_tokens.weight.dtype)
        output = self.model(
            decoder_input_ids=canvas,
            self_conditioning_logits=self_conditioning,
            decoder_attention_mask=prefix.decoder_masks,
            cache=prefix.cache,
            decoder_position_ids=positions.unsqueeze(0),
        )
        return output.logits  # (B, C, V) float32, softcapped

    def narrow(self, prefix: GemmaPrefix, rows: torch.Tensor) -> GemmaPrefix:
        return GemmaPrefix(cache_rows(prefix.cache, rows), prefix.attention_mask[rows], prefix.length)

    def commit(self, prefix: GemmaPrefix, canvas: torch.Tensor) -> None:
        prefix.attention_mask = F.pad(prefix.attention_mask, (0, self.canvas_length), value=True)
        self._encode(prefix, canvas, prefix.length)
        prefix.length += self.canvas_length
        prefix.decoder_masks = None

    # -- the autoregressive baseline: the encoder is a causal LM with the same weights ------------------------------

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config.get_text_config(decoder=True))

    def next_token_logits(self, input_ids: torch.Tensor, cache: DynamicCache) -> torch.Tensor:
        """Logits (B, V) for the token after ``input_ids`` (B, T), which are appended to ``cache``."""
        hidden = self.model.model.encoder(input_ids=input_ids, cache=cache, use_cache=True)
        logits = self.model.lm_head(hidden.last_hidden_state[:, -1]).float()
        cap = self.model.config.text_config.final_logit_softcapping
        return torch.tanh(logits / cap) * cap if cap else logits
