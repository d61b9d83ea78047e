"""Assemble a Document from rendered pieces: blocks, nested sections, typed inline spans and links.

Connectors other than Mallard (man pages, HTML, Markdown, text, exports) render their input into
`Inline` runs and hand them to a `DocBuilder`, which keeps every offset exact: a block's text, a span's
text and a link's anchor text are always slices of the final `Document.text`. Blocks are joined by one
newline, as the Mallard renderer does, so the chunker treats every source the same way.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from fixgraph.corpus.blocks import BlockStream
from fixgraph.corpus.mallard import sentence_around
from fixgraph.corpus.models import Block, Document, InlineSpan, Link, Section
from fixgraph.io import sha256_text

_SLUG = re.compile(r"[^\w.-]+")


def slugify(text: str, fallback: str = "section") -> str:
    """An id fragment safe in chunk ids (`doc#section-n`) and TREC files: no spaces, no '#'."""
    slug = _SLUG.sub("-", text.strip().lower()).strip("-")
    return slug or fallback


@dataclass
class _Open:
    kind: str
    start: int
    link: Link | None = None


class Inline:
    """Inline text with whitespace collapsed (or kept, for preformatted text), plus spans and links.

    `open()`/`close()` bracket an element; positions are in the run's own text and become document
    offsets when the run is added to a DocBuilder.
    """

    def __init__(self, preserve_space: bool = False) -> None:
        self.preserve_space = preserve_space
        self.out: list[str] = []
        self.length = 0
        self.pending_space = False
        self.spans: list[tuple[str, int, int]] = []
        self.links: list[tuple[Link, int, int]] = []

    def text(self, text: str | None) -> None:
        if not text:
            return
        if self.preserve_space:
            self.out.append(text)
            self.length += len(text)
            return
        words = text.split()  # same whitespace as str.isspace(): runs collapse to one space
        if text[0].isspace() and self.length:
            self.pending_space = True
        if words:
            joined = " ".join(words)
            if self.pending_space:
                self.out.append(" ")
                self.length += 1
            self.out.append(joined)
            self.length += len(joined)
            self.pending_space = text[-1].isspace()

    def space(self) -> None:
        """A line break or similar: a separator that never doubles up."""
        if self.length:
            self.pending_space = True

    def open(self, kind: str, link: Link | None = None) -> _Open:
        return _Open(kind, self.length + (1 if self.pending_space and self.length else 0), link)

    def close(self, token: _Open) -> None:
        end = self.length
        start = min(token.start, end)
        if token.link is not None:
            self.links.append((token.link, start, end))
        elif end > start:
            self.spans.append((token.kind, start, end))

    def render(self) -> tuple[str, int]:
        """The run's text with leading/trailing whitespace removed, and how many chars were cut in front."""
        raw = "".join(self.out)
        stripped = raw.strip()
        lead = len(raw) - len(raw.lstrip())
        return stripped, lead


@dataclass
class DocBuilder(BlockStream):
    """Accumulates one document; `section()` opens a heading level, `block()` appends a block, and
    blocks added inside `unit()` (a list item, a table row, a term and its definition) share a unit."""

    sections: list[Section] = field(default_factory=list)
    spans: list[InlineSpan] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    _stack: list[tuple[int, Section]] = field(default_factory=list)
    _ids: set[str] = field(default_factory=set)

    @property
    def current_section(self) -> str:
        return self._stack[-1][1].id if self._stack else ""

    def section(self, title: str, level: int, section_id: str = "") -> str:
        """Open a section at heading `level` (1 = top), closing open ones at that level or deeper."""
        self._close_sections(level)
        parent_path = self._stack[-1][1].heading_path if self._stack else []
        base = section_id or slugify(title)
        unique, n = base, 1
        while unique in self._ids:  # repeated headings ("Example") still get distinct ids
            n += 1
            unique = f"{base}-{n}"
        self._ids.add(unique)
        start = self.length + (1 if self.parts else 0)
        record = Section(id=unique, title=title, heading_path=[*parent_path, title], start=start, end=start)
        self.sections.append(record)
        self._stack.append((level, record))
        return unique

    def _close_sections(self, level: int) -> None:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()[1].end = self.length

    def block(self, run: Inline | str, kind: str = "paragraph") -> int | None:
        """Append a block; returns its start offset, or None when it renders to nothing."""
        if isinstance(run, str):
            text_run = Inline()
            text_run.text(run)
            run = text_run
        text, lead = run.render()
        start = self.emit(text, kind, self.current_section)
        if start is None:
            return None
        for span_kind, lo, hi in run.spans:
            lo, hi = _clip(lo - lead, hi - lead, len(text))
            if hi > lo:
                self.spans.append(InlineSpan(kind=span_kind, text=text[lo:hi], start=start + lo, end=start + hi))
        for link, lo, hi in run.links:
            lo, hi = _clip(lo - lead, hi - lead, len(text))
            update = {"anchor_text": text[lo:hi], "sentence": sentence_around(text, lo, max(hi, lo + 1))}
            self.links.append(link.model_copy(update={**update, "start": start + lo, "end": start + hi}))
        return start

    def add_link(self, link: Link) -> None:
        """A link with no visible anchor (metadata links: issue links, guide links in headers)."""
        self.links.append(link)

    def text(self) -> str:
        return "".join(self.parts)

    def build(self, **fields: Any) -> Document:
        """The Document; `fields` gives id, title, source, path and any other metadata."""
        self._close_sections(0)
        text = self.text()
        fields.setdefault("content_hash", sha256_text(text))
        return Document(
            text=text, sections=self.sections, blocks=self.blocks, links=self.links, spans=self.spans, **fields
        )


def _clip(lo: int, hi: int, size: int) -> tuple[int, int]:
    lo = max(0, min(lo, size))
    return lo, max(lo, min(hi, size))


class BlockIndex:
    """Finds the block holding an offset (blocks are sorted and disjoint) by binary search."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.starts = [b.start for b in doc.blocks]

    def block_at(self, offset: int) -> Block | None:
        i = bisect.bisect_right(self.starts, offset) - 1
        if i >= 0 and self.doc.blocks[i].start <= offset < self.doc.blocks[i].end:
            return self.doc.blocks[i]
        return None

    def sentence(self, start: int, end: int) -> str:
        """The sentence around [start, end) of the document text, looked up inside its block."""
        block = self.block_at(start)
        if block is None:
            return ""
        text = self.doc.text[block.start : block.end]
        return sentence_around(text, start - block.start, end - block.start)
