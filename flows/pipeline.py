"""The ``lead-pipeline`` Prefect flow: one task per DVC stage, so ``dvc repro`` and Prefect run the same thing.

Each task runs ``dvc repro --single-item <stage>``: DVC stays the single judge of what is stale (an up-to-date
stage is skipped in a second) and of data versions (``dvc.lock``), and the stage code is the
``python -m lead.stages.<stage>`` that ``dvc.yaml`` names. Prefect adds when and where (deployments in
``prefect.yaml``), retries on the stages that can fail transiently, and logs.

Where a run runs:

* **No overrides: in the workspace**, exactly ``dvc repro`` of the chosen stages — a no-op when the workspace
  is up to date, else its ``dvc.lock`` and outputs brought up to date, as ``make run`` would. That is what a
  scheduled run of the committed params is for, and what the GPU deployment pushes from its fresh clone.
* **With overrides: as a DVC experiment, in a copy** (:mod:`flows.experiment`) — a git worktree of the
  workspace's ``HEAD`` with its uncommitted changes, sharing its DVC cache, the overrides written into the
  copy's ``params.yaml``. The stages run there, the result is saved with ``dvc exp save -n <name>`` (the
  workspace's ``dvc exp show`` lists it; ``dvc exp apply <name>`` brings it in), and the copy is removed. The
  workspace is never written: ``params.yaml`` byte for byte, ``git status``, ``dvc status`` are as before the
  run — finished, failed or killed — and a user may edit it meanwhile. Overrides are a question ("what if
  ``train.max_steps`` were 200?"), not a new state of the workspace; ``dvc exp run -S`` answers the same way.
  Not always a copy: a run without overrides would then pay a checkout of every output to find nothing to do,
  and its results would never reach the workspace that asked for them.

  Why not ``dvc exp run --temp``: it reproduces the whole DAG in one DVC process, so Prefect would see one task
  instead of one per stage (no per-stage retries, logs or states). The copy is what ``--temp`` makes — a
  separate working tree on the same cache — with the per-stage tasks kept.

The tracking store is the workspace's (``MLFLOW_TRACKING_URI`` for the stages, as the workspace resolves it),
so a run in a copy logs where any other run does. Every stage's MLflow run is nested under the flow's parent
run, which records the overrides, the stages, the params and ``dvc.lock`` the run used and, for an
experiment, its name and commit (tags ``dvc.experiment``, ``dvc.experiment_rev``).

Flow parameters:

* ``overrides`` — ``["train.max_steps=20", ...]``, the syntax of ``lead -S`` and ``dvc exp run -S``. They are
  validated first: bad params stop the run before any stage.
* ``stages`` — a subset of :data:`lead.dag.STAGES`, run in DAG order.
* ``workspace`` — the DVC workspace (default: the current folder; a deployment sets it with its pull step).
* ``pull`` / ``push`` — fetch outputs the DVC remote already has instead of recomputing them (``dvc repro
  --pull``), and ``dvc push`` the results at the end: what a run on a fresh clone (the GPU deployment) needs.

One flow at a time per workspace: the flow holds an exclusive file lock for its whole run and waits for it.
Holding it, the flow first removes what a killed flow left — its copy, and the commands still running there
or in the workspace (:func:`flows.commands.stop_orphans`).

What each stage did — ran, skipped as up to date, restored from DVC's run cache, pulled — is read from ``dvc
repro``'s own words; a stage that did not run shows in Prefect as a ``Skipped`` (``Cached``, ``Pulled``) state,
and gets one line in the run log (:func:`flows.summary.stage_line`). At the end, finished or not, the flow run
gets a markdown artifact (key ``lead-pipeline-summary``): each stage's outcome, headline and MLflow run, the
registered version, where the results are. The flow's result holds each stage's summary (the JSON it wrote)
and outcome, the MLflow parent run id and the experiment (``None`` for a run in the workspace).

``python -m flows.pipeline -S key=value --stages a,b`` runs the flow once, on Prefect's temporary server
unless ``PREFECT_API_URL`` names one (:mod:`flows.prefect_api`: started under a lock, so that two flows
started at once on a fresh ``PREFECT_HOME`` do not both migrate its database).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from prefect import Task, flow, get_run_logger, task
from prefect.states import Completed, Failed
from pydantic import WithJsonSchema

from flows.commands import CommandError, dvc_executable, git, run, stage_env
from flows.experiment import clean_stale, experiment_copy, push_experiment, save_experiment
from flows.prefect_api import STOPPING, Override, check_then_start, completed, state_name, stopped
from flows.summary import OUTCOMES, StageRow, closing_line, markdown, results, stage_line
from lead.config import ParamsError, TrackingParams, load_params
from lead.dag import REGISTRY, STAGES, manifest_path, summary_file

# Sampling engines and the tracking store can fail transiently; training resumes from its checkpoints.
RETRIES = {"calibrate": 2, "train": 1, "calibrate_stage2": 2, "train_stage2": 1, "evaluate": 2, "register": 2}
LOCK = ".dvc/tmp/lead-pipeline.lock"
ARTIFACT_KEY = "lead-pipeline-summary"

# What `dvc repro --single-item <stage>` says it did, in DVC's words (dvc/stage/__init__.py, dvc/stage/run.py,
# dvc/stage/cache.py), in the order they are checked: a stage that ran says so, whatever else it printed.
VERDICTS = (
    ("ran", re.compile(r"^Running stage '(?P<stage>[^']+)'")),
    ("restored", re.compile(r"^Stage '(?P<stage>[^']+)' is cached - skipping run")),
    ("pulled", re.compile(r"^Pulling data for stage: '(?P<stage>[^']+)'")),
    ("skipped", re.compile(r"^Stage '(?P<stage>[^']+)' didn't change, skipping")),
)
# The Prefect state a task ends in when its stage did not run (a Completed state by another name).
STATE_NAMES = {"skipped": "Skipped", "restored": "Cached", "pulled": "Pulled"}


def verdict(stage: str, lines: list[str]) -> str:
    """What ``dvc repro --single-item <stage>`` did with ``stage``, from the lines it printed (a key of
    :data:`flows.summary.OUTCOMES`); ``"ran"`` when it said none of its verdicts."""
    for outcome, pattern in VERDICTS:
        if any((m := pattern.match(line)) and m["stage"] == stage for line in lines):
            return outcome
    return "ran"


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


@dataclasses.dataclass(frozen=True)
class FlowPlace:
    """Where a flow run runs (the workspace, or its DVC-experiment copy), its tracking URI, its MLflow parent
    run and, with overrides, the name its experiment is saved under."""

    run_dir: Path
    tracking_uri: str
    parent: Any
    experiment: str | None


@contextlib.contextmanager
def flow_place(
    root: Path, tracking: TrackingParams, overrides: list[str], run_name: str, stage: str
) -> Iterator[FlowPlace]:
    """Hold the workspace lock, clear what a killed flow left, then run in the workspace (no overrides) or in a
    DVC-experiment copy of it with ``overrides`` written in, under one MLflow parent run (``run_name``, tag
    ``stage``): what every lead flow does around its stages."""
    import mlflow
    from prefect.runtime import flow_run

    from lead.io.tracking import OWNER_TAG, owner, tracking_uri, use_experiment

    # chdir: the tracking URI's default (an sqlite file) is found from the workspace
    with workspace_lock(root), contextlib.chdir(root):
        clean_stale(root)
        uri = tracking_uri(tracking)
        use_experiment(tracking)
        name = f"{flow_run.name}-{str(flow_run.id)[:8]}" if overrides else None
        copy = (
            experiment_copy(root, str(flow_run.id), overrides) if overrides else contextlib.nullcontext(root)
        )
        with (
            copy as run_dir,
            mlflow.start_run(run_name=run_name, tags={"stage": stage, OWNER_TAG: owner()}) as parent,
        ):
            yield FlowPlace(run_dir, uri, parent, name)


@task(name="push", retries=2, retry_delay_seconds=30)
def push_task(workspace: str) -> None:
    """``dvc push``: the run's data and models to the DVC remote (the GPU deployment does this)."""
    run([dvc_executable(), "push"], Path(workspace))


