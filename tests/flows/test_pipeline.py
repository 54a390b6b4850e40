"""The Prefect flow runs the DVC stages under one MLflow parent run: without overrides in the workspace, with
overrides as a DVC experiment that leaves the workspace as it was — finished or killed — and a summary artifact."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from flows.commands import SESSIONS, _session, _stat, stop_orphans
from flows.experiment import RUNS
from lead.config import ParamsError
from lead.dag import STAGES
from tests.conftest import ROOT
from tests.flows.conftest import FirstRun, dvc, flow_logs

GIT = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]
COMMENT = "# the flow tests' params: a run with overrides must keep this line and every other byte\n"


pytestmark = pytest.mark.usefixtures("prefect_server")  # tests/flows/conftest.py: one server for the module


def git(ws: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=ws, capture_output=True, text=True, check=True).stdout


def latest_summary() -> str:
    """The markdown of the newest ``lead-pipeline-summary`` artifact on the test server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["lead-pipeline-summary"])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    return str(artifact.data)


def assert_as_it_was(ws: Path, params: bytes) -> None:
    """The workspace as the committed fixture left it: params.yaml byte for byte, git and DVC clean, no copy."""
    assert (ws / "params.yaml").read_bytes() == params
    assert git(ws, "status", "--porcelain") == ""
    assert "Data and pipelines are up to date" in dvc(ws, "status").stdout


@pytest.fixture(scope="module")
def committed(recorded: FirstRun) -> Path:
    """The workspace as its first ``dvc repro`` left it, then a flow run without overrides in the workspace
    itself (up to date: every stage skipped), its params.yaml given comments, everything committed with the
    repository's .gitignore: a clean baseline."""
    from flows.pipeline import lead_pipeline

    workspace = recorded.restore()
    result = lead_pipeline(workspace=str(workspace))
    assert set(result["outcomes"].values()) == {"skipped"}, result["outcomes"]
    assert result["experiment"] is None and "up to date" in dvc(workspace, "status").stdout
    params = workspace / "params.yaml"
    text = params.read_text()
    params.write_text(COMMENT + text.replace("  max_steps: 2\n", "  max_steps: 2  # seconds-sized\n", 1))
    # The params stage depends on the file's bytes: comments too are checked again (in a second, nothing else runs).
    assert [line for line in dvc(workspace, "repro").stdout.splitlines() if line.startswith("Running")] == [
        "Running stage 'params':"
    ]
    shutil.copy(ROOT / ".gitignore", workspace / ".gitignore")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "pipeline run")
    assert_as_it_was(workspace, params.read_bytes())
    return workspace


