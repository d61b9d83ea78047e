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
    assert (rows[0]["status"], rows[0]["resolved_doc"]) == ("redirected", "c-long")
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
        # an embedded question or a quoted title is not a condition
        ("Learn what to do if your Mac doesn't start up.", "what to do", ""),
        ("Learn what to do if your Mac doesn't start up.", "Learn what to do if your Mac doesn't start up", ""),
        ("See What to do if the screen is blank.", "What to do if the screen is blank", ""),
        ("Find out how to check whether the disk is full.", "how to check", ""),
        # ... while a real condition later in the same sentence still counts
        ("Learn what to do if it hangs; if the fan is loud, see Cooling.", "Cooling", "if the fan is loud"),
    ],
)
def test_conditional_links(sentence: str, anchor: str, condition: str) -> None:
    assert condition_of(sentence, anchor) == condition
    rows, _, _ = build_link_graph([linked_doc("p", sentence, anchor, "q"), linked_doc("q", "Q page.", "Q", "p")])
    row = next(r for r in rows if r["source_doc"] == "p")
    assert (row["conditional"], row["condition"], row["sentence"], row["anchor_text"]) == (
        bool(condition), condition, sentence, anchor
    )  # fmt: skip


def anchored(doc: Document, section: str) -> Document:
    return doc.model_copy(update={"links": [doc.links[0].model_copy(update={"target_section": section})]})


def test_link_status_classification() -> None:
    target = linked_doc("b", "See alias please.", "alias", "old-b").model_copy(update={"anchors": ["reset"]})
    docs = [
        linked_doc("a", "Go to b now.", "b", "b"),
        target,
        linked_doc("c", "See gone page.", "gone", "gone"),
        linked_doc("d", "See the help.", "help", "help:gnome-help/printing"),
        linked_doc("e", "Back to the top.", "top", "e"),
        linked_doc("f", "See the old page.", "old page", "old-b"),
        anchored(linked_doc("g", "See the reset step.", "reset step", "b"), "reset"),
        anchored(linked_doc("h", "See the lost step.", "lost step", "b"), "no-such-section"),
        linked_doc("i", "See the removed page.", "removed page", "site/removed"),
        linked_doc("j", "See the private page.", "private page", "site/private"),
    ]
    unavailable = {"site/removed": "broken", "site/private": "disallowed"}
    rows, stats, problems = build_link_graph(docs, aliases={"old-b": "b"}, unavailable=unavailable)
    status = {r["source_doc"]: (r["status"], r["resolved_doc"]) for r in rows}
    assert status == {
        "a": ("resolved", "b"),
        "b": ("self", "b"),  # the alias points back at the page itself
        "c": ("missing", ""),
        "d": ("external", ""),
        "e": ("self", "e"),
        "f": ("redirected", "b"),  # reached through the alias
        "g": ("resolved", "b"),  # the anchor exists (an element id, not a section)
        "h": ("missing_anchor", "b"),  # the page exists, its #section does not
        "i": ("broken", ""),
        "j": ("disallowed", ""),
    }
    assert stats["by_status"] == {
        "broken": 1, "disallowed": 1, "external": 1, "missing": 1, "missing_anchor": 1, "redirected": 1,
        "resolved": 2, "self": 2,
    }  # fmt: skip
    assert stats["doc_edges"] == 4  # a, f, g, h -> b; nothing for self, missing, broken or disallowed
    assert [(p.path, p.kind, p.reason) for p in problems] == [
        ("c.page", "missing_link", "links to 1 missing pages: gone"),
        ("i.page", "missing_link", "links to 1 missing pages: site/removed (broken)"),
        ("j.page", "missing_link", "links to 1 missing pages: site/private (disallowed)"),
        ("h.page", "missing_anchor", "links to 1 missing anchors: b#no-such-section"),
    ]


def dated(doc: Document, **metadata: str) -> Document:
    return doc.model_copy(update={"metadata": metadata})


def test_canonical_is_the_newest_version_not_the_longest(corpus: list[Document]) -> None:
    a, b, longest, z = corpus
    docs = [
        dated(a, published="2021-03-01"),
        dated(b, modified="2024-06-30"),
        dated(longest, published="2023-01-01"),
        z,
    ]
    result = deduplicate(docs, DedupConfig())
    (group,) = result.groups
    assert (group["canonical"], group["chosen_by"]) == ("b", "newest date")
    assert group["dates"] == {"a": "2021-03-01", "b": "2024-06-30", "c-long": "2023-01-01"}
    assert result.redirects == {"a": "b", "c-long": "b"}


def test_canonical_url_breaks_a_date_tie_then_longest_text(corpus: list[Document]) -> None:
    a, b, longest, z = corpus
    declared = "https://help.example.com/a"
    same_day = [
        dated(a.model_copy(update={"url": declared}), published="2024-01-01", canonical_url=declared),
        dated(
            b.model_copy(update={"url": "https://help.example.com/b"}), published="2024-01-01", canonical_url=declared
        ),
        dated(longest, published="2023-01-01"),
        z,
    ]
    assert deduplicate(same_day, DedupConfig()).groups[0]["chosen_by"] == "canonical url"
    assert deduplicate(same_day, DedupConfig()).groups[0]["canonical"] == "a"
    undated = deduplicate(corpus, DedupConfig()).groups[0]
    assert (undated["canonical"], undated["chosen_by"]) == ("c-long", "longest text")
