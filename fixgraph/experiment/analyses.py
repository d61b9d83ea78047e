"""Extra outputs of an evaluation: input fingerprints, miss analysis and per question-type breakdowns.

Kept apart from evaluate.py so that the evaluate stage only gains two calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.config import systems_of
from fixgraph.evaluation.breakdown import by_qtype, qtype_markdown
from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.misses import miss_analysis, miss_counts
from fixgraph.evaluation.questions import Question
from fixgraph.experiment.fingerprint import system_fingerprint
from fixgraph.io import write_text
from fixgraph.retrieval.base import Hit


def fingerprints(
    cfg: DictConfig, questions: list[Question], corpus_hash: str, chunks_hash: str
) -> dict[str, dict[str, str]]:
    """system -> axis -> hash of the inputs it was scored from (the measurement guard's record)."""
    return {
        system: system_fingerprint(cfg, system_cfg, corpus_hash, chunks_hash, questions)
        for system, system_cfg in systems_of(cfg).items()
    }


def write_analyses(
    cfg: DictConfig,
    questions: list[Question],
    mapping: GoldMapping,
    rankings: dict[str, dict[str, list[Hit]]],
    doc_of: dict[str, str],
    per_question: pd.DataFrame,
    metrics: list[str],
    out: Path,
) -> dict[str, Any]:
    """Write misses.parquet, by_qtype.parquet and by_qtype.md into `out`; return what info.json records."""
    k = int(cfg.evaluation.main_k)
    misses = miss_analysis(questions, mapping, rankings, k, doc_of)
    misses.to_parquet(out / "misses.parquet", index=False)
    boot = cfg.evaluation.bootstrap
    breakdown = by_qtype(per_question, metrics, int(boot.resamples), float(boot.confidence), int(boot.seed))
    breakdown.to_parquet(out / "by_qtype.parquet", index=False)
    write_text(out / "by_qtype.md", "\n".join(qtype_markdown(breakdown, m) for m in metrics))
    return {"misses": {"k": k, "counts": miss_counts(misses, list(rankings))}}


def mlflow_extras(output_dir: Path, info: dict[str, Any], system: str) -> tuple[dict[str, str], dict[str, float]]:
    """Tags (input fingerprint) and metrics (miss counts, per-type means) for one system's child run."""
    from fixgraph.experiment.fingerprint import as_tags

    tags = as_tags(info.get("fingerprints", {}).get(system, {}))
    values: dict[str, float] = {}
    for miss, count in info.get("misses", {}).get("counts", {}).get(system, {}).items():
        values[f"misses_{miss}"] = float(count)
    breakdown_file = output_dir / "by_qtype.parquet"
    if breakdown_file.exists():
        breakdown = pd.read_parquet(breakdown_file)
        for row in breakdown[breakdown["system"] == system].to_dict(orient="records"):
            values[f"qtype.{row['qtype']}.{row['metric']}"] = float(row["mean"])
    return tags, values
