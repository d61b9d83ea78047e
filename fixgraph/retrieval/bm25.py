"""BM25 over chunk text (with page title and headings); backends bm25s (default) and Lucene (pyserini).

k1, b and the analyzer are pinned in config for both backends (conf/retriever/bm25.yaml), since their
library defaults differ (bm25s 1.5/0.75, pyserini 0.9/0.4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.io import read_json, write_json
from fixgraph.retrieval.base import RETRIEVERS, Hit, hits_from_scores
from fixgraph.retrieval.lucene import LuceneBM25, document_texts

BACKENDS = ("bm25s", "pyserini")
TOKEN = re.compile(r"(?u)\b\w\w+\b")  # Lucene-like: words of two or more characters


class Analyzer:
    """Lowercase, tokenise, drop stopwords, stem: pinned in config so indexes are reproducible."""

    def __init__(self, lowercase: bool = True, stopwords: str | None = "en", stemmer: str | None = "english") -> None:
        self.lowercase = lowercase
        self.stopwords = _stopwords(stopwords)
        self.stemmer = _stemmer(stemmer)

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        tokens = [t for t in TOKEN.findall(text) if t not in self.stopwords]
        return list(self.stemmer.stemWords(tokens)) if self.stemmer is not None else tokens


@lru_cache(maxsize=4)
def _stopwords(name: str | None) -> frozenset[str]:
    if not name:
        return frozenset()
    if name != "en":
        raise ValueError(f"bm25 analyzer: unknown stopword list {name!r}; valid: en")
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _stemmer(language: str | None) -> Any:
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


@RETRIEVERS.register("bm25")
class BM25Retriever:
    def __init__(
        self,
        name: str = "bm25",
        backend: str = "bm25s",
        method: str = "lucene",
        k1: float = 0.9,
        b: float = 0.4,
        analyzer: dict[str, Any] | None = None,
        depth: int = 100,
        lucene_analyzer: str | None = None,
        expansion: str | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"retriever {name}: unknown bm25 backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if expansion and backend != "bm25s":
            raise ValueError(f"retriever {name}: `expansion` is supported by the bm25s backend only")
        self.expansion = expansion  # generated questions appended to each chunk (doc2query; expansion.py)
        self.name = name
        self.backend = backend
        self.method, self.k1, self.b, self.depth = method, k1, b, depth
        self.analyzer = Analyzer(**(analyzer or {}))
        self._index: Any = None
        self._ids: list[str] = []
        self._lucene: LuceneBM25 | None = None
        if backend == "pyserini":
            self._lucene = LuceneBM25(k1, b, lucene_analyzer)

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        if self._lucene is not None:
            analyze = self.analyzer if self._lucene.pretokenized else None
            self._lucene.build([c.id for c in chunks], document_texts(chunks, analyze), workdir)
            write_json(workdir / "ids.json", [c.id for c in chunks])
            self._ids = [c.id for c in chunks]
            return
        import bm25s

        texts = [c.index_text() for c in chunks]
        if self.expansion:
            from fixgraph.retrieval.expansion import expanded_text, load_expansion

            questions = load_expansion(self.expansion, chunks, self.name)
            texts = [expanded_text(t, questions[c.id]) for t, c in zip(texts, chunks, strict=True)]
        corpus = [self.analyzer(t) for t in texts]
        # bm25s numbers terms in set order, which changes with Python's hash seed: give it a sorted vocabulary
        # so the same chunks always give the same index files (byte-stable DVC output)
        vocab = {term: i for i, term in enumerate(sorted({t for doc in corpus for t in doc}))}
        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        index.index(([[vocab[t] for t in doc] for doc in corpus], vocab), show_progress=False)
        workdir.mkdir(parents=True, exist_ok=True)
        index.save(str(workdir / "bm25s"), show_progress=False)
        write_json(workdir / "ids.json", [c.id for c in chunks])
        self._index, self._ids = index, [c.id for c in chunks]

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        import bm25s

        self._ids = list(read_json(workdir / "ids.json"))
        if self._ids != [c.id for c in chunks]:
            raise ValueError(f"{workdir}: BM25 index was built for other chunks; rebuild it")
        if self._lucene is not None:
            self._lucene.load(workdir)
            return
        self._index = bm25s.BM25.load(str(workdir / "bm25s"), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk, in index order (bm25s backend only: Lucene returns a top k)."""
        if self._index is None:
            raise ValueError(f"retriever {self.name}: full score vectors need the bm25s backend")
        vocab = self._index.vocab_dict
        tokens = [t for t in self.analyzer(query) if t in vocab]
        if not tokens:
            return np.zeros(len(self._ids), dtype=np.float32)
        return np.asarray(self._index.get_scores(tokens), dtype=np.float32)

    def search(self, query: str, k: int) -> list[Hit]:
        if self._lucene is not None:
            text = " ".join(self.analyzer(query)) if self._lucene.pretokenized else query
            return self._lucene.search(text, k)
        scores = self.scores(query)
        return [h for h in hits_from_scores(scores, self._ids, k) if h.score > 0]
