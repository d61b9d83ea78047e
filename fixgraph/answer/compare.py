"""`fixgraph answers-compare`: two or more answers runs on the same questions, paired.

The question a generator change asks (a fine-tuned model against the base model, `llm=A` vs `llm=B`):
run `fixgraph answers` once per setting with the same split, sample size and seed (the stratified sample
is a function of them, so both runs answer the same questions), then compare the runs' per-question
tables here. Each side is labelled `<llm>/<system>` (or `<run name>/<system>` when the models are the
same); the paired tests are the answers run's own (bootstrap CI of the mean difference, permutation p,
Holm over `answer.family_metrics`). Runs scored on different questions are refused: a paired test
needs the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.answer.report import compare_answers
from fixgraph.answer.settings import RunSettings
from fixgraph.evaluation.protocol_errors import ComparisonError
from fixgraph.io import read_json


def load_run(folder: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    info_file, table_file = folder / "info.json", folder / "per_question.parquet"
    if not info_file.exists() or not table_file.exists():
        raise ComparisonError(f"{folder}: not an answers run (needs info.json and per_question.parquet)")
    return read_json(info_file), pd.read_parquet(table_file)


def side_labels(infos: Sequence[dict[str, Any]]) -> list[str]:
    models = [str(i["llm"]["name"]) for i in infos]
    names = [str(i["name"]) for i in infos]
    return models if len(set(models)) == len(models) else names


def compare_runs(
    cfg: DictConfig, folders: Sequence[Path], system: str | None = None, baseline: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Markdown table and rows of the paired comparison of `system` (default: every shared one) across runs."""
    if len(folders) < 2:
        raise ComparisonError("answers-compare needs at least two answers runs")
    runs = [load_run(f) for f in folders]
    infos = [info for info, _ in runs]
    qids = [sorted(info.get("qids") or []) for info in infos]
    if any(q != qids[0] for q in qids[1:]) or len({i["questions_hash"] for i in infos}) > 1:
        raise ComparisonError("the runs answered different questions: a paired comparison needs the same ones")
    shared = set.intersection(*(set(info["systems"]) for info in infos))
    systems = [system] if system else [s for s in infos[0]["systems"] if s in shared]
    if not systems or not set(systems) <= shared:
        raise ComparisonError(f"system {system!r} is not in every run; shared: {', '.join(sorted(shared))}")
    labels = side_labels(infos)
    frames = []
    for label, (_, frame) in zip(labels, runs, strict=True):
        part = frame[frame["system"].isin(systems)].copy()
        part["system"] = label + "/" + part["system"]
        frames.append(part)
    table = pd.concat(frames, ignore_index=True)
    settings = RunSettings.from_config(cfg.answer)
    texts, rows = [], []
    for name in systems:
        sides = [f"{label}/{name}" for label in labels]
        base = f"{baseline}/{name}" if baseline else sides[0]
        if base not in sides:
            raise ComparisonError(f"baseline {baseline!r} is not among {', '.join(labels)}")
        text, found = compare_answers(cfg, settings, table[table["system"].isin(sides)], base, sides)
        texts.append(text)
        rows += found
    return "\n".join(texts), rows
