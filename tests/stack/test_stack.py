"""The team stack on one machine (infra/stack.py), for real: Postgres, the MLflow server with basic auth and
proxied artifacts, the Prefect server with its auth string, the process worker of ``lead-local``, the DVC
folder remote — and the pipeline run through it, as a team runs it.

One stack for the module, in a temporary state folder on free ports (not the developer's ``.stack/``), and one
deployment run of the whole DAG, which every pipeline test below reads: ``prefect deploy`` of prefect.yaml's
``local`` from a throw-away DVC workspace (tests/flows/conftest.py's seconds-sized settings, stage 2 off), then
``prefect deployment run 'lead-pipeline/local'`` with overrides, through the stack's Prefect server and worker and with
its auth string. The overrides make it a DVC experiment (``register.on_experiment=true``: registered anyway);
``push=true`` sends its outputs to the stack's DVC remote. During that run, once, the MLflow server is killed
in the middle of the register stage (``chaos/sitecustomize.py``: right after the version was created, before
it is complete); the test restarts it (``stack.py up``) once the stage has failed, and Prefect's retry
completes the stage.

This run replaces the deployment run on a temporary Prefect server that tests/flows/test_deployment.py made
(one run of the DAG serves both: ``make test`` has one fewer)."""

import functools
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow import MlflowClient

from lead import registration
from lead.config import load_params
from lead.dag import STAGES
from tests.conftest import ROOT
from tests.flows.conftest import REDUCED, WITHOUT_STAGE2, dvc, make_workspace, reduced
from tests.stack import test_registry_ui as ui
from tests.stack.browser import Browser
from tests.stack.harness import (
    BIN,
    client_env,
    prefect,
    prefect_api,
    script,
    stack_script,
    status,
    wait_for,
)

pytestmark = pytest.mark.slow  # four servers (~30 s on 2 cores) and the whole DAG through them (~5 min)

CHAOS = Path(__file__).with_name("chaos")
MODEL = REDUCED["register"]["model_name"]
CHROMIUM = ui.CHROMIUM
OVERRIDES = ["evaluate.max_new_tokens=40", "evaluate.budgets=[20,40]", "register.on_experiment=true"]


def test_up_is_idempotent_and_secrets_stay_private(stack):
    assert (stack["state"] / "secrets.env").stat().st_mode & 0o777 == 0o600
    again = script(stack["env"], "up", "--no-dvc-remote")
    assert again.returncode == 0 and again.stdout.count("already running") == 4, again.stdout
    assert script(stack["env"], "status").returncode == 0
    # No password on any process's command line.
    cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    for value in stack["secrets"].values():
        assert not any(value.encode() in c for c in cmdlines)
    env_sh = (stack["state"] / "env.sh").read_text()
    assert not any(value in env_sh for value in stack["secrets"].values())


def test_mlflow_refuses_requests_without_credentials(stack):
    url = f"{stack['mlflow']}/api/2.0/mlflow/experiments/search?max_results=1"
    assert status(url) == 401
    assert status(url, f"admin:{stack['secrets']['LEAD_STACK_MLFLOW_ADMIN_PASSWORD']}") == 200
    assert status(url, "admin:wrong") == 401


def test_prefect_api_needs_the_auth_string(stack):
    api = stack["prefect"]
    auth = stack["client"]["PREFECT_API_AUTH_STRING"]
    assert status(f"{api}/health") == 200  # Prefect leaves its health probe open (Kubernetes probes)
    assert status(f"{api}/work_pools/filter", data={}) == 401
    assert status(f"{api}/work_pools/filter", auth, data={}) == 200
    assert status(f"{api}/work_pools/lead-local", auth) == 200  # the pool the worker polls
    # The worker authenticates too: it shows in the pool once it has sent its first heartbeat.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "lead-stack" not in workers(stack):
        time.sleep(1)
    assert "lead-stack" in workers(stack)


def workers(stack: dict) -> list[str]:
    return [w["name"] for w in prefect_api(stack, "work_pools/lead-local/workers/filter", {})]


# ---------------------------------------------------------------------------------------- the deployment run


