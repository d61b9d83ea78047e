"""Parse Mallard help pages (GNOME Help, Evolution help, any Mallard folder) into Documents.

Rendering follows what Yelp shows a reader: `<comment>` is dropped, one branch of each platform
conditional is kept, `<keyseq>` keys are joined by "+" and `<guiseq>` items by " ▸ ". Inline UI
markup (`<gui>`, `<app>`, `<cmd>`, `<key>`, `<sys>`, ...) is kept as typed spans because the
knowledge graph is built from it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from fixgraph.corpus.blocks import BlockStream
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem
from fixgraph.corpus.models import Document, InlineSpan, Link, Section
from fixgraph.corpus.xinclude import expand, safe_parser
from fixgraph.io import sha256_bytes

MAL = "http://projectmallard.org/1.0/"
IF = "http://projectmallard.org/if/1.0/"

INLINE_SPAN_KINDS = {"gui", "app", "cmd", "key", "sys", "file", "input", "output", "code", "var"}
# Elements whose content is a sequence of blocks.
CONTAINERS = {"note", "example", "div", "quote", "listing", "synopsis", "figure", "item", "td", "th"}
LISTS = {"list": "item", "steps": "step", "terms": "item", "tree": "item"}
SKIPPED = {"info", "comment", "links", "media", "title", "subtitle", "desc"}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9“\"(])")


class MallardError(ValueError):
    """A page that cannot be parsed; the message names the file and the problem."""


@dataclass(frozen=True)
class MallardOptions:
    # Tokens of `if:test` expressions known to be false / true on the platform we render for.
    false_tokens: frozenset[str] = frozenset({"platform:gnome-classic", "target:mobile"})
    true_tokens: frozenset[str] = frozenset({"platform:gnome", "target:html"})
    # What an empty `<link xref>` displays: the target page's title (as Yelp does) or nothing.
    empty_link_text: str = "title"


def local(elem: etree._Element) -> str:
    tag = elem.tag
    return tag.split("}", 1)[1] if isinstance(tag, str) and "}" in tag else str(tag)


def ns(elem: etree._Element) -> str:
    tag = elem.tag
    return tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""


def split_xref(xref: str, current_page: str) -> tuple[str, str]:
    page, _, section = xref.partition("#")
    return (page or current_page), section


class TextBuilder:
    """Accumulates inline text with whitespace collapsed, tracking where typed spans start and end."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.length = 0
        self.pending_space = False

    def add(self, text: str | None) -> None:
        if not text:
            return
        for char in text:
            if char.isspace():
                if self.length:
                    self.pending_space = True
                continue
            if self.pending_space:
                self.out.append(" ")
                self.length += 1
                self.pending_space = False
            self.out.append(char)
            self.length += 1

    def add_literal(self, text: str) -> None:
        """Add a separator (+, ▸) exactly, dropping any whitespace pending before it."""
        self.pending_space = False
        self.out.append(text)
        self.length += len(text)

    def next_position(self) -> int:
        return self.length + (1 if self.pending_space else 0)

    def text(self) -> str:
        return "".join(self.out)


@dataclass
class _Pending:
    kind: str
    start: int
    end: int
    text: str = ""
    link: Link | None = None


@dataclass
class _Page(BlockStream):
    """Mutable state while one page is rendered (the blocks of one list item share a unit)."""

    page_id: str
    titles: dict[str, str]
    options: MallardOptions
    sections: list[Section] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    spans: list[InlineSpan] = field(default_factory=list)


def condition_holds(expr: str | None, options: MallardOptions) -> bool:
    """Mallard conditional: comma-separated alternatives (OR) of space-separated terms (AND).

    Only tokens the options know are evaluated; a term over an unknown token (platform:ubuntu,
    action:install) holds whether negated or not, so content for platforms we know nothing about is
    kept rather than silently lost.
    """
    if expr is None:
        return True
    for alternative in expr.split(","):
        terms = alternative.split()
        if all(_term_holds(term, options) for term in terms):
            return True
    return False


