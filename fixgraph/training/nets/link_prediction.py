"""The torch side of the link-prediction trainer (training/link_prediction.py): the GNN (GraphSAGE /
R-GCN / MLP encoder, DistMult decoder with a name skip), the split as tensors, the LightningModule, and
saving and loading a trained predictor."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fixgraph.io import write_json
from fixgraph.training.data import TRAIN, VALIDATION
from fixgraph.training.fit import FixgraphModule, warmup_then_linear


class LinkPredictor(torch.nn.Module):
    def __init__(
        self, in_dim: int, n_relations: int, hidden: int, layers: int, dropout: float, encoder: str, name_dim: int = 0
    ) -> None:
        super().__init__()
        from torch_geometric.nn import RGCNConv, SAGEConv

        self.encoder, self.n_relations = encoder, n_relations
        self.input = torch.nn.Linear(in_dim, hidden)
        convs: list[torch.nn.Module] = []
        if encoder == "sage":
            convs = [SAGEConv(hidden, hidden) for _ in range(layers)]
        elif encoder == "rgcn":  # each relation in both directions
            convs = [
                RGCNConv(hidden, hidden, 2 * n_relations, num_bases=min(8, 2 * n_relations)) for _ in range(layers)
            ]
        elif encoder == "mlp":
            convs = [torch.nn.Linear(hidden, hidden) for _ in range(layers)]
        else:
            raise ValueError(f"link prediction: unknown encoder {encoder!r}; valid: sage, rgcn, mlp")
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
