"""End to end through DVC: the whole DAG on a reduced config, then what a second run and a param change do."""

import json
import shutil
import subprocess

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
    subprocess.run([*git, "commit", "-q", "-m", "first run"], cwd=workspace, check=True)
    exp = dvc(workspace, "exp", "run", "-S", "evaluate.samples=3", "-n", "three-samples")
    assert ran(exp.stdout) == ["evaluate", "register"]
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


def test_an_experiment_with_a_key_no_stage_declares_fails_and_is_not_saved(recorded: FirstRun):
    """`dvc exp run -S +trian.max_steps=3` (DVC's own hint for a mistyped key): every stage's declared params
    are unchanged, so DVC would restore them all; register depends on the whole params file, runs, and refuses."""
    workspace = recorded.restore()
    before = dvc(workspace, "exp", "list", "--name-only").stdout
    bad = dvc(workspace, "exp", "run", "-S", "+trian.max_steps=3", "-n", "typo", check=False)
    assert bad.returncode != 0
    assert "unknown key 'trian'" in bad.stderr + bad.stdout
    assert ran(bad.stdout) == ["register"]  # nothing upstream ran: the bad param cost nothing
    assert dvc(workspace, "exp", "list", "--name-only").stdout == before  # no experiment saved
    assert _versions(workspace) == ["1"]


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
    workspace = recorded.restore()
    before, weights = _trained(workspace)
    steps = yaml.safe_load((workspace / "params.yaml").read_text())["train"]["max_steps"]
    _set(workspace, "warmstart.seed", 1)  # a retrained tokenizer and model, in the same folder
    assert ran(dvc(workspace, "repro", "train").stdout) == ["warmstart", "calibrate", "train"]
    after, new_weights = _trained(workspace)
    assert after["steps"] == steps and after["resumed_from"] is None, after  # every step, from scratch
    assert after["mlflow_run_id"] != before["mlflow_run_id"] and after["identity"] != before["identity"]
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
    failed = dvc(workspace, "repro", "train", check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "train.max_steps" in said and "dvc checkout" in said, said
    assert not (workspace / "models/train").exists()  # DVC removed the stage's outputs before running it
    (workspace / "params.yaml").write_text(original)
    dvc(workspace, "checkout")
    assert (workspace / "models/train/model.safetensors").read_bytes() == model
    assert (workspace / "reports/train.json").read_bytes() == report
    assert "up to date" in dvc(workspace, "status", "train").stdout
