"""Local folder of Markdown / HTML / text files, with every bad file reported rather than lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixgraph.corpus.connectors.folder import FolderCorpus
from fixgraph.corpus.models import Document
from fixgraph.corpus.sources import ParseResult

WIFI_MD = """---
title: Wi-Fi trouble
author: Help Team
---
Intro paragraph about [the router](../hardware/router.md#reset) and `nmcli`.

## Diagnose

1. Open **Settings**.
2. Run `nmcli dev wifi`:

   ```
   nmcli dev wifi list
   ```

## Fix it

- If the light is amber, see [Reset](#reset).
- Visit <https://example.org/help>.

## Reset

Hold the button.
"""

ROUTER_HTML = """<html><head><title>Router</title></head><body>
<nav>Menu</nav>
<main><h1>The router</h1><p>Plug it in. Press <kbd>Reset</kbd>.</p>
<h2 id="reset">Reset the router</h2><p>Hold it for <code>10 s</code>.<p>Unclosed paragraph<ul><li>one<li>two</ul>
</main></body></html>"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guides").mkdir(parents=True)
    (root / "hardware").mkdir()
    (root / "guides" / "wifi trouble.md").write_text(WIFI_MD)
    (root / "hardware" / "router.html").write_text(ROUTER_HTML)
    (root / "notes.txt").write_text("Printer notes\n\nThe printer jams when the tray is overfull.\n\nClean the roller.")
    (root / "latin1.txt").write_bytes("Caf\xe9 r\xe9seau\n\nLe r\xe9seau est lent.".encode("latin-1"))
    (root / "empty.md").write_text("")
    (root / "blank.txt").write_text("   \n\n  ")
    (root / "huge.txt").write_text("word " * 400)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n")
    (root / "nobody.html").write_text("<html><body><nav>only navigation</nav></body></html>")
    (root / "bad-front.md").write_text("---\ntitle: [unclosed\n---\nBody text stays.\n")
    return root


@pytest.fixture
def parsed(folder: Path) -> ParseResult:
    return FolderCorpus(name="docs", snapshot_dir=str(folder), max_bytes=1000).parse()


def doc(result: ParseResult, doc_id: str) -> Document:
    return next(d for d in result.documents if d.id == doc_id)


def test_markdown_structure_links_and_front_matter(parsed: ParseResult) -> None:
    wifi = doc(parsed, "guides/wifi_trouble")
    assert wifi.title == "Wi-Fi trouble" and wifi.attribution == "Help Team"
    assert [s.heading_path for s in wifi.sections] == [["Diagnose"], ["Fix it"], ["Reset"]]
    steps = [b for b in wifi.blocks if b.kind == "step"]
    assert [wifi.text[b.start : b.end] for b in steps] == ["Open Settings.", "Run nmcli dev wifi:"]
    code = next(b for b in wifi.blocks if b.kind == "code")
    assert wifi.text[code.start : code.end] == "nmcli dev wifi list"
    assert code.unit == steps[1].unit != steps[0].unit  # the code block stays in step 2
    links = {(ln.anchor_text, ln.target_doc, ln.target_section, ln.link_type) for ln in wifi.links}
    assert ("the router", "hardware/router", "reset", "inline") in links
    assert ("Reset", "guides/wifi_trouble", "reset", "inline") in links
    assert ("https://example.org/help", "", "", "external") in links
    assert ("code", "nmcli") in {(s.kind, s.text) for s in wifi.spans}


def test_html_is_repaired_and_chrome_removed(parsed: ParseResult) -> None:
    router = doc(parsed, "hardware/router")
    assert router.title == "The router" and "Menu" not in router.text
    assert [s.id for s in router.sections] == ["reset"]
    assert [router.text[b.start : b.end] for b in router.blocks if b.kind == "item"] == ["one", "two"]
    assert ("key", "Reset") in {(s.kind, s.text) for s in router.spans}


def test_text_files_take_their_first_line_as_title(parsed: ParseResult) -> None:
    notes = doc(parsed, "notes")
    assert notes.title == "Printer notes"
    assert [notes.text[b.start : b.end] for b in notes.blocks][1:] == [
        "The printer jams when the tray is overfull.",
        "Clean the roller.",
    ]


def test_bad_files_are_reported_with_reasons(parsed: ParseResult) -> None:
    problems = {p.path: (p.kind, p.action) for p in parsed.problems}
    assert problems == {
        "latin1.txt": ("encoding", "warning"),  # kept, decoded as cp1252
        "empty.md": ("empty", "skipped"),
        "blank.txt": ("empty", "skipped"),
        "huge.txt": ("too_large", "skipped"),
        "logo.png": ("unsupported", "ignored"),
        "nobody.html": ("empty", "skipped"),
        "bad-front.md": ("malformed", "warning"),  # kept without its front matter
    }
    assert doc(parsed, "latin1").title == "Café réseau"
    assert "Body text stays." in doc(parsed, "bad-front").text
    assert len(parsed.documents) == 5


def test_offsets_of_spans_and_links_are_exact(parsed: ParseResult) -> None:
    for d in parsed.documents:
        for span in d.spans:
            assert d.text[span.start : span.end] == span.text
        for link in d.links:
            if link.start is not None:
                assert d.text[link.start : link.end] == link.anchor_text
        for block in d.blocks:
            assert d.text[block.start : block.end].strip() == d.text[block.start : block.end] != ""
