"""MLflow, in one place: where runs go, one parent run per pipeline run, one child run per stage.

* Tracking URI: ``tracking.uri`` in params, else ``MLFLOW_TRACKING_URI``, else an sqlite file at the
  repository root (an *absolute* URI, so runs started from another folder — a Prefect worker — land in the same
  store; under a queued or ``--temp`` ``dvc exp run``, whose copy DVC removes after, the root DVC names in
  ``DVC_ROOT``, the workspace the experiment came from). A new experiment in a local sqlite store keeps its
  artifacts in ``mlruns/`` beside the database (:func:`use_experiment`), not in ``./mlruns`` of whatever the
  working directory is.
* :func:`stage_run` opens the stage's run, tagged ``stage=<name>``, nested under the pipeline's parent run
  when ``LEAD_PARENT_RUN_ID`` is set (the Prefect flow sets it). A run that raises is marked FAILED before
  the exception propagates (MLflow's atexit handler would otherwise mark it FINISHED); one stopped from outside
  (:class:`Terminated` by SIGTERM, ``KeyboardInterrupt`` by Ctrl-C or a cancelled flow's SIGINT) is marked KILLED.
* A process killed with SIGKILL (the OOM killer, ``kill -9``, a node lost) cannot end its run, nor can one
  that lost its tracking server: the run says RUNNING for ever. Every run is tagged with the process that runs
  it (:data:`OWNER_TAG`: host, pid and the process's start time, so that a reused pid is not taken for it), and
  every stage run, before it starts, ends FAILED the RUNNING runs of its experiment whose process on this host
  is gone (:func:`end_abandoned_runs`, tagged :data:`ENDED_BY_TAG` with why). Another host's processes cannot
  be seen from here: their runs wait for a stage on their own host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lead.config import TrackingParams
from lead.io.files import repo_root

PARENT_RUN_ENV = "LEAD_PARENT_RUN_ID"
OWNER_TAG = "lead.process"  # host:pid:start time of the process that runs the run (:func:`owner`)
ENDED_BY_TAG = "lead.ended_by"  # who ended a run its own process could not end, and why
START_TOLERANCE_S = 1.0  # a process whose start time differs by more is another one under a reused pid


class Terminated(SystemExit):
    """The process was sent SIGTERM (raised by the stages' handler, :func:`lead.stages._common.stage_main`)."""


def tracking_uri(tracking: TrackingParams) -> str:
    """The MLflow tracking URI of params' ``tracking`` section (see the module docstring for the order of
    precedence)."""
    if tracking.uri:
        return tracking.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    # A queued or --temp `dvc exp run` runs the stages in a copy under .dvc/tmp/exps, which DVC removes after;
    # DVC_ROOT names the workspace it came from: the store is the workspace's.
    root = Path(os.environ["DVC_ROOT"]) if os.environ.get("DVC_ROOT") else repo_root()
    return f"sqlite:///{root / 'mlflow.db'}"


class _ServerRetries(logging.Filter):
    """urllib3's ``Retrying (...) after connection broken by ...`` warnings for the MLflow server at ``uri``,
    turned into one line each on stderr that names the server and the tries left: MLflow retries a server that
    went away for minutes (``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` tries, backing off by
    ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``), and a training step waits on its metrics meanwhile. Other hosts'
    warnings pass as they were."""

    def __init__(self, uri: str) -> None:
        super().__init__()
        self.uri = uri
        self.host = urlparse(uri).hostname

    def filter(self, record: logging.LogRecord) -> bool:
        host = (getattr(record, "__urllib3-retry-warning", None) or {}).get("host")
        if host != self.host or not isinstance(record.args, tuple) or len(record.args) < 2:
            return True
        retries, error = record.args[0], record.args[1]
        reason = getattr(error, "reason", None) or error
        text = re.sub(r"\[Errno \d+\] ", "", str(reason).rpartition(": ")[2]) or type(error).__name__
        print(
            f"MLflow server {self.uri} does not answer ({text}): retrying, {getattr(retries, 'total', '?')} "
            "tries left",
            file=sys.stderr,
            flush=True,
        )
        return False


def report_server_retries(uri: str) -> None:
    """Say each retry of the MLflow server at ``uri`` (an ``http(s)://`` store) as it happens
    (:class:`_ServerRetries`). One filter per process, for the store it uses now (urllib3 names the host of a
    retry, not its port, so two filters could not tell two servers of one host apart)."""
    logger = logging.getLogger("urllib3.connectionpool")
    for old in [f for f in logger.filters if isinstance(f, _ServerRetries)]:
        logger.removeFilter(old)
    if uri.startswith(("http://", "https://")):
        logger.addFilter(_ServerRetries(uri))


def server_gone(exc: BaseException) -> str | None:
    """The one line for an MLflow call that gave up on its server after every retry (None for anything else):
    the stage stops there; what it made so far stays (a training's checkpoints: run it again to resume)."""
    text = str(exc)
    if type(exc).__name__ != "MlflowException" or "Max retries exceeded" not in text:
        return None
    where = text.partition("API request to ")[2].split(" failed", 1)[0] or "the tracking server"
    return (
        f"the MLflow server did not answer {where} after every retry (MLFLOW_HTTP_REQUEST_MAX_RETRIES): the stage "
        "stopped; what it made so far is kept (a training resumes from its last checkpoint when run again)"
    )


def use_experiment(tracking: TrackingParams) -> str:
    """Point MLflow at the store and experiment of params' ``tracking`` section, creating the experiment if it is
    new.

    A new experiment in a local sqlite store keeps its artifacts in ``mlruns/`` beside the database file.
    MLflow's default is ``./mlruns`` under whatever the working directory is, so a run against a throw-away
    store (a test, a benchmark) would write its artifacts into the repository's own ``mlruns/``. Returns the
    experiment's id.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    uri = tracking_uri(tracking)
    report_server_retries(uri)
    mlflow.set_tracking_uri(uri)
    name = tracking.experiment
    if uri.startswith("sqlite:///") and mlflow.get_experiment_by_name(name) is None:
        database = Path(uri.removeprefix("sqlite:///")).absolute()
        try:
            mlflow.create_experiment(name, artifact_location=(database.parent / "mlruns").as_uri())
        except MlflowException as exc:  # created by another process in between
            if mlflow.get_experiment_by_name(name) is None:
                raise exc from None
    return mlflow.set_experiment(name).experiment_id


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


def owner() -> str:
    """``host:pid:start`` of this process (start: when it was created, seconds since the epoch): what later tells
    whether the process that runs a run is still alive, where a pid alone may since belong to another one."""
    import psutil

    me = psutil.Process()
    return f"{socket.gethostname()}:{me.pid}:{me.create_time():.2f}"


def process_alive(pid: int, started: float) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``started`` (a zombie, killed but not yet
    reaped by its parent, is dead)."""
    import psutil

    try:
        process = psutil.Process(pid)
        return (
            abs(process.create_time() - started) < START_TOLERANCE_S
            and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def abandoned(owner_tag: str | None, host: str, alive: Callable[[int, float], bool] = process_alive) -> bool:
    """Whether a RUNNING run tagged ``owner_tag`` (:func:`owner`) has lost its process: one on ``host`` (the
    only processes that can be seen from here) that ``alive`` says is gone. Untagged runs (another tool's, or
    older than the tag) and unreadable tags are left alone.

    >>> abandoned("node-1:41:1700000000.00", "node-1", alive=lambda pid, started: False)
    True
    >>> abandoned("node-2:41:1700000000.00", "node-1", alive=lambda pid, started: False)
    False
    """
    try:
        tag_host, pid, started = (owner_tag or "").rsplit(":", 2)
        return tag_host == host and not alive(int(pid), float(started))
    except ValueError:
        return False


def end_abandoned_runs(experiment_id: str, by: str) -> list[str]:
    """End FAILED the RUNNING runs of ``experiment_id`` whose process (:data:`OWNER_TAG`) on this host is gone,
    each tagged :data:`ENDED_BY_TAG` with ``by`` and the process; returns their ids. FAILED, not KILLED: the
    run did not finish, and whether a kill or a lost tracking server stopped it cannot be told afterwards."""
    from mlflow import MlflowClient

    client = MlflowClient()
    host = socket.gethostname()
    ended = []
    for run in client.search_runs([experiment_id], "attributes.status = 'RUNNING'", max_results=1000):
        tag = run.data.tags.get(OWNER_TAG)
        if abandoned(tag, host):
            pid = tag.rsplit(":", 2)[1]
            why = f"{by}: its process ({host}, pid {pid}) had ended without ending it (killed, or no server)"
            client.set_tag(run.info.run_id, ENDED_BY_TAG, why)
            client.set_terminated(run.info.run_id, "FAILED")
            ended.append(run.info.run_id)
    return ended


@contextlib.contextmanager
def stage_run(
    tracking: TrackingParams,
    stage: str,
    *,
    logged: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """An MLflow run for one stage in the store of ``tracking`` (params' section), tagged ``stage=<stage>`` (and
    ``tags``), named ``name`` (default: the stage), with ``logged`` logged as its params (flattened: ``{"train":
    {"alpha": 0.05}}`` is ``train.alpha``; :func:`lead.config.sections` gives a stage's sections as they are
    written in params.yaml).

    ``run_id`` re-opens an existing run (a resumed training continues its own run instead of starting a new one).
    Before it starts, the experiment's runs abandoned by their processes are ended (:func:`end_abandoned_runs`).
    """
    import mlflow

    end_abandoned_runs(use_experiment(tracking), by=f"stage {stage} (pid {os.getpid()})")
    parent = os.environ.get(PARENT_RUN_ENV)
    me = owner()
    tags = {
        "stage": stage,
        OWNER_TAG: me,
        **(tags or {}),
        **({"mlflow.parentRunId": parent} if parent else {}),
    }
    nested = mlflow.active_run() is not None  # inside the Prefect flow's parent run
    opened = (
        mlflow.start_run(run_id=run_id, nested=nested)
        if run_id
        else mlflow.start_run(run_name=name or stage, tags=tags, nested=nested)
    )
    with opened as run:  # ends the run FINISHED, or FAILED on any exception
        if run_id:  # running again, in this process: no longer what an earlier sweep ended
            mlflow.set_tag(OWNER_TAG, me)
            if ENDED_BY_TAG in run.data.tags:
                mlflow.MlflowClient().delete_tag(run_id, ENDED_BY_TAG)
        else:  # params of a resumed run are already logged (and MLflow refuses to change them)
            if logged:
                mlflow.log_params(flatten(dict(logged)))
        try:
            yield run
        except (Terminated, KeyboardInterrupt):
            mlflow.end_run("KILLED")  # stopped from outside, not failed; MLflow's own exit then ends nothing
            raise


# The MLflow tag naming the manifest a run published (its fingerprint: lead.io.fingerprint.publish).
MANIFEST_TAG = "lead.manifest"


def mark_run(run_id: str | None) -> Callable[[str], None] | None:
    """What :func:`lead.io.fingerprint.publish` calls before writing a manifest: tag the run ``run_id`` that made
    the outputs ``lead.manifest = <the manifest's fingerprint>`` (None: no run to tag)."""
    if not run_id:
        return None

    def tag(digest: str) -> None:
        import mlflow

        mlflow.MlflowClient().set_tag(run_id, MANIFEST_TAG, digest)

    return tag


def published_run(manifest: str | os.PathLike[str]) -> Any | None:
    """The newest finished MLflow run of the tracking store that published ``manifest`` (tagged by
    :func:`mark_run`), or None: the store holds no run that made these outputs (they were made against another
    store, or pulled from a DVC remote)."""
    import mlflow

    from lead.io.fingerprint import file_fingerprint

    runs = mlflow.search_runs(
        search_all_experiments=True,
        filter_string=f"tags.`{MANIFEST_TAG}` = '{file_fingerprint(manifest)}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
        output_format="list",
    )
    return runs[0] if runs else None
