"""Miss analysis: why each gold chunk a system missed at k was missed.

For every answerable question and every gold chunk (a chunk holding part of a gold quote) that is not
in a system's top k, the miss is classed as:
- `ranked_below_k`: the system retrieved it, at a rank after k (the rank is recorded);
- `never_retrieved`: it is nowhere in the system's ranking (down to the evaluation depth);
- `not_mappable`: the gold quote could not be located in the corpus, so no chunk can ever hit it
  (one row per such quote, with no chunk id; the same for every system).
The reference design found 68% of its misses ranked just outside the top 8: that is the number this
table exists to show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.questions import Question
from fixgraph.retrieval.base import Hit

MISS_CLASSES = ("ranked_below_k", "never_retrieved", "not_mappable")
COLUMNS = ["system", "qid", "qtype", "page", "quote_index", "chunk_id", "miss", "rank"]


def miss_analysis(
    questions: Sequence[Question],
    mapping: GoldMapping,
    rankings: Mapping[str, Mapping[str, Sequence[Hit]]],
    k: int,
) -> pd.DataFrame:
    """One row per (system, missed gold chunk) or (system, unmappable quote)."""
    rows: list[dict[str, object]] = []
    for system, by_question in rankings.items():
        for question in questions:
            if not question.answerable:
                continue
            rank_of = {hit.chunk_id: rank for rank, hit in enumerate(by_question.get(question.qid, []), start=1)}
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
                        }
                    )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


def miss_counts(misses: pd.DataFrame, systems: Sequence[str]) -> dict[str, dict[str, int]]:
    """system -> miss class -> count (every class present, zeros included), plus the total."""
    out: dict[str, dict[str, int]] = {}
    for system in systems:
        rows = misses[misses["system"] == system]
        counts = {cls: int((rows["miss"] == cls).sum()) for cls in MISS_CLASSES}
        counts["total"] = len(rows)
        out[system] = counts
    return out
