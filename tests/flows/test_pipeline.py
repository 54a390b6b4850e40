"""The Prefect flow runs the DVC stages, with params overrides, under one MLflow parent run."""

import mlflow
import pytest
from mlflow import MlflowClient

from lead.config import ParamsError
from lead.stages import STAGES


@pytest.fixture(scope="module", autouse=True)
def prefect_server(tmp_path_factory):
    """One temporary Prefect server for the module, stopped when it ends: left to the interpreter's exit, its
    shutdown logs to streams pytest has already closed (a "Logging error" traceback after the summary)."""
    from prefect.testing.utilities import prefect_test_harness

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect")))
        with prefect_test_harness():
            yield


@pytest.mark.slow
def test_flow_runs_dvc_stages_with_overrides_under_a_parent_run(workspace):
    from flows.pipeline import lead_pipeline

    original = (workspace / "params.yaml").read_bytes()
    overrides = ["evaluate.max_new_tokens=48", "evaluate.budgets=[24,48]"]
    result = lead_pipeline(overrides=overrides, workspace=str(workspace))

    assert list(result["stages"]) == list(STAGES)
    assert result["stages"]["evaluate"]["proxy.budget_24.pass_at_1"] is not None  # the override reached it
    assert (workspace / "params.yaml").read_bytes() == original  # restored after the run
    mlflow.set_tracking_uri(f"sqlite:///{workspace / 'mlflow.db'}")  # the workspace's default store
    parent = mlflow.get_run(result["mlflow_parent_run_id"])
    assert parent.data.tags["stage"] == "pipeline" and parent.info.status == "FINISHED"
    assert parent.data.params["overrides"] == " ".join(overrides)
    (evaluate,) = mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.stage = 'evaluate' and tags.mlflow.parentRunId = '{parent.info.run_id}'",
        output_format="list",
    )
    assert evaluate.data.params["evaluate.max_new_tokens"] == "48"
    version = result["stages"]["register"]["version"]
    tags = MlflowClient().get_model_version("lead-e2e", str(version)).tags
    assert tags["mlflow.parent_run_id"] == parent.info.run_id


def test_bad_params_or_stage_names_stop_before_any_stage(workspace):
    from flows.pipeline import lead_pipeline

    with pytest.raises(ParamsError, match=r"train\.num_generations = 3"):
        lead_pipeline(overrides=["train.num_generations=3"], workspace=str(workspace))
    with pytest.raises(ValueError, match="unknown stage"):
        lead_pipeline(workspace=str(workspace), stages=["curate", "deploy"])
