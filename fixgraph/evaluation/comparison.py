"""One-call paired comparison of systems against a baseline (in the spirit of PyTerrier's Experiment).

    report = compare(per_question, metrics=["recall_at_8", "mrr"], baseline="bm25", family=family)
    report.table      # one row per (system, metric): mean, CI, difference vs baseline, its CI, p, p_holm, d_z
    report.per_query  # one row per (system, metric, question): value, baseline value, difference
    report.markdown() / report.to_json()

The Holm family is the set of hypotheses (system vs baseline on a metric) declared before the scores
are seen; comparisons outside it are reported with their raw p-value and no p_holm (exploratory). The
baseline is never a member of its own family: `Family` refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from fixgraph.evaluation.protocol_errors import ComparisonError
from fixgraph.evaluation.significance import (
    Engine,
    bootstrap_means,
    effect_size,
    holm,
    paired_permutation_tests,
)


@dataclass(frozen=True)
class Family:
    """Hypotheses corrected together: each (system, metric) compared with `baseline`."""

    baseline: str
    hypotheses: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.hypotheses:
            raise ComparisonError("a family of hypotheses needs at least one (system, metric) comparison")
        for system, metric in self.hypotheses:
            if system == self.baseline:
                raise ComparisonError(
                    f"the baseline {self.baseline!r} cannot be in its own family (hypothesis on {metric!r})"
                )
        if len(set(self.hypotheses)) != len(self.hypotheses):
            raise ComparisonError("a family lists a hypothesis twice")

    @classmethod
    def declare(cls, baseline: str, systems: Iterable[str], metrics: Iterable[str]) -> Family:
        """Every system except the baseline, on every given metric."""
        metric_list = list(dict.fromkeys(metrics))
        return cls(baseline, tuple((s, m) for s in dict.fromkeys(systems) if s != baseline for m in metric_list))

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "hypotheses": [list(h) for h in self.hypotheses]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Family:
        return cls(str(data["baseline"]), tuple((str(s), str(m)) for s, m in data["hypotheses"]))


@dataclass
class ComparisonSettings:
    resamples: int = 2000
    permutations: int = 10_000
    confidence: float = 0.95
    seed: int = 0
    engine: Engine = "fast"

    @classmethod
    def from_config(cls, cfg: Any) -> ComparisonSettings:
        """`evaluation.bootstrap` and `comparison` of a composed config."""
        boot = cfg.evaluation.bootstrap
        comparison = cfg.comparison
        return cls(
            resamples=int(boot.resamples),
            permutations=int(comparison.permutations),
            confidence=float(boot.confidence),
            seed=int(boot.seed),
            engine=str(comparison.engine),  # type: ignore[arg-type]
        )


@dataclass
class Comparison:
    baseline: str
    systems: list[str]
    metrics: list[str]
    family: Family
    table: pd.DataFrame
    per_query: pd.DataFrame
    settings: ComparisonSettings = field(default_factory=ComparisonSettings)

    def row(self, system: str, metric: str) -> dict[str, Any]:
        match = self.table[(self.table["system"] == system) & (self.table["metric"] == metric)]
        if match.empty:
            raise KeyError(f"no comparison row for system {system!r}, metric {metric!r}")
        return dict(match.iloc[0])

    def markdown(self, digits: int = 3) -> str:
        """Systems x metrics: `mean [CI]`, and for non-baseline systems `diff [CI] p= p_holm=`."""
        rows = []
        tested = {system for system, _ in self.family.hypotheses}
        for system in self.systems:
            role = " (baseline)" if system == self.baseline else "" if system in tested else " (exploratory)"
            cells = [system + role]
            for metric in self.metrics:
                r = self.row(system, metric)
                cell = f"{r['mean']:.{digits}f} [{r['ci_low']:.{digits}f}, {r['ci_high']:.{digits}f}]"
                if system != self.baseline:
                    low, high = r["diff_ci_low"], r["diff_ci_high"]
                    cell += f"<br>Δ {r['diff']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"
                    cell += f" p={_fmt_p(r['p'])}"
                    if r["in_family"]:
                        cell += f" p_Holm={_fmt_p(r['p_holm'])}"
                cells.append(cell)
            rows.append(cells)
        n = int(self.table["n"].iloc[0]) if len(self.table) else 0
        s = self.settings
        caption = (
            f"Mean [{s.confidence:.0%} bootstrap CI] over {n} paired questions; Δ = system − {self.baseline} "
            f"[{s.confidence:.0%} CI]; p: two-sided paired permutation test ({s.permutations} sign flips, seed "
            f"{s.seed}); p_Holm: Holm-corrected over the declared family of {len(self.family.hypotheses)} "
            "hypotheses (cells without it are exploratory)."
        )
        return tabulate(rows, headers=["system", *self.metrics], tablefmt="github") + "\n\n" + caption + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "systems": self.systems,
            "metrics": self.metrics,
            "family": self.family.to_dict(),
            "settings": asdict(self.settings),
            "rows": [_jsonable(r) for r in self.table.to_dict(orient="records")],
        }


def _fmt_p(p: float) -> str:
    return "n/a" if p != p else (f"{p:.2g}" if p < 0.001 else f"{p:.3f}")


def _jsonable(row: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, np.generic):
            value = value.item()
        out[str(key)] = None if isinstance(value, float) and value != value else value
    return out


def paired_matrix(per_question: pd.DataFrame, metric: str, systems: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Question ids and a (systems x questions) array of one metric, refusing unpaired data."""
    if metric not in per_question.columns:
        raise ComparisonError(f"unknown metric {metric!r}; columns: {', '.join(per_question.columns)}")
    wide = per_question.pivot_table(index="qid", columns="system", values=metric, aggfunc="first", dropna=False)
    missing_systems = [s for s in systems if s not in wide.columns]
    if missing_systems:
        raise ComparisonError(f"no per-question {metric!r} for system(s) {', '.join(missing_systems)}")
    wide = wide[list(systems)]
    holes = wide[wide.isna().any(axis=1)]
    if not holes.empty:
        example = holes.index[0]
        absent = [s for s in systems if pd.isna(wide.loc[example, s])]
        raise ComparisonError(
            f"{metric}: questions are not paired across systems ({len(holes)} lack a value, "
            f"e.g. {example!r} for {', '.join(absent)})"
        )
    # the questions in the order the table lists them: the same bootstrap resamples as report.summarise,
    # so a system's CI here equals the one in the evaluation's table
    wide = wide.loc[[q for q in dict.fromkeys(per_question["qid"]) if q in wide.index]]
    return [str(q) for q in wide.index], wide.to_numpy(dtype=float).T


