"""XInclude is confined to the snapshot folder: no local file outside it, no network, no entities."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixgraph.corpus.sources import MallardCorpus

PAGE = """<page xmlns="http://projectmallard.org/1.0/" xmlns:xi="http://www.w3.org/2001/XInclude" id="{id}">
  <title>Page {id}</title>
  <p>Before the include. {include} After the include.</p>
  <p>Second paragraph stays.</p>
</page>
"""
SECRET = "TOP-SECRET-OUTSIDE-THE-FOLDER"


def corpus_with(tmp_path: Path, include: str, page_id: str = "p") -> tuple[MallardCorpus, Path]:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir(exist_ok=True)
    (snapshot / f"{page_id}.page").write_text(PAGE.format(id=page_id, include=include), encoding="utf-8")
    return MallardCorpus(name="t", snapshot_dir=str(snapshot)), snapshot


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"  # a sibling of the snapshot folder, not inside it
    secret.write_text(SECRET, encoding="utf-8")
    return secret


@pytest.mark.parametrize(
    "href",
    ["{abs}", "../outside.txt", "file://{abs}", "sub/../../outside.txt", "link-out.txt"],
    ids=["absolute", "parent", "file-url", "dotdot", "symlink"],
)
def test_include_of_a_file_outside_the_folder_is_refused(tmp_path: Path, outside: Path, href: str) -> None:
    href = href.format(abs=outside)
    source, snapshot = corpus_with(tmp_path, f'<xi:include href="{href}" parse="text"/>')
    (snapshot / "sub").mkdir()
    (snapshot / "link-out.txt").symlink_to(outside)
    result = source.parse()
    (doc,) = result.documents  # the page is kept, without the refused text
    assert SECRET not in doc.text
    assert "Before the include. After the include." in doc.text and "Second paragraph stays." in doc.text
    (problem,) = result.problems
    assert (problem.path, problem.kind, problem.action) == ("p.page", "xinclude_refused", "warning")
    assert "outside the snapshot folder" in problem.reason and "line 3" in problem.reason


def test_network_include_is_refused_without_a_request(tmp_path: Path) -> None:
    source, _ = corpus_with(tmp_path, '<xi:include href="http://127.0.0.1:9/secret" parse="text"/>')
    result = source.parse()
    (problem,) = result.problems
    assert problem.kind == "xinclude_refused" and "network access is not allowed" in problem.reason
    assert len(result.documents) == 1


def test_include_inside_the_folder_still_works(tmp_path: Path) -> None:
    source, snapshot = corpus_with(tmp_path, '<xi:include href="parts/note.txt" parse="text"/>')
    (snapshot / "parts").mkdir()
    (snapshot / "parts" / "note.txt").write_text("Included note.", encoding="utf-8")
    result = source.parse()
    assert "Before the include. Included note. After the include." in result.documents[0].text
    assert result.problems == []


def test_missing_target_is_a_warning_and_the_fallback_is_used(tmp_path: Path) -> None:
    include = '<xi:include href="gone.xml"><xi:fallback>Fallback text.</xi:fallback></xi:include>'
    source, _ = corpus_with(tmp_path, include)
    result = source.parse()
    (doc,) = result.documents
    assert "Before the include. Fallback text. After the include." in doc.text
    (problem,) = result.problems
    assert (problem.kind, problem.action) == ("xinclude_missing", "warning") and "'gone.xml'" in problem.reason


def test_missing_target_without_fallback_keeps_the_page(tmp_path: Path) -> None:
    source, _ = corpus_with(tmp_path, '<xi:include href="gone.xml"/>')
    result = source.parse()
    assert [d.id for d in result.documents] == ["p"]
    assert [p.kind for p in result.problems] == ["xinclude_missing"]


def test_nested_include_cannot_escape_either(tmp_path: Path, outside: Path) -> None:
    source, snapshot = corpus_with(tmp_path, '<xi:include href="inner.xml"/>')
    (snapshot / "inner.xml").write_text(
        f'<span xmlns="http://projectmallard.org/1.0/" xmlns:xi="http://www.w3.org/2001/XInclude">inner '
        f'<xi:include href="{outside}" parse="text"/></span>',
        encoding="utf-8",
    )
    result = source.parse()
    assert SECRET not in result.documents[0].text and "inner" in result.documents[0].text
    assert [p.kind for p in result.problems] == ["xinclude_refused"]


def test_include_loop_is_reported(tmp_path: Path) -> None:
    source, snapshot = corpus_with(tmp_path, '<xi:include href="loop.xml"/>')
    (snapshot / "loop.xml").write_text(
        '<span xmlns:xi="http://www.w3.org/2001/XInclude">x<xi:include href="loop.xml"/></span>', encoding="utf-8"
    )
    result = source.parse()
    assert [p.kind for p in result.problems] == ["xinclude_loop"] and len(result.documents) == 1


def test_included_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    source, snapshot = corpus_with(tmp_path, '<xi:include href="big.txt" parse="text"/>')
    (snapshot / "big.txt").write_text("x" * 2000, encoding="utf-8")
    source.max_bytes = 1000
    result = source.parse()
    assert [p.kind for p in result.problems] == ["xinclude_too_large"] and "x" * 50 not in result.documents[0].text


def test_external_entities_are_not_expanded(tmp_path: Path, outside: Path) -> None:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "e.page").write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE page [<!ENTITY secret SYSTEM "{outside}">]>\n'
        '<page xmlns="http://projectmallard.org/1.0/" id="e"><title>E</title><p>Entity: &secret; end.</p></page>',
        encoding="utf-8",
    )
    result = MallardCorpus(name="t", snapshot_dir=str(snapshot)).parse()
    assert SECRET not in result.documents[0].text
