"""The `linkpred` stage: the trained GNN(s) against the heuristic baselines on held-out graph edges, and
the predicted-links layer for the graph retrievers.

Methods scored on the same held-out edges and the same type-compatible negatives: common neighbours,
Adamic-Adar, resource allocation, Jaccard (networkx, training graph), the cosine of node-name vectors,
and each GNN of `training.linkpred.trainers`. The best baseline is chosen by validation MRR (never on
the test edges), then every GNN is compared with it on the test edges: paired bootstrap CIs over edges,
permutation p-values, Holm over the declared family (GNNs x mrr, hits_at_10, auc), and per relation.

Outputs (artifacts/linkpred/<corpus>/): per_edge.parquet, comparison.{md,json}, by_relation.md,
summary.json, and predicted_edges.parquet: for every tested relation (or `relations`) and its observed
(head type, tail type) pairs, the new links (not in the graph) of the GNN with the best validation MRR,
with probability >= `threshold`, at most `top_k` per head and `max_edges` in all; `extra_edges:` of a
graph retriever adds them (fixgraph/retrieval/graph_index.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig

from fixgraph.config import to_dict
from fixgraph.io import read_json, sha256_file, stable_hash, write_json, write_text
from fixgraph.pipeline.stages import StageResult, run_stage
from fixgraph.training.base import code_of
from fixgraph.training.data import VALIDATION

log = logging.getLogger(__name__)
METRICS = ("mrr", "hits_at_10", "auc")
NAME_COSINE = "name_cosine"


def gnn_scorer(folder: Path, data: Path) -> tuple[Callable[[Sequence[tuple[str, str, str]]], np.ndarray], Any]:
    """A triple scorer of a trained predictor, encoding nodes over the training graph only."""
    from fixgraph.training.nets.link_prediction import GraphTensors, load_predictor, message_graph

    model, relations = load_predictor(folder)
    graph, _ = GraphTensors.from_data(data)
    if relations != graph.relations:
        raise ValueError(f"{folder}: trained on other relations than the data in {data}; retrain it")
    heads, rels, tails = graph.train
    with torch.no_grad():
        z = model.encode(graph.x, *message_graph(heads, rels, tails, len(relations)))
    node = {n: i for i, n in enumerate(graph.node_ids)}
    rel = {r: i for i, r in enumerate(relations)}

    def score(triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        h = torch.tensor([node[a] for a, _, _ in triples], dtype=torch.long)
        r = torch.tensor([rel[b] for _, b, _ in triples], dtype=torch.long)
        t = torch.tensor([node[c] for _, _, c in triples], dtype=torch.long)
        with torch.no_grad():
            return model.score(z, h, r, t).numpy().astype(float)

    return score, (model, graph)


def score_methods(data: Path, models: dict[str, Path], part: str) -> pd.DataFrame:
    """Per-edge metrics of every method on one held-out part (validation | test), long format."""
    import datasets

    from fixgraph.training.edges import (
        HEURISTICS,
        cosine_scorer,
        heuristic_scorer,
        pairwise,
        score_held_out,
        train_graph,
    )

    edges = datasets.load_from_disk(str(data / "edges"))
    nodes = datasets.load_from_disk(str(data / "nodes"))
    held = edges[part].to_pandas()
    negatives = [list(n) for n in held["negatives"]]
    graph = train_graph(edges["train"].to_pandas(), list(nodes["node_id"]))
    scorers: dict[str, Callable[[Sequence[tuple[str, str, str]]], np.ndarray]] = {
        name: pairwise(heuristic_scorer(name, graph)) for name in HEURISTICS
    }
    index = {n: i for i, n in enumerate(nodes["node_id"])}
    scorers[NAME_COSINE] = pairwise(cosine_scorer(np.asarray(nodes["vector"], dtype=np.float32), index))
    for name, folder in models.items():
        scorers[name] = gnn_scorer(folder, data)[0]
    frames = [score_held_out(held, negatives, fn).assign(system=name) for name, fn in scorers.items()]
    return pd.concat(frames, ignore_index=True).rename(columns={"edge_id": "qid"})


def by_relation(per_edge: pd.DataFrame, systems: Sequence[str], settings: Any) -> str:
    from tabulate import tabulate

    from fixgraph.evaluation.stats import bootstrap_mean

    rows = []
    for relation in sorted(per_edge["relation"].unique()):
        part = per_edge[per_edge["relation"] == relation]
        row: list[Any] = [relation, part["qid"].nunique()]
        for system in systems:
            values = part.loc[part["system"] == system, "mrr"].to_numpy()
            row.append(bootstrap_mean(values, settings.resamples, settings.confidence, settings.seed).format())
        rows.append(row)
    return tabulate(rows, headers=["relation", "test edges", *[f"{s} MRR" for s in systems]], tablefmt="github")


def predicted_edges(
    model_and_graph: Any,
    all_edges: pd.DataFrame,
    node_types: dict[str, str],
    relations: Sequence[str],
    threshold: float,
    top_k: int,
    max_edges: int,
) -> pd.DataFrame:
    """New links of `relations` the model believes in, encoding nodes over the FULL graph (every known
    edge). A pair is proposed once per relation (the graph retrievers walk edges both ways)."""
    from fixgraph.training.nets.link_prediction import message_graph

    model, graph = model_and_graph
    node = {n: i for i, n in enumerate(graph.node_ids)}
    rel = {r: i for i, r in enumerate(graph.relations)}
    known = all_edges[all_edges["relation"].isin(rel)]
    h = torch.tensor([node[s] for s in known["source"]], dtype=torch.long)
    r = torch.tensor([rel[x] for x in known["relation"]], dtype=torch.long)
    t = torch.tensor([node[x] for x in known["target"]], dtype=torch.long)
    with torch.no_grad():
        z = model.encode(graph.x, *message_graph(h, r, t, len(graph.relations)))
    existing = {(a, b) for a, b in zip(all_edges["source"], all_edges["target"], strict=True)}
    existing |= {(b, a) for a, b in existing}
    typed = all_edges.assign(st=all_edges["source"].map(node_types), tt=all_edges["target"].map(node_types))
    rows = []
    proposed: set[tuple[str, str, str]] = set()
    for group, _ in typed.groupby(["relation", "st", "tt"]):
        relation, head_type, tail_type = (str(g) for g in group)
        if relation not in rel or relation not in relations:
            continue
        heads = [n for n in graph.node_ids if node_types[n] == head_type]
        tails = [n for n in graph.node_ids if node_types[n] == tail_type]
        zh = z[[node[n] for n in heads]] * model.relations[rel[relation]].detach()
        with torch.no_grad():
            probs = torch.sigmoid(zh @ z[[node[n] for n in tails]].T).numpy()
        for i, head in enumerate(heads):
            order = np.argsort(-probs[i], kind="stable")
            kept = 0
            for j in order:
                if probs[i, j] < threshold or kept >= top_k:
                    break
                tail = tails[j]
                if tail == head or (head, tail) in existing or (tail, head, relation) in proposed:
                    continue
                proposed.add((head, tail, relation))
                rows.append({"source": head, "target": tail, "relation": relation, "probability": float(probs[i, j])})
                kept += 1
    frame = pd.DataFrame(rows, columns=["source", "target", "relation", "probability"])
    frame = frame.sort_values(["probability", "source", "target"], ascending=[False, True, True], kind="stable")
    return frame.head(max_edges).reset_index(drop=True)


def linkpred(cfg: DictConfig) -> StageResult:
    from fixgraph.evaluation.comparison import ComparisonSettings, Family, compare
    from fixgraph.kg.store import GraphStore
    from fixgraph.training.stages import build_trainer, train, trainer_config

    settings = cfg.training.linkpred
    names = [str(n) for n in settings.trainers]
    if not names:
        raise ValueError("training.linkpred.trainers is empty: name at least one link-prediction trainer")
    trainers = {n: build_trainer(trainer_config(cfg, n)) for n in names}
    for name in names:
        train(cfg, name)
    shas = {name: str(read_json(t.output / "fixgraph_model.json")["data_sha256"]) for name, t in trainers.items()}
    if len(set(shas.values())) != 1:
        raise ValueError(f"training.linkpred.trainers must be trained on the same edge split; data hashes: {shas}")
    data = trainers[names[0]].data_dir
    models = {n: t.output for n, t in trainers.items()}
    comparison_settings = ComparisonSettings.from_config(cfg)
    key = stable_hash(
        {
            "settings": {k: v for k, v in to_dict(settings).items() if k != "output"},
            "cards": {n: sha256_file(p / "fixgraph_model.json") for n, p in models.items()},
            "comparison": asdict(comparison_settings),
            "code": code_of(
                [
                    "fixgraph.training.linkpred_eval",
                    "fixgraph.training.edges",
                    "fixgraph.training.link_prediction",
                    "fixgraph.training.nets.link_prediction",
                ]
            ),
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        validation = score_methods(data, models, VALIDATION)
        test = score_methods(data, models, "test")
        baselines = [s for s in dict.fromkeys(validation["system"]) if s not in models]
        val_mrr = validation.groupby("system")["mrr"].mean()
        best = max(baselines, key=lambda s: (float(val_mrr[s]), s))
        family = Family(best, tuple((m, metric) for m in models for metric in METRICS))
        systems = [best, *models, *(b for b in baselines if b != best)]
        report = compare(test, list(METRICS), best, systems, family, comparison_settings)
        test.to_parquet(out / "per_edge.parquet", index=False)
        write_text(out / "comparison.md", report.markdown())
        write_json(out / "comparison.json", report.to_json())
        write_text(out / "by_relation.md", by_relation(test, systems, comparison_settings) + "\n")
        store = GraphStore.read(Path(str(cfg.paths.artifacts)) / "graph" / str(cfg.corpus.name))
        node_types = dict(zip(store.nodes["node_id"], store.nodes["type"], strict=True))
        # the layer comes from the GNN with the best validation MRR (chosen without the test edges)
        layer_model = max(models, key=lambda m: (float(val_mrr[m]), m))
        # only relations whose held-out edges measured the predictor (rarer ones were never tested)
        layer_relations = sorted(set(test["relation"])) if settings.relations is None else list(settings.relations)
        layer = predicted_edges(
            gnn_scorer(models[layer_model], data)[1],
            store.edges,
            node_types,
            layer_relations,
            float(settings.threshold),
            int(settings.top_k),
            int(settings.max_edges),
        )
        layer.to_parquet(out / "predicted_edges.parquet", index=False)
        summary = {
            "best_baseline": best,
            "layer_model": layer_model,
            "validation_mrr": {s: round(float(v), 4) for s, v in val_mrr.items()},
            "test": {r["system"] + "." + r["metric"]: r["mean"] for r in report.to_json()["rows"]},
            "test_edges": int(test["qid"].nunique()),
            "predicted_edges": len(layer),
            "predicted_by_relation": {str(k): int(v) for k, v in layer["relation"].value_counts().items()},
        }
        write_json(out / "summary.json", summary)
        if bool(cfg.tracking.enabled):
            log_linkpred(cfg, out, report, summary)
        return {"best_baseline": best, "test_edges": summary["test_edges"], "predicted_edges": len(layer)}

    return run_stage("linkpred", Path(str(settings.output)), key, produce)


def log_linkpred(cfg: DictConfig, out: Path, report: Any, summary: dict[str, Any]) -> None:
    import mlflow

    from fixgraph.tracking import git_state, setup

    experiment = setup(cfg)
    with mlflow.start_run(experiment_id=experiment, run_name=f"linkpred {cfg.corpus.name}"):
        mlflow.set_tags({**git_state(), "stage": "linkpred", "corpus": str(cfg.corpus.name)})
        metrics: dict[str, float] = {}
        for row in report.to_json()["rows"]:
            prefix = f"{row['system']}.{row['metric']}"
            metrics[prefix] = float(row["mean"])
            metrics[prefix + "_ci_low"], metrics[prefix + "_ci_high"] = float(row["ci_low"]), float(row["ci_high"])
            if row.get("p_holm") is not None:
                metrics[prefix + "_p_holm"] = float(row["p_holm"])
        metrics["predicted_edges"] = float(summary["predicted_edges"])
        mlflow.log_metrics(metrics)
        mlflow.log_artifacts(str(out))
