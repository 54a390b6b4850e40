"""Kills the stack's MLflow server in the middle of the register stage, once (tests/stack/test_stack.py).

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; the test puts this folder there for one flow
run only (the deployment run's job variable ``env``), with

* ``LEAD_CHAOS_MLFLOW_PID`` — the stack's ``pids/mlflow.pid`` (the server runs in a process group of its own);
* ``LEAD_CHAOS_MARK`` — a file written once the server is killed: later attempts (Prefect's retry, a rerun)
  find it and run untouched.

In a register stage's process (``python -m lead.stages.register``) the first
``MlflowClient.update_model_version`` — right after ``mlflow.register_model`` has created the version, tagged
``lead.state=registering``, and before it is complete — first SIGKILLs the whole MLflow server, then goes on:
the worst moment for a half-made version. Test tooling only: nothing in ``lead/`` knows about it.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import itertools
import os
import signal
import sys
import time

_PID = os.environ.get("LEAD_CHAOS_MLFLOW_PID")
_MARK = os.environ.get("LEAD_CHAOS_MARK")


def _kill_server(version: str) -> None:
    pgid = int(open(_PID).read().split()[0])  # noqa: SIM115 (a one-line read at start-up)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the group is gone (uvicorn's workers included)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    with open(_MARK, "w") as f:
        f.write(f"{time.time()} {pgid} {version}\n")


class _PatchClient(importlib.abc.MetaPathFinder):
    """Wraps ``MlflowClient.update_model_version`` as soon as ``mlflow.tracking.client`` is imported."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "mlflow.tracking.client":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            original = module.MlflowClient.update_model_version

            def update_model_version(self, name, version, *args, **kwargs):
                if not os.path.exists(_MARK):
                    _kill_server(str(version))
                return original(self, name, version, *args, **kwargs)

            module.MlflowClient.update_model_version = update_model_version

        spec.loader.exec_module = exec_module
        return spec


def _register_stage() -> bool:
    argv = getattr(sys, "orig_argv", [])
    return any(flag == "-m" and value == "lead.stages.register" for flag, value in itertools.pairwise(argv))


if _PID and _MARK and _register_stage() and not os.path.exists(_MARK):
    sys.meta_path.insert(0, _PatchClient())
