"""A git repository's history: one document per commit (message + changed paths).

`fetch` exports `git log` of the configured revision into `commits.jsonl` (the snapshot, so the corpus
hash changes exactly when the history does); `parse` turns each commit into a document whose text is
the message and a "Changed files" section, with changed paths as `file` spans and issue keys in the
message (`PROJ-123`) as `mentions` links: tickets say what broke, commits say what changed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from fixgraph.corpus.builder import DocBuilder, Inline
from fixgraph.corpus.connectors.exports import with_mentions
from fixgraph.corpus.files import Problem
from fixgraph.corpus.models import Document
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult
from fixgraph.io import atomic_dir, read_json, stable_hash, write_json, write_jsonl

FORMAT = "%x1e%H%x00%an%x00%aI%x00%P%x00%B%x00"
STATUS_NAMES = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied", "T": "type changed"}


class GitError(RuntimeError):
    """git failed on the configured repository; the message has git's own error."""


def git_log(repo: Path, rev: str, max_commits: int) -> list[dict[str, Any]]:
    """Commits of `rev`, newest first, with their changed paths (renames keep both paths)."""
    cmd = ["git", "-C", str(repo), "log", "--no-color", "-M", f"--format={FORMAT}"]
    cmd += ["--name-status", "-z", f"--max-count={max_commits}", rev, "--"]
    done = subprocess.run(cmd, capture_output=True, check=False)
    if done.returncode != 0:
        raise GitError(f"git log in {repo} failed: {done.stderr.decode('utf-8', 'replace').strip()}")
    commits = []
    for record in done.stdout.decode("utf-8", "replace").split("\x1e")[1:]:
        fields = record.split("\x00")
        sha, author, date, parents, message = fields[:5]
        tokens = [t.strip() for t in fields[5:] if t.strip()]
        changes, i = [], 0
        while i < len(tokens):
            status = tokens[i]
            width = 2 if status[:1] in ("R", "C") else 1
            paths = tokens[i + 1 : i + 1 + width]
            i += 1 + width
            change = {"status": status[:1], "path": paths[-1] if paths else ""}
            if width == 2 and paths:
                change["old_path"] = paths[0]
            changes.append(change)
        commits.append(
            {
                "sha": sha,
                "author": author,
                "date": date,
                "parents": parents.split(),
                "message": message.strip(),
                "changes": changes,
            }
        )
    return commits


@CORPORA.register("git_history")
class GitHistoryCorpus:
    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        repo: str = ".",
        rev: str = "HEAD",
        max_commits: int = 5000,
        url_template: str = "",
        license: str = "",
    ) -> None:
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.repo = Path(repo)
        self.rev = rev
        self.max_commits = max_commits
        self.url_template = url_template  # e.g. https://github.com/org/repo/commit/{sha}
        self.license = license

    def is_fetched(self) -> bool:
        return (self.snapshot_dir / "commits.jsonl").exists()

    def check(self) -> None:
        if not self.is_fetched():
            raise MissingCorpusError(
                f"corpus {self.name!r}: no commits.jsonl in {self.snapshot_dir}. "
                f"Export the history with: fixgraph fetch corpus={self.name}"
            )

    def fetch(self) -> dict[str, str]:
        commits = git_log(self.repo, self.rev, self.max_commits)
        head = commits[0]["sha"] if commits else ""
        info = {
            "repo": str(self.repo.resolve()),
            "rev": self.rev,
            "head": head,
            "version": head[:12],
            "license": self.license,
        }
        with atomic_dir(self.snapshot_dir) as out:
            write_jsonl(out / "commits.jsonl", commits)
            write_json(out / "SOURCE.json", info)
        return {**info, "origin": f"git log: {len(commits)} commits"}

    def parse(self) -> ParseResult:
        self.check()
        info_path = self.snapshot_dir / "SOURCE.json"
        result = ParseResult(documents=[], source_info=dict(read_json(info_path)) if info_path.exists() else {})
        result.resources["SOURCE.json"] = "snapshot provenance"
        with open(self.snapshot_dir / "commits.jsonl", encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                where = f"commits.jsonl#line{n}"
                try:
                    commit = json.loads(line)
                    result.documents.append(self.document(commit, result.source_info.get("version", "")))
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    result.problems.append(Problem(where, f"not a commit record: {exc}", "malformed"))
        return result

    def document(self, commit: dict[str, Any], version: str) -> Document:
        subject, _, body = str(commit["message"]).partition("\n")
        builder = DocBuilder()
        builder.block(subject or commit["sha"][:12], "title")
        for paragraph in re.split(r"\n\s*\n", body.strip()):
            run = Inline()
            run.text(paragraph)
            builder.block(run, "paragraph")
        if commit["changes"]:
            builder.section("Changed files", 2, "changed-files")
            builder.block("Changed files", "heading")
            for change in commit["changes"]:
                run = Inline()
                run.text(STATUS_NAMES.get(change["status"], change["status"]) + " ")
                if change.get("old_path"):
                    token = run.open("file")
                    run.text(change["old_path"])
                    run.close(token)
                    run.text(" -> ")
                token = run.open("file")
                run.text(change["path"])
                run.close(token)
                builder.block(run, "item")
        doc = builder.build(
            id=f"commit/{commit['sha'][:12]}",
            title=subject,
            source=self.name,
            path="commits.jsonl",
            url=self.url_template.format(sha=commit["sha"]) if self.url_template else "",
            version=version,
            page_type="commit",
            license=self.license,
            attribution=commit["author"],
            content_hash=stable_hash(commit),
            metadata={"sha": commit["sha"], "date": commit["date"], "author": commit["author"]},
        )
        return with_mentions(doc, exclude=set())