@task(name="save-experiment")
def save_task(copy: str, name: str, stages: list[str], include: list[str] | None = None) -> str:
    """The copy's state as the DVC experiment ``name`` (its commit sha), with the ``include`` files too."""
    rev = save_experiment(Path(copy), name, stages, [Path(p) for p in include or []])
    get_run_logger().info(
        "saved as the DVC experiment %s (%s): `dvc exp apply %s` to bring it in", name, rev, name
    )
    return rev


def _stage_task(name: str) -> Task[..., Any]:
    @task(name=name, retries=RETRIES.get(name, 0), retry_delay_seconds=10)
    def run_stage(
        workspace: str,
        parent_run_id: str,
        tracking_uri: str,
        pull: bool = False,
        experiment: str | None = None,
    ) -> Any:
        env = stage_env(parent_run_id, tracking_uri)
        # A run with overrides is a DVC experiment (saved as one at the end): its stages see it as `dvc exp run`'s
        # do, by DVC's own variable, so that register registers nothing unless register.on_experiment.
        if experiment:
            env["DVC_EXP_NAME"] = experiment
        else:
            env.pop("DVC_EXP_NAME", None)
        said: list[str] = []
        started = time.perf_counter()
        # --pull: outputs the DVC remote already holds are fetched instead of recomputed (a fresh clone).
        try:
            run(
                [dvc_executable(), "repro", "--single-item", name, *(["--pull"] if pull else [])],
                Path(workspace),
                env,
                # only DVC's verdict lines are kept (a training stage prints progress for hours)
                on_line=lambda line: said.append(line) if any(p.match(line) for _, p in VERDICTS) else None,
            )
        except CommandError as exc:
            # Failed with the stage's own line, returned rather than raised: Prefect retries it the same way,
            # and logs no traceback of this task under the line the stage printed (the flow raises it again).
            return Failed(name=state_name("Failed", exc.reason), message=f"{name}: {exc.reason}", data=exc)
        outcome = verdict(name, said)
        params = load_params(Path(workspace) / "params.yaml")
        summary_path = Path(workspace) / summary_file(params.paths, name)
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        get_run_logger().info("%s", stage_line(name, outcome, summary))
        done = {
            "outcome": outcome,
            "summary": summary,
            "seconds": round(time.perf_counter() - started, 1),
            "manifest": str(Path(workspace) / manifest_path(params.paths, name))
            if "manifest" in REGISTRY[name].outputs  # (the params check publishes none)
            else None,
        }
        if outcome in STATE_NAMES:
            return Completed(name=STATE_NAMES[outcome], message=OUTCOMES[outcome], data=done)
        return done

    return run_stage


