"""Map gold quotes (page id + exact text) onto chunks, so any chunker can be evaluated.

A quote is located in its page's text after normalising whitespace, case and quote characters;
every chunk its span overlaps is gold (a quote may straddle a chunk boundary). A gold entry names its
document by id (`page`) or, for scraped corpora, by `url` (matched against document URLs, the ids
derived from URLs and redirected URLs kept as aliases). Every quote that does not map is reported as
`file:line qid page: reason`; an answerable question none of whose quotes maps is an error unless
allowed (it would silently drop out of scoring).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from fixgraph.corpus.models import Chunk, Document
from fixgraph.corpus.urls import doc_id_for_url, normalise_url
from fixgraph.evaluation.questions import GoldQuote, Question

log = logging.getLogger(__name__)

_QUOTE_CHARS = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})


class GoldCoverageError(RuntimeError):
    """Too few gold quotes could be found in the corpus for the metrics to mean anything."""


def normalise(text: str) -> tuple[str, list[int]]:
    """Normalised text and, for each of its characters, the offset it came from in `text`."""
    out: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text.translate(_QUOTE_CHARS)):
        if char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                origin.append(i)
            continue
        for lowered in char.lower():
            out.append(lowered)
            origin.append(i)
    if out and out[-1] == " ":
        out.pop()
        origin.pop()
    return "".join(out), origin


def find_spans(haystack: str, needle: str) -> list[tuple[int, int]]:
    """Every occurrence of `needle` in `haystack` as [start, end) offsets of the original haystack."""
    norm_hay, origin = normalise(haystack)
    norm_needle, _ = normalise(needle)
    if not norm_needle:
        return []
    spans = []
    pos = norm_hay.find(norm_needle)
    while pos != -1:
        last = pos + len(norm_needle) - 1
        spans.append((origin[pos], origin[last] + 1))
        pos = norm_hay.find(norm_needle, pos + 1)
    return spans


@dataclass
class GoldItem:
    qid: str
    index: int  # position of the quote in the question's gold list
    page: str  # the document id the quote belongs to (resolved from its URL for URL gold)
    quote: str
    status: str  # mapped | page_missing | quote_not_found
    chunk_ids: list[str] = field(default_factory=list)
    source: str = ""  # file:line of the question
    url: str = ""  # the gold URL, for URL gold
    reason: str = ""  # why it did not map, in words

    def report_line(self) -> str:
        """`file:line qid page: reason`, the form every unmapped quote is reported in."""
        return f"{self.source} {self.qid} {self.page or self.url}: {self.reason}"


class UnmappedGoldError(GoldCoverageError):
    """Answerable questions whose gold maps nowhere would silently drop out of scoring."""


@dataclass
class GoldMapping:
    items: list[GoldItem]

    @property
    def coverage(self) -> float:
        return sum(i.status == "mapped" for i in self.items) / len(self.items) if self.items else 1.0

    def for_question(self, qid: str) -> list[GoldItem]:
        return [i for i in self.items if i.qid == qid]

    def qrels(self) -> dict[str, dict[str, int]]:
        """Binary relevance: every chunk that holds (part of) a gold quote."""
        rels: dict[str, dict[str, int]] = {}
        for item in self.items:
            for cid in item.chunk_ids:
                rels.setdefault(item.qid, {})[cid] = 1
        return rels

    def unmapped(self) -> list[GoldItem]:
        return [i for i in self.items if i.status != "mapped"]

    def answer_pages(self, question: Question) -> set[str]:
        """Question.answer_pages with URL gold resolved to document ids."""
        if question.bridge is not None:
            return {question.bridge.to}
        return {i.page or i.url for i in self.for_question(question.qid)}

    def unmapped_questions(self, questions: Iterable[Question]) -> list[Question]:
        """Answerable questions none of whose gold quotes mapped: they cannot be scored."""
        mapped = {i.qid for i in self.items if i.status == "mapped"}
        return [q for q in questions if q.answerable and q.qid not in mapped]

    def report(self, questions: Iterable[Question]) -> list[str]:
        """Every unmapped quote as `file:line qid page: reason`, then each question left unscored."""
        lines = [i.report_line() for i in self.unmapped()]
        lines += [
            f"{q.source} {q.qid}: no gold quote maps onto the corpus; not scored"
            for q in self.unmapped_questions(questions)
        ]
        return lines

    def check(self, minimum: float, questions: Iterable[Question] = (), allow_unmapped: bool = False) -> list[str]:
        """Log every unmapped quote; raise below `minimum` coverage, or when an answerable question has no
        mapped gold at all (unless `allow_unmapped`). Returns the report lines (for the run's outputs)."""
        questions = list(questions)
        for item in self.unmapped():
            log.warning("gold not mapped: %s", item.report_line())
        lost = self.unmapped_questions(questions)
        if self.coverage < minimum:
            absent = sum(1 for item in self.items if item.status == "page_missing")
            # most gold pages absent: the usual cause is a question file run against the wrong corpus
            hint = (
                f"; {absent} of them name pages this corpus does not have: were the questions written for "
                "another corpus? (set corpus=...)"
                if absent > len(self.items) / 2
                else ""
            )
            raise GoldCoverageError(
                f"only {self.coverage:.1%} of {len(self.items)} gold quotes map onto chunks "
                f"(minimum {minimum:.0%}); {len(self.unmapped())} unmapped{hint}: " + "; ".join(_first(self.unmapped()))
            )
        if lost and not allow_unmapped:
            names = ", ".join(f"{q.qid} ({q.source})" for q in lost[:10]) + (" ..." if len(lost) > 10 else "")
            raise UnmappedGoldError(
                f"{len(lost)} answerable question(s) have no gold quote that maps onto the corpus and would not be "
                f"scored: {names}; fix their gold (see the lines above) or pass --allow-unmapped to score without them"
            )
        for question in lost:
            log.warning("not scored (no mapped gold, --allow-unmapped): %s %s", question.source, question.qid)
        return self.report(questions)


def _first(items: Sequence[GoldItem], n: int = 5) -> list[str]:
    return [i.report_line() for i in items[:n]] + ([f"and {len(items) - n} more"] if len(items) > n else [])


def _locate(docs: Sequence[Document], aliases: Mapping[str, str]) -> Callable[[GoldQuote], Document | None]:
    """Document of a gold entry: by id (or an alias id), or by URL (the document's URL, its id derived from
    the URL, or a redirected URL kept as an alias)."""
    by_id = {d.id: d for d in docs}
    by_url = {normalise_url(d.url): d for d in docs if d.url}

    def locate(gold: GoldQuote) -> Document | None:
        if gold.page:
            return by_id.get(gold.page) or by_id.get(aliases.get(gold.page, ""))
        url = normalise_url(gold.url)
        doc_id = doc_id_for_url(url)
        return by_url.get(url) or by_id.get(doc_id) or by_id.get(aliases.get(doc_id, ""))

    return locate


def _not_found_reason(text: str, quote: str) -> str:
    """Say how close the page comes to the quote, so a typo is easy to spot."""
    norm_text, _ = normalise(text)
    norm_quote, _ = normalise(quote)
    best = fuzz.partial_ratio_alignment(norm_quote, norm_text)
    if best is None or best.score < 50:
        return "quote not found in the page text"
    near = norm_text[best.dest_start : best.dest_end]
    return f"quote not found in the page text (closest: {near[:80]!r}, {best.score:.0f}% similar)"


def map_gold(questions: Iterable[Question], docs: Sequence[Document], chunks: Sequence[Chunk]) -> GoldMapping:
    aliases = {alias: d.id for d in docs for alias in [*d.aliases, *d.duplicates]}  # redirected, absorbed ids
    locate = _locate(docs, aliases)
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        chunks_by_doc.setdefault(chunk.doc_id, []).append(chunk)
    items: list[GoldItem] = []
    for question in questions:
        for index, gold in enumerate(question.gold):
            doc = locate(gold)
            item = GoldItem(
                question.qid,
                index,
                doc.id if doc else gold.page,
                gold.quote,
                "page_missing",
                source=question.source,
                url=gold.url,
            )
            if doc is None:
                item.reason = f"no document with id {gold.page!r}" if gold.page else f"no document for URL {gold.url!r}"
            else:
                spans = find_spans(doc.text, gold.quote)
                item.chunk_ids = [
                    c.id for c in chunks_by_doc.get(doc.id, []) if any(c.start < e and c.end > s for s, e in spans)
                ]
                item.status = "mapped" if item.chunk_ids else "quote_not_found"
                if not spans:
                    item.reason = _not_found_reason(doc.text, gold.quote)
                elif not item.chunk_ids:
                    item.reason = "quote found in the page but in no chunk (text the chunker dropped)"
            items.append(item)
    return GoldMapping(items)
