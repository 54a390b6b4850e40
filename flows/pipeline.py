"""The ``lead-pipeline`` Prefect flow: one task per stage, each calling the stage's ``run(params)``.

The tasks run exactly the code ``dvc repro`` runs (``lead.stages.<stage>.run``), in DAG order, one at a time.
Flow parameters override ``params.yaml`` keys for this run (``["train.max_steps=20", ...]``, the same syntax as
``lead -S`` and ``dvc exp run -S``). Stages that can fail for transient reasons (sampling engines, the tracking
server) are retried. All stage runs of one flow run are nested under one MLflow parent run, whose id is returned
with every stage's summary.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from prefect import flow, get_run_logger, task

from lead.config import load_params

STAGES = ("curate", "warmstart", "calibrate", "train", "evaluate")
# Sampling engines and the tracking store can fail transiently; training resumes from its checkpoints.
RETRIES = {"calibrate": 2, "train": 1, "evaluate": 2}


def _stage_task(name: str):
    @task(name=name, retries=RETRIES.get(name, 0), retry_delay_seconds=10)
    def run_stage(params_path: str, overrides: list[str]) -> dict[str, Any]:
        params = load_params(params_path, overrides)
        summary = importlib.import_module(f"lead.stages.{name}").run(params)
        get_run_logger().info("%s finished: %s", name, summary)
        return summary

    return run_stage


TASKS = {name: _stage_task(name) for name in STAGES}


@flow(name="lead-pipeline")
def lead_pipeline(
    overrides: list[str] | None = None, params_path: str = "params.yaml", stages: list[str] | None = None
) -> dict[str, Any]:
    """Run the pipeline's stages in order; returns each stage's summary and the MLflow parent run id."""
    import mlflow

    from lead.tracking import PARENT_RUN_ENV, tracking_uri

    overrides = overrides or []
    params = load_params(params_path, overrides)  # bad params stop here, before any stage runs
    chosen = stages or list(STAGES)
    unknown = sorted(set(chosen) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; known: {', '.join(STAGES)}")
    mlflow.set_tracking_uri(tracking_uri(params))
    mlflow.set_experiment(params.tracking.experiment)
    with mlflow.start_run(run_name="lead-pipeline", tags={"stage": "pipeline"}) as parent:
        mlflow.log_params({"overrides": " ".join(overrides) or "-"})
        os.environ[PARENT_RUN_ENV] = parent.info.run_id
        try:
            results = {name: TASKS[name](params_path, overrides) for name in STAGES if name in chosen}
        finally:
            os.environ.pop(PARENT_RUN_ENV, None)
    return {"mlflow_parent_run_id": parent.info.run_id, "stages": results}


if __name__ == "__main__":
    lead_pipeline()
