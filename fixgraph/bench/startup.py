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
import subprocess
import sys
from functools import partial
from typing import Any

from omegaconf import DictConfig

from fixgraph.bench import median_ms, options

CHECK = (
    "import json, sys\n"
    "from fixgraph.config import compose\n"
    "from fixgraph.schema import validate\n"
    "validate(compose([]))\n"
    "print(json.dumps({m: m in sys.modules for m in ('torch', 'lightning')}))\n"
)
PEERS = {"python": "pass", "import_lightning": "import lightning.pytorch"}


def python(code: str) -> str:
    """Run `code` in a fresh interpreter; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench startup: {code!r} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def run(cfg: DictConfig) -> dict[str, Any]:
    repeats = int(options(cfg).get("repeats", 5))
    printed: list[str] = []
    check = median_ms(lambda: printed.append(python(CHECK)), repeats) / 1000  # warm-up: the file cache
    peers = {name: median_ms(partial(python, code), repeats) / 1000 for name, code in PEERS.items()}
    return {
        "repeats": repeats,
        "median_s": {"config_check": round(check, 3), **{k: round(v, 3) for k, v in peers.items()}},
        "config_check_over_import_lightning": round(check / peers["import_lightning"], 3),
        "config_check_imports": json.loads(printed[-1].strip().splitlines()[-1]),
    }