def _term_holds(term: str, options: MallardOptions) -> bool:
    negated = term.startswith("!")
    token = term.lstrip("!")
    if token in options.false_tokens:
        return negated
    if token in options.true_tokens:
        return not negated
    return True


def selected_children(elem: etree._Element, options: MallardOptions) -> Iterable[etree._Element]:
    """Children of `elem` with conditionals resolved: `if:choose` yields its chosen branch's children."""
    for child in elem:
        if not isinstance(child.tag, str):
            continue  # XML comments and processing instructions
        if not condition_holds(child.get(f"{{{IF}}}test"), options):
            continue
        if ns(child) == IF:
            name = local(child)
            if name == "choose":
                for branch in child:
                    if not isinstance(branch.tag, str):
                        continue
                    if local(branch) == "when" and condition_holds(branch.get("test"), options):
                        yield from selected_children(branch, options)
                        break
                    if local(branch) == "else":
                        yield from selected_children(branch, options)
                        break
            elif name == "if" and condition_holds(child.get("test"), options):
                yield from selected_children(child, options)
            continue
        yield child


class InlineRenderer:
    """Renders the inline content of one block into text, typed spans and links."""

    def __init__(self, page: _Page) -> None:
        self.page = page
        self.builder = TextBuilder()
        self.pending: list[_Pending] = []

    def render(self, elem: etree._Element) -> tuple[str, list[_Pending]]:
        self._content(elem)
        text = self.builder.text()
        for item in self.pending:  # spans may end in a collapsed trailing space
            item.end = min(item.end, len(text))
            item.start = min(item.start, item.end)
            item.text = text[item.start : item.end]
        return text, self.pending

    def _content(self, elem: etree._Element) -> None:
        self.builder.add(elem.text)
        for child in elem:
            if isinstance(child.tag, str) and condition_holds(child.get(f"{{{IF}}}test"), self.page.options):
                if ns(child) == IF:
                    self._conditional(child)
                else:
                    self._element(child)
            self.builder.add(child.tail)  # tails of comments and dropped branches still carry text

    def _conditional(self, elem: etree._Element) -> None:
        if local(elem) == "if" and condition_holds(elem.get("test"), self.page.options):
            self._content(elem)
        elif local(elem) == "choose":
            for branch in elem:
                if not isinstance(branch.tag, str):
                    continue
                if local(branch) == "else" or (
                    local(branch) == "when" and condition_holds(branch.get("test"), self.page.options)
                ):
                    self._content(branch)
                    return

    def _element(self, elem: etree._Element) -> None:
        name = local(elem)
        if name == "comment":
            return
        start = self.builder.next_position()
        if name == "keyseq":
            self._joined(elem, "+")
        elif name == "guiseq":
            self._joined(elem, " ▸ ")
        elif name == "link" and not (elem.text or len(elem)):
            self._empty_link(elem)
        else:
            self._content(elem)
        end = self.builder.length
        if name in INLINE_SPAN_KINDS:
            self.pending.append(_Pending(kind=name, start=start, end=end))
        xref, href = elem.get("xref"), elem.get("href")
        if name == "link" or xref:
            self.pending.append(_Pending(kind="link", start=start, end=end, link=self._link(xref, href)))

    def _joined(self, elem: etree._Element, separator: str) -> None:
        parts = [c for c in selected_children(elem, self.page.options) if local(c) != "comment"]
        if not parts:  # e.g. <keyseq>Ctrl+Tab</keyseq> written as plain text
            self._content(elem)
            return
        for i, part in enumerate(parts):
            if i:
                self.builder.add_literal(separator)
            self._element(part)

    def _empty_link(self, elem: etree._Element) -> None:
        if self.page.options.empty_link_text != "title":
            return
        xref = elem.get("xref")
        if xref:
            target, _ = split_xref(xref, self.page.page_id)
            self.builder.add(self.page.titles.get(target, ""))
        elif elem.get("href"):
            self.builder.add(elem.get("href"))

    def _link(self, xref: str | None, href: str | None) -> Link:
        if xref:
            target, section = split_xref(xref, self.page.page_id)
            return Link(target_doc=target, target_section=section, link_type="inline")
        return Link(target_doc="", link_type="external", href=href or "")


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence of `text` that contains [start, end)."""
    bounds = [0] + [m.end() for m in SENTENCE_END.finditer(text)] + [len(text) + 1]
    for lo, hi in itertools.pairwise(bounds):
        if lo <= start < hi:
            return text[lo:hi].strip()
    return text.strip()


class PageRenderer:
    def __init__(self, page: _Page) -> None:
        self.page = page

    def block(self, elem: etree._Element, kind: str, section: str) -> None:
        text, pending = InlineRenderer(self.page).render(elem)
        start = self.page.emit(text, kind, section)
        if start is None:
            return
        for item in pending:
            if item.link is not None:
                link = item.link.model_copy(
                    update={
                        "anchor_text": item.text,
                        "sentence": sentence_around(text, item.start, item.end),
                        "start": start + item.start,
                        "end": start + item.end,
                    }
                )
                self.page.links.append(link)
            else:
                self.page.spans.append(
                    InlineSpan(kind=item.kind, text=item.text, start=start + item.start, end=start + item.end)
                )

    def blocks(self, elem: etree._Element, section: str, kind: str = "paragraph") -> None:
        for child in selected_children(elem, self.page.options):
            name = local(child)
            if ns(child) not in (MAL, "") or name in SKIPPED:
                continue
            if name == "section":
                self.section(child, section)
            elif name == "p" or name == "code" or name == "screen":
                self.block(child, kind if name == "p" else "code", section)
            elif name in LISTS:
                self.list(child, section, LISTS[name])
            elif name == "table":
                self.table(child, section)
            elif name in CONTAINERS:
                self.container(child, section, kind)
            else:  # unknown block element: keep its text rather than lose it
                self.block(child, kind, section)

    def container(self, elem: etree._Element, section: str, kind: str) -> None:
        title = elem.find(f"{{{MAL}}}title")
        if title is not None:
            self.block(title, "heading" if local(elem) == "figure" else kind, section)
        self.blocks(elem, section, kind)

    def list(self, elem: etree._Element, section: str, item_kind: str) -> None:
        title = elem.find(f"{{{MAL}}}title")
        if title is not None:
            self.block(title, "heading", section)
        for item in selected_children(elem, self.page.options):
            if local(item) != "item":
                continue
            with self.page.unit():
                term = item.find(f"{{{MAL}}}title")
                if term is not None:
                    self.block(term, "term", section)
                if item.text and item.text.strip():  # an item with bare inline text
                    self.block(item, item_kind, section)
                else:
                    self.blocks(item, section, item_kind)

    def table(self, elem: etree._Element, section: str) -> None:
        for row in elem.iter(f"{{{MAL}}}tr"):
            with self.page.unit():  # the cells of a row stay together
                for cell in row.iter(f"{{{MAL}}}td", f"{{{MAL}}}th"):
                    if cell.text and cell.text.strip():
                        self.block(cell, "cell", section)
                    else:
                        self.blocks(cell, section, "cell")

    def section(self, elem: etree._Element, parent: str) -> None:
        section_id = elem.get("id") or f"{parent}.{len(self.page.sections)}"
        title_elem = elem.find(f"{{{MAL}}}title")
        start = self.page.length + (1 if self.page.parts else 0)
        parent_path = next((s.heading_path for s in self.page.sections if s.id == parent), [])
        title = InlineRenderer(self.page).render(title_elem)[0] if title_elem is not None else ""
        record = Section(id=section_id, title=title, heading_path=[*parent_path, title], start=start, end=start)
        self.page.sections.append(record)
        if title_elem is not None:
            self.block(title_elem, "heading", section_id)
        self.blocks(elem, section_id)
        record.end = self.page.length


def element_text(elem: etree._Element) -> str:
    """All text under `elem`, whitespace collapsed (for titles and names, not for rendering blocks)."""
    return " ".join("".join(str(t) for t in elem.itertext()).split())


def page_title(root: etree._Element) -> str:
    title = root.find(f"{{{MAL}}}title")
    if title is None:
        return ""
    return element_text(title)


def read_page(
    path: Path, root_dir: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES, problems: list[Problem] | None = None
) -> etree._Element:
    """Parse one page, expanding XInclude inside `root_dir` only (xinclude.py); raise MallardError naming
    the file when it is not a Mallard page. Refused or failed includes are appended to `problems`."""
    try:
        tree = etree.parse(str(path), safe_parser())
    except (etree.XMLSyntaxError, OSError) as exc:
        raise MallardError(f"{path}: not well-formed XML: {exc}") from exc
    expand(
        tree, path, root_dir if root_dir is not None else path.parent, max_bytes, [] if problems is None else problems
    )
    root = tree.getroot()
    if local(root) != "page" or ns(root) != MAL:
        raise MallardError(f"{path}: root element is <{local(root)}>, not a Mallard <page>")
    if not root.get("id"):
        raise MallardError(f"{path}: <page> has no id attribute")
    return root


def parse_page(
    path: Path,
    root_dir: Path,
    source: str,
    titles: dict[str, str],
    options: MallardOptions,
    version: str = "",
    problems: list[Problem] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Document:
    root = read_page(path, root_dir, max_bytes, problems)
    page_id = root.get("id", "")
    page = _Page(page_id=page_id, titles=titles, options=options)
    renderer = PageRenderer(page)
    title_elem = root.find(f"{{{MAL}}}title")
    if title_elem is not None:
        renderer.block(title_elem, "title", "")
    info = root.find(f"{{{MAL}}}info")
    summary = ""
    license_href, authors = "", []
    if info is not None:
        desc = info.find(f"{{{MAL}}}desc")
        if desc is not None:
            renderer.block(desc, "summary", "")
            summary = page.parts[-1] if page.blocks and page.blocks[-1].kind == "summary" else ""
        license_elem = info.find(f".//{{{MAL}}}license")
        license_href = license_elem.get("href", "") if license_elem is not None else ""
        authors = [element_text(name) for name in info.iterfind(f"{{{MAL}}}credit/{{{MAL}}}name")]
        for link in info.iterfind(f"{{{MAL}}}link"):
            xref = link.get("xref")
            if xref:
                target, section = split_xref(xref, page_id)
                page.links.append(Link(target_doc=target, target_section=section, link_type=link.get("type", "guide")))
    renderer.blocks(root, "")
    raw = path.read_bytes()
    return Document(
        id=page_id,
        title=page_title(root),
        summary=summary,
        source=source,
        path=path.relative_to(root_dir).as_posix(),
        version=version,
        page_type=root.get("type", ""),
        style=root.get("style", ""),
        license=license_href,
        attribution=", ".join(dict.fromkeys(authors)),
        text="".join(page.parts),
        sections=page.sections,
        blocks=page.blocks,
        links=page.links,
        spans=page.spans,
        content_hash=sha256_bytes(raw),
    )


def collect_titles(paths: Iterable[Path], root_dir: Path | None = None) -> dict[str, str]:
    """First pass: page id -> title, so empty links can display their target's title."""
    titles: dict[str, str] = {}
    for path in paths:
        try:
            root = read_page(path, root_dir)
        except MallardError:
            continue  # reported by the second pass
        titles[root.get("id", "")] = page_title(root)
    return titles
