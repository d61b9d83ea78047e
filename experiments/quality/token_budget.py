"""Recall of gold quotes at a fixed token budget: compares chunkings fairly.

recall@8 counts chunks, so a chunker with bigger chunks puts more text in the top 8 and scores higher
without ranking better. Here each run's ranked chunks are read in order until `budget` tokens (the
chunker's own counts) are used up; a gold quote counts as found when every chunk it maps to is inside.
Same questions, same budget, two chunkings: what is left is the ranking.

    python experiments/quality/token_budget.py \\
        --base artifacts/eval/gnome_help/q-leaderboard-dev /tmp/chunks_base.parquet \\
        --other artifacts/eval/gnome_help/q-merge-dev /tmp/chunks_merged.parquet \\
        --systems dense,dense_mpnet,link_expansion --budgets 800,1200,1600
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd


def ranked(run_file: Path) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = defaultdict(list)
    for line in run_file.read_text().splitlines():
        qid, _, chunk_id, *_ = line.split()
        runs[qid].append(chunk_id)  # TREC run files are written in rank order
    return runs


def quote_recall(evaluation: Path, tokens: pd.Series, system: str, budget: int) -> tuple[float, float]:
    """(mean over questions of the share of gold quotes inside the budget, mean tokens of the top 8)."""
    runs = ranked(evaluation / "runs" / f"{system}.trec")
    found: dict[str, list[bool]] = defaultdict(list)
    for line in (evaluation / "gold_mapping.jsonl").read_text().splitlines():
        mapping = json.loads(line)
        if mapping["status"] != "mapped":
            continue
        inside, used = set(), 0
        for chunk_id in runs[mapping["qid"]]:
            used += int(tokens[chunk_id])
            if used > budget:
                break
            inside.add(chunk_id)
        found[mapping["qid"]].append(all(c in inside for c in mapping["chunk_ids"]))
    top8 = [sum(int(tokens[c]) for c in runs[q][:8]) for q in found]
    return float(np.mean([np.mean(v) for v in found.values()])), float(np.mean(top8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", nargs=2, required=True, metavar=("EVALUATION", "CHUNKS"))
    parser.add_argument("--other", nargs=2, required=True, metavar=("EVALUATION", "CHUNKS"))
    parser.add_argument("--systems", required=True, help="comma-separated systems present in both")
    parser.add_argument("--budgets", default="800,1200,1600")
    args = parser.parse_args()
    sides = [(Path(e), pd.read_parquet(c).set_index("id")["n_tokens"]) for e, c in (args.base, args.other)]
    budgets = [int(b) for b in args.budgets.split(",")]
    print("| system | " + " | ".join(f"quote recall @ {b} tokens" for b in budgets) + " | top-8 tokens |")
    print("|---" * (len(budgets) + 2) + "|")
    for system in args.systems.split(","):
        cells = []
        for budget in budgets:
            (base, _), (other, _) = (quote_recall(e, t, system, budget) for e, t in sides)
            cells.append(f"{base:.3f} -> {other:.3f}")
        (_, base_top8), (_, other_top8) = (quote_recall(e, t, system, budgets[0]) for e, t in sides)
        print(f"| {system} | " + " | ".join(cells) + f" | {base_top8:.0f} -> {other_top8:.0f} |")


if __name__ == "__main__":
    main()
