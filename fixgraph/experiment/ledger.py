"""The record of looks at the locked test: one append-only, hash-chained ledger for every study.

`experiments/locked_test_ledger.jsonl` holds one entry per attempt of `fixgraph test`, whatever its
outcome (completed, refused, failed), numbered (`seq` over the ledger, `attempt` and, for completed
looks, `look` within the study). Each entry carries the sha256 of the one before it (`prev`) and of
itself (`hash`), so editing or removing an entry breaks the chain at a named line. Deleting or
truncating the whole file is caught by the other witnesses of each look: the numbered reports under
`experiments/<study>/test_looks/<n>/` (each records its look number and sha256 in the ledger) and
the MLflow runs tagged `stage=locked_test`; a look any witness shows but the ledger lacks stops the
next attempt. A study's legacy `test_log.jsonl` is migrated into the ledger once, then removed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixgraph.evaluation.protocol_errors import ProtocolError
from fixgraph.io import sha256_file, stable_hash

log = logging.getLogger(__name__)
GENESIS = "0" * 64
LEDGER_NAME = "locked_test_ledger.jsonl"


class LedgerError(ProtocolError):
    """The ledger of looks at the locked test was edited, truncated or reset."""


def entry_hash(entry: dict[str, Any]) -> str:
    return stable_hash({k: v for k, v in entry.items() if k != "hash"})


@dataclass(frozen=True)
class Ledger:
    path: Path

    @classmethod
    def at(cls, experiments: Path) -> Ledger:
        return cls(experiments / LEDGER_NAME)

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, after checking the chain; LedgerError naming the first broken line."""
        if not self.path.exists():
            return []
        entries: list[dict[str, Any]] = []
        prev = GENESIS
        for lineno, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                raise LedgerError(f"{self.path}:{lineno}: not a JSON object (the ledger was edited)") from None
            if entry.get("prev") != prev or entry.get("seq") != len(entries) + 1:
                raise LedgerError(
                    f"{self.path}:{lineno}: entry {entry.get('seq')} does not follow entry {len(entries)} "
                    "(an entry was removed, reordered or inserted by hand)"
                )
            if entry_hash(entry) != entry.get("hash"):
                raise LedgerError(f"{self.path}:{lineno}: entry {entry.get('seq')} was edited (hash mismatch)")
            entries.append(entry)
            prev = entry["hash"]
        return entries

    def study(self, study: str) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("study") == study]

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Chain `record` after the last entry and append it; returns the entry as written."""
        entries = self.entries()
        prior = [e for e in entries if e.get("study") == record.get("study")]
        entry = {
            "seq": len(entries) + 1,
            "prev": entries[-1]["hash"] if entries else GENESIS,
            "attempt": len(prior) + 1,
            **record,
        }
        entry["hash"] = entry_hash(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:  # append-only: nothing before is rewritten
            fh.write(json.dumps(entry, sort_keys=True) + "\n")
            fh.flush()
        return entry


def completed(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("outcome") == "completed"]


LEGACY_REPORT = ("test_report.md", "test_report.json", "test_report_per_query.parquet", "plots")


def migrate_legacy_log(ledger: Ledger, study: str, legacy: Path, looks_dir: Path | None = None) -> int:
    """Fold a study's old `test_log.jsonl` (a `started` and a `completed` line per look) into the ledger,
    one entry per look, in order; then remove the old file (git keeps it). The old single report (the
    last look's: each look overwrote it) moves to `looks_dir/<last look>/`. Returns the looks migrated."""
    if not legacy.exists():
        return 0
    if ledger.study(study):
        raise LedgerError(
            f"{legacy} exists next to ledger entries for study {study!r}: the study was migrated already; "
            "remove the old log or restore the ledger from git"
        )
    lines = [json.loads(line) for line in legacy.read_text(encoding="utf-8").splitlines() if line.strip()]
    looks = [line for line in lines if line.get("status") == "completed"]
    report = _move_legacy_report(legacy.parent, looks_dir, len(looks))
    migrated = 0
    for number, old in enumerate(looks, start=1):
        last = number == len(looks)
        ledger.append(
            {
                "study": study,
                "outcome": "completed",
                "look": number,
                "time": old.get("time"),
                "forced": bool(old.get("forced")),
                "force_reason": old.get("force_reason"),
                "finalists_sha256": old.get("finalists_sha256"),
                "git_sha": old.get("git_sha"),
                "git_dirty": old.get("git_dirty"),
                "mlflow_run_id": old.get("mlflow_run_id"),
                "migrated_from": f"{legacy.name} (sha256 {sha256_file(legacy)[:16]})",
                **(report if last else {"report": None, "report_note": "overwritten by a later look (unnumbered)"}),
            }
        )
        migrated += 1
    legacy.unlink()
    log.info("migrated %d look(s) of study %s from %s into %s", migrated, study, legacy, ledger.path)
    return migrated


def _move_legacy_report(root: Path, looks_dir: Path | None, last_look: int) -> dict[str, Any]:
    source = root / "test_report.json"
    if looks_dir is None or not source.exists() or last_look == 0:
        return {"report": None}
    target = looks_dir / str(last_look)
    target.mkdir(parents=True, exist_ok=False)
    for name in LEGACY_REPORT:
        if (root / name).exists():
            (root / name).rename(target / name)
    report = target / "test_report.json"
    return {"report": report.relative_to(root).as_posix(), "report_sha256": sha256_file(report)}


def check_witnesses(ledger: Ledger, study: str, reports: Path, mlflow_runs: Iterable[str]) -> None:
    """Every numbered report and every MLflow locked-test run of the study must be a ledger look."""
    looks = completed(ledger.study(study))
    by_number = {e.get("look"): e for e in looks}
    if reports.exists():
        for folder in sorted(p for p in reports.iterdir() if p.is_dir()):
            report = folder / "test_report.json"
            number = int(folder.name) if folder.name.isdigit() else None
            entry = by_number.get(number)
            if entry is None:
                raise LedgerError(
                    f"{folder} holds the report of look {folder.name} of study {study!r}, which the ledger "
                    f"{ledger.path} does not record: the ledger was reset or truncated; restore it from git"
                )
            if report.exists() and entry.get("report_sha256") not in (None, sha256_file(report)):
                raise LedgerError(f"{report} differs from the report the ledger recorded for look {number}")
    known = {e.get("mlflow_run_id") for e in looks}
    unknown = sorted(set(mlflow_runs) - known)
    if unknown:
        raise LedgerError(
            f"MLflow holds locked-test run(s) {', '.join(unknown)} of study {study!r} that the ledger {ledger.path} "
            "does not record: the ledger was reset or truncated; restore it from git"
        )
