"""The `corpus` registry: each option knows how to fetch its raw snapshot and parse it into Documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fixgraph.corpus.debian import DebianSource, fetch_debian_snapshot
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem, size_problem
from fixgraph.corpus.mallard import MallardError, MallardOptions, collect_titles, parse_page
from fixgraph.corpus.models import Document
from fixgraph.io import read_json
from fixgraph.registry import Registry


class MissingCorpusError(FileNotFoundError):
    """The raw snapshot is not there; the message names the command that fetches it."""


class EmptyCorpusError(ValueError):
    """A snapshot folder in which no file parsed into a document: an error, not a corpus of 0 documents."""


def missing_folder_message(name: str, folder: Path, holds: str, fetchable: bool) -> str:
    """What is missing where, and the command that fixes it: `fixgraph fetch` for sources fetchable
    into the folder, pointing `corpus.snapshot_dir` at the data for sources read in place."""
    where = f"folder {folder} does not exist" if not folder.is_dir() else f"folder {folder} has no {holds}"
    if fetchable:
        return f"corpus {name!r}: {where}. Fetch it with: fixgraph fetch corpus={name}"
    return (
        f"corpus {name!r}: {where}. This source is read in place: point it at your data with "
        f"`fixgraph ingest corpus={name} corpus.snapshot_dir=/path/to/folder`"
    )


__all__ = [
    "CORPORA",
    "CorpusSource",
    "EmptyCorpusError",
    "MissingCorpusError",
    "ParseResult",
    "Problem",
    "build_corpus",
]


@dataclass
class ParseResult:
    documents: list[Document]
    problems: list[Problem] = field(default_factory=list)
    source_info: dict[str, Any] = field(default_factory=dict)
    # snapshot files that are not pages but are used (XInclude targets, SOURCE.json): path -> role
    resources: dict[str, str] = field(default_factory=dict)
    # other names of documents (man page aliases, redirected URLs): alias id -> document id
    aliases: dict[str, str] = field(default_factory=dict)
    # document ids the source knows are not there, and why: `broken` (HTTP 404/410), `disallowed` (robots.txt)
    unavailable: dict[str, str] = field(default_factory=dict)


class CorpusSource(Protocol):
    name: str
    snapshot_dir: Path

    def fetch(self) -> dict[str, str]:
        """Obtain the raw snapshot into `snapshot_dir` (idempotent)."""
        ...

    def check(self) -> None:
        """Raise MissingCorpusError, naming the fetch command, when the snapshot is not there."""
        ...

    def parse(self) -> ParseResult:
        """Parse the snapshot into documents; per-file problems are reported, not raised."""
        ...


CORPORA: Registry[CorpusSource] = Registry("corpus", ["fixgraph.corpus.connectors"], shared=["dedup", "auto_fetch"])


@CORPORA.register("mallard")
class MallardCorpus:
    """A folder of Mallard pages, optionally fetched from a Debian package."""

    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        package: str = "",
        version: str = "",
        package_path: str = "",
        license: str = "",
        false_tokens: list[str] | None = None,
        true_tokens: list[str] | None = None,
        empty_link_text: str = "title",
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.snapshot_dir = Path(snapshot_dir)
        self.package = DebianSource(package, version, package_path, license) if package else None
        self.options = MallardOptions(
            false_tokens=frozenset(false_tokens if false_tokens is not None else MallardOptions.false_tokens),
            true_tokens=frozenset(true_tokens if true_tokens is not None else MallardOptions.true_tokens),
            empty_link_text=empty_link_text,
        )

    def fetch(self) -> dict[str, str]:
        if self.is_fetched():
            return {**self.source_info(), "origin": "already present"}
        if self.package is None:
            raise MissingCorpusError(missing_folder_message(self.name, self.snapshot_dir, "Mallard pages", False))
        return fetch_debian_snapshot(self.package, self.snapshot_dir)

    @property
    def pinned(self) -> bool:
        """Fetched from one Debian package (and version): what `corpus.auto_fetch` requires."""
        return self.package is not None

    def is_fetched(self) -> bool:
        return self.snapshot_dir.is_dir() and any(self.snapshot_dir.glob("*.page"))

    def source_info(self) -> dict[str, Any]:
        info_path = self.snapshot_dir / "SOURCE.json"
        return dict(read_json(info_path)) if info_path.exists() else {}

    def check(self) -> None:
        if not self.is_fetched():
            raise MissingCorpusError(
                missing_folder_message(self.name, self.snapshot_dir, "Mallard pages (*.page)", self.package is not None)
            )

    def parse(self) -> ParseResult:
        self.check()
        info = self.source_info()
        paths = sorted(self.snapshot_dir.glob("*.page"))
        titles = collect_titles(paths, self.snapshot_dir)
        result = ParseResult(documents=[], source_info=info)
        for other in sorted(self.snapshot_dir.glob("*.xml")):
            result.resources[other.name] = "XInclude target"
        if (self.snapshot_dir / "SOURCE.json").exists():
            result.resources["SOURCE.json"] = "snapshot provenance"
        seen: dict[str, str] = {}
        for path in paths:
            too_big = size_problem(path, path.name, self.max_bytes)
            if too_big is not None:
                result.problems.append(too_big)
                continue
            warnings: list[Problem] = []  # refused or missing XInclude targets: the page is kept without them
            try:
                doc = parse_page(
                    path,
                    self.snapshot_dir,
                    self.name,
                    titles,
                    self.options,
                    info.get("version", ""),
                    warnings,
                    self.max_bytes,
                )
            except (MallardError, UnicodeDecodeError) as exc:
                result.problems.append(Problem(path.name, str(exc), "malformed"))
                continue
            result.problems.extend(warnings)
            if doc.id in seen:
                result.problems.append(
                    Problem(path.name, f"duplicate page id {doc.id!r} (also in {seen[doc.id]})", "duplicate_id")
                )
                continue
            if not doc.text.strip():
                result.problems.append(Problem(path.name, "page renders to no text", "empty"))
                continue
            seen[doc.id] = path.name
            result.documents.append(doc)
        return result


def build_corpus(cfg: Any) -> CorpusSource:
    from fixgraph.config import build
    from fixgraph.corpus import connectors  # noqa: F401  (registers the other connectors)

    return build(CORPORA, cfg)
