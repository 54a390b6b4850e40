"""The local loop of the README, for real: a Prefect server, a process pool, `prefect deploy` from prefect.yaml,
a worker, and `prefect deployment run` with a params override that must reach the stage."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.flows.conftest import dvc

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prefect_server(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [BIN / "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=2)
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, (
                tmp_path / "server.log"
            ).read_text()
            time.sleep(0.5)
    yield env
    server.terminate()
    server.wait(timeout=30)


def prefect(env, cwd, *args, timeout=600) -> str:
    done = subprocess.run(
        [BIN / "prefect", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_deployment_run_with_an_override_reaches_the_stage(prefect_server, workspace):
    env = prefect_server
    prefect(env, workspace, "work-pool", "create", "lead-local", "--type", "process")
    prefect(env, workspace, "--no-prompt", "deploy", "--prefect-file", "prefect.yaml", "-n", "local")
    override = json.dumps(["evaluate.max_new_tokens=40", "evaluate.budgets=[20,40]"])
    started = prefect(
        env, workspace, "deployment", "run", "lead-pipeline/local", "--param", f"overrides={override}"
    )
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", started).group(1)
    # One worker that takes the scheduled run, runs it, and exits.
    prefect(env, workspace, "worker", "start", "--pool", "lead-local", "--run-once", timeout=900)

    flow_run = json.loads(prefect(env, workspace, "flow-run", "inspect", run_id, "--output", "json"))
    assert flow_run["state_type"] == "COMPLETED", flow_run["state"]
    assert flow_run["parameters"]["overrides"] == json.loads(override)
    # The override ran as a DVC experiment of the workspace, named after the flow run; the workspace untouched.
    shown = json.loads(dvc(workspace, "exp", "show", "--json").stdout)
    revs = [r for b in shown for e in b.get("experiments") or [] for r in e["revs"]]
    (saved,) = [
        r for r in revs if r["data"]["params"]["params.yaml"]["data"]["evaluate"]["max_new_tokens"] == 40
    ]
    assert saved["name"].startswith(flow_run["name"])
    metrics = saved["data"]["metrics"]["reports/evaluate/metrics.json"]["data"]
    assert "proxy.budget_20.pass_at_1" in metrics  # the override reached the evaluate stage
    assert yaml.safe_load((workspace / "params.yaml").read_text())["evaluate"]["max_new_tokens"] != 40
    ours = workspace / "reports/evaluate/metrics.json"  # the workspace's own, if it ever ran
    assert not ours.exists() or "proxy.budget_20.pass_at_1" not in json.loads(ours.read_text())
