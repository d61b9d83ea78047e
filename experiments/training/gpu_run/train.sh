#!/bin/bash
# On the GPU box: join the model parts, install the carried wheels once, train the QLoRA adapter with
# `fixgraph train` (fit.accelerator auto takes the GPU), log to an MLflow store of its own, and pack the
# adapter + that store into $OUT as files under 16 MiB (result.tgz.aa, .ab, ...). Extra arguments are
# Hydra overrides. See README.md beside this file.
cd "$(dirname "$0")/../../.." || exit 1
t0=$(date +%s)
OUT=${OUT:-.dev/out}; mkdir -p "$OUT" models
export PYTHONPATH=$PWD/.dev/site:$PWD PYTHONUNBUFFERED=1
[ -d .dev/site/mlflow ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target .dev/site .dev/whl/*.whl || exit 2
NAME=qwen2.5-coder-0.5b-instruct-q4_k_m
GGUF=models/$NAME.gguf
[ -f $GGUF ] || cat .dev/p*/part > $GGUF   # the parts of split_model in README.md, in order (p1..p9)
SHA=$(python3 -c "from fixgraph.llm.gguf import CATALOG; print(CATALOG['$NAME'].sha256)")
echo "$SHA  $GGUF" | sha256sum -c - || exit 3
fg() { python3 -c 'import sys; from fixgraph.cli import main; sys.exit(main())' "$@"; }
T=qwen_coder_05b_qlora
fg train --trainer $T tracking.uri=sqlite:///.dev/mlflow.db paths.mlruns=.dev/mlruns "$@" 2>&1 | tee "$OUT/train.log" \
  | grep -v "^\s*$" | tail -60
rc=${PIPESTATUS[0]}
echo "train rc=$rc after $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
tar czf /tmp/result.tgz artifacts/models/*/$T .dev/mlflow.db .dev/mlruns
(cd "$OUT" && split -b 15M /tmp/result.tgz result.tgz.)
exit "$rc"