@pytest.mark.slow
def test_overrides_run_as_a_dvc_experiment_that_leaves_the_workspace_as_it_was(committed):
    from flows.pipeline import lead_pipeline

    ws = committed
    params = (ws / "params.yaml").read_bytes()
    mlflow.set_tracking_uri(f"sqlite:///{ws / 'mlflow.db'}")  # the workspace's default store, the copy's too
    versions, champion = _versions(), _champion()
    overrides = ["evaluate.max_new_tokens=32", "evaluate.budgets=[16,32]"]
    state = lead_pipeline(overrides=overrides, workspace=str(ws), return_state=True)
    result = state.result()

    assert list(result["stages"]) == list(STAGES)
    # The run's last line: its results and where they are.
    closing = flow_logs(state)[-1]
    assert closing.startswith(f"lead-pipeline {_flow_run(state).name}: done — evaluate: "), closing
    # what `prefect deployment run --watch` ends with: "Flow run finished successfully in '<the state's name>'"
    assert state.is_completed() and state.name.startswith("Done: evaluate: "), state.name
    assert "proxy Pass@1" in state.name and "; register: nothing registered" in state.name, state.name
    assert state.message == closing
    assert "proxy Pass@1" in closing and "; register: nothing registered" in closing, closing
    assert f"results in DVC experiment {result['experiment']['name']}" in closing, closing
    upstream = {s: "skipped" for s in STAGES if s not in ("params", "evaluate", "register")}
    # the overridden params.yaml is checked (a second), then only what the override makes stale runs
    assert result["outcomes"] == {**upstream, "params": "ran", "evaluate": "ran", "register": "ran"}
    assert result["stages"]["evaluate"]["proxy.budget_16.pass_at_1"] is not None  # the override reached it
    assert_as_it_was(ws, params)
    assert "proxy.budget_16.pass_at_1" not in json.loads((ws / "reports/evaluate/metrics.json").read_text())
    assert list((ws / RUNS).iterdir()) == [] and git(ws, "worktree", "list").count("\n") == 1

    # The experiment, on the workspace's HEAD: its params (comments kept), its metrics from the shared cache.
    experiment = result["experiment"]
    assert experiment["baseline"] == git(ws, "rev-parse", "HEAD").strip()
    shown = json.loads(dvc(ws, "exp", "show", "--json").stdout)
    (saved,) = [
        r
        for b in shown
        for e in b.get("experiments") or []
        for r in e["revs"]
        if r["rev"] == experiment["rev"]
    ]
    assert saved["name"] == experiment["name"]
    assert saved["data"]["params"]["params.yaml"]["data"]["evaluate"]["max_new_tokens"] == 32
    assert "proxy.pass_at_1" in saved["data"]["metrics"]["reports/evaluate/headline.json"]["data"]
    assert git(ws, "show", f"{experiment['rev']}:params.yaml").startswith(COMMENT)

    mlflow.set_tracking_uri(f"sqlite:///{ws / 'mlflow.db'}")  # the workspace's default store, the copy's too
    parent = mlflow.get_run(result["mlflow_parent_run_id"])
    assert parent.data.tags["stage"] == "pipeline" and parent.info.status == "FINISHED"
    assert parent.data.params["overrides"] == " ".join(overrides)
    assert parent.data.tags["dvc.experiment"] == experiment["name"]
    assert parent.data.tags["dvc.experiment_rev"] == experiment["rev"]
    (evaluate,) = mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.stage = 'evaluate' and tags.mlflow.parentRunId = '{parent.info.run_id}'",
        output_format="list",
    )
    assert evaluate.data.params["evaluate.max_new_tokens"] == "32"
    # A run with overrides is an experiment: it registers nothing and cannot take @champion.
    registered = result["stages"]["register"]
    assert registered["registered"] is False and experiment["name"] in registered["reason"]
    assert _versions() == versions and _champion() == champion

    # The same overrides under `dvc exp run` afterwards: DVC restores what it can from the run cache the flow
    # filled, but register (not cached: its effect is the registry) runs, and says it registered nothing.
    record = (ws / "reports/register.json").read_bytes()
    again = dvc(ws, "exp", "run", "-n", "same-overrides", *(arg for o in overrides for arg in ("-S", o)))
    said = again.stdout
    assert "Running stage 'register'" in said and "Restored stage 'register'" not in said, said
    assert json.loads((ws / "reports/register.json").read_text())["registered"] is False
    assert _versions() == versions and _champion() == champion
    # The workspace back as the fixture left it, for the tests after this one.
    dvc(ws, "exp", "remove", "same-overrides")
    git(ws, "checkout", "--", "params.yaml", "dvc.lock")
    (ws / "reports/register.json").write_bytes(record)
    dvc(ws, "checkout", "--force")
    assert_as_it_was(ws, params)

    summary = latest_summary()
    assert f"`dvc exp apply {experiment['name']}`" in summary
    assert "- **curate**: skipped (up to date) in " in summary and "s: 60 train" in summary
    assert "- **evaluate**: ran in " in summary
    assert f"proxy Pass@1 {result['stages']['evaluate']['proxy.pass_at_1']:.3f}, Len" in summary
    assert f"`{evaluate.info.run_id}`" in summary  # the stage's MLflow run (an sqlite store: by its id)
    assert all(f"- **{stage}**: " in summary for stage in STAGES)


def _flow_run(state):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id)


def _versions() -> list[str]:
    return sorted(str(v.version) for v in MlflowClient().search_model_versions("name = 'lead-e2e'"))


def _champion() -> str | None:
    from mlflow.exceptions import MlflowException

    try:
        return str(MlflowClient().get_model_version_by_alias("lead-e2e", "champion").version)
    except MlflowException:
        return None


def _running_train(ws: Path, flow: subprocess.Popen, log: Path) -> Path:
    """Wait until the train stage of the flow run ``flow`` trains in its copy of ``ws``; the copy."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        assert flow.poll() is None, log.read_text()
        for run_file in (ws / RUNS).glob("*/resume/train/lead_run.json"):
            # "running" from before the first step to the last (the copy of the workspace's says "finished")
            if '"running"' in run_file.read_text():
                return run_file.parents[2]
        time.sleep(0.5)
    raise AssertionError(f"the train stage never started:\n{log.read_text()}")


@pytest.mark.slow
def test_a_killed_run_leaves_the_workspace_as_it_was_and_the_next_run_cleans_up(committed, tmp_path):
    from prefect.settings import PREFECT_API_URL

    from flows.pipeline import lead_pipeline

    ws = committed
    params = (ws / "params.yaml").read_bytes()
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT)}
    # Far more steps than it gets to take: the orphaned training is still at it when the next run starts.
    cmd = [sys.executable, "-m", "flows.pipeline", "-S", "train.max_steps=1000", "--workspace", str(ws)]
    log = tmp_path / "flow.log"
    with log.open("w") as out, subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT) as flow:
        copy = _running_train(ws, flow, log)
        flow.send_signal(signal.SIGKILL)  # no cleanup of any kind: as a pod evicted, a worker killed
    try:
        assert_as_it_was(ws, params)
        assert copy.exists()  # left behind, with its training still running in it
        orphans = [int(p.name) for p in (copy / SESSIONS).iterdir()]
        assert orphans and all(_stat(pid) is not None for pid in orphans)

        result = lead_pipeline(workspace=str(ws))  # the next run, in the workspace: a no-op

        assert result["outcomes"] == dict.fromkeys(STAGES, "skipped")
        assert not copy.exists() and git(ws, "worktree", "list").count("\n") == 1
        assert not any(_session(pid) for pid in orphans)  # stopped, stages too, not left to train on
        assert_as_it_was(ws, params)
        summary = latest_summary()
        assert "the workspace itself (no overrides)" in summary
        assert all(f"- **{stage}**: skipped (up to date) in " in summary for stage in STAGES)
    finally:
        stop_orphans(copy)  # a failed check must not leave 1000 steps training on the machine


@pytest.mark.slow
def test_two_flows_started_at_once_on_a_fresh_prefect_home_both_run(committed, tmp_path):
    """Each starts Prefect's temporary server on the same new database; unguarded, one of them failed in its
    migration ("No such index", "duplicate column name") or timed out waiting for its server."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect"), PYTHONPATH=str(ROOT), PREFECT_SERVER_ANALYTICS_ENABLED="false"
    )
    cmd = [sys.executable, "-m", "flows.pipeline", "--stages", "curate", "--workspace", str(committed)]
    logs = [tmp_path / f"flow-{n}.log" for n in (1, 2)]
    flows = []
    for log in logs:
        with log.open("w") as out:
            flows.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT))
    codes = [flow.wait(timeout=600) for flow in flows]
    said = [log.read_text() for log in logs]
    assert codes == [0, 0], "\n\n".join(said)
    assert all("curate: skipped (up to date)" in text for text in said)


