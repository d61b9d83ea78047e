"""How well an LLM reranker separates gold from other chunks inside a first stage's top k (issue 16).

For every scored question of an evaluation whose top k holds both a gold chunk and a non-gold one,
the ROC AUC of the LLM's P(yes) (`reranker=llm`, the same prompt and passage text as the rerank
stage, so the LLM cache answers calls already made) and of the first stage's own order; prints JSON.

    python experiments/quality/llm_separation.py artifacts/eval/gnome_help/q-llmrerank-dev \
        --questions benchmarks/gnome-help/dev.jsonl --first-stage dense_mpnet --llm qwen_coder_15b
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import ir_measures
import numpy as np
from sklearn.metrics import roc_auc_score

from fixgraph.config import compose
from fixgraph.evaluation.questions import load_questions
from fixgraph.evaluation.trec import read_run
from fixgraph.pipeline.stages import load_chunks
from fixgraph.retrieval.llm_rerank import LLMReranker


def read_gold(path: Path) -> dict[str, set[str]]:
    """Relevant chunk ids per question of a TREC qrels file (ir-measures' reader)."""
    gold: dict[str, set[str]] = defaultdict(set)
    for qrel in ir_measures.read_trec_qrels(str(path)):
        if qrel.relevance > 0:
            gold[qrel.query_id].add(qrel.doc_id)
    return gold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval_dir", type=Path)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--first-stage", required=True, help="system whose runs/<name>.trec gives the top k")
    parser.add_argument("--llm", required=True, help="an llm= option, e.g. qwen_coder_05b")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--max-questions", type=int, default=0, help="0: all")
    args = parser.parse_args()

    cfg = compose([f"llm={args.llm}"])
    reranker = LLMReranker(llm=cfg.llm, top_n=args.top)
    texts = {c.id: c.index_text() for c in load_chunks(cfg)}
    questions = {q.qid: q.question for q in load_questions(args.questions)}
    gold = read_gold(args.eval_dir / "qrels.txt")
    runs = read_run(args.eval_dir / "runs" / f"{args.first_stage}.trec")  # written in rank order

    llm_auc, stage_auc, pairs, started = [], [], 0, time.perf_counter()
    for qid in sorted(runs):
        if qid not in questions or not gold.get(qid):
            continue
        top = [hit.chunk_id for hit in runs[qid][: args.top]]
        labels = [c in gold[qid] for c in top]
        if all(labels) or not any(labels):
            continue  # AUC needs both classes
        scores = reranker.score(questions[qid], [texts[c] for c in top])
        llm_auc.append(roc_auc_score(labels, scores))
        stage_auc.append(roc_auc_score(labels, -np.arange(len(top))))
        pairs += len(top)
        if args.max_questions and len(llm_auc) >= args.max_questions:
            break
    print(
        json.dumps(
            {
                "llm": args.llm,
                "first_stage": args.first_stage,
                "top": args.top,
                "questions": len(llm_auc),
                "llm_mean_auc": round(float(np.mean(llm_auc)), 3),
                "first_stage_mean_auc": round(float(np.mean(stage_auc)), 3),
                "seconds_per_pair_uncached": round((time.perf_counter() - started) / max(pairs, 1), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
