"""Linux man pages (Debian `manpages`, `manpages-dev`), rendered by mandoc and read as Documents.

Each page is rendered to HTML by mandoc (a real roff implementation); sections (NAME, SYNOPSIS,
DESCRIPTION, ERRORS, EXIT STATUS, SEE ALSO, ...) and subsections become Document sections, tagged
lists (flags, errno entries) become term + definition units that chunking never splits, and every
cross reference `name(n)` (SEE ALSO and inline) becomes a link to document `name.n`. Alias pages
(symlinks and `.so` stubs in the package) are not documents: links through them resolve to the page
they alias.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fixgraph.corpus.builder import BlockIndex, DocBuilder
from fixgraph.corpus.debian import DebianSource, FetchError, download_deb
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem, size_problem
from fixgraph.corpus.html import HtmlError, HtmlOptions, parse_html, render_article
from fixgraph.corpus.mandoc import ensure_mandoc, render_html
from fixgraph.corpus.models import Document, InlineSpan, Link
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult
from fixgraph.io import atomic_dir, read_json, sha256_file, write_json

HTML_OPTIONS = HtmlOptions(
    article=("div.manual-text",),
    title=(),
    remove=(),
    spans={"b": "bold", "i": "var", "a.Xr": "manref"},
    min_section_level=1,  # mandoc renders .SH as <h1>, .SS as <h2>
)
PAGE_NAME = re.compile(r"^(?P<name>.+)\.(?P<section>[1-9][a-z]*)(?:\.gz)?$")
REFERENCE = re.compile(r"^\((?P<section>[1-9][a-z]*)\)")  # what follows a bold name in rendered text
XR_TEXT = re.compile(r"^(?P<name>[^()\s]+)\((?P<section>[1-9][a-z]*)\)$")
ERRNO = re.compile(r"^E[A-Z0-9]{2,}$")
CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*_[A-Z0-9_]+$|^SIG[A-Z0-9]+$")
SPDX = re.compile(rb"SPDX-License-Identifier:\s*(\S+)")
COPYRIGHT = re.compile(rb"Copyright \(c\)\s*(.+)", re.IGNORECASE)


def page_id(path: Path) -> str:
    return path.name.removesuffix(".gz")


def read_source(path: Path) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
    return gzip.decompress(path.read_bytes()) if head == b"\x1f\x8b" else path.read_bytes()


def so_target(source: bytes) -> str | None:
    """For a stub page whose only request is `.so manN/page.N`, the page it includes (an alias)."""
    lines = [ln.strip() for ln in source.splitlines() if ln.strip() and not ln.startswith((b'.\\"', b"'\\\""))]
    if len(lines) == 1 and lines[0].startswith(b".so "):
        return Path(lines[0][4:].decode("utf-8", "replace").strip()).name
    return None


def license_and_attribution(source: bytes) -> tuple[str, str]:
    """SPDX identifier and copyright holders, from the page's roff comment header (mandoc drops comments)."""
    spdx = SPDX.search(source)
    holders = [m.group(1).decode("utf-8", "replace").strip().rstrip(";") for m in COPYRIGHT.finditer(source[:4000])]
    return (spdx.group(1).decode() if spdx else ""), "; ".join(dict.fromkeys(holders))


