"""The team stack on one machine (infra/stack.py), for real: Postgres, the MLflow server with basic auth and
proxied artifacts, the Prefect server with its auth string, the worker; the register stage against the server.

One stack for the module, in a temporary state folder on free ports (not the developer's ``.stack/``)."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from lead.config import Params
from lead.io.fingerprint import model_fingerprint, publish
from lead.io.tracking import use_experiment
from lead.stages import register
from lead.stages._common import manifest_path
from tests.conftest import ROOT, tmp_params
from tests.stages.test_register import evaluated

pytestmark = pytest.mark.slow  # starts four servers (~30 s on 2 cores) and registers one model

STACK = ROOT / "infra" / "stack.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(STACK), *args], env=env, capture_output=True, text=True, timeout=400
    )


@pytest.fixture(scope="module")
def stack():
    state = Path(tempfile.mkdtemp(prefix="lead-stack-test-"))
    state.chmod(0o711)  # Postgres runs as its own user and must reach state/pg
    ports = {"postgres": free_port(), "mlflow": free_port(), "prefect": free_port()}
    env = {
        **os.environ,
        "LEAD_STACK_DIR": str(state),
        "LEAD_STACK_PG_PORT": str(ports["postgres"]),
        "LEAD_STACK_MLFLOW_PORT": str(ports["mlflow"]),
        "LEAD_STACK_PREFECT_PORT": str(ports["prefect"]),
    }
    installed = script(env, "install")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    started = script(env, "up", "--no-dvc-remote")
    secrets = dict(
        line.split("=", 1) for line in (state / "secrets.env").read_text().splitlines() if "=" in line
    )
    info = {"state": state, "env": env, "ports": ports, "secrets": secrets, "up": started}
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield info
    finally:
        info["down"] = script(env, "down")
        shutil.rmtree(state, ignore_errors=True)


def status(url: str, auth: str | None = None, data: dict | None = None) -> int:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


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
    url = f"http://127.0.0.1:{stack['ports']['mlflow']}/api/2.0/mlflow/experiments/search?max_results=1"
    assert status(url) == 401
    assert status(url, f"admin:{stack['secrets']['LEAD_STACK_MLFLOW_ADMIN_PASSWORD']}") == 200
    assert status(url, "admin:wrong") == 401


def test_prefect_api_needs_the_auth_string(stack):
    api = f"http://127.0.0.1:{stack['ports']['prefect']}/api"
    auth = f"admin:{stack['secrets']['LEAD_STACK_PREFECT_PASSWORD']}"
    assert status(f"{api}/health") == 200  # Prefect leaves its health probe open (Kubernetes probes)
    assert status(f"{api}/work_pools/filter", data={}) == 401
    assert status(f"{api}/work_pools/filter", auth, data={}) == 200
    assert status(f"{api}/work_pools/lead-local", auth) == 200  # the pool the worker polls
    # The worker authenticates too: it shows in the pool once it has sent its first heartbeat.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "lead-stack" not in workers(f"{api}/work_pools/lead-local", auth):
        time.sleep(1)
    assert "lead-stack" in workers(f"{api}/work_pools/lead-local", auth)


def workers(pool: str, auth: str) -> list[str]:
    request = urllib.request.Request(
        f"{pool}/workers/filter", data=b"{}", headers={"Content-Type": "application/json"}
    )
    request.add_header("Authorization", "Basic " + b64encode(auth.encode()).decode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return [w["name"] for w in json.load(response)]


@pytest.fixture
def server_params(stack, tmp_path, tiny_model, monkeypatch) -> Params:
    """tests/stages/test_register.py's ``params``, tracked on the stack's MLflow server."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", stack["secrets"]["LEAD_STACK_MLFLOW_ADMIN_PASSWORD"])
    url = f"http://127.0.0.1:{stack['ports']['mlflow']}"
    p = tmp_params(tmp_path, tracking={"uri": url}, register={"model_name": "lead-stack"})
    model = p.paths.models / "train"
    shutil.copytree(tiny_model[0], model)
    p.paths.reports.mkdir(parents=True)
    use_experiment(p)
    with mlflow.start_run(run_name="train", tags={"stage": "train"}) as train_run:
        mlflow.log_params({"train.max_steps": 100, "train.preset": "paper"})
    (p.paths.reports / "train.json").write_text(json.dumps({"mlflow_run_id": train_run.info.run_id}))
    publish(
        manifest_path(p, "train"),
        "train",
        [p.paths.reports / "train.json"],
        model=model_fingerprint(model),
        mlflow_run_id=train_run.info.run_id,
    )
    p.evaluate.model = "train"
    return p


def test_register_and_promote_through_the_server(server_params: Params, stack):
    evaluated(server_params, 0.30, 60.0)
    first = register.run(server_params)
    assert first["version"] == 1 and first["aliases"] == ["challenger", "champion"]

    client = MlflowClient(server_params.tracking.uri)
    version = client.get_model_version("lead-stack", "1")
    assert version.tags["lead.state"] == "registered" and version.tags["git.commit"]
    assert (
        version.tags["train.run_id"] and version.tags["evaluate.run_id"] and version.tags["model.fingerprint"]
    )
    assert "Pass@1" in version.description
    experiment = client.get_experiment_by_name(server_params.tracking.experiment)
    assert experiment.artifact_location.startswith("mlflow-artifacts:")  # proxied by the server
    assert any((stack["state"] / "mlartifacts").rglob("config.json"))  # ... into its destination

    register.promote(server_params, "1", "checked by hand on the team stack")
    assert "hand (lead promote)" in client.get_model_version("lead-stack", "1").tags["champion.promoted"]
    loaded = mlflow.transformers.load_model("models:/lead-stack@champion", return_type="components")
    assert loaded["model"].num_parameters() > 0


def test_down_leaves_no_process(stack):
    pids = [int(p.read_text()) for p in (stack["state"] / "pids").glob("*.pid")]
    pids.append(int((stack["state"] / "pg" / "data" / "postmaster.pid").read_text().split()[0]))
    assert len(pids) == 4
    down = script(stack["env"], "down")
    assert down.returncode == 0, down.stdout + down.stderr
    spec = importlib.util.spec_from_file_location("stack_script", STACK)
    stack_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stack_script)  # its own notion of alive: running, zombies not counted
    assert not [p for p in pids if stack_script.alive(p) or stack_script.group_alive(p)]
    assert script(stack["env"], "status").returncode == 3
