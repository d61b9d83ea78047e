#!/bin/bash
# On the GPU box, first: install the carried wheels into .dev/site (kept between calls), then check that
# every import `fixgraph train` makes works, bitsandbytes runs 4-bit on CUDA, MLflow's SQLite store works,
# and fixgraph finds the carried corpus stages up to date. See README.md beside this file.
cd "$(dirname "$0")/../../.." || exit 1
t0=$(date +%s)
python3 -V; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .dev/site .dev/whl/*.whl || exit 2
echo "pip install: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD/.dev/site:$PWD PYTHONUNBUFFERED=1
python3 - <<'PY'
import importlib, time
t = time.time()
for m in ["torch", "transformers", "peft", "lightning", "bitsandbytes", "datasets", "mlflow", "hydra", "omegaconf",
          "gguf", "tokenizers", "accelerate", "safetensors", "sqlalchemy", "alembic", "pydantic"]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, "__version__", "?"), getattr(mod, "__file__", ""))
import torch, bitsandbytes as bnb
print("cuda", torch.cuda.is_available(), torch.version.cuda)
layer = bnb.nn.Linear4bit(64, 64, quant_type="nf4", compute_dtype=torch.float32).cuda()
x = torch.randn(4, 64, device="cuda", requires_grad=True)
layer(x).sum().backward()
print("4-bit forward/backward on cuda ok", x.grad.shape)
import fixgraph.cli, fixgraph.training.generator, fixgraph.training.stages, fixgraph.llm.hf_export  # noqa
from lightning.pytorch.loggers import MLFlowLogger  # noqa
import mlflow
mlflow.set_tracking_uri("sqlite:///.dev/probe.db"); mlflow.set_experiment("probe")
with mlflow.start_run():
    mlflow.log_metric("a", 1.0)
print("mlflow sqlite ok; imports", round(time.time() - t, 1), "s")
PY
echo "total $(( $(date +%s) - t0 )) s"
fg() { python3 -c 'import sys; from fixgraph.cli import main; sys.exit(main())' "$@"; }
t1=$(date +%s)
fg chunk 2>&1 | tail -4
echo "fixgraph chunk: $(( $(date +%s) - t1 )) s"