def task_runs(stack: dict, flow_run_id: str) -> dict[str, dict]:
    """The flow run's task runs by task name (``calibrate``, ``register``, ...)."""
    runs = prefect_api(stack, "task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    return {r["name"].rsplit("-", 1)[0]: r for r in runs}


def flow_run(stack: dict, flow_run_id: str) -> dict:
    return prefect_api(stack, f"flow_runs/{flow_run_id}")


@pytest.fixture(scope="module")
def workspace(stack, tmp_path_factory) -> Path:
    """A throw-away git + DVC workspace (the reduced config), the stack's DVC folder remote as its default."""
    # the stack is tested here; the DAG with stage 2 is tests/flows/test_dag.py's
    ws = make_workspace(tmp_path_factory.mktemp("workspace"), reduced(WITHOUT_STAGE2))
    remote = stack["state"] / "dvc-remote"  # what `make stack` adds to the checkout (--local: not in git)
    remote.mkdir()
    dvc(ws, "remote", "add", "-d", "--local", "stack", str(remote))
    return ws


@pytest.fixture(scope="module")
def pipeline(stack, workspace):
    """The one deployment run (module docstring): deploy, run, kill MLflow during register, restart it."""
    state = stack["state"]
    env = client_env(stack)
    started = time.monotonic()
    prefect(env, workspace, "--no-prompt", "deploy", "--prefect-file", "prefect.yaml", "-n", "local")
    mark = state / "chaos-killed"
    chaos = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(CHAOS), os.environ.get("PYTHONPATH")])),
        "LEAD_CHAOS_MLFLOW_PID": str(state / "pids" / "mlflow.pid"),
        "LEAD_CHAOS_MARK": str(mark),
        # Fail in seconds while the server is down, instead of MLflow's minutes of backed-off retries.
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    }
    # Watched, as a user runs it: the transcript's last line is what the run came to.
    transcript = state / "watched.txt"
    watching = subprocess.Popen(
        [
            *(str(BIN / "prefect"), "deployment", "run", "lead-pipeline/local"),
            *("--param", f"overrides={json.dumps(OVERRIDES)}", "--param", "push=true"),
            *("--job-variable", f"env={json.dumps(chaos)}", "--watch", "--watch-timeout", "2400"),
        ],
        cwd=workspace,
        env={**env, "COLUMNS": "400"},  # Prefect's console would wrap the last line at 80
        stdout=transcript.open("w"),
        stderr=subprocess.STDOUT,
    )
    uuid = re.compile(r"UUID:\s*([0-9a-f-]{36})")
    run_id = wait_for("the flow run's id", lambda: uuid.search(transcript.read_text()), timeout=120).group(1)

    def killed():
        run = flow_run(stack, run_id)
        assert run["state_type"] not in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"), (
            f"the flow run ended {run['state_type']} before the MLflow server was killed: "
            f"{(run.get('state') or {}).get('message')}"
        )
        return mark.exists()

    wait_for("the MLflow server killed during register", killed, timeout=1200)
    killed_at = time.monotonic()
    assert not stack_script.mlflow_health({"ports": stack["ports"]})

    def register_failed():  # the stage failed, Prefect waits to retry it
        task = task_runs(stack, run_id).get("register")
        return task if task and task["state"]["name"] == "AwaitingRetry" else None

    failed = wait_for("the register task failing", register_failed, timeout=300, every=0.5)
    failed_after = time.monotonic() - killed_at
    restarted = script(stack["env"], "up", "--no-dvc-remote")  # starts only what is not running: MLflow
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr

    def ended():
        run = flow_run(stack, run_id)
        return run if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    final = wait_for("the flow run", ended, timeout=900, every=3)
    watching.wait(timeout=120)
    states = prefect_api(stack, f"task_run_states/?task_run_id={failed['id']}")
    logs = prefect_api(
        stack, "logs/filter", {"logs": {"task_run_id": {"any_": [failed["id"]]}}, "sort": "TIMESTAMP_ASC"}
    )
    return {
        "id": run_id,
        "flow_run": final,
        "tasks": task_runs(stack, run_id),
        "register_states": [s["name"] for s in states],
        "register_log": "\n".join(line["message"] for line in logs),
        "failed_after": failed_after,
        "restarted": restarted.stdout,
        "seconds": time.monotonic() - started,
        "killed": mark.read_text().split(),
        "watched": (watching.returncode, transcript.read_text()),
    }


