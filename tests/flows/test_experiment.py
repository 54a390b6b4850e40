"""The pieces of a flow run as a DVC experiment: the params written, the copy of the workspace, the experiment
saved, and the stopping of what a killed flow left running (the whole flow: tests/flows/test_pipeline.py)."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from flows.commands import SESSIONS, _stat, dvc_executable, run, stop_orphans
from flows.experiment import experiment_copy, push_experiment, save_experiment, write_overrides
from lead.config import load_params
from tests.conftest import ROOT
from tests.flows.conftest import dvc

GIT = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]


def git(ws, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=ws, capture_output=True, text=True, check=True).stdout


def test_overrides_are_written_on_their_lines_and_nothing_else_changes(tmp_path):
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    overrides = [
        "train.max_steps=7",
        "evaluate.budgets=[24, 48, 96]",
        "train.stage2.enabled=true",
        "tracking.uri=null",
    ]
    write_overrides(params, overrides)

    assert load_params(params) == load_params(ROOT / "params.yaml", overrides)
    before, after = (ROOT / "params.yaml").read_text().splitlines(), params.read_text().splitlines()
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert [new.split("#")[0].strip() for _, new in changed] == [
        "max_steps: 7",
        "enabled: true",
        "- 24",
        "- 48",
        "- 96",
    ]
    # the override's line keeps its comment, where it was
    assert all(old.partition("#")[2] == new.partition("#")[2] for old, new in changed)


def _sleeper(ignore_term: bool = False, **kwargs) -> subprocess.Popen:
    code = "import signal, time; "
    code += "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_term else ""
    return subprocess.Popen([sys.executable, "-c", code + "print(flush=True); time.sleep(60)"], **kwargs)


def test_only_a_recorded_session_whose_leader_is_the_recorded_process_is_stopped(tmp_path):
    sessions = tmp_path / SESSIONS
    sessions.mkdir(parents=True)
    ours = _sleeper(start_new_session=True, stdout=subprocess.PIPE)  # what flows.commands.run starts
    not_a_leader = _sleeper()  # in this test's session: a pid that another command's record may name
    restarted = _sleeper(start_new_session=True)  # a leader, but started after the record was written
    try:
        time.sleep(0.2)
        for proc, started in (
            (ours, _stat(ours.pid)[1]),
            (not_a_leader, _stat(not_a_leader.pid)[1]),
            (restarted, 1),
        ):
            (sessions / str(proc.pid)).write_text(str(started))

        ours.stdout.readline()  # its SIGTERM handler is the default one by now
        assert stop_orphans(tmp_path) == [ours.pid]
        assert ours.wait(timeout=10) == -signal.SIGTERM  # asked first: a stage ends its MLflow run
        assert not_a_leader.poll() is None and restarted.poll() is None
        assert list(sessions.iterdir()) == []  # records of commands that are gone are dropped
    finally:
        for proc in (ours, not_a_leader, restarted):
            proc.kill()
            proc.wait()


def test_an_orphan_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    sessions = tmp_path / SESSIONS
    sessions.mkdir(parents=True)
    stubborn = _sleeper(ignore_term=True, start_new_session=True, stdout=subprocess.PIPE)
    try:
        stubborn.stdout.readline()  # SIGTERM is ignored from here on
        (sessions / str(stubborn.pid)).write_text(str(_stat(stubborn.pid)[1]))
        started = time.monotonic()
        assert stop_orphans(tmp_path, grace=1.0) == [stubborn.pid]
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
        assert 1.0 <= time.monotonic() - started < 10
    finally:
        stubborn.kill()
        stubborn.wait()


# A leader that dies at once on SIGINT or SIGTERM (as `dvc repro` does) over a process of its session that takes a
# while to end (as a stage ends its MLflow run): it prints the stage's pid once the stage's handler is in place.
_STAGE = """import pathlib, signal, sys, time
def end(*_):
    time.sleep(1.5)
    pathlib.Path(sys.argv[1]).write_text("ended")
    sys.exit(143)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, end)
