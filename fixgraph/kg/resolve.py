"""Entity resolution: which mentions are the same node. Rules first, then embedding clustering.

A node is (type, scope, key). The scope is the mention's article for document-scoped types (Problem,
Cause, Fix, Step, Task in the GNOME ontology) and empty for global ones, so "restart the computer" in
the printer article and in the Wi-Fi article stay two nodes: a merge can never carry one article's
conditions to another. Within a scope:
1. rule `normalize`: case, spacing, quotes, leading determiners, and (for Concepts) plural stems;
2. rule `alias`: the ontology's alias table (Nautilus -> Files);
3. rule `embedding`: for types marked `cluster`, names whose embeddings are close merge by complete
   linkage (every pair in a cluster >= `similarity`, so no chaining a -> b -> c); candidate pairs come
   from a thresholded nearest-neighbour pass, so only small components are clustered.
Every merge (a surface form joining a node under another name) is logged with its rule and score.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixgraph.kg.ontology import Ontology

QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "–": "-", "—": "-"})
LEADING = re.compile(r"^(?:the|a|an|your|my|our|their|its|this|that|these|those)\s+")


@dataclass(frozen=True)
class ResolutionConfig:
    embedding: bool = True
    similarity: float = 0.92  # cosine similarity for an embedding merge (complete linkage)
    max_candidates: int = 10  # nearest neighbours considered per name

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> ResolutionConfig:
        return cls(**dict(cfg or {}))


@dataclass(frozen=True)
class Mention:
    name: str
    type: str
    doc_id: str
    ref: str = ""  # a stable identity (e.g. doc:<page id>): mentions with a ref resolve by it, not by name


@dataclass
class Resolution:
    node_of: dict[Mention, str] = field(default_factory=dict)  # mention -> node id
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> type, scope, name, aliases
    merges: list[dict[str, Any]] = field(default_factory=list)

    def merge_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(m["rule"] for m in self.merges).items()))


def normalize(name: str, node_type: str) -> str:
    text = " ".join(name.translate(QUOTES).replace('"', "").split()).strip(" .,:;!?'")
    folded = LEADING.sub("", text.casefold())
    if node_type == "Concept":
        folded = " ".join([*folded.split()[:-1], _singular(folded.split()[-1])]) if folded else folded
    return folded


def _singular(word: str) -> str:
    """English plural -> singular for the last word of a noun phrase (printers -> printer)."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is", "os")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes")):
        return word[:-2]
    return word[:-1]


def node_id(node_type: str, scope: str, key: str) -> str:
    return f"{node_type}|{scope}|{key}"


Embed = Any  # callable: list[str] -> np.ndarray of L2-normalised rows


