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
dense_dev_queries_blocks).

`--whole-prefix wfold`: also the whole-model fine-tune (ltr_dev's recipe) trained on the same folds, its
evaluations named `wfold-<model>-<split>` with dense_dev_blocks and ltr_dev pointed at the fold's model:

    fixgraph train --trainer bi_encoder_mpnet_dev "$W.data.questions=[dev:gnome_help,...]" \\
        $W.output=/tmp/wfold/model_b $W.data_dir=/tmp/wfold/data_b      # W=training.trainers.bi_encoder_mpnet_dev
    fixgraph evaluate --no-track --name wfold-b-bridge_dev corpus=gnome_help split=bridge_dev experiment=single \\
        +retriever@systems.dense_dev_blocks=dense_dev_blocks +retriever@systems.ltr_dev=ltr_dev \\
        $W.output=/tmp/wfold/model_b

(fold a's model: the DVC stage's, `$W.output=artifacts/models/bi_encoder_mpnet_dev_fold_a`), and the cheap
twins paired with them question by question. Dev parts only.
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
WHOLE_SYSTEMS = ("dense_dev_blocks", "ltr_dev")
WHOLE_PAIRS = (
    ("dense_dev_queries_blocks", "dense_dev_blocks"),  # query side only vs the whole model, dense
    ("ltr_dev_queries", "ltr_dev"),  # the same under the graph ranker
    ("ltr_dev", "dense_dev_blocks"),  # the graph over the whole model
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts"))
    parser.add_argument("--prefix", default="qfold", help="the evaluations' names: PREFIX-<model>-<split>")
    parser.add_argument("--whole-prefix", help="the whole-model fold evaluations' names, if any")
    args = parser.parse_args()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 20)
    fold_a, fold_b = folds(compose([]))
    rows = evaluations(args.artifacts, fold_a, fold_b, args.prefix)
    if not args.whole_prefix:
        print_tables(rows, SYSTEMS, PAIRS)
        return
    whole = evaluations(args.artifacts, fold_a, fold_b, args.whole_prefix)
    rows = pd.concat([rows, whole[whole["system"].isin(WHOLE_SYSTEMS)]])
    print_tables(rows, SYSTEMS + WHOLE_SYSTEMS, PAIRS + WHOLE_PAIRS)


if __name__ == "__main__":
    main()
