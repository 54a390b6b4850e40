"""End to end through DVC: the whole DAG on a reduced config, then what a second run and a param change do."""

import json

import pytest

from lead.stages import STAGES
from tests.flows.conftest import dvc

pytestmark = pytest.mark.slow


def ran(output: str) -> list[str]:
    """The stages a `dvc repro` / `dvc exp run` output says it ran, in order."""
    return [s for s in STAGES if f"Running stage '{s}'" in output]


def test_dvc_repro_runs_the_whole_dag_then_only_what_changed(workspace):
    first = dvc(workspace, "repro")
    assert ran(first.stdout) == list(STAGES)
    registered = json.loads((workspace / "reports/register.json").read_text())
    assert registered["version"] == 1 and "champion" in registered["aliases"]
    assert registered["lineage"]["dvc.model_md5"] != "none"  # dvc.lock already held the train stage

    again = dvc(workspace, "repro")
    assert ran(again.stdout) == [] and "up to date" in again.stdout
    assert "proxy.pass_at_1" in dvc(workspace, "metrics", "show", "--json").stdout
    plots = dvc(workspace, "plots", "show", "--json").stdout
    for plot in ("histogram.csv", "budget_curve.png", "accuracy_vs_length.png", "pass_rate_histogram.png"):
        assert plot in plots, plot

    # One evaluate param: evaluate and register rerun, nothing upstream; the experiment is recorded.
    exp = dvc(workspace, "exp", "run", "-S", "evaluate.samples=3", "-n", "three-samples")
    assert ran(exp.stdout) == ["evaluate", "register"]
    metrics = json.loads((workspace / "reports/evaluate/metrics.json").read_text())
    assert metrics["proxy.samples_per_problem"] == 3
    assert "three-samples" in dvc(workspace, "exp", "list", "--name-only").stdout
    assert json.loads((workspace / "reports/register.json").read_text())["version"] == 2
