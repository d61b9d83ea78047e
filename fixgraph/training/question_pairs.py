"""Pairs from labelled dev questions: the `dev_question` query kind of the bi-encoder trainer.

Each question of a part (`split:corpus`, as `fixgraph fit-ltr` takes them) gives one row per gold chunk:
the question, that chunk, and `negatives` hard negatives drawn from the first `negative_pool` non-gold
chunks that `negative_system` ranks for it. By default parts on the corpus the model is trained for are
dropped: the model a corpus is scored with never saw that corpus's questions (held out by corpus, as
ltr's figures are), so its dev figures stay honest and a new corpus is served by a model trained on the
others'. With `hold_out_corpus: false` every part is kept: a model for the corpora's unseen questions,
whose dev figures are then in-sample (its held-out estimate comes from folds of the parts). Locked
questions are refused by `resolve_questions`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError, systems_of
from fixgraph.evaluation.parts import Part, parse_parts, part_config

SEARCH_DEPTH = 30  # negatives come from the top of the ranking: where recall@8 is won or lost


def question_parts(labels: Sequence[str], corpus: str, hold_out_corpus: bool = True) -> list[Part]:
    """The configured parts, minus those on `corpus` when held out by corpus; an error when none is left."""
    parts = parse_parts(",".join(labels), "trainer data.questions") if labels else []
    kept = [p for p in parts if p.corpus != corpus or not hold_out_corpus]
    if not kept and hold_out_corpus:
        raise ConfigError(
            f"trainer data.questions: no part on a corpus other than {corpus!r} ({', '.join(labels) or 'none'}); "
            "with data.hold_out_corpus true, questions of the corpus a model is trained for are not used"
        )
    if not kept:
        raise ConfigError("trainer data.questions: no part given (`split:corpus` labels)")
    return kept


# a part's corpus name -> the overrides its config is composed with
Overrides = Callable[[str], Sequence[str]]


def part_overrides(cfg: DictConfig, corpus: str) -> list[str]:
    """The caller's `paths.*` (a part's artefacts live where the caller's do), and the caller's corpus folder
    for a part on its own corpus: a corpus read in place is pointed at on the command line
    (`corpus.snapshot_dir=...`), which a part's config, composed afresh, would lose."""
    folder = cfg.corpus.get("snapshot_dir") if corpus == str(cfg.corpus.name) else None
    paths = [f"paths.{key}={value}" for key, value in cfg.paths.items()]
    return [*paths, *([f"corpus.snapshot_dir={folder}"] if folder else [])]


def caller_overrides(cfg: DictConfig) -> Overrides:
    """`part_overrides` for every part of a trainer run with `cfg`."""
    return lambda corpus: part_overrides(cfg, corpus)


def part_inputs(parts: Sequence[Part], negative_system: str, overrides: Overrides) -> dict[str, str]:
    """What the rows depend on: each part's questions and its corpus's chunks (hashes)."""
    from fixgraph.evaluation.splits import question_set_hash, resolve_questions
    from fixgraph.io import sha256_file
    from fixgraph.pipeline.layout import Layout
    from fixgraph.pipeline.stages import chunk

    inputs = {}
    for part in parts:
        cfg = part_config(part, negative_system, overrides(part.corpus))
        chunk(cfg)
        questions = resolve_questions(cfg, part.questions, None).questions
        inputs[f"questions {part.label}"] = question_set_hash(questions)
        inputs[f"chunks {part.corpus}"] = sha256_file(Layout.from_config(cfg).chunks)
    return inputs


def question_rows(
    parts: Sequence[Part],
    negative_system: str,
    negatives: int,
    negative_pool: int,
    seed: int,
    overrides: Overrides,
) -> list[dict[str, Any]]:
    """Training rows (the bi-encoder trainer's format) from the parts' questions, in a fixed order."""
    from fixgraph.evaluation.gold import map_gold
    from fixgraph.evaluation.splits import resolve_questions
    from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system

    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for part in parts:
        cfg = part_config(part, negative_system, overrides(part.corpus))
        questions = resolve_questions(cfg, part.questions, None).questions
        chunk(cfg)
        chunks = load_chunks(cfg)
        by_id = {c.id: c for c in chunks}
        qrels = map_gold(questions, load_documents(cfg), chunks).qrels()
        ranker = open_system(cfg, negative_system, systems_of(cfg)[negative_system], chunks)
        for q in sorted(questions, key=lambda q: q.qid):
            gold = sorted(qrels.get(q.qid, {}))
            if not gold:
                continue  # unanswerable, or its gold not in this corpus version
            ranked = [h.chunk_id for h in ranker.search(q.question, SEARCH_DEPTH)]
            pool = [c for c in ranked if c not in gold][:negative_pool]
            for positive in gold:
                drawn = rng.sample(pool, min(negatives, len(pool)))
                rows.append(
                    {
                        "query": q.question,
                        "query_kind": "dev_question",
                        "doc_id": f"{part.corpus}/{by_id[positive].doc_id}",
                        "positive": positive,
                        "positive_text": by_id[positive].index_text(),
                        "negatives": drawn,
                        "negative_texts": [by_id[n].index_text() for n in drawn],
                        "negative_docs": [f"{part.corpus}/{by_id[n].doc_id}" for n in drawn],
                    }
                )
    if not rows:
        raise ConfigError(f"trainer data.questions: no question with gold in {', '.join(p.label for p in parts)}")
    return rows
