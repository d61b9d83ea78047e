"""Paired tests of issue 16 on question subsets: bridge questions pooled over the dev split and the
bridge-dev file, and the dev split's other questions; Holm over a family declared here, before looking.

    python experiments/quality/report.py artifacts/eval/gnome_help/q-leaderboard-dev \
        artifacts/eval/gnome_help/q-leaderboard-bridge --baseline dense_mpnet --family link_expansion

Reads each evaluation's per_question.parquet (the evaluate stage's output); prints markdown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from fixgraph.evaluation.comparison import ComparisonSettings, Family, compare

METRIC = "recall_at_8"


def load(dirs: list[Path]) -> pd.DataFrame:
    frames = [pd.read_parquet(d / "per_question.parquet").assign(source=d.name) for d in dirs]
    rows = pd.concat(frames, ignore_index=True)
    return rows[rows["scored"]] if "scored" in rows.columns else rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluations", nargs="+", type=Path)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--family", required=True, help="comma-separated systems tested against the baseline")
    parser.add_argument("--dev", default=None, help="name of the dev-split evaluation folder (default: the first)")
    parser.add_argument(
        "--locked",
        type=Path,
        action="append",
        default=[],
        help="a frozen split file (split.json): its test questions are dropped before any statistic",
    )
    args = parser.parse_args()
    rows = load(args.evaluations)
    for split_file in args.locked:
        questions = json.loads(split_file.read_text(encoding="utf-8"))["questions"]
        rows = rows[~rows["qid"].isin([q for q, v in questions.items() if v["part"] == "test"])]
    family_systems = args.family.split(",")
    systems = [args.baseline, *family_systems]
    rows = rows[rows["system"].isin(systems)]
    dev = args.dev or args.evaluations[0].name
    subsets = {
        "bridge questions (dev split + bridge-dev file)": rows[rows["qtype"] == "bridge"],
        "dev split, non-bridge questions": rows[(rows["source"] == dev) & (rows["qtype"] != "bridge")],
        "dev split, all scored questions": rows[rows["source"] == dev],
    }
    for source in rows["source"].unique():
        if source != dev:
            subsets[f"{source}, all"] = rows[rows["source"] == source]
    if rows["source"].nunique() > 1:
        subsets["every evaluation pooled"] = rows
    settings = ComparisonSettings()
    for title, subset in subsets.items():
        if subset.empty:  # e.g. only a bridge file given: no dev-split subsets
            continue
        family = Family.declare(args.baseline, family_systems, [METRIC])
        result = compare(subset, [METRIC], args.baseline, systems, family, settings)
        print(f"### {title} (n = {subset['qid'].nunique()})\n")
        print(result.markdown())
        print()


if __name__ == "__main__":
    main()
