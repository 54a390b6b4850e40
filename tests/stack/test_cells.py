"""The ablation's cells as flow runs on a work pool, for real on one machine as if on several: ``lead-ablation``
with ``cell_deployment`` submits each stale cell to prefect.yaml's ``lead-cell/pool``; two Prefect process
workers poll the pool, each started in its own clone of the repository in its own folder, and each cell's flow
run clones the repository afresh. Nothing is shared between the parent and the workers but the stack's DVC remote
folder, MLflow server and Prefect server (and git, where the code comes from).

One module run: 2 variants and the seed's baseline (3 stages) on the seconds-sized test config. In the first
ablation run one cell's flow run is killed mid-stage (every process of that run, as when its node dies): the
worker reports it crashed, the parent fails naming it, the other two are recorded. The second run submits
only that cell, then the report; after it DVC finds the whole ablation up to date."""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from flows.ablation import PIPELINE
from tests.flows.conftest import dvc, make_workspace, reduced
from tests.flows.test_ablation import ABLATION
from tests.stack.harness import (
    BIN,
    WORKER_POLLING,
    as_client,
    client_env,
    prefect,
    prefect_api,
    stack_script,
    wait_for,
)

pytestmark = pytest.mark.slow

POOL, DEPLOYMENT, WORKERS = "lead-cells", "lead-cell/pool", ("cells-a", "cells-b")
SEEDS = [0]
STAGES = {f"{PIPELINE}:baseline@{s}" for s in SEEDS} | {
    f"{PIPELINE}:cell@{v}-{s}" for v in ABLATION["ablation"]["variants"] for s in SEEDS
}
KILLED = f"{PIPELINE}:cell@grpo-0"


@pytest.fixture(scope="module")
def origin(stack, tmp_path_factory) -> Path:
    """The repository: the parent's workspace, and what the workers clone."""
    ws = make_workspace(tmp_path_factory.mktemp("origin"), reduced(ABLATION), extra=(PIPELINE,))
    data = yaml.safe_load((ws / "params.yaml").read_text())
    data["ablation"]["variants"] = ABLATION["ablation"]["variants"]
    data["ablation"]["seeds"] = SEEDS
    (ws / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "2 cells"], cwd=ws)
    remote = stack["state"] / "dvc-remote"
    remote.mkdir()
    dvc(ws, "remote", "add", "-d", "--local", "stack", str(remote))
    return ws


def pool_workers(stack: dict) -> dict[str, dict]:
    return {w["name"]: w for w in prefect_api(stack, f"work_pools/{POOL}/workers/filter", {})}


