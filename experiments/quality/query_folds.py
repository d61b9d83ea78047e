"""mpnet's query side fine-tuned (trainer query_encoder_mpnet_dev) held out by fold of the dev parts, through
the built trainer and systems: what `make models` trains, scored on questions it never saw.

Folds as experiments/quality/ltr_dev_folds.py (a: trainer bi_encoder_mpnet_dev_fold_a's five parts; b: the
other two). For each fold the trainer runs on that fold's parts only, into its own folder:

    F=training.trainers.query_encoder_mpnet_dev
    fixgraph train --trainer query_encoder_mpnet_dev "$F.data.questions=[bridge_dev:gnome_help,...]" \\
        $F.output=/tmp/qfold/model_a $F.data_dir=/tmp/qfold/data_a

and each part of the other fold is scored by the leaderboard's stock systems beside the three on the query
model (one override points them all at it):

    fixgraph evaluate --no-track --name qfold-a-dev corpus=gnome_help split=dev experiment=leaderboard \\
        '~systems.ltr_dev' '~systems.dense_dev_blocks' '~systems.link_expansion_dev_blocks' ... \\
        +retriever@systems.dense_dev_queries_blocks=dense_dev_queries_blocks \\
        +retriever@systems.link_expansion_dev_queries_blocks=link_expansion_dev_queries_blocks \\
        +retriever@systems.ltr_dev_queries=ltr_dev_queries $F.output=/tmp/qfold/model_a

Printed: recall@8 and MRR per part and corpus, and paired sign-flip tests over bridge, other and all
questions for the query model against the stock systems, and for the graph over it (ltr_dev_queries vs
dense_dev_queries_blocks). Dev parts only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from ltr_dev_folds import evaluations, folds, print_tables

from fixgraph.config import compose

SYSTEMS = ("dense_mpnet_blocks", "dense_dev_queries_blocks", "link_expansion_blocks", "ltr", "ltr_dev_queries")
PAIRS = (
    ("ltr_dev_queries", "ltr"),  # the query model under the graph ranker
    ("dense_dev_queries_blocks", "dense_mpnet_blocks"),  # the query model alone
    ("ltr_dev_queries", "dense_dev_queries_blocks"),  # the graph over the query model
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts"))
    parser.add_argument("--prefix", default="qfold", help="the evaluations' names: PREFIX-<model>-<split>")
    args = parser.parse_args()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 20)
    fold_a, fold_b = folds(compose([]))
    print_tables(evaluations(args.artifacts, fold_a, fold_b, args.prefix), SYSTEMS, PAIRS)


if __name__ == "__main__":
    main()
