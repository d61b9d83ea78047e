"""Query router: a rule classifier picks, per question, which retriever answers it (`kind: router`).

Kinds (rules, no training data needed, so nothing is tuned on benchmark questions):
- `lexical`: short keyword queries, or queries quoting an exact string, a command, a path, a key
  combination or an error code: exact tokens matter, so a channel with BM25 in it helps;
- `natural`: everything else (a described problem in the user's own words): dense paraphrase
  matching is the stronger signal.
`routes` maps each kind to one of the router's `systems` (full retriever configs).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, Retriever

KINDS = ("lexical", "natural")
EXACT = re.compile(
    r"""["“”'`].{2,}?["“”'`]"""  # a quoted string
    r"|(?:^|\s)(?:--?\w|/\w+/|~/)"  # an option, a path
    r"|\b(?:ctrl|alt|shift|super)\s*\+"  # a key combination
    r"|\b(?:0x[0-9a-f]+|e\d{2,}|error\s+\d+)\b"  # an error code
    r"|\b\w+\.(?:conf|desktop|txt|ini|sh|py)\b",  # a file name
    re.IGNORECASE,
)


def classify_query(query: str, lexical_max_words: int = 5) -> str:
    words = re.findall(r"\w+", query)
    if len(words) <= lexical_max_words or EXACT.search(query):
        return "lexical"
    return "natural"


@RETRIEVERS.register("router")
class RouterRetriever:
    def __init__(
        self,
        name: str = "router",
        systems: Mapping[str, Any] | None = None,
        routes: Mapping[str, str] | None = None,
        lexical_max_words: int = 5,
        depth: int = 100,
    ) -> None:
        from fixgraph.retrieval.base import build_retriever

        if not systems:
            raise ValueError(f"retriever {name}: needs `systems` to route between")
        routes = dict(routes or {})
        if set(routes) != set(KINDS) or not set(routes.values()) <= set(systems):
            raise ValueError(
                f"retriever {name}: routes {routes} must map each of {list(KINDS)} to one of systems {sorted(systems)}"
            )
        self.name = name
        self.depth = depth
        self.routes = routes
        self.lexical_max_words = lexical_max_words
        self.systems: dict[str, Retriever] = {key: build_retriever(cfg) for key, cfg in systems.items()}
        self.last_route = ""
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, system in self.systems.items():
            system.build(chunks, workdir / key)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, system in self.systems.items():
            system.load(chunks, workdir / key)

    def route(self, query: str) -> str:
        return self.routes[classify_query(query, self.lexical_max_words)]

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        self.last_route = self.route(query)
        routed = time.perf_counter()
        system = self.systems[self.last_route]
        hits = system.search(query, k)
        self.last_timings = {**getattr(system, "last_timings", {}), "route_ms": 1000 * (routed - started)}
        return hits
