"""Issue-tracker and wiki exports, as JIRA's and Confluence's REST APIs return them (JSON files).

JIRA (`/rest/api/2/search` or `/3/search` pages, or a list of issues): one document per issue with
its description (wiki text or Atlassian Document Format), comments as units, and issue links
(`blocks`, `is caused by`, ...) as typed links to the other issues. Confluence
(`/rest/api/content?expand=body.storage,ancestors,version`): one document per page, its storage-format
XHTML rendered like any HTML, `<ac:link>` page links resolved by page title, code macros as code.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lxml import etree

from fixgraph.corpus.builder import BlockIndex, DocBuilder, Inline
from fixgraph.corpus.files import Problem, read_text
from fixgraph.corpus.html import HtmlError, HtmlOptions, parse_html, render_article, tag_of
from fixgraph.corpus.models import Document, Link
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult, missing_folder_message
from fixgraph.corpus.textformats import render_plain
from fixgraph.io import stable_hash

ISSUE_KEY = re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b")
CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.DOTALL)
TITLE_LINK = "confluence-title:"


class ExportFolder:
    """Common part: JSON files under `snapshot_dir`, read in place, each yielding records."""

    kind = "export"

    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        license: str = "",
        max_bytes: int = 200_000_000,
        base_url: str = "",
    ):
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.license = license
        self.max_bytes = max_bytes
        self.base_url = base_url.rstrip("/")  # links to the live tracker / wiki, when known

    def files(self) -> list[Path]:
        return sorted(self.snapshot_dir.glob("*.json"))

    def new_result(self) -> ParseResult:
        """An empty parse result recording which export files were read (checks there are some)."""
        self.check()
        return ParseResult(documents=[], source_info={"files": [p.name for p in self.files()], "version": ""})

    def check(self) -> None:
        if not self.files():
            raise MissingCorpusError(
                missing_folder_message(self.name, self.snapshot_dir, f"{self.kind} export files (*.json)", False)
            )

    def fetch(self) -> dict[str, str]:
        self.check()
        return {"origin": f"read in place from {self.snapshot_dir}"}

    def records(self, result: ParseResult, key: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(where, record) for every record under `key` of every file; bad files become problems."""
        for path in self.files():
            rel = path.name
            text = read_text(path, rel, result.problems, self.max_bytes)
            if text is None:
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                result.problems.append(Problem(rel, f"not valid JSON: {exc}", "malformed"))
                continue
            records = data.get(key) if isinstance(data, dict) else data
            if not isinstance(records, list):
                result.problems.append(Problem(rel, f"expected a list or an object with {key!r}", "malformed"))
                continue
            for i, record in enumerate(records):
                if isinstance(record, dict):
                    yield f"{rel}#{i}", record
                else:
                    result.problems.append(Problem(f"{rel}#{i}", "record is not an object", "malformed"))


def render_adf(builder: DocBuilder, node: Any, kind: str = "paragraph") -> None:
    """Atlassian Document Format (JIRA Cloud v3): paragraphs, headings, lists, code blocks."""
    if not isinstance(node, dict):
        return
    node_type = node.get("type")
    children = node.get("content") or []
    if node_type in ("paragraph", "heading", "codeBlock"):
        run = Inline(preserve_space=node_type == "codeBlock")
        for child in children:
            if child.get("type") == "text":
                run.text(child.get("text", ""))
            elif child.get("type") == "hardBreak" and node_type == "codeBlock":
                run.text("\n")
            elif child.get("type") == "hardBreak":
                run.space()
        builder.block(run, "heading" if node_type == "heading" else "code" if node_type == "codeBlock" else kind)
    elif node_type == "listItem":
        with builder.unit():
            for child in children:
                render_adf(builder, child, "item")
    else:  # doc, bulletList, orderedList, panel, blockquote, ...
        for child in children:
            render_adf(builder, child, kind)


def name_of(value: Any) -> str:
    return str(value.get("name") or value.get("displayName") or "") if isinstance(value, dict) else str(value or "")


