"""Helpers for training tests: tiny random transformers (built offline in a second) and toy datasets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_bert(folder: Path, words: Sequence[str], num_labels: int | None = 1, seed: int = 0) -> Path:
    """A 2-layer, 32-wide random BERT with a word-level vocabulary: a classifier (num_labels) or a bare
    encoder (num_labels None), saved with its tokenizer."""
    transformers = pytest.importorskip("transformers")
    import torch

    folder.mkdir(parents=True)
    # a vocab dict: transformers 5 ignores `vocab_file` here and would map every word to [UNK]
    vocab = {w: i for i, w in enumerate([*SPECIAL, *words])}
    tokenizer = transformers.BertTokenizerFast(vocab=vocab)
    assert tokenizer(words[0])["input_ids"] == [2, 5, 3]
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=num_labels or 2,
    )
    model_class = transformers.BertForSequenceClassification if num_labels else transformers.BertModel
    model_class(config).save_pretrained(folder)
    return folder


def tiny_sentence_transformer(folder: Path, words: Sequence[str]) -> Path:
    """tiny_bert + mean pooling + normalisation as a sentence-transformers folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer

    bert = tiny_bert(folder.parent / f"{folder.name}_bert", words, num_labels=None)
    encoder = Transformer(str(bert), max_seq_length=32)
    model = SentenceTransformer(modules=[encoder, Pooling(32, "mean"), Normalize()], device="cpu")
    model.save(str(folder))
    return folder


def save_rows(folder: Path, train: list[dict[str, Any]], validation: list[dict[str, Any]]) -> Path:
    from fixgraph.training.data import save_splits

    save_splits({"train": train, "validation": validation}, folder)
    return folder
