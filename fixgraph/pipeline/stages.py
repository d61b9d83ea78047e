"""Pipeline stages: fetch -> ingest -> chunk -> index (per system). Evaluation lives in evaluate.py.

Each stage is a plain function of the config. It writes its outputs atomically with a `stage.json`
holding a key (config + input hashes + code hash), and skips itself when the key is unchanged:
`fixgraph run` gets the same incremental behaviour that DVC gives `dvc repro`. Outputs hold only what
the inputs determine; run statistics (seconds, chunk-cache hits) go to `<output>/_run/stage.json`,
which .dvcignore keeps out of DVC's hashes, so the same inputs give the same dvc.lock anywhere.
"""

from __future__ import annotations

import functools
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError, build, config_strings, to_dict
from fixgraph.corpus.chunking import CHUNKERS
from fixgraph.corpus.dedup import DedupConfig, deduplicate
from fixgraph.corpus.incremental import ChunkCache, chunk_incrementally
from fixgraph.corpus.linkgraph import build_link_graph, write_link_graph
from fixgraph.corpus.manifest import account_files, build_manifest
from fixgraph.corpus.models import Chunk, Document
from fixgraph.corpus.sources import CorpusSource, EmptyCorpusError, MissingCorpusError, build_corpus
from fixgraph.corpus.store import read_chunks, read_documents, write_chunks, write_documents
from fixgraph.embedders.encoders import counting_embeddings
from fixgraph.io import RUN_DIR, atomic_dir, read_json, sha256_file, stable_hash, tree_hash, write_json
from fixgraph.modelpaths import MODEL_CARD
from fixgraph.pipeline.layout import Layout
from fixgraph.retrieval.system import System, build_system

log = logging.getLogger(__name__)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class StageResult:
    stage: str
    status: str  # built | cached
    output: Path
    info: dict[str, Any] = field(default_factory=dict)  # what the inputs determine (in stage.json)
    run: dict[str, Any] = field(default_factory=dict)  # how the last build went (in _run/stage.json)


@functools.cache
def code_hash(*subpackages: str) -> str:
    """Hash of the source of the given fixgraph subpackages: code changes invalidate cached stages.
    Computed once per process (the code a process runs does not change under it)."""
    return stable_hash({sub: tree_hash(PACKAGE_ROOT / sub, "**/*.py")[0] for sub in subpackages})


def is_current(output_dir: Path, key: str) -> bool:
    marker = output_dir / "stage.json"
    return marker.exists() and read_json(marker).get("key") == key


def run_stage(name: str, output_dir: Path, key: str, produce: Callable[[Path], dict[str, Any]]) -> StageResult:
    """Run `produce` into a temp folder and swap it in, unless `output_dir` already holds this key.

    `produce` returns the stage's info; a `run` entry in it (statistics of this build, such as cache
    hits) is written with the build's seconds to `_run/stage.json`, outside what DVC hashes."""
    if is_current(output_dir, key):
        info = read_json(output_dir / "stage.json").get("info", {})
        run_file = output_dir / RUN_DIR / "stage.json"
        log.info("%s: up to date (%s)", name, output_dir)
        return StageResult(name, "cached", output_dir, info, read_json(run_file) if run_file.exists() else {})
    with atomic_dir(output_dir) as tmp:
        started = time.perf_counter()
        info = produce(tmp)
        run = {**info.pop("run", {}), "seconds": round(time.perf_counter() - started, 3)}
        write_json(tmp / "stage.json", {"stage": name, "key": key, "info": info})
        write_json(tmp / RUN_DIR / "stage.json", run)
    log.info("%s: built %s in %.1fs", name, output_dir, run["seconds"])
    return StageResult(name, "built", output_dir, info, run)


def fetch(cfg: DictConfig) -> dict[str, str]:
    return build_corpus(cfg.corpus).fetch()


def ensure_snapshot(source: CorpusSource, auto_fetch: object) -> None:
    """Raise MissingCorpusError (naming `fixgraph fetch`) when the raw snapshot is absent, unless
    `auto_fetch` (`corpus.auto_fetch`) lets the stage fetch it first. Only a corpus pinned to a package
    may set it: its fetch reads that package and nothing else and gives the same pages anywhere, where
    other sources would crawl a site or read the user's folders."""
    if not isinstance(auto_fetch, bool):
        raise ConfigError(f"corpus {source.name}: auto_fetch must be true or false, got {auto_fetch!r}")
    if auto_fetch and not getattr(source, "pinned", False):
        raise ConfigError(
            f"corpus {source.name}: auto_fetch is only for a corpus pinned to a package (`package:`); "
            f"fetch this one with `fixgraph fetch corpus={source.name}`"
        )
    try:
        source.check()
    except MissingCorpusError:
        if not auto_fetch:
            raise
        log.info("corpus %s: %s is missing; fetching it (corpus.auto_fetch)", source.name, source.snapshot_dir)
        source.fetch()
        source.check()


