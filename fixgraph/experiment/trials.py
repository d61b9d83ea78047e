"""How one sweep trial is composed and scored.

A trial is a set of overrides on the sweep's base config, composed exactly like `fixgraph run` would
compose them (`fixgraph.config.compose`), so the system it scores is the one a user gets by typing those
overrides.
It is scored by replaying that system through the candidate cache (`pipeline/candidates.py`): the same
`System.search` the benchmark runs, with leaves and scorers recorded once and reused, so a cached trial
equals a live run and says which it was (`scoring_path`: cached when nothing had to run, else live).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, compose, config_dir, config_groups, is_group, systems_of, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.gold import GoldMapping, map_gold
from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.result import per_question_table
from fixgraph.experiment.sweep_spec import Param, SweepSpec
from fixgraph.io import stable_hash
from fixgraph.pipeline.candidates import CacheStats, CandidateStore, Replayer, replay_rankings
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents
from fixgraph.retrieval.base import Hit
from fixgraph.training.stages import require_models

log = logging.getLogger(__name__)
BATCHES = 4  # a trial reports its running objective after each quarter of the questions (pruning)


@dataclass
class Corpus:
    """Chunks, gold mapping and replayer of one chunking (trials that change the chunker get their own)."""

    chunks: list[Chunk]
    mapping: GoldMapping
    replayer: Replayer

    @property
    def doc_of(self) -> dict[str, str]:
        return {c.id: c.doc_id for c in self.chunks}


@dataclass
class TrialResult:
    system: str
    system_config: dict[str, Any]
    overrides: list[str]
    per_question: pd.DataFrame
    stats: CacheStats
    rankings: dict[str, list[Hit]] = field(default_factory=dict)  # qid -> the system's ranking


@dataclass
class TrialRunner:
    """Composes and scores trials of one sweep; loaded once per worker."""

    base_cfg: DictConfig
    spec: SweepSpec
    base_overrides: list[str]
    questions: list[Question]
    _corpora: dict[str, Corpus] = field(default_factory=dict)

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        by_key = {p.key: p for p in self.spec.params}
        return [*self.base_overrides, *(by_key[k].override(v) for k, v in params.items())]

    def suggest(self, trial: Any) -> tuple[dict[str, Any], DictConfig]:
        """Define-by-run: unconditional parameters, then the ones whose `when` holds in that config."""
        params = {p.key: p.suggest(trial) for p in self.spec.params if not p.when}
        cfg = self.compose(params)
        conditional = [p for p in self.spec.params if p.when]
        active = [p for p in conditional if p.active(cfg)]
        if active:
            params.update({p.key: p.suggest(trial) for p in active})
            cfg = self.compose(params)
        return params, cfg

    def compose(self, params: Mapping[str, Any]) -> DictConfig:
        try:
            return compose(self.overrides(params))
        except ConfigError as exc:
            raise SweepError(f"trial overrides {self.overrides(params)} do not compose: {exc}") from exc

    def system_of(self, cfg: DictConfig) -> tuple[str, DictConfig]:
        systems = systems_of(cfg)
        if self.spec.system is not None:
            if self.spec.system not in systems:
                raise SweepError(f"sweep {self.spec.name}: system {self.spec.system!r} not in {', '.join(systems)}")
            return self.spec.system, systems[self.spec.system]
        if len(systems) != 1:
            raise SweepError(
                f"sweep {self.spec.name}: the trial config has {len(systems)} systems ({', '.join(systems)}); "
                "name the one to score with `sweep.system` or sweep with experiment=single"
            )
        return next(iter(systems.items()))

    def corpus(self, cfg: DictConfig) -> Corpus:
        """The trial's chunks: the base ones, or (when it changes the chunker) a variant built once."""
        key = stable_hash(to_dict(cfg.chunker))
        if key not in self._corpora:
            if to_dict(cfg.chunker) != to_dict(self.base_cfg.chunker):
                cfg = OmegaConf.create(to_dict(cfg))
                cfg.paths.artifacts = str(Path(str(self.base_cfg.paths.artifacts)) / "variants" / f"chunker-{key[:12]}")
            chunk(cfg)
            chunks = load_chunks(cfg)
            mapping = map_gold(self.questions, load_documents(cfg), chunks)
            # a question whose gold maps nowhere is an error here as in `fixgraph evaluate`
            mapping.check(float(cfg.evaluation.min_gold_coverage), self.questions, bool(cfg.evaluation.allow_unmapped))
            self._corpora[key] = Corpus(chunks, mapping, Replayer(cfg, chunks, CandidateStore.of(self.base_cfg)))
        return self._corpora[key]

    def score(
        self,
        params: Mapping[str, Any],
        cfg: DictConfig,
        report: Callable[[float, int], None] | None = None,
        objective: str | None = None,
    ) -> TrialResult:
        """Rank every question with the trial's system (replayed), batch by batch; `report(value, step)`
        gets the running mean of `objective` after each batch (Optuna pruning)."""
        name, system_cfg = self.system_of(cfg)
        corpus = self.corpus(cfg)
        depth = int(cfg.evaluation.depth)
        frames: list[pd.DataFrame] = []
        stats = CacheStats()
        ranked: dict[str, list[Hit]] = {}
        require_models(cfg, {name: system_cfg})  # a fine-tuned model the trial's system names
        system = corpus.replayer.system(system_cfg)
        for step, batch in enumerate(np.array_split(np.arange(len(self.questions)), BATCHES)):
            questions = [self.questions[i] for i in batch]
            if not questions:
                continue
            rankings, batch_stats = replay_rankings(corpus.replayer, system, questions, depth)
            ranked.update(rankings)
            stats.hits += batch_stats.hits
            stats.misses += batch_stats.misses
            rows = [{"system": name, "qid": q.qid} for q in questions]
            frames.append(per_question_table(cfg, questions, corpus.mapping, {name: rankings}, corpus.doc_of, rows))
            if report is not None and objective is not None:
                so_far = pd.concat(frames, ignore_index=True)
                scored = so_far[so_far["scored"].astype(bool)]
                if len(scored):
                    report(float(scored[objective].mean()), step)
        per_question = pd.concat(frames, ignore_index=True)
        return TrialResult(name, to_dict(system_cfg), self.overrides(params), per_question, stats, ranked)


def load_runner(cfg: DictConfig, spec: SweepSpec, overrides: Sequence[str]) -> TrialRunner:
    """Trials compose `spec.base + overrides + their own` (`overrides`: what `cfg` was composed from)."""
    from fixgraph.evaluation.splits import build_split

    questions = build_split(cfg.split).load()  # verifies the frozen split
    runner = TrialRunner(cfg, spec, [*spec.base, *overrides], questions)
    runner.corpus(cfg)  # chunk and map gold once, up front
    return runner


def check_space(runner: TrialRunner, params: Sequence[Param]) -> None:
    """Every swept value key exists in some config the space composes (a typo fails before trial 0)."""
    conf_groups = config_groups(config_dir())
    groups = [p for p in params if p.kind == "categorical" and is_group(f"{p.key}=x", conf_groups)]
    first = {p.key: p.choices[0] for p in groups}
    runner.system_of(runner.compose(first))  # the system to score is there (named, or the only one)
    for param in params:
        if param in groups:
            continue
        found = False
        for choice in [first, *({**first, g.key: c} for g in groups for c in g.choices)]:
            cfg = runner.compose(choice)
            if OmegaConf.select(cfg, param.key.lstrip("+"), default=None) is not None:
                found = True
                break
        if not found and not param.key.startswith("+"):
            raise SweepError(f"sweep parameter {param.key!r} is not a key of any config the space composes")
