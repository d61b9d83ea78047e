"""Measurement guard: what each side of a comparison was computed from, and a check that they differ.

A fingerprint is one hash per axis of everything that can change a system's scores:
- corpus: the raw snapshot hash; chunks: the chunker config and the chunk file;
- retriever: the system's full retriever config; reranker: the reranker config;
- questions: the content of the questions scored (ids and full records).
Comparing two sides that do not differ on the axis under test (X against X, which the reference
projects did twice by accident) is an error; so is comparing sides scored on different questions,
since a paired test needs the same questions. Differences on other axes are reported as confounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fixgraph.config import to_dict
from fixgraph.evaluation.protocol_errors import MeasurementGuardError
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.splitting import question_hash
from fixgraph.io import stable_hash

AXES = ("corpus", "chunks", "retriever", "reranker", "questions")
TAG_PREFIX = "fingerprint."


def questions_fingerprint(questions: Sequence[Question]) -> str:
    return stable_hash(sorted(question_hash(q) for q in questions))


def system_fingerprint(
    cfg: Any, system_cfg: Any, corpus_hash: str, chunks_hash: str, questions: Sequence[Question]
) -> dict[str, str]:
    return {
        "corpus": corpus_hash,
        "chunks": stable_hash({"chunker": to_dict(cfg.chunker), "chunks": chunks_hash}),
        # the system's name is a label, not behaviour: two names for one config are the same retriever
        "retriever": stable_hash({k: v for k, v in to_dict(system_cfg).items() if k != "name"}),
        "reranker": stable_hash(to_dict(cfg.reranker)),
        "questions": questions_fingerprint(questions),
    }


def as_tags(fingerprint: Mapping[str, str]) -> dict[str, str]:
    return {f"{TAG_PREFIX}{axis}": value for axis, value in fingerprint.items()}


def from_tags(tags: Mapping[str, str]) -> dict[str, str]:
    return {key[len(TAG_PREFIX) :]: value for key, value in tags.items() if key.startswith(TAG_PREFIX)}


def differing_axes(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    return [axis for axis in AXES if a.get(axis) != b.get(axis)]


def check_pair(
    a_name: str, a: Mapping[str, str], b_name: str, b: Mapping[str, str], axis: str | None = None
) -> list[str]:
    """Raise unless `a` and `b` differ on `axis` (or, without an axis, on anything) and share questions.

    Returns the axes they differ on, so the caller can record confounds (other axes that changed too).
    """
    if axis is not None and axis not in AXES:
        raise MeasurementGuardError(f"unknown axis {axis!r}; valid: {', '.join(AXES)}")
    missing = [name for name, fp in ((a_name, a), (b_name, b)) if not fp]
    if missing:
        raise MeasurementGuardError(f"no input fingerprint recorded for {', '.join(missing)}; cannot compare")
    if a.get("questions") != b.get("questions"):
        raise MeasurementGuardError(
            f"{a_name} and {b_name} were scored on different questions; a paired comparison needs the same ones"
        )
    differ = differing_axes(a, b)
    if axis is not None and axis not in differ:
        raise MeasurementGuardError(
            f"{a_name} and {b_name} have the same {axis} (fingerprint {str(a.get(axis))[:12]}): "
            f"comparing them measures nothing on the axis under test"
        )
    if not differ:
        raise MeasurementGuardError(
            f"{a_name} and {b_name} were computed from identical inputs on every axis ({', '.join(AXES)}): "
            "this would measure X against X"
        )
    return differ
