"""What every stage's main() shares: --recipe before -S, clean exits for bad params and stage errors, and the
message that says why calibration kept no problem."""

import pytest

from lead.config import Params, ParamsError, WarmstartParams
from lead.dag import StageError
from lead.io.fingerprint import StaleOutputError
from lead.io.sources import SourceError
from lead.io.summaries import empty_pool_message
from lead.stages._common import stage_main
from tests.conftest import ROOT, tmp_params

PARAMS = str(ROOT / "params.yaml")


def test_a_stage_ends_by_saying_what_it_did(capsys):
    summary = {"kept": 7, "problems": 9, "keep_rule": "0 < pass_rate < 1", "mean_pass_rate": 0.5}
    stage_main("calibrate", lambda params: summary, ["--params", PARAMS])
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == "calibrate: kept 7 of 9 (0 < pass_rate < 1); mean pass rate 0.500"
    )


def test_stage_main_applies_the_recipe_then_the_overrides(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("train: {max_steps: 7, alpha: 0.5}\nevaluate: {samples: 3}\n")
    seen = []
    stage_main("train", seen.append, ["--params", PARAMS, "--recipe", str(recipe), "-S", "train.max_steps=9"])
    (params,) = seen
    assert (params.train.max_steps, params.train.alpha, params.evaluate.samples) == (9, 0.5, 3)


@pytest.mark.parametrize(
    ("dvc_stage", "pipeline"), [("train", "dvc.yaml"), ("ablation/dvc.yaml:cell@lead-0", "ablation/dvc.yaml")]
)
def test_bad_params_under_dvc_say_how_to_restore_the_outputs_of_the_stages_own_pipeline(
    monkeypatch, capsys, dvc_stage, pipeline
):
    monkeypatch.setenv("DVC_STAGE", dvc_stage)

    def run(params):
        raise ParamsError("train.alpha: must be > 0")

    with pytest.raises(SystemExit):
        stage_main("train", run, ["--params", PARAMS])
    assert f"`dvc checkout {pipeline}` restores the last good run's" in capsys.readouterr().err


def _workspace(tmp_path, text: str):
    (tmp_path / ".dvc").mkdir()
    params = tmp_path / "params.yaml"
    params.write_text(text)
    return params


def test_a_refusal_under_dvc_exp_run_names_what_it_left_in_params_yaml_and_the_command_that_restores_it(
    tmp_path, monkeypatch, capsys
):
    from lead.cli import app
    from tests.unit.test_cli import runner

    valid = "train:\n  max_steps: 3\n  seed: 1\n"
    params = _workspace(tmp_path, valid)
    stage_main("params", lambda p: {}, ["--params", str(params)])  # passes: kept as the last valid one
    params.write_text(
        "train:\n  max_steps: 3\n  seed: 2\ntrian:\n  max_steps: 3\n"
    )  # what dvc exp run -S wrote
    monkeypatch.setenv("DVC_STAGE", "params")
    monkeypatch.setenv("DVC_EXP_NAME", "sappy-kite")
    with pytest.raises(SystemExit) as exit_:
        stage_main("params", lambda p: pytest.fail("ran with bad params"), ["--params", str(params)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"error: {params}: unknown key 'trian' (did you mean 'train'?)")
    assert err[1:] == [
        "refused before any other stage ran: every output is as it was",
        f"{params} differs from the last valid one in: train.seed: 1 -> 2; trian.max_steps: 3 (added) (`dvc exp "
        "run` (experiment sappy-kite) wrote its -S values into it and DVC puts nothing back when a run fails)",
        f"restore the last valid params.yaml: lead params --restore (the committed one: git checkout -- {params})",
    ]
    done = runner.invoke(app, ["params", "--restore", "--params", str(params)])
    assert done.exit_code == 0, done.output
    assert params.read_text() == valid
    assert "changed back: train.seed: 1 -> 2; trian.max_steps: 3 (added)" in " ".join(done.output.split())


def test_a_stage_whose_params_file_changed_while_it_ran_fails_instead_of_being_recorded_with_the_new_ones(
    tmp_path, capsys
):
    # DVC records a stage's params as the file holds them when the stage ends: a second `dvc exp run` that
    # wrote seed 5 while the first trained with seed 4 would have the seed-4 model recorded as seed 5.
    params = _workspace(tmp_path, "train:\n  seed: 4\n")

    def train(p):
        assert p.train.seed == 4
        params.write_text("train:\n  seed: 5\n")
        return {"steps": 1, "last_reward": 0.5}

    with pytest.raises(SystemExit) as exit_:
        stage_main("train", train, ["--params", str(params)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert f"error: train: {params} changed while train ran" in err and "run train again" in err
    stage_main(
        "train", lambda p: {"steps": 1, "last_reward": 0.5}, ["--params", str(params)]
    )  # unchanged: fine


def test_a_stages_own_options_reach_run_and_the_common_ones_do_not():
    seen = []

    def arguments(parser):
        parser.add_argument("--seed", type=int, default=0)

    stage_main("x", lambda params, **kw: seen.append(kw), ["--params", PARAMS, "--seed", "3"], arguments)
    assert seen == [{"seed": 3}]


STOPPABLE = """
import sys, time
from lead.io.tracking import stage_run
from lead.stages._common import stage_main
from tests.conftest import tmp_params

def run(params):
    with stage_run(tmp_params(__import__("pathlib").Path(sys.argv[1])).tracking, "sleeper"):
        print("running", flush=True)
        time.sleep(120)

stage_main("sleeper", run, [])
"""


def test_a_stage_sent_sigterm_ends_its_mlflow_run_killed_and_exits_143(tmp_path):
    import signal
    import subprocess
    import sys

    import mlflow

    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPABLE, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()
        proc.wait()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs(client.get_experiment_by_name("lead").experiment_id)
    assert (run.data.tags["stage"], run.info.status) == ("sleeper", "KILLED")  # not RUNNING for ever


def test_a_run_whose_process_was_killed_is_ended_by_the_next_stage_and_a_live_processs_run_is_not(tmp_path):
    """SIGKILL cannot be caught: the sleeper's run says RUNNING after its process is gone, until the next stage
    run on this host starts. The other sleeper, alive, keeps its run RUNNING."""
    import signal
    import subprocess
    import sys

    import mlflow

    from lead.io.tracking import ENDED_BY_TAG, OWNER_TAG, stage_run

    procs = []
    try:
        for _ in range(
            2
        ):  # one after the other: the first creates the store (two would race on its migration)
            command = [sys.executable, "-c", STOPPABLE, str(tmp_path)]
            procs.append(subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True))
            assert procs[-1].stdout.readline().strip() == "running"
        killed, alive = procs
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=60) == -signal.SIGKILL
        client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
        experiment = client.get_experiment_by_name("lead").experiment_id

        def by_pid() -> dict[int, mlflow.entities.Run]:
            runs = client.search_runs(experiment, "tags.stage = 'sleeper'")
            return {int(r.data.tags[OWNER_TAG].rsplit(":", 2)[1]): r for r in runs}

        assert {r.info.status for r in by_pid().values()} == {"RUNNING"}  # what SIGKILL leaves
        with stage_run(tmp_params(tmp_path).tracking, "next"):
            pass
        runs = by_pid()
        assert runs[alive.pid].info.status == "RUNNING" and ENDED_BY_TAG not in runs[alive.pid].data.tags
        assert runs[killed.pid].info.status == "FAILED"
        why = runs[killed.pid].data.tags[ENDED_BY_TAG]
        assert why.startswith("stage next") and f"pid {killed.pid})" in why, why
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_what_a_killed_process_leaves_of_the_local_mlflow_store_is_ignored_by_git(tmp_path):
    """A process killed mid-write leaves SQLite's hot journal beside ``mlflow.db`` (the next connection rolls
    it back): as the store itself, it is no change to the repository (a killed flow run must leave ``git
    status`` clean)."""
    import shutil
    import signal
    import subprocess
    import sys

    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", ".gitignore"], cwd=tmp_path, check=True)
    writer = (
        "import os, signal, sqlite3; db = sqlite3.connect('mlflow.db'); db.execute('create table t (x)');"
        "db.commit(); db.execute('insert into t values (1)'); os.kill(os.getpid(), signal.SIGKILL)"
    )
    killed = subprocess.run([sys.executable, "-c", writer], cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL and (tmp_path / "mlflow.db-journal").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True)
    assert status.stdout == "A  .gitignore\n"


def test_stage_main_exits_cleanly_on_a_bad_recipe_bad_params_found_by_the_stage_and_a_stage_error(
    tmp_path, capsys
):
    def fails(error):
        def run(params):
            raise error

        return run

    cases = [
        (["--recipe", str(tmp_path / "missing.yaml")], fails(AssertionError("not run")), 2, "no such file"),
        ([], fails(ParamsError("train.grpo_config.beta: set by the pipeline")), 2, "train.grpo_config.beta"),
        ([], fails(StageError("calibrate kept 0 of 9 problems")), 1, "error: curate: calibrate kept 0 of 9"),
    ]
    for argv, run, code, message in cases:
        with pytest.raises(SystemExit) as exit_:
            stage_main("curate", run, ["--params", PARAMS, *argv])
        err = capsys.readouterr().err
        assert exit_.value.code == code and message in err and "Traceback" not in err


def _full_disk_write(target):
    import errno

    from lead.io.files import atomic_path

    def run(params):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")

    return run


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (SourceError("data/mine.jsonl: no such file"), "error: curate: data/mine.jsonl: no such file"),
        (StaleOutputError("models/train: not the model the train stage published"), "not the model"),
        (
            FileNotFoundError("models/warmstart: no warm-started model (run `lead warmstart` first)"),
            "lead warmstart",
        ),
    ],
)
def test_errors_a_user_can_fix_are_one_line_and_exit_1_unless_verbose(capsys, monkeypatch, error, message):
    def run(params):
        raise error

    with pytest.raises(SystemExit) as exit_:
        stage_main("curate", run, ["--params", PARAMS])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and err.strip().splitlines() == [err.strip()] and message in err
    monkeypatch.setenv("LEAD_VERBOSE", "1")  # `lead -v`: the traceback too
    with pytest.raises(type(error)):
        stage_main("curate", run, ["--params", PARAMS])


