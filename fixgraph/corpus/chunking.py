"""The `chunker` registry. Chunks are exact spans of `Document.text` with deterministic ids."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from typing import Protocol

from fixgraph.corpus.models import Block, Chunk, Document
from fixgraph.io import sha256_text
from fixgraph.modelpaths import resolve_model_path
from fixgraph.registry import Registry

TokenCounter = Callable[[str], int]


class Chunker(Protocol):
    name: str

    def chunk(self, doc: Document) -> list[Chunk]: ...


CHUNKERS: Registry[Chunker] = Registry("chunker", shared=["cache_dir"])


@lru_cache(maxsize=4)
def hf_token_counter(model: str) -> TokenCounter:
    """Count tokens with the embedder's own tokenizer, so budgets match what the model sees."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(model)))

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def whitespace_token_counter(text: str) -> int:
    return len(text.split())


@dataclass
class _Unit:
    blocks: list[Block]
    tokens: int

    @property
    def is_heading(self) -> bool:
        return all(b.kind in ("heading", "title", "summary", "term") for b in self.blocks)


def make_chunk(doc: Document, blocks: list[Block], ordinal: int, tokens: int) -> Chunk:
    start, end = blocks[0].start, blocks[-1].end
    section = blocks[0].section
    path = next((s.heading_path for s in doc.sections if s.id == section), [])
    text = doc.text[start:end]
    return Chunk(
        id=f"{doc.id}#{section or '_'}-{ordinal}",
        doc_id=doc.id,
        start=start,
        end=end,
        text=text,
        title=doc.title,
        heading_path=path,
        section=section,
        n_tokens=tokens,
        content_hash=sha256_text(text),
    )


def pack_units(units: list[_Unit], max_tokens: int, min_tokens: int) -> list[list[_Unit]]:
    """Greedy packing of whole units; headings go with what follows; a small tail joins its predecessor."""
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0
    for unit in units:
        only_headings = all(u.is_heading for u in current)
        if current and size + unit.tokens > max_tokens and not only_headings:
            groups.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.tokens
    if current:
        tail = sum(u.tokens for u in current)
        if groups and tail < min_tokens and sum(u.tokens for u in groups[-1]) + tail <= max_tokens + min_tokens:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


@CHUNKERS.register("structural")
class StructuralChunker:
    """Packs whole blocks (list items whole) of one section into chunks of at most `max_tokens`.

    A single unit larger than the budget becomes a chunk of its own rather than being cut mid-item.
    With `skip_empty_sections`, a section holding nothing but its heading gives no chunk: Mallard guide
    sections that Yelp fills with links to other pages, and sections whose body is an XInclude of
    another page's section, parse to a bare heading, which answers nothing but matches questions on its
    topic words and takes a top-k slot.
    """

    def __init__(
        self,
        name: str = "structural",
        tokenizer: str = "whitespace",
        max_tokens: int = 200,
        min_tokens: int = 48,
        skip_empty_sections: bool = False,
        merge_small_sections: bool = False,
    ) -> None:
        if max_tokens <= 0 or min_tokens < 0:
            raise ValueError(f"chunker {name}: max_tokens must be > 0 and min_tokens >= 0")
        self.name = name
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.skip_empty_sections = skip_empty_sections
        self.merge_small_sections = merge_small_sections
        self.count_tokens = whitespace_token_counter if tokenizer == "whitespace" else hf_token_counter(tokenizer)

    def units(self, doc: Document) -> Iterable[tuple[str, list[_Unit]]]:
        for section, section_blocks in groupby(doc.blocks, key=lambda b: b.section):
            units = [
                _Unit(blocks=list(blocks), tokens=0) for _, blocks in groupby(section_blocks, key=lambda b: b.unit)
            ]
            for unit in units:
                unit.tokens = sum(self.count_tokens(doc.text[b.start : b.end]) for b in unit.blocks)
            yield section, units

    def chunk(self, doc: Document) -> list[Chunk]:
        groups: list[list[_Unit]] = []
        for _, units in self.units(doc):
            for group in pack_units(units, self.max_tokens, self.min_tokens):
                if self.skip_empty_sections and all(b.kind == "heading" for u in group for b in u.blocks):
                    continue  # headings go with what follows, so only a section with no body gets here
                groups.append(group)
        if self.merge_small_sections:
            groups = merge_small(groups, self.max_tokens, self.min_tokens)
        chunks: list[Chunk] = []
        # ordinals count per section id (of a chunk's first block), so a section whose blocks resume
        # after a nested one still gets distinct chunk ids (Mallard never interleaves, so its ids are
        # unchanged)
        ordinals: dict[str, int] = {}
        for group in groups:
            blocks = [b for u in group for b in u.blocks]
            ordinal = ordinals.get(blocks[0].section, 0)
            ordinals[blocks[0].section] = ordinal + 1
            chunks.append(make_chunk(doc, blocks, ordinal, sum(u.tokens for u in group)))
        return chunks


def merge_small(groups: list[list[_Unit]], max_tokens: int, min_tokens: int) -> list[list[_Unit]]:
    """Joins neighbouring chunks of one page across a section boundary when either is under
    `min_tokens` and together they fit `max_tokens`: pages of many short sections (Evolution's help)
    otherwise split an answer over chunks of a few dozen tokens."""
    merged: list[list[_Unit]] = []
    for group in groups:
        if merged:
            before, size = sum(u.tokens for u in merged[-1]), sum(u.tokens for u in group)
            if min(before, size) < min_tokens and before + size <= max_tokens:
                merged[-1] = merged[-1] + group
                continue
        merged.append(group)
    return merged


def chunk_documents(chunker: Chunker, docs: Iterable[Document]) -> list[Chunk]:
    chunks = [chunk for doc in docs for chunk in chunker.chunk(doc)]
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"chunker produced duplicate chunk ids: {dupes[:5]}")
    return chunks
