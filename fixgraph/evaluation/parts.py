"""Labelled question parts (`split:corpus`): what `fixgraph fit-ltr` fits ltr's weights on and what the
`dev_question` data of a bi-encoder trainer is made of. A part's split may be a question file instead;
either way its questions are read through `resolve_questions`, which refuses locked ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from fixgraph.config import ConfigError, compose, systems_of


@dataclass(frozen=True)
class Part:
    split: str  # a split option (conf/split), or a question file (*.jsonl: e.g. questions generated from the corpus)
    corpus: str

    @property
    def label(self) -> str:
        return f"{self.split}:{self.corpus}"

    @property
    def questions(self) -> Path | None:
        return Path(self.split) if self.split.endswith(".jsonl") else None


def parse_parts(text: str, what: str = "--parts") -> list[Part]:
    """`split:corpus,...` (e.g. `dev:gnome_help,evolution_dev:evolution_help`), each named once; a part's
    split may be a question file instead (`gen.jsonl:gnome_help`), guarded against locked questions too.
    `what` names the input in errors (an option, a config key)."""
    parts = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        split, sep, corpus = item.partition(":")
        if not sep or not split.strip() or not corpus.strip() or ":" in corpus:
            raise ConfigError(f"{what}: {item!r} is not split:corpus (e.g. dev:gnome_help)")
        part = Part(split.strip(), corpus.strip())
        if part.questions is not None and not part.questions.is_file():
            raise ConfigError(f"{what}: question file {part.questions} not found")
        parts.append(part)
    if not parts:
        raise ConfigError(f"{what}: name at least one dev part as split:corpus (e.g. dev:gnome_help)")
    repeated = sorted({p.label for p in parts if parts.count(p) > 1})
    if repeated:
        raise ConfigError(f"{what}: {', '.join(repeated)} named more than once")
    return parts


def part_config(part: Part, system: str, overrides: Sequence[str] = ()) -> DictConfig:
    """The config of one part: its corpus and split (a question file names no split), with `system` added
    from conf/retriever when the preset does not hold it."""
    base = [*overrides, f"corpus={part.corpus}", *([] if part.questions else [f"split={part.split}"])]
    cfg = compose(base)
    return cfg if system in systems_of(cfg) else compose([*base, f"+retriever@systems.{system}={system}"])
