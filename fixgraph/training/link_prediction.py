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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from fixgraph.io import sha256_file, write_json
from fixgraph.training.base import TRAINERS, Trainer
from fixgraph.training.data import TRAIN, VALIDATION, settings_from
from fixgraph.training.fit import FitResult, FixgraphModule, Tracking, fit, warmup_then_linear

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


class LinkPredictor(torch.nn.Module):
    def __init__(
        self, in_dim: int, n_relations: int, hidden: int, layers: int, dropout: float, encoder: str, name_dim: int = 0
    ) -> None:
        super().__init__()
        from torch_geometric.nn import RGCNConv, SAGEConv

        if encoder not in ENCODERS:
            raise ValueError(f"link prediction: unknown encoder {encoder!r}; valid: {', '.join(ENCODERS)}")
        self.encoder, self.n_relations = encoder, n_relations
        self.input = torch.nn.Linear(in_dim, hidden)
        convs: list[torch.nn.Module] = []
        if encoder == "sage":
            convs = [SAGEConv(hidden, hidden) for _ in range(layers)]
        elif encoder == "rgcn":  # each relation in both directions
            convs = [
                RGCNConv(hidden, hidden, 2 * n_relations, num_bases=min(8, 2 * n_relations)) for _ in range(layers)
            ]
        else:
            convs = [torch.nn.Linear(hidden, hidden) for _ in range(layers)]
        self.convs = torch.nn.ModuleList(convs)
        self.dropout = torch.nn.Dropout(dropout)
        self.relations = torch.nn.Parameter(torch.ones(n_relations, hidden))
        # name_dim > 0: the decoder also sees the cosine of the two name vectors (the first name_dim
        # input features), weighted per relation: a skip connection around the encoder for the signal
        # the strongest baseline uses alone
        self.name_dim = name_dim
        self.name_weight = torch.nn.Parameter(torch.zeros(n_relations)) if name_dim else None
        self.names: torch.Tensor | None = None

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        if self.name_dim:
            self.names = torch.nn.functional.normalize(x[:, : self.name_dim], dim=-1)
        h = torch.relu(self.input(x))
        for i, conv in enumerate(self.convs):
            h = self.dropout(h)
            if self.encoder == "sage":
                h = conv(h, edge_index)
            elif self.encoder == "rgcn":
                h = conv(h, edge_index, edge_type)
            else:
                h = conv(h)
            if i < len(self.convs) - 1:
                h = torch.relu(h)
        return h

    def score(self, z: torch.Tensor, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        scores = (z[heads] * self.relations[relations] * z[tails]).sum(-1)
        if self.name_weight is not None and self.names is not None:
            scores = scores + self.name_weight[relations] * (self.names[heads] * self.names[tails]).sum(-1)
        return scores


def message_graph(
    heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor, n_relations: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions of every edge (reverse edges get relation + n_relations, for R-GCN)."""
    edge_index = torch.stack([torch.cat([heads, tails]), torch.cat([tails, heads])])
    edge_type = torch.cat([relations, relations + n_relations])
    return edge_index, edge_type


@dataclass
class GraphTensors:
    """The split as index tensors over the node and relation vocabularies of the data."""

    x: torch.Tensor
    name_dim: int  # the first name_dim columns of x are the name vector
    node_ids: list[str]
    relations: list[str]
    node_type: torch.Tensor  # type index per node
    train: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # heads, relations, tails
    by_type: list[torch.Tensor]  # node indices per type index

    @classmethod
    def from_data(cls, data: Path) -> tuple[GraphTensors, Any]:
        import datasets

        nodes = datasets.load_from_disk(str(data / "nodes"))
        edges = datasets.load_from_disk(str(data / "edges"))
        node_ids = list(nodes["node_id"])
        types = sorted(set(nodes["type"]))
        relations = sorted(
            set(edges[TRAIN]["relation"]) | set(edges[VALIDATION]["relation"]) | set(edges["test"]["relation"])
        )
        type_index = torch.tensor([types.index(t) for t in nodes["type"]])
        one_hot = torch.nn.functional.one_hot(type_index, len(types)).float()
        names = torch.tensor(np.asarray(nodes["vector"]), dtype=torch.float32)
        x = torch.cat([names, one_hot], dim=1)
        tensors = cls(
            x=x,
            name_dim=int(names.shape[1]),
            node_ids=node_ids,
            relations=relations,
            node_type=type_index,
            train=triple_tensors(edges[TRAIN], node_ids, relations),
            by_type=[torch.nonzero(type_index == i).flatten() for i in range(len(types))],
        )
        return tensors, edges


def triple_tensors(
    rows: Any, node_ids: Sequence[str], relations: Sequence[str]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    node = {n: i for i, n in enumerate(node_ids)}
    rel = {r: i for i, r in enumerate(relations)}
    return (
        torch.tensor([node[s] for s in rows["source"]], dtype=torch.long),
        torch.tensor([rel[r] for r in rows["relation"]], dtype=torch.long),
        torch.tensor([node[t] for t in rows["target"]], dtype=torch.long),
    )


class LinkPredictionModule(FixgraphModule):
    def __init__(
        self, model: LinkPredictor, graph: GraphTensors, validation: Any, learning_rate: float, train_negatives: int
    ) -> None:
        super().__init__()
        self.model, self.graph = model, graph
        self.learning_rate, self.train_negatives = learning_rate, train_negatives
        node = {n: i for i, n in enumerate(graph.node_ids)}
        self.val_triples = triple_tensors(validation, graph.node_ids, graph.relations)
        self.val_negatives, self.val_mask = padded([[node[n] for n in negs] for negs in validation["negatives"]])
        self.by_type_nodes = torch.cat(graph.by_type)
        self.type_size = torch.tensor([len(b) for b in graph.by_type])
        self.type_start = torch.cumsum(self.type_size, 0) - self.type_size

    def negative_tails(self, tails: torch.Tensor) -> torch.Tensor:
        """`train_negatives` random nodes of each tail's type (tails x negatives; global torch RNG,
        seeded by fit): a uniform draw scaled to the size of the type's block of `by_type_nodes`."""
        types = self.graph.node_type[tails]
        draws = torch.rand(len(tails), self.train_negatives)
        picks = self.type_start[types, None] + (draws * self.type_size[types, None]).long()
        return self.by_type_nodes[picks]

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> Any:
        heads, rels, tails = self.graph.train
        keep = torch.ones(len(heads), dtype=torch.bool)
        keep[batch] = False  # the supervision edges are not in the message graph of their own step
        edge_index, edge_type = message_graph(heads[keep], rels[keep], tails[keep], len(self.graph.relations))
        z = self.model.encode(self.graph.x, edge_index, edge_type)
        h, r, t = heads[batch], rels[batch], tails[batch]
        positive = self.model.score(z, h, r, t)
        negative_tails = self.negative_tails(t)
        negative = self.model.score(
            z,
            h.repeat_interleave(self.train_negatives),
            r.repeat_interleave(self.train_negatives),
            negative_tails.flatten(),
        )
        loss = bce(positive, negative)
        self.log("train_loss", loss, on_step=True, on_epoch=False, batch_size=len(batch))
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        heads, rels, tails = self.graph.train
        edge_index, edge_type = message_graph(heads, rels, tails, len(self.graph.relations))
        z = self.model.encode(self.graph.x, edge_index, edge_type)
        vh, vr, vt = self.val_triples
        positive = self.model.score(z, vh, vr, vt)
        k = self.val_negatives.shape[1]
        negative = self.model.score(
            z, vh.repeat_interleave(k), vr.repeat_interleave(k), self.val_negatives.flatten()
        ).view(-1, k)
        greater = ((negative > positive[:, None]) & self.val_mask).sum(1).float()
        equal = ((negative == positive[:, None]) & self.val_mask).sum(1).float()
        loss = bce(positive, negative[self.val_mask])
        self.log("val_loss", loss, on_epoch=True, batch_size=len(vh))
        self.log("val_mrr", (1.0 / (1.0 + greater + 0.5 * equal)).mean(), on_epoch=True, batch_size=len(vh))

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.learning_rate, weight_decay=1e-4)
        return warmup_then_linear(optimizer, 0.05, int(self.trainer.estimated_stepping_batches))