def test_a_full_disk_names_the_file_and_the_room_left_and_keeps_the_previous_output(tmp_path, capsys):
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("the previous run's")
    with pytest.raises(SystemExit) as exit_:
        stage_main("curate", _full_disk_write(target), ["--params", PARAMS])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 1
    assert line.startswith(f"error: curate: {target}: no space left on the device while writing it (")
    assert "MiB free there" in line
    assert target.read_text() == "the previous run's" and list(target.parent.iterdir()) == [target]


def test_a_bug_keeps_its_traceback(tmp_path):
    def run(params):
        (tmp_path / "missing" / "file").read_text()  # a FileNotFoundError the code did not mean: a bug

    with pytest.raises(FileNotFoundError):
        stage_main("curate", run, ["--params", PARAMS])


def _params(**warmstart) -> Params:
    return Params(warmstart=WarmstartParams(**warmstart))


STAGE1 = (0.0, 1.0, "neither")


@pytest.mark.parametrize(
    ("correct", "samples", "band", "warmstart", "fragments"),
    [
        (
            [0, 0, 0],
            4,
            STAGE1,
            {},
            [
                "calibrate kept 0 of 3 problems (0 < pass_rate < 1): the warm start solved 0 of 12 samples",
                "stronger warm start (warmstart.epochs",
                "or calibrate.keep_inclusive: left (keeps p = 0)",
            ],
        ),
        (
            [0, 0],
            4,
            (0.0, 1.0, "right"),  # the high end already closed: closing the low end too is `both`
            {"enabled": False},
            ["model.base (tiny) solved 0 of 8 samples", "a stronger model.base", "keep_inclusive: both"],
        ),
        (
            [4, 4],
            4,
            STAGE1,
            {},
            ["solved all 8 samples; use harder problems (curate.sources) or calibrate.keep_inclusive: right"],
        ),
        (
            [0, 1, 0],
            4,
            (0.25, 1.0, "neither"),  # 0.25 < p < 1: p = 1/4 is not above it
            {},
            [
                "every pass rate is at most 0.25, none above calibrate.min_pass_rate = 0.25",
                "a lower calibrate.min_pass_rate or calibrate.keep_inclusive: left (keeps p = 0.25)",
            ],
        ),
        (
            [3, 4],
            4,
            (0.0, 0.5, "neither"),
            {},
            [
                "every pass rate is at least 0.75, none below calibrate.max_pass_rate = 0.5",
                "higher calibrate.max",
            ],
        ),
        (
            [0, 2, 2],
            2,
            STAGE1,
            {},
            [
                "1 at or below the band (p <= 0) and 2 at or above it (p >= 1), none inside the band",
                "more samples per problem (calibrate.samples = 2: p moves in steps of 1/2)",
            ],
        ),
        (  # the train stage, which does not know the band
            [0, 0],
            8,
            None,
            {},
            ["calibrate kept 0 of 2 problems: the warm start solved 0 of 16", "keep_inclusive: left or both"],
        ),
        ([0, 8, 3], 8, None, {}, ["1 never solved, 1 always solved, 1 others, none inside the band"]),
    ],
)
def test_the_empty_pool_message_names_the_reason_and_its_knobs(correct, samples, band, warmstart, fragments):
    params = _params(**warmstart)
    base = None if params.warmstart.enabled else params.model.base
    message = empty_pool_message(correct, samples, band, reports=params.paths.reports, base=base)
    for fragment in fragments:
        assert fragment in message, message
