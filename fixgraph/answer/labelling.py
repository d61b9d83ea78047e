"""Human labels for the judge's reliability: a blind, resumable labelling session and the agreement.

`fixgraph label` shows one answer at a time with the question, the reference answer and its numbered key
facts, never the system that produced it, in an order shuffled by a seed (so systems are interleaved and
the labeller cannot infer them from position). Each grade is appended to the label file at once; run it
again and it resumes after the last label.

Label file (JSON lines), the documented format any grader can produce:
    {"item": "<item id>", "correctness": 0 | 0.5 | 1, "covered": [1, 3], "qid": "ga-002"}
`item` is the answer record's own "item" field when it has one, else sha256(system NUL qid)[:12]
(`item_id`): opaque, so a label file never shows the system next to the grade. `covered` (the numbers
of the key facts the answer states) and `qid` are optional; a later line for the same item wins.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixgraph.evaluation.agreement import (
    GRADES,
    AgreementError,
    LabelFileError,
    agreement,
    binary_agreement,
    kappa_interval,
    ppi_mean,
)
from fixgraph.evaluation.judge import Judge, Judgement
from fixgraph.evaluation.questions import Question

QUIT = {"q", "quit", "exit"}


def item_id(system: str, qid: str) -> str:
    """Opaque id of an answer: the label file never shows the system in clear next to the grade."""
    return hashlib.sha256(f"{system}\x00{qid}".encode()).hexdigest()[:12]


def answer_item(record: Mapping[str, Any]) -> str:
    return str(record.get("item") or item_id(str(record["system"]), str(record["qid"])))


@dataclass(frozen=True)
class Label:
    item: str
    correctness: float
    covered: tuple[int, ...] | None = None  # key facts the answer states (1-based), None: not recorded
    qid: str | None = None


def json_lines(path: Path) -> Iterable[tuple[int, Any]]:
    """(line number, decoded value) of each non-blank line; a missing file has none. Bad JSON is a
    LabelFileError naming file:line."""
    if not path.exists():
        return
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelFileError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        yield lineno, value


def _lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    for lineno, record in json_lines(path):
        if not isinstance(record, dict):
            raise LabelFileError(f"{path}:{lineno}: expected a JSON object")
        yield lineno, record


def load_labels(path: Path) -> dict[str, Label]:
    """item id -> label (a later line for the same item wins: relabelling is appending)."""
    labels: dict[str, Label] = {}
    for lineno, r in _lines(path):
        if "item" not in r or "correctness" not in r:
            raise LabelFileError(f"{path}:{lineno}: a label needs 'item' and 'correctness', got {sorted(r)}")
        try:
            grade = float(r["correctness"])
        except (TypeError, ValueError):
            grade = -1.0
        if grade not in GRADES:
            raise LabelFileError(f"{path}:{lineno}: correctness {r['correctness']!r} is not one of {GRADES}")
        covered = r.get("covered")
        if covered is not None and not (isinstance(covered, list) and all(isinstance(n, int) for n in covered)):
            raise LabelFileError(f"{path}:{lineno}: covered must be a list of key-fact numbers, got {covered!r}")
        item = str(r["item"])
        labels[item] = Label(item, grade, None if covered is None else tuple(covered), r.get("qid"))
    return labels


def read_answers(path: Path) -> list[dict[str, Any]]:
    """Answer records (answers.jsonl of a run, or any file with qid, system, answer, abstained)."""
    if not path.exists():
        raise LabelFileError(f"{path}: answers file not found")
    records = []
    for lineno, r in _lines(path):
        missing = [k for k in ("qid", "system", "answer", "abstained") if k not in r]
        if missing:
            raise LabelFileError(f"{path}:{lineno}: answer record without {', '.join(missing)}")
        records.append(r)
    return records


def show(number: int, total: int, question: Question, answer: Mapping[str, Any]) -> str:
    facts = "\n".join(f"  {i}. {fact}" for i, fact in enumerate(question.key_facts, start=1)) or "  (none)"
    return (
        f"\n=== answer {number}/{total} ===\nQUESTION: {question.question}\n"
        f"REFERENCE: {question.answer or '(none)'}\nKEY FACTS:\n{facts}\nANSWER: {answer['answer']}\n"
        "grade 0 / 0.5 / 1, then the numbers of the key facts it states (e.g. '0.5 1,3'; '-' for none),\n"
        "s to skip, q to stop: "
    )


def parse_reply(reply: str, n_facts: int) -> tuple[float, tuple[int, ...] | None] | None:
    """'0.5 1,3' -> (0.5, (1, 3)); '1' -> (1.0, None); '0 -' -> (0.0, ()); None when unreadable."""
    parts = reply.replace(",", " ").split()
    if not parts:
        return None
    try:
        grade = float(parts[0])
    except ValueError:
        return None
    if grade not in GRADES:
        return None
    if len(parts) == 1:
        return grade, None
    if parts[1:] == ["-"]:
        return grade, ()
    try:
        numbers = tuple(sorted({int(p) for p in parts[1:]}))
    except ValueError:
        return None
    return (grade, numbers) if all(1 <= n <= n_facts for n in numbers) else None


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
    answers = [a for a in read_answers(answers_file) if a["qid"] in by_qid and not a["abstained"]]
    random.Random(seed).shuffle(answers)
    done = load_labels(labels_file)
    todo = [a for a in answers if answer_item(a) not in done]
    written = 0
    labels_file.parent.mkdir(parents=True, exist_ok=True)
    for number, answer in enumerate(todo, start=len(answers) - len(todo) + 1):
        if limit is not None and written >= limit:
            break
        question = by_qid[answer["qid"]]
        reply, parsed = "", None
        while parsed is None:
            reply = ask(show(number, len(answers), question, answer)).strip().lower()
            if reply in QUIT or reply == "s":
                break
            parsed = parse_reply(reply, len(question.key_facts))
        if reply in QUIT:
            break
        if parsed is None:  # skipped
            continue
        grade, covered = parsed
        record: dict[str, Any] = {"item": answer_item(answer), "qid": answer["qid"], "correctness": grade}
        if covered is not None:
            record["covered"] = list(covered)
        with open(labels_file, "a", encoding="utf-8") as fh:  # one line per label: a crash loses nothing
            fh.write(json.dumps(record) + "\n")
        written += 1
    return written


def judge_records(
    judge: Judge, records: Sequence[Mapping[str, Any]], questions: Mapping[str, Question]
) -> dict[str, Judgement]:
    """The judge's grade of every answered record whose question is known (item id -> judgement)."""
    unknown = sorted({str(r["qid"]) for r in records} - set(questions))
    if unknown:
        raise LabelFileError(f"answers to unknown questions {', '.join(unknown[:5])}: pass their question file")
    return {answer_item(r): judge.judge(questions[str(r["qid"])], str(r["answer"])) for r in records}


