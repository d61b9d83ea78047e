"""A local folder of Markdown, HTML or plain-text files, read in place.

Document ids are file paths relative to the folder without their extension (`guides/wifi`), so a
relative link between two files (`../wifi.md#reset`) resolves to the target document and section.
Files of other types are listed in the problem report as ignored, never dropped silently.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from fixgraph.corpus.builder import DocBuilder
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem, read_text
from fixgraph.corpus.html import HtmlError, HtmlOptions, parse_html, render_article
from fixgraph.corpus.models import Document, Link
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult, missing_folder_message
from fixgraph.corpus.textformats import BODY_OPTIONS, render_markup, render_plain, split_front_matter
from fixgraph.io import sha256_file

FORMAT_OF = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".txt": "plain"}
UNSAFE_ID = re.compile(r"[\s#]+")


def doc_id_for(rel: str) -> str:
    """`guides/Wi-Fi trouble.md` -> `guides/Wi-Fi_trouble`: no whitespace or '#', which chunk ids use."""
    stem = posixpath.splitext(rel)[0]
    return UNSAFE_ID.sub("_", stem)


def html_options(cfg: Mapping[str, Any] | None) -> HtmlOptions:
    if not cfg:
        return HtmlOptions(title=("h1", "title"), min_section_level=1)
    return HtmlOptions(
        article=tuple(cfg.get("article", HtmlOptions.article)),
        title=tuple(cfg.get("title", ("h1", "title"))),
        remove=tuple(cfg.get("remove", HtmlOptions.remove)),
        spans=dict(cfg.get("spans", HtmlOptions().spans)),
        min_section_level=int(cfg.get("min_section_level", 1)),
    )


def relative_link_resolver(rel: str, base_url: str = "") -> Any:
    """Links between files of the folder become links to documents; anything else is external."""
    here = posixpath.dirname(rel)

    def resolve(href: str) -> Link | None:
        if base_url and href.startswith(base_url):
            href = "/" + href[len(base_url) :].lstrip("/")
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            return Link(target_doc="", link_type="external", href=href)
        if not parts.path:  # "#section" inside the same file
            return Link(target_doc=doc_id_for(rel), target_section=parts.fragment, link_type="inline")
        path = unquote(parts.path)
        target = posixpath.normpath(path.lstrip("/") if path.startswith("/") else posixpath.join(here, path))
        if posixpath.splitext(target)[1].lower() not in FORMAT_OF:
            return Link(target_doc="", link_type="external", href=href)  # an image, a PDF...
        return Link(target_doc=doc_id_for(target), target_section=parts.fragment, link_type="inline")

    return resolve


@CORPORA.register("folder")
class FolderCorpus:
    """Markdown (.md), HTML (.html) and text (.txt) files under `snapshot_dir`, recursively."""

    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        extensions: Sequence[str] = tuple(FORMAT_OF),
        html: Mapping[str, Any] | None = None,
        base_url: str = "",
        license: str = "",
        version: str = "",
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.extensions = {e.lower() for e in extensions}
        self.html = html_options(html)
        self.base_url = base_url
        self.license = license
        self.version = version
        self.max_bytes = max_bytes

    def check(self) -> None:
        if not self.snapshot_dir.is_dir():
            raise MissingCorpusError(missing_folder_message(self.name, self.snapshot_dir, "documents", False))

    def fetch(self) -> dict[str, str]:
        self.check()
        return {"origin": f"read in place from {self.snapshot_dir}"}

    def parse(self) -> ParseResult:
        self.check()
        result = ParseResult(documents=[], source_info={"folder": str(self.snapshot_dir), "version": self.version})
        seen: dict[str, str] = {}
        for path in sorted(p for p in self.snapshot_dir.rglob("*") if p.is_file()):
            rel = path.relative_to(self.snapshot_dir).as_posix()
            suffix = path.suffix.lower()
            if any(part.startswith(".") for part in Path(rel).parts):
                result.problems.append(Problem(rel, "hidden file", "hidden", "ignored"))
                continue
            if suffix not in self.extensions or suffix not in FORMAT_OF:
                reason = f"unsupported file type {suffix or '(none)'}"
                result.problems.append(Problem(rel, reason, "unsupported", "ignored"))
                continue
            doc = self.document(path, rel, FORMAT_OF[suffix], result.problems)
            if doc is None:
                continue
            if doc.id in seen:
                result.problems.append(Problem(rel, f"duplicate id {doc.id!r} (also {seen[doc.id]})", "duplicate_id"))
                continue
            seen[doc.id] = rel
            result.documents.append(doc)
        return result

    def document(self, path: Path, rel: str, text_format: str, problems: list[Problem]) -> Document | None:
        text = read_text(path, rel, problems, self.max_bytes)
        if text is None:
            return None
        builder = DocBuilder()
        resolve = relative_link_resolver(rel, self.base_url)
        fields: dict[str, Any] = {}
        try:
            if text_format == "html":
                title = render_article(parse_html(text, rel), builder, self.html, resolve, rel)
            elif text_format == "markdown":
                fields, body, error = split_front_matter(text, rel)
                if error:
                    problems.append(Problem(rel, error, "malformed", "warning"))
                given = str(fields.get("title", ""))
                title = render_markup(builder, body, "markdown", rel, resolve, given, BODY_OPTIONS)
            else:
                title = render_plain(builder, text)
        except HtmlError as exc:
            problems.append(Problem(rel, str(exc), "malformed"))
            return None
        if not builder.blocks:
            problems.append(Problem(rel, "renders to no text", "empty"))
            return None
        return builder.build(
            id=doc_id_for(rel),
            title=title or path.stem,
            summary=str(fields.get("description", "")),
            source=self.name,
            path=rel,
            url=f"{self.base_url.rstrip('/')}/{rel}" if self.base_url else "",
            version=self.version,
            page_type=text_format,
            license=str(fields.get("license", self.license)),
            attribution=str(fields.get("author", "")),
            content_hash=sha256_file(path),
        )
