#!/bin/bash
# The packages `fixgraph train` needs on an offline CUDA box whose python 3.12 already has torch,
# lightning, accelerate, safetensors, numpy, pandas, pyarrow and scipy: wheels.txt (pinned, no
# dependencies resolved) into .dev/whl, ~55 MB. bitsandbytes keeps its CUDA 13 and CPU libraries only,
# mlflow drops its web UI bundle (the box only logs; the UI runs here).
# usage, in the repo root with PyPI reachable: bash experiments/training/gpu_run/wheels.sh
set -euo pipefail
here=experiments/training/gpu_run
out=.dev/whl
mkdir -p "$out"
grep -v antlr4 $here/wheels.txt | python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$out" -r /dev/stdin
.venv/bin/pip wheel -q --no-deps -w "$out" "$(grep antlr4 $here/wheels.txt)"   # an sdist only: built here
python3 - "$out" <<'PY'
import fnmatch, sys, zipfile
from pathlib import Path

drop = {
    "bitsandbytes-": ["*/libbitsandbytes_cuda1[12]*", "*/libbitsandbytes_rocm*", "*/libbitsandbytes_xpu*"],
    "mlflow-3": ["mlflow/server/js/*"],
}
for prefix, patterns in drop.items():
    for wheel in Path(sys.argv[1]).glob(prefix + "*.whl"):
        slim = wheel.with_suffix(".slim")
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as dst:
            for item in src.infolist():
                if not any(fnmatch.fnmatch(item.filename, p) for p in patterns):
                    dst.writestr(item, src.read(item))
        slim.replace(wheel)
PY
du -sh "$out"
