"""Fit an `ltr` system's weights on dev questions (`fixgraph fit-ltr`), and say how well they carry over.

The `ltr` retriever (retrieval/ltr.py) ranks its first stage's candidates by weights x signals, and its
weights are config values. This module fits them: for each dev part (the dev split of one corpus) it takes
the system's own signal rows for every candidate of every question and whether the chunk holds gold, then
fits a pairwise logistic regression (each gold candidate against each other candidate in the first stage's
top 30 for that question; signals standardised, no intercept, L2). Weights fitted on all parts and applied to
those same parts say nothing about new questions, so before that fit it ranks each corpus (or part) with
weights fitted on the others. The weights are written as a retriever config that inherits the fitted system,
with their provenance in its header, so the fitted system is declared like any other. Dev parts only:
resolve_questions refuses locked test questions.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from fixgraph.config import ConfigError, config_dir, systems_of
from fixgraph.evaluation.parts import Part
from fixgraph.retrieval.ltr import SIGNALS

PAIRS_TOP = 30  # a question's pairs come from the first stage's top 30: where recall@8 is won or lost
K = 8
FOLDS = ("corpus", "part", "none")


def signal_rows(parts: Sequence[tuple[Part, DictConfig]], system: str) -> pd.DataFrame:
    """One row per (question, candidate) of `system` on each part: its SIGNALS, first-stage rank and gold."""
    from fixgraph.evaluation.gold import map_gold
    from fixgraph.evaluation.splits import resolve_questions
    from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system

    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}  # qid -> the part that holds it: a question in two parts would count twice
    for part, cfg in parts:
        node = systems_of(cfg).get(system)
        if node is None:
            raise ConfigError(
                f"fit-ltr: part {part.label} has no system {system!r} (systems: {sorted(systems_of(cfg))})"
            )
        if str(node.get("kind")) != "ltr":
            raise ConfigError(
                f"fit-ltr: system {system!r} is kind {node.get('kind')!r}; its weights are fitted only for kind ltr"
            )
        questions = resolve_questions(cfg, part.questions, None).questions  # refuses locked questions
        twice = sorted(q.qid for q in questions if q.qid in seen)
        if twice:
            raise ConfigError(
                f"fit-ltr: parts {seen[twice[0]]} and {part.label} share questions ({', '.join(twice[:5])}"
                f"{', ...' if len(twice) > 5 else ''}): name each question's part once"
            )
        seen |= dict.fromkeys((q.qid for q in questions), part.label)
        chunk(cfg)
        chunks = load_chunks(cfg)
        qrels = map_gold(questions, load_documents(cfg), chunks).qrels()
        tokens = {c.id: c.n_tokens for c in chunks}
        ranker: Any = open_system(cfg, system, node, chunks).first_stage  # a LearnedRankRetriever (kind ltr)
        before = len(rows)
        for q in questions:
            gold = set(qrels.get(q.qid, {}))
            if not gold:
                continue  # unanswerable, or its gold not found in this corpus version: nothing to rank
            hits, matrix = ranker.signals(q.question)
            for rank, (hit, row) in enumerate(zip(hits, matrix, strict=True)):
                rows.append(
                    {"part": part.label, "corpus": part.corpus, "qid": q.qid, "qtype": q.qtype, "chunk": hit.chunk_id,
                     "base_rank": rank, "gold": hit.chunk_id in gold, "n_gold": len(gold),
                     "tokens": tokens[hit.chunk_id], **dict(zip(SIGNALS, map(float, row), strict=True))}
                )  # fmt: skip
        if len(rows) == before:
            raise ConfigError(f"fit-ltr: part {part.label} has no question with gold in its corpus: nothing to fit")
    return pd.DataFrame(rows)


def _question_weights(head: pd.DataFrame, balance: bool) -> dict[str, float]:
    """Every question weighs the same; with `balance`, bridge and other questions weigh half each."""
    bridge = head.groupby("qid")["qtype"].first().eq("bridge")
    if not balance:
        return dict.fromkeys(map(str, bridge.index), 1.0)
    counts = bridge.value_counts()
    return {str(qid): 1.0 / counts[is_bridge] for qid, is_bridge in bridge.items()}


def fit_weights(
    rows: pd.DataFrame, names: Sequence[str] = SIGNALS, c: float = 0.01, balance: bool = True
) -> np.ndarray:
    """Raw-scale weights (standardised weight / the signal's standard deviation) from pairwise logistic
    regression: P(gold above other) = sigmoid(w . (x_gold - x_other))."""
    from sklearn.linear_model import LogisticRegression

    names = list(names)
    scale = rows[names].std().replace(0, 1).fillna(1).to_numpy()
    head = rows[rows["base_rank"] < PAIRS_TOP]
    share = _question_weights(head, balance)
    diffs, weights = [], []
    for qid, group in head.groupby("qid"):
        good, bad = group[group["gold"]][names].to_numpy(), group[~group["gold"]][names].to_numpy()
        pairs = (good[:, None, :] - bad[None, :, :]).reshape(-1, len(names))
        diffs.append(pairs)
        weights.append(np.full(len(pairs), share[str(qid)] / max(len(pairs), 1)))
    x = np.vstack(diffs) / scale if diffs else np.zeros((0, len(names)))
    if len(x) == 0:
        raise ConfigError("fit-ltr: no question has both a gold and another candidate in the top 30: nothing to fit")
    w = np.concatenate(weights)
    w = w / w.mean()
    model = LogisticRegression(C=c, max_iter=5000, fit_intercept=False)
    model.fit(np.vstack([x, -x]), np.r_[np.ones(len(x)), np.zeros(len(x))], sample_weight=np.r_[w, w])
    return np.asarray(model.coef_[0] / scale)


def recall_at(rows: pd.DataFrame, score: str, k: int = K) -> pd.Series:
    """recall@k per question of its candidates ranked by `score` (ties by chunk id, as the retriever)."""
    order = rows.sort_values(["qid", score, "chunk"], ascending=[True, False, True])
    top = order.groupby("qid").head(k)
    return top.groupby("qid")["gold"].sum() / rows.groupby("qid")["n_gold"].first()


def _two_groups(fold: str, groups: set[str]) -> None:
    if len(groups) < 2:
        plural = {"corpus": "corpora", "part": "parts"}[fold]
        raise ConfigError(
            f"fit-ltr: --hold-out {fold} needs at least two {plural}, got {sorted(groups)}; or use --hold-out none"
        )


def held_out(
    rows: pd.DataFrame, fold: str, names: Sequence[str] = SIGNALS, c: float = 0.01, balance: bool = True
) -> pd.DataFrame:
    """Per question: recall@8 of the first stage and of weights fitted without the question's corpus (or part)."""
    groups = sorted(rows[fold].unique())  # the rows' "corpus" or "part" column
    _two_groups(fold, set(groups))
    frame = rows.assign(first_stage=-rows["base_rank"].astype(float))
    results = []
    for held in groups:
        train, test = frame[frame[fold] != held], frame[frame[fold] == held]
        test = test.assign(fitted=test[list(names)].to_numpy() @ fit_weights(train, names, c, balance))
        results.append(
            pd.DataFrame({"first_stage": recall_at(test, "first_stage"), "fitted": recall_at(test, "fitted")})
        )
    return pd.concat(results).join(rows.groupby("qid")[["part", "qtype"]].first())


def summary(per_question: pd.DataFrame, baseline: str = "first_stage", system: str = "fitted") -> pd.DataFrame:
    """The mean of two per-question metric columns (recall@8 wherever fixgraph calls it) per part, over bridge
    and other questions, and pooled, with the questions `system` gains and loses against `baseline` and a
    sign-flip p."""
    from fixgraph.evaluation.significance import paired_permutation_tests

    bridge = per_question["qtype"].eq("bridge")
    subsets = {p: per_question["part"].eq(p) for p in sorted(per_question["part"].unique())}
    subsets |= {"bridge questions": bridge, "other questions": ~bridge, "pooled": bridge | ~bridge}
    out = []
    for label, mask in subsets.items():
        part = per_question[mask]
        if part.empty:
            continue
        diff = (part[system] - part[baseline]).to_numpy()
        p = paired_permutation_tests(diff)[0].p_value if len(diff) > 1 and diff.any() else 1.0
        out.append(
            {"subset": label, "n": len(part), baseline: part[baseline].mean(),
             system: part[system].mean(), "up": int((diff > 0).sum()), "down": int((diff < 0).sum()), "p": p}
        )  # fmt: skip
    return pd.DataFrame(out).set_index("subset")


def retriever_path(name: str) -> Path:
    return config_dir() / "retriever" / f"{name}.yaml"


def check_arguments(system: str, write: str | None, overrides: Sequence[str]) -> Path | None:
    """Refuse what would fail or mislead after minutes of work; the config file `write` names, if any."""
    clashing = [o for o in overrides if o.split("=")[0].lstrip("+~") in ("split", "corpus")]
    if clashing:
        raise ConfigError(f"fit-ltr: each part names its split and corpus (--parts); drop {', '.join(clashing)}")
    if not write:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", write) or write == system:
        raise ConfigError(f"fit-ltr: --write {write!r}: give a new retriever name (letters, digits, _)")
    target = retriever_path(write)
    if target.exists():
        raise ConfigError(f"fit-ltr: {target} exists; choose another --write name or delete it first")
    if not retriever_path(system).exists():
        raise ConfigError(f"fit-ltr: --write inherits {retriever_path(system)}, which does not exist")
    touching = [o for o in overrides if f"systems.{system}" in o]
    if touching:
        raise ConfigError(
            f"fit-ltr: --write inherits conf/retriever/{system}.yaml as it is, without {', '.join(touching)}; "
            "make those changes a retriever config and fit that"
        )
    return target


def fitted_config(system: str, name: str, weights: Mapping[str, float], provenance: Sequence[str]) -> str:
    """A retriever config that inherits `system`'s config file and sets `weights` (provenance as comments)."""
    lines = [f"# {line}" for line in provenance]
    lines += ["defaults:", f"  - {system}", "  - _self_", "", f"name: {name}", "weights:"]
    lines += [f"  {signal}: {float(value):.4g}" for signal, value in weights.items()]
    return "\n".join(lines) + "\n"


@dataclass
class Fit:
    rows: pd.DataFrame
    weights: dict[str, float]
    per_question: pd.DataFrame | None  # held-out recall per question; None with --hold-out none

    @cached_property
    def table(self) -> pd.DataFrame | None:
        """`summary` of the held-out recall (its permutation tests run once)."""
        return None if self.per_question is None else summary(self.per_question)

    def provenance(self, system: str, fold: str, c: float, balance: bool) -> list[str]:
        """What the config's header says: the data, the fit, and the held-out figure."""
        import textwrap

        counts = self.rows.groupby("part")["qid"].nunique()
        parts = ", ".join(f"{p} {n}" for p, n in counts.items())
        text = (
            f"Fitted by `fixgraph fit-ltr --system {system}` on {dt.date.today().isoformat()}: the signal weights of "
            f"{system}, from {self.rows['qid'].nunique()} questions ({parts}); "
            f"pairwise logistic regression, C {c}, "
            + ("bridge and other questions half each." if balance else "every question the same.")
        )
        if self.table is not None:
            pooled = {str(k): float(v) for k, v in self.table.loc["pooled"].to_dict().items()}
            text += (
                f" Held out by {fold}: recall@8 {pooled['fitted']:.3f} vs the first stage's {pooled['first_stage']:.3f}"
                f" ({pooled['up']:.0f} up, {pooled['down']:.0f} down) over {pooled['n']:.0f} questions."
            )
        return textwrap.wrap(text, 110, break_on_hyphens=False)


def fit_ltr(
    parts: Sequence[tuple[Part, DictConfig]], system: str, fold: str = "corpus", c: float = 0.01, balance: bool = True
) -> Fit:
    if fold not in FOLDS:
        raise ConfigError(f"fit-ltr: --hold-out must be one of {', '.join(FOLDS)}, not {fold!r}")
    if c <= 0:
        raise ConfigError(f"fit-ltr: --C must be > 0, not {c}")
    if fold != "none":  # said before the signal pass, which takes minutes
        _two_groups(fold, {p.corpus if fold == "corpus" else p.label for p, _ in parts})
    rows = signal_rows(parts, system)
    per_question = None if fold == "none" else held_out(rows, fold, SIGNALS, c, balance)
    weights = dict(zip(SIGNALS, map(float, fit_weights(rows, SIGNALS, c, balance)), strict=True))
    return Fit(rows, weights, per_question)


def write_outputs(fit: Fit, folder: Path, config_text: str) -> None:
    """The signal rows (for later studies of the learner), held-out figures and the weights' config."""
    from fixgraph.io import write_json, write_text

    folder.mkdir(parents=True, exist_ok=True)
    fit.rows.to_parquet(folder / "signals.parquet", index=False)
    if fit.per_question is not None and fit.table is not None:
        fit.per_question.to_csv(folder / "held_out.csv")
        write_json(folder / "held_out.json", fit.table.reset_index().to_dict(orient="records"))
    write_text(folder / "weights.yaml", config_text)


def track(cfg: DictConfig, fit: Fit, params: Mapping[str, Any], folder: Path) -> str:
    """One MLflow run: the fit's settings as params, held-out recall@8 and the weights as metrics."""
    import mlflow

    from fixgraph.tracking import git_state, setup

    def key(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", text)

    metrics = {f"weight.{s}": w for s, w in fit.weights.items()}
    if fit.table is not None:
        for subset, row in fit.table.iterrows():
            metrics[key(f"held_out.recall_at_8.{subset}")] = float(row["fitted"])
            metrics[key(f"first_stage.recall_at_8.{subset}")] = float(row["first_stage"])
    with mlflow.start_run(experiment_id=setup(cfg), run_name=f"fit-ltr {params['name']}") as run:
        mlflow.set_tags({**git_state(), "stage": "fit-ltr", "system": str(params["system"])})
        mlflow.log_params({k: str(v) for k, v in params.items()})
        mlflow.log_metrics(metrics)
        mlflow.log_artifacts(str(folder))
        return str(run.info.run_id)
