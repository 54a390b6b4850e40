"""End to end through DVC: the whole DAG on a reduced config, then what a second run and a param change do."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lead.config import set_path
from lead.core import experiments
from lead.dag import STAGES
from tests.conftest import ROOT
from tests.flows.conftest import REDUCED, FirstRun, dvc

pytestmark = pytest.mark.slow


def ran(output: str) -> list[str]:
    """The stages a `dvc repro` / `dvc exp run` output says it ran, in order."""
    return [s for s in STAGES if f"Running stage '{s}'" in output]


def test_dvc_repro_runs_the_whole_dag_then_only_what_changed(recorded: FirstRun):
    workspace = recorded.restore()
    assert ran(recorded.output) == list(STAGES)  # the first `dvc repro` of the workspace
    registered = json.loads((workspace / "reports/register.json").read_text())
    assert registered["version"] == 1 and "champion" in registered["aliases"]
    assert registered["lineage"]["dvc.model_md5"] != "none"  # dvc.lock already held the train stage

    again = dvc(workspace, "repro")
    assert ran(again.stdout) == [] and "up to date" in again.stdout
    assert "proxy.pass_at_1" in dvc(workspace, "metrics", "show", "--json").stdout
    plots = dvc(workspace, "plots", "show", "--json").stdout
    for plot in ("budget_curve.png", "accuracy_vs_length.png", "pass_rate_histogram.png"):
        assert plot in plots, plot
    assert "histogram.csv" not in plots  # images only: DVC's interactive charts need a CDN

    # The run committed, as a user keeps a result; then one evaluate param as a DVC experiment: evaluate and
    # register rerun, nothing upstream; the experiment is recorded and comparable, and registers nothing.
    git = ["git", "-c", "user.name=lead-tests", "-c", "user.email=tests@localhost"]
    subprocess.run([*git, "add", "dvc.lock"], cwd=workspace, check=True)
    # (--allow-empty: another module of this workspace may have committed it already)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first run"], cwd=workspace, check=True)
    exp = dvc(workspace, "exp", "run", "-S", "evaluate.samples=3", "-n", "three-samples")
    assert ran(exp.stdout) == ["params", "evaluate", "register"]  # the check of params.yaml costs a second
    metrics = json.loads((workspace / "reports/evaluate/metrics.json").read_text())
    assert metrics["proxy.samples_per_problem"] == 3
    assert "three-samples" in dvc(workspace, "exp", "list", "--name-only").stdout
    skipped = json.loads((workspace / "reports/register.json").read_text())
    assert skipped["registered"] is False and skipped["experiment"] == "three-samples"
    assert _versions(workspace) == ["1"]  # the sweep did not reach the registry

    # dvc exp show holds figures (not "!") for the commit and the experiment, and what the experiment changed.
    found = {r.name: r for r in experiments.rows(json.loads(dvc(workspace, "exp", "show", "--json").stdout))}
    commit = next(r for name, r in found.items() if name not in ("workspace", "three-samples"))
    three = found["three-samples"]
    assert three.changed == {"evaluate.samples": 3} and commit.changed == {}
    for row in (commit, three):
        assert isinstance(row.figures["proxy Pass@1"], float) and isinstance(row.figures["kept"], int), row
    assert (
        three.figures["kept"] == commit.figures["kept"] and three.figures["steps"] == commit.figures["steps"]
    )
    diff = json.loads(dvc(workspace, "metrics", "diff", "HEAD", "--json").stdout)
    # DVC's metrics are the headline figures (metrics.json, every figure, is a plain output): Cons@n follows n.
    changed = diff["reports/evaluate/headline.json"]
    assert changed["proxy.cons_at_3"]["old"] is None and changed["proxy.cons_at_3"]["new"] is not None
    assert f"proxy.cons_at_{REDUCED['evaluate']['samples']}" in changed

    # A clone that never ran the ablation (its pipeline file there, nothing of it run): ordinary commands work.
    (workspace / "ablation").mkdir(exist_ok=True)
    shutil.copy(ROOT / "ablation/dvc.yaml", workspace / "ablation/dvc.yaml")
    try:
        applied = dvc(workspace, "exp", "apply", "three-samples", check=False)
        assert applied.returncode == 0 and "ERROR" not in applied.stderr, applied.stderr
        shown = dvc(workspace, "metrics", "show", check=False)
        assert "failed to load" not in shown.stderr and "ablation" not in shown.stdout + shown.stderr
    finally:
        shutil.rmtree(workspace / "ablation")

    # Keeping the experiment: `dvc exp apply` (above), then `lead register` (dvc repro finds register up to date:
    # the experiment's run wrote its record). The version's lineage names the experiment and its commit.
    from lead.cli import app
    from tests.unit.test_cli import runner

    with contextlib.chdir(workspace):
        kept = runner.invoke(app, ["register"])
    assert kept.exit_code == 0, kept.output
    record = json.loads((workspace / "reports/register.json").read_text())
    experiment = record["lineage"]["dvc.experiment"]
    assert record["new_version"] and experiment.startswith("three-samples@"), record
    assert experiment.split("@")[1] in dvc(workspace, "exp", "show", "--json").stdout


def test_a_refused_experiment_removes_no_output_and_names_the_command_that_restores_params_yaml(
    recorded: FirstRun,
):
    """`dvc exp run -S +trian.max_steps=3` (DVC's own hint for a mistyped key), then a bad value: DVC writes -S
    values into params.yaml before any stage runs, removes a stage's outputs before running it, and puts nothing
    back when an experiment fails. The params stage runs first and refuses, so every output stays byte for byte;
    the refusal names the command that restores params.yaml, after which an experiment runs and is saved."""
    import hashlib

    from lead.cli import app
    from tests.unit.test_cli import runner

    workspace = recorded.restore()
    committed = (workspace / "params.yaml").read_bytes()
    with contextlib.chdir(workspace):  # as `make run` starts: the check keeps the file as the last valid one
        assert runner.invoke(app, ["params", "--check"]).exit_code == 0

    def outputs() -> dict[str, str]:
        files = [
            p
            for d in ("data/curated", "models", "reports")
            for p in (workspace / d).rglob("*")
            if p.is_file()
        ]
        return {str(p.relative_to(workspace)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    before = outputs()
    assert "models/train/model.safetensors" in before and "reports/train.json" in before
    saved, versions = dvc(workspace, "exp", "list", "--name-only").stdout, _versions(workspace)
    for override in (
        "+trian.max_steps=3",
        "train.max_steps=abc",
    ):  # the second on top of the first's leftover
        bad = dvc(workspace, "exp", "run", "-S", override, check=False)
        printed = bad.stdout + bad.stderr
        assert bad.returncode != 0 and ran(bad.stdout) == ["params"], printed
        assert "refused before any other stage ran: every output is as it was" in printed
        assert "trian.max_steps: 3 (added)" in printed and "lead params --restore" in printed, printed
        assert outputs() == before  # nothing removed, nothing rewritten
    assert "train.max_steps: 2 -> 'abc'" in printed
    assert dvc(workspace, "exp", "list", "--name-only").stdout == saved  # no experiment saved
    assert _versions(workspace) == versions

    with contextlib.chdir(workspace):
        restored = runner.invoke(app, ["params", "--restore"])
    assert restored.exit_code == 0, restored.output
    assert yaml.safe_load((workspace / "params.yaml").read_bytes()) == yaml.safe_load(committed)
    good = dvc(workspace, "exp", "run", "-S", "train.max_steps=3", "-n", "three-steps")
    assert "train" in ran(good.stdout)
    assert "three-steps" in dvc(workspace, "exp", "list", "--name-only").stdout
    assert json.loads((workspace / "reports/train.json").read_text())["steps"] == 3


def _set(workspace, key: str, value) -> None:
    """Set the dotted ``key`` of the workspace's params.yaml to ``value`` (what a user's edit does)."""
    data = yaml.safe_load((workspace / "params.yaml").read_text())
    set_path(data, key, value)
    (workspace / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _trained(workspace) -> tuple[dict, bytes]:
    return (
        json.loads((workspace / "reports/train.json").read_text()),
        (workspace / "models/train/model.safetensors").read_bytes(),
    )


def _versions(workspace) -> list[str]:
    """The registry's versions of the workspace's model."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    name = REDUCED["register"]["model_name"]
    return sorted(str(v.version) for v in client.search_model_versions(f"name = '{name}'"))


