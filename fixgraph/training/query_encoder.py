"""Fine-tune a sentence embedder's query side only, against its own frozen document index (trainer kind
`query_encoder`).

The bi-encoder trainer changes the whole model, so every chunk and line must be embedded again before it
ranks anything (about 45 min for the two corpora on 2 cores, after about 55 min of training). Here the
documents keep the vectors the `index` retriever already has (cached by the stock embedder's identity), and
only a copy of the model that embeds questions learns: each labelled dev question (`data.questions`,
`split:corpus` parts, as the bi-encoder's `dev_question` kind) is scored against every row of its corpus's
index, scored as the retriever scores (own vector and best line, `block_weight`), and the loss is the
softmax cross-entropy of its gold chunks against all the others: every chunk of the corpus is a negative,
with no hard-negative mining. Training embeds short questions only: minutes on 2 cores.

The model is saved as a sentence-transformers folder whose card names the document vectors it was trained
against (`document_embedder`: the index embedder's identity); an embedder with `query_model:` set to it
(`embedder=mpnet_dev_queries`) embeds queries with it and refuses a model trained for other vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError
from fixgraph.io import sha256_file
from fixgraph.training.base import Trainer
from fixgraph.training.data import TRAIN, VALIDATION, load_splits, save_splits, settings_from, split_rows
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import FitResult, Tracking


@dataclass(frozen=True)
class QuestionData:
    """`data:` of a query-encoder trainer."""

    questions: Sequence[str] = ()  # `split:corpus` parts of labelled dev questions
    hold_out_corpus: bool = False  # drop the parts on the corpus trained for (one model per corpus)
    validation_fraction: float = 0.1
    seed: int = 0


@TRAINERS.register("query_encoder")
class QueryEncoderTrainer(Trainer):
    kind = "query_encoder"
    # the loss scores rows as the dense retriever does, and the rows are its own
    code_modules = (
        "fixgraph.training.question_pairs",
        "fixgraph.training.nets.query_encoder",
        "fixgraph.training.nets.bi_encoder",
        "fixgraph.retrieval.dense",
    )

    def __init__(
        self,
        name: str,
        data_dir: str,
        output: str,
        index: Mapping[str, Any],
        data: Mapping[str, Any] | None = None,
        fit: Mapping[str, Any] | None = None,
        batch_size: int = 16,
        learning_rate: float = 2e-5,
        warmup_ratio: float = 0.1,
        scale: float = 20.0,
        max_query_length: int = 128,
    ) -> None:
        super().__init__(name, data_dir, output, data, fit)
        self.data = settings_from(QuestionData, data, f"trainer {name}: data")
        if str(index.get("kind")) != "dense":
            raise ConfigError(f"trainer {name}: index must be a dense retriever, got kind {index.get('kind')!r}")
        if str(dict(index["embedder"]).get("kind")) != "sentence_transformers":
            raise ConfigError(f"trainer {name}: index's embedder must be a sentence_transformers embedder")
        if dict(index["embedder"]).get("query_model"):
            raise ConfigError(f"trainer {name}: index's embedder already has a query_model; give the stock one")
        self.index = dict(index)
        self.batch_size, self.learning_rate, self.warmup_ratio = batch_size, learning_rate, warmup_ratio
        self.scale, self.max_query_length = scale, max_query_length

    def model_config(self) -> dict[str, Any]:
        # the index's whole config: other document vectors or block weight, another model
        return {
            "index": self.index,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "scale": self.scale,
            "max_query_length": self.max_query_length,
        }

    def question_parts(self, cfg: DictConfig) -> list[Any]:
        from fixgraph.training.question_pairs import question_parts

        return question_parts(self.data.questions, str(cfg.corpus.name), self.data.hold_out_corpus)

    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        from fixgraph.training.question_pairs import caller_overrides, part_inputs

        return part_inputs(self.question_parts(cfg), "bm25", caller_overrides(cfg))

    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        from fixgraph.evaluation.gold import map_gold
        from fixgraph.evaluation.parts import part_config
        from fixgraph.evaluation.splits import resolve_questions
        from fixgraph.pipeline.stages import chunk, load_chunks, load_documents
        from fixgraph.training.question_pairs import part_overrides

        rows = []
        for part in self.question_parts(cfg):
            part_cfg = part_config(part, "bm25", part_overrides(cfg, part.corpus))
            questions = resolve_questions(part_cfg, part.questions, None).questions  # refuses locked ones
            chunk(part_cfg)
            chunks = load_chunks(part_cfg)
            doc_of = {c.id: c.doc_id for c in chunks}
            mapping = map_gold(questions, load_documents(part_cfg), chunks)
            for q in sorted(questions, key=lambda q: q.qid):
                gold = [sorted(i.chunk_ids) for i in mapping.for_question(q.qid) if i.chunk_ids]
                if gold:  # unanswerable, or its gold not in this corpus version
                    page = f"{part.corpus}/{doc_of[gold[0][0]]}"
                    rows.append({"query": q.question, "corpus": part.corpus, "page": page, "gold": gold})
        if not rows:
            raise ConfigError(f"trainer {self.name}: no question with gold in {', '.join(self.data.questions)}")
        # validation questions are whole pages' questions: two questions on one page never straddle the split
        splits = split_rows(rows, "page", self.data.validation_fraction, f"{self.name}|{self.data.seed}")
        return {"questions": len(rows), "splits": save_splits(splits, out)}

    def frozen_indexes(self, cfg: DictConfig, corpora: Sequence[str]) -> dict[str, Any]:
        """Each corpus's rows from the `index` retriever (its embedding cache: no document is embedded twice)."""
        from fixgraph.config import compose
        from fixgraph.pipeline.stages import chunk, load_chunks
        from fixgraph.retrieval.base import build_retriever
        from fixgraph.retrieval.dense import DenseRetriever
        from fixgraph.training.nets.query_encoder import FrozenIndex
        from fixgraph.training.question_pairs import part_overrides

        indexes = {}
        for corpus in corpora:
            corpus_cfg = compose([*part_overrides(cfg, corpus), f"corpus={corpus}"])
            chunk(corpus_cfg)
            chunks = load_chunks(corpus_cfg)
            retriever = build_retriever(self.index)
            assert isinstance(retriever, DenseRetriever)
            matrix, owner, is_line = retriever.vectors(chunks)
            indexes[corpus] = FrozenIndex(matrix, owner, is_line, [c.id for c in chunks], retriever.block_weight)
        return indexes

    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        import torch
        from sentence_transformers import SentenceTransformer
        from torch.utils.data import DataLoader

        from fixgraph.embedders.encoders import build_embedder
        from fixgraph.training.fit import fit
        from fixgraph.training.nets.query_encoder import QueryEncoderModule, QuestionCollator

        splits = load_splits(data)
        corpora = sorted({r["corpus"] for s in splits.values() for r in s})
        indexes = self.frozen_indexes(cfg, corpora)
        documents = build_embedder(self.index["embedder"])
        # a fresh copy of the document model: the embedder registry caches loaded models
        model = SentenceTransformer(str(documents.model_path()), device="cpu")  # type: ignore[attr-defined]
        model.max_seq_length = self.max_query_length  # as the embedder truncates a query
        collate = QuestionCollator()
        generator = torch.Generator().manual_seed(self.fit_settings.seed)
        train = DataLoader(splits[TRAIN], self.batch_size, shuffle=True, collate_fn=collate, generator=generator)
        validation = DataLoader(splits[VALIDATION], self.batch_size, collate_fn=collate)
        prefix = str(self.index["embedder"].get("query_prefix") or "")  # e5's "query: ", mpnet's none
        module = QueryEncoderModule(model, indexes, self.learning_rate, self.warmup_ratio, self.scale, prefix)
        result: FitResult = fit(module, train, validation, self.fit_settings, work_dir, tracking)
        module.model.eval()
        module.model.save(str(out))
        return {
            **result.summary(),
            "document_embedder": documents.identity(),
            "base_model": documents.weights_identity(),  # type: ignore[attr-defined]
            "weights_sha256": {w.name: sha256_file(w) for w in sorted(out.glob("*.safetensors"))},
        }
