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

from collections.abc import Callable
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


def attention_windows(config: object) -> tuple[list[str], int | None]:
    """A causal LM's layer types as transformers names them (``full_attention``, ``sliding_attention``) and its
    sliding window (None: every layer reads the whole sequence). Mistral's config has a window and no types: every
    layer slides. Another kind (a chunked layer) is a ValueError: genui's masks say nothing of it."""
    text = config.get_text_config(decoder=True)  # type: ignore[attr-defined]
    window = getattr(text, "sliding_window", None)
    count = int(text.num_hidden_layers)
    types = list(getattr(text, "layer_types", None) or ["sliding_attention" if window else "full_attention"] * count)
    other = sorted(set(types) - {"full_attention", "sliding_attention"})
    if other:
        raise ValueError(f"its layers of type {', '.join(other)} are not ones genui can mask (full or sliding)")
    sliding = "sliding_attention" in types
    return types, int(window) if sliding and window else None


def read_masks(
    model: PreTrainedModel,
    mask: torch.Tensor,
    queries: torch.Tensor,
    keys: torch.Tensor,
    windows: tuple[list[str], int | None] | None = None,
) -> torch.Tensor | dict[str, torch.Tensor]:
    """A boolean ``mask`` (B, 1, Q, K), True where a query may read a key, as ``model``'s layers read it, given the
    positions of its queries (B, Q) and keys (B, K), and its ``attention_windows`` (found when not given):

    - where some layers slide, a key ``window`` positions or more before its query is left out of theirs
      (transformers' ``sliding_window_overlay``): of every layer's mask where all slide, else in a mapping of each
      layer type to its mask, which models that mix them read (Gemma2, Gemma3);
    - SDPA takes a boolean mask; transformers' eager attention (Gemma2's and Gemma3's default, for their
      soft-capping) adds the mask to the scores, so there it is 0 where a key is read and the dtype's lowest value
      where not (a boolean added as 0 or 1 masked nothing)."""
    types, window = windows or attention_windows(model.config)
    eager = getattr(model.config, "_attn_implementation", None) == "eager"

    def read(allowed: torch.Tensor) -> torch.Tensor:
        if not eager:
            return allowed
        lowest = torch.finfo(model.dtype).min
        return torch.zeros(allowed.shape, dtype=model.dtype, device=allowed.device).masked_fill(~allowed, lowest)

    if window is None:
        return read(mask)
    near = mask & ((queries[:, None, :, None] - keys[:, None, None, :]) < window)
    if "full_attention" not in types:
        return read(near)
    return {"full_attention": read(mask), "sliding_attention": read(near)}


class CausalDenoiser:
    """A transformers causal LM (with genui's adapter merged in) run in the layout above.

    Its KV cache keeps every position, in every layer: a step's inputs and what it appended are cropped off again,
    which transformers' sliding-window layers cannot do once past their window (they keep only its last tokens). A
    model with such layers gets their window in its masks instead (``_masks``), as transformers would apply it.
    """

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
        self.windows = attention_windows(config)
        self.window = self.windows[1]

    def _masks(
        self, mask: torch.Tensor, queries: torch.Tensor, keys: Callable[[], torch.Tensor]
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """read_masks, the keys' positions found only where a layer slides (a step of a model with none, the
        shipped one, reads no positions)."""
        return read_masks(self.model, mask, queries, queries if self.window is None else keys(), self.windows)

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
            "attention_mask": self._masks(
                mask, positions, lambda: torch.cat([_cached_positions(prefix), positions], -1)
            ),
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
        cache = DynamicCache()  # every layer keeps every position, a sliding one too (see the class)
        if t > 1:
            head = real[:, : t - 1]
            causal = torch.tril(torch.ones((t - 1, t - 1), dtype=torch.bool, device=input_ids.device))
            mask = causal[None] & head[:, None, :]
            mask |= torch.eye(t - 1, dtype=torch.bool, device=input_ids.device)[None]  # padding rows: no empty row
            self.model.model(
                input_ids=input_ids[:, :-1],
                attention_mask=self._masks(mask[:, None], positions[:, :-1], lambda: positions[:, :-1]),
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
        slots = prefix.position[:, None] + torch.arange(c, device=inputs.device)[None]  # the canvas's positions
        queries = slots[:, redo]
        fresh = self.model(
            input_ids=inputs[:, redo],
            attention_mask=self._masks(
                mask, queries, lambda: torch.cat([_cached_positions(prefix), slots, queries], -1)
            ),
            position_ids=queries,
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


def _cached_positions(prefix: CausalPrefix) -> torch.Tensor:
    """The positions (B, S) of the cache's slots: each row counts its real tokens from 0 (left padding, which no
    mask lets a query read, counts as 0)."""
    return (prefix.keys.long().cumsum(dim=-1) - 1).clamp(min=0)
