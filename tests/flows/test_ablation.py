"""The ablation as DVC stages and as the ``lead-ablation`` flow: cells run side by side (concurrency 2), a failed
cell stops neither the others nor their record, recorded in DVC so that ``dvc repro`` then finds them up to
date, and one variant's knob reruns only its cells."""

import contextlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow import MlflowClient
from prefect import task
from prefect.task_runners import ThreadPoolTaskRunner

from flows.ablation import PIPELINE, UPSTREAM, stage_file
from tests.conftest import ROOT
from tests.flows.conftest import RECORDER, WITHOUT_STAGE2, dvc, flow_logs, make_workspace, reduced
from tests.flows.contract import declarations, violations

pytestmark = pytest.mark.slow
GIT = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]
FAILING_CELL = Path(__file__).with_name("failing_cell")  # a sitecustomize that makes one variant's cell fail

CELLS = {f"{PIPELINE}:baseline@0", f"{PIPELINE}:cell@grpo-0", f"{PIPELINE}:cell@lead-0"}
ABLATION = {
    "ablation": {
        "variants": {
            "grpo": {"length_reward": False, "penalty": False, "reweight": False},
            "lead": {"length_reward": True, "penalty": True, "reweight": True},
        },
        "seeds": [0],
        "max_steps": 1,
    },
    **WITHOUT_STAGE2,
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("ablation"), reduced(ABLATION), extra=(PIPELINE,))
    # merged into params.yaml's four variants, these two would be added to them: set them instead
    data = yaml.safe_load((ws / "params.yaml").read_text())
    data["ablation"]["variants"] = ABLATION["ablation"]["variants"]
    (ws / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run([*GIT, "commit", "-qam", "two variants"], cwd=ws, check=True)
    return ws


def test_the_flows_upstream_is_what_the_cells_read():
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        graph = repo.index.graph
        cells = [s for s in graph if stage_file(repo, s) == PIPELINE]
        upstream = {
            a.name for c in cells for a in nx.descendants(graph, c) if stage_file(repo, a) == "dvc.yaml"
        }
    assert upstream == set(UPSTREAM)


def ran(output: str) -> set[str]:
    return set(re.findall(r"^Running stage '([^']+)'", output, re.M))


def _task_runs(flow_run_name: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:
        return client.read_task_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[flow_run_name]))
        )