@pytest.fixture(scope="module")
def workers(stack, origin, tmp_path_factory):
    """The pool, the deployment, and two process workers (one cell at a time each), each in its own clone."""
    env = {**client_env(stack), **WORKER_POLLING, "LEAD_GIT_REPOSITORY": str(origin), "OMP_NUM_THREADS": "1"}
    prefect(env, origin, "work-pool", "create", POOL, "--type", "process")
    prefect(env, origin, "--no-prompt", "deploy", "--prefect-file", "prefect.yaml", "-n", "pool")
    processes = []
    for name in WORKERS:
        folder = tmp_path_factory.mktemp(name)
        subprocess.run(["git", "clone", "-q", str(origin), str(folder / "lead")], check=True)
        log = (folder / "worker.log").open("w")
        processes.append(
            subprocess.Popen(
                [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--name", name, "--limit", "1"],
                cwd=folder / "lead",
                env={**env, "PREFECT_HOME": str(folder / "prefect")},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped with whatever it still runs
            )
        )
    wait_for("both workers polling", lambda: set(WORKERS) <= set(pool_workers(stack)), timeout=120)
    yield processes
    # Both at once, SIGKILL after a short grace: what they ran has ended, and on a busy machine a worker's
    # graceful shutdown can take over a minute (one after the other, two took 140 s of a `make test`); cleaning
    # up must not fail a test that passed.
    stack_script.stop_groups(
        {f"worker {n}": p.pid for n, p in zip(WORKERS, processes, strict=True)}, timeout=5
    )
    for process in processes:
        process.wait()


def cell_runs(stack: dict) -> list[dict]:
    """Every ``lead-cell`` flow run, oldest first."""
    runs = prefect_api(stack, "flow_runs/filter", {"sort": "START_TIME_ASC"})
    return [r for r in runs if r["name"] in {a.split(":")[-1] for a in STAGES}]


def flow_run_processes(flow_run_id: str) -> list[int]:
    """The pids of every process of a flow run: the worker starts it with its id in the environment, and the
    ``dvc repro`` and stage under it inherit it."""
    mark = f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:  # gone, or not ours
            continue
    return pids


def kill_mid_stage(stack: dict, name: str, killed: list[str]) -> None:
    """Once the cell ``name``'s stage is running, SIGKILL every process of its flow run."""

    def stage_running():
        runs = [r for r in cell_runs(stack) if r["name"] == name and r["state_type"] == "RUNNING"]
        for run in runs:
            pids = flow_run_processes(run["id"])
            cmdlines = [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids if Path(f"/proc/{p}").exists()]
            if any(b"ablation_cell" in c for c in cmdlines):
                return run
        return None

    run = wait_for(f"{name}'s stage running", stage_running, timeout=900, every=1)
    time.sleep(3)  # into the stage's work
    for pid in flow_run_processes(run["id"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    killed.append(run["id"])


@pytest.mark.timeout(2400)
def test_cells_run_on_both_workers_a_killed_cell_reruns_alone_and_dvc_finds_them_all(
    stack, origin, workers, monkeypatch
):
    from flows.ablation import lead_ablation

    monkeypatch.setenv("MLFLOW_TRACKING_URI", stack["mlflow"])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    name = KILLED.split(":")[-1]
    killed: list[str] = []
    killer = threading.Thread(target=kill_mid_stage, args=(stack, name, killed), daemon=True)
    with as_client(stack):
        killer.start()
        started = time.monotonic()
        first = lead_ablation(
            workspace=str(origin), concurrency=4, cell_deployment=DEPLOYMENT, return_state=True
        )
        first_seconds = time.monotonic() - started
        killer.join(timeout=5)
        assert killed, "the cell was not killed"
        assert first.is_failed()
        assert f"1 of {len(STAGES)} cells failed ({KILLED})" in first.message
        crashed = prefect_api(stack, f"flow_runs/{killed[0]}")
        assert crashed["state_type"] == "CRASHED", crashed["state"]
        # The others ran and are recorded, the killed one is not; the cells ran on both workers (each takes one
        # run at a time, so the first two submitted went one to each).
        runs = [r for r in cell_runs(stack) if r["state_type"] == "COMPLETED"]
        assert {r["name"] for r in runs} == {a.split(":")[-1] for a in STAGES - {KILLED}}
        assert {r["labels"]["prefect.worker.name"] for r in cell_runs(stack)} == set(WORKERS)
        stale = set(json.loads(dvc(origin, "status", "--json", PIPELINE).stdout))
        assert stale == {KILLED, f"{PIPELINE}:report"}

        second = lead_ablation(
            workspace=str(origin), concurrency=4, cell_deployment=DEPLOYMENT, return_state=True
        )
        result = second.result()
    assert set(result["cells"]) == {KILLED}
    assert result["cells"][KILLED]["worker"] in WORKERS
    assert "up to date" in dvc(origin, "status", PIPELINE).stdout
    lock = yaml.safe_load((origin / "ablation" / "dvc.lock").read_text())["stages"]
    assert {f"{PIPELINE}:{s}" for s in lock} == STAGES | {f"{PIPELINE}:report"}
    # How much the two workers overlapped: the finished cells' flow-run time over the span they took.
    from datetime import datetime

    start = min(datetime.fromisoformat(r["start_time"]) for r in runs)
    end = max(datetime.fromisoformat(r["end_time"]) for r in runs)
    busy, span = sum(r["total_run_time"] for r in runs), (end - start).total_seconds()
    print(
        f"\n{len(WORKERS)} worker(s): {len(runs)} cells' flow runs took {busy:.0f} s in all, within {span:.0f} s "
        f"({busy / span:.2f} at once on average); the whole first run {first_seconds:.0f} s "
        f"(upstream stages included); the rerun of the killed cell {result['cells_seconds']} s"
    )
