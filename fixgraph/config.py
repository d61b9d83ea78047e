"""Config composition: Hydra composes `conf/`; `params.yaml` is that composition, resolved.

Two ways in, one config object out:
- the CLI composes `conf/config.yaml` with Hydra overrides (`retriever=bm25 systems.bm25.k1=1.2`);
- DVC stages read `params.yaml`, which `fixgraph params` (or `dvc exp run -S ...`, through DVC's
  Hydra integration) writes as the same composition, so `dvc repro` and the CLI agree.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fixgraph.registry import Registry

T = TypeVar("T")


class ConfigError(ValueError):
    """A config that cannot be composed or used; the message says which option and why."""


def config_dir() -> Path:
    """`$FIXGRAPH_CONFIG_DIR`, else ./conf, else the conf/ next to the installed package."""
    env = os.environ.get("FIXGRAPH_CONFIG_DIR")
    if env:
        return Path(env).resolve()
    local = Path.cwd() / "conf"
    if (local / "config.yaml").exists():
        return local.resolve()
    return (Path(__file__).resolve().parents[1] / "conf").resolve()


def compose(overrides: Sequence[str] = (), config_name: str = "config", resolve: bool = True) -> DictConfig:
    """Compose conf/ with Hydra overrides and (by default) resolve every interpolation.

    Hydra re-reads and merges every YAML file of the tree per call (about 1 s here), so a process keeps
    its latest compositions, unresolved: before resolving, a composition is a function of conf/'s files,
    the config name and the overrides alone, and those three are the key. Only the overrides that choose
    config groups (`retriever=dense`) change which files are merged; value overrides
    (`systems.bm25.k1=1.2`, a test's folder) are applied to a copy of the kept tree the way Hydra applies
    them after merging (`with_values`), so a new value costs no new composition. Each caller gets its own
    copy, resolved on the call."""
    root = config_dir()
    digest = conf_digest(root)
    groups = config_groups(root)
    choices = tuple(o for o in overrides if is_group(o, groups))
    values = [o for o in overrides if not is_group(o, groups)]
    cfg = with_values(_kept(root, digest, config_name, choices), values) if values else None
    if cfg is None:  # no value overrides, or one that only Hydra handles (and reports, when it is wrong)
        cfg = _kept(root, digest, config_name, tuple(overrides))
    if resolve:
        try:
            OmegaConf.resolve(cfg)
        except OmegaConfBaseException as exc:
            raise ConfigError(str(exc)) from exc
    return cfg


def _kept(root: Path, digest: str, config_name: str, overrides: tuple[str, ...]) -> DictConfig:
    """A copy of Hydra's composition, unresolved, from the kept ones when it is there."""
    key = (digest, config_name, overrides)
    with _KEPT_LOCK:
        kept = _KEPT.get(key)
        if kept is not None:
            _KEPT.move_to_end(key)
    if kept is None:
        kept = compose_with_hydra(root, config_name, overrides)
        with _KEPT_LOCK:
            _KEPT[key] = kept
            while len(_KEPT) > _KEPT_MAX:
                _KEPT.popitem(last=False)
    return copy.deepcopy(kept)


def config_groups(root: Path) -> frozenset[str]:
    """The config groups of a conf/ folder: its sub-folders."""
    return frozenset(p.name for p in root.iterdir() if p.is_dir())


def is_group(override: str, groups: frozenset[str]) -> bool:
    """Does `override` choose a config group (`retriever=dense`, `+retriever@systems.x=dense`), as opposed
    to setting a value (`systems.x.k1=1.2`)?"""
    key = override.split("=", 1)[0].lstrip("+~")
    head = key.split("@")[0]
    return head.split("/")[0] in groups and "." not in head


def with_values(cfg: DictConfig, values: Sequence[str]) -> DictConfig | None:
    """`cfg` (a composition, struct mode on) with value overrides applied as Hydra 1.3 applies them once the
    defaults tree is merged (`ConfigLoaderImpl._apply_overrides_to_config`); None for any override Hydra
    would refuse, and for the forms left to Hydra (deletions, sweeps), so that the caller
    composes with Hydra and gets its result or its error message."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(values))
    except HydraException:
        return None
    for override in parsed:
        if override.package is not None or override.is_delete() or override.is_sweep_override():
            return None
        key, value = override.key_or_group, override.value()
        try:
            if override.is_add():
                if OmegaConf.select(cfg, key, throw_on_missing=False) is not None and not isinstance(
                    value, (dict, list)
                ):
                    return None  # Hydra: "Could not append to config. An item is already at ..."
                OmegaConf.update(cfg, key, value, merge=True, force_add=True)
            else:
                OmegaConf.update(cfg, key, value, merge=True, force_add=override.is_force_add())
        except OmegaConfBaseException:
            return None
    return cfg


_KEPT: OrderedDict[tuple[str, str, tuple[str, ...]], DictConfig] = OrderedDict()
_KEPT_LOCK = threading.Lock()
_KEPT_MAX = 32  # about 2 MB each


def conf_digest(root: Path) -> str:
    """sha256 over the names and bytes of every file under `root` (about 20 ms for conf/)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def compose_with_hydra(root: Path, config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Hydra's composition of `root`, unresolved: what `compose` pays for a composition it does not keep."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    try:
        # version_base=None matches DVC's own composition (dvc.utils.hydra.compose_and_dump).
        with initialize_config_dir(config_dir=str(root), version_base=None):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(str(exc)) from exc


def write_params(path: Path, overrides: Sequence[str] = ()) -> None:
    """Write the composition as params.yaml with DVC's own dumper, so both produce identical files."""
    from dvc.utils.hydra import compose_and_dump

    compose_and_dump(path, str(config_dir()), None, "config", str(config_dir()), list(overrides))


def load_params(path: Path) -> DictConfig:
    if not path.exists():
        raise ConfigError(f"{path}: params file not found; write it with `fixgraph params`")
    cfg = OmegaConf.load(path)
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return cfg


def load_config(params: Path | None, overrides: Sequence[str]) -> DictConfig:
    """The CLI's single entry: params.yaml (DVC stages) or a fresh composition (everything else)."""
    if params is not None:
        cfg = load_params(params)
        if overrides:
            merged = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
            assert isinstance(merged, DictConfig)
            return merged
        return cfg
    return compose(overrides)


def to_dict(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        return {str(k): v for k, v in container.items()}
    return dict(cfg)


def config_strings(node: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    """(key, value) of every string at any depth of a plain config tree; list items carry no key."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from config_strings(value, str(name))
    elif isinstance(node, list):
        for value in node:
            yield from config_strings(value)
    elif isinstance(node, str):
        yield key, node


def build(registry: Registry[T], cfg: Any, **extra: Any) -> T:
    """Instantiate the implementation registered under `cfg.kind` with the node's fields.

    The factory's signature is the option's schema: a key it does not take, or a required one that is
    missing, is a ConfigError naming the option, the key and the valid keys (nothing is ignored)."""
    fields = to_dict(cfg)
    kind = fields.pop("kind", None)
    if kind is None:
        raise ConfigError(f"{registry.group} config {fields.get('name', '?')!r} has no `kind`")
    factory = registry.get(str(kind))
    check_keys(registry.group, str(kind), factory, fields, extra, registry.shared)
    accepted = accepted_keys(factory)[0]
    fields = {k: v for k, v in fields.items() if k not in registry.shared or k in accepted}
    return factory(**fields, **extra)


def accepted_keys(factory: Callable[..., Any]) -> tuple[list[str], list[str], bool]:
    """(all keyword parameters, the required ones, whether it takes **kwargs) of a factory."""
    signature = inspect.signature(factory)
    keys, required, var_keyword = [], [], False
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_keyword = True
        elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            keys.append(param.name)
            if param.default is param.empty:
                required.append(param.name)
    return keys, required, var_keyword


def check_keys(
    group: str,
    kind: str,
    factory: Callable[..., Any],
    fields: Mapping[str, Any],
    extra: Mapping[str, Any],
    shared: Sequence[str] = (),
) -> None:
    keys, required, var_keyword = accepted_keys(factory)
    label = f"{group} {fields.get('name', kind)!r} (kind {kind})"
    unknown = sorted(set(fields) - set(keys) - set(shared))
    if unknown and not var_keyword:
        valid = ", ".join(dict.fromkeys(k for k in ["kind", *keys, *shared] if k not in extra))
        raise ConfigError(f"{label}: unknown key(s) {', '.join(unknown)}; valid keys: {valid}")
    missing = sorted(set(required) - set(fields) - set(extra))
    if missing:
        raise ConfigError(f"{label}: missing key(s) {', '.join(missing)}")


def systems_of(cfg: DictConfig) -> dict[str, DictConfig]:
    """Systems to evaluate, name -> system config: `systems` when an experiment sets it, else the selected
    retriever. A global `reranker` other than `none` is attached to every system here, as a `kind: reranked`
    system, so the benchmark, sweeps, the locked test, answers and the API all rank with it (one way)."""
    systems = cfg.get("systems") or {}
    chosen = {str(n): node for n, node in systems.items()} if systems else {str(cfg.retriever.name): cfg.retriever}
    reranker = cfg.get("reranker")
    if reranker is None or str(reranker.kind) == "none":
        return chosen
    attached: dict[str, DictConfig] = {}
    for name, node in chosen.items():
        if str(node.get("kind")) == "reranked":
            raise ConfigError(
                f"system {name!r} already has a reranker ({node.reranker.name}); with reranker={reranker.name} "
                "choose a first-stage retriever for it, or keep reranker=none"
            )
        attached[name] = OmegaConf.create(
            {
                "name": str(node.name),
                "kind": "reranked",
                "first_stage": to_dict(node),
                "reranker": to_dict(reranker),
                "depth": int(cfg.evaluation.depth),
            }
        )
    return attached
