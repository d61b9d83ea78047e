"""The block stream both renderers (Mallard, and `DocBuilder` for every other format) write into.

Blocks are joined by one newline and every block records its exact offsets, so a block's text is always
a slice of the final `Document.text`. Each block also gets a unit number: blocks emitted inside one
`unit()` (a list item, a table row, a term and its definition) share it, and the chunker keeps a unit
together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from fixgraph.corpus.models import Block


@dataclass(kw_only=True)
class BlockStream:
    parts: list[str] = field(default_factory=list)
    length: int = 0
    blocks: list[Block] = field(default_factory=list)
    unit_counter: int = 0
    open_unit: int | None = None  # set while the blocks of one unit are emitted

    @contextlib.contextmanager
    def unit(self) -> Iterator[None]:
        """Blocks emitted inside share one unit; nested units fold into the outermost one."""
        if self.open_unit is not None:
            yield
            return
        self.unit_counter += 1
        self.open_unit = self.unit_counter
        try:
            yield
        finally:
            self.open_unit = None

    def emit(self, text: str, kind: str, section: str) -> int | None:
        """Append a block; returns its start offset, or None if it rendered to nothing."""
        if not text:
            return None
        if self.parts:
            self.parts.append("\n")
            self.length += 1
        start = self.length
        self.parts.append(text)
        self.length += len(text)
        unit = self.open_unit
        if unit is None:
            self.unit_counter += 1
            unit = self.unit_counter
        self.blocks.append(Block(start=start, end=self.length, kind=kind, section=section, unit=unit))
        return start
