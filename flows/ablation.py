"""The ``lead-ablation`` Prefect flow: the cells of ``ablation/dvc.yaml`` as concurrent tasks, then the report.

``dvc repro`` runs stages one at a time (it holds the repository's lock for its whole run), so ``dvc repro
ablation/dvc.yaml`` trains the cells one after another even where a work pool has a free GPU per cell. This
flow keeps DVC the judge of what is stale and of data versions, and runs the cells side by side:

1. the upstream stages the cells read (:data:`UPSTREAM`: params, curate, warmstart, calibrate) with the pipeline
   flow's own tasks (``dvc repro --single-item``: up-to-date ones are skipped in a second);
2. ``dvc status --json ablation/dvc.yaml``: the stale cells (a cell whose settings, its own variant's keys,
   inputs and code are unchanged since it last ran is not run again);
3. each stale cell's command — the one DVC resolved for it (``sh infra/stage.sh ablation_cell --variant ...``) —
   as a Prefect task, at most ``concurrency`` at a time; a failed cell does not stop the others;
4. ``dvc commit`` of each cell as soon as it finishes: its outputs go to the DVC cache and ``ablation/dvc.lock``
   exactly as ``dvc repro`` would have recorded them, so that a later ``dvc repro ablation/dvc.yaml`` finds
   them up to date (and a rerun after a failure runs only the cells that failed);
5. the report (``dvc repro --single-item ablation/dvc.yaml:report``) once every cell has a result.

With ``overrides`` everything runs as a DVC experiment in a copy of the workspace (:mod:`flows.experiment`, as
the pipeline flow does) and is saved with ``dvc exp save``; the workspace is left as it was.

MLflow: the flow's run (``lead-ablation``) holds every stage's run; the report's run becomes the parent of every
cell's run (:mod:`lead.stages.ablation`).

Where the cells run: by default each is one process on this flow's machine (on GPUs each gets its own
``CUDA_VISIBLE_DEVICES`` slot, ``gpus_per_cell``). With ``cell_deployment`` (e.g. ``lead-cell/pool``) each is a
flow run of that ``lead-cell`` deployment (:mod:`flows.cell`) on whichever worker of its pool takes it, a node
per cell: the upstream outputs are pushed to the DVC remote first, and each finished cell's outputs come back
through the remote (:mod:`flows.bundle`) and are recorded only if their ``dvc.lock`` entry is the one this
workspace computes (same code, inputs and params). A cell whose flow run crashes is reported failed; the next
run submits only the unrecorded cells.

``python -m flows.ablation --concurrency 2 -S key=value`` runs it once (Prefect's temporary server unless
``PREFECT_API_URL`` names one); ``prefect deployment run 'lead-ablation/local'`` through a worker.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from prefect import flow, get_run_logger, task
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from flows import bundle
from flows.cell import ARTIFACT_KEY as CELL_ARTIFACT
from flows.cell import UPSTREAM, lock_entry, remote_options
from flows.commands import CommandError, dvc_executable, git, run, stage_env
from flows.pipeline import TASKS, flow_place, save_task
from flows.prefect_api import STOPPING, Override, RunStopped, check_then_start, completed, stopped
from lead.config import load_params
from lead.dag import ABLATION, ablation_output

PIPELINE = "ablation/dvc.yaml"
REPORT = f"{PIPELINE}:report"
ARTIFACT_KEY = "lead-ablation-summary"
MAX_CONCURRENCY = 32


def cpu_threads(concurrency: int) -> int:
    """CPU threads per cell when ``concurrency`` cells share this machine's cores: each gets its share.

    torch (and vLLM-CPU) start one OpenMP thread per core in every process; ``concurrency`` such processes on
    the same cores fight over them (measured on 2 cores: a GRPO step 3.5x slower with 2 threads per process
    than with 1 while another process was busy)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // concurrency)


def stage_file(repo: Any, stage: Any) -> str:
    """The ``dvc.yaml`` that defines ``stage``, relative to the repository's root (DVC's own ``relpath`` and
    ``addressing`` are relative to the current folder, which a flow running in a copy is not in)."""
    return Path(stage.dvcfile.path).resolve().relative_to(Path(repo.root_dir).resolve()).as_posix()


def stale_cells(workspace: Path) -> dict[str, tuple[str, Path]]:
    """The stages of ``ablation/dvc.yaml`` that DVC finds stale, but the report: address → (command, wdir)."""
    import subprocess

    from dvc.repo import Repo

    done = subprocess.run(
        [dvc_executable(), "status", "--json", PIPELINE], cwd=workspace, capture_output=True, text=True
    )
    if done.returncode:
        raise CommandError(f"`dvc status --json {PIPELINE}` failed:\n{done.stderr.strip()}")
    stale = set(json.loads(done.stdout or "{}"))
    with Repo(str(workspace)) as repo:  # addresses as `dvc status` run in the workspace writes them
        stages = {f"{PIPELINE}:{s.name}": s for s in repo.index.stages if stage_file(repo, s) == PIPELINE}
    return {
        address: (stage.cmd, Path(stage.wdir))
        for address, stage in stages.items()
        if address in stale and address != REPORT
    }


