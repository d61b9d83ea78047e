"""Where each stage reads and writes, derived from the config alone (DVC's dvc.yaml uses the same paths)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig


@dataclass(frozen=True)
class Layout:
    artifacts: Path
    corpus_name: str

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Layout:
        return cls(Path(cfg.paths.artifacts), str(cfg.corpus.name))

    @property
    def corpus_dir(self) -> Path:
        return self.artifacts / "corpus" / self.corpus_name

    @property
    def documents(self) -> Path:
        return self.corpus_dir / "documents.jsonl"

    @property
    def manifest(self) -> Path:
        return self.corpus_dir / "manifest.json"

    @property
    def problems(self) -> Path:
        return self.corpus_dir / "problems.json"

    @property
    def link_graph(self) -> Path:
        return self.corpus_dir / "links.parquet"

    @property
    def duplicates(self) -> Path:
        return self.corpus_dir / "duplicates.json"

    @property
    def chunks_dir(self) -> Path:
        return self.artifacts / "chunks" / self.corpus_name

    @property
    def chunks(self) -> Path:
        return self.chunks_dir / "chunks.parquet"

    def index_dir(self, system: str) -> Path:
        """The `index` stage's output (a DVC output: only `fixgraph index` writes here)."""
        return self.artifacts / "indexes" / self.corpus_name / system

    def local_index_dir(self, system: str) -> Path:
        """Where runs, sweeps, finalists and the API build an index the stage did not: kept apart so
        that what they build never changes the DVC outputs (and with them `dvc.lock`)."""
        return self.artifacts / "local" / "indexes" / self.corpus_name / system

    def eval_dir(self, name: str) -> Path:
        return self.artifacts / "eval" / self.corpus_name / name

    def metrics_file(self, name: str) -> Path:
        # kept outside eval_dir: DVC tracks it as an uncached metric, the folder as a cached output
        return self.artifacts / "metrics" / self.corpus_name / f"{name}.json"
