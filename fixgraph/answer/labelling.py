"""Human labels for the judge's reliability: a blind, resumable labelling session and the agreement.

`fixgraph label` shows one answer at a time with the question, the reference answer and its key facts,
never the system that produced it, in an order shuffled by a seed (so systems are interleaved and the
labeller cannot infer them from position). Each grade (0 / 0.5 / 1) is appended to the label file at
once, keyed by (system, qid) under an opaque item id; run it again and it resumes after the last label.
`fixgraph agreement` then compares the judge's grades in answers.jsonl with the labels.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fixgraph.evaluation.agreement import GRADES, agreement, ppi_mean
from fixgraph.evaluation.questions import Question

QUIT = {"q", "quit", "exit"}


def item_id(system: str, qid: str) -> str:
    """Opaque id of an answer: the label file never shows the system in clear next to the grade."""
    return hashlib.sha256(f"{system}\x00{qid}".encode()).hexdigest()[:12]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_labels(path: Path) -> dict[str, float]:
    """item id -> grade (a later line for the same item wins: relabelling is appending)."""
    return {str(r["item"]): float(r["correctness"]) for r in read_jsonl(path)}


def show(number: int, total: int, question: Question, answer: dict[str, Any]) -> str:
    facts = "\n".join(f"  - {fact}" for fact in question.key_facts) or "  (none)"
    text = answer["answer"]
    return (
        f"\n=== answer {number}/{total} ===\nQUESTION: {question.question}\n"
        f"REFERENCE: {question.answer or '(none)'}\nKEY FACTS:\n{facts}\nANSWER: {text}\n"
        "grade 0 (wrong) / 0.5 (partly right) / 1 (right), s to skip, q to stop: "
    )


def label_session(
    answers_file: Path,
    questions: Iterable[Question],
    labels_file: Path,
    ask: Callable[[str], str] = input,
    seed: int = 0,
    limit: int | None = None,
) -> int:
    """Label unlabelled answers until done, `limit` new labels or 'q'; returns the labels written."""
    by_qid = {q.qid: q for q in questions}
    # abstentions are graded by rule, not by the judge: nothing to label
    answers = [a for a in read_jsonl(answers_file) if a["qid"] in by_qid and not a["abstained"]]
    random.Random(seed).shuffle(answers)
    done = load_labels(labels_file)
    todo = [a for a in answers if item_id(a["system"], a["qid"]) not in done]
    written = 0
    labels_file.parent.mkdir(parents=True, exist_ok=True)
    for number, answer in enumerate(todo, start=len(answers) - len(todo) + 1):
        if limit is not None and written >= limit:
            break
        reply = ""
        while True:
            reply = ask(show(number, len(answers), by_qid[answer["qid"]], answer)).strip().lower()
            if reply in QUIT or reply == "s" or (_grade(reply) is not None):
                break
        if reply in QUIT:
            break
        if reply == "s":
            continue
        record = {"item": item_id(answer["system"], answer["qid"]), "qid": answer["qid"], "correctness": _grade(reply)}
        with open(labels_file, "a", encoding="utf-8") as fh:  # one line per label: a crash loses nothing
            fh.write(json.dumps(record) + "\n")
        written += 1
    return written


def _grade(reply: str) -> float | None:
    try:
        value = float(reply)
    except ValueError:
        return None
    return value if value in GRADES else None


def judge_agreement(answers_file: Path, labels_file: Path, alpha: float = 0.05) -> dict[str, Any]:
    """Agreement of the judge grades recorded in answers.jsonl with the human labels, plus PPI."""
    labels = load_labels(labels_file)
    grades = {
        item_id(a["system"], a["qid"]): a["judge"]["correctness"]
        for a in read_jsonl(answers_file)
        if not a["abstained"]
    }
    labelled = {k: v for k, v in labels.items() if k in grades}
    human = [labelled[k] for k in sorted(labelled) if grades[k] is not None]
    judge = [float(grades[k]) for k in sorted(labelled) if grades[k] is not None]
    report: dict[str, Any] = {"labels": len(labels), "matched": len(human), **agreement(human, judge).to_json()}
    estimate = ppi_mean(labelled, grades, alpha)
    report["ppi"] = None if estimate is None else vars(estimate)
    return report
