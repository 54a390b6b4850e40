"""The processes the flow starts (``dvc``, ``git``), and the stopping of those a killed flow left running.

A flow's process can die without running any cleanup (SIGKILL, a pod evicted, the worker stopped): the
``dvc repro`` it started carries on — and with it the stage under it, training for hours, holding DVC's lock
and writing into the folder it runs in. So every command :func:`run` starts gets a session of its own, and a
record of that session — its leader's pid and start time — in ``<folder>/.dvc/tmp/lead-pipeline/sessions/``
for as long as it runs. The next flow on the workspace, holding the workspace lock (so no live flow owns
those records), stops the sessions still recorded with :func:`stop_orphans`. The start time makes a record
name that one process only: a pid reused by any other process — a user's shell, say — does not match.
Reading a process's session and start time needs Linux's ``/proc``; elsewhere nothing is recorded or stopped
(a killed flow's stage then runs on to its end).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

SESSIONS = ".dvc/tmp/lead-pipeline/sessions"
# DVC's advice after a command that changed dvc.lock (dvc/repo/scm_context.py, dvc/commands/repro.py), said once
# per stage: a flow's run log leaves it out (the flow's summary says where the results are).
DVC_GIT_ADVICE = re.compile(
    r"(To track the changes with git, run:|git add .*|To enable auto staging, run:|dvc config core\.autostage true"
    r"|Use `dvc push` to send your updates to remote storage\.)"
)


def dvc_executable() -> str:
    """``dvc`` next to this interpreter (the project's venv), else whatever is on PATH."""
    local = Path(sys.executable).with_name("dvc")
    return str(local) if local.exists() else "dvc"


def stage_env(
    parent_run_id: str, tracking_uri: str, gpu: str | None = None, threads: int | None = None
) -> dict[str, str]:
    """The environment of a stage's command run by a flow: this one, with dvc.yaml's ``python`` found in this
    environment wherever the worker started, the stage's MLflow run a child of ``parent_run_id`` on
    ``tracking_uri``; ``gpu`` its ``CUDA_VISIBLE_DEVICES``, ``threads`` its OpenMP/MKL threads (unless the
    user set ``OMP_NUM_THREADS``)."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LEAD_PARENT_RUN_ID": parent_run_id,
        "MLFLOW_TRACKING_URI": tracking_uri,
    }
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    if threads is not None and "OMP_NUM_THREADS" not in os.environ:  # a user's own setting wins
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """The Prefect run logger inside a flow or task run (what the UI shows), a plain logger outside one."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("flows")


class CommandError(RuntimeError):
    """A command that exited non-zero; the message ends with the last lines it printed (``lines``)."""

    def __init__(self, message: str, lines: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.lines = [line.rstrip() for line in lines if line.strip()]

    @property
    def reason(self) -> str:
        """Why it failed, in one line: what a lead stage printed as ``error: ...`` (its one-line message), else
        the last line before DVC's closing ``ERROR: failed to reproduce ...`` (a traceback's last line), else
        the message's first line."""
        said = [line for line in self.lines if line.startswith("error: ")]
        own = [line for line in self.lines if not line.startswith("ERROR: ")]
        return (said or own or [str(self).splitlines()[0]])[-1]


def git(args: list[str], cwd: Path) -> str:
    """``git <args>`` in ``cwd``; its stdout, or :class:`CommandError` with its stderr."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CommandError(
            f"`git {' '.join(args)}` in {cwd} failed ({done.returncode}):\n{done.stderr.strip()}"
        )
    return done.stdout


def _stat(pid: int) -> tuple[int, int] | None:
    """``(session id, start time in clock ticks since boot)`` of a live process, ``None`` when there is none
    (or no ``/proc`` to ask)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ... starttime ...": comm may hold spaces and parentheses.
    fields = text.rpartition(")")[2].split()
    if fields[0] in ("Z", "X"):  # dead, not yet reaped by its parent
        return None
    return int(fields[3]), int(fields[19])


def run(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Run ``cmd`` in ``cwd`` in a session of its own, recorded under ``cwd`` while it runs; each line it prints
    goes to the run log (a training stage runs for hours; DVC's git advice left out) and to ``on_line``. A
    failure raises :class:`CommandError` with the end of that output."""
    log = logger()
    log.info("%s", " ".join(cmd))
    tail: collections.deque[str] = collections.deque(maxlen=60)
    sessions = cwd / SESSIONS
    sessions.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        record = sessions / str(proc.pid)
        stat = _stat(proc.pid)
        if stat is not None:
            record.write_text(str(stat[1]))
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip() and not DVC_GIT_ADVICE.fullmatch(line.strip()):
                    log.info("%s", line.rstrip())
                    tail.append(line)
                    if on_line is not None:
                        on_line(line.rstrip())
        except BaseException:
            # Ctrl-C, a cancelled task: its own session keeps the command from the terminal's SIGINT, so pass
            # one on (DVC hands it to the stage, whose MLflow run ends KILLED) rather than wait for hours; then
            # SIGTERM (the stages' handler does the same), then SIGKILL, for a command that ignores SIGINT (it
            # inherits an ignored SIGINT from a parent that ignores it).
            _stop(proc, (signal.SIGINT, signal.SIGTERM, signal.SIGKILL), grace=INTERRUPT_GRACE)
            raise
        finally:
            proc.wait()
            record.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise CommandError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{''.join(tail)}", tail)


INTERRUPT_GRACE = 10.0  # seconds a command has to stop after each signal before the next, harder one


def _session(session: int) -> list[int]:
    """The live processes of ``session`` (its leader and whatever it started, unless they left the session)."""
    try:
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return []
    return [pid for pid in pids if (stat := _stat(pid)) is not None and stat[0] == session]


def _signal_session(session: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group of ``session``'s leader (as a terminal does) and to any process of the
    session outside that group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(session, sig)
    for pid in _session(session):
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(pid) != session:
                os.kill(pid, sig)


def _gone_within(alive: Callable[[], object], seconds: float) -> bool:
    """Whether ``alive()`` turns false within ``seconds`` (asked every 0.1 s)."""
    until = time.monotonic() + seconds
    while alive():
        if time.monotonic() > until:
            return False
        time.sleep(0.1)
    return True


def _stop(proc: subprocess.Popen, signals: tuple[signal.Signals, ...], grace: float) -> None:
    """Send ``proc``'s session each of ``signals`` in turn until all of it has ended, ``grace`` s apart. All of it:
    ``dvc`` ends on the first signal while the stage under it is still ending its MLflow run."""
    for sig in signals:
        _signal_session(proc.pid, sig)
        if _gone_within(lambda: proc.poll() is None or _session(proc.pid), grace):
            return


def stop_orphans(folder: Path, timeout: float = 30.0, grace: float = 10.0) -> list[int]:
    """Stop the sessions recorded under ``folder`` whose leader still runs (commands a killed flow started there):
    SIGTERM first, so that a stage ends its MLflow run (KILLED) and cleans up, then SIGKILL for whatever still runs
    after ``grace`` seconds; wait for every process of those sessions to go, drop the records; returns the
    leaders' pids.

    Only call it while holding the workspace lock: a live flow's records are its running commands.
    """
    sessions = folder / SESSIONS
    stopped = []
    for record in sorted(sessions.glob("*")) if sessions.is_dir() else []:
        pid, started = int(record.name), record.read_text().strip()
        # The leader of its own session (pid == session id) with the recorded start time: our command itself.
        if started and _stat(pid) == (pid, int(started)):
            _signal_session(pid, signal.SIGTERM)
            stopped.append(pid)
        record.unlink()

    # Every process of those sessions, not only their leaders: `dvc repro` ends at once on SIGTERM while the stage
    # under it ends its MLflow run in the same sqlite store the next flow is about to write to, in the copy the
    # caller is about to remove.
    def alive() -> list[int]:
        return [pid for session in stopped for pid in _session(session)]

    if not _gone_within(alive, grace):
        for session in stopped:
            _signal_session(session, signal.SIGKILL)
        if not _gone_within(alive, timeout):
            raise CommandError(f"processes {alive()} under {folder} did not stop within {timeout:.0f} s")
    return stopped
