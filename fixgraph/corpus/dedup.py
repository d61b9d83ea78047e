"""Near-duplicate documents, found with MinHash LSH (datasketch), folded into one canonical record.

Two documents are near-duplicates when the Jaccard similarity of their word shingles, estimated by
MinHash, reaches `threshold`. LSH proposes candidate pairs; each is confirmed on the estimate;
confirmed pairs are joined transitively (union-find). The canonical record of a group is the newest
by modified (else published) date, so an older copy never absorbs its update; then the one whose URL
is the canonical URL a member declares (`<link rel=canonical>`); then the longest text; then the
smallest id. The group records which rule decided (`chosen_by`) and each member's date. The canonical
lists the ids it absorbed in `Document.duplicates`, and links to an absorbed id are redirected to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fixgraph.corpus.models import Document

if TYPE_CHECKING:  # datasketch imports scipy.integrate (~0.5 s): only the ingest stage's dedup needs it
    from datasketch import MinHash

WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class DedupConfig:
    enabled: bool = True
    threshold: float = 0.9
    num_perm: int = 128
    shingle_words: int = 5
    seed: int = 1

    @classmethod
    def from_config(cls, cfg: Any) -> DedupConfig:
        fields = dict(cfg or {})
        unknown = set(fields) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"corpus.dedup: unknown keys {sorted(unknown)}")
        config = cls(**fields)
        # datasketch's LSH needs at least two bands, which rules out thresholds near 1
        if not 0 < config.threshold <= 0.98 or config.num_perm < 16 or config.shingle_words < 1:
            raise ValueError("corpus.dedup: need 0 < threshold <= 0.98, num_perm >= 16, shingle_words >= 1")
        return config


@dataclass
class DedupResult:
    documents: list[Document]  # canonical and unique documents, in input order
    groups: list[dict[str, Any]] = field(default_factory=list)  # {canonical, absorbed: [{id, jaccard}]}
    redirects: dict[str, str] = field(default_factory=dict)  # absorbed id -> canonical id

    def stats(self, config: DedupConfig) -> dict[str, Any]:
        return {
            "enabled": config.enabled,
            "threshold": config.threshold,
            "num_perm": config.num_perm,
            "shingle_words": config.shingle_words,
            "groups": len(self.groups),
            "absorbed": len(self.redirects),
            "kept": len(self.documents),
        }


def shingles(text: str, k: int) -> set[str]:
    """Word k-grams of the lower-cased text; a text shorter than k words is one shingle."""
    words = WORD.findall(text.lower())
    if len(words) <= k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}


def minhash(text: str, config: DedupConfig) -> MinHash:
    from datasketch import MinHash

    signature = MinHash(num_perm=config.num_perm, seed=config.seed)
    signature.update_batch([s.encode("utf-8") for s in sorted(shingles(text, config.shingle_words))])
    return signature


class _UnionFind:
    def __init__(self, items: Sequence[str]) -> None:
        self.parent = {item: item for item in items}

    def find(self, item: str) -> str:
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def date_of(doc: Document) -> str:
    """ISO date of the document's last version (modified, else published), or "" when unknown."""
    return doc.metadata.get("modified") or doc.metadata.get("published") or ""


def choose_canonical(group: Sequence[Document]) -> tuple[str, str]:
    """(canonical id, the rule that decided): newest date, canonical URL, longest text, smallest id."""
    declared = {d.metadata["canonical_url"] for d in group if d.metadata.get("canonical_url")}
    rules: list[tuple[str, Callable[[Document], Any]]] = [
        ("newest date", date_of),
        ("canonical url", lambda d: d.url in declared),
        ("longest text", lambda d: len(d.text)),
    ]
    candidates = list(group)
    for rule, key in rules:
        best = max(key(d) for d in candidates)
        kept = [d for d in candidates if key(d) == best]
        if len(kept) < len(candidates) and best:
            candidates = kept
            if len(candidates) == 1:
                return candidates[0].id, rule
    return min(d.id for d in candidates), "smallest id"


def deduplicate(docs: Sequence[Document], config: DedupConfig) -> DedupResult:
    if not config.enabled or len(docs) < 2:
        return DedupResult(documents=list(docs))
    from datasketch import MinHashLSH

    signatures = {doc.id: minhash(doc.text, config) for doc in docs}
    lsh = MinHashLSH(threshold=config.threshold, num_perm=config.num_perm)
    for doc_id, signature in signatures.items():
        lsh.insert(doc_id, signature)
    groups = _UnionFind([d.id for d in docs])
    for doc_id, signature in signatures.items():
        for other in lsh.query(signature):
            # LSH candidates can fall below the threshold: confirm on the estimated Jaccard
            if other != doc_id and signature.jaccard(signatures[other]) >= config.threshold:
                groups.union(doc_id, other)
    by_id = {d.id: d for d in docs}
    members: dict[str, list[str]] = {}
    for doc in docs:
        members.setdefault(groups.find(doc.id), []).append(doc.id)
    result = DedupResult(documents=[])
    canonical_of: dict[str, str] = {}
    for ids in members.values():
        canonical, chosen_by = choose_canonical([by_id[i] for i in ids])
        for i in ids:
            canonical_of[i] = canonical
        absorbed = sorted(i for i in ids if i != canonical)
        if absorbed:
            dates = {i: date_of(by_id[i]) for i in sorted(ids) if date_of(by_id[i])}
            result.groups.append(
                {
                    "canonical": canonical,
                    "chosen_by": chosen_by,
                    **({"dates": dates} if dates else {}),
                    "absorbed": [
                        {"id": i, "jaccard": round(signatures[canonical].jaccard(signatures[i]), 4)} for i in absorbed
                    ],
                }
            )
            result.redirects.update({i: canonical for i in absorbed})
    absorbed_by = {g["canonical"]: [a["id"] for a in g["absorbed"]] for g in result.groups}
    for doc in docs:
        if canonical_of[doc.id] == doc.id:
            absorbed_ids = absorbed_by.get(doc.id)
            result.documents.append(doc.model_copy(update={"duplicates": absorbed_ids}) if absorbed_ids else doc)
    result.groups.sort(key=lambda g: g["canonical"])
    return result
