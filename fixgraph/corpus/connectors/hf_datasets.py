"""Hugging Face `datasets` files on disk (json / jsonl / parquet / arrow), one document per row.

`fields` maps Document fields to the dataset's columns (`{id: doc_id, title: question, text: body}`);
only `text` is required. Each file is loaded on its own, so a malformed file is reported by name
while the others are read; a row without text is reported by file and row number.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.builder import DocBuilder
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem, size_problem
from fixgraph.corpus.html import HtmlError
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult, missing_folder_message
from fixgraph.corpus.textformats import FORMATS, render_markup
from fixgraph.io import sha256_text

BUILDER_OF = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".arrow": "arrow"}
DOC_FIELDS = ("id", "title", "text", "url", "summary", "license", "attribution", "version")
UNSAFE_ID = re.compile(r"[\s#]+")


class DatasetFileError(ValueError):
    """A data file that `datasets` cannot load, or whose columns do not match the field mapping."""


def load_rows(path: Path, builder: str, cache_dir: str) -> Iterator[dict[str, Any]]:
    import datasets  # heavy import: only when this connector runs
    from datasets.exceptions import DatasetGenerationError

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # failures become Problems, not log noise
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir)
    except (DatasetGenerationError, ValueError, OSError) as exc:
        cause = exc.__cause__ or exc
        raise DatasetFileError(f"{path.name}: datasets cannot load it as {builder}: {cause}") from exc
    yield from table


@CORPORA.register("hf_dataset")
class HFDatasetCorpus:
    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        data_files: Sequence[str] = ("*.json", "*.jsonl", "*.parquet", "*.arrow"),
        fields: Mapping[str, str] | None = None,
        text_format: str = "plain",
        license: str = "",
        version: str = "",
        max_bytes: int = 500_000_000,
        max_text_chars: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if text_format not in FORMATS:
            raise ValueError(f"corpus {name}: text_format must be one of {', '.join(FORMATS)}, not {text_format!r}")
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.data_files = list(data_files)
        self.fields = {"text": "text", **dict(fields or {})}
        unknown = set(self.fields) - set(DOC_FIELDS)
        if unknown:
            known = ", ".join(DOC_FIELDS)
            raise ValueError(f"corpus {name}: unknown document fields {sorted(unknown)}; known: {known}")
        self.text_format = text_format
        self.license = license
        self.version = version
        self.max_bytes = max_bytes
        self.max_text_chars = max_text_chars

    def files(self) -> list[Path]:
        return sorted({p for pattern in self.data_files for p in self.snapshot_dir.glob(pattern) if p.is_file()})

    def check(self) -> None:
        if not self.files():
            raise MissingCorpusError(
                missing_folder_message(self.name, self.snapshot_dir, f"data files matching {self.data_files}", False)
            )

    def fetch(self) -> dict[str, str]:
        self.check()
        return {"origin": f"read in place from {self.snapshot_dir}"}

    def parse(self) -> ParseResult:
        self.check()
        info = {"files": [p.name for p in self.files()], "fields": self.fields, "version": self.version}
        result = ParseResult(documents=[], source_info=info)
        seen: dict[str, str] = {}
        with tempfile.TemporaryDirectory(prefix="fixgraph-datasets-") as cache_dir:
            for path in self.files():
                rel = path.relative_to(self.snapshot_dir).as_posix()
                problem = size_problem(path, rel, self.max_bytes)
                if problem is not None:
                    result.problems.append(problem)
                    continue
                builder = BUILDER_OF.get(path.suffix.lower())
                if builder is None:
                    reason = f"no datasets loader for {path.suffix}"
                    result.problems.append(Problem(rel, reason, "unsupported", "ignored"))
                    continue
                try:
                    for i, row in enumerate(load_rows(path, builder, cache_dir)):
                        self._add(result, seen, rel, i, row)
                except DatasetFileError as exc:
                    result.problems.append(Problem(rel, str(exc), "malformed"))
        return result

    def _add(self, result: ParseResult, seen: dict[str, str], rel: str, i: int, row: dict[str, Any]) -> None:
        where = f"{rel}#row{i}"
        missing = [column for column in self.fields.values() if column not in row]
        if missing:
            raise DatasetFileError(f"{rel}: columns {missing} of the field mapping are not in {sorted(row)}")
        value = {field: row[column] for field, column in self.fields.items()}
        text = value.get("text")
        if not isinstance(text, str) or not text.strip():
            result.problems.append(Problem(where, f"column {self.fields['text']!r} is empty or not text", "empty"))
            return
        if len(text) > self.max_text_chars:
            result.problems.append(Problem(where, f"text of {len(text)} chars is over max_text_chars", "too_large"))
            return
        doc_id = UNSAFE_ID.sub("_", str(value["id"])) if value.get("id") not in (None, "") else f"{Path(rel).stem}-{i}"
        if doc_id in seen:
            result.problems.append(Problem(where, f"duplicate id {doc_id!r} (also {seen[doc_id]})", "duplicate_id"))
            return
        builder = DocBuilder()
        try:
            title = render_markup(builder, text, self.text_format, where, title=str(value.get("title") or ""))
        except HtmlError as exc:
            result.problems.append(Problem(where, str(exc), "malformed"))
            return
        seen[doc_id] = where
        result.documents.append(
            builder.build(
                id=doc_id,
                title=title or doc_id,
                summary=str(value.get("summary") or ""),
                source=self.name,
                path=where,
                url=str(value.get("url") or ""),
                version=str(value.get("version") or self.version),
                license=str(value.get("license") or self.license),
                attribution=str(value.get("attribution") or ""),
                content_hash=sha256_text(text),
            )
        )
