"""ltr_dev's built recipe held out by fold of the dev parts: what `make models` trains, on questions it never saw.

The seven dev parts fall in two folds (a: trainer bi_encoder_mpnet_dev_fold_a's five parts, whose model is also
a DVC stage in pipelines/training; b: the GNOME dev split and evolution_bridge_all). For
each fold, `fixgraph train --trainer bi_encoder_mpnet_dev` trains the shipped recipe (Lightning, two epochs,
both corpora) on that fold's parts only, and the other fold's parts are scored with the leaderboard's
fine-tuned systems pointed at that model:

    F=training.trainers.bi_encoder_mpnet_dev
    fixgraph train --trainer bi_encoder_mpnet_dev "$F.data.questions=[bridge_dev:gnome_help,...]" \\
        $F.output=/tmp/fold/model_a $F.data_dir=/tmp/fold/data_a          # fold a's five parts (and b's two)
    M=/tmp/fold/model_a; OV=(experiment=leaderboard experiment.baseline=dense_mpnet_blocks
        systems.dense_dev_blocks.embedder.model=$M systems.link_expansion_dev_blocks.embedder.model=$M
        systems.link_expansion_dev_blocks.first_stage.embedder.model=$M
        systems.ltr_dev.first_stage.embedder.model=$M systems.ltr_dev.first_stage.first_stage.embedder.model=$M)
    fixgraph evaluate --no-track --name fold-a-dev corpus=gnome_help split=dev "${OV[@]}"   # each part of fold b
    fixgraph fit-ltr --system ltr_dev --parts dev:gnome_help,evolution_bridge_all:evolution_help \\
        --hold-out none --no-track "${OV[@]}"    # keep artifacts/ltr_fit/ltr_dev_fitted/signals.parquet
    python experiments/quality/ltr_dev_folds.py --rows-a ROWS_OF_MODEL_A --rows-b ROWS_OF_MODEL_B \\
        --stock artifacts/ltr_fit/ltr_seven/signals.parquet

Printed: recall@8 and MRR per part of every fine-tuned system and its stock twin (from the evaluations:
`fold-<model>-<split>`), paired sign-flip tests over bridge, other and all questions; then, from the fit-ltr
rows, ltr_dev's candidates ranked with ltr's shipped weights (fitted on every dev part's stock signals),
with weights refitted on the other fold's rows (signals of a model that did not see those questions
either), and with weights fitted on the other fold's stock rows; how many bridge questions dense_dev_blocks
misses gold in, how many of those ltr_dev raises and how many it lowers; and three guards against the
graph pushing out what the first stage had (its top m kept ahead, the graph weights scaled, the graph only
where the first stage is unsure; `guard_variants`). Dev parts only (fit-ltr and the training
data refuse locked questions). About 20 min of training per fold and 20 min of scoring per model on 2 cores
(docs/results/quality.md, "ltr_dev's recipe held out by fold").
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from fixgraph.config import compose
from fixgraph.experiment.ltr_fit import fit_weights, recall_at, summary
from fixgraph.retrieval.ltr import GRAPH_SIGNALS, SIGNALS, weight_vector


def folds(cfg: DictConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Fold a: trainer bi_encoder_mpnet_dev_fold_a's parts; fold b: the rest of ltr_dev's training parts."""
    trainers = cfg.training.trainers
    a = tuple(trainers.bi_encoder_mpnet_dev_fold_a.data.questions)
    return a, tuple(p for p in trainers.bi_encoder_mpnet_dev.data.questions if p not in a)


PAIRS = (("ltr_dev", "ltr"), ("ltr_dev", "dense_dev_blocks"), ("dense_dev_blocks", "dense_mpnet_blocks"))
SYSTEMS = ("dense_mpnet_blocks", "ltr", "dense_dev_blocks", "link_expansion_dev_blocks", "ltr_dev")
SUBSETS = ["bridge questions", "other questions", "pooled"]


