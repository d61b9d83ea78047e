"""Command start-up: what every `fixgraph` command pays before it does anything (each DVC stage is one).

Each measurement is a fresh interpreter (`python -c ...`), timed from outside, median over `repeats`
(`+bench.repeats=N`, default 5): `config_check` composes conf/ and checks every option against its
implementation (what every command does first; it imports each group's registry); the peers, in the
same run, are the bare interpreter and `import lightning.pytorch` (what checking the trainer options
imported before the trainers kept torch and lightning inside `train()`). Also reported: whether the
check imported torch or lightning (it must not).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

from omegaconf import DictConfig

from fixgraph.bench import options

CHECK = (
    "import json, sys\n"
    "from fixgraph.config import compose\n"
    "from fixgraph.schema import validate\n"
    "validate(compose([]))\n"
    "print(json.dumps({m: m in sys.modules for m in ('torch', 'lightning')}))\n"
)
PEERS = {"python": "pass", "import_lightning": "import lightning.pytorch"}


def timed(code: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"bench startup: {code!r} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def median_s(code: str, repeats: int) -> tuple[float, str]:
    runs = [timed(code) for _ in range(repeats + 1)][1:]  # the first run warms the file cache
    return round(statistics.median(s for s, _ in runs), 3), runs[-1][1]


def run(cfg: DictConfig) -> dict[str, Any]:
    repeats = int(options(cfg).get("repeats", 5))
    check, printed = median_s(CHECK, repeats)
    peers = {name: median_s(code, repeats)[0] for name, code in PEERS.items()}
    return {
        "repeats": repeats,
        "median_s": {"config_check": check, **peers},
        "config_check_over_import_lightning": round(check / peers["import_lightning"], 3),
        "config_check_imports": json.loads(printed.strip().splitlines()[-1]),
    }
