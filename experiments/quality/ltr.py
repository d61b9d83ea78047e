"""Studies of the `ltr` learner on saved signal rows: which signals, which C, which hold-out.

`fixgraph fit-ltr` (fixgraph/experiment/ltr_fit.py) is how weights are fitted and written; it saves the
signal rows it fitted on (`artifacts/ltr_fit/<name>/signals.parquet`). This script refits those rows (or
rows with extra columns added by a study) with a subset of signals, and prints the held-out table, so a
candidate signal can be judged the way quality.md judges them before it becomes part of the retriever.
Dev parts only: the rows come from `fixgraph fit-ltr`, which refuses locked questions.

    fixgraph fit-ltr --parts dev:gnome_help,evolution_dev:evolution_help --hold-out none --no-track
    python experiments/quality/ltr.py fit --signals artifacts/ltr_fit/ltr_fitted/signals.parquet --balance
    python experiments/quality/ltr.py fit --signals rows.parquet --use own,line,reach,bm25,maxsim --balance

(`signals`, which wrote the rows before `fit-ltr` existed, is now `fixgraph fit-ltr`; the rows' part labels
are `split:corpus`, and they no longer carry the plain dense score quality.md's earlier tables compared with.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from fixgraph.experiment.ltr_fit import fit_weights, held_out, summary
from fixgraph.retrieval.ltr import SIGNALS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fitting = sub.add_parser("fit")
    fitting.add_argument("--signals", type=Path, required=True, help="signal rows (fixgraph fit-ltr's signals.parquet)")
    fitting.add_argument("--use", default=",".join(SIGNALS), help="signals (columns) the model may weight")
    fitting.add_argument("--C", type=float, default=0.01, help="inverse L2 strength")
    fitting.add_argument("--hold-out", choices=("corpus", "part"), default="corpus", help="what each fit leaves out")
    fitting.add_argument("--balance", action="store_true", help="bridge and other questions weigh half each")
    args = parser.parse_args()
    rows = pd.read_parquet(args.signals)
    names = args.use.split(",")
    per_question = held_out(rows, args.hold_out, names, args.C, args.balance)
    print(summary(per_question).round(3).to_string())
    per_question.to_csv(args.signals.with_suffix(".per_question.csv"))
    print("weights (all parts):")
    for name, weight in zip(names, fit_weights(rows, names, args.C, args.balance), strict=True):
        print(f"  {name}: {weight:.4g}")


if __name__ == "__main__":
    main()
