"""The stack on free ports for a test module (infra/stack.py in a temporary state folder, not the developer's
``.stack/``), and what a test calls on it: its scripts, its Prefect API with the auth string, a user's
``prefect`` commands."""

import contextlib
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

import pytest

from tests.conftest import ROOT

STACK = ROOT / "infra" / "stack.py"
BIN = Path(sys.executable).parent


def load_stack_script():
    spec = importlib.util.spec_from_file_location("stack_script", STACK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stack_script = load_stack_script()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(STACK), *args], env=env, capture_output=True, text=True, timeout=400
    )


# The tests' workers look for scheduled flow runs every second, not Prefect's every 10 s: a run then starts
# within a second of being submitted instead of 5 s later on average (a user's stack keeps Prefect's default).
WORKER_POLLING = {"PREFECT_WORKER_QUERY_SECONDS": "1"}


@pytest.fixture(scope="module")
def stack():
    state = Path(tempfile.mkdtemp(prefix="lead-stack-test-"))
    state.chmod(0o711)  # Postgres runs as its own user and must reach state/pg
    installed = script({**os.environ, "LEAD_STACK_DIR": str(state)}, "install")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # A port found free can be taken by another process before the server binds it (a busy machine runs other
    # tests' servers): the stack then says so, and it comes up again on other ports.
    for _ in range(3):
        ports = {"postgres": free_port(), "mlflow": free_port(), "prefect": free_port()}
        env = {
            **os.environ,
            "LEAD_STACK_DIR": str(state),
            "LEAD_STACK_PG_PORT": str(ports["postgres"]),
            "LEAD_STACK_MLFLOW_PORT": str(ports["mlflow"]),
            "LEAD_STACK_PREFECT_PORT": str(ports["prefect"]),
            **WORKER_POLLING,
        }
        started = script(env, "up", "--no-dvc-remote")
        if started.returncode == 0 or "is taken by another process" not in started.stdout + started.stderr:
            break
        script(env, "down")  # what came up before the taken port
    secrets = dict(
        line.split("=", 1) for line in (state / "secrets.env").read_text().splitlines() if "=" in line
    )
    mlflow_url, prefect_api = (
        f"http://127.0.0.1:{ports['mlflow']}",
        f"http://127.0.0.1:{ports['prefect']}/api",
    )
    client = {  # what a client of the stack sets (stack.py's env.sh)
        "MLFLOW_TRACKING_URI": mlflow_url,
        "MLFLOW_TRACKING_USERNAME": "admin",
        "MLFLOW_TRACKING_PASSWORD": secrets["LEAD_STACK_MLFLOW_ADMIN_PASSWORD"],
        "PREFECT_API_URL": prefect_api,
        "PREFECT_API_AUTH_STRING": f"admin:{secrets['LEAD_STACK_PREFECT_PASSWORD']}",
    }
    info = {
        "state": state,
        "env": env,
        "ports": ports,
        "secrets": secrets,
        "up": started,
        "mlflow": mlflow_url,
        "prefect": prefect_api,
        "client": client,
    }
    # This process is a client of the MLflow server too (the tests' MlflowClient, `lead promote`, load_model);
    # the tracking URI itself is set per test (tests/conftest.py clears it before each one).
    saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
    os.environ.update({k: client[k] for k in saved})
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield info
    finally:
        info["down"] = script(env, "down")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(state, ignore_errors=True)


def status(url: str, auth: str | None = None, data: dict | None = None) -> int:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # a PBKDF2 check on a loaded machine
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def prefect_api(stack: dict, path: str, data: dict | None = None):
    """A call to the stack's Prefect API with its auth string: the JSON answer."""
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(
        f"{stack['prefect']}/{path}", data=body, headers={"Content-Type": "application/json"}
    )
    auth = b64encode(stack["client"]["PREFECT_API_AUTH_STRING"].encode()).decode()
    request.add_header("Authorization", f"Basic {auth}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def prefect(env: dict, cwd: Path, *args: str, timeout: int = 300) -> str:
    done = subprocess.run(
        [str(BIN / "prefect"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def wait_for(what: str, check, timeout: float, every: float = 2.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(every)


def client_env(stack: dict) -> dict[str, str]:
    """The environment of a user's ``prefect`` commands against the stack."""
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PREFECT_HOME": str(stack["state"] / "prefect-client"),
        **stack["client"],
    }


@contextlib.contextmanager
def as_client(stack: dict):
    """This test process as a client of the stack's Prefect server (a flow called in-process reports there).
    On leaving, the process's event and log workers are drained and stopped: they are process-wide and keep the
    server they first sent to, so a later module's temporary server would hear nothing of its flows' task runs
    and logs (Prefect's own test harness drains them on leaving for the same reason)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    settings = {
        PREFECT_API_URL: stack["prefect"],
        PREFECT_API_AUTH_STRING: stack["client"]["PREFECT_API_AUTH_STRING"],
    }
    with temporary_settings(settings):
        try:
            yield
        finally:
            APILogWorker.drain_all()
            EventsWorker.drain_all()
