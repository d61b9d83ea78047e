"""Versioned prompt files of the answering layer (answer, verify, judge, question generation).

Same convention as the knowledge-graph prompts (`fixgraph.kg.prompts`): `<name>.txt` filled with
string.Template, version `<name>@<sha8>` recorded with every answer, so editing a prompt moves the LLM
cache and the recorded provenance on.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from fixgraph.kg.prompts import load_prompt as _load

PROMPT_DIR = Path(__file__).resolve().parent


def prompt_names() -> list[str]:
    return sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))


def load_prompt(name: str) -> tuple[Template, str]:
    """(template, version) of `name` (a file of this folder, or a path to a .txt)."""
    path = name if name.endswith(".txt") else str(PROMPT_DIR / f"{name}.txt")
    if not Path(path).exists():
        raise FileNotFoundError(f"prompt {name!r} not found; available: {', '.join(prompt_names())}")
    return _load(path)
