"""Git history: commits exported by `git log` into a snapshot, one document per commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fixgraph.corpus.connectors.git_history import GitError, GitHistoryCorpus


def git(repo: Path, *args: str) -> None:
    env = ["-c", "user.name=Dev One", "-c", "user.email=dev@example.org"]
    subprocess.run(["git", "-C", str(repo), *env, *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "hub.c").write_text("int main(void) { return 0; }\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "Add hub daemon")
    git(root, "mv", "hub.c", "hubd.c")
    (root / "README").write_text("hub\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "Rename daemon, fix Wi-Fi drop\n\nThe daemon restarts the radio (fixes HUB-7).")
    return root


def test_commits_become_documents_with_paths_and_issue_links(repo: Path, tmp_path: Path) -> None:
    corpus = GitHistoryCorpus(name="git", snapshot_dir=str(tmp_path / "snap"), repo=str(repo))
    info = corpus.fetch()
    result = corpus.parse()
    assert [d.title for d in result.documents] == ["Rename daemon, fix Wi-Fi drop", "Add hub daemon"]
    latest = result.documents[0]
    assert latest.id == f"commit/{info['head'][:12]}" and latest.attribution == "Dev One"
    assert latest.text.splitlines()[1] == "The daemon restarts the radio (fixes HUB-7)."
    items = [latest.text[b.start : b.end] for b in latest.blocks if b.kind == "item"]
    assert sorted(items) == ["added README", "renamed hub.c -> hubd.c"]
    assert sorted(s.text for s in latest.spans if s.kind == "file") == ["README", "hub.c", "hubd.c"]
    link = next(ln for ln in latest.links if ln.link_type == "mentions")
    assert link.target_doc == "HUB-7" and latest.text[link.start : link.end] == "HUB-7"


def test_not_a_repository_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="git log"):
        GitHistoryCorpus(name="git", snapshot_dir=str(tmp_path / "s"), repo=str(tmp_path)).fetch()
