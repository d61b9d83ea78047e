"""Question generation in the shared question format, from the knowledge graph and from conditional links.

Candidates (`qcandidates`): path questions from two-hop graph paths, bridge questions from conditional
links (the situation of page A, the answer on the linked page C, C's concept not named). The model
writes the question, a reference answer and key facts, and picks its evidence by SENTENCE NUMBER; code
copies those sentences as the gold quotes (verbatim by construction; the checks verify it anyway).

Every candidate goes through the mechanical checks and the screen (`qchecks`, independent of the
generator). A candidate that fails is asked once more with the checks' complaints as feedback
(`retries`). Passing questions go to the output file (runnable with `fixgraph evaluate --questions`),
the others with their reasons to `<out>.rejected.jsonl`, the pass rates per check and kind to
`<out>.summary.json`. `fixgraph questions review` then asks a person to accept or reject each one
(resumable), writing the accepted ones to `<out stem>.reviewed.jsonl`.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig
from pydantic import ValidationError

from fixgraph.answer.qcandidates import Candidate, bridge_candidates, path_candidates
from fixgraph.answer.qchecks import mechanical_problems, screen_problems
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.llm.structured import StructuredOutputError

log = logging.getLogger(__name__)
GENERATED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "maxLength": 400},
        "answer": {"type": "string", "maxLength": 600},
        "key_facts": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}},
        "evidence": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "integer"}},
    },
    "required": ["question", "answer", "key_facts", "evidence"],
}
FEEDBACK = "\n\nYour previous reply was:\n{reply}\nIt was rejected because: {problems}.\nWrite a corrected reply."
# problem message prefix -> check name, for the pass rates per check
CHECKS = {
    "invalid output": "valid_output",
    "evidence sentence": "evidence_numbers",
    "gold page": "gold_page_exists",
    "gold quote not verbatim": "quote_verbatim",
    "question names the concept": "no_concept_leak",
    "question has": "screen_length",
    "no reference answer": "screen_answer",
    "key facts": "screen_key_facts",
    "a gold quote is shorter": "screen_quote_length",
    "near-duplicate": "screen_duplicate",
    "question copies its evidence": "screen_copied_evidence",
    "question refers to its source": "screen_source_mention",
}


class GenerationError(ValueError):
    """A reply that parses but cannot become a question (e.g. evidence numbers that were not shown)."""


def generated_info(question: Question) -> dict[str, Any]:
    """The `generated` record of a generated question ({} for others)."""
    info = (question.model_extra or {}).get("generated")
    return info if isinstance(info, dict) else {}


def check_name(problem: str) -> str:
    for prefix, name in CHECKS.items():
        if prefix in problem.split(":")[0]:
            return name
    return "other"


def to_question(candidate: Candidate, value: Mapping[str, Any], qid: str, model: str) -> Question:
    numbers = list(dict.fromkeys(int(n) for n in value["evidence"]))
    wrong = [n for n in numbers if not 1 <= n <= len(candidate.sentences)]
    if wrong or not numbers:
        raise GenerationError(
            f"evidence sentence {wrong or numbers} is not one of the numbered sentences 1-{len(candidate.sentences)}"
        )
    picked = [candidate.sentences[n - 1] for n in numbers]
    generated: dict[str, Any] = {"kind": candidate.kind, "source": candidate.source, "model": model}
    if candidate.answer_node:
        generated["answer_node"] = candidate.answer_node
    record: dict[str, Any] = {
        "qid": qid,
        "question": str(value["question"]).strip(),
        "qtype": "bridge" if candidate.kind == "bridge" else "multi",
        "answerable": True,
        "gold": [{"page": s.page, "quote": s.text} for s in picked],
        "answer": str(value["answer"]).strip(),
        "key_facts": [str(f).strip() for f in value["key_facts"] if str(f).strip()],
        "generated": generated,
    }
    if candidate.bridge:
        record["bridge"] = candidate.bridge
    return Question.model_validate(record)


@dataclass
class Generated:
    accepted: list[Question]
    rejected: list[dict[str, Any]]
    attempts: list[dict[str, Any]] = field(default_factory=list)  # one per model call round, with problems

    def summary(self) -> dict[str, Any]:
        """Pass rates per kind (first try, after the retry) and per check (over every attempt)."""
        out: dict[str, Any] = {"kinds": {}, "checks": {}}
        for kind in sorted({a["kind"] for a in self.attempts}):
            mine = [a for a in self.attempts if a["kind"] == kind]
            candidates = {a["qid"] for a in mine}
            first = [a for a in mine if a["attempt"] == 1]
            passed = sum(generated_info(q).get("kind") == kind for q in self.accepted)
            out["kinds"][kind] = {
                "candidates": len(candidates),
                "passed_first_try": sum(not a["problems"] for a in first),
                "passed": passed,
                "pass_rate": passed / len(candidates) if candidates else None,
            }
        failed = Counter(check_name(p) for a in self.attempts for p in a["problems"])
        failed_invalid = failed.get("valid_output", 0)
        for name in dict.fromkeys(CHECKS.values()):
            # a check is only reached by attempts that produced a question (invalid output stops early)
            reached = len(self.attempts) - (0 if name == "valid_output" else failed_invalid)
            out["checks"][name] = {"attempts": reached, "failed": failed.get(name, 0)}
        return out


def generate(
    llm: Any,
    candidates: Sequence[Candidate],
    page_texts: Mapping[str, str],
    max_tokens: int = 300,
    retries: int = 1,
) -> Generated:
    """Ask, check, and ask once more with the complaints when a candidate fails (`retries` times)."""
    result = Generated([], [])
    for number, candidate in enumerate(candidates, start=1):
        qid = f"gen-{candidate.kind}-{number:03d}"
        prompt = candidate.prompt
        for attempt in range(1, retries + 2):
            question, problems, reply = _attempt(llm, candidate, prompt, qid, page_texts, max_tokens, result.accepted)
            result.attempts.append({"qid": qid, "kind": candidate.kind, "attempt": attempt, "problems": problems})
            log.info("%s try %d: %s", qid, attempt, "; ".join(problems) or "passed")
            if question is not None and not problems:
                generated_info(question)["attempts"] = attempt
                result.accepted.append(question)
                break
            prompt = candidate.prompt + FEEDBACK.format(reply=reply, problems="; ".join(problems))
        else:
            record = question.model_dump() if question is not None else {}
            result.rejected.append(
                {"qid": qid, "source": candidate.source, "attempts": attempt, "problems": problems, **record}
            )
    return result


def _attempt(
    llm: Any,
    candidate: Candidate,
    prompt: str,
    qid: str,
    page_texts: Mapping[str, str],
    max_tokens: int,
    accepted: Sequence[Question],
) -> tuple[Question | None, list[str], str]:
    """(question or None, problems, the reply as text for the feedback) of one model call."""
    try:
        value = llm.complete_json(
            prompt + "\nJSON:", GENERATED_SCHEMA, stage="generate", temperature=0.0, max_tokens=max_tokens
        ).value
    except StructuredOutputError as exc:
        return None, [f"invalid output: {exc}"], "(not valid JSON)"
    reply = json.dumps(value, ensure_ascii=False)
    try:
        question = to_question(candidate, value, qid, llm.identity())
    except GenerationError as exc:
        return None, [str(exc)], reply
    except ValidationError as exc:
        return None, [f"invalid output: {exc.errors()[0]['msg']}"], reply
    problems = mechanical_problems(question, page_texts, dict(candidate.leak))
    problems += screen_problems(question, [q.question for q in accepted])
    return question, problems, reply


def write_questions(path: Path, questions: Sequence[Question]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(q.model_dump(by_alias=True, exclude_none=True), ensure_ascii=False) for q in questions]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def leak_targets(question: Question, titles: Mapping[str, str]) -> dict[str, str]:
    """What the question must not name, from the question record alone: a bridge question C's title,
    a generated path question its path's answer node (`generated.answer_node`)."""
    if question.bridge is not None:
        return {question.bridge.to: titles.get(question.bridge.to, question.bridge.to)}
    node = generated_info(question).get("answer_node")
    return {"answer": str(node)} if node else {}


