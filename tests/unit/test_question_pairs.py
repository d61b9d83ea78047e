"""Training pairs from labelled questions of other corpora (training/question_pairs.py), the same-question
mask, the trainer and systems built on them, and training a system's missing model on demand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, compose
from fixgraph.evaluation.parts import Part

torch = pytest.importorskip("torch")


def test_parts_on_the_corpus_being_trained_for_are_dropped() -> None:
    from fixgraph.training.question_pairs import question_parts

    labels = ["dev:gnome_help", "bridge_dev:gnome_help", "evolution_dev:evolution_help"]
    assert question_parts(labels, "gnome_help") == [Part("evolution_dev", "evolution_help")]
    assert [p.label for p in question_parts(labels, "evolution_help")] == ["dev:gnome_help", "bridge_dev:gnome_help"]
    with pytest.raises(ConfigError, match=r"no part on a corpus other than 'gnome_help'.*hold_out_corpus true"):
        question_parts(["dev:gnome_help"], "gnome_help")
    # the model for unseen questions keeps every part, the trained corpus's too
    assert [p.label for p in question_parts(labels, "gnome_help", hold_out_corpus=False)] == labels
    with pytest.raises(ConfigError, match=r"no part given"):
        question_parts([], "gnome_help", hold_out_corpus=False)
    with pytest.raises(ConfigError, match=r"trainer data\.questions: 'dev' is not split:corpus"):
        question_parts(["dev"], "gnome_help")


def test_same_question_mask_hides_the_questions_other_gold_chunks_only() -> None:
    from fixgraph.training.nets.bi_encoder import PairCollator

    def row(query: str, positive: str, negative: str) -> dict[str, Any]:
        return {"query": query, "doc_id": "p", "positive_text": positive, "negative_texts": [negative],
                "negative_docs": ["p"]}  # fmt: skip

    rows = [row("q1", "gold a", "neg x"), row("q2", "gold b", "neg y"), row("q1", "gold c", "neg z")]
    mask = PairCollator("", "", mask="question")(rows)["mask"]
    assert mask.tolist() == [
        [False, False, True, False, False, False],  # q1's other gold (c) is not its negative; all else stays
        [False, False, False, False, False, False],
        [True, False, False, False, False, False],
    ]
    page = PairCollator("", "", mask="page")(rows)["mask"]  # the corpus pairs' mask: one page, all masked
    assert page[0].tolist() == [False, True, True, True, True, True]


@pytest.fixture
def part_overrides(protocol_config: Callable[..., DictConfig]) -> list[str]:
    return [o for o in protocol_config.base if not o.startswith("corpus=")]  # type: ignore[attr-defined]


def test_rows_pair_each_gold_chunk_with_hard_negatives_from_the_ranking(part_overrides: list[str]) -> None:
    from fixgraph.evaluation.gold import map_gold
    from fixgraph.evaluation.splits import resolve_questions
    from fixgraph.pipeline.stages import load_chunks, load_documents
    from fixgraph.training.question_pairs import question_rows

    part = Part("dev", "mallard_folder")
    rows = question_rows([part], "dense", negatives=2, negative_pool=4, seed=0, overrides=lambda c: part_overrides)
    assert rows == question_rows([part], "dense", 2, 4, 0, lambda c: part_overrides)

    cfg = compose([*part_overrides, "corpus=mallard_folder", "split=dev"])
    questions = resolve_questions(cfg, None, None).questions
    chunks = load_chunks(cfg)
    mapping = map_gold(questions, load_documents(cfg), chunks)
    gold = {
        q.question: {c for i in mapping.for_question(q.qid) if i.status == "mapped" for c in i.chunk_ids}
        for q in questions
    }
    expected = sorted((q, c) for q, chunk_ids in gold.items() for c in chunk_ids)
    assert sorted((r["query"], r["positive"]) for r in rows) == expected  # one row per gold chunk
    assert expected and {r["query_kind"] for r in rows} == {"dev_question"}
    texts = {c.id: c.index_text() for c in chunks}
    for r in rows:
        assert len(r["negatives"]) == 2 and len(set(r["negatives"])) == 2
        assert not set(r["negatives"]) & gold[r["query"]]  # never one of the question's gold chunks
        assert r["positive_text"] == texts[r["positive"]] and r["negative_texts"] == [texts[n] for n in r["negatives"]]
        assert r["doc_id"].startswith("mallard_folder/")  # page ids of two corpora never meet


def test_locked_questions_are_refused(part_overrides: list[str]) -> None:
    from fixgraph.training.question_pairs import question_rows

    with pytest.raises(Exception, match="locked"):
        question_rows([Part("test", "mallard_folder")], "bm25", 2, 4, 0, lambda c: part_overrides)


def test_a_part_on_the_callers_corpus_keeps_the_folder_it_is_read_from(tmp_path: Path) -> None:
    """A corpus read in place (`corpus.snapshot_dir=...` on the command line) stays where it is for the
    parts on it, in both trainers' data (bi-encoder and query encoder); other corpora's parts fetch their own."""
    from fixgraph.training.question_pairs import caller_overrides, part_overrides

    cfg = compose(["corpus=mallard_folder", f"corpus.snapshot_dir={tmp_path}", f"paths.artifacts={tmp_path}/a"])
    own = part_overrides(cfg, "mallard_folder")
    assert f"corpus.snapshot_dir={tmp_path}" in own and f"paths.artifacts={tmp_path}/a" in own
    other = part_overrides(cfg, "gnome_help")
    assert f"paths.artifacts={tmp_path}/a" in other and not any(o.startswith("corpus.") for o in other)
    assert caller_overrides(cfg)("mallard_folder") == own


def test_the_trainer_and_ltr_ft_read_the_model_trained_without_the_scored_corpus() -> None:
    from fixgraph.training.stages import build_trainer

    for corpus in ("gnome_help", "evolution_help"):
        cfg = compose([f"corpus={corpus}", "+retriever@systems.ltr_ft=ltr_ft"])
        trainer_cfg = cfg.training.trainers.bi_encoder_mpnet_questions
        trainer = build_trainer(trainer_cfg)
        assert trainer.mask == "question" and trainer.data.query_kinds == ["dev_question"]  # type: ignore[attr-defined]
        assert all(p.corpus != corpus for p in trainer.question_parts(cfg))  # type: ignore[attr-defined]
        system = cfg.systems.ltr_ft
        models = {system.first_stage.embedder.model, system.first_stage.first_stage.embedder.model}
        assert models == {trainer_cfg.output} and corpus in trainer_cfg.output
    with pytest.raises(ValueError, match="mask must be one of page, question"):
        build_trainer(OmegaConf.merge(trainer_cfg, {"mask": "corpus"}))


def test_ltr_dev_reads_one_model_trained_on_every_corpus_questions_whatever_the_corpus() -> None:
    from fixgraph.training.stages import build_trainer

    outputs = set()
    for corpus in ("gnome_help", "evolution_help"):
        cfg = compose([f"corpus={corpus}", "experiment=leaderboard"])
        trainer_cfg = cfg.training.trainers.bi_encoder_mpnet_dev
        trainer = build_trainer(trainer_cfg)
        assert {p.corpus for p in trainer.question_parts(cfg)} == {"gnome_help", "evolution_help"}  # type: ignore[attr-defined]
        system = cfg.systems.ltr_dev
        models = {system.first_stage.embedder.model, system.first_stage.first_stage.embedder.model}
        assert models == {trainer_cfg.output} and corpus not in trainer_cfg.output
        outputs.add(trainer_cfg.output)
    assert len(outputs) == 1


def test_a_system_whose_model_is_not_trained_is_refused_naming_the_command(
    fixture_config: Callable[..., DictConfig],
) -> None:
    from fixgraph.training.stages import MANIFEST, require_models

    cfg = fixture_config(["+retriever@systems.ltr_ft=ltr_ft"])  # the preset holds bm25 too
    require_models(cfg, {"bm25": cfg.systems.bm25})  # names no trained model
    with pytest.raises(ConfigError, match=r"system ltr_ft needs trainer bi_encoder_mpnet_questions's model .*"
                       r"run `fixgraph train --trainer bi_encoder_mpnet_questions corpus=mallard_folder`"):  # fmt: skip
        require_models(cfg, cfg.systems)
    output = Path(cfg.training.trainers.bi_encoder_mpnet_questions.output)
    output.mkdir(parents=True)
    (output / MANIFEST).write_text("{}")
    require_models(cfg, cfg.systems)  # trained now: nothing to refuse


def test_a_missing_model_folder_says_how_to_train_it(tmp_path: Path) -> None:
    from fixgraph.modelpaths import ModelNotFoundError, resolve_model_path

    with pytest.raises(ModelNotFoundError, match=r"model folder .*/models/x does not exist.*fixgraph train --trainer"):
        resolve_model_path(str(tmp_path / "models" / "x"))
    with pytest.raises(ModelNotFoundError, match="neither a folder nor an installed model package"):
        resolve_model_path("no_such_model_package")


def test_the_fold_sweep_tunes_ltr_dev_on_questions_its_model_never_saw() -> None:
    """sweep=ltr_dev_fold_a: every model in the trial's system is the fold model, trained on fold a only."""
    from fixgraph.experiment.sweep import resolve_spec
    from fixgraph.training.stages import build_trainer

    spec = resolve_spec(compose(["sweep=ltr_dev_fold_a"]), [])
    cfg = compose(list(spec.base))
    fold = cfg.training.trainers.bi_encoder_mpnet_dev_fold_a
    system = cfg.retriever
    models = {system.first_stage.embedder.model, system.first_stage.first_stage.embedder.model}
    assert models == {fold.output} and system.name == "ltr_dev"
    seen = {p.label for p in build_trainer(fold).question_parts(cfg)}  # type: ignore[attr-defined]
    held_out = {f"{cfg.split.name}:{cfg.corpus.name}", "evolution_bridge_all:evolution_help"}
    assert not seen & held_out  # the swept part and the check part
    every = {p.label for p in build_trainer(cfg.training.trainers.bi_encoder_mpnet_dev).question_parts(cfg)}  # type: ignore[attr-defined]
    assert seen | held_out == every  # the two folds split ltr_dev's own training questions


@pytest.mark.parametrize("name", ["gnome-help-dev-ltr-dev", "evolution-help-bridge-dev-ltr-dev"])
def test_the_ltr_dev_expected_files_rank_with_the_model_make_models_trained(name: str, tmp_path: Path) -> None:
    """A check runs in its own artifacts folder: one override keeps every fine-tuned embedder of the three
    systems on the model trained here, not on an empty folder under the check's artifacts."""
    from fixgraph.experiment.expected import isolated_config, load

    cfg = isolated_config(load(Path("benchmarks/expected") / f"{name}.yaml"), tmp_path)
    embedders = [
        cfg.systems.dense_dev_blocks.embedder,
        cfg.systems.link_expansion_dev_blocks.embedder,
        cfg.systems.link_expansion_dev_blocks.first_stage.embedder,
        cfg.systems.ltr_dev.first_stage.embedder,
        cfg.systems.ltr_dev.first_stage.first_stage.embedder,
    ]
    assert {e.model for e in embedders} == {"artifacts/models/bi_encoder_mpnet_dev"}
    assert str(tmp_path) in cfg.paths.artifacts  # everything else is the check's own
