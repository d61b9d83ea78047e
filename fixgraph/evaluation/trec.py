"""TREC run and qrels files, so every metric can be recomputed with trec_eval or ir-measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fixgraph.io import atomic_open
from fixgraph.retrieval.base import Hit

# trec_eval sorts by score and breaks ties by document id; scores are nudged down on ties so that
# every tool reads exactly the order the system produced.
TIE_EPSILON = 1e-6


def write_run(path: Path, rankings: Mapping[str, Sequence[Hit]], tag: str) -> None:
    with atomic_open(path) as fh:
        for qid in sorted(rankings):
            previous = float("inf")
            for rank, hit in enumerate(rankings[qid], start=1):
                score = min(round(hit.score, 6), round(previous - TIE_EPSILON, 6))
                fh.write(f"{qid} Q0 {hit.chunk_id} {rank} {score:.6f} {tag}\n")
                previous = score


def write_qrels(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_open(path) as fh:
        for qid in sorted(qrels):
            for doc_id in sorted(qrels[qid]):
                fh.write(f"{qid} 0 {doc_id} {qrels[qid][doc_id]}\n")


def read_run(path: Path) -> dict[str, list[Hit]]:
    rankings: dict[str, list[Hit]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, doc_id, _, score, _ = line.split()
        rankings.setdefault(qid, []).append(Hit(doc_id, float(score)))
    return rankings