TASKS = {name: _stage_task(name) for name in STAGES}


def _stage_runs(parent: Any, rows: dict[str, StageRow]) -> dict[str, StageRow]:
    """``rows`` with each stage's MLflow run: its run under ``parent``, else the earlier run that published its
    outputs (:func:`lead.io.tracking.published_run`: a training reused, an up-to-date stage)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from lead.io.tracking import published_run

    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        output_format="list",
    )
    by_stage = {r.data.tags.get("stage"): r for r in children}
    out = {}
    for stage, row in rows.items():
        if stage in by_stage:
            info = by_stage[stage].info
            row = dataclasses.replace(row, run=(info.experiment_id, info.run_id))
        elif row.manifest and Path(row.manifest).exists():
            with contextlib.suppress(MlflowException):
                earlier = published_run(row.manifest)
                if earlier:
                    info = earlier.info
                    row = dataclasses.replace(row, run=(info.experiment_id, info.run_id), earlier_run=True)
        out[stage] = row
    return out


def _publish(
    parent: Any,
    tracking_uri: str,
    overrides: list[str],
    experiment: dict[str, str] | None,
    rows: dict[str, StageRow],
) -> None:
    """The flow run's summary artifact (:func:`flows.summary.markdown`)."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.runtime import flow_run

    rows = _stage_runs(parent, rows)
    text = markdown(
        flow_run=str(flow_run.name),
        tracking_uri=tracking_uri,
        parent=(parent.info.experiment_id, parent.info.run_id),
        overrides=overrides,
        experiment=experiment,
        rows=list(rows.values()),
    )
    create_markdown_artifact(key=ARTIFACT_KEY, markdown=text, description=f"lead-pipeline {flow_run.name}")


# A stage name, as the deployment's parameter schema says it: the Prefect server refuses another at creation.
StageName = Annotated[str, WithJsonSchema({"type": "string", "enum": list(STAGES)})]