def padded(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged index lists as a (rows x longest) tensor, padded with index 0, and the mask of real entries."""
    width = max((len(r) for r in rows), default=0)
    values = torch.zeros(len(rows), max(width, 1), dtype=torch.long)
    mask = torch.zeros(len(rows), max(width, 1), dtype=torch.bool)
    for i, row in enumerate(rows):
        values[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
    return values, mask


def bce(positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Mean BCE of the positives (label 1) plus mean BCE of the negatives (label 0)."""
    f = torch.nn.functional.binary_cross_entropy_with_logits
    return f(positive, torch.ones_like(positive)) + f(negative, torch.zeros_like(negative))


@TRAINERS.register("link_prediction")
class LinkPredictionTrainer(Trainer):
    kind = "link_prediction"
    code_modules = ("fixgraph.training.edges",)

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
        from torch.utils.data import DataLoader

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


def save_predictor(model: LinkPredictor, graph: GraphTensors, config: Mapping[str, Any], out: Path) -> None:
    torch.save(model.state_dict(), out / "model.pt")
    write_json(
        out / "model.json",
        {
            "config": dict(config),
            "in_dim": int(graph.x.shape[1]),
            "name_dim": int(graph.name_dim) if config.get("name_skip") else 0,
            "relations": graph.relations,
        },
    )


def load_predictor(folder: Path) -> tuple[LinkPredictor, list[str]]:
    """The saved model (eval mode) and its relation vocabulary."""
    if not (folder / "model.pt").exists():
        raise FileNotFoundError(f"{folder}: no link predictor; train it with `fixgraph train --trainer gnn_linkpred`")
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    c = meta["config"]
    model = LinkPredictor(
        int(meta["in_dim"]),
        len(meta["relations"]),
        c["hidden"],
        c["layers"],
        c["dropout"],
        c["encoder"],
        int(meta["name_dim"]),
    )
    model.load_state_dict(torch.load(folder / "model.pt", map_location="cpu", weights_only=True))
    model.eval()
    return model, list(meta["relations"])
