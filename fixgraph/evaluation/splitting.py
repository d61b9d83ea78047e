"""Frozen dev/test splits of a question pool, and the `frozen` split option that reads them.

Assignment rule (deterministic, independent of file order):
- questions that must not be separated form a group: a bridge question with every question that
  touches one of its two pages (so bridge pairs stay together), and questions sharing a `group` field;
- each group's stratum is its question type (the most common one among its members);
- within a stratum, groups are ordered by sha256(salt + the sorted content hashes of their members)
  and the first round(test_fraction x groups) go to test, the rest to dev.

The split file records each question's part and the hash of its full content (every field, not only
the id), a digest of the whole assignment and a digest of its freeze history. Verification recomputes
them from the pool: an edited, added or removed question, a hand-moved assignment or a hand-edited
history is an error naming what changed; only `fixgraph split --refreeze "reason"` writes a new split
(and keeps the reason in the file). Which questions are locked: locked_questions.py.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from fixgraph.evaluation.protocol_errors import SplitError
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.io import read_json, sha256_file, sha256_text, stable_hash, write_json

FORMAT = 1
PARTS = ("dev", "test")


_TEST_UNLOCKED: ContextVar[str | None] = ContextVar("fixgraph_test_unlocked", default=None)


@contextlib.contextmanager
def unlocked_test_split(study: str) -> Iterator[None]:
    """Only the locked-test command scores the test part, and only inside this block."""
    token = _TEST_UNLOCKED.set(study)
    try:
        yield
    finally:
        _TEST_UNLOCKED.reset(token)


def test_split_unlocked() -> bool:
    return _TEST_UNLOCKED.get() is not None


def question_hash(question: Question) -> str:
    """Hash of a question's full content: every field its record holds, including unknown extra ones.

    Only fields present in the file count (exclude_unset), so a new defaulted field in the Question
    model does not invalidate every frozen split.
    """
    return stable_hash(question.model_dump(mode="json", by_alias=True, exclude_unset=True))


def groups_of(questions: Sequence[Question]) -> list[list[Question]]:
    """Questions that must land in the same part (union-find over shared keys).

    A bridge question's two pages (its pair) tie it to every other question whose gold or bridge
    touches either page: a test bridge question must not have its pages tuned on through dev
    questions. An explicit `group` field ties questions together as well.
    """
    endpoints = {p for q in questions if q.bridge is not None for p in (q.bridge.from_page, q.bridge.to)}
    parent = {q.qid: q.qid for q in questions}

    def find(qid: str) -> str:
        while parent[qid] != qid:
            parent[qid] = parent[parent[qid]]
            qid = parent[qid]
        return qid

    first_with: dict[str, str] = {}
    for q in questions:
        pages = {g.target for g in q.gold}
        if q.bridge is not None:
            pages |= {q.bridge.from_page, q.bridge.to}
        keys = [f"page:{p}" for p in sorted(pages & endpoints)]
        explicit = (q.model_extra or {}).get("group")
        if explicit:
            keys.append(f"group:{explicit}")
        for key in keys:
            if key in first_with:
                parent[find(q.qid)] = find(first_with[key])
            else:
                first_with[key] = q.qid
    grouped: dict[str, list[Question]] = {}
    for q in questions:
        grouped.setdefault(find(q.qid), []).append(q)
    return list(grouped.values())


def _stratum(group: Sequence[Question]) -> str:
    counts = Counter(q.qtype for q in group)
    return min(counts, key=lambda t: (-counts[t], t))


def assign(questions: Sequence[Question], test_fraction: float, salt: str) -> dict[str, str]:
    """qid -> 'dev' | 'test' by the rule in the module docstring."""
    if not 0 < test_fraction < 1:
        raise SplitError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    hashes = {q.qid: question_hash(q) for q in questions}
    strata: dict[str, list[tuple[str, list[Question]]]] = {}
    for group in groups_of(questions):
        key = sha256_text(salt + "\n" + "\n".join(sorted(hashes[q.qid] for q in group)))
        strata.setdefault(_stratum(group), []).append((key, group))
    parts: dict[str, str] = {}
    for members in strata.values():
        members.sort(key=lambda item: item[0])
        n_test = int(Decimal(test_fraction * len(members)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        for index, (_, group) in enumerate(members):
            for q in group:
                parts[q.qid] = "test" if index < n_test else "dev"
    return parts


@dataclass
class SplitFile:
    pool: str
    salt: str
    test_fraction: float
    questions: dict[str, dict[str, str]]  # qid -> {part, hash, qtype}
    digest: str
    history: list[dict[str, str]]
    history_digest: str = ""  # as stored in the file; verify() recomputes it

    def ids(self, part: str) -> list[str]:
        return sorted(qid for qid, entry in self.questions.items() if entry["part"] == part)

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {part: {} for part in PARTS}
        for entry in self.questions.values():
            out[entry["part"]][entry["qtype"]] = out[entry["part"]].get(entry["qtype"], 0) + 1
        return {part: dict(sorted(c.items())) for part, c in out.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "pool": self.pool,
            "salt": self.salt,
            "test_fraction": self.test_fraction,
            "digest": self.digest,
            "counts": self.counts(),
            "history": self.history,
            "history_digest": _history_digest(self.history),
            "questions": dict(sorted(self.questions.items())),
        }


def _digest(questions: dict[str, dict[str, str]]) -> str:
    return stable_hash(questions)


def _history_digest(history: list[dict[str, str]]) -> str:
    """Seals the freeze/refreeze history: a refreeze hidden by editing it by hand is an error."""
    return stable_hash(history)


def build_split_file(
    questions: Sequence[Question], pool: str, test_fraction: float, salt: str, reason: str
) -> SplitFile:
    parts = assign(questions, test_fraction, salt)
    entries = {q.qid: {"part": parts[q.qid], "hash": question_hash(q), "qtype": q.qtype} for q in questions}
    history = [{"time": datetime.now(UTC).isoformat(timespec="seconds"), "reason": reason}]
    return SplitFile(pool, salt, test_fraction, entries, _digest(entries), history)


def read_split_file(path: Path) -> SplitFile:
    if not path.exists():
        raise SplitError(f"{path}: split file not found; create it with `fixgraph split`")
    try:
        data = read_json(path)
        if data.get("format") != FORMAT:
            raise SplitError(f"{path}: unsupported split format {data.get('format')!r} (expected {FORMAT})")
        return SplitFile(
            str(data["pool"]),
            str(data["salt"]),
            float(data["test_fraction"]),
            {str(k): dict(v) for k, v in data["questions"].items()},
            str(data["digest"]),
            list(data.get("history", [])),
            str(data.get("history_digest", "")),
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise SplitError(f"{path}: malformed split file ({exc})") from None


def verify(split: SplitFile, questions: Sequence[Question], path: Path) -> None:
    """Raise naming every question that changed since the split was frozen, or a tampered assignment."""
    problems: list[str] = []
    if _digest(split.questions) != split.digest:
        problems.append("its assignment digest does not match its entries (the file was edited by hand)")
    if not split.history_digest:
        problems.append("it has no history_digest (its freeze history is not sealed; refreeze with a reason)")
    elif _history_digest(split.history) != split.history_digest:
        problems.append("its history does not match its history_digest (the history was edited by hand)")
    current = {q.qid: q for q in questions}
    for qid in sorted(current.keys() - split.questions.keys()):
        problems.append(f"question {qid!r} is not in the frozen split (added to the pool later)")
    for qid in sorted(split.questions.keys() - current.keys()):
        problems.append(f"question {qid!r} ({split.questions[qid]['part']}) was removed from the pool")
    for qid in sorted(current.keys() & split.questions.keys()):
        recorded, now = split.questions[qid]["hash"], question_hash(current[qid])
        if recorded != now:
            part = split.questions[qid]["part"]
            problems.append(
                f"{part} question {qid!r} was edited since the split was frozen ({recorded[:12]} -> {now[:12]})"
            )
    if not problems:
        expected = assign(questions, split.test_fraction, split.salt)
        moved = sorted(qid for qid, part in expected.items() if split.questions[qid]["part"] != part)
        if moved:
            problems.append(f"assignments do not follow the split rule for {', '.join(moved[:10])} (moved by hand?)")
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise SplitError(f"{path}: frozen split no longer matches {split.pool}: {shown}")


def freeze(
    pool: Path, path: Path, test_fraction: float, salt: str, refreeze_reason: str | None = None
) -> tuple[SplitFile, str]:
    """Write the split file if absent; verify it if present; rewrite it only with a refreeze reason."""
    questions = load_questions(pool)
    if path.exists() and refreeze_reason is None:
        split = read_split_file(path)
        if (split.salt, split.test_fraction) != (salt, test_fraction):
            raise SplitError(
                f"{path}: frozen with salt {split.salt!r} and test_fraction {split.test_fraction}, config asks "
                f"{salt!r} and {test_fraction}; keep the frozen values or refreeze with a reason"
            )
        verify(split, questions, path)
        return split, "verified"
    history = read_split_file(path).history if path.exists() else []
    split = build_split_file(questions, str(pool), test_fraction, salt, refreeze_reason or "initial freeze")
    split.history = history + split.history
    split.history[-1]["pool_sha256"] = sha256_file(pool)
    write_json(path, split.to_json())
    return split, "refrozen" if history else "frozen"