def _train_runs(workspace) -> list[str]:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{workspace / 'mlflow.db'}")
    runs = mlflow.search_runs(
        experiment_names=["lead"], filter_string="tags.stage = 'train'", output_format="list"
    )
    return sorted(r.info.run_id for r in runs)


def test_a_new_warm_start_trains_afresh_and_a_finished_training_is_never_redone(recorded: FirstRun):
    """The stale-resume failure, under DVC: the checkpoints and MLflow run of another start model are never
    continued. (Another pool at the same path, the other half of train's identity, is tests/stages/test_train.py's
    test_other_training_rows_train_afresh: here a new pool means new traces, hence a new warm start too, which
    would hide a pool left out of the identity.)"""
    import mlflow

    from lead.io.tracking import published_run

    workspace = recorded.restore()
    mlflow.set_tracking_uri(f"sqlite:///{workspace / 'mlflow.db'}")
    trained_by = published_run(workspace / "models/train.manifest.json").info.run_id
    before, weights = _trained(workspace)
    steps = yaml.safe_load((workspace / "params.yaml").read_text())["train"]["max_steps"]
    _set(workspace, "warmstart.seed", 1)  # a retrained tokenizer and model, in the same folder
    assert ran(dvc(workspace, "repro", "train").stdout) == ["params", "warmstart", "calibrate", "train"]
    after, new_weights = _trained(workspace)
    run = published_run(workspace / "models/train.manifest.json")
    assert after["steps"] == steps and "resumed_from" not in run.data.tags, run.data.tags  # from scratch
    assert run.info.run_id != trained_by and after["identity"] != before["identity"]
    assert new_weights != weights
    before, weights = after, new_weights
    assert ran(dvc(workspace, "repro", "train").stdout) == []  # unchanged: a no-op

    runs = _train_runs(workspace)
    forced = dvc(
        workspace, "repro", "--force", "--single-item", "train"
    ).stdout  # DVC removes models/train first
    assert ran(forced) == ["train"] and "reusing the finished run" in forced
    assert _trained(workspace) == (before, weights)  # the same summary and bytes, no extra step
    assert _train_runs(workspace) == runs  # no new MLflow run, the old one untouched
    assert "up to date" in dvc(workspace, "status", "train").stdout  # DVC sees the same output as before


