"""Typed records that flow from the corpus stage to every later stage.

Offsets are character offsets into `Document.text`, half-open [start, end), so that any chunk,
link or inline span can be traced back to the exact source text it came from.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Span(BaseModel):
    start: int
    end: int


class Block(Span):
    """A unit of text that chunking never splits: a paragraph, list item paragraph, step, cell..."""

    kind: str  # title | summary | heading | paragraph | item | step | term | cell | code | caption
    section: str  # id of the enclosing section ("" for the page body)
    unit: int  # blocks of one list item share a unit: chunking never splits a unit


class Section(Span):
    id: str
    title: str
    heading_path: list[str]


class InlineSpan(Span):
    """Typed inline markup kept for the knowledge graph: gui, app, cmd, key, sys, file, input, output."""

    kind: str
    text: str


class Link(BaseModel):
    target_doc: str
    target_section: str = ""
    link_type: str  # guide | seealso | inline | next | external
    anchor_text: str = ""
    sentence: str = ""
    start: int | None = None  # position of the anchor text in Document.text, when it is visible
    end: int | None = None
    href: str = ""  # for external links


class Document(BaseModel):
    id: str
    title: str
    summary: str = ""
    source: str  # corpus name, e.g. gnome_help
    path: str  # path of the source file relative to the corpus root
    url: str = ""
    version: str = ""
    page_type: str = ""
    style: str = ""
    license: str = ""
    attribution: str = ""
    text: str
    sections: list[Section] = Field(default_factory=list)
    blocks: list[Block] = Field(default_factory=list)
    links: list[Link] = Field(default_factory=list)
    spans: list[InlineSpan] = Field(default_factory=list)
    content_hash: str = ""
    # Source-specific facts that are not text (commit sha and date, ticket status, crawl URL...).
    metadata: dict[str, str] = Field(default_factory=dict)
    # Near-duplicates this (canonical) document absorbed at ingest: their ids (see corpus/dedup.py).
    duplicates: list[str] = Field(default_factory=list)
    # Other ids that name this document (redirected URLs, man page symlinks): links and gold to them resolve here.
    aliases: list[str] = Field(default_factory=list)
    # Element ids a link's `#fragment` may name, beyond the section ids (HTML ids and named anchors).
    anchors: list[str] = Field(default_factory=list)


class Chunk(BaseModel):
    id: str
    doc_id: str
    start: int
    end: int
    text: str
    title: str
    heading_path: list[str]
    section: str
    n_tokens: int
    content_hash: str

    def heading(self) -> str:
        """Where the chunk sits: its page title and headings, "Title > Section > Subsection"."""
        return " > ".join([self.title, *self.heading_path])

    def index_text(self) -> str:
        """Text given to retrievers: the chunk plus its page title and headings as context."""
        return f"{self.heading()}\n{self.text}"

    def source_block(self, number: int) -> str:
        """The chunk as numbered source `number` of a prompt: the answerer, the verifier, the RAGAS
        faithfulness check and the QLoRA training examples all show sources this way, so training
        matches serving."""
        return f"[{number}] ({self.heading()})\n{self.text}"


def numbered_sources(chunks: list[Chunk]) -> str:
    """Chunks as the numbered sources [1], [2], ... of a prompt, in the order given."""
    return "\n\n".join(c.source_block(n) for n, c in enumerate(chunks, start=1))
