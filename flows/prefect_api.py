"""What lead's flows share at Prefect's edges: the ``overrides`` parameter, the one line a run ends with, and
Prefect's API for a flow started by hand.

*Overrides*: :data:`Override` carries the JSON Schema of one ``KEY=VALUE`` string
(:func:`lead.config.explain.override_schema`) into the deployment's parameter schema (the Prefect server refuses
another shape at creation); the flow checks keys and values as it starts, by every rule, and names a mistyped key
with the nearest valid one.

*One closing line*: a run that stops for a reason its user can fix — bad params (:class:`ParamsError`), a stage
or command that failed (:class:`flows.commands.CommandError`), cells that failed (:class:`RunStopped`) — logs
that reason as its last line and ends ``Failed`` with it as the state's message (:func:`stopped`), rather than
raising through Prefect, which would log the traceback of every frame again (a worker's engine logs the failed
state's exception anyway: :func:`quiet_engine_failure` drops that one record); a bug still raises. A run that
finishes logs its results as its last line (:func:`completed`). Either state is *named* after what the run came
to (``Done: <results>``, ``Failed: <reason>``): ``prefect deployment run --watch`` ends with the final state's
name (``Flow run finished in state '<name>'``), so that is the last line its user reads.

*By hand* (``python -m flows.pipeline``): one database migration at a time.

Without ``PREFECT_API_URL`` Prefect starts a temporary server for the process (its *ephemeral* mode), which
creates or migrates the database in ``PREFECT_HOME`` (sqlite) as it starts, unguarded across processes. Two
flows started at once on a fresh home both migrate the same database: one fails (``No such index``,
``duplicate column name``), or times out waiting for its server while the other holds the database.
:func:`start_local_api` starts this process's server while holding a file lock in ``PREFECT_HOME``: the first
process migrates, the next finds the database current. The flow then uses that same server (Prefect keeps one
per process). With ``PREFECT_API_URL`` set — a Prefect server (``make prefect-server``), a deployment's worker,
the tests' harness — the server migrated once when it started, and nothing here runs.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import WithJsonSchema

from flows.commands import CommandError, logger
from lead.config import ParamsError
from lead.config.explain import override_schema

LOCK = "lead-server-start.lock"
Override = Annotated[str, WithJsonSchema(override_schema())]


class RunStopped(RuntimeError):
    """A flow run that cannot finish for a reason its message says in full (e.g. the cells that failed)."""


STOPPING = (ParamsError, CommandError, RunStopped)

# What Prefect's engine logs, with the whole traceback, when a flow run started by a worker ends Failed
# (prefect/flow_engine.py, run_flow: it raises the failed state's exception and logs it on the way out):
# for a reason :func:`stopped` already said in one line, that traceback is dropped from the run's log.
ENGINE_FAILURE = "Engine execution exited with unexpected exception"
SAID = "_lead_said"  # set on an exception whose reason a run's last line already gives


class _SaidOnce(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        said = record.exc_info is not None and getattr(record.exc_info[1], SAID, False)
        return not (said and record.getMessage() == ENGINE_FAILURE)


def quiet_engine_failure() -> None:
    """Drop Prefect's engine traceback of a run :func:`stopped` ended (see :data:`ENGINE_FAILURE`), once per
    process, on Prefect's flow-run logger (the run log a worker's run sends to the server)."""
    log = logging.getLogger("prefect.flow_runs")
    if not any(isinstance(f, _SaidOnce) for f in log.filters):
        log.addFilter(_SaidOnce())


def stopped(flow_name: str, exc: Exception) -> Any:
    """The ``Failed`` state a flow returns for ``exc`` (one of :data:`STOPPING`), after logging its reason as
    one line: the run's last line, its state's message in the UI; calling the flow raises ``exc`` again."""
    from prefect.runtime import flow_run
    from prefect.states import Failed

    reason = exc.reason if isinstance(exc, CommandError) else "; ".join(str(exc).splitlines())
    line = f"{flow_name} {flow_run.name}: failed: {reason}"
    logger().error("%s", line)
    setattr(exc, SAID, True)
    quiet_engine_failure()
    return Failed(name=state_name("Failed", reason), message=line, data=exc)


def state_name(kind: str, text: str, most: int = 200) -> str:
    """``<kind>: <text>``, the text cut at ``most`` characters: a final state's name, which the UI shows as a
    badge and ``--watch`` prints last (the state's message keeps all of it).

    >>> state_name("Failed", "x" * 300)[-3:], len(state_name("Failed", "x" * 300))
    ('xx…', 208)
    """
    return f"{kind}: {text if len(text) <= most else text[: most - 1] + '…'}"


def completed(line: str, results: str, data: Any) -> Any:
    """The ``Completed`` state a flow returns when it has done its work: ``line`` (what it came to and where the
    results are) logged as its last line and kept as the state's message, the state named ``Done: <results>``
    (what ``--watch`` ends with); calling the flow returns ``data``."""
    from prefect.states import Completed

    logger().info("%s", line)
    return Completed(name=state_name("Done", results), message=line, data=data)


def start_local_api() -> None:
    """Start this process's temporary Prefect server under a lock in ``PREFECT_HOME`` when it will use one."""
    from prefect.client.orchestration import get_client
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_HOME,
        PREFECT_SERVER_ALLOW_EPHEMERAL_MODE,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    if PREFECT_API_URL.value() or not PREFECT_SERVER_ALLOW_EPHEMERAL_MODE.value():
        return
    home = Path(PREFECT_HOME.value())
    home.mkdir(parents=True, exist_ok=True)
    with (home / LOCK).open("w") as fh:
        fcntl.flock(
            fh, fcntl.LOCK_EX
        )  # released when the file closes, the server up and its database migrated
        # Prefect waits 20 s for its temporary server; a loaded machine (two flows starting, a training) needs more.
        waited = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or "120"
        with (
            temporary_settings({PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: int(waited)}),
            get_client(sync_client=True) as client,
        ):
            failed = client.api_healthcheck()
        if failed is not None:
            raise RuntimeError(f"the temporary Prefect server did not start: {failed}")


def check_then_start(parser: argparse.ArgumentParser, workspace: str, overrides: list[str]) -> None:
    """What a flow's command line does before its flow: validate the params (a typo exits 2 and costs no
    Prefect server start), then :func:`start_local_api`."""
    from lead.config import ParamsError, load_params

    try:
        load_params(Path(workspace) / "params.yaml", overrides)
    except ParamsError as exc:
        parser.exit(2, f"error: {exc}\n")
    start_local_api()
