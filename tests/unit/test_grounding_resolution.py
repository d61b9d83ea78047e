"""Grounding validation (rejections by reason, span alignment) and entity resolution (scoped merges)."""

from __future__ import annotations

import numpy as np
import pytest

from fixgraph.config import compose
from fixgraph.kg.grounding import GroundingConfig, GroundingValidator
from fixgraph.kg.ontology import Ontology, build_ontology
from fixgraph.kg.resolve import Mention, ResolutionConfig, complete_linkage_clusters, normalize, resolve
from tests.kg_helpers import chunk, record

TEXT = "If the printer is offline, restart the computer. Open Settings ▸ Printers to check the queue."


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return build_ontology(compose([]).ontology)


def _validate(ontology: Ontology, *records):  # type: ignore[no-untyped-def]
    c = records[0].provenance.chunk_id
    return GroundingValidator(ontology, GroundingConfig()).validate(records, {c: CHUNK})


CHUNK = chunk(TEXT, start=100)


def test_grounded_records_pass_and_each_failure_has_its_reason(ontology: Ontology) -> None:
    good = record("restart the computer", "Fix", CHUNK)
    rel = record(
        "the printer is offline",
        "Cause",
        CHUNK,
        evidence="If the printer is offline, restart the computer.",
        relation="fixed_by",
        object="restart the computer",
        object_type="Fix",
    )
    bad = [
        record("restart the router", "Fix", CHUNK, evidence="restart the computer"),  # name not in text
        record("Printers", "Gadget", CHUNK),  # type not in ontology
        record("Settings", "App", CHUNK, relation="flies_to", object="Printers", object_type="UIElement"),
        record("Settings", "App", CHUNK, relation="fixed_by", object="Printers", object_type="UIElement"),
        record(
            "queue",
            "Concept",
            CHUNK,
            evidence="the printer spooler crashed",
            relation="related_to",
            object="Settings",
            object_type="App",
        ),
        record("Settings", "App", CHUNK, relation="related_to", object="settings", object_type="App"),
        record("x" * 300, "Concept", CHUNK, evidence="queue"),
        record("Settings", "App", CHUNK, relation="related_to", object="queue", object_type=""),  # LLM: not listed
    ]
    result = _validate(ontology, good, rel, *bad)
    assert [r.subject for r in result.accepted] == ["restart the computer", "the printer is offline"]
    assert [r.reason for r in result.rejected] == [
        "entity_not_in_text",
        "unknown_node_type",
        "unknown_relation",
        "endpoint_not_allowed",
        "evidence_not_in_text",
        "self_loop",
        "name_too_long",
        "endpoint_untyped",
    ]
    assert result.counts()["entity_not_in_text"] == 1


def test_fuzzy_quotes_are_aligned_to_their_exact_span(ontology: Ontology) -> None:
    # an LLM quote with a small slip: the span must become the real sentence's position in the document
    quote = "If the printer is offline restart the computer"
    r = record(
        "the printer is offline",
        "Cause",
        CHUNK,
        evidence=quote,
        relation="fixed_by",
        object="restart the computer",
        object_type="Fix",
    )
    (kept,) = _validate(ontology, r).accepted
    true_start = 100 + TEXT.index("If the printer")
    assert kept.provenance.start == true_start
    assert kept.provenance.end - kept.provenance.start == pytest.approx(
        len("If the printer is offline, restart the computer"), abs=2
    )


def test_markup_records_skip_the_text_check(ontology: Ontology) -> None:
    r = record(
        "Printing",
        "Article",
        CHUNK,
        evidence="not in the text",
        relation="in_guide",
        object="Hardware",
        object_type="Article",
        basis="markup",
        subject_ref="doc:a",
        object_ref="doc:b",
    )
    assert len(_validate(ontology, r).accepted) == 1


def test_generic_fix_is_one_node_per_article_and_apps_merge_globally(ontology: Ontology) -> None:
    mentions = [
        Mention("Restart the computer", "Fix", "printing"),
        Mention("restart the computer.", "Fix", "printing"),
        Mention("Restart the computer", "Fix", "wifi"),
        Mention("Nautilus", "App", "files-a"),
        Mention("Files", "App", "files-b"),
        Mention("printers", "Concept", "printing"),
        Mention("the printer", "Concept", "wifi"),
    ]
    res = resolve(mentions, ontology, ResolutionConfig(embedding=False))
    fix_nodes = {res.node_of[m] for m in mentions[:3]}
    assert fix_nodes == {"Fix|printing|restart the computer", "Fix|wifi|restart the computer"}
    assert res.node_of[mentions[3]] == res.node_of[mentions[4]] == "App||files"
    assert res.nodes["App||files"]["name"] in {"Files", "Nautilus"}
    assert res.node_of[mentions[5]] == res.node_of[mentions[6]] == "Concept||printer"
    rules = {(m["surface"], m["rule"]) for m in res.merges}
    assert ("Nautilus", "alias") in rules or ("Files", "alias") in rules
    assert all(m["scope"] in ("printing", "wifi", "") for m in res.merges)


def test_refs_keep_same_titled_pages_apart(ontology: Ontology) -> None:
    a = Mention("Troubleshooter", "Article", "x", ref="doc:a")
    b = Mention("Troubleshooter", "Article", "y", ref="doc:b")
    res = resolve([a, b], ontology, ResolutionConfig(embedding=False))
    assert res.node_of[a] != res.node_of[b]


def _vectors(angles_deg: list[float]) -> np.ndarray:
    rad = np.radians(angles_deg)
    return np.stack([np.cos(rad), np.sin(rad)], axis=1)


def test_complete_linkage_does_not_chain() -> None:
    # a-b and b-c are 15 degrees apart (cos 0.966), a-c 30 degrees (cos 0.866): at 0.95 a chain would
    # merge all three, complete linkage keeps a-c apart; d is far from all
    labels = complete_linkage_clusters(_vectors([0, 15, 30, 90]), similarity=0.95, max_candidates=5)
    assert labels[0] != labels[2]
    assert labels[1] in (labels[0], labels[2])
    assert len(set(labels)) == 3


def test_embedding_merges_stay_inside_their_scope(ontology: Ontology) -> None:
    table = {"reboot the computer": 0.0, "restart the computer": 5.0, "check the cable": 80.0}

    def embed(names: list[str]) -> np.ndarray:
        return _vectors([table[n] for n in names])

    mentions = [
        Mention("Reboot the computer", "Fix", "a"),
        Mention("Restart the computer", "Fix", "a"),
        Mention("Restart the computer", "Fix", "b"),
        Mention("Check the cable", "Fix", "b"),
    ]
    res = resolve(mentions, ontology, ResolutionConfig(embedding=True, similarity=0.99), embed)
    assert res.node_of[mentions[0]] == res.node_of[mentions[1]]  # same article, cos(5 deg) = 0.996
    assert res.node_of[mentions[1]] != res.node_of[mentions[2]]  # other article: never merged
    assert res.node_of[mentions[2]] != res.node_of[mentions[3]]
    (merge,) = [m for m in res.merges if m["rule"] == "embedding"]
    assert merge["scope"] == "a" and merge["score"] == pytest.approx(np.cos(np.radians(5)), abs=1e-4)


def test_normalize() -> None:
    assert normalize("  The “Wi-Fi”  settings. ", "UIElement") == "wi-fi settings"
    assert normalize("Batteries", "Concept") == "battery"
    assert normalize("status", "Concept") == "status"