def test_the_flow_runs_cells_side_by_side_then_dvc_reruns_only_what_changed(
    ws, prefect_server, monkeypatch, tmp_path
):
    from flows.ablation import lead_ablation

    grpo, lead = (f"{PIPELINE}:{c}" for c in ("cell@grpo-0", "cell@lead-0"))
    # First run: the grpo cell crashes at start-up. The other two run (side by side) and are recorded; the
    # report does not run; the flow fails saying which cell failed and what to do.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(FAILING_CELL), os.getenv("PYTHONPATH")]))
    )
    monkeypatch.setenv("LEAD_FAILING_VARIANT", "grpo")
    first = lead_ablation(workspace=str(ws), concurrency=2, return_state=True)
    assert first.is_failed()
    assert first.message.startswith(f"lead-ablation {_flow_name(first)}: failed: 1 of 3 cells failed")
    with pytest.raises(RuntimeError, match=r"1 of 3 cells failed \(ablation/dvc.yaml:cell@grpo-0\).*again"):
        first.result()
    runs = {r.name: r for r in _task_runs(_flow_name(first)) if r.name in CELLS}
    assert runs[grpo].state.is_failed() and runs[lead].state.is_completed()
    # Two cells at once: some two task runs overlap (which two depends on how fast the failing one fails).
    pairs = [(a, b) for a in runs.values() for b in runs.values() if a.id != b.id]
    assert any(a.start_time < b.start_time < a.end_time for a, b in pairs), {
        n: r.start_time for n, r in runs.items()
    }
    assert set(json.loads(dvc(ws, "status", "--json", PIPELINE).stdout)) == {grpo, f"{PIPELINE}:report"}
    assert not (ws / "reports" / "ablation" / "ablation.md").exists()

    # Run again: only the failed cell runs, then the report.
    monkeypatch.delenv("LEAD_FAILING_VARIANT")
    state = lead_ablation(workspace=str(ws), concurrency=2, return_state=True)
    result = state.result()
    assert set(result["cells"]) == {grpo} and isinstance(result["cells"][grpo], float)
    assert [r.name for r in _task_runs(_flow_name(state)) if r.name in CELLS] == [grpo]
    assert set(result["claims"]) == set() and "grpo_gain" in result["target"]
    assert flow_logs(state)[-1].startswith(f"lead-ablation {_flow_name(state)}: done — 1 cell ran; no claim")

    # MLflow: the report's run is the parent of every cell's run, and a child of the flow's run.
    mlflow.set_tracking_uri(f"sqlite:///{ws / 'mlflow.db'}")
    client = MlflowClient()
    report = client.search_runs(
        [client.get_experiment_by_name("lead").experiment_id], "tags.stage = 'ablation'"
    )[0]
    assert report.data.tags["mlflow.parentRunId"] == result["mlflow_parent_run_id"]
    children = client.search_runs(
        [report.info.experiment_id], f"tags.mlflow.parentRunId = '{report.info.run_id}'"
    )
    assert sorted(r.info.run_name for r in children) == ["grpo-s0", "lead-s0", "warmstart-s0"]

    # Recorded in DVC as a repro would: nothing to do; `dvc dag` shows the cells.
    assert "up to date" in dvc(ws, "status", PIPELINE).stdout
    assert ran(dvc(ws, "repro", PIPELINE).stdout) == set()
    assert "cell@lead-0" in dvc(ws, "dag", "--md").stdout

    # One variant's knob: its cell and the report rerun, nothing else; both recorded as the DAG contract records
    # the pipeline's stages (tests/flows/test_dag_contract.py), and held to the same rules.
    records = tmp_path / "records"
    env = {
        "PYTHONPATH": os.pathsep.join([str(RECORDER), os.environ["PYTHONPATH"]]),
        "LEAD_RECORD_DIR": str(records),
    }
    again = dvc(
        ws, "exp", "run", PIPELINE, "-S", "+ablation.variants.lead.alpha=0.5", env=env
    ).stdout  # + adds
    # params.yaml changed: its check runs (a second), then only the cell whose variant changed, and the report
    assert ran(again) == {"params", f"{PIPELINE}:cell@lead-0", f"{PIPELINE}:report"}
    text = (ws / "reports" / "ablation" / "ablation.json").read_text()
    assert json.loads(text)["settings"]["variants"]["lead"]["alpha"] == 0.5
    recorded = {r["stage"]: r for r in (json.loads(p.read_text()) for p in records.glob("*.json"))}
    declared = declarations(ws, PIPELINE)
    problems = {
        stage: violations(recorded[f"lead.stages.{module}"], declared[stage])
        for stage, module in (("cell@lead-0", "ablation_cell"), ("report", "ablation"))
    }
    assert not any(problems.values()), json.dumps(problems, indent=1)
    assert "lead/training/phase.py" in recorded["lead.stages.ablation_cell"]["modules"]  # it saw real work


def _flow_name(state) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id).name


@pytest.mark.timeout(60)
def test_cells_end_when_their_tasks_end_whatever_the_server_has_heard(prefect_server):
    """A task run tells the server its states by events; when none arrive (a dropped connection; a process whose
    events still go to the server it talked to first) the server never records a cell as finished. The flow
    waits on the cells' own futures: it was polling the server's record, and spun forever."""
    from prefect import flow
    from prefect.events.clients import NullEventsClient
    from prefect.events.worker import EventsWorker

    from flows.ablation import _run_cells

    @task
    def cell(seconds: float) -> float:
        time.sleep(seconds)
        if seconds > 0.5:
            raise RuntimeError("this cell fails")
        return seconds

    recorded: list[str] = []

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=2))
    def cells() -> dict:
        lengths = {"a": 0.2, "b": 0.1, "c": 0.6, "d": 0.0}
        return _run_cells(
            list(lengths),
            2,
            lambda address, _: cell.submit(lengths[address]),
            lambda address, _: recorded.append(address),
        )

    EventsWorker.set_client_override(NullEventsClient)
    try:
        done = cells()
    finally:
        EventsWorker.set_client_override(None)
    assert {k: v for k, v in done.items() if not isinstance(v, Exception)} == {"a": 0.2, "b": 0.1, "d": 0.0}
    assert isinstance(done["c"], RuntimeError) and sorted(recorded) == ["a", "b", "d"]