@flow(name="lead-pipeline")
def lead_pipeline(
    overrides: list[Override] | None = None,
    stages: list[StageName] | None = None,
    workspace: str = ".",
    pull: bool = False,
    push: bool = False,
) -> dict[str, Any]:
    """Run the pipeline's DVC stages in order — in the workspace, or with ``overrides`` as a DVC experiment in a
    copy of it; returns each stage's summary and outcome, the MLflow parent run id and the experiment."""
    try:
        return _pipeline(Path(workspace).resolve(), list(overrides or []), stages, pull, push)
    except STOPPING as exc:
        return stopped("lead-pipeline", exc)


def _pipeline(
    root: Path, overrides: list[str], stages: list[str] | None, pull: bool, push: bool
) -> dict[str, Any]:
    import mlflow
    from prefect.runtime import flow_run

    params = load_params(root / "params.yaml", overrides)  # bad params stop here, before any stage runs
    unknown = sorted(set(stages or []) - set(STAGES))
    if unknown:
        raise ParamsError(f"unknown stage(s) {unknown}; known: {', '.join(STAGES)}")
    chosen = [name for name in STAGES if name in (stages or STAGES)]
    if shutil.which(dvc_executable()) is None:
        raise FileNotFoundError("dvc is not installed in this environment (make setup)")
    logger = get_run_logger()

    with flow_place(root, params.tracking, overrides, "lead-pipeline", "pipeline") as place:
        run_dir, uri, parent, name = place.run_dir, place.tracking_uri, place.parent, place.experiment
        mlflow.log_params({"overrides": " ".join(overrides) or "-", "stages": ",".join(chosen)})
        mlflow.log_artifact(str(run_dir / "params.yaml"))
        rows = {stage: StageRow(stage, "not run") for stage in chosen}
        experiment = None
        try:
            for stage in chosen:
                rows[stage] = StageRow(stage, "failed")  # until its task returns
                state = TASKS[stage](str(run_dir), parent.info.run_id, uri, pull, name, return_state=True)
                done = state.result()  # the stage's error, if it failed
                rows[stage] = StageRow(
                    stage, done["outcome"], done["summary"], done["seconds"], manifest=done["manifest"]
                )
            if name:
                rev = save_task(str(run_dir), name, chosen)
                baseline = git(["rev-parse", "HEAD"], root).strip()
                experiment = {"name": name, "rev": rev, "baseline": baseline}
                mlflow.set_tags({"dvc.experiment": name, "dvc.experiment_rev": rev})
            if push:
                push_task(str(run_dir))
                if name:
                    pushed = push_experiment(run_dir, name)
                    logger.info(
                        "experiment %s: %s",
                        name,
                        f"its ref pushed to {pushed} (`dvc exp pull {pushed} {name}` elsewhere)"
                        if pushed
                        else "no git remote `origin` here: its ref stays in this repository",
                    )
            if (run_dir / "dvc.lock").exists():
                mlflow.log_artifact(str(run_dir / "dvc.lock"))
        finally:
            try:
                _publish(parent, uri, overrides, experiment, rows)
            except Exception as exc:  # the summary is for people: never the reason a run fails
                logger.warning("no summary artifact for this run: %s", exc)
    ids = (parent.info.experiment_id, parent.info.run_id)
    return completed(
        closing_line(str(flow_run.name), uri, ids, experiment, list(rows.values())),
        results(list(rows.values())),
        {
            "mlflow_parent_run_id": parent.info.run_id,
            "stages": {stage: row.summary for stage, row in rows.items()},
            "outcomes": {stage: row.outcome for stage, row in rows.items()},
            "experiment": experiment,
        },
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.pipeline``: the flow once, with the flow's parameters as options."""
    parser = argparse.ArgumentParser(prog="python -m flows.pipeline", description=lead_pipeline.__doc__)
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--stages", type=lambda text: text.split(","), help="comma-separated (default: all)")
    parser.add_argument("--workspace", default=".", help="the DVC workspace (default: the current folder)")
    parser.add_argument(
        "--pull", action="store_true", help="fetch outputs the DVC remote has (dvc repro --pull)"
    )
    parser.add_argument("--push", action="store_true", help="dvc push the results at the end")
    args = parser.parse_args(argv)
    check_then_start(parser, args.workspace, args.overrides)
    state = lead_pipeline(
        overrides=args.overrides,
        stages=args.stages,
        workspace=args.workspace,
        pull=args.pull,
        push=args.push,
        return_state=True,
    )
    # The run's last log line said why; a traceback here would only repeat it.
    sys.exit(0 if state.is_completed() else 1)


if __name__ == "__main__":
    main()
