"""The `answers` experiment: answer, verify, judge and score every question, then compare systems.

Systems: one grounded system per retriever in `answer.systems` (null: every configured system) plus,
with `answer.closed_book`, the closed-book baseline. Per question it records the answer with its
citations, the verifier's verdict per (sentence, cited chunk), the judge's grade, the RAGAS-like
metrics and tokens and seconds per stage. Outputs under artifacts/eval/<corpus>/answers_<name>/; means
with bootstrap CIs per system; paired tests (bootstrap CI of the difference, permutation p, Holm over
`answer.family_metrics`) of every system against `answer.baseline`; one MLflow parent run with a child
run per system, like the retrieval evaluation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.answer.base import Answerer, ClosedBookAnswerer, build_answerer
from fixgraph.answer.ragas import RagasMetrics, RagasScores
from fixgraph.answer.report import answer_table, compare_answers
from fixgraph.answer.scoring import ScoredAnswer, abstention_judgement
from fixgraph.answer.verify import Verification, build_verifier
from fixgraph.config import ConfigError, systems_of, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.answer_metrics import AnswerScores, abstention_scores
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.judge import build_judge
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.report import latency_summary, summarise, summary_json
from fixgraph.evaluation.result import EvaluationResult
from fixgraph.evaluation.splits import QuestionSet, resolve_questions
from fixgraph.io import atomic_dir, read_json, sha256_file, write_json, write_jsonl, write_text
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.base import Hit

log = logging.getLogger(__name__)
CLOSED_BOOK = "closed_book"


def answer_systems(cfg: DictConfig, answerer: Answerer) -> dict[str, DictConfig | None]:
    """system name -> retriever config (None: closed book)."""
    settings = cfg.answer
    if not answerer.retrieves:
        return {str(settings.name): None}
    configured = systems_of(cfg)
    wanted = [str(s) for s in settings.get("systems") or configured]
    unknown = [s for s in wanted if s not in configured]
    if unknown:
        raise ConfigError(f"answer.systems: {', '.join(unknown)} not configured; systems: {', '.join(configured)}")
    systems: dict[str, DictConfig | None] = {s: configured[s] for s in wanted}
    if settings.get("closed_book", False):
        systems = {CLOSED_BOOK: None, **systems}
    return systems


def pick_questions(questions: list[Question], limit: int | None) -> list[Question]:
    """The first `limit` questions in file order (the split file is already shuffled by its salt)."""
    return questions if not limit else questions[: int(limit)]


class _Scorer:
    def __init__(self, cfg: DictConfig, llm: Any) -> None:
        settings = cfg.answer
        self.verifier, self.verify_enabled = build_verifier(to_dict(settings.get("verify") or {}), llm)
        self.judge = build_judge(cfg.judge)
        if hasattr(self.judge, "attach"):
            self.judge.attach(llm)
        ragas = dict(settings.get("ragas") or {})
        self.ragas: RagasMetrics | None = None
        if ragas.pop("enabled", True):
            from fixgraph.embedders.encoders import build_embedder

            self.ragas = RagasMetrics(llm, build_embedder(cfg.embedder), self.verifier, **ragas)

    def score(self, question: Question, answer: Any, chunks: Mapping[str, Chunk], seconds: float) -> ScoredAnswer:
        verification = (
            self.verifier.verify(answer, chunks)
            if self.verify_enabled
            else Verification()  # no verifier: claim metrics are not computed
        )
        if answer.abstained:
            judgement = abstention_judgement(question)
        elif hasattr(self.judge, "judge_with_cost"):
            judgement, cost = self.judge.judge_with_cost(question, answer.text)
            answer.cost["judge"] = cost
        else:
            judgement = self.judge.judge(question, answer.text)
        ragas = self.ragas.score(question.question, answer, verification, chunks) if self.ragas else None
        return ScoredAnswer(question, answer, verification, judgement, ragas or RagasScores(None, None, None), seconds)


def run_answers(
    cfg: DictConfig, questions_path: Path | None = None, name: str | None = None, track: bool | None = None
) -> EvaluationResult:
    from fixgraph.llm.base import build_llm

    layout = Layout.from_config(cfg)
    question_set = resolve_questions(cfg, questions_path, name)
    questions, base_name = question_set.questions, question_set.name
    questions = pick_questions(questions, cfg.answer.get("max_questions"))
    name = f"answers_{base_name}"
    answerer = build_answerer(cfg.answer)
    systems = answer_systems(cfg, answerer)
    chunk_result = chunk(cfg)
    docs, chunk_list = load_documents(cfg), load_chunks(cfg)
    chunks = {c.id: c for c in chunk_list}
    mapping = map_gold(questions, docs, chunk_list)
    allow_unmapped = bool(cfg.evaluation.get("allow_unmapped", False))
    mapping.check(float(cfg.evaluation.min_gold_coverage), questions, allow_unmapped)  # unmapped gold is loud here too
    llm = build_llm(cfg.llm)
    scorer = _Scorer(cfg, llm)
    closed = ClosedBookAnswerer(
        prompt=str(cfg.answer.get("closed_book_prompt", "answer_closed_book_v1")),
        max_tokens=int(cfg.answer.get("max_tokens", 200)),
        abstention=to_dict(cfg.answer.get("abstention") or {}),
    )
    depth = max(20, 3 * int(cfg.answer.get("max_chunks", 8)))
    scored: list[ScoredAnswer] = []
    for label, system_cfg in systems.items():
        # the same System the benchmark ranks with (reranker included), so answers cite what was measured
        system = None if system_cfg is None else open_system(cfg, label, system_cfg, chunk_list)
        this = answerer if system_cfg is not None or not answerer.retrieves else closed
        for i, question in enumerate(questions, start=1):
            started = time.perf_counter()
            hits: list[Hit] = system.search(question.question, depth) if system is not None else []
            retrieved = time.perf_counter() - started
            answer = this.answer(llm, question.qid, question.question, hits, chunks, label)
            answer.retrieved = [h.chunk_id for h in hits]
            scored.append(scorer.score(question, answer, chunks, retrieved))
            log.info("%s %d/%d %s: %s", label, i, len(questions), question.qid, answer.text[:80] or "(abstained)")
    llms = {"llm": llm, "verifier": scorer.verifier.llm}
    return _finish(cfg, layout, name, questions, question_set, mapping, scored, chunk_result.info, llms, track)


def _finish(
    cfg: DictConfig,
    layout: Layout,
    name: str,
    questions: list[Question],
    question_set: QuestionSet,
    mapping: Any,
    scored: list[ScoredAnswer],
    chunker_info: dict[str, Any],
    llms: Mapping[str, Any],
    track: bool | None,
) -> EvaluationResult:
    llm, verifier = llms["llm"], llms["verifier"]
    per_question = pd.DataFrame([s.row(mapping) for s in scored])
    boot = cfg.evaluation.bootstrap
    metric_frame = per_question.drop(columns=["answerable"])
    summary = summarise(metric_frame, int(boot.resamples), float(boot.confidence), int(boot.seed))
    systems = list(dict.fromkeys(per_question["system"]))
    abstention = {
        system: abstention_scores([_abstention_row(s) for s in scored if s.answer.system == system])
        for system in systems
    }
    latency = latency_summary(per_question)
    baseline = str(cfg.answer.get("baseline") or systems[0])
    comparison_md, comparison_json = compare_answers(cfg, per_question, baseline, systems)
    table = answer_table(summary, abstention, latency, float(boot.confidence)) + "\n" + comparison_md
    manifest = read_json(layout.manifest)
    info: dict[str, Any] = {
        "name": name,
        "questions_file": str(question_set.path),
        "questions_hash": sha256_file(question_set.path),
        "questions": len(questions),
        "scored_questions": len(questions),
        "locked_excluded": question_set.exclusion(),
        "gold_coverage": mapping.coverage,
        "corpus": manifest["corpus"],
        "corpus_hash": manifest["corpus_hash"],
        "corpus_version": manifest["source"].get("version", ""),
        "chunks_hash": sha256_file(layout.chunks),
        "chunker": chunker_info,
        "systems": systems,
        "latency": {
            s: {**latency.get(s, {}), **{k: v for k, v in abstention[s].items() if v is not None}} for s in systems
        },
        "abstention": abstention,
        "llm": {"name": llm.name, "identity": llm.identity(), "usage": llm.usage.totals()},
        # which model verified; its usage is its own client's when it is not the answering model
        "verifier": {
            "identity": verifier.identity(),
            "own_model": verifier is not llm,
            **({"usage": verifier.usage.totals()} if verifier is not llm else {}),
        },
        "judge": str(cfg.judge.name),
        "comparison": comparison_json,
    }
    metrics = summary_json(summary)
    out = layout.eval_dir(name)
    with atomic_dir(out) as tmp:
        write_jsonl(tmp / "answers.jsonl", (s.record() for s in scored))
        per_question.to_parquet(tmp / "per_question.parquet", index=False)
        write_json(tmp / "metrics.json", metrics)
        write_json(tmp / "info.json", info)
        write_text(tmp / "table.md", table)
    write_json(layout.metrics_file(name), {s: {m: v["mean"] for m, v in ms.items()} for s, ms in metrics.items()})
    labels = cfg.answer.get("labels")
    if labels and Path(str(labels)).exists():  # human grades exist: measure the judge against them
        from fixgraph.answer.labelling import judge_agreement

        report = judge_agreement(out / "answers.jsonl", Path(str(labels)))
        info["agreement"] = {k: v for k, v in report.items() if k not in ("confusion", "ppi")}
        info["agreement"].update({f"ppi_{k}": v for k, v in (report["ppi"] or {}).items()})
        write_json(out / "agreement.json", report)
        write_json(out / "info.json", info)
    result = EvaluationResult(name, out, table, metrics, per_question, mapping.coverage, info)
    if track if track is not None else bool(cfg.tracking.enabled):
        from fixgraph.answer.tracking import log_answers

        result.mlflow_run_id = log_answers(cfg, result)
    return result


def _abstention_row(s: ScoredAnswer) -> AnswerScores:
    q = s.question
    return AnswerScores(q.qid, q.qtype, q.answerable, s.answer.abstained, None, None, None, None, None)
