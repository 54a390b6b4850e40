"""`lead ablation` end to end on seconds-sized settings: the result file, table, plot, MLflow runs, reuse."""

import json

import mlflow
import pytest

from lead.config import Params
from lead.stages import ablation

pytestmark = pytest.mark.slow


@pytest.fixture
def params(rl_params: Params) -> Params:
    ev = rl_params.evaluate
    ev.backend, ev.samples, ev.max_new_tokens, ev.budgets = "transformers", 2, 12, [6, 12]
    rl_params.ablation.variants = ["grpo", "lead"]
    rl_params.ablation.seeds = [0, 1]
    rl_params.ablation.max_steps = 1
    return rl_params


def test_ablation_writes_results_per_variant_and_seed_and_reuses_finished_runs(params: Params, tmp_path):
    out = tmp_path / "abl" / "result.json"
    result = ablation.run(params, out)

    data = json.loads(out.read_text())
    assert set(data["variants"]) == {"grpo", "lead"}
    for runs in data["variants"].values():
        assert [r["seed"] for r in runs] == [0, 1]
        assert all(0.0 <= r["pass_at_1"] <= 1.0 and r["mean_length"] > 0 for r in runs)
    assert data["summary"]["lead"]["seeds"] == 2 and "lead_vs_grpo_length_ratio" in data["target"]
    assert data["settings"]["max_steps"] == 1
    assert "| GRPO-LEAD | 2 |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").stat().st_size > 0
    assert (params.paths.models / "ablation" / "lead-s1" / "model.safetensors").exists()

    mlflow.set_tracking_uri(params.tracking.uri)
    children = mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.mlflow.parentRunId = '{result['mlflow_run_id']}'",
        output_format="list",
    )
    assert sorted(r.info.run_name for r in children) == [
        "grpo-s0",
        "grpo-s1",
        "lead-s0",
        "lead-s1",
        "warmstart",
    ]
    lead_s1 = next(r for r in children if r.info.run_name == "lead-s1")
    assert lead_s1.data.tags["variant"] == "lead" and "pass_at_1" in lead_s1.data.metrics

    again = ablation.run(params, out)  # every run is reused: same numbers, no new training or evaluation
    assert again["variants"] == result["variants"]
    assert not mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.mlflow.parentRunId = '{again['mlflow_run_id']}'",
        output_format="list",
    )


def test_cells_are_keyed_by_the_content_of_what_they_start_from(params: Params, tmp_path):
    import shutil

    before = ablation.inputs_fingerprint(params)
    start = params.paths.models / "warmstart"
    moved = tmp_path / "elsewhere"
    shutil.copytree(start, moved)
    start.unlink()  # the fixture's symlink: the same model, now at another place
    start.symlink_to(moved)
    assert ablation.inputs_fingerprint(params) == before
    (moved / "config.json").write_text((moved / "config.json").read_text() + " ")  # a new warm start
    assert ablation.inputs_fingerprint(params) != before
