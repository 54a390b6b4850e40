"""MLflow, in one place: where runs go, one parent run per pipeline run, one child run per stage.

* Tracking URI: ``tracking.uri`` in params, else ``MLFLOW_TRACKING_URI``, else an sqlite file at the
  repository root (an *absolute* URI, so runs started from another folder — ``dvc exp run --temp``, a Prefect
  worker — land in the same store). A new experiment in a local sqlite store keeps its artifacts in ``mlruns/``
  beside the database (:func:`use_experiment`), not in ``./mlruns`` of whatever the working directory is.
* :func:`stage_run` opens the stage's run, tagged ``stage=<name>``, nested under the pipeline's parent run
  when ``LEAD_PARENT_RUN_ID`` is set (the Prefect flow sets it). A run that raises is marked FAILED before
  the exception propagates (MLflow's atexit handler would otherwise mark it FINISHED); one stopped from outside
  (:class:`Terminated` by SIGTERM, ``KeyboardInterrupt`` by Ctrl-C or a cancelled flow's SIGINT) is marked KILLED.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lead.config import Params
from lead.io.files import repo_root

PARENT_RUN_ENV = "LEAD_PARENT_RUN_ID"


class Terminated(SystemExit):
    """The process was sent SIGTERM (raised by the stages' handler, :func:`lead.stages._common.stage_main`)."""


def tracking_uri(params: Params) -> str:
    """The MLflow tracking URI for ``params`` (see the module docstring for the order of precedence)."""
    if params.tracking.uri:
        return params.tracking.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{repo_root() / 'mlflow.db'}"


def use_experiment(params: Params) -> None:
    """Point MLflow at ``params``' store and experiment, creating the experiment if it is new.

    A new experiment in a local sqlite store keeps its artifacts in ``mlruns/`` beside the database file.
    MLflow's default is ``./mlruns`` under whatever the working directory is, so a run against a throw-away
    store (a test, a benchmark) would write its artifacts into the repository's own ``mlruns/``.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    uri = tracking_uri(params)
    mlflow.set_tracking_uri(uri)
    name = params.tracking.experiment
    if uri.startswith("sqlite:///") and mlflow.get_experiment_by_name(name) is None:
        database = Path(uri.removeprefix("sqlite:///")).absolute()
        try:
            mlflow.create_experiment(name, artifact_location=(database.parent / "mlruns").as_uri())
        except MlflowException as exc:  # created by another process in between
            if mlflow.get_experiment_by_name(name) is None:
                raise exc from None
    mlflow.set_experiment(name)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (MLflow params and metrics are flat)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


@contextlib.contextmanager
def stage_run(
    params: Params,
    stage: str,
    *,
    log_sections: tuple[str, ...] = (),
    run_id: str | None = None,
    name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """An MLflow run for one stage, tagged ``stage=<stage>`` (and ``tags``), named ``name`` (default: the
    stage), with the given params sections logged.

    ``run_id`` re-opens an existing run (a resumed training continues its own run instead of starting a new one).
    """
    import mlflow

    use_experiment(params)
    parent = os.environ.get(PARENT_RUN_ENV)
    tags = {"stage": stage, **(tags or {}), **({"mlflow.parentRunId": parent} if parent else {})}
    nested = mlflow.active_run() is not None  # inside the Prefect flow's parent run
    opened = (
        mlflow.start_run(run_id=run_id, nested=nested)
        if run_id
        else mlflow.start_run(run_name=name or stage, tags=tags, nested=nested)
    )
    with opened as run:  # ends the run FINISHED, or FAILED on any exception
        if not run_id:  # params of a resumed run are already logged (and MLflow refuses to change them)
            for section in log_sections:
                # Only the sections logged are read (the DAG contract test checks what a stage reads).
                values = getattr(params, "register_" if section == "register" else section)
                mlflow.log_params(flatten({section: values.model_dump(mode="json", by_alias=True)}))
        try:
            yield run
        except (Terminated, KeyboardInterrupt):
            mlflow.end_run("KILLED")  # stopped from outside, not failed; MLflow's own exit then ends nothing
            raise
