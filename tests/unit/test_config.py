"""Every option of every Hydra group composes and instantiates through its group's registry."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from fixgraph.answer.base import build_answerer
from fixgraph.config import ConfigError, compose, systems_of
from fixgraph.corpus.chunking import CHUNKERS
from fixgraph.corpus.sources import build_corpus
from fixgraph.embedders.encoders import build_embedder
from fixgraph.evaluation.judge import build_judge
from fixgraph.evaluation.keyfacts import build_keyfact_matcher
from fixgraph.evaluation.splits import SPLITS, build_split
from fixgraph.experiment.runners import build_experiment
from fixgraph.experiment.sweep_spec import build_sweep
from fixgraph.kg.extract import build_extractor
from fixgraph.kg.ontology import build_ontology
from fixgraph.llm.base import build_llm
from fixgraph.modelpaths import MODEL_CARD
from fixgraph.pipeline.stages import trained_models
from fixgraph.registry import UnknownOptionError
from fixgraph.retrieval.base import build_retriever
from fixgraph.retrieval.rerank import build_reranker
from fixgraph.schema import GROUPS, validate
from fixgraph.serve.settings import build_settings
from fixgraph.training.stages import build_trainer
from tests.conftest import CONF, REPO, option_names


def _chunker(cfg: Any) -> Any:
    from fixgraph.config import build

    return build(CHUNKERS, cfg)


BUILDERS: dict[str, Callable[[Any], Any]] = {
    "corpus": build_corpus,
    "chunker": _chunker,
    "embedder": build_embedder,
    "retriever": build_retriever,
    "reranker": build_reranker,
    "extractor": build_extractor,
    "ontology": build_ontology,
    "llm": build_llm,
    "judge": build_judge,
    "keyfacts": build_keyfact_matcher,
    "answer": build_answerer,
    "split": build_split,
    "experiment": build_experiment,
    "sweep": build_sweep,
    "trainer": build_trainer,
    "serve": build_settings,
}

CASES = [(group, option) for group in BUILDERS for option in option_names(group)]


def test_every_group_has_a_builder_and_a_schema() -> None:
    groups = {p.name for p in CONF.iterdir() if p.is_dir()}
    assert groups == set(BUILDERS)
    assert groups == set(GROUPS)


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("+systems.hybrid.rrf_kk=5", r"systems.hybrid \(retriever 'hybrid', kind hybrid\): unknown key\(s\) rrf_kk"),
        ("+systems.hybrid.channels.bm25.k11=1", r"systems.hybrid.channels.bm25 .*unknown key\(s\) k11"),
        # appended onto an interpolated option, Hydra replaces it with a bare mapping: caught, not dropped
        ("+retriever.channels.dense.embedder.normalise=true", r"retriever.channels.dense.embedder: .*needs a `kind`"),
        ("+retriever.channels.bm25.k11=1", r"retriever.channels.bm25 .*unknown key\(s\) k11"),
        ("+evaluation.mainn_k=3", r"evaluation: .*mainn_k.*valid keys of evaluation"),
        ("+evaluation.bootstrap.seeds=3", r"evaluation: .*seeds"),
        ("+retrieverr.x=1", r"unknown top-level key\(s\) retrieverr"),
        (
            "+corpus.snapshot=x",
            r"corpus \(corpus 'gnome_help', kind mallard\): unknown key\(s\) snapshot; valid keys: .*snapshot_dir",
        ),
    ],
)
def test_unknown_keys_fail_naming_the_key_and_the_valid_ones(override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        validate(compose([override]))


def test_checking_a_config_imports_no_library_only_some_commands_use() -> None:
    """Every command checks its config first, trainer options included; when that imported the trainers'
    torch and lightning code it cost ~7 s a command (each DVC stage is one), and scipy.stats (evaluate's
    statistics) and datasketch (ingest's dedup) another ~1.5 s. The check must still see the trainers'
    keys: a misspelt one fails."""
    code = (
        "import json, sys\n"
        "from fixgraph.config import ConfigError, compose\n"
        "from fixgraph.schema import validate\n"
        "validate(compose([]))\n"
        "try:\n"
        "    validate(compose(['+training.trainers.cross_encoder.learning_ratee=1']))\n"
        "    error = ''\n"
        "except ConfigError as exc:\n"
        "    error = str(exc)\n"
        "heavy = ('torch', 'lightning', 'scipy.stats', 'datasketch')\n"
        "print(json.dumps([sorted(m for m in heavy if m in sys.modules), error]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    imported, error = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == []
    assert "training.trainers.cross_encoder" in error and "unknown key(s) learning_ratee" in error


def test_unknown_keys_fail_at_build_time_too() -> None:
    from fixgraph.config import build

    with pytest.raises(ConfigError, match="unknown key\\(s\\) rrf_kk; valid keys: kind, name, channels"):
        build_retriever({**systems_of(compose([]))["hybrid"], "rrf_kk": 5})
    with pytest.raises(
        ConfigError, match="split 'x' \\(kind file\\): missing key\\(s\\) exclude_locked, lock, questions"
    ):
        build(SPLITS, {"kind": "file", "name": "x"})


@pytest.mark.parametrize(("group", "option"), CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_option_composes_and_instantiates(group: str, option: str) -> None:
    cfg = compose([f"{group}={option}"])
    validate(cfg)  # strict: every key of the composition has a schema
    built = BUILDERS[group](cfg[group])
    assert built.name == cfg[group].name
    assert cfg[group].name == option, "an option's name field must match its file name"


def test_default_composition_has_three_systems() -> None:
    cfg = compose([])
    assert list(systems_of(cfg)) == ["bm25", "dense", "hybrid"]
    assert cfg.systems.hybrid.channels.bm25.k1 == cfg.systems.bm25.k1


def test_single_experiment_uses_selected_retriever() -> None:
    cfg = compose(["experiment=single", "retriever=bm25"])
    assert list(systems_of(cfg)) == ["bm25"]


def test_unknown_option_lists_valid_options() -> None:
    with pytest.raises(ConfigError) as err:
        compose(["retriever=nope"])
    message = str(err.value)
    assert "retriever/nope" in message
    for option in option_names("retriever"):
        assert option in message


def test_unknown_kind_lists_registered_kinds() -> None:
    cfg = compose([])
    node = dict(cfg.retriever)
    node["kind"] = "nope"
    with pytest.raises(UnknownOptionError, match=r"valid kinds: .*bm25.*dense.*hybrid"):
        build_retriever(node)


def test_params_yaml_is_the_default_composition(tmp_path: Path) -> None:
    """params.yaml (read by `dvc repro`) must not drift from conf/: regenerate with `fixgraph params`."""
    from fixgraph.config import write_params

    written = tmp_path / "params.yaml"
    write_params(written)
    assert yaml.safe_load(written.read_text()) == yaml.safe_load((REPO / "params.yaml").read_text())


def test_verifier_model_option_composes_and_instantiates() -> None:
    from fixgraph.answer.verify import build_verifier
    from fixgraph.config import to_dict

    cfg = compose(["+llm@answer.verify.llm=fake"])
    verifier, enabled = build_verifier(to_dict(cfg.answer.verify), answering_llm=None)
    assert enabled and verifier.own_model and verifier.llm.name == "fake"
    assert compose([]).answer.verify.llm is None  # default: the answering model verifies


def test_trained_models_finds_every_trained_folder_a_system_names_at_any_depth(tmp_path: Path) -> None:
    trained, stock = tmp_path / "trained", tmp_path / "stock"
    trained.mkdir()
    stock.mkdir()  # a folder without a card: not a model fixgraph trained
    (trained / MODEL_CARD).write_text('{"weights_sha256": {"model.safetensors": "a"}}')
    system = {"kind": "ltr", "first_stage": {"channels": [{"embedder": {"model": str(trained)}}, str(stock)]}}
    before = trained_models(system)
    assert list(before) == [str(trained)] and len(before[str(trained)]) == 64
    (trained / MODEL_CARD).write_text('{"weights_sha256": {"model.safetensors": "b"}}')  # retrained, same path
    assert trained_models(system) != before
    assert trained_models({"kind": "bm25", "k1": 1.2}) == {}


def test_a_kept_composition_is_a_fresh_copy_and_follows_edits_to_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fixgraph.config as config

    calls: list[Path] = []
    hydra_compose = config.compose_with_hydra

    def counted(root: Path, name: str, overrides: Any) -> Any:
        calls.append(root)
        return hydra_compose(root, name, overrides)

    monkeypatch.setattr(config, "compose_with_hydra", counted)
    monkeypatch.setattr(config, "_KEPT", type(config._KEPT)())
    first, second = tmp_path / "one", tmp_path / "two"
    for root in (first, second):
        root.mkdir()
        (root / "config.yaml").write_text("size: 3\nnamed: size ${size}\n")
    monkeypatch.setenv("FIXGRAPH_CONFIG_DIR", str(first))
    cfg = compose()
    cfg.size = 99  # a caller's change must not reach the next caller
    assert compose().named == "size 3" and compose(["size=4"]).named == "size 4"
    monkeypatch.setenv("FIXGRAPH_CONFIG_DIR", str(second))  # the same files elsewhere: the same composition
    assert compose().size == 3
    assert calls == [first]  # Hydra ran once: a value override is applied to the kept tree
    (second / "config.yaml").write_text("size: 5\nnamed: size ${size}\n")
    assert compose().named == "size 5"
    assert calls == [first, second]


SAME_AS_HYDRA = [
    ["corpus=mallard_folder", "corpus.snapshot_dir=data/x", "embedder=hashing", "evaluation.bootstrap.resamples=200"],
    ["experiment=single", "+retriever@systems.extra=bm25", "systems.extra.k1=0.5", "++evaluation.main_k=5"],
    ["+bench.repeats=3", "+bench.sizes=[1,2]", "+bench.opts={a: 1, b: x}", "+evaluation={depth: 50}"],
    ["evaluation.ks=[1,8]", "tracking.uri=null", "paths.artifacts=${paths.data}/art", "tracking.experiment='a b'"],
]


@pytest.mark.parametrize("overrides", SAME_AS_HYDRA, ids=range(len(SAME_AS_HYDRA)))
def test_value_overrides_on_a_kept_tree_compose_what_hydra_composes(overrides: list[str]) -> None:
    """`compose` applies value overrides to the kept composition of the group choices; the result, key order
    and struct mode included, is Hydra's own composition of the whole list."""
    from fixgraph.config import compose_with_hydra, config_dir

    ours, hydras = compose(overrides, resolve=False), compose_with_hydra(config_dir(), "config", overrides)
    assert OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(hydras)
    assert OmegaConf.is_struct(ours) and OmegaConf.is_struct(hydras)


@pytest.mark.parametrize(
    ("override", "hydra_says"),
    [
        ("evaluation.no_such_key=1", "Could not override 'evaluation.no_such_key'"),
        ("+evaluation.depth=5", "Could not append to config. An item is already at 'evaluation.depth'"),
        ("evaluation.depth=5,6", "Ambiguous value for argument 'evaluation.depth=5,6'"),
        ("nogroup@somewhere=x", "looks like a config group override"),
    ],
)
def test_a_value_override_hydra_refuses_fails_with_hydras_message(override: str, hydra_says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(hydra_says)):
        compose(["embedder=hashing", override])


def test_a_deletion_is_left_to_hydra() -> None:
    assert "uri" in compose(["embedder=hashing"]).tracking
    assert "uri" not in compose(["embedder=hashing", "~tracking.uri"]).tracking
