"""Model shapes: DiffusionGemma configs sized for genui, from a test-sized toy to the shipped CPU model."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import DiffusionGemmaConfig, DiffusionGemmaTextConfig, Gemma4VisionConfig

# Special tokens every genui tokenizer reserves, in this order, so ids are the same across checkpoints.
SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<boi>", "<eoi>", "<image>", "<response>")
PAD_ID, EOS_ID, BOS_ID, BOI_ID, EOI_ID, IMAGE_ID, RESPONSE_ID = range(len(SPECIAL_TOKENS))


@dataclass(frozen=True, slots=True)
class ModelShape:
    vocab_size: int = 4096
    hidden_size: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 512  # dense MLP that runs beside the experts
    experts: int = 4  # the text config is always mixture-of-experts
    top_k_experts: int = 2
    expert_size: int = 256
    canvas_length: int = 256
    max_positions: int = 2048
    # Every layer keeps the whole sequence: with a smaller window the sliding layers silently drop the
    # earliest prefix positions when all canvases are trained in one pass.
    sliding_window: int = 2048


TINY = ModelShape(
    vocab_size=512,
    hidden_size=64,
    layers=2,
    heads=2,
    kv_heads=1,
    head_dim=32,
    intermediate_size=128,
    experts=2,
    top_k_experts=1,
    expert_size=64,
    canvas_length=32,
    max_positions=512,
    sliding_window=512,
)
SMALL = ModelShape()


def tiny_vision_config() -> Gemma4VisionConfig:
    """DiffusionGemma's encoder always builds a vision tower; genui's text-only models give it a token-sized one
    (the default tower alone would add ~167M parameters)."""
    return Gemma4VisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=16,
    )


def make_config(shape: ModelShape = SMALL) -> DiffusionGemmaConfig:
    """A DiffusionGemma config of the given shape, with a token-sized vision tower (the encoder always builds one)."""
    layer_types = ["sliding_attention"] * (shape.layers - 1) + ["full_attention"]
    text = DiffusionGemmaTextConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        global_head_dim=shape.head_dim,
        sliding_window=shape.sliding_window,
        max_position_embeddings=shape.max_positions,
        num_experts=shape.experts,
        top_k_experts=shape.top_k_experts,
        moe_intermediate_size=shape.expert_size,
        layer_types=layer_types,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
    )
    vision = tiny_vision_config()
    return DiffusionGemmaConfig(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        boi_token_id=BOI_ID,
        eoi_token_id=EOI_ID,
        image_token_id=IMAGE_ID,
        canvas_length=shape.canvas_length,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
    )