def ingest(cfg: DictConfig) -> StageResult:
    layout = Layout.from_config(cfg)
    source = build_corpus(cfg.corpus)
    ensure_snapshot(source, cfg.corpus.get("auto_fetch", False))
    snapshot_hash, files = tree_hash(source.snapshot_dir)
    # auto_fetch says how the snapshot may be obtained, not what it holds: not part of the key
    corpus = {k: v for k, v in to_dict(cfg.corpus).items() if k != "auto_fetch"}
    key = stable_hash({"corpus": corpus, "snapshot": snapshot_hash, "code": code_hash("corpus")})

    def produce(out: Path) -> dict[str, Any]:
        parsed = source.parse()
        if not parsed.documents:  # an empty corpus would only fail later, further from the cause
            raise EmptyCorpusError(empty_corpus_message(source.name, source.snapshot_dir, files, parsed.problems))
        dedup_config = DedupConfig.from_config(cfg.corpus.get("dedup"))
        deduped = deduplicate(with_aliases(parsed.documents, parsed.aliases), dedup_config)
        links, link_stats, link_problems = build_link_graph(
            deduped.documents, parsed.aliases, deduped.redirects, parsed.unavailable
        )
        file_counts, unaccounted = account_files(files, parsed.documents, parsed.problems, parsed.resources)
        problems = [*parsed.problems, *unaccounted, *link_problems]
        write_documents(out / layout.documents.name, deduped.documents)
        write_json(out / layout.problems.name, [p.as_dict() for p in problems])
        write_link_graph(out / layout.link_graph.name, links)
        write_json(out / layout.duplicates.name, deduped.groups)
        manifest = build_manifest(
            corpus=source.name,
            kind=str(cfg.corpus.kind),
            source=parsed.source_info,
            snapshot_hash=snapshot_hash,
            config_hash=stable_hash(corpus),
            files=files,
            parsed=len(parsed.documents),
            documents=deduped.documents,
            problems=problems,
            file_counts=file_counts,
            dedup=deduped.stats(dedup_config),
            links=link_stats,
            documents_hash=sha256_file(out / layout.documents.name),
        )
        write_json(out / layout.manifest.name, manifest)
        return {"corpus_hash": snapshot_hash, **manifest["counts"], "problems": manifest["problems"]}

    return run_stage("ingest", layout.corpus_dir, key, produce)


def with_aliases(docs: Sequence[Document], aliases: dict[str, str]) -> list[Document]:
    """Each document keeps the other ids that name it (redirected URLs, symlinked man pages)."""
    by_target: dict[str, list[str]] = {}
    for alias, target in aliases.items():
        by_target.setdefault(target, []).append(alias)
    return [d.model_copy(update={"aliases": sorted(by_target[d.id])}) if d.id in by_target else d for d in docs]


def empty_corpus_message(name: str, folder: Path, files: dict[str, str], problems: Sequence[Any]) -> str:
    kinds = Counter(p.kind for p in problems)
    first = "; ".join(f"{p.path}: {p.reason}" for p in problems[:3])
    return (
        f"corpus {name!r}: no parsable documents in {folder} ({len(files)} files"
        + (f"; problems: {dict(sorted(kinds.items()))}; e.g. {first}" if problems else "")
        + "). Check corpus.kind and corpus.snapshot_dir"
    )


def load_documents(cfg: DictConfig) -> list[Document]:
    layout = Layout.from_config(cfg)
    if not layout.documents.exists():
        raise FileNotFoundError(f"{layout.documents} not found; run `fixgraph ingest` first")
    return read_documents(layout.documents)


