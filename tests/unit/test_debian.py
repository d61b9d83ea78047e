"""Version pins of Debian packages: exact, glob (stable point releases) or any."""

from __future__ import annotations

import pytest

from fixgraph.corpus.debian import version_matches


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("43.0-2", "43.0-2", True),
        ("43.0-3", "43.0-2", False),
        ("3.46.4-2+deb12u1", "3.46.4-2+deb12u*", True),
        ("3.46.4-2+deb12u3", "3.46.4-2+deb12u*", True),
        ("3.48.0-1", "3.46.4-2+deb12u*", False),
        ("6.03-2", "6.03-*", True),
        ("anything", "", True),
    ],
)
def test_version_matches(version: str, spec: str, expected: bool) -> None:
    assert version_matches(version, spec) is expected
