"""Fitting ltr weights (experiment/ltr_fit.py) on synthetic signal rows whose right answer is known."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixgraph.config import ConfigError, compose
from fixgraph.evaluation.parts import parse_parts
from fixgraph.experiment.ltr_fit import (
    _question_weights,
    fit_weights,
    fitted_config,
    held_out,
    recall_at,
    summary,
)
from fixgraph.retrieval.ltr import SIGNALS
from tests.conftest import CONF


def _rows(corpus: str, questions: int, gold_signal: str, seed: int, qtype: str = "direct") -> pd.DataFrame:
    """40 candidates a question, two of them gold; `gold_signal` is high on gold (+ noise), the rest is noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(questions):
        gold = set(rng.choice(40, size=2, replace=False))
        for rank in range(40):
            values = dict(zip(SIGNALS, rng.normal(size=len(SIGNALS)), strict=True))
            values[gold_signal] += 2.5 if rank in gold else 0.0
            rows.append(
                {"part": f"{corpus}-dev", "corpus": corpus, "qid": f"{corpus}-{q}", "qtype": qtype,
                 "chunk": f"{corpus}-{q}-c{rank:02d}", "base_rank": rank, "gold": rank in gold, "n_gold": 2,
                 "tokens": 100, **values}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_the_fit_weights_the_signal_that_separates_gold_and_ranks_gold_first() -> None:
    rows = _rows("a", 80, "bm25", seed=1)
    weights = dict(zip(SIGNALS, fit_weights(rows, c=1.0), strict=True))
    assert weights["bm25"] > 4 * max(abs(w) for s, w in weights.items() if s != "bm25")
    scored = rows.assign(score=rows[list(SIGNALS)].to_numpy() @ np.array(list(weights.values())))
    assert recall_at(scored, "score").mean() > 0.9
    # the first stage's order (base_rank) knows nothing here: about 8 of 40 candidates' worth of recall
    assert recall_at(rows.assign(first=-rows["base_rank"]), "first").mean() < 0.5


def test_a_held_out_fit_never_sees_the_corpus_it_ranks() -> None:
    """Gold follows `own` on one corpus and `anchor` on the other: weights fitted on the other corpus only
    cannot know that, so held-out recall stays low where an in-sample fit would rank gold first."""
    rows = pd.concat([_rows("a", 20, "own", seed=2), _rows("b", 20, "anchor", seed=3)])
    per_question = held_out(rows, "corpus", c=1.0)
    assert per_question["fitted"].mean() < 0.6
    in_sample = rows.assign(score=rows[list(SIGNALS)].to_numpy() @ fit_weights(rows, c=1.0))
    assert recall_at(in_sample, "score").mean() > 0.8
    table = summary(per_question)
    assert list(table.loc[["a-dev", "b-dev", "pooled"], "n"]) == [20, 20, 40]
    assert table.loc["pooled", "up"] + table.loc["pooled", "down"] <= 40


def test_held_out_needs_two_groups() -> None:
    with pytest.raises(ConfigError, match=r"--hold-out corpus needs at least two corpora, got \['a'\]"):
        held_out(_rows("a", 3, "own", seed=4), "corpus")


def test_balance_gives_bridge_and_other_questions_half_each() -> None:
    head = pd.DataFrame({"qid": ["b1", "b2", "b3", "o1"], "qtype": ["bridge", "bridge", "bridge", "direct"]})
    assert _question_weights(head, balance=True) == pytest.approx({"b1": 1 / 3, "b2": 1 / 3, "b3": 1 / 3, "o1": 1.0})
    assert _question_weights(head, balance=False) == {"b1": 1.0, "b2": 1.0, "b3": 1.0, "o1": 1.0}


def test_recall_breaks_ties_by_chunk_id_as_the_retriever_does() -> None:
    rows = pd.DataFrame(
        {"qid": ["q"] * 10, "chunk": [f"c{i}" for i in range(10)], "score": [1.0] * 10,
         "gold": [False] * 8 + [True, False], "n_gold": [1] * 10}
    )  # fmt: skip
    assert recall_at(rows, "score").loc["q"] == 0.0  # c8 is ninth by id
    assert recall_at(rows.assign(score=[1.0] * 8 + [2.0, 1.0]), "score").loc["q"] == 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dev", "'dev' is not split:corpus"),
        ("dev:gnome_help,:evolution_help", "':evolution_help' is not split:corpus"),
        ("dev:gnome_help,dev:gnome_help", "dev:gnome_help named more than once"),
        (" , ", "name at least one dev part"),
    ],
)
def test_parts_name_split_and_corpus_once(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_parts(text)


def test_parts_keep_their_order() -> None:
    parts = parse_parts("dev:gnome_help, evolution_dev:evolution_help")
    assert [p.label for p in parts] == ["dev:gnome_help", "evolution_dev:evolution_help"]


def test_the_written_config_inherits_the_system_and_sets_only_its_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    monkeypatch.setenv("FIXGRAPH_CONFIG_DIR", str(conf))
    weights = {s: round(0.5 + i, 3) for i, s in enumerate(SIGNALS)}
    text = fitted_config("ltr", "ltr_mine", weights, ["Fitted on 3 dev questions."])
    assert text.startswith("# Fitted on 3 dev questions.\n")
    (conf / "retriever" / "ltr_mine.yaml").write_text(text)
    mine = compose(["+retriever@systems.ltr_mine=ltr_mine", "+retriever@systems.ltr=ltr"]).systems
    assert mine.ltr_mine.name == "ltr_mine" and dict(mine.ltr_mine.weights) == weights
    assert dict(mine.ltr.weights) != weights  # the system it inherits is untouched
    for key in ("kind", "candidates", "first_stage", "lexical", "depth"):
        assert mine.ltr_mine[key] == mine.ltr[key]


def test_balanced_fit_lets_the_fewer_other_questions_pull_as_hard_as_the_bridge_ones() -> None:
    """30 bridge questions whose gold follows `reach`, 6 other questions whose gold follows `own`."""
    rows = pd.concat([_rows("a", 30, "reach", seed=5, qtype="bridge"), _rows("b", 6, "own", seed=6)])
    balanced = dict(zip(SIGNALS, fit_weights(rows, c=1.0, balance=True), strict=True))
    equal = dict(zip(SIGNALS, fit_weights(rows, c=1.0, balance=False), strict=True))
    assert equal["own"] < 0.5 * equal["reach"]  # every question the same: the 30 bridge questions dominate
    assert balanced["own"] > 0.6 * balanced["reach"]  # half each: the six other questions weigh as much
