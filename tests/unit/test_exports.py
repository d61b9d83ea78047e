"""JIRA and Confluence JSON exports, in the shapes their REST APIs return."""

from __future__ import annotations

import shutil
from pathlib import Path

from fixgraph.corpus.connectors.exports import ConfluenceExportCorpus, JiraExportCorpus
from tests.conftest import FIXTURES

EXPORTS = FIXTURES / "exports"  # hand-written in the shapes of /rest/api/2/search and /rest/api/content


def test_jira_issues_comments_and_typed_links(tmp_path: Path) -> None:
    shutil.copy(EXPORTS / "jira-search.json", tmp_path / "search-0.json")
    (tmp_path / "broken.json").write_text("{not json")
    result = JiraExportCorpus(name="jira", snapshot_dir=str(tmp_path), base_url="https://jira.example.com/").parse()
    docs = {d.id: d for d in result.documents}
    assert sorted(docs) == ["HUB-7", "HUB-8"]
    hub7 = docs["HUB-7"]
    assert hub7.url == "https://jira.example.com/browse/HUB-7"
    assert hub7.metadata["status"] == "Resolved" and hub7.page_type == "Bug" and hub7.attribution == "Ana"
    assert [s.id for s in hub7.sections] == ["description", "comments", "linked-issues"]
    comment = [b for b in hub7.blocks if b.section == "comments" and b.kind != "heading"]
    assert [hub7.text[b.start : b.end] for b in comment] == ["Bo wrote:", "Fixed in 2.2, caused by HUB-5."]
    assert len({b.unit for b in comment}) == 1
    links = {(ln.link_type, ln.target_doc, ln.anchor_text) for ln in hub7.links}
    assert ("blocks", "HUB-9", "HUB-9") in links and ("is_caused_by", "HUB-5", "HUB-5") in links
    assert ("mentions", "HUB-3", "HUB-3") in links and ("mentions", "HUB-5", "HUB-5") in links
    hub8 = docs["HUB-8"]
    assert [hub8.text[b.start : b.end] for b in hub8.blocks if b.kind == "item"] == ["Unplug", "Wait"]
    assert "hubctl reset" in hub8.text
    problems = {(p.path, p.kind) for p in result.problems}
    assert problems == {("search-0.json#2", "malformed"), ("broken.json", "malformed")}


def test_confluence_pages_links_by_title_and_code_macros(tmp_path: Path) -> None:
    shutil.copy(EXPORTS / "confluence-content.json", tmp_path / "content.json")
    result = ConfluenceExportCorpus(
        name="wiki", snapshot_dir=str(tmp_path), base_url="https://wiki.example.com"
    ).parse()
    docs = {d.id: d for d in result.documents}
    assert sorted(docs) == ["confluence/101", "confluence/102"]
    reset = docs["confluence/101"]
    assert reset.url == "https://wiki.example.com/spaces/HUB/pages/101" and reset.version == "4"
    code = next(b for b in reset.blocks if b.kind == "code")
    assert reset.text[code.start : code.end] == "hubctl reset --soft <now>"  # CDATA kept verbatim
    assert "bash" not in reset.text  # macro parameters are not content
    assert ("guide", "confluence/100") in {(ln.link_type, ln.target_doc) for ln in reset.links}
    wifi = docs["confluence/102"]
    link = next(ln for ln in wifi.links if ln.anchor_text == "reset the hub")
    assert link.target_doc == "confluence/101" and link.sentence == "If the light blinks, reset the hub."
    assert "Firmware 2.2 fixes it." in wifi.text
