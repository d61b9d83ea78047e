"""Degenerate-judge guard: when a run's judge grades say nothing, the run says so.

Issue 18's judge (the answering 1.5B model grading itself) gave 38 of 39 answers 0.5 and every key fact
to closed-book answers on GNOME-specific questions; its kappa against people was 0.03, yet the run's
tables looked like any other. A judge is flagged uninformative when any of these holds:
- flat: one grade covers `max_mode_share` or more of the answers it judged (with `min_graded` or more);
- closed book: it rates closed-book key-fact recall as high as the retrieved answers' (within
  `closed_book_margin`), which no judge that reads the key facts should do on questions about one
  manual (or retrieval did not help at all: either way the run's grades cannot rank systems);
- kappa: its Cohen's kappa against people's grades on the graded set is below `min_kappa`, undefined
  (it used one grade there), or, with `require_kappa`, not measured.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class GuardSettings:
    max_mode_share: float = 0.9
    min_graded: int = 10
    closed_book_margin: float = 0.0
    min_kappa: float = 0.4
    require_kappa: bool = True


@dataclass(frozen=True)
class GuardReport:
    informative: bool
    flags: list[str] = field(default_factory=list)  # one line per reason
    checks: dict[str, Any] = field(default_factory=dict)  # the measured values behind them

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def banner(self) -> str:
        if self.informative:
            return ""
        return (
            "JUDGE UNINFORMATIVE: "
            + "; ".join(self.flags)
            + " (correctness and key_fact_recall below are not evidence)"
        )


def _mean(values: Sequence[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None and v == v]
    return sum(present) / len(present) if present else None


def check_judge(
    grades: Sequence[float | None],
    recall_by_system: Mapping[str, Sequence[float | None]],
    closed_book: str | None,
    kappa: float | None,
    settings: GuardSettings,
) -> GuardReport:
    """`grades`: the judge's correctness on the run's answered questions; `recall_by_system`: its
    key-fact recall per system on answered, answerable questions; `kappa`: on the graded set (None: not
    measured, NaN: undefined)."""
    flags: list[str] = []
    checks: dict[str, Any] = {}
    judged = [float(g) for g in grades if g is not None]
    checks["judged"] = len(judged)
    if len(judged) >= settings.min_graded:
        grade, count = Counter(judged).most_common(1)[0]
        share = count / len(judged)
        checks.update(mode_grade=grade, mode_share=share)
        if share >= settings.max_mode_share:
            flags.append(f"flat: {count} of {len(judged)} answers graded {grade:g}")
    if closed_book is not None and closed_book in recall_by_system:
        closed = _mean(recall_by_system[closed_book])
        retrieved = _mean([v for s, vs in recall_by_system.items() if s != closed_book for v in vs])
        checks.update(closed_book_recall=closed, retrieved_recall=retrieved)
        if closed is not None and retrieved is not None and closed >= retrieved - settings.closed_book_margin:
            flags.append(f"closed book: key-fact recall {closed:.3f} vs retrieved {retrieved:.3f}")
    checks["kappa"] = kappa
    if kappa is None:
        if settings.require_kappa:
            flags.append("kappa: not measured (no graded set)")
    elif kappa != kappa:
        flags.append("kappa: undefined on the graded set (one grade for every answer)")
    elif kappa < settings.min_kappa:
        flags.append(f"kappa: {kappa:.3f} on the graded set, below {settings.min_kappa}")
    return GuardReport(not flags, flags, checks)