@CORPORA.register("jira_export")
class JiraExportCorpus(ExportFolder):
    kind = "JIRA export"

    def parse(self) -> ParseResult:
        result = self.new_result()
        for where, issue in self.records(result, "issues"):
            if not isinstance(issue.get("key"), str) or not isinstance(issue.get("fields"), dict):
                result.problems.append(Problem(where, "issue without a key or fields", "malformed"))
                continue
            result.documents.append(self.document(issue, where))
        return result

    def document(self, issue: dict[str, Any], where: str) -> Document:
        key, fields = issue["key"], issue["fields"]
        builder = DocBuilder()
        summary = str(fields.get("summary") or key)
        builder.block(f"{key}: {summary}", "title")
        description = fields.get("description")
        if description:
            builder.section("Description", 2, "description")
            builder.block("Description", "heading")
            if isinstance(description, dict):
                render_adf(builder, description)
            else:
                render_plain(builder, str(description), first_line_title=False)
        comments = (fields.get("comment") or {}).get("comments") or []
        if comments:
            builder.section("Comments", 2, "comments")
            builder.block("Comments", "heading")
            for comment in comments:
                with builder.unit():  # a comment is never split from its author line
                    builder.block(f"{name_of(comment.get('author'))} wrote:", "term")
                    body = comment.get("body")
                    if isinstance(body, dict):
                        render_adf(builder, body, "item")
                    else:
                        render_plain(builder, str(body or ""), first_line_title=False)
        self.issue_links(builder, fields.get("issuelinks") or [])
        doc = builder.build(
            id=key,
            title=f"{key}: {summary}",
            source=self.name,
            path=where,
            url=f"{self.base_url}/browse/{key}" if self.base_url else "",
            page_type=name_of(fields.get("issuetype")),
            license=self.license,
            attribution=name_of(fields.get("reporter")),
            content_hash=stable_hash(issue),
            metadata={
                k: name_of(fields.get(k))
                for k in ("status", "resolution", "priority", "issuetype", "created", "updated")
                if fields.get(k)
            },
        )
        return with_mentions(doc, exclude={key})

    @staticmethod
    def issue_links(builder: DocBuilder, links: list[Any]) -> None:
        """A "Linked issues" section: one item per link, the linked key being the anchor text."""
        items = []
        for link in links:
            kind = link.get("type") or {}
            if "outwardIssue" in link:
                other, verb = link["outwardIssue"], kind.get("outward") or kind.get("name", "relates to")
            elif "inwardIssue" in link:
                other, verb = link["inwardIssue"], kind.get("inward") or kind.get("name", "relates to")
            else:
                continue
            items.append((str(verb), str(other.get("key", "")), str((other.get("fields") or {}).get("summary", ""))))
        if not items:
            return
        builder.section("Linked issues", 2, "linked-issues")
        builder.block("Linked issues", "heading")
        for verb, other_key, other_summary in items:
            run = Inline()
            run.text(f"{verb} ")
            token = run.open("link", Link(target_doc=other_key, link_type=verb.replace(" ", "_")))
            run.text(other_key)
            run.close(token)
            if other_summary:
                run.text(f": {other_summary}")
            builder.block(run, "item")


def with_mentions(doc: Document, exclude: set[str]) -> Document:
    """Issue keys written in the text become `mentions` links (not the issue itself, not typed links)."""
    index = BlockIndex(doc)
    linked = {(link.start, link.end) for link in doc.links}
    extra = [
        Link(
            target_doc=m.group(0),
            link_type="mentions",
            anchor_text=m.group(0),
            sentence=index.sentence(m.start(), m.end()),
            start=m.start(),
            end=m.end(),
        )
        for m in ISSUE_KEY.finditer(doc.text)
        if m.group(0) not in exclude and (m.start(), m.end()) not in linked
    ]
    return doc.model_copy(update={"links": [*doc.links, *extra]})