def test_a_bad_param_under_dvc_repro_costs_nothing_that_dvc_checkout_cannot_restore(recorded: FirstRun):
    workspace = recorded.restore()
    model = (workspace / "models/train/model.safetensors").read_bytes()
    report = (workspace / "reports/train.json").read_bytes()
    original = (workspace / "params.yaml").read_text()
    _set(workspace, "train.max_steps", True)  # pydantic alone would read true as 1 step
    # The whole pipeline (or a target with its upstream): the params stage refuses first, nothing is removed.
    failed = dvc(workspace, "repro", "train", check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "train.max_steps" in said and ran(failed.stdout) == ["params"], said
    assert "refused before any other stage ran: every output is as it was" in said
    assert (workspace / "models/train/model.safetensors").read_bytes() == model
    # One stage alone (`-s`): DVC removes its outputs before it runs; the refusal says how to get them back.
    failed = dvc(workspace, "repro", "-s", "train", check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "`dvc checkout dvc.yaml` restores the last good run's" in said, said
    assert not (workspace / "models/train").exists()  # DVC removed the stage's outputs before running it
    (workspace / "params.yaml").write_text(original)
    dvc(workspace, "checkout")
    assert (workspace / "models/train/model.safetensors").read_bytes() == model
    assert (workspace / "reports/train.json").read_bytes() == report
    assert "up to date" in dvc(workspace, "status", "train").stdout


def test_two_experiments_started_together_never_record_a_model_under_params_it_was_not_trained_with(
    recorded: FirstRun,
):
    """`dvc exp run -S train.seed=4 & dvc exp run -S train.seed=5`: DVC's lock refuses the second, but only after it
    wrote seed 5 into params.yaml, while the first trains with seed 4. DVC records a stage's params as the file
    holds them when the stage ends: without the train stage's own check, dvc.lock said seed 5 for the seed-4 model
    and `dvc status` called it up to date. Now that train fails, and whatever the lock names for train is what the
    model it records was trained with."""
    import mlflow

    from lead.io.tracking import published_run

    workspace = recorded.restore()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [str(Path(sys.executable).with_name("dvc")), "exp", "run", "-S", "train.max_steps=6"]
    first = subprocess.Popen(
        [*command, "-S", "train.seed=4"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed = []
    for line in first.stdout:  # until the first experiment's train stage runs
        printed.append(line)
        if "Running stage 'train'" in line:
            break
    second = dvc(workspace, *command[1:], "-S", "train.seed=5", check=False)
    printed.append(first.communicate(timeout=600)[0])
    said = "".join(printed)
    assert second.returncode != 0 and first.returncode != 0, said + second.stdout + second.stderr
    assert "changed while train ran" in said, said
    locked = yaml.safe_load((workspace / "dvc.lock").read_text())["stages"]["train"]["params"]["params.yaml"]
    mlflow.set_tracking_uri(f"sqlite:///{workspace / 'mlflow.db'}")
    trained = published_run(workspace / "models/train.manifest.json").data.params
    up_to_date = "train:" not in dvc(workspace, "status", "train").stdout
    if up_to_date:  # what DVC would reuse for these params is what was trained with them
        assert str(locked["train"]["seed"]) == trained["train.seed"], (locked["train"], trained["train.seed"])
    else:  # the seed-4 model under seed-5 params: stale, so a seed-5 request trains again
        assert yaml.safe_load((workspace / "params.yaml").read_text())["train"]["seed"] == 5
        assert trained["train.seed"] == "4" and str(locked["train"]["seed"]) != "5"