def test_cells_on_cpu_share_the_cores_instead_of_each_taking_all(monkeypatch):
    from flows import ablation
    from flows.commands import stage_env

    monkeypatch.setattr(ablation.os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    assert [ablation.cpu_threads(n) for n in (1, 2, 3, 32)] == [16, 8, 5, 1]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert stage_env("p", "u", threads=8)["OMP_NUM_THREADS"] == "8"
    assert "OMP_NUM_THREADS" not in stage_env("p", "u", gpu="0")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting wins
    assert stage_env("p", "u", threads=8)["OMP_NUM_THREADS"] == "3"


def test_a_sweep_runs_its_grid_as_an_experiment_of_the_ablation(ws, prefect_server):
    """`lead sweep`'s points are the ablation's variants: the flow runs them with those overrides as a DVC
    experiment in a copy (dvc exp show lists it with the grid), the workspace untouched; the baseline, up to date
    in the workspace, is not evaluated again in the copy."""
    import shlex

    from typer.testing import CliRunner

    from flows.ablation import lead_ablation
    from lead.cli import app

    dvc(ws, "repro", f"{PIPELINE}:baseline@0")  # up to date after the tests above: then a no-op
    shown = CliRunner().invoke(app, ["sweep", "alpha=0.05,0.2", "--seeds", "0", "--dry-run"])
    assert shown.exit_code == 0, shown.output
    command = shlex.split(shown.output.strip().splitlines()[-1])
    overrides = [command[i + 1] for i, arg in enumerate(command) if arg == "-S"]
    params, status = (
        (ws / "params.yaml").read_bytes(),
        subprocess.run(["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True).stdout,
    )
    result = lead_ablation(workspace=str(ws), overrides=overrides, concurrency=2)
    points = {f"{PIPELINE}:cell@alpha_0p05-0", f"{PIPELINE}:cell@alpha_0p2-0"}
    assert set(result["cells"]) == points
    assert (ws / "params.yaml").read_bytes() == params
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True).stdout
        == status
    )
    shown = json.loads(dvc(ws, "exp", "show", "--json").stdout)
    revs = [r for b in shown for e in b.get("experiments") or [] for r in e["revs"]]
    (saved,) = [r for r in revs if r.get("name") == result["experiment"]["name"]]
    grid = saved["data"]["params"]["params.yaml"]["data"]["ablation"]["variants"]
    assert grid == {"alpha_0p05": {"alpha": 0.05}, "alpha_0p2": {"alpha": 0.2}}
    # The table of its points, which `lead sweep` prints last, and `lead exp` shows the sweep's rows.
    assert "| alpha_0p05 |" in result["table"] and "| alpha_0p2 |" in result["table"], result["table"]
    with contextlib.chdir(ws):
        listed = CliRunner().invoke(app, ["exp"], env={"COLUMNS": "200"})
    assert f"sweep {result['experiment']['name']}" in listed.output, listed.output
    points = listed.output.split(f"sweep {result['experiment']['name']}", 1)[1]
    assert "alpha_0p05" in points and "alpha=0.05" in points and "alpha_0p2" in points, listed.output
    # Kept: `dvc exp apply` brings its params, dvc.lock and report into the workspace.
    # (This workspace never ran the main pipeline past calibrate: DVC says it cannot check those outputs out.)
    done = dvc(ws, "exp", "apply", result["experiment"]["name"], check=False)
    assert "reports/ablation" not in done.stderr.partition("Checkout failed")[2], done.stderr
    applied = (ws / "reports" / "ablation" / "ablation.md").read_text()
    assert applied.split("\n\n", 1)[0] == result["table"]
    assert (
        json.loads((ws / "reports/ablation/metrics.json").read_text())["alpha_0p2"]["pass_at_1"] is not None
    )
