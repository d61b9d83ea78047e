"""What an answers run leaves behind: tables, per-question parquet, answers.jsonl, info.json, MLflow.

The judge's standing is part of every output: its identity (rules or model), its agreement with people
on the graded set (kappa with CI), and the guard's verdict, which heads the table when the judge is
uninformative and is logged to MLflow (tag judge_informative, metrics judge_*).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.answer.judging import guard, measure_on_graded
from fixgraph.answer.report import answer_table, compare_answers, judge_section
from fixgraph.answer.scoring import ScoredAnswer
from fixgraph.answer.settings import RunSettings
from fixgraph.evaluation.answer_metrics import AnswerScores, abstention_scores
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.report import latency_summary, summarise, summary_json
from fixgraph.evaluation.result import EvaluationResult
from fixgraph.evaluation.splits import QuestionSet
from fixgraph.io import atomic_dir, read_json, sha256_file, write_json, write_jsonl, write_text
from fixgraph.pipeline.layout import Layout

log = logging.getLogger(__name__)
CLOSED_BOOK = "closed_book"


def _abstention_row(s: ScoredAnswer) -> AnswerScores:
    q = s.question
    return AnswerScores(q.qid, q.qtype, q.answerable, s.answer.abstained, None, None, None, None, None)


def human_grades(scored: list[ScoredAnswer], labels_file: str | None) -> list[float | None]:
    """People's grades of this run's answers (`answer.labels`), abstentions by the judge's rule; None
    where an answer is not labelled. Compared between systems like any metric: the judge-free view."""
    if not labels_file or not Path(labels_file).exists():
        return [None] * len(scored)
    from fixgraph.answer.labelling import load_labels

    labels = load_labels(Path(labels_file))
    out: list[float | None] = []
    for s in scored:
        label = labels.get(s.item)
        out.append(s.judgement.correctness if s.answer.abstained else None if label is None else label.correctness)
    return out


def judge_info(scorer: Any, llm: Any) -> dict[str, Any]:
    judge = scorer.judge
    deterministic = bool(getattr(judge, "deterministic", False))
    client = None if deterministic else getattr(judge, "client", None)
    return {
        "name": str(judge.name),
        "identity": judge.identity(),
        "deterministic": deterministic,
        "model": None if client is None else client.identity(),
        "answering_model": client is not None and client.identity() == llm.identity(),
        **({"usage": client.usage.totals()} if client is not None and client is not llm else {}),
    }


def finish(
    cfg: DictConfig,
    settings: RunSettings,
    layout: Layout,
    name: str,
    questions: list[Question],
    question_set: QuestionSet,
    mapping: Any,
    scored: list[ScoredAnswer],
    scorer: Any,
    llm: Any,
    context: dict[str, Any],
    track: bool | None,
) -> EvaluationResult:
    verifier = scorer.verifier.llm  # the verifier's model (the answering one unless answer.verify.llm)
    per_question = pd.DataFrame([s.row(mapping) for s in scored])
    per_question["human_correctness"] = pd.to_numeric(pd.Series(human_grades(scored, settings.labels)), errors="coerce")
    boot = cfg.evaluation.bootstrap
    confidence = float(boot.confidence)
    summary = summarise(per_question.drop(columns=["answerable"]), int(boot.resamples), confidence, int(boot.seed))
    systems = list(dict.fromkeys(per_question["system"]))
    abstention = {
        system: abstention_scores([_abstention_row(s) for s in scored if s.answer.system == system])
        for system in systems
    }
    latency = latency_summary(per_question)
    baseline = settings.baseline or systems[0]
    comparison_md, comparison_json = compare_answers(cfg, settings, per_question, baseline, systems)
    measured = measure_on_graded(scorer.judge, settings.graded, 1 - confidence, int(boot.resamples), int(boot.seed))
    kappa = None if measured is None else measured["kappa"]
    verdict = guard(scored, CLOSED_BOOK if CLOSED_BOOK in systems else None, kappa, settings.guard)
    judge = {**judge_info(scorer, llm), "graded_set": measured, "guard": verdict.to_json()}
    table = (
        (verdict.banner() + "\n\n" if not verdict.informative else "")
        + judge_section(judge, confidence)
        + "\n"
        + answer_table(summary, abstention, latency, confidence)
        + "\n"
        + comparison_md
    )
    manifest = read_json(layout.manifest)
    info: dict[str, Any] = {
        "name": name,
        **question_set.provenance(),
        "questions": len(questions),
        "qids": [q.qid for q in questions],
        "sample": {**context["sample"], "size": len(questions)},
        "scored_questions": len(questions),
        "locked_excluded": question_set.exclusion(),
        "gold_coverage": mapping.coverage,
        "corpus": manifest["corpus"],
        "corpus_hash": manifest["corpus_hash"],
        "corpus_version": manifest["source"].get("version", ""),
        "chunks_hash": sha256_file(layout.chunks),
        "chunker": context["chunker"],
        "systems": systems,
        "latency": {
            s: {**latency.get(s, {}), **{k: v for k, v in abstention[s].items() if v is not None}} for s in systems
        },
        "abstention": abstention,
        "truncated": {s: int(sum(x.answer.truncated for x in scored if x.answer.system == s)) for s in systems},
        "llm": {"name": str(cfg.llm.name), "identity": llm.identity(), "usage": llm.usage.totals()},
        # which model verified; its usage is its own client's when it is not the answering model
        "verifier": {
            "identity": verifier.identity(),
            "own_model": verifier is not llm,
            "batch": scorer.verifier.batch,
            **({"usage": verifier.usage.totals()} if verifier is not llm else {}),
        },
        "keyfacts": scorer.matcher.identity(),
        "judge": judge,
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
    if settings.labels and Path(settings.labels).exists():  # people graded this run's answers: measure on them
        from fixgraph.answer.labelling import judge_agreement

        report = judge_agreement(out / "answers.jsonl", Path(settings.labels), 1 - confidence)
        info["agreement"] = {k: v for k, v in report.items() if not isinstance(v, (dict, list)) and v is not None}
        info["agreement"].update({f"ppi_{k}": v for k, v in (report["ppi"] or {}).items()})
        write_json(out / "agreement.json", report)
        write_json(out / "info.json", info)
    result = EvaluationResult(name, out, table, metrics, per_question, mapping.coverage, info)
    if not verdict.informative:
        log.warning(verdict.banner())
    if track if track is not None else bool(cfg.tracking.enabled):
        from fixgraph.answer.tracking import log_answers

        result.mlflow_run_id = log_answers(cfg, result)
    return result
