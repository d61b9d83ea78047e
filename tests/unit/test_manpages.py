"""Man pages through the real mandoc: sections, errno entries, cross references, aliases, bad pages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixgraph.corpus.connectors.manpages import ManPageCorpus, so_target
from fixgraph.corpus.linkgraph import build_link_graph
from fixgraph.corpus.mandoc import ensure_mandoc
from fixgraph.corpus.models import Document
from fixgraph.corpus.sources import MissingCorpusError, ParseResult
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> ParseResult:
    ensure_mandoc()  # CI installs it with apt; elsewhere it is unpacked from Debian's .deb once
    root = tmp_path_factory.mktemp("man")
    shutil.copytree(FIXTURES / "man", root / "man")
    return ManPageCorpus(name="man", snapshot_dir=str(root / "man")).parse()


def doc(parsed: ParseResult, doc_id: str) -> Document:
    return next(d for d in parsed.documents if d.id == doc_id)


def section_text(d: Document, title: str) -> str:
    section = next(s for s in d.sections if s.heading_path[-1] == title)
    return d.text[section.start : section.end]


def test_sections_follow_sh_and_ss(parsed: ParseResult) -> None:
    frob = doc(parsed, "frob.2")
    assert [s.heading_path for s in frob.sections] == [
        ["NAME"], ["SYNOPSIS"], ["DESCRIPTION"], ["DESCRIPTION", "Flags"], ["RETURN VALUE"], ["ERRORS"], ["SEE ALSO"]
    ]  # fmt: skip
    assert frob.title == "frob(2)"
    assert section_text(frob, "NAME") == "NAME\nfrob, unfrob - frobnicate a file descriptor"
    assert section_text(frob, "SYNOPSIS") == "SYNOPSIS\n#include <frob.h>\nint frob(int fd, int flags);"
    assert "EXIT STATUS" in [s.title for s in doc(parsed, "frobctl.1").sections]


def test_errno_entries_are_typed_and_kept_with_their_definition(parsed: ParseResult) -> None:
    frob = doc(parsed, "frob.2")
    assert [s.text for s in frob.spans if s.kind == "errno"] == ["EBADF", "EINVAL"]
    ebadf = next(b for b in frob.blocks if frob.text[b.start : b.end] == "EBADF")
    definition = [b for b in frob.blocks if b.unit == ebadf.unit and b is not ebadf]
    assert ebadf.kind == "term" and ebadf.section == "ERRORS"
    assert [frob.text[b.start : b.end] for b in definition] == ["fd is not a valid open file descriptor."]
    kinds = {(s.kind, s.text) for s in frob.spans}
    assert {("function", "frob"), ("constant", "FROB_FAST"), ("var", "fd"), ("manref", "open(2)")} <= kinds
    for span in frob.spans:
        assert frob.text[span.start : span.end] == span.text


def test_see_also_and_inline_references_are_links(parsed: ParseResult) -> None:
    frob = doc(parsed, "frob.2")
    links = [(ln.target_doc, ln.link_type, ln.anchor_text) for ln in frob.links]
    assert links == [
        ("open.2", "inline", "open(2)"),
        ("socket.7", "inline", "socket(7)"),
        ("frobctl.1", "seealso", "frobctl(1)"),
        ("open.2", "seealso", "open(2)"),
        ("unfrob.2", "seealso", "unfrob(2)"),
    ]
    socket = frob.links[1]
    assert socket.sentence == "If the descriptor is a socket, see socket(7) first."
    assert socket.start is not None and frob.text[socket.start : socket.end] == "socket(7)"


def test_alias_pages_resolve_links_instead_of_becoming_documents(parsed: ParseResult) -> None:
    assert parsed.aliases == {"frobnicate.2": "frob.2", "unfrob.2": "frob.2"}
    assert "unfrob.2" not in {d.id for d in parsed.documents}
    rows, _, problems = build_link_graph(parsed.documents, parsed.aliases)
    status = {(r["source_doc"], r["target_doc"]): (r["status"], r["resolved_doc"]) for r in rows}
    assert status[("frob.2", "unfrob.2")] == ("self", "frob.2")  # the alias of frob(2) is frob(2) itself
    assert status[("frobctl.1", "frob.2")] == ("resolved", "frob.2")
    assert status[("frobctl.1", "missing.8")] == ("missing", "")
    assert any(p.path == "man1/frobctl.1.gz" and "missing.8" in p.reason for p in problems)


def test_every_file_is_accounted_for(parsed: ParseResult) -> None:
    assert sorted(d.id for d in parsed.documents) == ["frob.2", "frobctl.1", "latin.2"]
    problems = {(p.path, p.kind, p.action) for p in parsed.problems}
    assert ("man2/zero.2", "empty", "skipped") in problems  # 0 bytes
    assert ("man2/blank.2", "empty", "skipped") in problems  # only a roff comment
    assert ("man2/latin.2", "encoding", "warning") in problems  # kept, read as ISO-8859-1
    assert "The naïve byte." in doc(parsed, "latin.2").text
    assert parsed.resources["man2/unfrob.2"] == "alias of frob.2 (.so)"


def test_license_and_attribution_come_from_the_page_header(parsed: ParseResult) -> None:
    frob = doc(parsed, "frob.2")
    assert frob.license == "Linux-man-pages-copyleft"
    assert frob.attribution == "2026 Test Writer <tw@example.org>"
    assert doc(parsed, "frobctl.1").license == "MIT"


def test_so_stub_detection() -> None:
    assert so_target(b'.\\" comment\n.so man7/queue.7\n') == "queue.7"
    assert so_target(b".so man7/queue.7\n.SH NAME\n") is None


def test_missing_snapshot_names_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(MissingCorpusError, match="fixgraph fetch corpus=linux_man"):
        ManPageCorpus(name="linux_man", snapshot_dir=str(tmp_path)).parse()