def check_file(path: Path, page_texts: Mapping[str, str], titles: Mapping[str, str]) -> dict[str, list[str]]:
    """qid -> problems of every question of a file: the mechanical checks and the screen (in file order,
    so a near-duplicate is reported on the later question)."""
    out: dict[str, list[str]] = {}
    earlier: list[str] = []
    for question in load_questions(path):
        problems = mechanical_problems(question, page_texts, leak_targets(question, titles))
        problems += screen_problems(question, earlier)
        earlier.append(question.question)
        if problems:
            out[question.qid] = problems
    return out


def review(path: Path, ask: Callable[[str], str] = input) -> tuple[int, Path]:
    """Accept / reject each question not yet reviewed; decisions append to <stem>.review.jsonl."""
    decisions_file = path.with_suffix(".review.jsonl")
    decisions: dict[str, str] = {}
    if decisions_file.exists():
        for line in decisions_file.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            decisions[record["qid"]] = record["decision"]
    questions = load_questions(path)
    made = 0
    for question in questions:
        if question.qid in decisions:
            continue
        facts = "\n".join(f"  - {f}" for f in question.key_facts)
        quotes = "\n".join(f"  [{g.page}] {g.quote}" for g in question.gold)
        prompt = (
            f"\n=== {question.qid} ({question.qtype}) ===\nQUESTION: {question.question}\nANSWER: {question.answer}\n"
            f"KEY FACTS:\n{facts}\nGOLD:\n{quotes}\na accept / r reject / q stop: "
        )
        reply = ""
        while reply not in ("a", "r", "q"):
            reply = ask(prompt).strip().lower()
        if reply == "q":
            break
        decisions[question.qid] = "accept" if reply == "a" else "reject"
        with open(decisions_file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"qid": question.qid, "decision": decisions[question.qid]}) + "\n")
        made += 1
    reviewed = path.with_suffix(".reviewed.jsonl")
    write_questions(reviewed, [q for q in questions if decisions.get(q.qid) == "accept"])
    return made, reviewed


