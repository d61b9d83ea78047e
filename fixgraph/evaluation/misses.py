"""Miss analysis: why each gold chunk a system missed at k was missed.

For every answerable question and every gold chunk (a chunk holding part of a gold quote) that is not
in a system's top k, the miss is classed as:
- `ranked_below_k`: the system retrieved it, at a rank after k (the rank is recorded);
- `never_retrieved`: it is nowhere in the system's ranking (down to the evaluation depth);
- `not_mappable`: the gold quote could not be located in the corpus, so no chunk can ever hit it
  (one row per such quote, with no chunk id; the same for every system).
The reference design found 68% of its misses ranked just outside the top 8: that is the number this
table exists to show. `page_in_top_k` says whether another chunk of the gold chunk's page is in the top
k: a graph layer that lifts whole pages cannot mend such a miss, only a better choice within the page
can (docs/results/quality.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.questions import Question
from fixgraph.retrieval.base import Hit

MISS_CLASSES = ("ranked_below_k", "never_retrieved", "not_mappable")
COLUMNS = ["system", "qid", "qtype", "page", "quote_index", "chunk_id", "miss", "rank", "page_in_top_k"]


def miss_analysis(
    questions: Sequence[Question],
    mapping: GoldMapping,
    rankings: Mapping[str, Mapping[str, Sequence[Hit]]],
    k: int,
    doc_of: Mapping[str, str],
) -> pd.DataFrame:
    """One row per (system, missed gold chunk) or (system, unmappable quote); `doc_of`: chunk id -> page."""
    rows: list[dict[str, object]] = []
    for system, by_question in rankings.items():
        for question in questions:
            if not question.answerable:
                continue
            ranking = by_question.get(question.qid, [])
            rank_of = {hit.chunk_id: rank for rank, hit in enumerate(ranking, start=1)}
            pages_at_k = {doc_of.get(hit.chunk_id) for hit in ranking[:k]}
            seen: set[str] = set()
            for item in mapping.for_question(question.qid):
                base = {"system": system, "qid": question.qid, "qtype": question.qtype, "page": item.page}
                if item.status != "mapped":
                    rows.append({**base, "quote_index": item.index, "chunk_id": None, "miss": "not_mappable"})
                    continue
                for chunk_id in item.chunk_ids:
                    if chunk_id in seen:  # a chunk holding two quotes is one gold chunk
                        continue
                    seen.add(chunk_id)
                    rank = rank_of.get(chunk_id)
                    if rank is not None and rank <= k:
                        continue
                    rows.append(
                        {
                            **base,
                            "quote_index": item.index,
                            "chunk_id": chunk_id,
                            "miss": "never_retrieved" if rank is None else "ranked_below_k",
                            "rank": rank,
                            "page_in_top_k": item.page in pages_at_k,
                        }
                    )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["rank"] = frame["rank"].astype("Int64")
    frame["page_in_top_k"] = frame["page_in_top_k"].astype("boolean")  # unset for unmappable quotes
    return frame


def miss_counts(misses: pd.DataFrame, systems: Sequence[str]) -> dict[str, dict[str, int]]:
    """system -> miss class -> count (every class present, zeros included), the total, and how many
    missed chunks sit on a page that has another chunk in the top k (`page_in_top_k`)."""
    out: dict[str, dict[str, int]] = {}
    for system in systems:
        rows = misses[misses["system"] == system]
        counts = {cls: int((rows["miss"] == cls).sum()) for cls in MISS_CLASSES}
        counts["total"] = len(rows)
        counts["page_in_top_k"] = int(rows["page_in_top_k"].fillna(False).sum())
        out[system] = counts
    return out
