"""Cross-encoder training groups come from the corpus only, with hard negatives from other pages."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from fixgraph.evaluation.questions import load_questions
from fixgraph.pipeline import stages
from fixgraph.training.stages import load_groups, reranker_data


def test_groups_are_derived_from_titles_summaries_and_headings(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config(["trainer.negatives=1", "trainer.negative_pool=5"])
    result = reranker_data(cfg)
    assert result.status == "built"
    groups = load_groups(__import__("pathlib").Path(cfg.trainer.pairs))
    documents = {d.id: d for d in stages.load_documents(cfg)}
    chunks = {c.id: c for c in stages.load_chunks(cfg)}
    assert groups and result.info["groups"] == len(groups)
    questions = {q.question for q in load_questions(__import__("pathlib").Path(cfg.split.questions))}
    for group in groups:
        positive = chunks[group.positive]
        page = documents[positive.doc_id]
        expected = {"title": page.title, "summary": page.summary, "heading": (positive.heading_path or [""])[-1]}
        assert group.query == expected[group.query_kind].strip()
        assert group.query not in questions
        assert len(group.negatives) == 1
        assert all(chunks[n].doc_id != positive.doc_id for n in group.negatives)
    assert reranker_data(cfg).status == "cached"
