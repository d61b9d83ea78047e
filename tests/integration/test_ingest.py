"""The ingest and chunk stages on the fixture corpus: artifacts, file accounting, bad input, corpus hash,
and incremental chunking that keeps the ids of unchanged documents."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.corpus.chunking import StructuralChunker
from fixgraph.corpus.models import Chunk, Document
from fixgraph.io import read_json
from fixgraph.pipeline import stages
from fixgraph.pipeline.layout import Layout

PAGE = """<page xmlns="http://projectmallard.org/1.0/" id="{id}" type="topic">
  <info><link type="guide" xref="index"/></info>
  <title>{title}</title>
  <p>{body}</p>
</page>
"""


def manifest(cfg: DictConfig) -> dict[str, Any]:
    return dict(read_json(Layout.from_config(cfg).manifest))


def problems(cfg: DictConfig) -> dict[str, tuple[str, str]]:
    return {p["path"]: (p["kind"], p["action"]) for p in read_json(Layout.from_config(cfg).problems)}


def test_ingest_writes_documents_links_duplicates_and_manifest(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config()
    stages.ingest(cfg)
    out = Layout.from_config(cfg).corpus_dir
    assert sorted(p.name for p in out.iterdir()) == [
        "_run", "documents.jsonl", "duplicates.json", "links.parquet", "manifest.json", "problems.json", "stage.json"
    ]  # fmt: skip
    m = manifest(cfg)
    # 5 pages + legal.xml: 4 documents, broken.page skipped with its reason, legal.xml an XInclude resource
    assert m["counts"]["files"] == 6
    assert (m["counts"]["files_with_documents"], m["counts"]["files_with_problems_only"]) == (4, 1)
    assert (m["counts"]["resource_files"], m["counts"]["unaccounted_files"]) == (1, 0)
    assert m["problems"]["skipped"] == {"malformed": 1}
    assert m["dedup"]["absorbed"] == 0 and m["counts"]["documents"] == 4
    links = pd.read_parquet(out / "links.parquet")
    amber = links[links.anchor_text == "reset the hub"].iloc[0]
    assert (amber.source_doc, amber.resolved_doc, amber.target_section) == ("wifi-trouble", "reset-hub", "factory")
    assert amber.conditional and amber.condition == "If the light stays amber"
    assert m["links"]["links"] == len(links)


def test_bad_input_is_reported_and_the_run_goes_on(
    fixture_config: Callable[..., DictConfig], mallard_dir: Path
) -> None:
    (mallard_dir / "empty.page").write_bytes(b"")
    (mallard_dir / "huge.page").write_text(PAGE.format(id="huge", title="Huge", body="word " * 3000))
    latin = PAGE.format(id="latin", title="Caf\xe9", body="R\xe9seau").encode("latin-1")
    (mallard_dir / "latin.page").write_bytes(latin)  # no encoding declaration: XML says UTF-8
    (mallard_dir / "orphan.page").write_text(
        PAGE.format(id="orphan", title="Orphan", body='See <link xref="no-such-page">this</link>.')
    )
    (mallard_dir / "notes.bin").write_bytes(b"\x00\x01")
    cfg = fixture_config(["corpus.max_bytes=10000"])
    info = stages.ingest(cfg).info
    found = problems(cfg)
    assert found["empty.page"] == ("empty", "skipped")
    assert found["huge.page"] == ("too_large", "skipped")
    assert found["latin.page"] == ("malformed", "skipped")
    assert found["orphan.page"] == ("missing_link", "warning")
    assert found["notes.bin"] == ("unaccounted", "ignored")
    assert found["broken.page"] == ("malformed", "skipped")
    counts = manifest(cfg)["counts"]
    assert info["documents"] == counts["documents"] == 5  # the 4 good fixture pages + orphan
    # every file is accounted for: documents + problems-only + resources + unaccounted
    accounted = (
        counts["files_with_documents"]
        + counts["files_with_problems_only"]
        + counts["resource_files"]
        + counts["unaccounted_files"]
    )
    assert accounted == counts["files"] == 11


def test_any_input_change_changes_the_corpus_hash(fixture_config: Callable[..., DictConfig], mallard_dir: Path) -> None:
    cfg = fixture_config()
    seen = [stages.ingest(cfg).info["corpus_hash"]]
    assert stages.ingest(cfg).info["corpus_hash"] == seen[0]  # nothing changed: same hash
    battery = mallard_dir / "battery.page"
    battery.write_text(battery.read_text().replace("drain", "drains"))  # edit one word
    seen.append(stages.ingest(cfg).info["corpus_hash"])
    (mallard_dir / "new.page").write_text(PAGE.format(id="new", title="New", body="A new page."))  # add
    seen.append(stages.ingest(cfg).info["corpus_hash"])
    (mallard_dir / "new.page").rename(mallard_dir / "renamed.page")  # rename, same bytes
    seen.append(stages.ingest(cfg).info["corpus_hash"])
    (mallard_dir / "renamed.page").unlink()  # remove
    seen.append(stages.ingest(cfg).info["corpus_hash"])
    assert len(set(seen[:-1])) == 4 and seen[-1] == seen[1]  # removing the addition restores the hash


class CountingChunker(StructuralChunker):
    """The real chunker, recording which documents it was asked to chunk."""

    calls: ClassVar[list[str]] = []

    def chunk(self, doc: Document) -> list[Chunk]:
        CountingChunker.calls.append(doc.id)
        return super().chunk(doc)


def test_incremental_chunking_rechunks_only_changed_documents(
    fixture_config: Callable[..., DictConfig], mallard_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(stages.CHUNKERS._factories, "structural", CountingChunker)
    cfg = fixture_config(["chunker.max_tokens=12", "chunker.min_tokens=0"])
    CountingChunker.calls = []
    first = stages.chunk(cfg)
    assert first.run["incremental"] == {"documents": 4, "rechunked": 4, "reused": 0, "added": 4, "edited": 0,
                                         "removed": 0}  # fmt: skip
    before = {c.id: c for c in stages.load_chunks(cfg)}

    wifi = mallard_dir / "wifi-trouble.page"
    wifi.write_text(wifi.read_text().replace("Microwave ovens", "Baby monitors"))  # edit
    (mallard_dir / "battery.page").unlink()  # remove
    (mallard_dir / "new.page").write_text(PAGE.format(id="new", title="New", body="A new page."))  # add
    CountingChunker.calls = []
    second = stages.chunk(cfg)
    assert sorted(CountingChunker.calls) == ["new", "wifi-trouble"]
    assert second.run["incremental"] == {"documents": 4, "rechunked": 2, "reused": 2, "added": 1, "edited": 1,
                                          "removed": 1}  # fmt: skip
    after = {c.id: c for c in stages.load_chunks(cfg)}
    for doc_id in ("index", "reset-hub"):  # untouched: same ids, same offsets, same text
        assert {i: c for i, c in before.items() if c.doc_id == doc_id} == {
            i: c for i, c in after.items() if c.doc_id == doc_id
        }
    assert not [c for c in after.values() if c.doc_id == "battery"]
    assert json.loads(json.dumps(second.info))["chunks"] == len(after)


def test_a_folder_without_parsable_documents_is_an_error(
    fixture_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    from fixgraph.corpus.sources import EmptyCorpusError

    folder = tmp_path / "only-broken"
    folder.mkdir()
    (folder / "broken.page").write_text("<page xmlns='http://projectmallard.org/1.0/' id='x'><title>unclosed")
    (folder / "empty.page").write_text("")
    cfg = fixture_config([f"corpus.snapshot_dir={folder}"])
    with pytest.raises(EmptyCorpusError, match=rf"no parsable documents in {folder} \(2 files; problems: .*malformed"):
        stages.ingest(cfg)
    assert not Layout.from_config(cfg).corpus_dir.exists()  # nothing half-written
