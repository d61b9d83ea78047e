"""How far the LLM judge can be trusted: agreement of its grades with human labels.

Grades are on the 0 / 0.5 / 1 rubric, an ordinal scale of three classes, so besides exact agreement and
Cohen's kappa (scikit-learn) we report the linearly weighted kappa (a 0-vs-1 disagreement costs twice a
0-vs-0.5 one) and the confusion matrix. With labels on a subset and judge grades on every answer, the
prediction-powered estimate (ppi-python, Angelopoulos et al. 2023) corrects the judge's mean by its
measured bias on the labelled items and gives a valid CI for the true mean correctness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

GRADES = (0.0, 0.5, 1.0)


class AgreementError(ValueError):
    """Labels that cannot be compared (none in common, or grades off the rubric)."""


class LabelFileError(ValueError):
    """A malformed label, claims or answers file; the message names the file, the line and the problem."""


def _classes(values: Sequence[float], what: str) -> np.ndarray:
    out = []
    for value in values:
        if float(value) not in GRADES:
            raise AgreementError(f"{what}: grade {value!r} is not one of {GRADES}")
        out.append(GRADES.index(float(value)))
    return np.asarray(out, dtype=int)


@dataclass(frozen=True)
class Agreement:
    n: int
    exact: float
    kappa: float
    kappa_linear: float
    confusion: list[list[int]]  # rows: human label, columns: judge grade, in GRADES order
    human_mean: float
    judge_mean: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        head = "| human \\ judge | " + " | ".join(str(g) for g in GRADES) + " |\n|---|---|---|---|\n"
        rows = "".join(
            f"| {g} | " + " | ".join(map(str, r)) + " |\n" for g, r in zip(GRADES, self.confusion, strict=False)
        )
        return (
            f"Judge vs human labels on {self.n} answers: exact agreement {self.exact:.3f}, "
            f"Cohen's kappa {self.kappa:.3f}, linear weighted kappa {self.kappa_linear:.3f}; "
            f"mean correctness human {self.human_mean:.3f}, judge {self.judge_mean:.3f}.\n\n{head}{rows}"
        )


def _kappa(human: np.ndarray, judge: np.ndarray, weights: str | None) -> float:
    from sklearn.metrics import cohen_kappa_score

    if len(set(human.tolist()) | set(judge.tolist())) < 2:
        return float("nan")  # kappa is undefined when both raters use one and the same class
    return float(cohen_kappa_score(human, judge, labels=list(range(len(GRADES))), weights=weights))


def agreement(human: Sequence[float], judge: Sequence[float]) -> Agreement:
    """Agreement of paired grades (same items, same order)."""
    from sklearn.metrics import confusion_matrix

    if len(human) != len(judge):
        raise AgreementError(f"{len(human)} human labels but {len(judge)} judge grades")
    if not human:
        raise AgreementError("no labelled answer has a judge grade: nothing to compare")
    h, j = _classes(human, "human label"), _classes(judge, "judge grade")
    matrix = confusion_matrix(h, j, labels=list(range(len(GRADES))))
    return Agreement(
        n=len(h),
        exact=float(np.mean(h == j)),
        kappa=_kappa(h, j, None),
        kappa_linear=_kappa(h, j, "linear"),
        confusion=matrix.tolist(),
        human_mean=float(np.mean(human)),
        judge_mean=float(np.mean(judge)),
    )


def paired(labels: Mapping[str, float], grades: Mapping[str, float | None]) -> tuple[list[float], list[float]]:
    """Human and judge grades of the items both have (judge None = not judged, left out)."""
    keys = sorted(k for k in labels if grades.get(k) is not None)
    return [float(labels[k]) for k in keys], [float(grades[k]) for k in keys]  # type: ignore[arg-type]


@dataclass(frozen=True)
class KappaInterval:
    low: float
    high: float
    resamples: int  # resamples where kappa is defined (a resample with one class on both sides is not)


def kappa_interval(
    human: Sequence[float],
    judge: Sequence[float],
    weights: str | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> KappaInterval:
    """Percentile bootstrap CI of (weighted) kappa over items resampled with replacement."""
    h, j = _classes(human, "human label"), _classes(judge, "judge grade")
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(h), len(h)) for _ in range(resamples)]  # one draw per resample, as before
    idx = np.stack(draws) if draws else np.empty((0, len(h)), dtype=int)
    kappas = resampled_kappas(h[idx], j[idx], weights)
    values = kappas[~np.isnan(kappas)]  # NaN: undefined on that resample
    if not values.size:
        return KappaInterval(float("nan"), float("nan"), 0)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return KappaInterval(float(low), float(high), int(values.size))


def resampled_kappas(human: np.ndarray, judge: np.ndarray, weights: str | None) -> np.ndarray:
    """Cohen's kappa of each row of two (resamples x items) arrays of class indices, with scikit-learn's
    arithmetic (`cohen_kappa_score`: the same values, to the bit), but in one pass: a call per resample
    spent ~2 ms in input checks, ~10 s of every judged answer run. NaN where kappa is undefined."""
    n, rows = len(GRADES), human.shape[0]
    cells = human * n + judge + (np.arange(rows) * n * n)[:, None]
    confusion = np.bincount(cells.ravel(), minlength=rows * n * n).reshape(rows, n, n).astype(np.float64)
    judge_totals, human_totals = confusion.sum(axis=1), confusion.sum(axis=2)  # sklearn's sum0, sum1
    expected = judge_totals[:, :, None] * human_totals[:, None, :] / judge_totals.sum(axis=1)[:, None, None]
    if weights is None:
        w = 1.0 - np.eye(n)
    elif weights in ("linear", "quadratic"):
        grades = np.zeros((n, n)) + np.arange(n)
        w = np.abs(grades - grades.T) if weights == "linear" else (grades - grades.T) ** 2
    else:
        raise ValueError(f"weights: {weights!r} is not None, 'linear' or 'quadratic'")
    observed = (w * confusion).reshape(rows, n * n).sum(axis=1)
    chance = (w * expected).reshape(rows, n * n).sum(axis=1)
    used = (judge_totals + human_totals > 0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = 1 - observed / chance
    kappas[(used < 2) | (chance == 0)] = np.nan  # one class on both sides, as `_kappa` says
    return kappas


@dataclass(frozen=True)
class BinaryAgreement:
    """Agreement on yes/no decisions (a key fact covered, a claim supported): the rater is `predicted`."""

    n: int
    exact: float
    kappa: float
    precision: float | None  # of predicted yes, share that people said yes
    recall: float | None  # of people's yes, share predicted yes
    confusion: list[list[int]]  # rows: human no/yes, columns: predicted no/yes

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def binary_agreement(human: Sequence[bool], predicted: Sequence[bool]) -> BinaryAgreement:
    from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_score, recall_score

    if len(human) != len(predicted):
        raise AgreementError(f"{len(human)} human decisions but {len(predicted)} predicted ones")
    if not human:
        raise AgreementError("no decisions to compare")
    h, p = np.asarray(human, dtype=int), np.asarray(predicted, dtype=int)
    both = len(set(h.tolist()) | set(p.tolist())) > 1
    return BinaryAgreement(
        n=len(h),
        exact=float(np.mean(h == p)),
        kappa=float(cohen_kappa_score(h, p, labels=[0, 1])) if both else float("nan"),
        precision=float(precision_score(h, p, zero_division=0)) if p.any() else None,
        recall=float(recall_score(h, p, zero_division=0)) if h.any() else None,
        confusion=confusion_matrix(h, p, labels=[0, 1]).tolist(),
    )


@dataclass(frozen=True)
class PPIEstimate:
    mean: float
    low: float
    high: float
    labelled: int
    unlabelled: int
    classical_low: float  # CI from the labelled items alone, for comparison
    classical_high: float


def ppi_mean(
    labels: Mapping[str, float], grades: Mapping[str, float | None], alpha: float = 0.05, power_tuning: bool = True
) -> PPIEstimate | None:
    """Prediction-powered mean correctness with its (1 - alpha) CI; None without labelled items.

    power_tuning (PPI++): ppi-python picks the weight of the judge's grades that minimises the variance
    (0 = ignore the judge, classical estimate); off, the weight is 1 (the original PPI estimator).
    """
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    human, judge = paired(labels, grades)
    unlabelled = [float(v) for k, v in sorted(grades.items()) if k not in labels and v is not None]
    if len(human) < 2 or not unlabelled:
        return None
    y, yhat, yhat_u = np.asarray(human), np.asarray(judge), np.asarray(unlabelled)
    lam = None if power_tuning else 1.0
    point = float(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam))[0])
    low, high = (float(np.ravel(v)[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=alpha, lam=lam))
    c_low, c_high = (float(np.ravel(v)[0]) for v in classical_mean_ci(y, alpha=alpha))
    return PPIEstimate(point, low, high, len(y), len(yhat_u), c_low, c_high)
