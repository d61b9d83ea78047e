"""From a sweep to a study's finalists, and from a finalist to the config that answers and serves with it.

The locked-test loop hands one resolved system config along every step: a sweep trial records the
system it scored (`system_config`, reranker folded in); `fixgraph finalists --from-sweep` records the
best trials' configs as finalists; `fixgraph test` scores exactly those; `finalist_config` puts one of
them back into a config for `fixgraph answers` and `fixgraph serve`.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.config import to_dict
from fixgraph.evaluation.protocol_errors import ProtocolError
from fixgraph.io import stable_hash

NO_RERANKER = {"name": "none", "kind": "none"}


def sweep_finalists(cfg: DictConfig, sweep_study: str, top: int, storage: str | None = None) -> dict[str, Any]:
    """finalist name -> resolved system config of the `top` best complete trials of a sweep study
    (distinct systems only; names `<system>-t<trial number>`)."""
    import optuna
    from optuna.trial import TrialState

    from fixgraph.experiment.sweep import default_storage, open_storage

    url = storage or default_storage(cfg)
    try:
        study = optuna.load_study(study_name=sweep_study, storage=open_storage(url))
    except KeyError:
        raise ProtocolError(f"no sweep study {sweep_study!r} in {url.split('@')[-1]}") from None
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    complete.sort(key=lambda t: (-float(t.value or 0) if maximize else float(t.value or 0), t.number))
    chosen: dict[str, Any] = {}
    seen: set[str] = set()
    for trial in complete:
        config = trial.user_attrs.get("system_config")
        if not config:
            raise ProtocolError(f"sweep {sweep_study!r} trial {trial.number} recorded no system config; sweep again")
        digest = stable_hash(config)
        if digest in seen:
            continue
        if trial.user_attrs.get("chunker") != to_dict(cfg.chunker):
            raise ProtocolError(
                f"sweep {sweep_study!r} trial {trial.number} was scored on another chunking; finalists are scored "
                f"together on one chunking: give the trial's chunker overrides ({trial.user_attrs.get('overrides')})"
            )
        seen.add(digest)
        chosen[f"{trial.user_attrs.get('system', 'system')}-t{trial.number}"] = config
        if len(chosen) == top:
            break
    if not chosen:
        raise ProtocolError(f"sweep {sweep_study!r} has no complete trials")
    return chosen


def finalist_config(cfg: DictConfig, study: str, finalist: str) -> DictConfig:
    """`cfg` with exactly one system: the recorded finalist (with the study's corpus and chunker, which
    its index and gold mapping depend on). Answer, LLM and judge settings stay the caller's."""
    from fixgraph.experiment.locked import StudyPaths, read_finalists

    record = read_finalists(StudyPaths.of(cfg, study))
    systems = record["config"].get("systems") or {}
    if finalist not in systems:
        raise ProtocolError(f"study {study!r} has no system {finalist!r}; recorded: {', '.join(systems)}")
    chosen = to_dict(cfg)
    chosen.update(
        {
            "systems": {finalist: systems[finalist]},
            "reranker": NO_RERANKER,  # folded into the recorded system already
            "corpus": record["config"]["corpus"],
            "chunker": record["config"]["chunker"],
        }
    )
    return OmegaConf.create(chosen)
