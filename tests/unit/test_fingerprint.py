"""The measurement guard: X against X, the wrong axis, and unpaired questions are refused."""

from __future__ import annotations

import pytest

from fixgraph.evaluation.protocol_errors import MeasurementGuardError
from fixgraph.experiment.fingerprint import AXES, as_tags, check_pair, from_tags

BASE = {axis: f"{axis}-1" for axis in AXES}


def test_identical_inputs_are_x_against_x() -> None:
    with pytest.raises(MeasurementGuardError, match="identical inputs on every axis"):
        check_pair("a", BASE, "b", dict(BASE))


def test_the_axis_under_test_must_differ_and_confounds_are_reported() -> None:
    other = {**BASE, "retriever": "retriever-2", "chunks": "chunks-2"}
    assert check_pair("a", BASE, "b", other) == ["chunks", "retriever"]
    assert check_pair("a", BASE, "b", other, axis="retriever") == ["chunks", "retriever"]
    with pytest.raises(MeasurementGuardError, match="same reranker"):
        check_pair("a", BASE, "b", other, axis="reranker")
    with pytest.raises(MeasurementGuardError, match="unknown axis"):
        check_pair("a", BASE, "b", other, axis="colour")


def test_sides_must_share_their_questions_and_have_fingerprints() -> None:
    with pytest.raises(MeasurementGuardError, match="different questions"):
        check_pair("a", BASE, "b", {**BASE, "questions": "q-2", "retriever": "r-2"})
    with pytest.raises(MeasurementGuardError, match="no input fingerprint recorded for b"):
        check_pair("a", BASE, "b", {})


def test_fingerprints_round_trip_through_mlflow_tags() -> None:
    tags = {**as_tags(BASE), "system": "bm25", "fingerprint_note": "not a fingerprint"}
    assert from_tags(tags) == BASE
