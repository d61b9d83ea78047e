"""Question generation in the shared question format, from the knowledge graph and from conditional links.

- path questions: two-hop paths of the graph (a -r1-> b -r2-> c over problem/fix/step relations); the
  model reads the chunks that evidence both edges and writes a question, reference answer, key facts
  and verbatim evidence quotes (prompt question_from_path_v1).
- bridge questions: a conditional link (links.parquet, `conditional` true) from page A to page C; the
  model writes the question of someone in A's situation whose answer is on C, without naming C's
  concept (prompt question_bridge_v1). The record carries `bridge: {from: A, to: C, link_text}`.

Every candidate goes through the mechanical checks and the screen (`answer.qchecks`); the ones that pass
are written to the output file (runnable with `fixgraph evaluate --questions`), the others with their
reasons to `<out>.rejected.jsonl`. `fixgraph questions review` then asks a person to accept or reject
each one (resumable), writing the accepted ones to `<out stem>.reviewed.jsonl`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig
from pydantic import ValidationError

from fixgraph.answer.prompts import load_prompt
from fixgraph.answer.qchecks import mechanical_problems, screen_problems
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.llm.structured import StructuredOutputError

PATH_RELATIONS = ("describes_problem", "fixed_by", "has_cause", "has_step", "describes_task", "uses")
GENERATED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "maxLength": 400},
        "answer": {"type": "string", "maxLength": 800},
        "key_facts": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}},
        "evidence": {
            "type": "array",
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {"page": {"type": "string"}, "quote": {"type": "string", "maxLength": 400}},
                "required": ["page", "quote"],
            },
        },
    },
    "required": ["question", "answer", "key_facts", "evidence"],
}


@dataclass(frozen=True)
class Candidate:
    kind: str  # path | bridge
    source: str  # human-readable origin (the path, or A -> C)
    prompt: str
    pages: tuple[str, ...]  # pages whose text the gold quotes may come from
    leak_pages: tuple[str, ...]  # pages whose title words the question must not use
    bridge: dict[str, str] | None = None


def path_candidates(
    graph_dir: Path, chunks: Mapping[str, Any], limit: int, max_chars: int = 1200
) -> Iterator[Candidate]:
    """Two-hop paths over PATH_RELATIONS whose edges are evidenced by chunks, in a deterministic order."""
    from fixgraph.kg.store import GraphStore

    store = GraphStore.read(graph_dir)
    edges = store.edges[store.edges["relation"].isin(PATH_RELATIONS)].sort_values("edge_id")
    evidence = store.edge_chunks()
    names = dict(zip(store.nodes["node_id"], store.nodes["name"], strict=True))
    by_source: dict[str, list[Any]] = {}
    for edge in edges.itertuples():
        by_source.setdefault(str(edge.source), []).append(edge)
    template, _ = load_prompt("question_from_path_v1")
    made = 0
    for first in edges.itertuples():
        for second in by_source.get(str(first.target), [])[:1]:
            if made >= limit or second.target == first.source:
                continue
            chunk_ids = sorted(evidence.get(str(first.edge_id), set()) | evidence.get(str(second.edge_id), set()))
            passages = [chunks[c] for c in chunk_ids if c in chunks][:3]
            if not passages:
                continue
            hops = [
                str(names.get(first.source, first.source)),
                f"({first.relation}) {names.get(first.target, first.target)}",
                f"({second.relation}) {names.get(second.target, second.target)}",
            ]
            path = " -> ".join(hops)
            text = "\n\n".join(f"[page {c.doc_id}] {c.text}" for c in passages)[:max_chars]
            pages = tuple(dict.fromkeys(c.doc_id for c in passages))
            yield Candidate("path", path, template.substitute(path=path, passages=text), pages, pages)
            made += 1


def bridge_candidates(
    links: pd.DataFrame, page_texts: Mapping[str, str], titles: Mapping[str, str], limit: int, max_chars: int = 1200
) -> Iterator[Candidate]:
    """Resolved conditional links between two different pages, one per (A, C) pair."""
    template, _ = load_prompt("question_bridge_v1")
    rows = links[
        (links["conditional"]) & (links["status"] == "resolved") & (links["source_doc"] != links["resolved_doc"])
    ]
    seen: set[tuple[str, str]] = set()
    for row in rows.sort_values(["source_doc", "resolved_doc"]).itertuples():
        pair = (str(row.source_doc), str(row.resolved_doc))
        if pair in seen or pair[1] not in page_texts or len(seen) >= limit:
            continue
        seen.add(pair)
        source, target = pair
        prompt = template.substitute(
            source=source,
            target=target,
            target_title=titles.get(target, target),
            source_text=f"{row.sentence}\n{page_texts.get(source, '')}"[: max_chars // 2],
            target_text=page_texts[target][:max_chars],
        )
        bridge = {"from": source, "to": target, "link_text": str(row.anchor_text)}
        yield Candidate("bridge", f"{source} -> {target}", prompt, (target,), (target,), bridge)


def evidence_page(candidate: Candidate, named: str, quote: str, page_texts: Mapping[str, str]) -> str:
    """The candidate page whose text holds the quote (code decides; models mangle page ids, e.g. they
    copy the "page " label of the passage), else the named page with that label removed."""
    from fixgraph.answer.qchecks import normalise

    for page in candidate.pages:
        if normalise(quote) and normalise(quote) in normalise(page_texts.get(page, "")):
            return page
    named = named.strip().removeprefix("page ").strip()
    return named if candidate.kind == "path" else candidate.pages[0]


def to_question(
    candidate: Candidate, value: Mapping[str, Any], qid: str, model: str, page_texts: Mapping[str, str]
) -> Question:
    gold = [
        {"page": evidence_page(candidate, str(e["page"]), str(e["quote"]), page_texts), "quote": str(e["quote"])}
        for e in value["evidence"]
    ]
    record: dict[str, Any] = {
        "qid": qid,
        "question": str(value["question"]).strip(),
        "qtype": "bridge" if candidate.kind == "bridge" else "multi",
        "answerable": True,
        "gold": gold,
        "answer": str(value["answer"]).strip(),
        "key_facts": [str(f) for f in value["key_facts"]],
        "generated": {"kind": candidate.kind, "source": candidate.source, "model": model},
    }
    if candidate.bridge:
        record["bridge"] = candidate.bridge
    return Question.model_validate(record)


@dataclass
class Generated:
    accepted: list[Question]
    rejected: list[dict[str, Any]]


def generate(
    llm: Any,
    candidates: Sequence[Candidate],
    page_texts: Mapping[str, str],
    titles: Mapping[str, str],
    max_tokens: int = 300,
) -> Generated:
    result = Generated([], [])
    for number, candidate in enumerate(candidates, start=1):
        qid = f"gen-{candidate.kind}-{number:03d}"
        try:
            value = llm.complete_json(
                candidate.prompt, GENERATED_SCHEMA, stage="generate", temperature=0.0, max_tokens=max_tokens
            ).value
            question = to_question(candidate, value, qid, llm.identity(), page_texts)
        except (StructuredOutputError, ValidationError) as exc:
            result.rejected.append({"qid": qid, "source": candidate.source, "problems": [f"invalid output: {exc}"]})
            continue
        problems = mechanical_problems(question, page_texts, titles, candidate.leak_pages)
        problems += screen_problems(question, [q.question for q in result.accepted])
        if problems:
            result.rejected.append(
                {"qid": qid, "source": candidate.source, "problems": problems, **question.model_dump()}
            )
        else:
            result.accepted.append(question)
    return result


def write_questions(path: Path, questions: Sequence[Question]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(q.model_dump(by_alias=True, exclude_none=True), ensure_ascii=False) for q in questions]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def check_file(path: Path, page_texts: Mapping[str, str], titles: Mapping[str, str]) -> dict[str, list[str]]:
    """qid -> mechanical problems of every question of a file (bridge: C's title; else gold pages')."""
    out: dict[str, list[str]] = {}
    for question in load_questions(path):
        leak = [question.bridge.to] if question.bridge else sorted({g.page for g in question.gold})
        problems = mechanical_problems(question, page_texts, titles, leak if question.bridge else [])
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
    from fixgraph.experiment.layout import Layout
    from fixgraph.experiment.stages import chunk, load_chunks, load_documents

    chunk(cfg)
    docs = load_documents(cfg)
    page_texts = {d.id: d.text for d in docs}
    titles = {d.id: d.title for d in docs}
    if action == "check":
        problems = check_file(out, page_texts, titles)
        print(json.dumps({"file": str(out), "problems": problems}, indent=2))
        return 1 if problems else 0
    if action == "review":
        made, reviewed = review(out)
        print(f"{made} decisions recorded; accepted questions in {reviewed}")
        return 0
    from fixgraph.experiment import graph_stage
    from fixgraph.llm.base import build_llm

    llm = build_llm(cfg.llm)
    candidates: list[Candidate] = []
    if "path" in kinds:
        graph_stage.build(cfg, track=False)
        chunks = {c.id: c for c in load_chunks(cfg)}
        candidates += list(path_candidates(graph_stage.graph_dir(cfg), chunks, limit))
    if "bridge" in kinds:
        links = pd.read_parquet(Layout.from_config(cfg).link_graph)
        candidates += list(bridge_candidates(links, page_texts, titles, limit))
    result = generate(llm, candidates, page_texts, titles)
    write_questions(out, result.accepted)
    rejected = out.with_suffix(".rejected.jsonl")
    rejected.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rejected), encoding="utf-8")
    print(
        f"{len(candidates)} candidates: {len(result.accepted)} passed the checks -> {out}; "
        f"{len(result.rejected)} rejected -> {rejected}; usage {llm.usage.totals()}"
    )
    return 0