@CORPORA.register("confluence_export")
class ConfluenceExportCorpus(ExportFolder):
    kind = "Confluence export"
    OPTIONS = HtmlOptions(article=("body",), title=(), remove=(), min_section_level=1)

    def parse(self) -> ParseResult:
        result = self.new_result()
        pages = [(w, p) for w, p in self.records(result, "results") if p.get("type", "page") in ("page", "blogpost")]
        by_title = {str(p.get("title", "")): f"confluence/{p.get('id')}" for _, p in pages}
        for where, page in pages:
            storage = ((page.get("body") or {}).get("storage") or {}).get("value")
            if not page.get("id") or not isinstance(storage, str):
                result.problems.append(Problem(where, "page without an id or body.storage.value", "malformed"))
                continue
            try:
                result.documents.append(self.document(page, storage, by_title, where))
            except HtmlError as exc:
                result.problems.append(Problem(where, str(exc), "malformed"))
        return result

    def document(self, page: dict[str, Any], storage: str, by_title: dict[str, str], where: str) -> Document:
        title = str(page.get("title", ""))
        builder = DocBuilder()
        builder.block(title, "title")
        markup = CDATA.sub(lambda m: html_lib.escape(m.group(1)), storage)
        root = parse_html(f"<html><body>{markup}</body></html>", where)
        rewrite_storage_format(root)

        def resolve(href: str) -> Link | None:
            if href.startswith(TITLE_LINK):
                target_title, _, anchor = href[len(TITLE_LINK) :].partition("#")
                target = by_title.get(target_title, f"confluence-title/{target_title}")
                return Link(target_doc=target, target_section=anchor, link_type="inline")
            return Link(target_doc="", link_type="external", href=href)

        render_article(root, builder, self.OPTIONS, resolve, where)
        ancestors = [a for a in page.get("ancestors") or [] if isinstance(a, dict)]
        if ancestors:  # the parent page, as Mallard's guide links point up the hierarchy
            builder.add_link(Link(target_doc=f"confluence/{ancestors[-1].get('id')}", link_type="guide"))
        version = page.get("version") or {}
        webui = (page.get("_links") or {}).get("webui", "")
        return builder.build(
            id=f"confluence/{page['id']}",
            title=title,
            source=self.name,
            path=where,
            url=f"{self.base_url}{webui}" if self.base_url and webui else "",
            version=str(version.get("number", "")),
            page_type=str(page.get("type", "page")),
            license=self.license,
            attribution=name_of(version.get("by")),
            content_hash=stable_hash(page),
            metadata={
                "space": name_of((page.get("space") or {}).get("key")),
                "ancestors": " > ".join(str(a.get("title", "")) for a in ancestors),
            },
        )


def rewrite_storage_format(root: etree._Element) -> None:
    """Turn Confluence macros into plain HTML: page links into <a>, code macros into <pre>."""
    for elem in list(root.iter()):
        tag = tag_of(elem)
        if elem.getparent() is None:
            continue  # the root, or inside a macro already rewritten
        if tag == "ac:link":
            page = next((c for c in elem if tag_of(c) == "ri:page"), None)
            body = next((c for c in elem if tag_of(c) in ("ac:plain-text-link-body", "ac:link-body")), None)
            target = page.get("ri:content-title", "") if page is not None else ""
            text = "".join(str(t) for t in body.itertext()) if body is not None else target
            anchor = elem.get("ac:anchor", "")
            new = etree.Element("a", href=f"{TITLE_LINK}{target}" + (f"#{anchor}" if anchor else ""))
            new.text = text
            new.tail = elem.tail
            elem.getparent().replace(elem, new)  # type: ignore[union-attr]
        elif tag == "ac:structured-macro" and elem.get("ac:name") in ("code", "noformat"):
            body = next((c for c in elem if tag_of(c) == "ac:plain-text-body"), None)
            elem.tag = "pre"
            text = "".join(str(t) for t in body.itertext()) if body is not None else ""
            for child in list(elem):
                elem.remove(child)
            elem.text = text
        elif tag in ("ac:parameter", "ac:image", "ri:attachment", "ac:emoticon"):
            elem.drop_tree()  # type: ignore[attr-defined]
        elif tag.startswith("ac:"):
            elem.tag = "div"


__all__ = ["ConfluenceExportCorpus", "JiraExportCorpus"]