def saved_experiment(workspace: Path, flow_run_name: str) -> dict:
    shown = json.loads(dvc(workspace, "exp", "show", "--json").stdout)
    revs = [r for b in shown for e in b.get("experiments") or [] for r in e["revs"]]
    (saved,) = [r for r in revs if (r.get("name") or "").startswith(flow_run_name)]
    return saved


@pytest.mark.timeout(2400)  # the module's deployment run is made for this test
def test_deployment_run_through_the_stack_runs_every_stage_with_the_override(pipeline, workspace):
    run = pipeline["flow_run"]
    assert run["state_type"] == "COMPLETED", run["state"]
    assert run["parameters"]["overrides"] == OVERRIDES and run["parameters"]["push"] is True
    tasks = pipeline["tasks"]
    assert set(STAGES) <= set(tasks)
    for stage in STAGES:  # every stage ran (an up-to-date one would end "Skipped", a restored one "Cached")
        assert tasks[stage]["state"]["type"] == "COMPLETED", (stage, tasks[stage]["state"])
        assert tasks[stage]["state"]["name"] == "Completed", (stage, tasks[stage]["state"]["name"])
    # The override ran as a DVC experiment of the workspace, named after the flow run; the workspace untouched.
    saved = saved_experiment(workspace, run["name"])
    params = saved["data"]["params"]["params.yaml"]["data"]
    assert params["evaluate"]["max_new_tokens"] == 40 and params["register"]["on_experiment"] is True
    metrics = saved["data"]["metrics"]["reports/evaluate/headline.json"]["data"]
    assert "proxy.pass_at_1" in metrics  # the experiment holds the evaluation's headline figures
    assert yaml.safe_load((workspace / "params.yaml").read_text())["evaluate"]["max_new_tokens"] != 40
    assert not (workspace / "reports/evaluate/metrics.json").exists()


def test_a_mistyped_override_ends_the_watched_run_with_the_key_and_the_nearest_one(
    pipeline, stack, workspace
):
    """An override that is no KEY=VALUE is refused by the server (one line, no run); a mistyped key fails the run
    as it starts, and `prefect deployment run --watch` ends with that reason (the state's name), not a traceback."""
    runs = len(prefect_api(stack, "flow_runs/filter", {}))
    command = [str(BIN / "prefect"), "deployment", "run", "lead-pipeline/local", "--param"]
    env = {**client_env(stack), "COLUMNS": "400"}  # Prefect's console would wrap the last line at 80
    run = functools.partial(
        subprocess.run, cwd=workspace, env=env, capture_output=True, text=True, timeout=600
    )
    shapeless = run([*command, 'overrides=["train.max_steps"]'])
    said = shapeless.stdout + shapeless.stderr
    assert shapeless.returncode == 1 and "Validation failed for field 'overrides[0]'" in said, said
    assert "Traceback" not in said and len(prefect_api(stack, "flow_runs/filter", {})) == runs

    typo = run([*command, 'overrides=["train.max_stepz=3"]', "--watch", "--watch-timeout", "300"])
    said = typo.stdout + typo.stderr
    print(said)  # the transcript a user sees (pytest -rP shows it)
    last = " ".join(said[said.rindex("Flow run finished in state") :].split())  # (the console wraps it)
    assert typo.returncode == 1, said
    assert "unknown key 'train.max_stepz' (did you mean 'train.max_steps'?)" in last, said
    assert "Traceback" not in said, said


def test_the_watched_run_shows_each_stage_and_ends_with_what_it_came_to(pipeline):
    """`prefect deployment run --watch` streams the run's log (a line per stage, no library noise) and ends with
    the run's results (the state's name), not only "Completed"."""
    code, said = pipeline["watched"]
    print(said)  # the transcript a user sees (pytest -rP shows it)
    assert code == 0, said
    assert "train: ran — " in said and "evaluate: ran — " in said, said
    for noise in (
        "Triton",
        "Loading safetensors",
        "git add",
        "autostage",
        "Traceback (most recent call last)",
    ):
        assert noise not in said, (noise, said)
    last = " ".join(said[said.rindex("Flow run finished") :].split())  # (the console wraps it)
    assert last.startswith("Flow run finished successfully in 'Done: evaluate: "), last
    assert "proxy Pass@1 " in last and "; register: " in last, last