@CORPORA.register("manpages")
class ManPageCorpus:
    """Man pages under `snapshot_dir/manN/`, fetched from Debian packages and rendered by mandoc."""

    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        packages: Sequence[str] = ("manpages", "manpages-dev"),
        version: str = "",
        man_path: str = "usr/share/man",
        license: str = "",
        url_template: str = "",
        mandoc: str = "",
        tools_dir: str = "",
        max_bytes: int = DEFAULT_MAX_BYTES,
        workers: int = 0,
    ) -> None:
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.packages = list(packages)
        self.version = version
        self.man_path = man_path
        self.license = license
        self.url_template = url_template
        self.mandoc = mandoc
        self.tools_dir = Path(tools_dir) if tools_dir else None
        self.max_bytes = max_bytes
        self.workers = workers or min(4, os.cpu_count() or 1)

    # --- snapshot -----------------------------------------------------------------------------
    def is_fetched(self) -> bool:
        return (self.snapshot_dir / "SOURCE.json").exists() and any(self.snapshot_dir.glob("man*/*"))

    def check(self) -> None:
        if not self.is_fetched():
            raise MissingCorpusError(
                f"corpus {self.name!r}: no man pages in {self.snapshot_dir}. "
                f"Fetch them with: fixgraph fetch corpus={self.name}"
            )

    def fetch(self) -> dict[str, Any]:
        ensure_mandoc(self.mandoc, self.tools_dir)  # fail now, not at ingest, if it cannot be had
        if self.is_fetched():
            return {**read_json(self.snapshot_dir / "SOURCE.json"), "origin": "already present"}
        versions: dict[str, str] = {}
        aliases: dict[str, str] = {}
        with tempfile.TemporaryDirectory(prefix="fixgraph-man-") as tmpdir, atomic_dir(self.snapshot_dir) as out:
            for package in self.packages:
                deb = download_deb(DebianSource(package, self.version, self.man_path), Path(tmpdir))
                root = Path(tmpdir) / package
                done = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True)
                if done.returncode != 0:
                    raise FetchError(f"dpkg-deb -x {deb.name} failed: {done.stderr.strip()}")
                versions[package] = subprocess.run(
                    ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
                ).stdout.strip()
                aliases.update(self._copy_pages(root / self.man_path, out))
            info: dict[str, Any] = {
                "packages": versions,
                "package": ",".join(versions),
                "version": ",".join(sorted(set(versions.values()))),
                "license": self.license,
            }
            write_json(out / "aliases.json", dict(sorted(aliases.items())))
            write_json(out / "SOURCE.json", info)
        return {**info, "origin": "apt-get download"}

    @staticmethod
    def _copy_pages(man_root: Path, out: Path) -> dict[str, str]:
        """Copy `manN/*` regular files; symlinked pages become aliases (alias id -> target id)."""
        aliases: dict[str, str] = {}
        for path in sorted(man_root.glob("man[1-9]/*")):
            rel = path.relative_to(man_root)
            if path.is_symlink():
                aliases[page_id(path)] = page_id(Path(os.readlink(path)))
            elif path.is_file():
                (out / rel.parent).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out / rel)
        return aliases

    # --- parsing ------------------------------------------------------------------------------
    def parse(self) -> ParseResult:
        self.check()
        mandoc = ensure_mandoc(self.mandoc, self.tools_dir)
        info = dict(read_json(self.snapshot_dir / "SOURCE.json"))
        result = ParseResult(documents=[], source_info=info)
        result.resources["SOURCE.json"] = "snapshot provenance"
        alias_file = self.snapshot_dir / "aliases.json"
        if alias_file.exists():
            result.aliases.update(read_json(alias_file))
            result.resources["aliases.json"] = "alias pages (symlinks in the package)"
        pages: list[Path] = []
        for path in sorted(self.snapshot_dir.glob("man*/*")):
            rel = path.relative_to(self.snapshot_dir).as_posix()
            if not PAGE_NAME.match(path.name):
                result.problems.append(Problem(rel, "not a man page file name (name.N[.gz])", "unsupported", "ignored"))
                continue
            problem = size_problem(path, rel, self.max_bytes)
            if problem is not None:
                result.problems.append(problem)
                continue
            pages.append(path)
        sources = {path: read_source(path) for path in pages}
        for path in list(pages):
            target = so_target(sources[path])
            if target is not None:
                result.aliases[page_id(path)] = page_id(Path(target))
                result.resources[path.relative_to(self.snapshot_dir).as_posix()] = f"alias of {target} (.so)"
                pages.remove(path)
        with ThreadPoolExecutor(self.workers) as pool:  # mandoc runs in subprocesses: threads suffice
            rendered = list(pool.map(lambda p: render_html(mandoc, p, self.snapshot_dir), pages))
        for path, page in zip(pages, rendered, strict=True):
            rel = path.relative_to(self.snapshot_dir).as_posix()
            if page.status >= 5 or not page.html.strip():
                reason = "; ".join(page.messages[:3]) or f"mandoc exit status {page.status}"
                result.problems.append(Problem(rel, f"mandoc cannot render it: {reason}", "malformed"))
                continue
            try:
                sources[path].decode("utf-8")
            except UnicodeDecodeError as exc:  # mandoc reads such pages as ISO-8859-1: say so
                reason = f"not UTF-8 ({exc.reason} at byte {exc.start}); mandoc read it as ISO-8859-1"
                result.problems.append(Problem(rel, reason, "encoding", "warning"))
            if page.messages:  # one warning per page: the page is kept, these parts may be incomplete
                shown = "; ".join(page.messages[:3]) + (
                    f" (+{len(page.messages) - 3} more)" if len(page.messages) > 3 else ""
                )
                result.problems.append(Problem(rel, f"mandoc: {shown}", "roff_error", "warning"))
            try:
                doc = self.document(path, page.html, sources[path], info.get("version", ""))
            except HtmlError as exc:
                result.problems.append(Problem(rel, str(exc), "malformed"))
                continue
            if len(doc.blocks) <= 1:  # nothing but the title we add ourselves
                result.problems.append(Problem(rel, "page renders to no text", "empty"))
                continue
            result.documents.append(doc)
        return result

    def document(self, path: Path, html: bytes, source: bytes, version: str) -> Document:
        rel = path.relative_to(self.snapshot_dir).as_posix()
        match = PAGE_NAME.match(path.name)
        assert match is not None
        name, section = match.group("name"), match.group("section")
        builder = DocBuilder()
        builder.block(f"{name}({section})", "title")
        root = parse_html(html, rel)
        render_article(root, builder, HTML_OPTIONS, lambda href: _external(href), rel)
        license_id, attribution = license_and_attribution(source)
        doc = builder.build(
            id=page_id(path),
            title=f"{name}({section})",
            source=self.name,
            path=rel,
            url=self.url_template.format(name=name, section=section) if self.url_template else "",
            version=version,
            page_type=f"man{section}",
            license=license_id or self.license,
            attribution=attribution,
            content_hash=sha256_file(path),
        )
        return type_man_spans(doc)