def test_a_stage_that_fails_ends_the_run_with_its_own_line_and_no_traceback(committed):
    """A stage that stops for a reason its user can fix (calibrate keeps no problem in a band no pass rate of the
    reduced config falls in): its one line is the run's last, its state's message and name (what `--watch` ends
    with), and neither the flow's log nor its tasks' holds a traceback."""
    from flows.pipeline import lead_pipeline

    state = lead_pipeline(
        overrides=["calibrate.min_pass_rate=0.99"],
        stages=["calibrate"],
        workspace=str(committed),
        return_state=True,
    )
    assert state.is_failed(), state
    reason = state.message.partition(": failed: ")[2]
    assert "calibrate" in reason and "min_pass_rate" in reason, state.message
    assert f"Failed: {reason}".startswith(state.name.removesuffix("…")) and "\n" not in state.name
    logs = flow_logs(state, tasks=True)
    assert logs[-1] == state.message and not any("Traceback" in line for line in logs), logs


def test_bad_params_or_stage_names_stop_before_any_stage(workspace):
    from prefect.utilities.callables import parameter_schema
    from prefect.utilities.schema_tools import ValidationError, validate

    from flows.pipeline import lead_pipeline, main

    # At creation: the deployment's parameter schema, as the Prefect server validates it (prefect deployment
    # run), refuses an override that is no KEY=VALUE and a stage the DAG does not have; a good run passes.
    schema = parameter_schema(lead_pipeline).model_dump_for_openapi()
    validate({"overrides": ["train.max_steps=3"], "stages": ["train"]}, schema, raise_on_error=True)
    with pytest.raises(ValidationError, match=r"'overrides\[0\]'.*'train\.max_steps'"):
        validate({"overrides": ["train.max_steps"]}, schema, raise_on_error=True)
    with pytest.raises(ValidationError, match=r"'stages\[1\]'.*'deploy'"):
        validate({"stages": ["curate", "deploy"]}, schema, raise_on_error=True)

    # On start: every rule; the run ends Failed with the reason as its last line and no traceback.
    state = lead_pipeline(overrides=["train.num_generations=3"], workspace=str(workspace), return_state=True)
    assert state.is_failed()
    assert (
        state.message.startswith(f"lead-pipeline {_flow_run(state).name}: failed: ")
        and "\n" not in state.message
    )
    assert "train.num_generations = 3" in state.message
    # what `prefect deployment run --watch` ends with: "Flow run finished in state '<the state's name>'"
    assert ("Failed: " + state.message.partition(": failed: ")[2]).startswith(state.name.removesuffix("…"))
    logs = flow_logs(state)
    assert logs[-1] == state.message and not any("Traceback" in line for line in logs), logs
    with pytest.raises(ParamsError, match=r"train\.num_generations = 3"):
        state.result()
    # A mistyped key: named with the nearest one, in the run's last line and its state's name.
    typo = lead_pipeline(overrides=["train.max_stepz=3"], workspace=str(workspace), return_state=True)
    assert typo.is_failed() and "unknown key 'train.max_stepz' (did you mean 'train.max_steps'?)" in typo.name
    with pytest.raises(ParamsError, match="unknown stage"):
        lead_pipeline(workspace=str(workspace), stages=["curate", "deploy"])
    with pytest.raises(SystemExit) as exited:  # the command line: before any Prefect server starts
        main(["-S", "train.num_generations=3", "--workspace", str(workspace)])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:  # a run that stops: exit 1 after its one line, no traceback
        main(["--stages", "curate,deploy", "--workspace", str(workspace)])
    assert exited.value.code == 1
