"""Reading input files defensively: every file either yields text or a Problem saying why not.

Bad input never stops an ingest: an empty, huge or undecodable file becomes an entry of the problem
report (`problems.json`), with a kind that the manifest counts, so no file disappears silently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_MAX_BYTES = 5_000_000  # a help page is kilobytes; megabytes means a dump or a binary


@dataclass
class Problem:
    """One file (or record) that was skipped, or kept with a warning."""

    path: str
    reason: str
    kind: str = "parse_error"  # malformed | encoding | empty | too_large | duplicate_id | missing_link | ...
    action: str = "skipped"  # skipped | warning | ignored (not a page: a resource or an unsupported type)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_problem(path: Path, rel: str, max_bytes: int) -> Problem | None:
    """A Problem when the file is empty or larger than `max_bytes` (checked before reading it)."""
    size = path.stat().st_size
    if size == 0:
        return Problem(rel, "empty file", "empty")
    if max_bytes and size > max_bytes:
        return Problem(rel, f"{size} bytes is over the limit of {max_bytes} (corpus.max_bytes)", "too_large")
    return None


def decode(data: bytes, rel: str, problems: list[Problem], fallback: str = "cp1252") -> str:
    """UTF-8 (BOM dropped); otherwise decode with `fallback` and record a warning, keeping the text."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode(fallback, errors="replace")
        problems.append(
            Problem(rel, f"not UTF-8 ({exc.reason} at byte {exc.start}); decoded as {fallback}", "encoding", "warning")
        )
        return text


def read_text(path: Path, rel: str, problems: list[Problem], max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """The file's text, or None after recording why it was skipped."""
    problem = size_problem(path, rel, max_bytes)
    if problem is not None:
        problems.append(problem)
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.append(Problem(rel, f"cannot read: {exc}", "unreadable"))
        return None
    text = decode(data, rel, problems)
    if not text.strip():
        problems.append(Problem(rel, "file holds only whitespace", "empty"))
        return None
    return text
