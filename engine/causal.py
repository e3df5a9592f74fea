"""An adapted causal LM as a block-diffusion denoiser: the sequence convention training and inference share.

A pretrained causal LM predicts the token after each input position. genui keeps that convention for canvases,
so the pretrained head is useful from the first step of adaptation:

- the clean prefix (prompt, then every finished canvas) is read causally and kept in the KV cache, all but its
  last token ``x[s-1]``;
- a canvas for positions ``s .. s+C-1`` is fed as ``[x[s-1], d[s], ..., d[s+C-2]]`` (the last clean token, then
  the current draft shifted by one) at positions ``s-1 .. s+C-2``, attending to the cache and, bidirectionally,
  to the whole canvas; the output at slot j predicts ``x[s+j]``;
- a finished canvas is committed by one causal forward of the same inputs with the final tokens, which writes
  them to the cache; the canvas's last token becomes the next canvas's first input.

Training (lab.adapt) builds the same layout for every canvas of a page in one forward, with the draft replaced by
the clean tokens under uniform-token noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from engine.denoise import cache_rows

_TURN = "\ue000genui-prompt\ue000"  # stands for the prompt in the chat template's text: private-use, in no template


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """The prompt as the base model was tuned to read it: its chat template with the prompt as the user's turn,
    ready for the assistant's answer. A tokenizer without a chat template gets the plain text.

    The prompt's own text never makes a special token: it holds what visitors wrote (a rewrite's instruction, a
    reader's post, a URL), and `<|im_end|><|im_start|>system` there would end the user's turn and open another. The
    template's frame is tokenized as it is, with its special tokens, and the prompt between with
    ``split_special_tokens``: the same ids as the whole template tokenized at once, for a prompt with no such text
    (tests/test_engine_base.py checks that on the sites' prompts)."""
    if getattr(tokenizer, "chat_template", None):
        framed = tokenizer.apply_chat_template(
            [{"role": "user", "content": _TURN}], add_generation_prompt=True, tokenize=False
        )
        before, _, after = str(framed).partition(_TURN)
        return [
            *tokenizer.encode(before, add_special_tokens=False),
            *tokenizer.encode(prompt, add_special_tokens=False, split_special_tokens=True),
            *tokenizer.encode(after, add_special_tokens=False),
        ]
    ids = tokenizer.encode(prompt, add_special_tokens=True, split_special_tokens=True)
    return ids if ids else [tokenizer.bos_token_id or tokenizer.eos_token_id]


def end_of_text(tokenizer: PreTrainedTokenizerBase) -> int:
    """The token that ends an answer (SmolLM2's ``<|im_end|>``)."""
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no end-of-text token; set eos_token in its tokenizer_config.json")
    return int(tokenizer.eos_token_id)


@dataclass(eq=False)
class CanvasState:
    """What the last step computed for the canvas: its inputs (B, C), each layer's keys and values for them, and
    its logits (B, C, V); a step that recomputes only the changed positions reuses the rest."""

    inputs: torch.Tensor
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    logits: torch.Tensor


@dataclass(eq=False)
class CausalPrefix:
    cache: DynamicCache  # the clean sequence but its last token
    keys: torch.Tensor  # (B, S) bool: real (non-padding) positions of the cache
    last: torch.Tensor  # (B,) the clean token before the canvas, not in the cache
    position: torch.Tensor  # (B,) the position of ``last``; each row counts from its first real token
    canvas: CanvasState | None = None  # the current canvas's last step


class CausalDenoiser:
    """A transformers causal LM (with genui's adapter merged in) run in the layout above."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, canvas_length: int) -> None:
        config = model.config
        self.model = model
        self.tokenizer = tokenizer
        self.canvas_length = canvas_length
        self.vocab_size = int(config.vocab_size)
        self.eos_id = end_of_text(tokenizer)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id)
        self.max_positions = int(getattr(config, "max_position_embeddings", 2048))
        self.self_conditioning = False  # a causal LM has no input for it

    def encode_prompt(self, prompt: str) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _forward(
        self, prefix: CausalPrefix, inputs: torch.Tensor, both_ways: bool, logits: bool
    ) -> torch.Tensor | None:
        """Run a canvas's inputs against the cache (appending them); the logits (B, C, V) when asked for, else None
        (a commit needs no LM head)."""
        b, c = inputs.shape
        positions = prefix.position[:, None] + torch.arange(c, device=inputs.device)[None]  # (B, C)
        own = torch.ones((c, c), dtype=torch.bool, device=inputs.device)
        own = own if both_ways else torch.tril(own)
        mask = torch.cat([prefix.keys[:, None, :].expand(b, c, -1), own[None].expand(b, c, c)], dim=-1)[:, None]
        kwargs = {
            "input_ids": inputs,
            "attention_mask": mask,
            "position_ids": positions,
            "cache": prefix.cache,
        }
        if logits:
            return self.model(**kwargs).logits.float()
        self.model.model(**kwargs)
        return None

    def prefill(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> CausalPrefix:
        real = attention_mask.bool()
        positions = (real.long().cumsum(dim=-1) - 1).clamp(min=0)  # left padding: rows count from their first token
        b, t = input_ids.shape
        cache = DynamicCache(config=self.model.config)
        if t > 1:
            head = real[:, : t - 1]
            causal = torch.tril(torch.ones((t - 1, t - 1), dtype=torch.bool, device=input_ids.device))
            mask = causal[None] & head[:, None, :]
            mask |= torch.eye(t - 1, dtype=torch.bool, device=input_ids.device)[None]  # padding rows: no empty row
            self.model.model(
                input_ids=input_ids[:, :-1],
                attention_mask=mask[:, None],
                position_ids=positions[:, :-1],
                cache=cache,
            )
        return CausalPrefix(cache, real[:, :-1], input_ids[:, -1], positions[:, -1])

    def denoise(
        self, prefix: CausalPrefix, canvas: torch.Tensor, self_conditioning: torch.Tensor | None
    ) -> torch.Tensor:
        inputs = torch.cat([prefix.last[:, None], canvas[:, :-1]], dim=-1)
        logits = self._forward(prefix, inputs, both_ways=True, logits=True)
        assert logits is not None
        c = self.canvas_length
        layers = prefix.cache.layers
        keys, values = [layer.keys[:, :, -c:] for layer in layers], [layer.values[:, :, -c:] for layer in layers]
        prefix.canvas = CanvasState(inputs, keys, values, logits)
        prefix.cache.crop(-c)  # the step reads the cache; what it appended goes
        return logits  # (B, C, V)

    def denoise_changed(self, prefix: CausalPrefix, canvas: torch.Tensor, neighbours: int) -> torch.Tensor:
        """Logits (B, C, V) for the canvas with only the positions whose input changed since the last step, and
        ``neighbours`` positions each side of them, run through the model: they attend to the others' keys and
        values as the last step left them, and the others keep the last step's logits. An approximation (the
        others' context has changed too), cheaper by the share of positions left out (as Fast-dLLM's and
        dKV-Cache's reuse of a canvas's keys and values)."""
        state = prefix.canvas
        if state is None:
            return self.denoise(prefix, canvas, None)
        inputs = torch.cat([prefix.last[:, None], canvas[:, :-1]], dim=-1)
        moved = (inputs != state.inputs).any(dim=0)  # slots whose input changed in any row
        near = moved.clone()
        for shift in range(1, neighbours + 1):  # and their neighbours, whose context changed most
            near[shift:] |= moved[:-shift]
            near[:-shift] |= moved[shift:]
        redo = near.nonzero().squeeze(-1)
        if redo.numel() == 0:
            return state.logits
        b, c, k = inputs.shape[0], self.canvas_length, redo.numel()
        cache = prefix.cache
        for index in range(len(cache.layers)):
            cache.update(state.keys[index], state.values[index], index)  # the canvas as the last step left it
        stale = torch.ones(c, dtype=torch.bool, device=inputs.device)
        stale[redo] = False  # a recomputed slot is read from its new keys and values, appended after the canvas
        mask = torch.cat(
            [
                prefix.keys[:, None, :].expand(b, k, -1),
                stale[None, None, :].expand(b, k, c),
                torch.ones((b, k, k), dtype=torch.bool, device=inputs.device),
            ],
            dim=-1,
        )[:, None]
        fresh = self.model(
            input_ids=inputs[:, redo],
            attention_mask=mask,
            position_ids=prefix.position[:, None] + redo[None],
            cache=cache,
        ).logits.float()
        keys, values = [], []
        for index, layer in enumerate(cache.layers):
            keys.append(state.keys[index].clone())
            keys[-1][:, :, redo] = layer.keys[:, :, -k:]
            values.append(state.values[index].clone())
            values[-1][:, :, redo] = layer.values[:, :, -k:]
        cache.crop(-(c + k))  # the step reads the cache; what it appended goes
        logits = state.logits.clone()
        logits[:, redo] = fresh
        prefix.canvas = CanvasState(inputs, keys, values, logits)
        return logits

    def narrow(self, prefix: CausalPrefix, rows: torch.Tensor) -> CausalPrefix:
        state = prefix.canvas
        if state is not None:
            keys, values = [k[rows] for k in state.keys], [v[rows] for v in state.values]
            state = CanvasState(state.inputs[rows], keys, values, state.logits[rows])
        cache = cache_rows(prefix.cache, rows)
        return CausalPrefix(cache, prefix.keys[rows], prefix.last[rows], prefix.position[rows], state)

    def commit(self, prefix: CausalPrefix, canvas: torch.Tensor) -> None:
        inputs = torch.cat([prefix.last[:, None], canvas[:, :-1]], dim=-1)
        self._forward(prefix, inputs, both_ways=False, logits=False)
        ones = torch.ones(canvas.shape, dtype=torch.bool, device=canvas.device)
        prefix.keys = torch.cat([prefix.keys, ones], dim=-1)
        prefix.last = canvas[:, -1]
        prefix.position = prefix.position + self.canvas_length
        prefix.canvas = None

    # -- the autoregressive baseline: the same weights, one token at a time ----------------------------------------

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config)

    def next_token_logits(self, input_ids: torch.Tensor, cache: DynamicCache) -> torch.Tensor:
        """Logits (B, V) for the token after ``input_ids`` (B, T), which are appended to ``cache``."""
        return self.model(input_ids=input_ids, cache=cache, logits_to_keep=1).logits[:, -1].float()
