"""XInclude for Mallard pages, confined to the snapshot folder.

libxml2's own XInclude reads any path or URL an `href` names, so a page holding
`<xi:include href="/etc/passwd" parse="text"/>` would pull that file into the corpus, its indexes and
LLM prompts. This module expands includes itself: a target must be a file inside the snapshot folder
(symlinks resolved first); a URL or a path outside the folder is refused, a missing or malformed
target uses the element's `<xi:fallback>` if any. Each refused or failed include becomes a Problem
(action `warning`) naming the page, the line and the href; the page itself is kept.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lxml import etree

from fixgraph.corpus.files import Problem

XI = "http://www.w3.org/2001/XInclude"
MAX_DEPTH = 8  # nested includes; GNOME Help needs 1


def safe_parser() -> etree.XMLParser:
    """No entity expansion, no DTD loading, no network: what every Mallard file is parsed with."""
    return etree.XMLParser(remove_blank_text=False, resolve_entities=False, load_dtd=False, no_network=True)


@dataclass
class _Context:
    root_dir: Path
    page_rel: str
    max_bytes: int
    problems: list[Problem]


def confine(href: str, base: Path, root_dir: Path) -> tuple[Path | None, str, str]:
    """(target, problem kind, reason): the file `href` names relative to `base`, if it is inside `root_dir`."""
    parts = urlsplit(href)
    if parts.scheme and parts.scheme != "file" and len(parts.scheme) > 1:  # one letter: a Windows drive
        return None, "xinclude_refused", f"refused: {href!r} is a {parts.scheme}: URL (network access is not allowed)"
    if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
        return None, "xinclude_refused", f"refused: {href!r} names a remote host"
    raw = unquote(parts.path if parts.scheme == "file" else href)
    if not raw:
        return None, "xinclude_malformed", "include without an href"
    target = (base / raw).resolve()
    if not target.is_relative_to(root_dir.resolve()):
        return None, "xinclude_refused", f"refused: {href!r} resolves outside the snapshot folder {root_dir}"
    return target, "", ""


def expand(tree: etree._ElementTree, page: Path, root_dir: Path, max_bytes: int, problems: list[Problem]) -> None:
    """Replace every xi:include in `tree` by its target (or fallback), in place; problems are appended."""
    rel = page.relative_to(root_dir).as_posix() if page.is_relative_to(root_dir) else page.name
    _expand(tree.getroot(), page.parent, _Context(root_dir, rel, max_bytes, problems), [page.resolve()])


def _expand(root: etree._Element, base: Path, ctx: _Context, stack: list[Path]) -> None:
    for elem in list(root.iter(f"{{{XI}}}include")):
        if elem.getparent() is None:
            continue  # already removed with an enclosing include's replacement
        replacement, problem = _load(elem, base, ctx, stack)
        if problem:
            ctx.problems.append(
                Problem(ctx.page_rel, f"line {elem.sourceline}: XInclude {problem[1]}", problem[0], "warning")
            )
            replacement = _fallback(elem, base, ctx, stack)
        _replace(elem, replacement)


def _load(
    elem: etree._Element, base: Path, ctx: _Context, stack: list[Path]
) -> tuple[str | etree._Element | None, tuple[str, str] | None]:
    href = elem.get("href", "")
    target, kind, reason = confine(href, base, ctx.root_dir)
    if target is None:
        return None, (kind, reason)
    if not target.is_file():
        return None, ("xinclude_missing", f"target {href!r} not found")
    if target in stack:
        return None, ("xinclude_loop", f"{href!r} includes itself (through {len(stack)} files)")
    if len(stack) > MAX_DEPTH:
        return None, ("xinclude_loop", f"{href!r} is nested more than {MAX_DEPTH} includes deep")
    size = target.stat().st_size
    if ctx.max_bytes and size > ctx.max_bytes:
        return None, ("xinclude_too_large", f"{href!r}: {size} bytes is over the limit of {ctx.max_bytes}")
    if elem.get("parse", "xml") == "text":
        try:
            return target.read_bytes().decode(elem.get("encoding") or "utf-8"), None
        except (UnicodeDecodeError, LookupError) as exc:
            return None, ("xinclude_malformed", f"{href!r} cannot be decoded: {exc}")
    try:
        included = etree.parse(str(target), safe_parser()).getroot()
    except etree.XMLSyntaxError as exc:
        return None, ("xinclude_malformed", f"{href!r} is not well-formed XML: {exc}")
    pointer = elem.get("xpointer")
    if pointer:
        hits = included.xpath("//*[@id=$id or @xml:id=$id]", id=pointer)
        found = [e for e in hits if isinstance(e, etree._Element)] if isinstance(hits, list) else []
        if not found:
            return None, ("xinclude_missing", f"{href!r} has no element with id {pointer!r}")
        included = found[0]
    included = copy.deepcopy(included)
    _expand(included, target.parent, ctx, [*stack, target])
    return included, None


def _fallback(elem: etree._Element, base: Path, ctx: _Context, stack: list[Path]) -> etree._Element | None:
    fallback = elem.find(f"{{{XI}}}fallback")
    if fallback is None:
        return None
    _expand(fallback, base, ctx, stack)
    return fallback


def _replace(elem: etree._Element, replacement: str | etree._Element | None) -> None:
    """Put `replacement` where `elem` is: text joins the surrounding text, a fallback its children."""
    parent = elem.getparent()
    assert parent is not None
    tail = elem.tail or ""
    if isinstance(replacement, str) or replacement is None:
        _add_text_before(elem, (replacement or "") + tail)
        parent.remove(elem)
        return
    if replacement.tag == f"{{{XI}}}fallback":
        _add_text_before(elem, replacement.text or "")
        for child in list(replacement):
            elem.addprevious(child)
        _add_text_before(elem, tail)
        parent.remove(elem)
        return
    replacement.tail = tail
    elem.addprevious(replacement)
    parent.remove(elem)


def _add_text_before(elem: etree._Element, text: str) -> None:
    if not text:
        return
    previous = elem.getprevious()
    if previous is not None:
        previous.tail = (previous.tail or "") + text
    else:
        parent = elem.getparent()
        assert parent is not None
        parent.text = (parent.text or "") + text
