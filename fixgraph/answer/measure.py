"""`fixgraph agreement`: a judge, or the claim verifier, measured against people.

Judge mode: any answers file and any label file in the documented format (labelling.py). By default the
committed graded set (`answer.graded`) judged by the configured judge (`judge=keyfacts` unless told
otherwise, `judge=llm` with its own model...); `--recorded` takes the grades an answers run stored
instead of judging again. Reports exact agreement, Cohen's and linearly weighted kappa with bootstrap
CIs, the confusion matrix, per-fact agreement where the labels list covered facts, and the PPI mean.

Claims mode (`--claims FILE --answers RUN/answers.jsonl`): (sentence, cited chunk) pairs whose support
a person checked, {"claim": "<item>:<sentence index>:<chunk id>", "supported": true|false, ...}, against
the verifier's verdicts recorded in that run: agreement on "supported", and the unsupported-claim rate
of those sentences by the verifier and by the person.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.answer.labelling import (
    LabelFileError,
    agreement_report,
    answer_item,
    json_lines,
    judge_records,
    load_labels,
    read_answers,
    recorded_judgements,
)
from fixgraph.answer.settings import RunSettings
from fixgraph.evaluation.agreement import binary_agreement
from fixgraph.evaluation.questions import load_questions


def claim_key(item: str, sentence: int, chunk_id: str) -> str:
    return f"{item}:{sentence}:{chunk_id}"


def load_claims(path: Path) -> dict[str, bool]:
    if not path.exists():
        raise LabelFileError(f"{path}: claims file not found")
    claims: dict[str, bool] = {}
    for lineno, record in json_lines(path):
        if not isinstance(record, dict) or not isinstance(record.get("supported"), bool) or "claim" not in record:
            raise LabelFileError(f"{path}:{lineno}: a claim needs 'claim' and a boolean 'supported'")
        claims[str(record["claim"])] = record["supported"]
    return claims


def verifier_agreement(claims_file: Path, answers_file: Path) -> dict[str, Any]:
    human = load_claims(claims_file)
    verdicts: dict[str, bool] = {}
    sentences: dict[str, list[str]] = {}  # item:sentence -> its claim keys
    for record in read_answers(answers_file):
        item = answer_item(record)
        for i, sentence in enumerate(record.get("sentences", [])):
            for chunk_id, reason in (sentence.get("verdicts") or {}).items():
                key = claim_key(item, i, chunk_id)
                verdicts[key] = reason == "supported"
                sentences.setdefault(f"{item}:{i}", []).append(key)
    keys = sorted(k for k in human if k in verdicts)
    if not keys:
        raise LabelFileError(f"none of the {len(human)} claims in {claims_file} has a verdict in {answers_file}")
    report: dict[str, Any] = {
        "claims": len(human),
        "matched": len(keys),
        **binary_agreement([human[k] for k in keys], [verdicts[k] for k in keys]).to_json(),
    }
    # sentence level, on sentences whose every citation was checked: supported = one citation supports
    complete = [ks for ks in sentences.values() if all(k in human for k in ks)]
    if complete:
        report["sentences"] = len(complete)
        report["unsupported_rate_verifier"] = sum(not any(verdicts[k] for k in ks) for ks in complete) / len(complete)
        report["unsupported_rate_human"] = sum(not any(human[k] for k in ks) for ks in complete) / len(complete)
    return report


def agreement_command(cfg: DictConfig, args: argparse.Namespace) -> dict[str, Any]:
    if args.claims is not None:
        if args.answers is None:
            raise LabelFileError("--claims needs --answers: the answers.jsonl whose verifier verdicts are measured")
        return verifier_agreement(args.claims, args.answers)
    graded = RunSettings.from_config(cfg.answer).graded
    answers = args.answers or (Path(graded.answers) if graded.answers else None)
    labels = args.labels or (Path(graded.labels) if graded.labels else None)
    if answers is None or labels is None:
        raise LabelFileError("no graded set configured (answer.graded): pass --answers and --labels")
    boot = cfg.evaluation.bootstrap
    records = [r for r in read_answers(answers) if not r["abstained"]]
    label_set = load_labels(labels)
    if args.recorded:
        judgements = recorded_judgements(records)
        judge_name = "recorded"
    else:
        from fixgraph.evaluation.judge import build_judge

        questions_path = args.questions
        if questions_path is None and args.answers is None and graded.questions:
            questions_path = Path(graded.questions)
        if questions_path is not None:
            questions = {q.qid: q for q in load_questions(questions_path)}
        else:
            from fixgraph.evaluation.splits import resolve_questions

            questions = {q.qid: q for q in resolve_questions(cfg, None, None).questions}
        judge = build_judge(cfg.judge)
        labelled = sorted((r for r in records if answer_item(r) in label_set), key=answer_item)
        if graded.max_items:  # an LLM judge's cost: the same items measure_on_graded takes in a run
            labelled = labelled[: graded.max_items]
        # the unlabelled answers too: the prediction-powered mean corrects the judge's mean over them
        unlabelled = [r for r in records if answer_item(r) not in label_set]
        judgements = judge_records(judge, labelled + unlabelled, questions)
        judge_name = judge.identity()
    report = agreement_report(label_set, judgements, args.alpha, int(boot.resamples), int(boot.seed))
    report["by_system"] = by_system(records, label_set, judgements)
    return {"judge": judge_name, "answers": str(answers), "labels": str(labels), **report}


def by_system(records: list[dict[str, Any]], labels: dict[str, Any], judgements: dict[str, Any]) -> dict[str, Any]:
    """Mean grade of people and of the judge per `<llm>/<system>` on the items both graded: where a
    judge is lenient (closed book rated like retrieved answers) shows here first."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        item = answer_item(r)
        grade = judgements.get(item)
        if item in labels and grade is not None and grade.correctness is not None:
            side = f"{r['llm']}/{r['system']}" if r.get("llm") else str(r["system"])
            groups.setdefault(side, []).append((labels[item].correctness, float(grade.correctness)))
    return {
        side: {
            "n": len(pairs),
            "human": sum(h for h, _ in pairs) / len(pairs),
            "judge": sum(j for _, j in pairs) / len(pairs),
        }
        for side, pairs in sorted(groups.items())
    }
