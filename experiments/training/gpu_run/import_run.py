"""Copy the training run that the device machine logged (its own MLflow store) into the project's store.

usage, in the repo root: python experiments/training/gpu_run/import_run.py .dev/mlflow.db .dev/mlruns
(prints the new run id; Hydra overrides after the two paths, e.g. tracking.uri=..., to try it on a copy)"""

import sys
from pathlib import Path

from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from fixgraph.config import compose
from fixgraph.tracking import setup

src_db, src_mlruns = sys.argv[1], Path(sys.argv[2])
src = MlflowClient(tracking_uri=f"sqlite:///{src_db}")
runs = [r for e in src.search_experiments() for r in src.search_runs([e.experiment_id])]
(run,) = [r for r in runs if r.data.tags.get("stage") == "train"]
cfg = compose(sys.argv[3:])  # e.g. tracking.uri=... paths.mlruns=... to try it on a copy
experiment_id = setup(cfg)
dst = MlflowClient(tracking_uri=str(cfg.tracking.uri))
tags = {**run.data.tags, "imported_from_run_id": run.info.run_id, "imported_from": src_db}
new = dst.create_run(experiment_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
rid = new.info.run_id
dst.log_batch(rid, params=[Param(k, v) for k, v in run.data.params.items()])
metrics = []
for key in run.data.metrics:
    metrics += [Metric(m.key, m.value, m.timestamp, m.step) for m in src.get_metric_history(run.info.run_id, key)]
for i in range(0, len(metrics), 900):
    dst.log_batch(rid, metrics=metrics[i : i + 900])
artifacts = next(src_mlruns.glob(f"**/{run.info.run_id}/artifacts"), None)
if artifacts is not None:
    for item in artifacts.iterdir():
        if item.is_dir():
            dst.log_artifacts(rid, str(item), artifact_path=item.name)
        else:
            dst.log_artifact(rid, str(item))
dst.set_terminated(rid, status=run.info.status, end_time=run.info.end_time)
print(rid, len(metrics), "metric points")
