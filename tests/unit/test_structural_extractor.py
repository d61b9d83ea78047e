"""The structural extractor on the hand-written fixture pages: what each page's markup must yield."""

from __future__ import annotations

import pytest

from fixgraph.kg.extract import ExtractionContext, GraphRecord, build_extractor, extract_all
from fixgraph.kg.ontology import build_ontology
from fixgraph.kg.patterns import find_causes, find_condition, find_fixes
from tests.kg_helpers import fixture_corpus


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[GraphRecord], dict]:
    from fixgraph.config import compose

    docs, chunks = fixture_corpus(tmp_path_factory.mktemp("kg"))
    cfg = compose(["extractor=structural", "corpus=mallard_folder"])
    extractor = build_extractor(cfg.extractor)
    extractor.prepare(ExtractionContext(documents=docs, ontology=build_ontology(cfg.ontology)))
    return extract_all(extractor, chunks), docs


def _entities(records: list[GraphRecord], node_type: str) -> set[str]:
    return {r.subject for r in records if not r.is_relation and r.subject_type == node_type}


def _relations(records: list[GraphRecord], relation: str) -> set[tuple[str, str]]:
    return {(r.subject, r.object) for r in records if r.relation == relation}


def test_page_style_and_title_make_problem_and_task_nodes(records: tuple[list[GraphRecord], dict]) -> None:
    recs, _ = records
    # wifi-trouble is style="problem", battery style="question", reset-hub style="task"
    assert _entities(recs, "Problem") == {
        "The hub does not connect to Wi-Fi",
        "Why does my widget battery drain so fast?",
    }
    assert _entities(recs, "Task") == {"Reset the hub", "Widget Hub Help"}  # index is style="task" too
    assert ("The hub does not connect to Wi-Fi", "The hub does not connect to Wi-Fi") in _relations(
        recs, "describes_problem"
    )
    assert len(_entities(recs, "Article")) == 4  # the malformed page is not a document


def test_steps_of_a_problem_page_are_its_fixes(records: tuple[list[GraphRecord], dict]) -> None:
    recs, _ = records
    fixes = {
        "Unplug the hub for ten seconds.",
        "Plug it back in and wait for a steady green light.",
        "If the light stays amber, reset the hub.",
    }
    assert _entities(recs, "Fix") == fixes  # the step's second paragraph is not a fix of its own
    assert {f for p, f in _relations(recs, "fixed_by") if p == "The hub does not connect to Wi-Fi"} == fixes
    assert ("If the light stays amber, reset the hub.", "Reset the hub") in _relations(recs, "see_also")
    assert _entities(recs, "Step") == {
        "Hold the Reset button for fifteen seconds with a paper clip.",
        "Release it when the light flashes white three times.",
    }
    assert ("Hold the Reset button for fifteen seconds with a paper clip.", "Reset") in _relations(recs, "uses")


def test_inline_markup_is_typed(records: tuple[list[GraphRecord], dict]) -> None:
    recs, _ = records
    assert {"Settings", "Network", "Reset"} <= _entities(recs, "UIElement")
    assert _entities(recs, "Key") == {"Ctrl", "R"}
    assert _entities(recs, "App") == {"Widget Monitor"}
    assert _entities(recs, "Command") == {"hubctl pair --all"}
    assert _relations(recs, "located_in") == {("Network", "Settings")}  # Settings ▸ Network


def test_links_become_article_edges(records: tuple[list[GraphRecord], dict]) -> None:
    recs, _ = records
    in_guide = [r for r in recs if r.relation == "in_guide" and r.subject == "The hub does not connect to Wi-Fi"]
    assert {(r.object, r.object_ref, r.basis) for r in in_guide} == {("Widget Hub Help", "doc:index", "markup")}
    links = {
        (r.object_ref, r.evidence, r.basis)
        for r in recs
        if r.relation == "links_to" and r.subject_ref == "doc:wifi-trouble"
    }
    assert links == {
        ("doc:reset-hub", "The hub does not connect to Wi-Fi", "markup"),  # <link type="seealso">
        ("doc:reset-hub", "reset the hub", "text"),
        ("doc:reset-hub", "Reset the hub", "text"),
    }


def test_every_record_points_at_its_exact_evidence(records: tuple[list[GraphRecord], dict]) -> None:
    recs, docs = records
    assert recs
    for r in recs:
        p = r.provenance
        assert docs[p.doc_id].text[p.start : p.end] == r.evidence, r
        assert p.extractor == "structural" and p.chunk_id.startswith(p.doc_id + "#")


def test_noun_phrases_become_concepts_without_determiners(records: tuple[list[GraphRecord], dict]) -> None:
    concepts = _entities(records[0], "Concept")
    assert {"router", "Microwave ovens", "cordless phones", "signal"} <= concepts
    assert not {c for c in concepts if c.lower().startswith(("the ", "your "))}


def test_cause_and_fix_patterns() -> None:
    sentence = "This can happen because the driver is missing."
    (cause,) = find_causes(sentence)
    assert (cause.text, sentence[cause.start : cause.end]) == ("the driver is missing", "the driver is missing")
    assert [m.text for m in find_causes("The problem is usually caused by a loose cable.")] == ["a loose cable"]
    assert [m.text for m in find_fixes("To fix this, restart the computer.")] == ["restart the computer"]
    assert [m.text for m in find_fixes("You may need to reinstall the driver.")] == ["reinstall the driver"]
    cond = find_condition("If the light stays amber, reset the hub.")
    assert cond is not None and (cond[0].text, cond[1].text) == ("the light stays amber", "reset the hub")
    assert find_fixes("The settings are in the menu.") == []