def complete_linkage_clusters(vectors: np.ndarray, similarity: float, max_candidates: int) -> list[int]:
    """Cluster labels: candidate pairs from nearest neighbours >= similarity, then complete linkage
    (scipy) inside each connected component, cut at distance 1 - similarity."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import pdist

    n = vectors.shape[0]
    if n == 0:
        return []
    rows, cols = [], []
    for start in range(0, n, 1024):  # blocks keep the similarity matrix small
        sims = vectors[start : start + 1024] @ vectors.T
        k = min(max_candidates + 1, n)
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for i, js in enumerate(top):
            for j in js:
                if j != start + i and sims[i, j] >= similarity:
                    rows.append(start + i)
                    cols.append(int(j))
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    labels = np.zeros(n, dtype=np.int64)
    next_label = 0
    for comp in np.unique(component):
        members = np.flatnonzero(component == comp)
        if len(members) == 1:
            labels[members] = next_label
            next_label += 1
            continue
        distances = np.clip(pdist(vectors[members], metric="cosine"), 0.0, 2.0)
        sub = fcluster(linkage(distances, method="complete"), t=1.0 - similarity, criterion="distance")
        for value in np.unique(sub):
            labels[members[sub == value]] = next_label
            next_label += 1
    return labels.tolist()


def _canonical(forms: Counter[str]) -> str:
    """Most frequent surface form; ties go to the shorter, then alphabetical one."""
    return min(forms, key=lambda f: (-forms[f], len(f), f))


def resolve(
    mentions: Iterable[Mention], ontology: Ontology, config: ResolutionConfig, embed: Embed | None = None
) -> Resolution:
    buckets: dict[tuple[str, str], dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    rule_of: dict[tuple[str, str, str, str], tuple[str, str]] = {}  # (type, scope, surface, ref) -> (key, rule)
    ref_keys: set[tuple[str, str, str]] = set()  # keys that are identities, never clustered
    mention_list = list(mentions)
    for m in mention_list:
        scope = m.doc_id if ontology.scope_of(m.type) == "document" else ""
        if m.ref:
            key, rule = m.ref, "ref"
            ref_keys.add((m.type, scope, key))
        else:
            alias = ontology.canonical(m.type, m.name)
            key = normalize(alias, m.type) if alias else normalize(m.name, m.type)
            rule = "alias" if alias and normalize(m.name, m.type) != key else "normalize"
        buckets[(m.type, scope)][key][m.name] += 1
        rule_of[(m.type, scope, m.name, m.ref)] = (key, rule)
    # embedding merges: key -> representative key, per bucket
    redirect: dict[tuple[str, str, str], tuple[str, float]] = {}
    if config.embedding and embed is not None:
        to_cluster = {
            bucket: names
            for bucket, keys in sorted(buckets.items())
            if ontology.node_types[bucket[0]].cluster
            and len(names := sorted(k for k in keys if (*bucket, k) not in ref_keys)) >= 2
        }
        unique = sorted({n for names in to_cluster.values() for n in names})
        # one embedding call for every bucket (document-scoped types have one small bucket per article)
        vectors = dict(zip(unique, np.asarray(embed(unique), dtype=np.float32), strict=True)) if unique else {}
        for (node_type, scope), names in to_cluster.items():
            keys = buckets[(node_type, scope)]
            matrix = np.stack([vectors[n] for n in names])
            labels = complete_linkage_clusters(matrix, config.similarity, config.max_candidates)
            groups: dict[int, list[str]] = defaultdict(list)
            for name, label in zip(names, labels, strict=True):
                groups[label].append(name)
            for group in groups.values():
                if len(group) < 2:
                    continue
                head = max(group, key=lambda k: (sum(keys[k].values()), -len(k), k))
                for k in group:
                    if k != head:
                        redirect[(node_type, scope, k)] = (head, float(vectors[k] @ vectors[head]))
    result = Resolution()
    merged_forms: dict[str, Counter[str]] = defaultdict(Counter)
    for (node_type, scope), keys in buckets.items():
        for key, forms in keys.items():
            head, _ = redirect.get((node_type, scope, key), (key, 1.0))
            merged_forms[node_id(node_type, scope, head)].update(forms)
    for nid, forms in merged_forms.items():
        node_type, scope, key = nid.split("|", 2)
        result.nodes[nid] = {
            "type": node_type,
            "scope": scope,
            "key": key,
            "name": _canonical(forms),
            "aliases": sorted(forms),
        }
    for m in mention_list:
        scope = m.doc_id if ontology.scope_of(m.type) == "document" else ""
        key, rule = rule_of[(m.type, scope, m.name, m.ref)]
        head, score = redirect.get((m.type, scope, key), (key, 1.0))
        result.node_of[m] = node_id(m.type, scope, head)
    seen: set[tuple[str, str]] = set()
    for (node_type, scope, surface, _ref), (key, rule) in sorted(rule_of.items()):
        head, score = redirect.get((node_type, scope, key), (key, 1.0))
        nid = node_id(node_type, scope, head)
        canonical = result.nodes[nid]["name"]
        if surface == canonical or (nid, surface) in seen:
            continue
        seen.add((nid, surface))
        merge_rule = "embedding" if head != key else rule
        result.merges.append(
            {
                "node_id": nid,
                "type": node_type,
                "scope": scope,
                "surface": surface,
                "canonical": canonical,
                "rule": merge_rule,
                "score": round(score, 4),
            }
        )
    return result


def mentions_of(records: Sequence[Any]) -> list[Mention]:
    """Every entity occurrence in graph records: entities and both ends of relations."""
    out = []
    for r in records:
        out.append(Mention(r.subject, r.subject_type, r.provenance.doc_id, r.subject_ref))
        if r.is_relation:
            out.append(Mention(r.object, r.object_type, r.provenance.doc_id, r.object_ref))
    return out
