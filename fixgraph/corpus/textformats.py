"""Plain text, Markdown and HTML bodies rendered into a DocBuilder the same way for every connector.

Markdown goes through markdown-it-py (CommonMark + tables) to HTML and then through the HTML renderer,
so headings, lists and links mean the same thing whichever format a team's documents are in.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from markdown_it import MarkdownIt

from fixgraph.corpus.builder import DocBuilder
from fixgraph.corpus.html import HtmlOptions, LinkResolver, parse_html, render_article

FORMATS = ("plain", "markdown", "html")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.DOTALL)
BODY_OPTIONS = HtmlOptions(article=("body",), title=("h1",), remove=(), min_section_level=1)


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def no_links(_href: str) -> None:
    return None


def render_plain(builder: DocBuilder, text: str, title: str = "", first_line_title: bool = True) -> str:
    """Paragraphs separated by blank lines; the title (given, else the first line) opens the text."""
    paragraphs = [p.strip() for p in PARAGRAPH_BREAK.split(text.strip()) if p.strip()]
    if not title and paragraphs and first_line_title:
        first, _, rest = paragraphs[0].partition("\n")
        if len(first) <= 150:  # a short first line reads as a title; a long one is body text
            title = first.strip()
            paragraphs[0] = rest.strip()
    if title:
        builder.block(title, "title")
    for paragraph in paragraphs:
        builder.block(paragraph, "paragraph")
    return title


def render_markup(
    builder: DocBuilder,
    text: str,
    text_format: str,
    where: str,
    resolve: LinkResolver = no_links,
    title: str = "",
    options: HtmlOptions = BODY_OPTIONS,
) -> str:
    """Render `text` given in `text_format` (plain | markdown | html); returns the title used."""
    if text_format == "plain":
        return render_plain(builder, text, title)
    if text_format not in FORMATS:
        raise ValueError(f"{where}: unknown text format {text_format!r}; use one of {', '.join(FORMATS)}")
    html = markdown().render(text) if text_format == "markdown" else text
    if title:
        builder.block(title, "title")
        options = HtmlOptions(
            article=options.article, title=(), remove=options.remove, spans=options.spans, min_section_level=1
        )
    found = render_article(parse_html(f"<html><body>{html}</body></html>", where), builder, options, resolve, where)
    return title or found


def split_front_matter(text: str, where: str) -> tuple[dict[str, Any], str, str]:
    """YAML front matter of a Markdown file: (fields, body, error message or "")."""
    match = FRONT_MATTER.match(text)
    if match is None:
        return {}, text, ""
    body = text[match.end() :]
    try:
        fields = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        return {}, body, f"{where}: front matter is not valid YAML: {str(exc).splitlines()[0]}"
    return (fields if isinstance(fields, dict) else {}), body, ""
