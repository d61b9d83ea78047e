"""Pseudo-relevance feedback (Rocchio) on the dense first stage, simulated on dev parts.

The query vector q becomes normalise(q + w x mean of the top m chunks' own vectors), and the chunks are
scored again with it (block scores included), inside the opened system, so link expansion on top sees
the new first-stage ranking while it still matches link contexts with q itself. (0, 0) is the system
as configured. Prints recall@8 and MRR per (part, system, m, w) and writes per-question recall@8 to
--out, for pooled paired comparisons. Dev parts only: never a locked split.

    python experiments/quality/prf.py --parts dev:gnome_help,evolution_dev:evolution_help \\
        --systems dense_mpnet_blocks,link_expansion_blocks --out /tmp/prf.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.config import compose, systems_of
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.splits import resolve_questions
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system

GRID = [(0, 0.0)] + [(m, w) for m in (1, 2, 3, 5, 8) for w in (0.1, 0.2, 0.3, 0.5)]


def with_feedback(dense: Any, scores: Any, m: int, w: float) -> Any:
    def rescored(vector: np.ndarray) -> np.ndarray:
        first = scores(vector)
        if m == 0:
            return first
        top = np.argsort(-first, kind="stable")[:m]  # chunk positions; a chunk's own vector is its row
        moved = vector + w * dense._matrix[top].mean(axis=0)
        return scores(moved / np.linalg.norm(moved))

    return rescored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", required=True, help="split:corpus,... (dev parts)")
    parser.add_argument("--systems", default="dense_mpnet_blocks,link_expansion_blocks")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out: dict[str, dict[str, float]] = {}
    for part in args.parts.split(","):
        split, corpus = part.split(":")
        cfg = compose([f"split={split}", f"corpus={corpus}", "experiment=leaderboard"])
        questions = resolve_questions(cfg, None, None).questions  # refuses locked questions
        chunk(cfg)
        docs, chunks = load_documents(cfg), load_chunks(cfg)
        mapping = map_gold(questions, docs, chunks)
        doc_of = {c.id: c.doc_id for c in chunks}
        for name in args.systems.split(","):
            system = open_system(cfg, name, systems_of(cfg)[name], chunks)
            dense = (
                system.first_stage if not hasattr(system.first_stage, "first_stage") else system.first_stage.first_stage
            )
            scores = dense._chunk_scores
            for m, w in GRID:
                dense._chunk_scores = with_feedback(dense, scores, m, w)
                rankings = {q.qid: system.search(q.question, 100) for q in questions}
                frame = retrieval_metrics(questions, mapping, rankings, doc_of, [8], 10)
                out[f"{split}|{name}|{m}|{w}"] = {q: float(v) for q, v in frame["recall_at_8"].items()}
                print(split, name, m, w, round(frame["recall_at_8"].mean(), 3), round(frame["mrr"].mean(), 3))
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
