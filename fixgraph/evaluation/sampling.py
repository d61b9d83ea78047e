"""A stratified sample of questions: the quick estimate of a long run.

Proportional allocation over question types (largest remainder; every type keeps at least one question
when the sample is at least as large as the number of types), and inside each type the questions with
the smallest sha256(seed, qid). The order is a property of each question, not of the file, so a larger
sample contains a smaller one (a 60-question run reuses the cached answers of the 40-question run), and
two runs with the same size and seed score the same questions: their paired test is valid.

With proportional allocation the sample mean is the stratified estimator (each question weighs N/n), so
the run's bootstrap CI applies; it ignores the finite-population correction and the variance removed by
stratifying, both of which would narrow it: the CI is slightly conservative.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence

from fixgraph.evaluation.questions import Question

SAMPLERS = ("stratified", "first")


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Questions per stratum: proportional to its size, largest remainder, at least one where possible."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quotas = {s: n * size / total for s, size in sizes.items()}
    counts = {s: int(q) for s, q in quotas.items()}
    by_remainder = sorted(sizes, key=lambda s: (-(quotas[s] - counts[s]), s))
    for stratum in by_remainder[: n - sum(counts.values())]:
        counts[stratum] += 1
    if n >= len(sizes):  # an empty stratum would leave its type unmeasured: take one from the largest
        for stratum in sorted(s for s, c in counts.items() if c == 0):
            donor = max(counts, key=lambda s: (counts[s], s))
            counts[donor] -= 1
            counts[stratum] = 1
    return counts


def _rank(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}\x00{qid}".encode()).hexdigest()


def stratified_sample(questions: Sequence[Question], n: int, seed: int = 0) -> list[Question]:
    """`n` questions stratified by qtype, in file order."""
    strata: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        strata[question.qtype].append(question)
    counts = allocate({s: len(qs) for s, qs in strata.items()}, n)
    chosen = {q.qid for s, qs in strata.items() for q in sorted(qs, key=lambda q: _rank(seed, q.qid))[: counts[s]]}
    return [q for q in questions if q.qid in chosen]


def pick_questions(
    questions: list[Question], limit: int | None, how: str = "stratified", seed: int = 0
) -> list[Question]:
    """All questions, or `limit` of them: a stratified sample (default) or the first ones in file order."""
    if how not in SAMPLERS:
        raise ValueError(f"answer.sample: {how!r} is not one of {', '.join(SAMPLERS)}")
    if not limit or limit >= len(questions):
        return list(questions)
    if limit < 1:
        raise ValueError(f"answer.max_questions must be >= 1, got {limit}")
    return stratified_sample(questions, int(limit), seed) if how == "stratified" else questions[: int(limit)]
