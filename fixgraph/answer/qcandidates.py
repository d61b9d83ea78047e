"""Candidates for question generation: the prompt, its numbered evidence sentences and what must not leak.

The model never writes a gold quote itself: the evidence is shown as numbered sentences cut from the
page text, the model answers with sentence numbers, and code copies those sentences. Small models
paraphrase or invent quotes when asked to copy them (the 0.5B model wrote the placeholder "exact
sentence"); a number cannot be paraphrased. The mechanical checks still test every quote against its
page, independently of how it was made.

- path: a two-hop graph path a -r1-> b -r2-> c over problem / fix / step relations; the sentences of the
  chunks that evidence both edges; the question must not name c (the answer end of the path).
- bridge: a conditional link from page A to page C; A's situation as context, C's sentences as
  evidence; the question must not name C's concept (its title).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fixgraph.answer.parsing import SENTENCE_END
from fixgraph.answer.prompts import load_prompt
from fixgraph.answer.qchecks import MIN_QUOTE_CHARS, concept_words

PATH_RELATIONS = ("describes_problem", "fixed_by", "has_cause", "has_step", "describes_task", "uses")


@dataclass(frozen=True)
class EvidenceSentence:
    page: str
    text: str  # verbatim from the page text


@dataclass(frozen=True)
class Candidate:
    kind: str  # path | bridge
    source: str  # human-readable origin (the path, or A -> C)
    prompt: str  # the filled template, up to (not including) the final "JSON:" cue
    sentences: tuple[EvidenceSentence, ...]  # numbered 1..n in the prompt
    leak: tuple[tuple[str, str], ...]  # (label, text) whose concept the question must not name
    bridge: dict[str, str] | None = None
    answer_node: str | None = None  # path: the name of the path's last node


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, each a verbatim substring of it: lines first, then the sentence ends that
    split a model's plain-text answer (`parsing.SENTENCE_END`)."""
    out: list[str] = []
    for line in text.splitlines():
        out += [s.strip() for s in SENTENCE_END.split(line) if s.strip()]
    return out


def number_sentences(
    pages: Sequence[tuple[str, str]], max_chars: int, skip: Sequence[str] = (), start: int = 1
) -> tuple[str, list[EvidenceSentence]]:
    """The prompt block of (page, text) pairs with `[n]` before every sentence long enough to be evidence.

    Shorter lines (headings, UI labels) are shown unnumbered for context; `skip` lines (page titles,
    which make poor evidence and invite title leaks) are left out; the block stops at `max_chars`.
    """
    lines: list[str] = []
    numbered: list[EvidenceSentence] = []
    used = 0
    for page, text in pages:
        lines.append(f"[page {page}]")
        for sentence in split_sentences(text):
            if sentence in skip:
                continue
            if used + len(sentence) > max_chars:
                break
            used += len(sentence)
            if len(sentence) >= MIN_QUOTE_CHARS:
                numbered.append(EvidenceSentence(page, sentence))
                lines.append(f"[{start + len(numbered) - 1}] {sentence}")
            else:
                lines.append(f"    {sentence}")
    return "\n".join(lines), numbered


def forbidden_words(text: str) -> str:
    """The words of `text` that the question must not use, for the prompt (checked by qchecks anyway)."""
    words = sorted(w for w in re.findall(r"[A-Za-z]+", text.lower()) if concept_words(w))
    return ", ".join(dict.fromkeys(words))


def path_candidates(
    graph_dir: Path, chunks: Mapping[str, Any], titles: Mapping[str, str], limit: int, max_chars: int = 1200
) -> Iterator[Candidate]:
    """Two-hop paths over PATH_RELATIONS whose edges are evidenced by chunks, one per first page, in a
    deterministic order (one per page spreads the questions over the corpus)."""
    from fixgraph.kg.store import GraphStore

    store = GraphStore.read(graph_dir)
    edges = store.edges[store.edges["relation"].isin(PATH_RELATIONS)].sort_values("edge_id")
    evidence = store.edge_chunks()
    names = dict(zip(store.nodes["node_id"], store.nodes["name"], strict=True))
    by_source: dict[str, list[Any]] = {}
    for edge in edges.itertuples():
        by_source.setdefault(str(edge.source), []).append(edge)
    template, _ = load_prompt("question_from_path_v2")
    made, seen_pages = 0, set()
    for first in edges.itertuples():
        for second in by_source.get(str(first.target), [])[:1]:
            if made >= limit or second.target == first.source:
                continue
            chunk_ids = sorted(evidence.get(str(first.edge_id), set()) | evidence.get(str(second.edge_id), set()))
            passages = [chunks[c] for c in chunk_ids if c in chunks][:3]
            if not passages or passages[0].doc_id in seen_pages:
                continue
            answer_node = str(names.get(second.target, second.target))
            hops = [
                str(names.get(first.source, first.source)),
                f"({first.relation}) {names.get(first.target, first.target)}",
                f"({second.relation}) {answer_node}",
            ]
            path = " -> ".join(hops)
            skip = [titles.get(c.doc_id, "") for c in passages]
            block, sentences = number_sentences([(c.doc_id, c.text) for c in passages], max_chars, skip)
            if not sentences:
                continue
            prompt = template.substitute(path=path, sentences=block, forbidden=forbidden_words(answer_node))
            seen_pages.add(passages[0].doc_id)
            leak = (("answer", answer_node),)
            yield Candidate("path", path, prompt, tuple(sentences), leak, answer_node=answer_node)
            made += 1


def bridge_candidates(
    links: pd.DataFrame, page_texts: Mapping[str, str], titles: Mapping[str, str], limit: int, max_chars: int = 1200
) -> Iterator[Candidate]:
    """Resolved conditional links between two different pages, one per (A, C) pair."""
    template, _ = load_prompt("question_bridge_v2")
    rows = links[
        (links["conditional"])
        & (links["status"].isin(["resolved", "redirected"]))
        & (links["source_doc"] != links["resolved_doc"])
    ]
    seen: set[tuple[str, str]] = set()
    for row in rows.sort_values(["source_doc", "resolved_doc"]).itertuples():
        pair = (str(row.source_doc), str(row.resolved_doc))
        if pair in seen or pair[1] not in page_texts or len(seen) >= limit:
            continue
        source, target = pair
        title = titles.get(target, target)
        block, sentences = number_sentences([(target, page_texts[target])], max_chars, skip=[title])
        if not sentences:
            continue
        seen.add(pair)
        prompt = template.substitute(
            source=source,
            source_text=f"{row.sentence}\n{page_texts.get(source, '')}"[: max_chars // 2],
            target=target,
            sentences=block,
            forbidden=forbidden_words(title),
        )
        bridge = {"from": source, "to": target, "link_text": str(row.anchor_text)}
        yield Candidate("bridge", f"{source} -> {target}", prompt, tuple(sentences), ((target, title),), bridge)
