"""Training data as `datasets.DatasetDict`s on disk, their content hash, and the corpus-built validation split.

The validation split is made of whole PAGES of the corpus, chosen by a salted hash of the page id, so
no page has examples on both sides (a title query and a heading query of one page would otherwise
leak) and the choice does not depend on the order of anything. Benchmark questions are never involved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from fixgraph.config import ConfigError
from fixgraph.io import RUN_DIR, sha256_text, stable_hash, tree_hash

T = TypeVar("T")
TRAIN, VALIDATION = "train", "validation"
MARKERS = ("stage.json",)  # written by run_stage next to the data (timings go to its _run/ folder, also skipped)


def settings_from(cls: type[T], values: Mapping[str, Any] | None, label: str) -> T:
    """A settings dataclass from a config block; an unknown key is a ConfigError naming it and the valid ones."""
    values = dict(values or {})
    valid = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise ConfigError(f"{label}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(valid)}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required key is missing
        raise ConfigError(f"{label}: {exc}") from None


def unit_hash(unit: str, salt: str) -> float:
    """A number in [0, 1) fixed by the unit id and the salt."""
    return int(sha256_text(f"{salt}|{unit}")[:12], 16) / float(1 << 48)


def validation_units(units: Iterable[str], fraction: float, salt: str) -> set[str]:
    """The units (page ids) whose examples form the validation split: about `fraction` of them, at least
    one and never all (when there are two or more), chosen by hash."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {fraction}")
    ordered = sorted(set(units), key=lambda u: (unit_hash(u, salt), u))
    if len(ordered) < 2:
        raise ValueError(f"need examples from at least 2 pages to hold some out for validation, got {len(ordered)}")
    chosen = {u for u in ordered if unit_hash(u, salt) < fraction}
    if not chosen:
        chosen = {ordered[0]}
    if len(chosen) == len(ordered):
        chosen.discard(ordered[-1])
    return chosen


def split_rows(
    rows: Sequence[dict[str, Any]], unit_key: str, fraction: float, salt: str
) -> dict[str, list[dict[str, Any]]]:
    held_out = validation_units((str(r[unit_key]) for r in rows), fraction, salt)
    return {
        TRAIN: [r for r in rows if str(r[unit_key]) not in held_out],
        VALIDATION: [r for r in rows if str(r[unit_key]) in held_out],
    }


def save_splits(splits: Mapping[str, Sequence[dict[str, Any]]], folder: Path, features: Any = None) -> dict[str, int]:
    """Write {split: rows} as a DatasetDict (save_to_disk); returns the row count per split."""
    import datasets

    datasets.disable_progress_bars()
    empty = [name for name, rows in splits.items() if not rows]
    if empty:
        raise ValueError(f"training data: split(s) {', '.join(empty)} would be empty")
    built = datasets.DatasetDict(
        {name: datasets.Dataset.from_list(list(rows), features=features) for name, rows in splits.items()}
    )
    built.save_to_disk(str(folder))
    return {name: len(rows) for name, rows in splits.items()}


def load_splits(folder: Path) -> Any:
    import datasets

    if not (folder / "dataset_dict.json").exists():
        raise FileNotFoundError(f"{folder}: no training data here; build it with `fixgraph train-data`")
    return datasets.load_from_disk(str(folder))


def data_hash(folder: Path) -> str:
    """sha256 over the data folder's files (arrow data, features, state) except the stage marker, which
    holds timings: what the model card records. `datasets` writes the same bytes for the same rows, so
    equal data gives an equal hash."""
    _, files = tree_hash(folder, "**/*")
    kept = {name: digest for name, digest in files.items() if name not in MARKERS and name.split("/")[0] != RUN_DIR}
    return stable_hash(kept)
