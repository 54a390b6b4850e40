"""The ``lead-pipeline`` Prefect flow: one task per DVC stage, so ``dvc repro`` and Prefect run the same thing.

Each task runs ``dvc repro --single-item <stage>`` in the workspace: DVC stays the single judge of what is stale
(an up-to-date stage is skipped in a second) and of data versions (``dvc.lock``), and the stage code is the
``python -m lead.stages.<stage>`` that ``dvc.yaml`` names. Prefect adds when and where (deployments in
``prefect.yaml``), retries on the stages that can fail transiently, and logs.

Flow parameters:

* ``overrides`` — ``["train.max_steps=20", ...]``, the syntax of ``lead -S`` and ``dvc exp run -S``. They are
  validated first (bad params stop the run before any stage), written into ``params.yaml`` for the run — so
  DVC sees them as changed params and reruns exactly what depends on them — and the original ``params.yaml``
  is put back afterwards. The parent MLflow run records them, with the params and ``dvc.lock`` the run used.
* ``stages`` — a subset of :data:`lead.stages.STAGES`, run in DAG order.
* ``workspace`` — the DVC workspace (default: the current folder; a deployment sets it with its pull step).
* ``pull`` / ``push`` — fetch outputs the DVC remote already has instead of recomputing them (``dvc repro
  --pull``), and ``dvc push`` the results at the end: what a run on a fresh clone (the GPU deployment) needs.

One flow at a time per workspace (DVC takes a repo lock; two flows would trample params.yaml): the flow holds
an exclusive file lock for its whole run and waits for it. The result holds each stage's summary (the JSON the
stage wrote) and the MLflow parent run id; every stage's MLflow run is nested under that parent.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger, task

from lead.config import Params, apply_overrides, load_params
from lead.stages import STAGES

# Sampling engines and the tracking store can fail transiently; training resumes from its checkpoints.
RETRIES = {"calibrate": 2, "train": 1, "calibrate_stage2": 2, "train_stage2": 1, "evaluate": 2, "register": 2}
LOCK = ".dvc/tmp/lead-pipeline.lock"


def summary_file(params: Params, stage: str) -> Path:
    """The JSON each stage writes about its run (a DVC metrics file or output)."""
    return {
        "curate": params.paths.curated / "curation.json",
        "warmstart": params.paths.reports / "warmstart.json",
        "calibrate": params.paths.reports / "calibrate" / "summary.json",
        "train": params.paths.reports / "train.json",
        "calibrate_stage2": params.paths.reports / "calibrate_stage2" / "summary.json",
        "train_stage2": params.paths.reports / "train_stage2.json",
        "evaluate": params.paths.reports / "evaluate" / "metrics.json",
        "register": params.paths.reports / "register.json",
    }[stage]


def dvc_executable() -> str:
    """``dvc`` next to this interpreter (the project's venv), else whatever is on PATH."""
    local = Path(sys.executable).with_name("dvc")
    return str(local) if local.exists() else "dvc"


@contextlib.contextmanager
def workspace_lock(workspace: Path) -> Iterator[None]:
    """Hold an exclusive lock on the workspace for the whole flow run (waits for a running one to finish)."""
    path = workspace / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            get_run_logger().info("another lead-pipeline run holds %s: waiting for it", path)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def params_for_run(params_path: Path, overrides: list[str]) -> Iterator[None]:
    """``params.yaml`` with ``overrides`` applied while the block runs, the original restored afterwards."""
    if not overrides:
        yield
        return
    original = params_path.read_bytes()
    data = apply_overrides(yaml.safe_load(original) or {}, overrides)
    try:
        params_path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        yield
    finally:
        params_path.write_bytes(original)


def _dvc(args: list[str], workspace: str, env: dict[str, str] | None = None) -> None:
    """Run one dvc command in the workspace, its output streamed line by line to the task log (a training
    stage runs for hours); a failure raises with the end of that output."""
    logger = get_run_logger()
    cmd = [dvc_executable(), *args]
    logger.info("%s", " ".join(cmd))
    tail: collections.deque[str] = collections.deque(maxlen=60)
    with subprocess.Popen(
        cmd, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                logger.info("%s", line.rstrip())
                tail.append(line)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{''.join(tail)}")


@task(name="push", retries=2, retry_delay_seconds=30)
def push_task(workspace: str) -> None:
    """``dvc push``: the run's data and models to the DVC remote (the GPU deployment does this)."""
    _dvc(["push"], workspace)


def _stage_task(name: str):
    @task(name=name, retries=RETRIES.get(name, 0), retry_delay_seconds=10)
    def run_stage(workspace: str, parent_run_id: str, pull: bool = False) -> dict[str, Any]:
        # dvc.yaml's `python -m lead.stages...` must be this environment's python, wherever the worker started.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PATH": path, "LEAD_PARENT_RUN_ID": parent_run_id}
        # --pull: outputs the DVC remote already holds are fetched instead of recomputed (a fresh clone).
        _dvc(["repro", "--single-item", name, *(["--pull"] if pull else [])], workspace, env)
        params = load_params(Path(workspace) / "params.yaml")
        summary = Path(workspace) / summary_file(params, name)
        return json.loads(summary.read_text()) if summary.exists() else {}

    return run_stage


TASKS = {name: _stage_task(name) for name in STAGES}


@flow(name="lead-pipeline")
def lead_pipeline(
    overrides: list[str] | None = None,
    stages: list[str] | None = None,
    workspace: str = ".",
    pull: bool = False,
    push: bool = False,
) -> dict[str, Any]:
    """Run the pipeline's DVC stages in order; returns each stage's summary and the MLflow parent run id."""
    import mlflow

    from lead.io.tracking import use_experiment

    root = Path(workspace).resolve()
    overrides = list(overrides or [])
    params = load_params(root / "params.yaml", overrides)  # bad params stop here, before any stage runs
    chosen = list(stages or STAGES)
    unknown = sorted(set(chosen) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; known: {', '.join(STAGES)}")
    if shutil.which(dvc_executable()) is None:
        raise FileNotFoundError("dvc is not installed in this environment (make setup)")

    with workspace_lock(root), params_for_run(root / "params.yaml", overrides):
        cwd = Path.cwd()
        os.chdir(root)  # the tracking URI's default (an sqlite file) is found from the workspace
        try:
            use_experiment(params)
            with mlflow.start_run(run_name="lead-pipeline", tags={"stage": "pipeline"}) as parent:
                mlflow.log_params({"overrides": " ".join(overrides) or "-", "stages": ",".join(chosen)})
                mlflow.log_artifact(str(root / "params.yaml"))
                results = {
                    name: TASKS[name](str(root), parent.info.run_id, pull)
                    for name in STAGES
                    if name in chosen
                }
                if push:
                    push_task(str(root))
                if (root / "dvc.lock").exists():
                    mlflow.log_artifact(str(root / "dvc.lock"))
        finally:
            os.chdir(cwd)
    return {"mlflow_parent_run_id": parent.info.run_id, "stages": results}


if __name__ == "__main__":
    lead_pipeline()
