"""Hugging Face `datasets` files on disk with a field mapping: json lines, parquet, arrow."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from fixgraph.corpus.connectors.hf_datasets import HFDatasetCorpus

PRINTER = "# Printer offline\n\n## Fix\n\n- Restart it\n- Replug it"
ROWS = [
    {"qid": "kb-1", "headline": "Printer offline", "body": PRINTER, "link": "https://kb/1"},
    {"qid": "kb-2", "headline": "Slow Wi-Fi", "body": "Move closer to the **router**.", "link": ""},
    {"qid": "kb-3", "headline": "Nothing", "body": "   ", "link": ""},
]
FIELDS = {"id": "qid", "title": "headline", "text": "body", "url": "link"}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "part1.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS[:2]) + "\n")
    pd.DataFrame(ROWS[2:]).to_parquet(root / "part2.parquet")
    table = pa.Table.from_pylist([{"qid": "kb-4", "headline": "Arrow row", "body": "From an arrow file.", "link": ""}])
    with pa.OSFile(str(root / "part3.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (root / "broken.json").write_text('{"qid": "kb-9", "body": ')
    return root


def test_rows_become_documents_through_the_field_mapping(data_dir: Path) -> None:
    result = HFDatasetCorpus(name="kb", snapshot_dir=str(data_dir), fields=FIELDS, text_format="markdown").parse()
    docs = {d.id: d for d in result.documents}
    assert sorted(docs) == ["kb-1", "kb-2", "kb-4"]
    printer = docs["kb-1"]
    assert printer.title == "Printer offline" and printer.url == "https://kb/1"
    assert printer.path == "part1.jsonl#row0"
    assert [printer.text[b.start : b.end] for b in printer.blocks if b.kind == "item"] == ["Restart it", "Replug it"]
    assert docs["kb-2"].text == "Slow Wi-Fi\nMove closer to the router."
    problems = {(p.path, p.kind) for p in result.problems}
    assert ("part2.parquet#row0", "empty") in problems
    assert any(p.path == "broken.json" and p.kind == "malformed" for p in result.problems)


def test_mapping_to_a_missing_column_names_it(data_dir: Path) -> None:
    fields = {**FIELDS, "text": "content"}
    result = HFDatasetCorpus(name="kb", snapshot_dir=str(data_dir), fields=fields, data_files=["*.jsonl"]).parse()
    assert result.documents == []
    assert "['content']" in result.problems[0].reason and result.problems[0].path == "part1.jsonl"


def test_unknown_document_field_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="unknown document fields"):
        HFDatasetCorpus(name="kb", snapshot_dir=".", fields={"body": "text"})
