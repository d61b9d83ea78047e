"""Comparison plots as PNG files (matplotlib, Agg backend: no display needed on servers or CI).

- metric_with_ci: each system's mean of each metric with its bootstrap CI (a panel per metric);
- recall_curves: mean recall@k against k for each system;
- qtype_bars: one metric per question type, a bar per system.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")  # before pyplot is imported anywhere: headless
    import matplotlib.pyplot as plt

    return plt


def metric_with_ci(table: pd.DataFrame, metrics: Sequence[str], path: Path) -> Path:
    """One panel per metric: each system's mean with its CI (`table`: a Comparison.table)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics) + 1, 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        rows = table[table["metric"] == metric]
        x = list(range(len(rows)))
        means = rows["mean"].to_numpy()
        err = [means - rows["ci_low"].to_numpy(), rows["ci_high"].to_numpy() - means]
        ax.errorbar(x, means, yerr=err, fmt="o", capsize=4)
        ax.set_xticks(x, [str(s) for s in rows["system"]], rotation=30, ha="right")
        ax.set_title(metric, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("mean and bootstrap CI", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def recall_curves(per_question: pd.DataFrame, path: Path, systems: Sequence[str] | None = None) -> Path | None:
    """Mean recall_at_k against k, from the recall_at_<k> columns of a long per-question table."""
    columns = sorted(
        (int(m.group(1)), c) for c in per_question.columns if (m := re.fullmatch(r"recall_at_(\d+)", str(c)))
    )
    if not columns:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for system in systems or list(dict.fromkeys(per_question["system"])):
        rows = per_question[per_question["system"] == system]
        ax.plot([k for k, _ in columns], [rows[c].mean() for _, c in columns], marker="o", label=str(system))
    ax.set_xlabel("k")
    ax.set_ylabel("mean recall@k")
    ax.set_title("recall@k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def qtype_bars(per_question: pd.DataFrame, metric: str, path: Path) -> Path:
    """Mean of `metric` per question type, one bar per system."""
    plt = _pyplot()
    means = per_question.groupby(["qtype", "system"], sort=True)[metric].mean().unstack("system")
    systems = [s for s in dict.fromkeys(per_question["system"]) if s in means.columns]
    means = means[systems]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(means.index) + 2), 3.5))
    width = 0.8 / max(len(systems), 1)
    for i, system in enumerate(systems):
        positions = [j + i * width for j in range(len(means.index))]
        ax.bar(positions, means[system].to_numpy(), width=width, label=str(system))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(means.index))], [str(q) for q in means.index])
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by question type")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
