"""ltr_ft (ltr on mpnet fine-tuned on the other corpora's dev questions) against ltr, on the same dev parts.

Both inputs are `fixgraph fit-ltr` signal rows over the same parts, one with `--system ltr`, one with
`--system ltr_ft` (every candidate of every dev question, with its signals). Printed, per part, over bridge
and other questions and pooled, recall@8 of each system:
- with the weights the systems ship (ltr's, fitted on the stock signals of all dev parts: in-sample for
  ltr, and for ltr_ft the weights of other signals);
- held out by corpus: each corpus ranked with weights fitted on the other corpus's rows (for ltr_ft,
  rows whose dense signals come from the models trained for that other corpus).
with paired sign-flip tests of ltr_ft against ltr. Dev rows only: fit-ltr refuses locked questions.

    P=dev:gnome_help,...,evolution_fresh2_bridge_dev:evolution_help
    fixgraph fit-ltr --system ltr --parts $P --no-track          # artifacts/ltr_fit/ltr_fitted/
    fixgraph fit-ltr --system ltr_ft --parts $P --no-track       # artifacts/ltr_fit/ltr_ft_fitted/
    python experiments/quality/ltr_ft.py --stock artifacts/ltr_fit/ltr_fitted/signals.parquet \\
        --tuned artifacts/ltr_fit/ltr_ft_fitted/signals.parquet
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from fixgraph.config import compose
from fixgraph.experiment.ltr_fit import held_out, recall_at, summary
from fixgraph.retrieval.ltr import SIGNALS, weight_vector


def shipped(rows: pd.DataFrame, system: str) -> pd.Series:
    """Per-question recall@8 with the weights the system's config holds."""
    cfg = compose([f"+retriever@systems.{system}={system}"])
    weights = weight_vector(cfg.systems[system].weights)
    return recall_at(rows.assign(score=rows[list(SIGNALS)].to_numpy() @ weights), "score")


def table(info: pd.DataFrame, stock: pd.Series, tuned: pd.Series, label: str) -> None:
    print(f"\n{label}\n{summary(info.assign(ltr=stock, ltr_ft=tuned), 'ltr', 'ltr_ft').round(3)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stock", type=Path, required=True, help="fit-ltr signals.parquet of --system ltr")
    parser.add_argument("--tuned", type=Path, required=True, help="fit-ltr signals.parquet of --system ltr_ft")
    args = parser.parse_args()
    rows = {"ltr": pd.read_parquet(args.stock), "ltr_ft": pd.read_parquet(args.tuned)}
    if set(rows["ltr"]["qid"]) != set(rows["ltr_ft"]["qid"]):
        raise SystemExit("--stock and --tuned hold different questions: run fit-ltr on the same --parts")
    info = rows["ltr"].groupby("qid")[["part", "qtype"]].first()
    first = {s: recall_at(r.assign(first=-r["base_rank"].astype(float)), "first") for s, r in rows.items()}
    print(
        "first stages (link_expansion_blocks / link_expansion_ft_blocks):",
        {s: round(v.mean(), 3) for s, v in first.items()},
    )
    table(info, shipped(rows["ltr"], "ltr"), shipped(rows["ltr_ft"], "ltr_ft"), "shipped weights")
    held = {s: held_out(r, "corpus")["fitted"] for s, r in rows.items()}
    table(info, held["ltr"], held["ltr_ft"], "held out by corpus (refitted)")


if __name__ == "__main__":
    main()