def test_the_run_ends_with_its_results_and_where_they_are(pipeline, stack):
    logs = prefect_api(
        stack,
        "logs/filter",
        {
            "logs": {"flow_run_id": {"any_": [pipeline["id"]]}, "task_run_id": {"is_null_": True}},
            "sort": "TIMESTAMP_ASC",
        },
    )
    own = [line["message"] for line in logs if not line["message"].startswith("Finished in")]
    name = pipeline["flow_run"]["name"]
    assert own[-1].startswith(f"lead-pipeline {name}: done — evaluate: "), own[-3:]
    assert "proxy Pass@1" in own[-1] and "; register: " in own[-1], own[-1]
    assert f"results in DVC experiment {name}" in own[-1] and "/#/experiments/" in own[-1], own[-1]


def parent_run(client: MlflowClient):
    experiment = client.get_experiment_by_name(load_params(ROOT / "params.yaml").tracking.experiment)
    (parent,) = client.search_runs([experiment.experiment_id], "tags.stage = 'pipeline'")
    return experiment, parent


def psql(stack: dict, sql: str) -> list[list[str]]:
    """A query on the stack's Postgres (as its OS user, through its socket: peer authentication)."""
    bindir = stack_script.pg_bindir()
    sock = stack["state"] / "pg" / "sock"
    cmd = [str(bindir / "psql"), "-At", "-F", "\t", "-h", str(sock), "-p", str(stack["ports"]["postgres"])]
    done = subprocess.run(
        stack_script.as_pg_user([*cmd, "-d", "mlflow", "-c", sql]), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [line.split("\t") for line in done.stdout.splitlines()]


def test_every_stage_run_is_nested_under_the_parent_run_in_postgres(pipeline, stack):
    client = MlflowClient(stack["mlflow"])
    experiment, parent = parent_run(client)
    assert experiment.artifact_location.startswith("mlflow-artifacts:")  # proxied by the server
    assert parent.info.status == "FINISHED" and parent.data.tags["dvc.experiment"].startswith(
        pipeline["flow_run"]["name"]
    )
    rows = psql(
        stack,
        "SELECT s.value, r.status FROM runs r JOIN tags s ON s.run_uuid = r.run_uuid AND s.key = 'stage' "
        "JOIN tags p ON p.run_uuid = r.run_uuid AND p.key = 'mlflow.parentRunId' "
        f"WHERE p.value = '{parent.info.run_id}' AND r.lifecycle_stage = 'active'",
    )
    finished = {stage for stage, status in rows if status == "FINISHED"}
    # Stage 2 is off here (the workspace fixture): its two stages write that it is, and track no run; nor does the
    # check of params.yaml, which makes nothing to track.
    assert finished == {s for s in STAGES if not s.endswith("_stage2") and s != "params"}, rows
    # The one register attempt the kill cut short is nested too: FAILED (MLflow was down when it ended, so it
    # could not say so itself; the retry did, when it deleted the half-made version).
    assert sorted(status for stage, status in rows if stage == "register") == ["FAILED", "FINISHED"], rows


def test_the_killed_stage_failed_clearly_and_the_retry_left_one_complete_version(pipeline, stack):
    # Killed right after mlflow.register_model had created version 1 (tagged lead.state=registering).
    assert pipeline["killed"][2] == "1"
    assert "AwaitingRetry" in pipeline["register_states"], pipeline["register_states"]
    log = pipeline["register_log"]  # the task's log: what the stage printed, then Prefect's verdict
    # Each retry said as it happened, then giving up in one line (no traceback).
    server = f"http://127.0.0.1:{stack['ports']['mlflow']}"
    assert f"MLflow server {server} does not answer (Connection refused): retrying" in log, log
    assert "error: register: the MLflow server did not answer" in log and "Traceback" not in log, log
    assert pipeline["failed_after"] < 120
    assert pipeline["tasks"]["register"]["run_count"] >= 2  # Prefect's retry completed it
    assert "mlflow: already running" not in pipeline["restarted"]
    client = MlflowClient(stack["mlflow"])
    versions = client.search_model_versions(f"name = '{MODEL}'")
    # The half-made version 1 was deleted by the retry before it registered version 2; nothing else is left.
    assert [v.version for v in versions] == ["2"], [(v.version, v.tags.get("lead.state")) for v in versions]
    # The killed attempt's run could not end itself (its server was down): the retry ended it FAILED.
    experiment, _ = parent_run(client)
    registers = client.search_runs([experiment.experiment_id], "tags.stage = 'register'")
    ended = {r.info.status: r.data.tags.get("lead.ended_by") for r in registers}
    assert len(registers) == 2 and ended.keys() == {"FAILED", "FINISHED"}, ended
    assert "its version 1 deleted" in ended["FAILED"]


def test_the_version_is_registered_on_the_server_with_lineage_aliases_and_loads(
    pipeline, stack, workspace, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", stack["mlflow"])  # as `source .stack/env.sh` does
    client = MlflowClient(stack["mlflow"])
    _, parent = parent_run(client)
    (version,) = client.search_model_versions(f"name = '{MODEL}'")
    version = client.get_model_version(MODEL, version.version)
    tags = version.tags
    assert tags["lead.state"] == "registered" and tags["git.commit"] and tags["model.fingerprint"]
    assert tags["mlflow.parent_run_id"] == parent.info.run_id
    runs = {r.data.tags["stage"]: r for r in client.search_runs([parent.info.experiment_id])}
    assert tags["train.run_id"] == runs["train"].info.run_id
    assert tags["evaluate.run_id"] == runs["evaluate"].info.run_id
    assert tags["dvc.model_md5"] != "none" and tags["dvc.train_data_md5"] != "none"
    assert "Pass@1" in version.description and "proxy" in version.description
    assert sorted(version.aliases) == ["challenger", "champion"]  # the first version: the gate promotes it
    assert any((stack["state"] / "mlartifacts").rglob("config.json"))  # artifacts proxied into the server's

    params = load_params(workspace / "params.yaml")  # what `lead promote` does, against the server
    # the champion already (the gate promoted it): read from the server, said, and nothing overwritten
    again = registration.promote(
        params.register_, params.tracking, version.version, "checked by hand on the team stack"
    )
    promoted = client.get_model_version(MODEL, version.version).tags["champion.promoted"]
    assert again["already"] and "by gate" in promoted and promoted == again["reason"]
    loaded = mlflow.transformers.load_model(f"models:/{MODEL}@champion", return_type="components")
    assert loaded["model"].num_parameters() > 0


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="chromium is not installed (`python infra/stack.py install`, or `apt-get install chromium`)",
)
def test_a_reviewer_logs_in_to_the_stacks_mlflow_ui_and_follows_every_link(pipeline, stack, tmp_path):
    """The registry review of tests/stack/test_registry_ui.py, on the stack's own MLflow (basic auth, Postgres,
    proxied artifacts) with a real login: the browser meets the server's 401 and answers it, as a person does."""
    assert CHROMIUM, "chromium is not installed: `.venv/bin/python infra/stack.py install` installs it"
    base = stack["mlflow"]
    login = ("admin", stack["secrets"]["LEAD_STACK_MLFLOW_ADMIN_PASSWORD"])
    client = MlflowClient(base)
    (version,) = client.search_model_versions(f"name = '{MODEL}'")
    version = client.get_model_version(MODEL, version.version)
    described = ui.LINK.findall(version.description)
    pass_at_1 = client.get_run(version.tags["evaluate.run_id"]).data.metrics["proxy.pass_at_1"]
    page_url = f"{base}/#/models/{MODEL}/versions/{version.version}?workflowType=machine_learning"

    with Browser(CHROMIUM, tmp_path) as stranger:  # closes the login prompt
        stranger.open(page_url, "You are not authenticated")
        assert stranger.challenges >= 1 and f"{pass_at_1:.3f}" not in stranger.text()
    with Browser(CHROMIUM, tmp_path, login) as reviewer:
        page = ui.Page(reviewer.open(page_url, "benchmark", f"{pass_at_1:.3f}"))
        assert reviewer.challenges >= 1  # it was asked, and logged in
        # the description rendered as HTML: the figures are table cells; its links are on the page
        assert page.cells[:2] == ["proxy", f"{pass_at_1:.3f}"], page.cells
        assert {label: href for href, label in page.described} == dict(described)
        runs = {label: href for label, href in described if "/runs/" in href and "/artifacts/" not in href}
        shown = ui.dom_text(
            reviewer.open(urllib.parse.urljoin(page_url, runs["evaluate run"]), "proxy.pass_at_1")
        )
        shown_value = re.search(r"proxy\.pass_at_1 ([0-9.]+)", shown)  # the run page's metrics table
        assert shown_value and abs(float(shown_value[1]) - pass_at_1) < 1e-3, shown[:2000]
    # Every link of the description resolves on the stack, with the login (and only with it).
    followed = {href: ui.outcome(base, page_url, href, login) for _, href in described}
    kinds = sorted(followed.values())
    assert kinds == sorted(["run", "run", *["artifact", "file"] * ((len(described) - 2) // 2)]), followed
    plot = next(href for _, href in described if "get-artifact" in href)
    assert ui.get(urllib.parse.urljoin(page_url, plot))[0] == 401


def test_a_fresh_clone_pulls_from_the_remote_and_reproduces_only_the_registration_record(
    pipeline, stack, workspace, tmp_path
):
    name = saved_experiment(workspace, pipeline["flow_run"]["name"])["name"]
    dvc(workspace, "exp", "apply", name)
    git = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]
    ignores = [str(p.relative_to(workspace)) for p in workspace.rglob(".gitignore") if ".dvc" not in p.parts]
    subprocess.run([*git, "add", "params.yaml", "dvc.lock", *ignores], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"experiment {name}"], cwd=workspace, check=True)
    # The pipeline's outputs (dvc.yaml). The flow pushed them (push=true).
    pushed = dvc(workspace, "push", "dvc.yaml")
    assert "Everything is up to date" in pushed.stdout, pushed.stdout

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(workspace), str(clone)], check=True)
    dvc(clone, "remote", "add", "-d", "--local", "stack", str(stack["state"] / "dvc-remote"))
    dvc(clone, "pull", "dvc.yaml")
    assert (clone / "models" / "train" / "config.json").exists()
    # Every output is on the remote (the resume state, which is not, is no DVC output), but for register's record:
    # a registration happened in a tracking store, and is never restored as if it had happened here...
    status = json.loads(dvc(clone, "status", "--json", "dvc.yaml").stdout)
    assert status == {"register": [{"changed outs": {"reports/register.json": "deleted"}}]}, status
    assert not (clone / "resume").exists()
    # ... so a plain `dvc repro` in the fresh clone runs register only, against the stack's MLflow, which holds
    # this model with this evaluation already: no second version.
    repro = dvc(clone, "repro", env={"MLFLOW_TRACKING_URI": stack["mlflow"]})
    for stage in STAGES:
        said = (
            "Running stage 'register'" if stage == "register" else f"Stage '{stage}' didn't change, skipping"
        )
        assert said in repro.stdout, repro.stdout
    record = json.loads((clone / "reports/register.json").read_text())
    assert record["registered"] is True and record["new_version"] is False, record


def test_down_leaves_no_process(stack):
    pids = [int(p.read_text()) for p in (stack["state"] / "pids").glob("*.pid")]
    pids.append(int((stack["state"] / "pg" / "data" / "postmaster.pid").read_text().split()[0]))
    assert len(pids) == 4
    down = script(stack["env"], "down")
    assert down.returncode == 0, down.stdout + down.stderr
    # the script's own notion of alive: running, zombies not counted
    assert not [p for p in pids if stack_script.alive(p) or stack_script.group_alive(p)]
    assert script(stack["env"], "status").returncode == 3