def _external(href: str) -> Link | None:
    if href.startswith("#"):  # mandoc's permalinks to the page's own anchors
        return None
    return Link(target_doc="", link_type="external", href=href)


def type_man_spans(doc: Document) -> Document:
    """Turn mandoc's bold/italic into typed spans, and `name(n)` references into links.

    Bold text followed by `(n)` is a cross reference (link to `name.n`; `seealso` in SEE ALSO),
    bold `E...` is an errno, bold followed by `()` a function, bold SIG*/X_Y a constant, other bold
    literal code; italics are variables (arguments, placeholders).
    """
    sections = {s.id: s for s in doc.sections}
    index = BlockIndex(doc)
    spans: list[InlineSpan] = []
    links = list(doc.links)
    for span in doc.spans:
        after = doc.text[span.end : span.end + 8]
        ref = REFERENCE.match(after) if span.kind == "bold" else XR_TEXT.match(span.text)
        if ref is not None and span.kind in ("bold", "manref"):
            target_name = span.text if span.kind == "bold" else ref.group("name")
            end = span.end + ref.end() if span.kind == "bold" else span.end
            section_id = next((s.id for s in reversed(doc.sections) if s.start <= span.start < s.end), "")
            in_see_also = section_id in sections and sections[section_id].heading_path[:1] == ["SEE ALSO"]
            links.append(
                Link(
                    target_doc=f"{target_name}.{ref.group('section')}",
                    link_type="seealso" if in_see_also else "inline",
                    anchor_text=doc.text[span.start : end],
                    sentence=index.sentence(span.start, end),
                    start=span.start,
                    end=end,
                )
            )
            spans.append(span.model_copy(update={"kind": "manref", "end": end, "text": doc.text[span.start : end]}))
            continue
        if span.kind == "bold":
            kind = (
                "errno"
                if ERRNO.match(span.text)
                else "function"
                if after.startswith("()")
                else "constant"
                if CONSTANT.match(span.text)
                else "code"
            )
            spans.append(span.model_copy(update={"kind": kind}))
        else:
            spans.append(span)
    links.sort(key=lambda link: (link.start is None, link.start or 0))
    return doc.model_copy(update={"spans": spans, "links": links})
