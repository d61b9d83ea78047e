"""Render an HTML article into a Document: headings become nested sections, list items and table rows
stay whole, `<a href>` become links and configurable elements become typed inline spans.

Used by the support-site scraper, the local folder connector (HTML, and Markdown rendered by
markdown-it), the Confluence export and the man pages (rendered to HTML by mandoc).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import lxml.html
from lxml import etree
from lxml.cssselect import CSSSelector

from fixgraph.corpus.builder import DocBuilder, Inline
from fixgraph.corpus.models import Link

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
CONTAINERS = {
    "div",
    "section",
    "article",
    "main",
    "blockquote",
    "figure",
    "details",
    "center",
    "aside",
    "header",
    "footer",
    "nav",
    "form",
    "fieldset",
    "body",
    "html",
}
BLOCK_TAGS = {
    *HEADINGS,
    *CONTAINERS,
    "p",
    "pre",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "li",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "tr",
    "td",
    "th",
    "figcaption",
    "summary",
    "hr",
    "caption",
    "address",
}
# Elements whose text a reader never sees.
INVISIBLE = {"script", "style", "noscript", "template", "head", "title", "svg", "iframe", "button", "select"}
DEFAULT_SPANS = {"kbd": "key", "code": "code", "samp": "output", "var": "var"}

# (href) -> link or None: decides what a link points at (another document of the corpus, or external).
LinkResolver = Callable[[str], Link | None]


class HtmlError(ValueError):
    """The HTML cannot be used; the message names the input and the reason."""


@dataclass(frozen=True)
class HtmlOptions:
    # CSS selectors tried in order; the first that matches gives the article element.
    article: Sequence[str] = ("article", "main", "[role=main]", "body")
    title: Sequence[str] = ("h1", "title")
    remove: Sequence[str] = ("nav", "header", "footer", "aside", "form", ".breadcrumbs")
    # CSS selector -> inline span kind (the knowledge graph reads these).
    spans: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SPANS))
    # Heading levels below this one (e.g. the page's own h1) do not open sections.
    min_section_level: int = 2


def parse_html(data: bytes | str, where: str) -> etree._Element:
    """Parse (possibly broken) HTML; lxml repairs what it can. Raise HtmlError when nothing is left."""
    try:
        root = lxml.html.document_fromstring(data)
    except (etree.ParserError, ValueError) as exc:
        raise HtmlError(f"{where}: cannot parse HTML: {exc}") from exc
    if root is None:
        raise HtmlError(f"{where}: empty HTML document")
    return root


@lru_cache(maxsize=256)
def css(selector: str) -> CSSSelector:
    """Compiled selectors, reused across pages (compiling one costs more than applying it)."""
    return CSSSelector(selector, translator="html")


def select_all(root: etree._Element, selector: str) -> list[etree._Element]:
    found = css(selector)(root)
    return [e for e in found if isinstance(e, etree._Element)] if isinstance(found, list) else []


def select_first(root: etree._Element, selectors: Sequence[str]) -> etree._Element | None:
    for selector in selectors:
        found = select_all(root, selector)
        if found:
            return found[0]
    return None


def element_text(elem: etree._Element) -> str:
    return " ".join("".join(str(t) for t in elem.itertext()).split())


def tag_of(elem: etree._Element) -> str:
    return elem.tag.lower() if isinstance(elem.tag, str) else ""


class HtmlRenderer:
    """Walks one article element into a DocBuilder."""

    def __init__(self, builder: DocBuilder, options: HtmlOptions, resolve: LinkResolver) -> None:
        self.builder = builder
        self.options = options
        self.resolve = resolve
        self.span_of: dict[etree._Element, str] = {}

    def render(self, article: etree._Element, skip: etree._Element | None = None) -> None:
        for selector in self.options.remove:
            for elem in select_all(article, selector):
                if elem is not article:
                    elem.drop_tree()  # type: ignore[attr-defined]
        for selector, kind in self.options.spans.items():
            for elem in select_all(article, selector):
                self.span_of.setdefault(elem, kind)
        self.skip = skip
        self.flow(article, "paragraph")

    # --- blocks -------------------------------------------------------------------------------
    def flow(self, elem: etree._Element, kind: str) -> None:
        """Mixed content: runs of inline content become blocks; block children are handled in turn."""
        run = Inline()
        run.text(elem.text)
        for child in elem:
            tag = tag_of(child)
            if child is self.skip or tag in INVISIBLE:
                pass
            elif tag in BLOCK_TAGS:
                self.builder.block(run, kind)
                run = Inline()
                self.block_element(child, kind)
            elif tag:
                self.inline(child, run)
            run.text(child.tail)
        self.builder.block(run, kind)

    def block_element(self, elem: etree._Element, kind: str) -> None:
        tag = tag_of(elem)
        if tag in HEADINGS:
            self.heading(elem, HEADINGS[tag])
        elif tag == "pre":
            self.preformatted(elem)
        elif tag in ("ul", "ol"):
            item_kind = "step" if tag == "ol" else "item"
            for child in elem:
                if tag_of(child) == "li":
                    with self.builder.unit():
                        self.flow(child, item_kind)
                elif tag_of(child) in BLOCK_TAGS:
                    self.block_element(child, kind)
        elif tag == "dl":
            self.definitions(elem)
        elif tag == "table":
            self.table(elem)
        elif tag == "hr":
            return
        elif tag in ("p", "figcaption", "summary", "caption", "address", "li", "dt", "dd", "td", "th"):
            self.flow(elem, "caption" if tag in ("figcaption", "caption") else kind)
        else:  # containers
            self.flow(elem, kind)

    def heading(self, elem: etree._Element, level: int) -> None:
        run = Inline()
        self.inline_content(elem, run)
        title, _ = run.render()
        if level >= self.options.min_section_level and title:
            self.builder.section(title, level, elem.get("id", ""))
        self.builder.block(run, "heading")

    def preformatted(self, elem: etree._Element) -> None:
        run = Inline(preserve_space=True)
        self.inline_content(elem, run)
        self.builder.block(run, "code")

    def definitions(self, elem: etree._Element) -> None:
        """`<dt>` starts a unit that its `<dd>`s join: a term is never separated from its definition."""
        group: list[etree._Element] = []
        groups: list[list[etree._Element]] = []
        for child in elem:
            tag = tag_of(child)
            if tag == "dt" and group and tag_of(group[-1]) == "dd":
                groups.append(group)
                group = []
            if tag in ("dt", "dd"):
                group.append(child)
            elif tag == "div":  # HTML allows <div> wrappers around dt/dd groups
                if group:
                    groups.append(group)
                group = [c for c in child if tag_of(c) in ("dt", "dd")]
        if group:
            groups.append(group)
        for members in groups:
            with self.builder.unit():
                for member in members:
                    self.flow(member, "term" if tag_of(member) == "dt" else "item")

    def table(self, elem: etree._Element) -> None:
        for row in elem.iter("tr"):
            with self.builder.unit():
                for cell in row:
                    if tag_of(cell) in ("td", "th"):
                        self.flow(cell, "cell")

    # --- inline -------------------------------------------------------------------------------
    def inline_content(self, elem: etree._Element, run: Inline) -> None:
        run.text(elem.text)
        for child in elem:
            if tag_of(child) and tag_of(child) not in INVISIBLE:
                self.inline(child, run)
            run.text(child.tail)

    def inline(self, elem: etree._Element, run: Inline) -> None:
        tag = tag_of(elem)
        if tag == "br":
            if run.preserve_space:
                if not (elem.tail or "").startswith("\n"):  # mandoc writes "<br/>\n": one line break
                    run.text("\n")
            else:
                run.space()
            return
        if tag == "img":
            return  # alt text is not shown to a reader
        href = elem.get("href") if tag == "a" else None
        link = self.resolve(href) if href and not href.startswith(("javascript:", "mailto:")) else None
        token = run.open("link", link) if link is not None else None
        kind = self.span_of.get(elem)
        span = run.open(kind) if kind else None
        if tag in BLOCK_TAGS:  # block element inside inline content: keep its text, as a browser does
            run.space()
        self.inline_content(elem, run)
        if span is not None:
            run.close(span)
        if token is not None:
            run.close(token)


def render_article(
    root: etree._Element,
    builder: DocBuilder,
    options: HtmlOptions,
    resolve: LinkResolver,
    where: str,
) -> str:
    """Render the article of `root` into `builder` (title block first); returns the title."""
    article = select_first(root, options.article)
    if article is None:
        raise HtmlError(f"{where}: no article body (none of the selectors {list(options.article)} matches)")
    title_elem = select_first(article, options.title)
    if title_elem is None:
        title_elem = select_first(root, options.title)
    title = element_text(title_elem) if title_elem is not None else ""
    if title:
        builder.block(title, "title")
    renderer = HtmlRenderer(builder, options, resolve)
    skip = title_elem if title_elem is not None and _is_inside(title_elem, article) else None
    renderer.render(article, skip=skip)
    return title


def _is_inside(elem: etree._Element, ancestor: etree._Element) -> bool:
    return any(a is ancestor for a in elem.iterancestors())
