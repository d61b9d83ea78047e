"""Versioned prompt files: `<name>.txt` in a package's prompts folder, filled with string.Template.

The version recorded in provenance and cache keys is `<name>@<sha256 of the file, 8 hex>`, so editing
a prompt changes the version even if the file name stays (and the cache never serves old answers).
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from fixgraph.io import sha256_text


class PromptFolder:
    """The prompt files of one package (kg, answer, evaluation)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.txt"))

    def load(self, name: str) -> tuple[Template, str]:
        """(template, version) of prompt `name` (a name from `names()` or a path to a .txt)."""
        path = Path(name) if name.endswith(".txt") else self.folder / f"{name}.txt"
        if not path.exists():
            raise FileNotFoundError(f"prompt {name!r} not found; available: {', '.join(self.names())}")
        text = path.read_text(encoding="utf-8")
        return Template(text), f"{path.stem}@{sha256_text(text)[:8]}"
