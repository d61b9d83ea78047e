"""The errno entry a diagnosis cites: the term and its definition, in the page's error section first."""

from __future__ import annotations

from fixgraph.corpus.models import Block, Document, InlineSpan, Section
from fixgraph.serve.diagnose import Diagnoser
from tests.unit.conftest import toy_chunks

# "EBADF" in prose, as an ERRORS entry (term + definition), as an entry in another section, and once
# in the gap after the ERRORS term that no block covers: a span there must not borrow the block before
# it (that would cite the ERRORS entry twice and crowd out the other one)
TEXT = "frob\nReturns EBADF on a bad fd.\nEBADF (EBADF)\nfd is not open.\nEBADF\nAlso listed here."
BLOCKS = [  # (text, kind, section, unit)
    ("frob", "title", "", 1),
    ("Returns EBADF on a bad fd.", "paragraph", "", 2),
    ("EBADF", "term", "errors", 3),
    ("fd is not open.", "definition", "errors", 3),
    ("EBADF", "term", "notes", 4),
    ("Also listed here.", "definition", "notes", 4),
]


def page() -> Document:
    blocks, at = [], 0
    for part, kind, section, unit in BLOCKS:
        at = TEXT.index(part, at)
        blocks.append(Block(start=at, end=at + len(part), kind=kind, section=section, unit=unit))
        at += len(part)
    in_gap = TEXT.index("(EBADF)") + 1
    mentions = [TEXT.index("EBADF", b.start) for b in blocks[1:5:1] if "EBADF" in TEXT[b.start : b.end]]
    spans = [InlineSpan(start=s, end=s + 5, kind="errno", text="EBADF") for s in [*mentions, in_gap]]
    sections = [
        Section(start=blocks[2].start, end=blocks[3].end, id="errors", title="ERRORS", heading_path=["ERRORS"]),
        Section(start=blocks[4].start, end=blocks[5].end, id="notes", title="NOTES", heading_path=["NOTES"]),
    ]
    return Document(
        id="frob.2", title="frob", source="t", path="frob.2", text=TEXT, blocks=blocks, spans=spans, sections=sections
    )


def test_errno_entries_are_term_and_definition_errors_section_first() -> None:
    doc = page()
    assert len(doc.spans) == 4
    chunk = toy_chunks({"frob.2#_-0": TEXT})[0].model_copy(update={"doc_id": doc.id})
    entries = Diagnoser({doc.id: doc}, [chunk], None).errno_entries(doc, "EBADF")
    assert [(e["label"], e["text"]) for e in entries] == [
        ("EBADF (errors)", "EBADF (EBADF)\nfd is not open."),
        ("EBADF (entry)", "EBADF\nAlso listed here."),
    ]  # the prose mention and the span in no block are not entries
