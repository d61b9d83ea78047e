"""Cross-encoder training data come from the corpus only: groups from titles, summaries and headings,
hard negatives from other pages, a validation split of whole held-out pages, a content hash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from fixgraph.evaluation.questions import load_questions
from fixgraph.pipeline import stages
from fixgraph.training.data import load_splits
from fixgraph.training.stages import training_data


def test_groups_are_derived_from_titles_summaries_and_headings(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config(["trainer.data.negatives=1", "trainer.data.negative_pool=5"])
    result = training_data(cfg)
    assert result.status == "built" and len(result.info["data_sha256"]) == 64
    splits = load_splits(Path(cfg.trainer.data_dir))
    documents = {d.id: d for d in stages.load_documents(cfg)}
    chunks = {c.id: c for c in stages.load_chunks(cfg)}
    assert set(splits) == {"train", "validation"} and result.info["splits"] == {k: len(v) for k, v in splits.items()}
    pages = {name: {r["doc_id"] for r in split} for name, split in splits.items()}
    assert pages["train"].isdisjoint(pages["validation"])  # whole pages held out
    questions = {q.question for q in load_questions(Path(cfg.split.questions))}
    for group in [*splits["train"], *splits["validation"]]:
        positive = chunks[group["positive"]]
        page = documents[positive.doc_id]
        expected = {"title": page.title, "summary": page.summary, "heading": (positive.heading_path or [""])[-1]}
        assert group["query"] == expected[group["query_kind"]].strip()
        assert group["query"] not in questions
        assert len(group["negatives"]) == 1 and group["texts"][0] == positive.index_text()
        assert all(chunks[n].doc_id != positive.doc_id for n in group["negatives"])
    assert training_data(cfg).status == "cached"