def chunk(cfg: DictConfig) -> StageResult:
    layout = Layout.from_config(cfg)
    ingest_result = ingest(cfg)
    key = stable_hash(
        {
            "chunker": to_dict(cfg.chunker),
            "documents": sha256_file(layout.documents),
            "code": code_hash("corpus"),
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        chunker = build(CHUNKERS, cfg.chunker)
        chunks, incremental = chunk_incrementally(chunker, load_documents(cfg), chunk_cache(cfg))
        write_chunks(out / layout.chunks.name, chunks)
        tokens = [c.n_tokens for c in chunks]
        info = {
            "chunks": len(chunks),
            "tokens_total": sum(tokens),
            "tokens_median": statistics.median(tokens) if tokens else 0,
            "tokens_max": max(tokens, default=0),
            "corpus_hash": ingest_result.info.get("corpus_hash", ""),
        }
        # tokens counted by the chunker's tokenizer (the embedder's), next to what they were made from
        write_json(
            out / "manifest.json",
            {
                **info,
                "corpus": str(cfg.corpus.name),
                "documents_hash": sha256_file(layout.documents),
                "chunks_hash": sha256_file(out / layout.chunks.name),
                "chunker": to_dict(cfg.chunker),
            },
        )
        # reused vs rechunked depends on the warmth of the chunk cache, not on the inputs
        return {**info, "run": {"incremental": incremental.as_dict()}}

    return run_stage("chunk", layout.chunks_dir, key, produce)


def chunk_cache(cfg: DictConfig) -> ChunkCache:
    """Per-document chunk cache for this corpus and chunker (config minus the cache path, plus code)."""
    chunker_cfg = to_dict(cfg.chunker)
    cache_dir = chunker_cfg.pop("cache_dir", None)
    if not cache_dir:
        return ChunkCache(None)
    key = stable_hash({"chunker": chunker_cfg, "code": code_hash("corpus")})[:16]
    return ChunkCache(Path(cache_dir) / str(cfg.corpus.name) / f"{key}.parquet")


def load_chunks(cfg: DictConfig) -> list[Chunk]:
    layout = Layout.from_config(cfg)
    if not layout.chunks.exists():
        raise FileNotFoundError(f"{layout.chunks} not found; run `fixgraph chunk` first")
    return read_chunks(layout.chunks)


# config keys whose value is a file an index is built from (besides the chunks): hashed into the key
INDEX_INPUT_KEYS = ("expansion",)


def index_inputs(node: Any) -> dict[str, str]:
    """path -> sha256 of every index input file a system config names, at any depth (missing: "")."""
    named = {value for key, value in config_strings(node) if key in INDEX_INPUT_KEYS and value}
    return {path: sha256_file(Path(path)) if Path(path).exists() else "" for path in named}


def index_key(cfg: DictConfig, system_cfg: DictConfig) -> str:
    layout = Layout.from_config(cfg)
    system = to_dict(system_cfg)
    key: dict[str, Any] = {
        "system": system,
        "chunks": sha256_file(layout.chunks),
        "code": code_hash("retrieval", "embedders"),
    }
    inputs, models = index_inputs(system), trained_models(system)
    if inputs:  # only then, so the keys of every other index stay what they were
        key["inputs"] = inputs
    if models:
        key["trained_models"] = models
    return stable_hash(key)


def trained_models(node: Any) -> dict[str, str]:
    """Folder -> card of every model fixgraph trained that a config names: a retrained model keeps its
    path, so an index built on its vectors must be keyed by its weights too."""
    folders = {value for _, value in config_strings(node) if value and (Path(value) / MODEL_CARD).is_file()}
    return {folder: sha256_file(Path(folder) / MODEL_CARD) for folder in folders}


def index(
    cfg: DictConfig,
    system: str,
    system_cfg: DictConfig,
    chunks: Sequence[Chunk] | None = None,
    *,
    stage_output: bool = False,
) -> StageResult:
    """Build (or find up to date) the index of one system over the current chunks.

    `stage_output` (the `index` command, i.e. the DVC stage) writes the stage's folder. Every other
    caller reuses that folder when its key matches and otherwise builds under the local folder, so a
    run with another config never rewrites a DVC output."""
    layout = Layout.from_config(cfg)
    if chunks is None:
        chunk(cfg)
        chunks = load_chunks(cfg)
    key = index_key(cfg, system_cfg)
    folder = layout.index_dir(system)
    if not stage_output and not is_current(folder, key):
        folder = layout.local_index_dir(system)

    def produce(out: Path) -> dict[str, Any]:
        with counting_embeddings() as count:
            build_system(system_cfg).build(chunks, out)
        run = {"texts_embedded": count.embedded, "texts_from_cache": count.from_cache}
        return {"system": system, "chunks": len(chunks), "run": run}

    return run_stage(f"index[{system}]", folder, key, produce)


def open_system(cfg: DictConfig, system: str, system_cfg: DictConfig, chunks: Sequence[Chunk]) -> System:
    """A system with its index loaded, building the index first if it is stale: how every caller
    (evaluation, sweeps, the candidate cache, answers, benchmarks, the API) gets one."""
    result = index(cfg, system, system_cfg, chunks)
    loading = time.perf_counter()
    with counting_embeddings() as on_load:  # what a system embeds on load (link expansion: link contexts)
        opened = build_system(system_cfg)
        opened.load(chunks, result.output)
    opened.index_cost = {
        "status": result.status,
        # the build that made this index (a cached index keeps it); texts already in the embedding cache
        # (embedded for another index of the same embedder) cost that build nothing: the counts say
        "build_seconds": float(result.run.get("seconds", float("nan"))),
        "texts_embedded": result.run.get("texts_embedded"),  # None for an index built before they were counted
        "texts_from_cache": result.run.get("texts_from_cache"),
        "bytes": folder_bytes(result.output),
        "load_seconds": time.perf_counter() - loading,
        "load_texts_embedded": on_load.embedded,
    }
    return opened


def folder_bytes(folder: Path) -> int:
    """Size of a stage's output, without its `_run/` records."""
    files = (p for p in folder.rglob("*") if p.is_file() and RUN_DIR not in p.relative_to(folder).parts)
    return sum(p.stat().st_size for p in files)
