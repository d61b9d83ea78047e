"""Answer tables: quality metrics with CIs, abstention precision/recall, latency and tokens per stage,
and the paired comparison of every system against the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from omegaconf import DictConfig
from tabulate import tabulate

from fixgraph.answer.scoring import QUALITY_METRICS, STAGES
from fixgraph.answer.settings import RunSettings
from fixgraph.evaluation.comparison import ComparisonSettings, Family, compare
from fixgraph.evaluation.stats import Estimate

COST_METRICS = (*tuple(f"tokens_{s}" for s in STAGES[1:]), "tokens_total")


def _cell(estimate: Estimate | None) -> str:
    if estimate is None or estimate.n == 0 or estimate.mean != estimate.mean:
        return "n/a"
    return estimate.format()


def answer_table(
    summary: Mapping[str, Mapping[str, Estimate]],
    abstention: Mapping[str, Mapping[str, float | None]],
    latency: Mapping[str, Mapping[str, float]],
    confidence: float,
) -> str:
    quality = [[s, *(_cell(m.get(k)) for k in QUALITY_METRICS)] for s, m in summary.items()]
    parts = [
        f"Answer quality: mean [{confidence:.0%} bootstrap CI] over the questions where each metric applies "
        "(n/a: applies to none).",
        tabulate(quality, headers=["system", *QUALITY_METRICS], tablefmt="github"),
    ]

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    rows = [
        [s, fmt(a.get("abstention_precision")), fmt(a.get("abstention_recall")), _cell(summary[s].get("abstained"))]
        for s, a in abstention.items()
    ]
    parts += ["Abstention", tabulate(rows, headers=["system", "precision", "recall", "rate"], tablefmt="github")]
    cost_rows = []
    for system in summary:
        lat = latency.get(system, {})
        # model time: what each call took when generated (cached calls keep it), so a rerun reports it too
        keys = ["retrieve", *(f"{s}_model" for s in STAGES[1:]), "total_model"]
        cells = [f"{lat.get(f'{k}_p50_ms', 0) / 1000:.2f} / {lat.get(f'{k}_p95_ms', 0) / 1000:.2f}" for k in keys]
        tokens = [_cell(summary[system].get(m)) for m in COST_METRICS]
        cost_rows.append([system, *cells, *tokens])
    headers = [*(f"{s} s p50/p95" for s in (*STAGES, "total")), *COST_METRICS]
    parts += [
        "Cost per question (seconds p50 / p95 of model time, cached calls at their original time; tokens in+out, mean)",
        tabulate(cost_rows, headers=["system", *headers], tablefmt="github"),
    ]
    return "\n\n".join(parts) + "\n"


def judge_section(judge: Mapping[str, Any], confidence: float) -> str:
    """Who judged, and how it did against people on the graded set."""
    who = "deterministic key-fact rules" if judge["deterministic"] else f"model {judge['model']}"
    lines = [f"Judge: {judge['name']} ({who}; {judge['identity']})"]
    measured = judge.get("graded_set")
    if measured is None:
        lines.append("Judge vs people: not measured (no graded set).")
    else:
        low, high = measured["kappa_ci"]
        lines.append(
            f"Judge vs people on the graded set ({measured['matched']} answers): Cohen's kappa "
            f"{measured['kappa']:.3f} [{low:.3f}, {high:.3f}] ({confidence:.0%} bootstrap CI), linear weighted "
            f"{measured['kappa_linear']:.3f}, exact agreement {measured['exact']:.3f}."
        )
    verdict = judge["guard"]
    lines.append("Guard: informative." if verdict["informative"] else "Guard: " + "; ".join(verdict["flags"]) + ".")
    return "\n".join(lines) + "\n"


def compare_answers(
    cfg: DictConfig, settings: RunSettings, per_question: pd.DataFrame, baseline: str, systems: Sequence[str]
) -> tuple[str, list[dict[str, Any]]]:
    """Each metric on the questions where every system has a value (paired), against the baseline.

    Holm is applied over `answer.family_metrics` x systems (declared in config before the run); the
    other metrics are exploratory and reported with their raw p only.
    """
    from fixgraph.evaluation.significance import holm

    others = [s for s in systems if s != baseline]
    if baseline not in systems or not others:
        return "", []
    family_metrics = [str(m) for m in settings.family_metrics]
    rows: list[dict[str, Any]] = []
    for metric in (*QUALITY_METRICS, "tokens_total", "total_ms"):
        wide = per_question.pivot_table(index="qid", columns="system", values=metric, aggfunc="first", dropna=False)
        complete = wide[list(systems)].dropna() if set(systems) <= set(wide.columns) else wide.iloc[:0]
        if len(complete) < 2:
            continue
        subset = per_question[per_question["qid"].isin(complete.index) & per_question["system"].isin(systems)]
        result = compare(
            subset,
            [metric],
            baseline,
            list(systems),
            Family.declare(baseline, systems, [metric]),
            ComparisonSettings.from_config(cfg),
        )
        for record in result.table.to_dict(orient="records"):
            row = {str(k): v for k, v in record.items()}
            if row["system"] != baseline:
                rows.append({**row, "n_paired": len(complete), "in_family": metric in family_metrics})
    family = [r for r in rows if r["in_family"]]
    if family:
        adjusted = holm([float(r["p"]) for r in family])
        for row, p_holm in zip(family, adjusted, strict=False):
            row["p_holm"] = float(p_holm)
    for row in rows:
        if not row["in_family"]:
            row["p_holm"] = None
    keys = ["system", "metric", "n_paired", "mean", "diff", "diff_ci_low", "diff_ci_high", "p", "p_holm"]
    table = [[row.get(k) for k in keys] for row in rows]
    text = (
        f"Paired comparison vs {baseline} (bootstrap CI of the mean difference, permutation p; Holm over "
        f"{', '.join(family_metrics)}; other metrics exploratory)\n\n"
        + tabulate(table, headers=keys, tablefmt="github", floatfmt=".3f")
        + "\n"
    )
    return text, rows
