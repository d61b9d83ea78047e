"""Property tests: for any block structure, chunk offsets round-trip and every block is covered once."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from fixgraph.corpus.chunking import StructuralChunker
from fixgraph.corpus.models import Block, Document

WORDS = st.lists(
    st.sampled_from(["hub", "reset", "wifi", "amber", "light", "router", "é", "“q”"]), min_size=1, max_size=12
)


@st.composite
def documents(draw: st.DrawFn) -> Document:
    n_units = draw(st.integers(min_value=1, max_value=25))
    parts: list[str] = []
    blocks: list[Block] = []
    position = 0
    section_index = 0
    for unit in range(n_units):
        if draw(st.booleans()) and unit:
            section_index += draw(st.integers(min_value=0, max_value=1))
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            text = " ".join(draw(WORDS))
            if parts:
                parts.append("\n")
                position += 1
            blocks.append(
                Block(
                    start=position, end=position + len(text), kind="paragraph", section=f"s{section_index}", unit=unit
                )
            )
            parts.append(text)
            position += len(text)
    return Document(id="d", title="T", source="t", path="d.page", text="".join(parts), blocks=blocks)


@settings(max_examples=200, deadline=None)
@given(doc=documents(), max_tokens=st.integers(min_value=1, max_value=40), min_tokens=st.integers(0, 20))
def test_offsets_round_trip_and_blocks_covered_once(doc: Document, max_tokens: int, min_tokens: int) -> None:
    chunks = StructuralChunker(max_tokens=max_tokens, min_tokens=min_tokens).chunk(doc)
    for chunk in chunks:
        assert doc.text[chunk.start : chunk.end] == chunk.text
    for block in doc.blocks:
        holders = [c for c in chunks if c.start <= block.start and block.end <= c.end]
        assert len(holders) == 1
    # chunks are disjoint and in document order
    for left, right in itertools.pairwise(chunks):
        assert left.end <= right.start
    # every unit is whole inside one chunk
    for unit in {b.unit for b in doc.blocks}:
        owners = {c.id for b in doc.blocks if b.unit == unit for c in chunks if c.start <= b.start < c.end}
        assert len(owners) == 1
