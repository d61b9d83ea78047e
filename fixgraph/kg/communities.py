"""Communities: Leiden over the entity graph (graspologic-native, the Leiden core of graspologic,
without graspologic's 30 s import and setuptools pin), community ids stored on the nodes, and optional
one-sentence LLM summaries of the largest communities."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fixgraph.kg.prompts import load_prompt
from fixgraph.llm.structured import StructuredOutputError

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "maxLength": 300}},
    "required": ["summary"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class CommunityConfig:
    enabled: bool = True
    resolution: float = 1.0
    seed: int = 0
    exclude_relations: tuple[str, ...] = ()  # e.g. in_guide: topic pages link to everything
    summaries: bool = False
    summarise_top: int = 20
    members_in_prompt: int = 25
    prompt: str = "community_summary_v1"

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> CommunityConfig:
        fields = dict(cfg or {})
        if "exclude_relations" in fields:
            fields["exclude_relations"] = tuple(fields["exclude_relations"])
        return cls(**fields)


def leiden_communities(
    nodes: pd.DataFrame, edges: pd.DataFrame, config: CommunityConfig
) -> tuple[dict[str, int], float]:
    """node id -> community id (isolated nodes get one each), and the partition's modularity."""
    import graspologic_native as gn

    kept = edges[~edges["relation"].isin(config.exclude_relations)]
    weights: dict[tuple[str, str], float] = {}
    for s, t, w in zip(kept["source"], kept["target"], kept["weight"], strict=True):
        key = (s, t) if s <= t else (t, s)  # undirected: Leiden sums both directions otherwise
        weights[key] = weights.get(key, 0.0) + float(w)
    membership: dict[str, int] = {}
    modularity = 0.0
    if weights:
        modularity, membership = gn.leiden(
            edges=[(s, t, w) for (s, t), w in sorted(weights.items())],
            resolution=config.resolution,
            seed=config.seed,
            use_modularity=True,
        )
    next_id = max(membership.values(), default=-1) + 1
    for node in sorted(nodes["node_id"]):
        if node not in membership:
            membership[node] = next_id
            next_id += 1
    return membership, float(modularity)


def community_table(nodes: pd.DataFrame, membership: Mapping[str, int]) -> pd.DataFrame:
    frame = nodes.assign(community=nodes["node_id"].map(membership))
    rows = []
    for community, group in frame.groupby("community"):
        top = group.sort_values(["n_mentions", "name"], ascending=[False, True])["name"].head(10).tolist()
        rows.append({"community": int(str(community)), "size": len(group), "summary": "", "top_nodes": top})
    return pd.DataFrame(rows, columns=["community", "size", "summary", "top_nodes"]).sort_values(
        ["size", "community"], ascending=[False, True], ignore_index=True
    )


def summarise(table: pd.DataFrame, nodes: pd.DataFrame, llm: Any, config: CommunityConfig) -> pd.DataFrame:
    """Fill `summary` for the `summarise_top` largest communities with more than one node."""
    template, _ = load_prompt(config.prompt)
    table = table.copy()
    for idx in table.index[: config.summarise_top]:
        if int(table.loc[idx, "size"]) < 2:
            continue
        members = nodes[nodes["community"] == table.loc[idx, "community"]]
        members = members.sort_values(["n_mentions", "name"], ascending=[False, True]).head(config.members_in_prompt)
        listing = "; ".join(f"{n} ({t})" for n, t in zip(members["name"], members["type"], strict=True))
        try:
            answer = llm.complete_json(
                template.substitute(members=listing), SUMMARY_SCHEMA, stage="summarise", temperature=0.0, max_tokens=80
            )
            table.loc[idx, "summary"] = answer.value["summary"].strip()
        except StructuredOutputError:
            table.loc[idx, "summary"] = ""
    return table
