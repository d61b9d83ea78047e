"""Map gold quotes (page id + exact text) onto chunks, so any chunker can be evaluated.

A quote is located in its page's text after normalising whitespace, case and quote characters;
every chunk its span overlaps is gold (a quote may straddle a chunk boundary).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fixgraph.corpus.models import Chunk, Document
from fixgraph.evaluation.questions import Question

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
    page: str
    quote: str
    status: str  # mapped | page_missing | quote_not_found
    chunk_ids: list[str] = field(default_factory=list)


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

    def check(self, minimum: float) -> None:
        if self.coverage < minimum:
            examples = "; ".join(f"{i.qid} {i.page}: {i.status} {i.quote[:60]!r}" for i in self.unmapped()[:5])
            raise GoldCoverageError(
                f"only {self.coverage:.1%} of {len(self.items)} gold quotes map onto chunks "
                f"(minimum {minimum:.0%}); e.g. {examples}"
            )


def map_gold(questions: Iterable[Question], docs: Sequence[Document], chunks: Sequence[Chunk]) -> GoldMapping:
    by_id = {d.id: d for d in docs}
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        chunks_by_doc.setdefault(chunk.doc_id, []).append(chunk)
    items: list[GoldItem] = []
    for question in questions:
        for index, gold in enumerate(question.gold):
            item = GoldItem(question.qid, index, gold.page, gold.quote, "page_missing")
            doc = by_id.get(gold.page)
            if doc is not None:
                spans = find_spans(doc.text, gold.quote)
                item.chunk_ids = [
                    c.id for c in chunks_by_doc.get(doc.id, []) if any(c.start < e and c.end > s for s, e in spans)
                ]
                item.status = "mapped" if item.chunk_ids else "quote_not_found"
            items.append(item)
    return GoldMapping(items)
