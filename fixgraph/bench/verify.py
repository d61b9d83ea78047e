"""Claim verification per answer: one batched call after the answer vs one call per (sentence, citation).

`fixgraph bench verify [overrides] [+bench.questions=N]`: for a stratified sample of the split's questions
(default 5), dense retrieval, one grounded answer, then (a) the batched verification, whose prompt starts
with the answer prompt's sources so llama.cpp reuses the answer call's KV cache, and (b) the same pairs
checked one call each. Every call bypasses the LLM cache (it would time nothing). Reports per answer the
median seconds and tokens of each way, and their ratio; the verdicts of both are counted, since a
faster verifier that agrees less is no gain.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from omegaconf import DictConfig

from fixgraph.bench import options
from fixgraph.config import systems_of, to_dict


def run(cfg: DictConfig) -> dict[str, Any]:
    from fixgraph.answer.base import build_answerer
    from fixgraph.answer.verify import ClaimVerifier
    from fixgraph.evaluation.sampling import pick_questions
    from fixgraph.evaluation.splits import build_split
    from fixgraph.llm.base import build_llm
    from fixgraph.pipeline.stages import load_chunks, open_system

    n = int(options(cfg).get("questions", 5))  # +bench.questions=N
    llm_cfg = {**to_dict(cfg.llm), "cache": {"enabled": False}}
    llm = build_llm(llm_cfg)
    answerer = build_answerer(cfg.answer)
    chunk_list = load_chunks(cfg)
    chunks = {c.id: c for c in chunk_list}
    system = open_system(cfg, "dense", systems_of(cfg)["dense"], chunk_list)
    verify = dict(cfg.answer.verify)
    batched = ClaimVerifier(llm, "verify_answer_v1", float(verify["quote_min"]), int(verify["quote_min_chars"]),
                            int(verify["max_tokens"]), batch=True)  # fmt: skip
    single = ClaimVerifier(llm, "verify_claim_v1", float(verify["quote_min"]), int(verify["quote_min_chars"]),
                           120, batch=False)  # fmt: skip
    rows: list[dict[str, Any]] = []
    for question in pick_questions(build_split(cfg.split).load(), n):
        if not question.answerable:
            continue
        answer = answerer.answer(
            llm, question.qid, question.question, system.search(question.question, 20), chunks, "dense"
        )
        pairs = sum(len(s.citations) for s in answer.sentences)
        if not pairs:
            continue
        timed = {}
        for label, verifier in (("batched", batched), ("per_pair", single)):
            answer.cost.pop("verify", None)
            started = time.perf_counter()
            result = verifier.verify(answer, chunks)
            cost = answer.stage("verify")
            timed[label] = {
                "seconds": time.perf_counter() - started,
                "tokens": cost.input_tokens + cost.output_tokens,
                "calls": cost.calls,
                "supported": sum(r == "supported" for s in result.sentences for r in s.reasons.values()),
            }
        rows.append(
            {"qid": question.qid, "pairs": pairs, **{f"{k}_{f}": v for k, d in timed.items() for f, v in d.items()}}
        )
    if not rows:
        return {"error": "no answer with a citation to verify"}

    def median(key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    return {
        "llm": llm.identity(),
        "answers": len(rows),
        "pairs_median": median("pairs"),
        "batched_seconds_median": median("batched_seconds"),
        "per_pair_seconds_median": median("per_pair_seconds"),
        "speedup_median": float(statistics.median(r["per_pair_seconds"] / r["batched_seconds"] for r in rows)),
        "batched_tokens_median": median("batched_tokens"),
        "per_pair_tokens_median": median("per_pair_tokens"),
        "supported_batched": sum(r["batched_supported"] for r in rows),
        "supported_per_pair": sum(r["per_pair_supported"] for r in rows),
        "pairs": sum(r["pairs"] for r in rows),
        "rows": rows,
    }
