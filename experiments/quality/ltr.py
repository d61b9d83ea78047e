"""Fit the `ltr` retriever's weights on dev parts, and score each corpus with weights fitted on the other.

`signals` opens the `ltr` system (fixgraph/retrieval/ltr.py) on each dev part and writes, per question
and candidate (link_expansion_blocks' top 100), the retriever's own signal row and whether the chunk
holds gold. `fit` learns weights by pairwise logistic regression (every gold candidate against every
other candidate of the same question's top 30, signals standardised, no intercept): first on the parts
of one corpus, ranking the other corpus's questions with them (held-out recall@8, also cut at the
token budget of link_expansion_blocks' top 8, since longer chunks hold more gold), then on all parts,
printed as the config's `weights` (raw scale: standardised weight / the signal's standard deviation).
Dev parts only: resolve_questions refuses locked questions.

    python experiments/quality/ltr.py signals --parts dev:gnome_help,evolution_dev:evolution_help --out ltr.parquet
    python experiments/quality/ltr.py fit --signals ltr.parquet
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from fixgraph.retrieval.ltr import SIGNALS

PAIRS_TOP = 30


def signals(parts: str, system: str, out: Path) -> None:
    from fixgraph.config import compose, systems_of
    from fixgraph.evaluation.gold import map_gold
    from fixgraph.evaluation.splits import resolve_questions
    from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system

    rows = []
    for part in parts.split(","):
        split, corpus = part.split(":")
        overrides = [f"split={split}", f"corpus={corpus}", "experiment=leaderboard"]
        cfg = compose(overrides)
        if system not in systems_of(cfg):  # a retriever config the preset does not hold
            cfg = compose([*overrides, f"+retriever@systems.{system}={system}"])
        questions = resolve_questions(cfg, None, None).questions  # refuses locked questions
        chunk(cfg)
        docs, chunks = load_documents(cfg), load_chunks(cfg)
        mapping = map_gold(questions, docs, chunks)
        tokens = {c.id: c.n_tokens for c in chunks}
        ltr = open_system(cfg, system, systems_of(cfg)[system], chunks).first_stage
        position = {c.id: i for i, c in enumerate(chunks)}
        for q in questions:
            gold = {c for item in mapping.for_question(q.qid) if item.status == "mapped" for c in item.chunk_ids}
            if not gold:
                continue
            hits, matrix = ltr.signals(q.question)
            dense = ltr.dense.scores(q.question)
            for rank, (hit, row) in enumerate(zip(hits, matrix, strict=True)):
                rows.append(
                    {"part": split, "corpus": corpus, "qid": q.qid, "qtype": q.qtype, "chunk": hit.chunk_id,
                     "base_rank": rank, "dense": dense[position[hit.chunk_id]], "first_stage": ltr.first_stage.name,
                     "gold": hit.chunk_id in gold, "n_gold": len(gold),
                     "tokens": tokens[hit.chunk_id], **dict(zip(SIGNALS, row, strict=True))}
                )  # fmt: skip
        print(split, corpus, len(rows), flush=True)
    pd.DataFrame(rows).to_parquet(out)


def fit(train: pd.DataFrame, names: list[str], c: float, balance: bool) -> np.ndarray:
    """Raw-scale weights from pairwise logistic regression on standardised signals."""
    from sklearn.linear_model import LogisticRegression

    scale = train[names].std().replace(0, 1).to_numpy()
    head = train[train["base_rank"] < PAIRS_TOP]
    share = head.groupby("qid")["qtype"].first().eq("bridge").map({True: "bridge", False: "other"})
    diffs, weights = [], []
    for qid, group in head.groupby("qid"):
        good, bad = group[group["gold"]][names].to_numpy(), group[~group["gold"]][names].to_numpy()
        pairs = [g - b for g in good for b in bad]
        diffs += pairs
        # every question weighs the same; with `balance`, bridge and other questions weigh half each
        each = 1.0 / max(len(pairs), 1)
        weights += [each / (share == share[qid]).sum() if balance else each] * len(pairs)
    x = np.asarray(diffs) / scale
    w = np.asarray(weights) / np.mean(weights)
    model = LogisticRegression(C=c, max_iter=5000, fit_intercept=False)
    model.fit(np.vstack([x, -x]), np.r_[np.ones(len(x)), np.zeros(len(x))], sample_weight=np.r_[w, w])
    return np.asarray(model.coef_[0] / scale)


def ranked(frame: pd.DataFrame, score: str) -> pd.DataFrame:
    return frame.sort_values(["qid", score, "chunk"], ascending=[True, False, True])


def recall_at(frame: pd.DataFrame, score: str, k: int = 8) -> pd.Series:
    """recall@k per question of the candidates ranked by `score` (ties: chunk id, as the retriever)."""
    top = ranked(frame, score).groupby("qid").head(k)
    return top.groupby("qid")["gold"].sum() / frame.groupby("qid")["n_gold"].first()


def recall_within(frame: pd.DataFrame, score: str, budget: pd.Series) -> pd.Series:
    """recall of the ranking by `score` over the chunks that start within `budget[qid]` tokens."""
    order = ranked(frame, score)
    before = order.groupby("qid")["tokens"].cumsum() - order["tokens"]
    kept = order[before < order["qid"].map(budget)]
    return kept.groupby("qid")["gold"].sum() / frame.groupby("qid")["n_gold"].first()


def evaluate(path: Path, names: list[str], c: float, balance: bool, fold: str) -> None:
    frame = pd.read_parquet(path)
    frame["base"] = -frame["base_rank"].astype(float)
    first_stage = str(frame["first_stage"].iloc[0])
    results = []
    for held in sorted(frame[fold].unique()):
        train, test = frame[frame[fold] != held], frame[frame[fold] == held].copy()
        weights = fit(train, names, c, balance)
        print(f"fitted without {held}:", {n: round(float(w), 3) for n, w in zip(names, weights, strict=True)})
        test["ltr"] = test[names].to_numpy() @ weights
        budget = ranked(test, "base").groupby("qid").head(8).groupby("qid")["tokens"].sum()
        results.append(
            pd.DataFrame(
                {"dense": recall_at(test, "dense"), first_stage: recall_at(test, "base"),
                 "ltr (held out)": recall_at(test, "ltr"),
                 "ltr at its budget": recall_within(test, "ltr", budget),
                 "tokens in top 8: base": budget,
                 "ltr": ranked(test, "ltr").groupby("qid").head(8).groupby("qid")["tokens"].sum()}
            )
        )  # fmt: skip
    result = pd.concat(results).join(frame.groupby("qid")[["part", "qtype"]].first())
    table = result.groupby("part").mean(numeric_only=True)
    bridge = (result["qtype"] == "bridge").to_numpy()
    table.loc["bridge questions"] = result[bridge].mean(numeric_only=True)
    table.loc["other questions"] = result[~bridge].mean(numeric_only=True)
    table.loc["pooled"] = result.mean(numeric_only=True)
    table.insert(0, "n", result.groupby("part").size().reindex(table.index))
    table.loc[["bridge questions", "other questions", "pooled"], "n"] = [bridge.sum(), (~bridge).sum(), len(result)]
    print(table.round(3).to_string())
    for against in dict.fromkeys((first_stage, "dense")):
        diff = (result["ltr (held out)"] - result[against]).to_numpy()
        for label, d in (("all", diff), ("bridge", diff[bridge]), ("other", diff[~bridge])):
            flips = np.random.default_rng(0).choice([-1.0, 1.0], size=(10000, len(d)))
            p = float((np.abs(flips @ d) >= abs(d.sum()) - 1e-12).mean())
            ups, downs = int((d > 0).sum()), int((d < 0).sum())
            print(f"vs {against}, {label}: delta {d.mean():+.3f}, {ups} up, {downs} down, sign-flip p {p:.3f}")
    result.to_csv(path.with_suffix(".per_question.csv"))
    weights = fit(frame, names, c, balance)
    print("weights (all parts):")
    for n, w in zip(names, weights, strict=True):
        print(f"  {n}: {w:.4g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    extract = sub.add_parser("signals")
    extract.add_argument("--parts", required=True, help="split:corpus,... (dev parts)")
    extract.add_argument("--system", default="ltr", help="an ltr retriever config (conf/retriever)")
    extract.add_argument("--out", type=Path, required=True)
    fitting = sub.add_parser("fit")
    fitting.add_argument("--signals", type=Path, required=True)
    fitting.add_argument("--use", default=",".join(SIGNALS), help="signals the model may weight")
    fitting.add_argument("--C", type=float, default=0.01, help="inverse L2 strength")
    fitting.add_argument("--hold-out", choices=("corpus", "part"), default="corpus", help="what each fit leaves out")
    fitting.add_argument("--balance", action="store_true", help="bridge and other questions weigh half each")
    args = parser.parse_args()
    if args.command == "signals":
        signals(args.parts, args.system, args.out)
    else:
        evaluate(args.signals, args.use.split(","), args.C, args.balance, args.hold_out)


if __name__ == "__main__":
    main()
