"""Property tests of the corpus layer: for any HTML structure, rendering keeps every visible word exactly
once and every offset exact; incremental chunking never changes the chunks of unchanged documents."""

from __future__ import annotations

import collections
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from fixgraph.corpus.builder import DocBuilder
from fixgraph.corpus.chunking import StructuralChunker
from fixgraph.corpus.html import HtmlOptions, parse_html, render_article
from fixgraph.corpus.incremental import ChunkCache, chunk_incrementally
from fixgraph.corpus.models import Block, Document, Link

WORDS = st.sampled_from(["hub", "reset", "wifi", "amber", "é", "“q”", "Ctrl+R", "x&y", "a<b"])
TEXT = st.lists(WORDS, min_size=1, max_size=4).map(lambda ws: " " + " ".join(ws) + " ")
INLINE_TAGS = ["span", "b", "kbd", "code", "a"]
BLOCK_TAGS = ["p", "div", "h2", "h3", "pre", "blockquote"]


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


@st.composite
def inline(draw: st.DrawFn, depth: int = 0) -> str:
    parts = [escape(draw(TEXT))]
    for _ in range(draw(st.integers(0, 2 if depth < 2 else 0))):
        tag = draw(st.sampled_from(INLINE_TAGS))
        attrs = ' href="/page#sec"' if tag == "a" else ""
        parts.append(f"<{tag}{attrs}>{draw(inline(depth + 1))}</{tag}>{escape(draw(TEXT))}")
    return "".join(parts)


@st.composite
def block(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["p", "list", "dl", "table", "nested"] if depth < 2 else ["p"]))
    if kind == "p":
        tag = draw(st.sampled_from(BLOCK_TAGS))
        return f"<{tag}>{draw(inline())}</{tag}>"
    if kind == "list":
        tag = draw(st.sampled_from(["ul", "ol"]))
        items = draw(st.lists(st.one_of(inline(), block(depth + 1)), min_size=1, max_size=3))
        return f"<{tag}>" + "".join(f"<li>{item}</li>" for item in items) + f"</{tag}>"
    if kind == "dl":
        pairs = draw(st.lists(st.tuples(inline(), inline()), min_size=1, max_size=3))
        return "<dl>" + "".join(f"<dt>{t}</dt><dd>{d}</dd>" for t, d in pairs) + "</dl>"
    if kind == "table":
        rows = draw(st.lists(st.lists(inline(), min_size=1, max_size=3), min_size=1, max_size=3))
        return "<table>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>"
    return "<div>" + draw(inline()) + "".join(draw(st.lists(block(depth + 1), max_size=3))) + "</div>"


OPTIONS = HtmlOptions(article=("article",), title=(), remove=(), spans={"kbd": "key", "code": "code", "b": "bold"})


def render(html: str) -> tuple[Document, etree._Element]:
    builder = DocBuilder()
    root = parse_html(f"<html><body><article>{html}</article></body></html>", "generated")
    source_words = collections.Counter(" ".join(root.cssselect("article")[0].itertext()).split())  # type: ignore[attr-defined]
    render_article(root, builder, OPTIONS, lambda href: Link(target_doc="page", link_type="inline"), "generated")
    return builder.build(id="d", title="d", source="t", path="d.html"), source_words  # type: ignore[return-value]


@settings(max_examples=150, deadline=None)
@given(body=st.lists(block(), min_size=1, max_size=5).map("".join))
def test_html_rendering_keeps_every_word_once_with_exact_offsets(body: str) -> None:
    doc, source_words = render(body)
    assert collections.Counter(doc.text.split()) == source_words  # nothing lost, nothing doubled
    covered = [0] * len(doc.text)
    for b in doc.blocks:
        assert doc.text[b.start : b.end].strip() == doc.text[b.start : b.end] != ""
        for i in range(b.start, b.end):
            covered[i] += 1
    assert all(c == 1 for i, c in enumerate(covered) if not doc.text[i].isspace())  # each char in one block
    for span in doc.spans:
        assert doc.text[span.start : span.end] == span.text
    for link in doc.links:
        assert link.start is not None and doc.text[link.start : link.end] == link.anchor_text
        assert link.anchor_text in link.sentence or not link.anchor_text
    for section in doc.sections:
        assert doc.text[section.start : section.end].startswith(section.title)


def paragraph_doc(doc_id: str, words: list[str]) -> Document:
    text = "\n".join(words)
    blocks, position = [], 0
    for unit, word in enumerate(words):
        blocks.append(Block(start=position, end=position + len(word), kind="paragraph", section="", unit=unit))
        position += len(word) + 1
    return Document(id=doc_id, title=doc_id, source="t", path=doc_id, text=text, blocks=blocks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(
        st.lists(st.sampled_from(["alpha beta", "gamma", "delta epsilon zeta"]), min_size=1, max_size=6),
        min_size=1,
        max_size=6,
    ),
    edits=st.sets(st.integers(0, 5)),
)
def test_incremental_chunking_keeps_unchanged_documents(
    tmp_path: Path, corpus: list[list[str]], edits: set[int]
) -> None:
    chunker = StructuralChunker(max_tokens=3, min_tokens=0)
    cache = ChunkCache(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}.parquet")
    docs = [paragraph_doc(f"d{i}", words) for i, words in enumerate(corpus)]
    before, _ = chunk_incrementally(chunker, docs, cache)
    edited = [
        paragraph_doc(d.id, [*words, "edited"]) if i in edits else d
        for i, (d, words) in enumerate(zip(docs, corpus, strict=True))
    ]
    after, stats = chunk_incrementally(chunker, edited, cache)
    changed = {f"d{i}" for i in edits if i < len(docs)}
    assert stats.rechunked == len(changed) and stats.reused == len(docs) - len(changed)
    for doc in docs:
        if doc.id not in changed:
            assert [c for c in before if c.doc_id == doc.id] == [c for c in after if c.doc_id == doc.id]
    assert after == [c for d in edited for c in chunker.chunk(d)]  # same result as chunking from scratch
