"""The `answers` experiment: answer, verify and score every question, judge, guard, compare systems.

Systems: one grounded system per retriever in `answer.systems` (null: every configured system) plus,
with `answer.closed_book`, the closed-book baseline. Per question it records the answer with its
citations (and whether it was cut off at max_tokens), the verifier's verdict per (sentence, cited
chunk), the deterministic key-fact coverage, the judge's grade, optional RAGAS-like metrics, and
tokens and seconds per stage. The judge is measured on the graded set and guarded (`judging.py`).
Outputs under artifacts/eval/<corpus>/answers_<name>/ (`outputs.py`); one MLflow parent run with a
child run per system.

Questions: the split's, or a stratified sample of `answer.max_questions` (evaluation/sampling.py), the
documented quick estimate. Every LLM call goes through the SQLite cache, so a killed run resumes where
it stopped, and a run with other judging or reporting settings costs no answering time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.answer.base import Answerer, ClosedBookAnswerer, build_answerer
from fixgraph.answer.judging import refuse_self_judging
from fixgraph.answer.labelling import item_id
from fixgraph.answer.outputs import finish
from fixgraph.answer.ragas import RagasMetrics, RagasScores
from fixgraph.answer.scoring import ScoredAnswer, abstention_judgement
from fixgraph.answer.settings import RunSettings
from fixgraph.answer.verify import Verification, build_verifier
from fixgraph.config import ConfigError, systems_of, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.judge import build_judge
from fixgraph.evaluation.keyfacts import build_keyfact_matcher
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.result import EvaluationResult
from fixgraph.evaluation.sampling import pick_questions
from fixgraph.evaluation.splits import resolve_questions
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.base import Hit

log = logging.getLogger(__name__)
CLOSED_BOOK = "closed_book"


def answer_systems(cfg: DictConfig, answerer: Answerer, settings: RunSettings) -> dict[str, DictConfig | None]:
    """system name -> retriever config (None: closed book)."""
    if not answerer.retrieves:
        return {str(cfg.answer.name): None}
    configured = systems_of(cfg)
    wanted = [str(s) for s in settings.systems or configured]
    unknown = [s for s in wanted if s not in configured]
    if unknown:
        raise ConfigError(f"answer.systems: {', '.join(unknown)} not configured; systems: {', '.join(configured)}")
    systems: dict[str, DictConfig | None] = {s: configured[s] for s in wanted}
    if settings.closed_book:
        systems = {CLOSED_BOOK: None, **systems}
    return systems


class Scorer:
    """Verifier, key-fact matcher, judge and RAGAS-like metrics of one run."""

    def __init__(self, cfg: DictConfig, settings: RunSettings, llm: Any) -> None:
        self.verifier, self.verify_enabled = build_verifier(settings.verify, llm)
        self.matcher = build_keyfact_matcher(cfg.keyfacts)
        self.judge = build_judge(cfg.judge)
        refuse_self_judging(self.judge, llm)
        ragas = dict(settings.ragas)
        self.ragas: RagasMetrics | None = None
        if ragas.pop("enabled"):
            from fixgraph.embedders.encoders import build_embedder

            self.ragas = RagasMetrics(llm, build_embedder(cfg.embedder), self.verifier, **ragas)

    def score(self, question: Question, answer: Any, chunks: Mapping[str, Chunk], seconds: float) -> ScoredAnswer:
        verification = (
            self.verifier.verify(answer, chunks)
            if self.verify_enabled
            else Verification()  # no verifier: claim metrics are not computed
        )
        coverage = None
        if question.key_facts and not answer.abstained:
            coverage = self.matcher.coverage(question.key_facts, answer.text)
        if answer.abstained:
            judgement = abstention_judgement(question)
        elif hasattr(self.judge, "judge_with_cost"):
            judgement, cost = self.judge.judge_with_cost(question, answer.text)
            answer.cost["judge"] = cost
        else:
            started = time.perf_counter()
            judgement = self.judge.judge(question, answer.text)
            answer.stage("judge").seconds += time.perf_counter() - started
        ragas = self.ragas.score(question.question, answer, verification, chunks) if self.ragas else None
        return ScoredAnswer(
            question, answer, verification, judgement, ragas or RagasScores(None, None, None), seconds, coverage
        )


def run_answers(
    cfg: DictConfig, questions_path: Path | None = None, name: str | None = None, track: bool | None = None
) -> EvaluationResult:
    from fixgraph.llm.base import build_llm

    settings = RunSettings.from_config(cfg.answer)
    layout = Layout.from_config(cfg)
    question_set = resolve_questions(cfg, questions_path, name)
    questions, base_name = question_set.questions, question_set.name
    population = len(questions)
    questions = pick_questions(questions, settings.max_questions, settings.sample, settings.sample_seed)
    answerer = build_answerer(cfg.answer)
    systems = answer_systems(cfg, answerer, settings)
    chunk_result = chunk(cfg)
    docs, chunk_list = load_documents(cfg), load_chunks(cfg)
    chunks = {c.id: c for c in chunk_list}
    mapping = map_gold(questions, docs, chunk_list)
    allow_unmapped = bool(cfg.evaluation.get("allow_unmapped", False))
    mapping.check(float(cfg.evaluation.min_gold_coverage), questions, allow_unmapped)  # unmapped gold is loud here too
    llm = build_llm(cfg.llm)
    scorer = Scorer(cfg, settings, llm)
    closed = ClosedBookAnswerer(
        prompt=settings.closed_book_prompt,
        max_tokens=int(cfg.answer.max_tokens),
        abstention=to_dict(cfg.answer.abstention or {}),
    )
    depth = max(20, 3 * int(getattr(answerer, "max_chunks", 8)))
    scored: list[ScoredAnswer] = []
    for system_name, system_cfg in systems.items():
        # the same System the benchmark ranks with (reranker included), so answers cite what was measured
        system = None if system_cfg is None else open_system(cfg, system_name, system_cfg, chunk_list)
        this = answerer if system_cfg is not None or not answerer.retrieves else closed
        for i, question in enumerate(questions, start=1):
            started = time.perf_counter()
            hits: list[Hit] = system.search(question.question, depth) if system is not None else []
            retrieved = time.perf_counter() - started
            answer = this.answer(llm, question.qid, question.question, hits, chunks, system_name)
            answer.retrieved = [h.chunk_id for h in hits]
            result = scorer.score(question, answer, chunks, retrieved)
            # the item id names the model too: answers of two models can share one graded set
            result.llm = str(cfg.llm.name)
            result.item = item_id(f"{result.llm}/{system_name}", question.qid)
            scored.append(result)
            log.info("%s %d/%d %s: %s", system_name, i, len(questions), question.qid, answer.text[:80] or "(abstained)")
    sample = {"population": population, "method": settings.sample, "seed": settings.sample_seed}
    context = {"chunker": chunk_result.info, "sample": sample, "population": population}
    return finish(
        cfg,
        settings,
        layout,
        f"answers_{base_name}",
        questions,
        question_set,
        mapping,
        scored,
        scorer,
        llm,
        context,
        track,
    )
