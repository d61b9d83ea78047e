"""Near-duplicate removal (checked against exact Jaccard) and the link graph (resolution, conditions)."""

from __future__ import annotations

import random
import re

import pytest

from fixgraph.corpus.builder import DocBuilder, Inline
from fixgraph.corpus.dedup import DedupConfig, deduplicate
from fixgraph.corpus.linkgraph import build_link_graph, condition_of
from fixgraph.corpus.models import Document, Link

VOCAB = [f"w{i}" for i in range(400)]


def text_doc(doc_id: str, words: list[str], links: list[Link] | None = None) -> Document:
    return Document(id=doc_id, title=doc_id, source="t", path=f"{doc_id}.page", text=" ".join(words), links=links or [])


def exact_jaccard(a: str, b: str, k: int = 5) -> float:
    def grams(text: str) -> set[str]:
        words = re.findall(r"\w+", text.lower())
        return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}

    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y)


@pytest.fixture
def corpus() -> list[Document]:
    rng = random.Random(7)
    base = [rng.choice(VOCAB) for _ in range(600)]
    near = list(base)
    near[300] = "changed"  # one word: 5 of ~596 shingles differ
    longer = [*base, "extra", "closing", "words"]
    other = [rng.choice(VOCAB) for _ in range(600)]
    return [text_doc("a", base), text_doc("b", near), text_doc("c-long", longer), text_doc("z", other)]


def test_groups_match_exact_jaccard(corpus: list[Document]) -> None:
    by_id = {d.id: d.text for d in corpus}
    assert exact_jaccard(by_id["a"], by_id["b"]) > 0.97
    assert exact_jaccard(by_id["a"], by_id["z"]) < 0.05
    result = deduplicate(corpus, DedupConfig(threshold=0.9))
    # canonical = longest text; it lists what it absorbed, with the estimated Jaccard
    assert [d.id for d in result.documents] == ["c-long", "z"]
    assert result.documents[0].duplicates == ["a", "b"]
    assert result.redirects == {"a": "c-long", "b": "c-long"}
    for absorbed in result.groups[0]["absorbed"]:
        assert absorbed["jaccard"] == pytest.approx(exact_jaccard(by_id["c-long"], by_id[absorbed["id"]]), abs=0.08)


def test_disabled_keeps_everything_and_bad_settings_are_named(corpus: list[Document]) -> None:
    assert len(deduplicate(corpus, DedupConfig(enabled=False)).documents) == 4
    with pytest.raises(ValueError, match="unknown keys"):
        DedupConfig.from_config({"treshold": 0.5})
    with pytest.raises(ValueError, match="threshold"):
        DedupConfig.from_config({"threshold": 1.0})


def test_links_to_absorbed_pages_are_redirected(corpus: list[Document]) -> None:
    linking = text_doc("hub", ["see", "it"], [Link(target_doc="a", link_type="inline", anchor_text="it")])
    result = deduplicate([*corpus, linking], DedupConfig())
    rows, stats, _ = build_link_graph(result.documents, {}, result.redirects)
    assert (rows[0]["status"], rows[0]["resolved_doc"]) == ("resolved", "c-long")
    assert stats["doc_edges"] == 1


def linked_doc(doc_id: str, sentence: str, anchor: str, target: str, link_type: str = "inline") -> Document:
    builder = DocBuilder()
    run = Inline()
    before, _, after = sentence.partition(anchor)
    run.text(before)
    token = run.open("link", Link(target_doc=target, link_type=link_type))
    run.text(anchor)
    run.close(token)
    run.text(after)
    builder.block(run)
    return builder.build(id=doc_id, title=doc_id, source="t", path=f"{doc_id}.page")


@pytest.mark.parametrize(
    ("sentence", "anchor", "condition"),
    [
        ("If the light stays amber, reset the hub.", "reset the hub", "If the light stays amber"),
        ("Reset the hub if nothing else works.", "Reset the hub", "if nothing else works"),
        ("When the battery is low, see Power saving.", "Power saving", "When the battery is low"),
        ("Unless you use a proxy, read Network basics first.", "Network basics", "Unless you use a proxy"),
        ("See Reset the hub for a last resort.", "Reset the hub", ""),
        ("The notification shows the battery level.", "battery level", ""),
    ],
)
def test_conditional_links(sentence: str, anchor: str, condition: str) -> None:
    assert condition_of(sentence, anchor) == condition
    rows, _, _ = build_link_graph([linked_doc("p", sentence, anchor, "q"), linked_doc("q", "Q page.", "Q", "p")])
    row = next(r for r in rows if r["source_doc"] == "p")
    assert (row["conditional"], row["condition"], row["sentence"], row["anchor_text"]) == (
        bool(condition), condition, sentence, anchor
    )  # fmt: skip


def test_link_status_classification() -> None:
    docs = [
        linked_doc("a", "Go to b now.", "b", "b"),
        linked_doc("b", "See alias please.", "alias", "old-b"),
        linked_doc("c", "See gone page.", "gone", "gone"),
        linked_doc("d", "See the help.", "help", "help:gnome-help/printing"),
        linked_doc("e", "Back to the top.", "top", "e"),
    ]
    rows, stats, problems = build_link_graph(docs, aliases={"old-b": "b"})
    status = {r["source_doc"]: (r["status"], r["resolved_doc"]) for r in rows}
    assert status == {
        "a": ("resolved", "b"),
        "b": ("self", "b"),  # the alias points back at the page itself
        "c": ("missing", ""),
        "d": ("external", ""),
        "e": ("self", "e"),
    }
    assert stats["by_status"] == {"external": 1, "missing": 1, "resolved": 1, "self": 2}
    assert [(p.path, p.kind, p.action) for p in problems] == [("c.page", "missing_link", "warning")]
