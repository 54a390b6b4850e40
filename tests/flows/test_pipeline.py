"""The Prefect flow runs the same stage code, with params overrides, under one MLflow parent run."""

import mlflow
import pytest
import yaml

from lead.config import Params


@pytest.fixture
def params_file(small_params: Params, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(small_params.model_dump(mode="json", by_alias=True)))
    return path


def test_flow_runs_stages_with_overrides_under_a_parent_run(params_file, small_params: Params):
    from flows.pipeline import lead_pipeline

    result = lead_pipeline(
        overrides=["curate.proxy.train_problems=30"], params_path=str(params_file), stages=["curate"]
    )
    assert result["stages"]["curate"]["train"] == 30
    mlflow.set_tracking_uri(small_params.tracking.uri)
    parent = mlflow.get_run(result["mlflow_parent_run_id"])
    assert parent.data.tags["stage"] == "pipeline" and parent.info.status == "FINISHED"
    assert parent.data.params["overrides"] == "curate.proxy.train_problems=30"
    (child,) = mlflow.search_runs(
        experiment_names=["lead"], filter_string="tags.stage = 'curate'", output_format="list"
    )
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id


def test_bad_params_or_stage_names_stop_before_any_stage(params_file, small_params: Params):
    from flows.pipeline import lead_pipeline
    from lead.config import ParamsError

    with pytest.raises(ParamsError, match=r"train\.num_generations = 3"):
        lead_pipeline(overrides=["train.num_generations=3"], params_path=str(params_file))
    with pytest.raises(ValueError, match="unknown stage"):
        lead_pipeline(params_path=str(params_file), stages=["curate", "deploy"])
    assert not (small_params.paths.curated / "train.parquet").exists()