print(__import__("os").getpid(), flush=True)
time.sleep(60)
"""
_LEADER = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])\n"
    "time.sleep(60)\n"
)


def _leader_over_a_slow_stage(ended) -> tuple[subprocess.Popen, int]:
    leader = subprocess.Popen(
        [sys.executable, "-c", _LEADER, _STAGE, str(ended)], start_new_session=True, stdout=subprocess.PIPE
    )
    return leader, int(leader.stdout.readline())


def test_an_orphan_is_stopped_with_every_process_of_its_session_not_only_its_leader(tmp_path):
    """Seen in the suite: the next flow's ``mlflow.start_run`` failed with "database is locked" while the stage of a
    killed flow's ``dvc repro``, whose end only the leader's was waited for, still wrote its MLflow run's end into
    the same sqlite store, in the copy that clean_stale had already removed."""
    sessions = tmp_path / SESSIONS
    sessions.mkdir(parents=True)
    ended = tmp_path / "stage-ended"
    leader, stage = _leader_over_a_slow_stage(ended)
    try:
        (sessions / str(leader.pid)).write_text(str(_stat(leader.pid)[1]))
        assert stop_orphans(tmp_path, grace=10.0) == [leader.pid]
        assert _stat(stage) is None  # gone when stop_orphans returns ...
        assert ended.read_text() == "ended"  # ... after it ended as it does on SIGTERM, not killed
    finally:
        leader.kill()
        leader.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(stage, signal.SIGKILL)


def test_a_command_is_interrupted_with_the_flow_instead_of_waited_for(tmp_path):
    script = "import time; print('started', flush=True); time.sleep(60)"

    def stop(line: str) -> None:
        raise KeyboardInterrupt  # what Ctrl-C does to the flow while the command runs

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run([sys.executable, "-c", script], tmp_path, on_line=stop)
    assert time.monotonic() - started < 30
    assert list((tmp_path / SESSIONS).iterdir()) == []  # it ended: nothing for a later flow to stop


def test_an_interrupted_command_is_waited_for_until_every_process_of_its_session_has_ended(tmp_path):
    ended, stages = tmp_path / "stage-ended", []

    def stop(line: str) -> None:
        stages.append(int(line))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run([sys.executable, "-c", _LEADER, _STAGE, str(ended)], tmp_path, on_line=stop)
    try:
        assert _stat(stages[0]) is None
        assert ended.read_text() == "ended"  # its own end, on the SIGINT passed on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stages[0], signal.SIGKILL)


def test_an_interrupted_command_that_ignores_sigint_is_terminated(tmp_path, monkeypatch):
    import flows.commands

    monkeypatch.setattr(flows.commands, "INTERRUPT_GRACE", 1.0)
    out = tmp_path / "signal.txt"
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"  # as when its parent ignores SIGINT (DVC does)
        f"signal.signal(signal.SIGTERM, lambda n, f: (open({str(out)!r}, 'w').write(str(n)), sys.exit(143)))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )

    def stop(line: str) -> None:
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run([sys.executable, "-c", script], tmp_path, on_line=stop)
    assert time.monotonic() - started < 10
    assert out.read_text() == str(int(signal.SIGTERM))  # asked to stop (a stage ends its run), not killed


STAGE = """\
import os, yaml
steps = yaml.safe_load(open("params.yaml"))["train"]["max_steps"]
open("steps.txt", "w").write(str(steps))
os.makedirs("resume", exist_ok=True)
open("resume/steps.jsonl", "a").write(f"{steps}\\n")
"""


@pytest.mark.slow
def test_the_copy_is_the_workspace_with_the_overrides_and_its_experiment_is_the_workspaces(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(ROOT / "params.yaml", ws / "params.yaml")
    (ws / "stage.py").write_text(STAGE)
    (ws / "dvc.yaml").write_text(
        textwrap.dedent("""\
        stages:
          steps:
            cmd: python stage.py
            deps: [stage.py]
            params: [train.max_steps]
            outs:
              - steps.txt
        """)
    )
    (ws / ".gitignore").write_text("/resume/\n")  # as the repository ignores its resume state
    (ws / "notes.txt").write_text("committed\n")
    (ws / "gone.txt").write_text("committed\n")
    git(ws, "init", "-q")
    dvc(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "ws")
    dvc(ws, "repro")  # dvc.lock and steps.txt's .gitignore stay uncommitted, as after a `make run`
    (ws / "notes.txt").write_text("edited, not committed\n")
    (ws / "gone.txt").unlink()
    (ws / "new.txt").write_text("untracked\n")
    status = git(ws, "status", "--porcelain")
    params = (ws / "params.yaml").read_bytes()

    with experiment_copy(ws, "run-1", ["train.max_steps=7"]) as copy:
        assert copy.parent == ws / ".dvc/tmp/lead-pipeline/runs"
        assert (copy / "notes.txt").read_text() == "edited, not committed\n"
        assert not (copy / "gone.txt").exists()
        assert (copy / "new.txt").exists()
        assert (copy / "dvc.lock").read_bytes() == (ws / "dvc.lock").read_bytes()
        # the resume state (paths.resume, no DVC output) is copied
        assert (copy / "resume/steps.jsonl").read_text() == (ws / "resume/steps.jsonl").read_text() != ""
        shipped = load_params(ROOT / "params.yaml").train.max_steps
        assert (copy / "steps.txt").read_text() == str(shipped)  # checked out from the workspace's cache
        assert load_params(copy / "params.yaml").train.max_steps == 7
        # Only the override makes the stage stale: no output is missing in the copy.
        said = dvc(copy, "status", "--json").stdout
        assert json.loads(said) == {
            "steps": [{"changed deps": {"params.yaml": {"train.max_steps": "modified"}}}]
        }
        dvc(copy, "repro")
        rev = save_experiment(copy, "seven", ["steps"])
        assert push_experiment(copy, "seven") is None  # no git remote: the ref stays here
        subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "origin.git")], check=True)
        git(ws, "remote", "add", "origin", str(tmp_path / "origin.git"))
        git(ws, "push", "-q", "origin", "HEAD:refs/heads/main")
        assert push_experiment(copy, "seven") == "origin"  # what the flow does with push and overrides

    assert not copy.exists() and "run-1" not in git(ws, "worktree", "list")
    assert (ws / "params.yaml").read_bytes() == params and (ws / "steps.txt").read_text() != "7"
    assert git(ws, "status", "--porcelain") == status
    assert "up to date" in dvc(ws, "status").stdout
    (baseline,) = json.loads(dvc(ws, "exp", "show", "--json").stdout)[1:]
    (seven,) = [r for e in baseline["experiments"] for r in e["revs"]]
    assert seven["name"] == "seven" and seven["rev"] == rev
    assert seven["data"]["params"]["params.yaml"]["data"]["train"]["max_steps"] == 7
    saved = git(ws, "show", f"{rev}:params.yaml")
    assert saved.startswith("# yaml-language-server") and "max_steps: 7" in saved  # the comments are kept
    dvc(ws, "exp", "apply", "seven")  # its outputs come from the shared cache
    assert (ws / "steps.txt").read_text() == "7"
    # Elsewhere, a clone of the repository pulls the experiment from the git remote.
    subprocess.run(
        ["git", "clone", "-q", "-b", "main", str(tmp_path / "origin.git"), str(tmp_path / "elsewhere")],
        check=True,
    )
    elsewhere = tmp_path / "elsewhere"
    dvc(elsewhere, "exp", "pull", "--no-cache", "origin", "seven")
    (baseline,) = json.loads(dvc(elsewhere, "exp", "show", "--json").stdout)[1:]
    assert [(r["name"], r["rev"]) for e in baseline["experiments"] for r in e["revs"]] == [("seven", rev)]


@pytest.mark.parametrize(
    ("printed", "reason"),
    [
        # a lead stage's one-line error, then DVC's closing line: the stage's own words
        (
            ["calibrating", "error: train: the pool is empty", "ERROR: failed to reproduce 'train'"],
            "error: train: the pool is empty",
        ),
        # a bug: the traceback's last line, not DVC's "exited with 1"
        (
            [
                "Traceback (most recent call last):",
                "ZeroDivisionError: division by zero",
                "ERROR: failed to reproduce 'x'",
            ],
            "ZeroDivisionError: division by zero",
        ),
    ],
)
def test_a_failed_command_says_why_in_one_line(tmp_path, printed, reason):
    from flows.commands import CommandError

    script = f"import sys; print({chr(10).join(printed)!r}); sys.exit(1)"
    with pytest.raises(CommandError) as failed:
        run([sys.executable, "-c", script], tmp_path)
    assert failed.value.reason == reason


def test_a_commands_log_leaves_out_dvcs_git_advice_and_keeps_the_rest(tmp_path, monkeypatch):
    """`dvc repro` ends each stage that changed dvc.lock with "To track the changes with git, run: git add
    dvc.lock" and the autostage hint: in a flow's run log that is nine times the same advice."""
    import logging

    import flows.commands

    git(tmp_path, "init", "-q")
    dvc(tmp_path, "init", "-q")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  hello:\n    cmd: echo hello from the stage > out.txt && cat out.txt\n    outs: [out.txt]\n"
    )
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.Logger(
        "the run log"
    )  # the run's logger (Prefect's inside a run), here one of the test's own
    log.addHandler(handler)
    monkeypatch.setattr(flows.commands, "logger", lambda: log)
    run([dvc_executable(), "repro"], tmp_path)
    assert "hello from the stage" in logged and any("Running stage 'hello'" in line for line in logged), (
        logged
    )
    assert not [line for line in logged if "git add" in line or "autostage" in line or "To track" in line], (
        logged
    )
