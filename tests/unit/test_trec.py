"""TREC files: what we write, trec_eval (via ir-measures) reads back to the same per-question numbers."""

from __future__ import annotations

from pathlib import Path

import ir_measures

from fixgraph.evaluation.trec import read_run, write_qrels, write_run
from fixgraph.retrieval.base import Hit


def test_tied_scores_keep_system_order(tmp_path: Path) -> None:
    # RRF often ties; trec_eval would re-sort ties by doc id ("z" after "a") unless scores are nudged
    rankings = {"q": [Hit("z", 0.5), Hit("a", 0.5), Hit("m", 0.25)]}
    write_run(tmp_path / "run.trec", rankings, tag="t")
    write_qrels(tmp_path / "qrels.txt", {"q": {"z": 1}})
    back = read_run(tmp_path / "run.trec")
    assert [h.chunk_id for h in back["q"]] == ["z", "a", "m"]
    assert back["q"][0].score > back["q"][1].score > back["q"][2].score
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels.txt")))
    run = list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))
    rr = ir_measures.calc_aggregate([ir_measures.RR], qrels, run)[ir_measures.RR]
    assert rr == 1.0  # "z" stays first: a doc-id re-sort would have put "a" first and given 0.5


def test_run_file_format(tmp_path: Path) -> None:
    write_run(tmp_path / "run.trec", {"q2": [Hit("b", 2.0)], "q1": [Hit("a", 1.0)]}, tag="sys")
    assert (tmp_path / "run.trec").read_text().splitlines() == ["q1 Q0 a 1 1.000000 sys", "q2 Q0 b 1 2.000000 sys"]
