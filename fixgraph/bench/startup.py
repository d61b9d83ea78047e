"""Command start-up: what every `fixgraph` command pays before it does anything (each DVC stage is one).

Each measurement is a fresh interpreter (`python -c ...`), timed from outside, median over `repeats`
(`+bench.repeats=N`, default 5): `config_check` composes conf/ and checks every option against its
implementation (what every command does first; it imports each group's registry); `stage_check` reads
params.yaml and checks it, as each DVC stage's `fixgraph <stage> --params params.yaml` does; the peers, in
the same run, are the bare interpreter and `import lightning.pytorch` (what checking the trainer options
imported before the trainers kept torch and lightning inside `train()`). Also reported: which of the
heavy libraries only some commands use (`HEAVY`) the checks imported (none may be).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from typing import Any

from omegaconf import DictConfig

from fixgraph.bench import median_ms, options

# torch and lightning: the trainers; scipy.stats (~1 s): the statistics of evaluate and compare; datasketch
# (~0.5 s with the scipy it imports): the ingest stage's near-duplicate check
HEAVY = ("torch", "lightning", "scipy.stats", "datasketch")
IMPORTED = f"print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))\n"
CHECKS = {
    "config_check": "from fixgraph.config import compose\nvalidate(compose([]))\n",
    "stage_check": "from pathlib import Path\nfrom fixgraph.config import load_config\n"
    "validate(load_config(Path('params.yaml'), []))\n",
}
PEERS = {"python": "pass", "import_lightning": "import lightning.pytorch"}


def python(code: str) -> str:
    """Run `code` in a fresh interpreter; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench startup: {code!r} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def timed_check(check: str, repeats: int) -> tuple[float, dict[str, bool]]:
    """Median seconds of a fresh interpreter running `check`, and which HEAVY modules it imported."""
    code = f"import json, sys\nfrom fixgraph.schema import validate\n{check}{IMPORTED}"
    printed: list[str] = []
    seconds = median_ms(lambda: printed.append(python(code)), repeats) / 1000  # warm-up: the file cache
    return seconds, json.loads(printed[-1].strip().splitlines()[-1])


def run(cfg: DictConfig) -> dict[str, Any]:
    repeats = int(options(cfg).get("repeats", 5))
    medians: dict[str, float] = {}
    imports: dict[str, Any] = {}
    for name, check in CHECKS.items():
        medians[name], imports[f"{name}_imports"] = timed_check(check, repeats)
    for name, code in PEERS.items():
        medians[name] = median_ms(partial(python, code), repeats) / 1000
    return {
        "repeats": repeats,
        "median_s": {k: round(v, 3) for k, v in medians.items()},
        "config_check_over_import_lightning": round(medians["config_check"] / medians["import_lightning"], 3),
        **imports,
    }