@task(name="cell", retries=1, retry_delay_seconds=10)  # a killed training resumes from its checkpoints
def cell_task(
    address: str,
    cmd: str,
    wdir: str,
    parent_run_id: str,
    tracking_uri: str,
    gpu: str | None,
    threads: int | None,
) -> float:
    """One cell's command, as DVC resolved it for the stage ``address``; its wall time in seconds."""
    started = time.perf_counter()
    env = {**stage_env(parent_run_id, tracking_uri, gpu, threads), "DVC_STAGE": address}
    run(["sh", "-c", cmd], Path(wdir), env)
    return round(time.perf_counter() - started, 1)


@task(name="commit-cells")
def commit_task(workspace: str, address: str) -> None:
    """``dvc commit``: a finished cell's outputs into the cache and ``ablation/dvc.lock``, as a repro would."""
    run([dvc_executable(), "commit", "--force", address], Path(workspace))


def _run_cells(
    cells: list[str],
    concurrency: int,
    submit: Callable[[str, int], PrefectFuture[Any]],
    record: Callable[[str, Any], None],
) -> dict[str, Any]:
    """Every cell, at most ``concurrency`` at once (``submit(address, slot)``), each recorded in DVC as soon as it
    finishes (``record``; a flow killed midway loses only the cells still running); address → what its task
    returned, or the exception it or its recording failed with."""
    pending = sorted(cells)
    running: dict[PrefectFuture[Any], tuple[str, int]] = {}
    slots = list(range(concurrency))
    done: dict[str, Any] = {}
    while pending or running:
        while pending and len(running) < concurrency:
            address = pending.pop(0)
            slot = slots.pop(0)
            running[submit(address, slot)] = (address, slot)
        # The first to end, as its own future says: the server's record of a task run comes from the events
        # it emits, and a cell whose events never arrive would otherwise never be seen to end.
        future = next(as_completed(list(running)))
        address, slot = running.pop(future)
        slots.append(slot)
        try:
            done[address] = future.result()
            record(address, done[address])  # one at a time (DVC's lock): this loop is the only recorder
        except Exception as exc:  # recorded; the other cells go on
            done[address] = exc
    return done


def _local(
    workspace: Path, cells: dict[str, tuple[str, Path]], concurrency: int, parent: str, uri: str, gpus: int
) -> tuple[Callable[[str, int], PrefectFuture[Any]], Callable[[str, Any], None]]:
    """Cells as processes on this machine: each its slot's GPUs, or on CPU its share of the cores."""

    def submit(address: str, slot: int) -> PrefectFuture[Any]:
        gpu = ",".join(str(slot * gpus + i) for i in range(gpus)) if gpus else None
        threads = None if gpus else cpu_threads(concurrency)
        cmd, wdir = cells[address]
        return cell_task.with_options(task_run_name=address).submit(
            address, cmd, str(wdir), parent, uri, gpu, threads
        )

    return submit, lambda address, _: commit_task(str(workspace), address)


