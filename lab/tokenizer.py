"""Byte-level BPE tokenizers for genui checkpoints, trained with the `tokenizers` library."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from engine.config import SPECIAL_TOKENS


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE whose first ids are engine.config.SPECIAL_TOKENS (so ids match every genui config)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        additional_special_tokens=["<response>"],
        clean_up_tokenization_spaces=False,
    )


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast.from_pretrained(str(path))
