"""A GNN link predictor for the knowledge graph (trainer kind `link_prediction`).

Data (`train-data`): the graph stage's edges split by fixgraph.training.edges (held-out pairs stratified
by relation, type-compatible filtered negatives for validation and test), and one row per node with its
type and the vector of its name under `node_embedder` (MiniLM): a DatasetDict `edges` (train /
validation / test) and a Dataset `nodes`.

Model: node features (name vector + one-hot type) -> linear -> `layers` GraphSAGE (or R-GCN) layers of
PyTorch Geometric over the undirected training graph -> DistMult decoder, score(h, r, t) =
sum(z_h * w_r * z_t). Each training step holds out its batch of supervision edges from the message
graph (a model that sees an edge while predicting it learns to read adjacency, not to predict it) and
scores each against `train_negatives` random tails of the true tail's type (binary cross-entropy).
`encoder: mlp` drops message passing: the ablation that shows what the graph adds over the names.
`name_skip` adds the cosine of the two name vectors to the decoder's score, weighted per relation (a
skip connection around the encoder for the signal the strongest baseline uses alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from fixgraph.io import sha256_file
from fixgraph.training.base import Trainer
from fixgraph.training.data import TRAIN, VALIDATION, settings_from
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import FitResult, Tracking

ENCODERS = ("sage", "rgcn", "mlp")


@dataclass(frozen=True)
class EdgeData:
    """`data:` of the link-prediction trainer."""

    graph_dir: str
    test_fraction: float = 0.1
    val_fraction: float = 0.05
    min_relation_edges: int = 10
    negatives: int = 100
    seed: int = 0


@TRAINERS.register("link_prediction")
class LinkPredictionTrainer(Trainer):
    kind = "link_prediction"
    code_modules = ("fixgraph.training.edges", "fixgraph.training.nets.link_prediction")

    def __init__(
        self,
        name: str,
        data_dir: str,
        output: str,
        node_embedder: Mapping[str, Any],
        data: Mapping[str, Any] | None = None,
        fit: Mapping[str, Any] | None = None,
        encoder: str = "sage",
        hidden: int = 64,
        layers: int = 2,
        dropout: float = 0.1,
        learning_rate: float = 0.01,
        batch_edges: int = 512,
        train_negatives: int = 5,
        name_skip: bool = True,
        embedding_cache: str | None = None,
    ) -> None:
        super().__init__(name, data_dir, output, data, fit)
        self.data = settings_from(EdgeData, data, f"trainer {name}: data")
        if encoder not in ENCODERS:
            raise ValueError(f"trainer {name}: unknown encoder {encoder!r}; valid: {', '.join(ENCODERS)}")
        self.node_embedder = dict(node_embedder)
        self.encoder, self.hidden, self.layers, self.dropout = encoder, hidden, layers, dropout
        self.learning_rate, self.batch_edges, self.train_negatives = learning_rate, batch_edges, train_negatives
        self.name_skip, self.embedding_cache = name_skip, embedding_cache

    def model_config(self) -> dict[str, Any]:
        return {
            "node_embedder": self.node_embedder,
            "encoder": self.encoder,
            "hidden": self.hidden,
            "layers": self.layers,
            "dropout": self.dropout,
            "learning_rate": self.learning_rate,
            "batch_edges": self.batch_edges,
            "train_negatives": self.train_negatives,
            "name_skip": self.name_skip,
        }

    def prepare(self, cfg: DictConfig) -> None:
        from fixgraph.pipeline.graph import build

        build(cfg, track=False)

    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        folder = Path(self.data.graph_dir)
        from fixgraph.embedders.encoders import build_embedder

        return {
            "edges": sha256_file(folder / "edges.parquet"),
            "nodes": sha256_file(folder / "nodes.parquet"),
            "node_embedder": build_embedder(self.node_embedder).identity(),
        }

    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        import datasets
        import pandas as pd

        from fixgraph.embedders.encoders import EmbeddingCache, build_embedder
        from fixgraph.kg.store import GraphStore
        from fixgraph.training.edges import sample_negatives, split_edges

        datasets.disable_progress_bars()
        d = self.data
        store = GraphStore.read(Path(d.graph_dir))
        split = split_edges(store.edges, d.test_fraction, d.val_fraction, d.min_relation_edges, d.seed)
        node_types = dict(zip(store.nodes["node_id"], store.nodes["type"], strict=True))
        embedder = build_embedder(self.node_embedder)
        names = [str(n) for n in store.nodes["name"]]
        cache = EmbeddingCache(Path(self.embedding_cache)) if self.embedding_cache else None
        vectors = cache.embed(embedder, names) if cache else embedder.embed_documents(names)
        unrankable: dict[str, int] = {}
        parts = {TRAIN: split.train.assign(negatives=pd.Series([[] for _ in range(len(split.train))], dtype=object))}
        for offset, (part, frame) in enumerate(((VALIDATION, split.validation), ("test", split.test)), start=1):
            negatives = sample_negatives(frame, store.edges, node_types, d.negatives, d.seed + offset)
            frame = frame.assign(negatives=pd.Series(negatives, index=frame.index, dtype=object))
            # an edge whose tail type has no other node cannot be ranked against anything: not scored
            unrankable[part] = int(sum(not n for n in negatives))
            parts[part] = frame[[bool(n) for n in negatives]]
        edges = datasets.DatasetDict(
            {k: datasets.Dataset.from_pandas(v, preserve_index=False) for k, v in parts.items()}
        )
        edges.save_to_disk(str(out / "edges"))
        nodes = datasets.Dataset.from_dict(
            {
                "node_id": [str(n) for n in store.nodes["node_id"]],
                "type": [str(t) for t in store.nodes["type"]],
                "name": names,
                "vector": np.asarray(vectors, dtype=np.float32).tolist(),
            }
        )
        nodes.save_to_disk(str(out / "nodes"))
        return {
            "nodes": len(nodes),
            "splits": {k: len(v) for k, v in parts.items()},
            "unrankable_held_out": unrankable,
            "node_embedder": embedder.identity(),
        }

    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        import torch
        from torch.utils.data import DataLoader

        from fixgraph.training.fit import fit
        from fixgraph.training.nets.link_prediction import (
            GraphTensors,
            LinkPredictionModule,
            LinkPredictor,
            save_predictor,
        )

        torch.manual_seed(self.fit_settings.seed)  # initial weights
        graph, edges = GraphTensors.from_data(data)
        model = LinkPredictor(
            graph.x.shape[1],
            len(graph.relations),
            self.hidden,
            self.layers,
            self.dropout,
            self.encoder,
            graph.name_dim if self.name_skip else 0,
        )
        module = LinkPredictionModule(model, graph, edges[VALIDATION], self.learning_rate, self.train_negatives)
        generator = torch.Generator().manual_seed(self.fit_settings.seed)
        edges_index: Any = torch.arange(len(graph.train[0]))  # a batch: indices of supervision edges
        train: DataLoader[Any] = DataLoader(edges_index, self.batch_edges, shuffle=True, generator=generator)
        one: Any = [0]
        validation: DataLoader[Any] = DataLoader(one, batch_size=1)  # one step: every validation edge at once
        result: FitResult = fit(module, train, validation, self.fit_settings, work_dir, tracking)
        save_predictor(module.model, graph, self.model_config(), out)
        return {**result.summary(), "weights_sha256": {"model.pt": sha256_file(out / "model.pt")}}
