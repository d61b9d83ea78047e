"""A benchmark's own knobs (`+bench.x=...`): read the same way by every benchmark, absent or given."""

from __future__ import annotations

import pytest

from fixgraph.bench import options
from fixgraph.config import ConfigError, compose


def test_options_are_a_plain_dict_and_empty_when_none_are_given() -> None:
    assert options(compose([])) == {}
    given = options(compose(["+bench.skip=[bm25_lucene,hybrid_ce]", "+bench.rerank_questions=5"]))
    assert given == {"skip": ["bm25_lucene", "hybrid_ce"], "rerank_questions": 5}
    assert type(given["skip"]) is list
    with pytest.raises(ConfigError, match=r"bench: expected a benchmark's options"):
        options(compose(["+bench=3"]))


class _Reached(Exception):
    pass


def test_the_retrieval_benchmark_starts_without_bench_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fixgraph bench retrieval` with no +bench.* used to stop at once (to_container on a plain {})."""
    from fixgraph.bench import retrieval

    def reached(*_: object) -> None:
        raise _Reached

    monkeypatch.setattr(retrieval, "build_split", reached)  # the first step after reading the options
    with pytest.raises(_Reached):
        retrieval.run(compose([]))