def evaluations(
    artifacts: Path, fold_a: tuple[str, ...], fold_b: tuple[str, ...], prefix: str = "fold"
) -> pd.DataFrame:
    """Per-question rows of every part, scored by the model trained on the other fold (evaluations named
    `<prefix>-<model>-<split>`)."""
    frames = []
    for model, parts in (("a", fold_b), ("b", fold_a)):  # model a learnt fold a's questions: it scores fold b
        for part in parts:
            split, corpus = part.split(":")
            rows = pd.read_parquet(artifacts / "eval" / corpus / f"{prefix}-{model}-{split}" / "per_question.parquet")
            frames.append(rows[rows["scored"]].assign(part=part))
    return pd.concat(frames)


def by_question(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    wide = rows.pivot_table(index=["qid", "part"], columns="system", values=metric).reset_index()
    qtype = rows.groupby(["qid", "part"])["qtype"].first().reset_index()
    return wide.merge(qtype, on=["qid", "part"]).set_index("qid")


def print_tables(rows: pd.DataFrame, systems: Sequence[str], pairs: Sequence[tuple[str, str]]) -> None:
    """recall@8 and MRR per part and corpus, and each (system, baseline) pair's paired tests."""
    for metric in ("recall_at_8", "mrr"):
        wide = by_question(rows, metric)
        print(f"\n===== {metric}, mean per part\n{wide.groupby('part')[list(systems)].mean().round(3)}")
        corpus = wide["part"].str.split(":").str[1]
        print(wide.groupby(corpus)[list(systems)].mean().round(3))
        for system, baseline in pairs:
            table = summary(wide, baseline, system).round(4).loc[SUBSETS]
            print(f"\n{metric}: {system} vs {baseline}\n{table}")


def mrr_at(rows: pd.DataFrame, score: str) -> pd.Series:
    """Reciprocal rank of the first gold chunk among each question's candidates ranked by `score`."""
    order = rows.sort_values(["qid", score, "chunk"], ascending=[True, False, True])
    order = order.assign(rank=order.groupby("qid").cumcount() + 1)
    first = order[order["gold"]].groupby("qid")["rank"].min()
    return (1.0 / first).reindex(rows["qid"].unique()).fillna(0.0)


def weight_variants(rows: pd.DataFrame, stock: pd.DataFrame, shipped: np.ndarray) -> pd.DataFrame:
    """Per question, recall@8 and MRR of ltr_dev's candidates under three weight vectors (see the docstring)."""
    out = []
    for held in ("a", "b"):
        test = rows[rows["fold"] == held]
        weights = {
            "shipped": shipped,
            "refit": fit_weights(rows[rows["fold"] != held], SIGNALS),
            "stock_refit": fit_weights(stock[stock["fold"] != held], SIGNALS),
        }
        scored = test.assign(**{name: test[list(SIGNALS)].to_numpy() @ w for name, w in weights.items()})
        columns = {f"{m}_{name}": f(scored, name) for name in weights for m, f in (("r8", recall_at), ("mrr", mrr_at))}
        out.append(pd.DataFrame(columns))
    return pd.concat(out).join(rows.groupby("qid")[["part", "qtype"]].first())


def repairs(wide: pd.DataFrame, system: str = "ltr_dev", first: str = "dense_dev_blocks") -> pd.Series:
    """How often `first` misses gold (recall@8 < 1), how many of those `system` raises, and how many questions
    it lowers: where a graph's net gain comes from."""
    missed, diff = wide[first] < 1, wide[system] - wide[first]
    counts = {"questions": len(wide), "first stage misses": missed.sum()}
    counts |= {"raised among them": ((diff > 0) & missed).sum(), "lowered": (diff < 0).sum()}
    return pd.Series(counts).astype(int)


def guard_variants(rows: pd.DataFrame, weights: np.ndarray, block_weight: float) -> pd.DataFrame:
    """Per question, recall@8 and MRR of ltr_dev's candidates (ltr's weights, column `top0`) under three
    guards against the graph pushing out what the first stage (dense_dev_blocks: own and line cosines blended
    by its `block_weight`) had: its top m chunks kept ahead (`top1`-`top4`); the two graph weights scaled
    (`graph_x0.5`-`graph_x1.5`); the graph ranking only where the first stage's best score is below its
    25/50/75% quantile (`gate_q*`)."""
    dense = (1 - block_weight) * rows["own"] + block_weight * rows["line"]
    rank = dense.groupby(rows["qid"]).rank(ascending=False, method="first")
    signals = rows[list(SIGNALS)].to_numpy()
    ltr = signals @ weights
    best = dense.groupby(rows["qid"]).transform("max")
    scores = {f"top{m}": np.where(rank <= m, 1e6 - rank, ltr) for m in (0, 1, 2, 3, 4)}
    graph = [SIGNALS.index(s) for s in GRAPH_SIGNALS]
    for factor in (0.5, 0.75, 1.25, 1.5):
        scaled = weights.copy()
        scaled[graph] *= factor
        scores[f"graph_x{factor}"] = signals @ scaled
    cuts = best.groupby(rows["qid"]).first().quantile([0.25, 0.5, 0.75])  # over questions, not rows
    for q, cut in cuts.items():
        scores[f"gate_q{round(100 * q)}"] = np.where(best < cut, ltr, 1e3 * dense)
    columns = {}
    for name, score in scores.items():
        scored = rows.assign(score=score)
        columns[f"r8_{name}"], columns[f"mrr_{name}"] = recall_at(scored, "score"), mrr_at(scored, "score")
    return pd.DataFrame(columns).join(rows.groupby("qid")[["part", "qtype"]].first())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-a", type=Path, required=True, help="fit-ltr rows of fold b's parts, model a")
    parser.add_argument("--rows-b", type=Path, required=True, help="fit-ltr rows of fold a's parts, model b")
    parser.add_argument("--stock", type=Path, required=True, help="fit-ltr --system ltr rows of all seven parts")
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts"))
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    # One composition for the folds, ltr's shipped weights and dense_dev_blocks' block weight.
    cfg = compose(["+retriever@systems.ltr=ltr", "+retriever@systems.first=dense_dev_blocks"])
    fold_a, fold_b = folds(cfg)
    rows = evaluations(args.artifacts, fold_a, fold_b)
    print_tables(rows, SYSTEMS, PAIRS)
    recall = by_question(rows, "recall_at_8")
    bridge = recall[recall["qtype"] == "bridge"]
    print(f"\n===== where the graph's gain comes from (bridge questions)\n{repairs(bridge).to_string()}")
    fold = {**dict.fromkeys(fold_a, "a"), **dict.fromkeys(fold_b, "b")}
    signal_rows = pd.concat([pd.read_parquet(args.rows_a), pd.read_parquet(args.rows_b)], ignore_index=True)
    signal_rows = signal_rows.assign(fold=signal_rows["part"].map(fold))
    stock = pd.read_parquet(args.stock)
    shipped = weight_vector(cfg.systems.ltr.weights)  # ltr_dev ships ltr's
    variants = weight_variants(signal_rows, stock.assign(fold=stock["part"].map(fold)), shipped)
    print("\n===== ltr_dev's candidates under three weight vectors (fit-ltr rows)")
    print(variants.drop(columns=["part", "qtype"]).mean().round(3).to_string())
    for metric in ("r8", "mrr"):
        for name in ("refit", "stock_refit"):
            table = summary(variants, f"{metric}_shipped", f"{metric}_{name}").round(3).loc[SUBSETS]
            print(f"\n{metric}: {name} vs shipped weights\n{table}")
    guarded = guard_variants(signal_rows, shipped, float(cfg.systems.first.block_weight))
    print("\n===== guards against the graph's losses (fit-ltr rows; top0 = ltr_dev)")
    print(guarded.drop(columns=["part", "qtype"]).mean().round(3).to_string())
    for name in [c[3:] for c in guarded.columns if c.startswith("r8_") and c != "r8_top0"]:
        table = summary(guarded, "r8_top0", f"r8_{name}").round(3).loc[SUBSETS]
        print(f"\nrecall@8: {name} vs ltr_dev\n{table}")


if __name__ == "__main__":
    main()
