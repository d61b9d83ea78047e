"""Fine-tune a sentence embedder (MiniLM, mpnet) on corpus-derived pairs (trainer kind `bi_encoder`).

Pairs (query -> chunk) come from the corpus alone: page titles, summaries and section headings
(training/pairs.py), and, with `data.qa_pairs`, the questions the local LLM wrote per chunk
(`fixgraph corpus-qa`, decontaminated against the benchmark). Each pair gets `negatives` hard
negatives: BM25's best chunks for the query from OTHER pages (random other-page chunks when BM25 finds
too few).
With the `dev_question` kind, labelled questions of OTHER corpora join them (training/question_pairs.py:
`data.questions` parts, hard negatives from `data.negative_system`'s ranking); the corpus being trained
for never contributes its own questions.

Loss: InfoNCE over the batch (MultipleNegativesRanking with hard negatives): each query's positive
against every positive and hard negative in the batch, cosine x `scale`. With `mask: page`, candidates
from the query's own page are masked out (except its positive): a title query is about every chunk of its
page, and two queries of one page in a batch would otherwise push their page's chunks apart. With `mask:
question` only the other gold chunks of the same question are: a real question is about its gold chunks,
and the rest of the page is a fair negative.

The model is saved as a sentence-transformers folder; `embedder=minilm_corpus` (or `mpnet_corpus`)
loads it, so `retriever=dense_minilm_corpus` evaluates it like any embedder.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.io import sha256_file
from fixgraph.training.base import Trainer
from fixgraph.training.data import TRAIN, VALIDATION, load_splits, save_splits, settings_from, split_rows
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import FitResult, Tracking

PAIR_KINDS = ("title", "summary", "heading", "llm_question", "dev_question")
MASKS = ("page", "question")


@dataclass(frozen=True)
class PairData:
    """`data:` of a bi-encoder trainer."""

    query_kinds: Sequence[str] = ("title", "summary", "heading", "llm_question")
    qa_pairs: str | None = None  # qa.jsonl of `fixgraph corpus-qa`; needed for llm_question
    negatives: int = 1
    negative_pool: int = 10
    max_pairs: int = 0  # 0: all
    validation_fraction: float = 0.1
    seed: int = 0
    bm25: Mapping[str, Any] = field(default_factory=lambda: {"name": "bm25", "k1": 0.9, "b": 0.4})
    questions: Sequence[str] = ()  # dev_question: `split:corpus` parts
    hold_out_corpus: bool = True  # dev_question: drop the parts on the corpus trained for (honest dev figures)
    negative_system: str = "link_expansion_blocks"  # dev_question: whose top chunks are the hard negatives

    def corpus_kinds(self) -> list[str]:
        return [k for k in self.query_kinds if k != "dev_question"]


def pair_triples(documents: Sequence[Any], chunks: Sequence[Any], data: PairData) -> list[tuple[str, str, str]]:
    """(query, kind, positive chunk id) for the configured kinds, deduplicated and in a fixed order."""
    from fixgraph.training.corpus_qa import read_pairs
    from fixgraph.training.pairs import corpus_queries

    unknown = set(data.query_kinds) - set(PAIR_KINDS)
    if unknown:
        raise ValueError(f"trainer: unknown query kinds {sorted(unknown)}; valid: {', '.join(PAIR_KINDS)}")
    triples = corpus_queries(documents, chunks, [k for k in data.corpus_kinds() if k != "llm_question"])
    if "llm_question" in data.query_kinds:
        if not data.qa_pairs:
            raise ValueError("trainer: query kind llm_question needs data.qa_pairs (the corpus-qa output)")
        known = {c.id for c in chunks}
        triples += [
            (p.question, "llm_question", p.chunk_id) for p in read_pairs(Path(data.qa_pairs)) if p.chunk_id in known
        ]
    return sorted(set(triples))


def build_pairs(documents: Sequence[Any], chunks: Sequence[Any], data: PairData) -> list[dict[str, Any]]:
    from fixgraph.retrieval.bm25 import BM25Retriever

    rng = random.Random(data.seed)
    triples = pair_triples(documents, chunks, data)
    rng.shuffle(triples)
    if data.max_pairs > 0:
        triples = triples[: data.max_pairs]
    by_id = {c.id: c for c in chunks}
    retriever = BM25Retriever(**{**dict(data.bm25), "backend": "bm25s"})
    with tempfile.TemporaryDirectory() as tmp:
        retriever.build(chunks, Path(tmp))
    rows = []
    for query, kind, positive in triples:
        doc = by_id[positive].doc_id
        pool = [h.chunk_id for h in retriever.search(query, data.negative_pool + 50) if by_id[h.chunk_id].doc_id != doc]
        pool = pool[: data.negative_pool]
        if len(pool) < data.negatives:  # BM25 finds too few: random chunks of other pages fill in
            others = [c.id for c in chunks if c.doc_id != doc and c.id not in pool]
            if len(pool) + len(others) < data.negatives:
                continue
            pool += rng.sample(others, data.negatives - len(pool))
        negatives = rng.sample(pool, data.negatives)
        rows.append(
            {
                "query": query,
                "query_kind": kind,
                "doc_id": doc,
                "positive": positive,
                "positive_text": by_id[positive].index_text(),
                "negatives": negatives,
                "negative_texts": [by_id[n].index_text() for n in negatives],
                "negative_docs": [by_id[n].doc_id for n in negatives],
            }
        )
    return rows


def freeze_bottom(model: Any, layers: int) -> None:
    """Freeze the token embeddings and the first `layers` transformer layers (BERT / MPNet layout): they
    keep the pretrained features, and the backward pass stops above them (a large saving on a CPU)."""
    network = model[0].auto_model
    blocks = network.encoder.layer
    if not 0 < layers <= len(blocks):
        raise ValueError(f"trainer: freeze_layers={layers} but the model has {len(blocks)} layers")
    for module in [network.embeddings, *blocks[:layers]]:
        module.requires_grad_(False)


def checkpoint_layers(model: Any) -> None:
    """Keep only each transformer layer's input through the forward pass and recompute the layer in the
    backward pass (BERT / MPNet layout). Training bi_encoder_mpnet_dev (batches of 16 questions with 48
    candidates of up to 256 tokens) peaked at 21.8 GB without it and 10.2 GB with it, about 40% slower.
    The recomputation replays the same dropout masks (torch restores the RNG state), so the gradients, and
    the weights, do not change; a step costs one more forward pass."""
    import functools

    from torch.utils.checkpoint import checkpoint

    for block in model[0].auto_model.encoder.layer:
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)


@TRAINERS.register("bi_encoder")
class BiEncoderTrainer(Trainer):
    kind = "bi_encoder"
    code_modules = (
        "fixgraph.training.pairs",
        "fixgraph.training.corpus_qa",
        "fixgraph.training.question_pairs",
        "fixgraph.training.nets.bi_encoder",
    )

    def __init__(
        self,
        name: str,
        data_dir: str,
        output: str,
        base: Mapping[str, Any],
        data: Mapping[str, Any] | None = None,
        fit: Mapping[str, Any] | None = None,
        batch_size: int = 32,
        learning_rate: float = 2e-5,
        warmup_ratio: float = 0.1,
        scale: float = 20.0,
        max_seq_length: int = 256,
        freeze_layers: int = 0,
        mask: str = "page",
        gradient_checkpointing: bool = False,
    ) -> None:
        super().__init__(name, data_dir, output, data, fit)
        self.data = settings_from(PairData, data, f"trainer {name}: data")
        if str(base.get("kind")) != "sentence_transformers":
            raise ValueError(f"trainer {name}: base must be a sentence_transformers embedder, got {base.get('kind')!r}")
        if batch_size < 2:
            raise ValueError(f"trainer {name}: batch_size must be >= 2 (in-batch negatives), got {batch_size}")
        if mask not in MASKS:
            raise ValueError(f"trainer {name}: mask must be one of {', '.join(MASKS)}, got {mask!r}")
        self.base, self.mask = dict(base), mask
        self.batch_size, self.learning_rate, self.warmup_ratio = batch_size, learning_rate, warmup_ratio
        self.scale, self.max_seq_length, self.freeze_layers = scale, max_seq_length, freeze_layers
        self.gradient_checkpointing = gradient_checkpointing  # memory, not the recipe: not in model_config

    def model_config(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "scale": self.scale,
            "max_seq_length": self.max_seq_length,
            "freeze_layers": self.freeze_layers,
            "mask": self.mask,
        }

    def prepare(self, cfg: DictConfig) -> None:
        if "llm_question" in self.data.query_kinds and self.data.qa_pairs:
            from fixgraph.training.stages import corpus_qa

            corpus_qa(cfg)

    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        from fixgraph.pipeline.layout import Layout
        from fixgraph.training.question_pairs import caller_overrides, part_inputs

        layout = Layout.from_config(cfg)
        inputs = {"chunks": sha256_file(layout.chunks), "documents": sha256_file(layout.documents)}
        if "llm_question" in self.data.query_kinds and self.data.qa_pairs:
            inputs["qa_pairs"] = sha256_file(Path(self.data.qa_pairs))
        if "dev_question" in self.data.query_kinds:
            parts = self.question_parts(cfg)
            inputs |= part_inputs(parts, self.data.negative_system, caller_overrides(cfg))
        return inputs

    def question_parts(self, cfg: DictConfig) -> list[Any]:
        from fixgraph.training.question_pairs import question_parts

        return question_parts(self.data.questions, str(cfg.corpus.name), self.data.hold_out_corpus)

    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        from fixgraph.pipeline.stages import load_chunks, load_documents
        from fixgraph.training.question_pairs import caller_overrides, question_rows

        data = self.data
        rows = build_pairs(load_documents(cfg), load_chunks(cfg), data) if data.corpus_kinds() else []
        if "dev_question" in data.query_kinds:
            parts = self.question_parts(cfg)
            rows += question_rows(
                parts, data.negative_system, data.negatives, data.negative_pool, data.seed, caller_overrides(cfg)
            )
        if not rows:
            raise ValueError(f"trainer {self.name}: no training pairs (is the corpus empty?)")
        counts = save_splits(
            split_rows(rows, "doc_id", self.data.validation_fraction, f"{self.name}|{self.data.seed}"), out
        )
        kinds: dict[str, int] = {}
        for r in rows:
            kinds[r["query_kind"]] = kinds.get(r["query_kind"], 0) + 1
        return {"pairs": len(rows), "splits": counts, "query_kinds": kinds}

    def base_path(self) -> Path:
        from fixgraph.embedders.encoders import build_embedder

        embedder = build_embedder(self.base)
        path: Path = embedder.model_path()  # type: ignore[attr-defined]
        return path

    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        import torch
        from sentence_transformers import SentenceTransformer
        from torch.utils.data import DataLoader

        from fixgraph.embedders.encoders import build_embedder
        from fixgraph.training.fit import fit
        from fixgraph.training.nets.bi_encoder import BiEncoderModule, PairCollator

        splits = load_splits(data)
        # a fresh copy: the embedder registry caches loaded models, and this one is about to change
        model = SentenceTransformer(str(self.base_path()), device="cpu")
        model.max_seq_length = self.max_seq_length
        if self.freeze_layers:
            freeze_bottom(model, self.freeze_layers)
        if self.gradient_checkpointing:
            checkpoint_layers(model)
        collate = PairCollator(
            str(self.base.get("query_prefix", "")), str(self.base.get("document_prefix", "")), self.mask
        )
        generator = torch.Generator().manual_seed(self.fit_settings.seed)
        train = DataLoader(splits[TRAIN], self.batch_size, shuffle=True, collate_fn=collate, generator=generator)
        validation = DataLoader(splits[VALIDATION], self.batch_size, collate_fn=collate)
        module = BiEncoderModule(model, self.learning_rate, self.warmup_ratio, self.scale)
        result: FitResult = fit(module, train, validation, self.fit_settings, work_dir, tracking)
        module.model.eval()
        module.model.save(str(out))
        return {
            **result.summary(),
            "base_model": build_embedder(self.base).weights_identity(),  # type: ignore[attr-defined]
            "weights_sha256": {w.name: sha256_file(w) for w in sorted(out.glob("*.safetensors"))},
        }