def command(cfg: DictConfig, action: str, out: Path, limit: int, kinds: Sequence[str]) -> int:
    from fixgraph.pipeline.layout import Layout
    from fixgraph.pipeline.stages import chunk, load_chunks, load_documents

    chunk(cfg)
    docs = load_documents(cfg)
    page_texts = {d.id: d.text for d in docs}
    titles = {d.id: d.title for d in docs}
    if action == "check":
        problems = check_file(out, page_texts, titles)
        failed = Counter(check_name(p) for found in problems.values() for p in found)
        print(
            json.dumps(
                {"file": str(out), "problems": problems, "failed_by_check": dict(sorted(failed.items()))}, indent=2
            )
        )
        if problems:  # the questions that pass, next to the file, for `evaluate --questions`
            passing = [q for q in load_questions(out) if q.qid not in problems]
            write_questions(out.with_suffix(".passing.jsonl"), passing)
            print(f"{len(passing)} of {len(passing) + len(problems)} pass -> {out.with_suffix('.passing.jsonl')}")
        return 1 if problems else 0
    if action == "review":
        made, reviewed = review(out)
        print(f"{made} decisions recorded; accepted questions in {reviewed}")
        return 0
    from fixgraph.llm.base import build_llm
    from fixgraph.pipeline import graph as graph_stage

    llm = build_llm(cfg.llm)
    candidates: list[Candidate] = []
    if "path" in kinds:
        graph_stage.build(cfg, track=False)
        chunks = {c.id: c for c in load_chunks(cfg)}
        candidates += list(path_candidates(graph_stage.graph_dir(cfg), chunks, titles, limit))
    if "bridge" in kinds:
        links = pd.read_parquet(Layout.from_config(cfg).link_graph)
        candidates += list(bridge_candidates(links, page_texts, titles, limit))
    result = generate(llm, candidates, page_texts)
    write_questions(out, result.accepted)
    rejected = out.with_suffix(".rejected.jsonl")
    rejected.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rejected), encoding="utf-8")
    summary = {**result.summary(), "model": llm.identity(), "usage": llm.usage.totals()}
    out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    print(
        f"{len(candidates)} candidates: {len(result.accepted)} passed the checks -> {out}; "
        f"{len(result.rejected)} rejected -> {rejected}"
    )
    return 0