def agreement_report(
    labels: Mapping[str, Label],
    judgements: Mapping[str, Judgement],
    alpha: float = 0.05,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Judge vs people on the items both graded: agreement with kappa CIs, per-fact agreement, PPI mean."""
    grades = {k: j.correctness for k, j in judgements.items()}
    keys = sorted(k for k in labels if grades.get(k) is not None)
    if not keys:
        raise AgreementError(f"none of the {len(labels)} labels matches a judged answer (wrong answers file?)")
    human = [labels[k].correctness for k in keys]
    judge = [float(grades[k]) for k in keys]  # type: ignore[arg-type]
    report: dict[str, Any] = {
        "labels": len(labels),
        "matched": len(keys),
        "not_judged": sum(1 for k in labels if k in grades and grades[k] is None),
        **agreement(human, judge).to_json(),
    }
    for weights, key in ((None, "kappa"), ("linear", "kappa_linear")):
        interval = kappa_interval(human, judge, weights, 1 - alpha, resamples, seed)
        report[f"{key}_ci"] = [interval.low, interval.high]
    facts_h, facts_j = [], []
    for k in keys:
        covered_h, covered_j = labels[k].covered, judgements[k].covered
        n = judgements[k].n_facts
        if covered_h is None or covered_j is None or not n:
            continue
        facts_h += [i in covered_h for i in range(1, n + 1)]
        facts_j += [i in covered_j for i in range(1, n + 1)]
    report["facts"] = binary_agreement(facts_h, facts_j).to_json() if facts_h else None
    estimate = ppi_mean({k: v.correctness for k, v in labels.items()}, grades, alpha)
    report["ppi"] = None if estimate is None else vars(estimate)
    return report


def recorded_judgements(records: Sequence[Mapping[str, Any]]) -> dict[str, Judgement]:
    """The judge grades stored in an answers run's records (no re-judging)."""
    out = {}
    for r in records:
        grade = (r.get("judge") or {}).get("correctness")
        out[answer_item(r)] = Judgement(None if grade is None else float(grade), None)
    return out


def judge_agreement(answers_file: Path, labels_file: Path, alpha: float = 0.05) -> dict[str, Any]:
    """Agreement of the judge grades recorded in an answers file with a label file, plus PPI."""
    records = [r for r in read_answers(answers_file) if not r["abstained"]]
    return agreement_report(load_labels(labels_file), recorded_judgements(records), alpha)


GRADED_FIELDS = ("item", "qid", "system", "llm", "question", "answer", "abstained", "truncated", "context_ids")


def add_answers(answers_file: Path, runs: Sequence[Path]) -> int:
    """Append the answered records of runs' answers.jsonl to a graded set's answers file, without the
    judge's grades or costs (the set is judge-free); items already there are kept. Returns those added."""
    present = {answer_item(r) for r in read_answers(answers_file)} if answers_file.exists() else set()
    added = []
    for run in runs:
        for r in read_answers(run):
            item = answer_item(r)
            if r["abstained"] or item in present:
                continue
            present.add(item)
            record = {k: r[k] for k in GRADED_FIELDS if k in r}
            record["item"] = item
            record["sentences"] = [{"text": s["text"], "citations": s["citations"]} for s in r.get("sentences", [])]
            added.append(record)
    answers_file.parent.mkdir(parents=True, exist_ok=True)
    with open(answers_file, "a", encoding="utf-8") as fh:
        for record in added:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(added)
