"""A throw-away DVC workspace: this repo's dvc.yaml, code and shipped data, with a seconds-sized params.yaml."""

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TINY, _merge

# The reduced config: every stage runs, each in seconds (1-layer model, 60 problems, 2 RL steps, transformers),
# with every optional path of the DAG that reads something (the DAG contract test records them): the
# curriculum's stage 2 (its model evaluated and registered), a dev split, a shipped benchmark beside the proxy.
REDUCED = {
    "model": TINY,
    "curate": {"proxy": {"train_problems": 60, "test_per_level": 2, "max_ops": 3}},
    "warmstart": {"examples": 64, "batch_size": 16},
    # An untrained-looking 1-layer model solves nothing: keep every problem so that train has a pool.
    "calibrate": {"samples": 4, "backend": "transformers", "keep_inclusive": "both"},
    "train": {
        "max_steps": 2,
        "batch_size": 16,
        "save_steps": 1,
        "max_completion_length": 48,
        "dev_problems": 2,
        "eval_steps": 1,
        "stage2": {"enabled": True, "max_steps": 1},
    },
    "evaluate": {
        "model": "train_stage2",
        "backend": "transformers",
        "benchmarks": ["proxy", "aime24"],
        "max_problems": 4,
        "samples": 2,
        "max_new_tokens": 48,
        "budgets": [24, 48],
    },
    "register": {"model_name": "lead-e2e"},
}
# Merged into REDUCED by tests of something else than the curriculum's stage 2: its two stages still run, each
# writing that it is off, in seconds instead of a sampling and a training; evaluate judges stage 1's model.
WITHOUT_STAGE2 = {"train": {"stage2": {"enabled": False}}, "evaluate": {"model": "train"}}
RECORDER = Path(__file__).with_name("recorder")


def reduced(*changes: dict) -> dict:
    """A copy of :data:`REDUCED` with ``changes`` merged in, key by key (REDUCED itself untouched)."""
    config = copy.deepcopy(REDUCED)
    for change in changes:
        _merge(config, change)
    return config


def dvc(
    workspace: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run the venv's dvc in ``workspace`` (``env`` added to the environment); fail the test with its output
    when it fails (unless ``check`` is false)."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **(env or {}),
    }
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dvc")), *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 or not check, f"dvc {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def make_workspace(ws: Path, config: dict, extra: tuple[str, ...] = ()) -> Path:
    """A fresh git + DVC workspace in ``ws`` holding copies of what ``dvc.yaml`` names (and the ``extra`` files,
    e.g. the ablation's ``ablation/dvc.yaml``) and the shipped params.yaml with ``config`` merged in, committed."""
    # .gitignore too: as in a clone, the MLflow store and the outputs are ignored (an untracked mlflow.db would be
    # stashed and restored -- a new file under open connections -- by `dvc exp apply`).
    for name in (".gitignore", "dvc.yaml", "pyproject.toml", "prefect.yaml", "infra/stage.sh", *extra):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, ws / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("lead", "flows", "data/raw"):
        shutil.copytree(ROOT / name, ws / name, ignore=ignore)
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    _merge(data, config)
    (ws / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    git = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=ws, check=True)
    dvc(ws, "init", "-q")
    dvc(ws, "config", "core.analytics", "false")
    subprocess.run([*git, "add", "-A"], cwd=ws, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "workspace"], cwd=ws, check=True)
    _settle_index(ws)
    return ws


def _settle_index(ws: Path) -> None:
    """Refresh git's index once the clock has passed the second the files were written in, as in a clone that
    has sat a moment. A file written in the same second as the index is "racily clean" (git's timestamps are
    whole seconds): every ``git status`` re-reads it to compare contents. Register's ``git status`` (its
    ``+dirty`` lineage tag) would then read files the DAG contract rightly says it does not depend on."""
    index = ws / ".git" / "index"
    time.sleep(max(0.0, int(index.stat().st_mtime) + 1 - time.time()))
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=ws, check=True)


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A throw-away workspace with the reduced config."""
    return make_workspace(tmp_path_factory.mktemp("workspace"), REDUCED)


@dataclass(frozen=True)
class FirstRun:
    """The session workspace's first, full ``dvc repro``: what DVC printed, what every stage read and wrote (by
    stage, from ``recorder/``), and the params.yaml and dvc.lock it left."""

    workspace: Path
    output: str
    records: dict[str, dict]
    params: bytes
    lock: bytes
    register: bytes  # reports/register.json: no DVC cache holds it (the registry's record is never replayed)

    def restore(self) -> Path:
        """The workspace as the first run left it, whatever a test did since (a param set, an experiment
        applied, a stage rerun): its params.yaml and dvc.lock put back, the outputs they name checked out of
        DVC's cache (every one is there: ``dvc repro`` cached them), so that DVC finds the DAG up to date. What
        the tests registered and logged stays in the workspace's MLflow store."""
        (self.workspace / "params.yaml").write_bytes(self.params)
        (self.workspace / "dvc.lock").write_bytes(self.lock)
        (self.workspace / "reports/register.json").write_bytes(self.register)
        dvc(self.workspace, "checkout", "--force")
        assert "up to date" in dvc(self.workspace, "status").stdout
        return self.workspace


@pytest.fixture(scope="session")
def recorded(workspace, tmp_path_factory) -> FirstRun:
    """The workspace's first, full ``dvc repro``, every stage recorded by ``recorder/`` (what it reads and
    writes: ``tests/flows/test_dag_contract.py``). One run serves the modules of :data:`FIRST_RUN_MODULES`: they
    go to one test worker, and each starts from :meth:`FirstRun.restore`."""
    records = tmp_path_factory.mktemp("records")
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(RECORDER), os.environ.get("PYTHONPATH")])),
        "LEAD_RECORD_DIR": str(records),
    }
    done = dvc(workspace, "repro", env=env)
    by_stage = {}
    for path in records.glob("*.json"):
        record = json.loads(path.read_text())
        by_stage[record["stage"].removeprefix("lead.stages.")] = record
    return FirstRun(
        workspace,
        done.stdout,
        by_stage,
        (workspace / "params.yaml").read_bytes(),
        (workspace / "dvc.lock").read_bytes(),
        (workspace / "reports/register.json").read_bytes(),
    )


# The modules that share the workspace's first run: one test worker runs them, file after file
# (tests/conftest.py's scheduler), instead of each worker running the whole DAG for its share of them.
FIRST_RUN_MODULES = (
    "tests/flows/test_dag.py",
    "tests/flows/test_dag_contract.py",
    "tests/flows/test_pipeline.py",
)


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """One temporary Prefect server for the module, stopped when it ends: left to the interpreter's exit, its
    shutdown logs to streams pytest has already closed (a "Logging error" traceback after the summary). Its
    start may take a while on a loaded 2-core machine (Prefect's default wait, 30 s, timed out there)."""
    from prefect.testing.utilities import prefect_test_harness

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect")))
        with prefect_test_harness(server_startup_timeout=180):
            yield


def flow_logs(state, tasks: bool = False) -> list[str]:
    """The flow run's own log lines (with ``tasks``, its tasks' too), oldest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # logs reach the server in batches
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[state.state_details.flow_run_id])),
            sort=LogSort.TIMESTAMP_ASC,
        )
    return [
        log.message
        for log in logs
        if (tasks or log.task_run_id is None) and not log.message.startswith("Finished in")
    ]
