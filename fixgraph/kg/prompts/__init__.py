"""Prompts are versioned files: `<name>.txt`, filled with string.Template ($text, $claim...).

The version recorded in provenance and cache keys is `<name>@<sha256 of the file, 8 hex>`, so editing
a prompt changes the version even if the file name stays (and the cache never serves old answers).
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from fixgraph.io import sha256_text

PROMPT_DIR = Path(__file__).resolve().parent


def prompt_names() -> list[str]:
    return sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))


def load_prompt(name: str) -> tuple[Template, str]:
    """(template, version) of prompt file `name` (a name from `prompt_names()` or a path to a .txt)."""
    path = Path(name) if name.endswith(".txt") else PROMPT_DIR / f"{name}.txt"
    if not path.exists():
        raise FileNotFoundError(f"prompt {name!r} not found; available: {', '.join(prompt_names())}")
    text = path.read_text(encoding="utf-8")
    return Template(text), f"{path.stem}@{sha256_text(text)[:8]}"