@task(name="cell")
def pool_cell_task(deployment: str, address: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """One cell as a flow run of the ``lead-cell`` deployment ``deployment`` (:mod:`flows.cell`), waited for:
    the bundle it pushed, the worker that ran it, its wall time. A run that did not complete raises."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey
    from prefect.deployments import run_deployment

    started = time.perf_counter()
    name = address.rsplit(":", 1)[-1]
    submitted = run_deployment(
        deployment, parameters={**parameters, "address": address}, flow_run_name=name, poll_interval=2
    )
    with get_client(sync_client=True) as client:
        child = client.read_flow_run(submitted.id)
        worker = (child.labels or {}).get("prefect.worker.name", "no worker")
        state = child.state
        if state is None or not state.is_completed():
            said = f"{state.name}: {state.message}" if state else "no state"
            raise RunStopped(f"its flow run {child.name} on {worker} ended {said}")
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[child.id]),
                key=ArtifactFilterKey(any_=[CELL_ARTIFACT]),
            )
        )
    (row,) = json.loads(str(artifacts[-1].data))
    seconds = round(time.perf_counter() - started, 1)
    return {**row, "worker": str(worker), "flow_run": child.name, "seconds": seconds}


def _differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """What two ``dvc.lock`` entries of one stage disagree on: the command, a file's md5, a param's value."""

    def flat(entry: dict[str, Any]) -> dict[str, Any]:
        items: dict[str, Any] = {"cmd": entry.get("cmd")}
        for kind in ("deps", "outs"):
            items.update({f["path"]: f.get("md5") for f in entry.get(kind) or []})
        for file, values in (entry.get("params") or {}).items():
            items.update({f"{file}:{key}": value for key, value in values.items()})
        return items

    a, b = flat(ours), flat(theirs)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _pool(
    workspace: Path, deployment: str, parent: str, uri: str
) -> tuple[Callable[[str, int], PrefectFuture[Any]], Callable[[str, Any], None]]:
    """Cells as flow runs of ``deployment`` on its pool's workers. Before any is submitted: the upstream
    outputs pushed to the DVC remote (what the workers pull). As each finishes: its bundle pulled into the
    workspace and recorded with ``dvc commit``, kept only if this workspace's lock entry is the worker's (same
    command, inputs, params and outputs: the cell ran on what this workspace holds)."""
    if uri.startswith(("sqlite:", "file:")) or "://" not in uri:
        raise RunStopped(
            f"cells on a pool log to an MLflow server, and this run's tracking URI is local ({uri}): set "
            "mlflow.tracking_uri or MLFLOW_TRACKING_URI to the team's server"
        )
    changed = [
        line[3:]
        for line in git(["status", "--porcelain", "--untracked-files=no"], workspace).splitlines()
        if line[3:] not in ("params.yaml", "dvc.lock")
    ]
    if changed:
        raise RunStopped(
            f"the workers run the committed code, and {', '.join(changed)} has uncommitted changes: commit and "
            "push them first"
        )
    remote = remote_options(workspace)
    run([dvc_executable(), "push", *UPSTREAM], workspace)
    shared = {
        "rev": git(["rev-parse", "HEAD"], workspace).strip(),
        "params": (workspace / "params.yaml").read_text(),
        "lock": (workspace / "dvc.lock").read_text(),
        "remote": remote,
        "parent_run_id": parent,
        "tracking_uri": uri,
    }

    def submit(address: str, slot: int) -> PrefectFuture[Any]:
        return pool_cell_task.with_options(task_run_name=address).submit(deployment, address, shared)

    def record(address: str, outcome: dict[str, Any]) -> None:
        theirs = bundle.pull(outcome["bundle"], remote["url"], workspace)
        lockfile = (workspace / address.rsplit(":", 1)[0]).with_name("dvc.lock")
        before = lockfile.read_bytes() if lockfile.exists() else None
        commit_task(str(workspace), address)
        differ = _differences(lock_entry(workspace, address), theirs)
        if differ:
            if before is None:
                lockfile.unlink()
            else:
                lockfile.write_bytes(before)
            raise RunStopped(
                f"ran on inputs other than this workspace's (they differ in {', '.join(differ[:5])}): not recorded"
            )

    return submit, record


def _summary(cells: dict[str, Any], report: Path | None) -> str:
    lines = ["| cell | outcome |", "|---|---|"]
    for address, outcome in sorted(cells.items()):
        if isinstance(outcome, Exception):
            said = f"FAILED: {str(outcome)[:200]}"
        elif isinstance(outcome, dict):
            said = f"ran on {outcome['worker']}, {outcome['seconds']} s (flow run {outcome['flow_run']})"
        else:
            said = f"ran, {outcome} s"
        lines.append(f"| {address.split(':')[-1]} | {said} |")
    if not cells:
        lines.append("| (none) | every cell was up to date |")
    text = "\n".join(lines) + "\n"
    if report is not None and report.exists():
        text = report.read_text() + "\n" + text
    return text


@flow(name="lead-ablation", task_runner=ThreadPoolTaskRunner(max_workers=MAX_CONCURRENCY))
def lead_ablation(
    overrides: list[Override] | None = None,
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 2,
    workspace: str = ".",
    gpus_per_cell: Annotated[int, Field(ge=0)] = 0,
    cell_deployment: str | None = None,
) -> dict[str, Any]:
    """The ablation's stale cells, ``concurrency`` at a time, recorded in DVC, then its report; in the workspace,
    or with ``overrides`` as a DVC experiment in a copy of it."""
    try:
        root = Path(workspace).resolve()
        return _ablation(root, list(overrides or []), concurrency, gpus_per_cell, cell_deployment)
    except STOPPING as exc:
        return stopped("lead-ablation", exc)


def _ablation(
    root: Path, overrides: list[str], concurrency: int, gpus_per_cell: int, cell_deployment: str | None
) -> dict[str, Any]:
    import mlflow
    from prefect.artifacts import create_markdown_artifact
    from prefect.runtime import flow_run

    params = load_params(root / "params.yaml", overrides)  # bad params stop here, before any stage runs
    if shutil.which(dvc_executable()) is None:
        raise FileNotFoundError("dvc is not installed in this environment (make setup)")
    logger = get_run_logger()
    with flow_place(root, params.tracking, overrides, "lead-ablation", "ablation-flow") as place:
        run_dir, uri, name = place.run_dir, place.tracking_uri, place.experiment
        parent_id = place.parent.info.run_id
        mlflow.log_params({"overrides": " ".join(overrides) or "-", "concurrency": concurrency})
        for stage in UPSTREAM:
            TASKS[stage](str(run_dir), parent_id, uri, False, name, return_state=True).result()
        cells = stale_cells(run_dir)
        logger.info("%d stale cells: %s", len(cells), ", ".join(sorted(cells)) or "none")
        started = time.perf_counter()
        submit, record = (
            _pool(run_dir, cell_deployment, parent_id, uri)
            if cell_deployment
            else _local(run_dir, cells, concurrency, parent_id, uri, gpus_per_cell)
        )
        outcomes = _run_cells(list(cells), concurrency, submit, record)
        seconds = round(time.perf_counter() - started, 1)
        finished = sorted(a for a, o in outcomes.items() if not isinstance(o, Exception))
        failed = sorted(set(outcomes) - set(finished))
        report_file = run_dir / params.paths.reports / "ablation" / "ablation.md"
        try:
            if failed:
                raise RunStopped(
                    f"{len(failed)} of {len(outcomes)} cells failed ({', '.join(failed)}); the others are "
                    "recorded in ablation/dvc.lock: run the flow again to run only the failed ones"
                )
            run(
                [dvc_executable(), "repro", "--single-item", REPORT],
                run_dir,
                stage_env(parent_id, uri),
            )
            experiment = None
            if (
                name
            ):  # the report (uncached, git-ignored) in the experiment's commit: `dvc exp apply` brings it
                report = [str(ablation_output(params.paths, k)) for k in ABLATION["report"].outputs]
                rev = save_task(str(run_dir), name, [PIPELINE], [str(run_dir / p) for p in report])
                experiment = {
                    "name": name,
                    "rev": rev,
                    "baseline": git(["rev-parse", "HEAD"], root).strip(),
                }
            result = json.loads((report_file.with_suffix(".json")).read_text())
            table = report_file.read_text().split("\n\n", 1)[0]  # the first table: one row per variant
        finally:
            mlflow.log_metric("cells_seconds", seconds)
            create_markdown_artifact(
                key=ARTIFACT_KEY,
                markdown=_summary(outcomes, None if failed else report_file),
                description=f"lead-ablation {flow_run.name}",
            )
    verdicts = ", ".join(f"{c['key']} {c['verdict']}" for c in result["claims"]) or "no claim to judge"
    where = f"DVC experiment {name} (dvc exp apply {name})" if name else report_file.relative_to(run_dir)
    ran = f"{len(finished)} cell{'' if len(finished) == 1 else 's'} ran"
    return completed(
        f"lead-ablation {flow_run.name}: done — {ran}; {verdicts} — report in {where}",
        f"{ran}; {verdicts}",
        {
            "mlflow_parent_run_id": parent_id,
            "cells": {a: (o if not isinstance(o, Exception) else "failed") for a, o in outcomes.items()},
            "cells_seconds": seconds,
            "target": result["target"],
            "claims": {c["key"]: c["verdict"] for c in result["claims"]},
            "experiment": experiment,
            "table": table,
        },
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.ablation``: the flow once, with the flow's parameters as options."""
    parser = argparse.ArgumentParser(prog="python -m flows.ablation", description=lead_ablation.__doc__)
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--concurrency", type=int, default=2, help="cells at once (default 2)")
    parser.add_argument("--workspace", default=".", help="the DVC workspace (default: the current folder)")
    parser.add_argument("--gpus-per-cell", type=int, default=0, help="CUDA_VISIBLE_DEVICES slots per cell")
    parser.add_argument(
        "--cell-deployment",
        help="run each cell as a flow run of this lead-cell deployment (e.g. lead-cell/pool)",
    )
    args = parser.parse_args(argv)
    check_then_start(parser, args.workspace, args.overrides)
    state = lead_ablation(
        overrides=args.overrides,
        concurrency=args.concurrency,
        workspace=args.workspace,
        gpus_per_cell=args.gpus_per_cell,
        cell_deployment=args.cell_deployment,
        return_state=True,
    )
    if state.is_completed():  # the table last, where the user looks: one row per variant (point of a sweep)
        done = state.result()
        print(f"\n{done['table']}")
        if done["experiment"]:
            name = done["experiment"]["name"]
            print(
                f"\nDVC experiment {name}: `dvc exp apply {name}` brings reports/ablation/ into the workspace"
            )
    sys.exit(0 if state.is_completed() else 1)  # the run's last log line said why


if __name__ == "__main__":
    main()
