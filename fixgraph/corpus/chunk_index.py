"""Which chunk of a page holds a character offset.

A page's chunks are disjoint spans of its text, so sorting them by start and binary-searching the
starts finds the one holding an offset (a link, a span, a citation) in O(log n). Offsets in a gap
between chunks (text the chunker dropped) belong to no chunk.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

from fixgraph.corpus.models import Chunk


class ChunkIndex:
    def __init__(self, chunks: Iterable[Chunk]) -> None:
        by_doc: dict[str, list[Chunk]] = defaultdict(list)
        for chunk in chunks:
            by_doc[chunk.doc_id].append(chunk)
        for page in by_doc.values():
            page.sort(key=lambda c: c.start)
        self.by_doc = dict(by_doc)
        self.starts = {doc_id: [c.start for c in page] for doc_id, page in self.by_doc.items()}

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """The page's chunks in text order (empty for an unknown page)."""
        return self.by_doc.get(doc_id, [])

    def chunk_at(self, doc_id: str, offset: int | None) -> Chunk | None:
        """The chunk of `doc_id` holding `offset`; None for no offset, an unknown page or a gap."""
        starts = self.starts.get(doc_id)
        if offset is None or not starts:
            return None
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return None
        chunk = self.by_doc[doc_id][i]
        return chunk if chunk.start <= offset < chunk.end else None