def compare(
    per_question: pd.DataFrame,
    metrics: Sequence[str],
    baseline: str,
    systems: Sequence[str] | None = None,
    family: Family | None = None,
    settings: ComparisonSettings | None = None,
) -> Comparison:
    """Means with CIs for every system, and every other system against `baseline` on every metric.

    `per_question` is long: columns `system`, `qid` and one column per metric, one row per scored
    (system, question). Without a `family`, every comparison is in it (all non-baseline systems x
    `metrics`), which is only right when the family was decided before looking at the data.
    """
    settings = settings or ComparisonSettings()
    all_systems = [str(s) for s in dict.fromkeys(per_question["system"])]
    systems = list(dict.fromkeys(systems)) if systems is not None else all_systems
    if baseline not in all_systems:
        raise ComparisonError(f"baseline {baseline!r} is not among the systems: {', '.join(all_systems)}")
    unknown = [s for s in systems if s not in all_systems]
    if unknown:
        raise ComparisonError(f"unknown system(s) {', '.join(unknown)}; have: {', '.join(all_systems)}")
    systems = [baseline, *(s for s in systems if s != baseline)]
    family = family or Family.declare(baseline, systems, metrics)
    if family.baseline != baseline:
        raise ComparisonError(f"the family was declared against {family.baseline!r}, not {baseline!r}")
    stray = [h for h in family.hypotheses if h[0] not in systems or h[1] not in metrics]
    if stray:
        raise ComparisonError(f"family hypotheses outside this comparison: {stray}")

    rows: list[dict[str, Any]] = []
    per_query: list[pd.DataFrame] = []
    others = systems[1:]
    for metric in metrics:
        qids, values = paired_matrix(per_question, metric, systems)
        means = bootstrap_means(values, settings.resamples, settings.confidence, settings.seed)
        diffs = values[1:] - values[0]
        diff_cis = bootstrap_means(diffs, settings.resamples, settings.confidence, settings.seed) if others else []
        tests = paired_permutation_tests(diffs, settings.permutations, settings.seed, settings.engine) if others else []
        for i, system in enumerate(systems):
            row: dict[str, Any] = {
                "system": system,
                "metric": metric,
                "n": len(qids),
                "mean": means[i].mean,
                "ci_low": means[i].low,
                "ci_high": means[i].high,
                "ci_method": means[i].method,
            }
            if i == 0:
                row.update(diff=0.0, in_family=False)
            else:
                effect = effect_size(diffs[i - 1])
                row.update(
                    diff=effect.mean_difference,
                    diff_ci_low=diff_cis[i - 1].low,
                    diff_ci_high=diff_cis[i - 1].high,
                    diff_ci_method=diff_cis[i - 1].method,
                    p=tests[i - 1].p_value,
                    permutations=tests[i - 1].permutations,
                    exact_test=tests[i - 1].exact,
                    cohens_dz=effect.cohens_dz,
                    wins=effect.wins,
                    ties=effect.ties,
                    losses=effect.losses,
                    in_family=(system, metric) in family.hypotheses,
                )
            rows.append(row)
        for i, system in enumerate(others, start=1):
            per_query.append(
                pd.DataFrame(
                    {
                        "system": system,
                        "metric": metric,
                        "qid": qids,
                        "value": values[i],
                        "baseline_value": values[0],
                        "diff": values[i] - values[0],
                    }
                )
            )
    table = pd.DataFrame(rows)
    table["p_holm"] = np.nan
    if "p" not in table.columns:
        table["p"] = np.nan
    members = table.index[table["in_family"].astype(bool)]
    # Holm over the declared family only: hypotheses outside it do not dilute (or inflate) the correction
    table.loc[members, "p_holm"] = holm(table.loc[members, "p"].tolist())
    columns = ["system", "metric", "n", "mean", "ci_low", "ci_high", "ci_method", "diff"]
    rest = [c for c in table.columns if c not in columns]
    table = table[columns + rest]
    per_query_frame = (
        pd.concat(per_query, ignore_index=True)
        if per_query
        else pd.DataFrame(columns=["system", "metric", "qid", "value", "baseline_value", "diff"])
    )
    return Comparison(baseline, systems, list(metrics), family, table, per_query_frame, settings)
