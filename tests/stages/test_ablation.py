"""`lead ablation` end to end on seconds-sized settings: the result file, table, plot, MLflow runs, reuse."""

import json
import os

import mlflow
import pytest

from lead.config import Params
from lead.stages import ablation, curate

pytestmark = pytest.mark.slow


@pytest.fixture
def params(small_params: Params, tiny_model) -> Params:
    curate.run(small_params)
    small_params.paths.models.mkdir(parents=True, exist_ok=True)
    os.symlink(tiny_model[0], small_params.paths.models / "warmstart")
    t = small_params.train
    t.num_generations, t.batch_size, t.max_completion_length, t.save_steps = 4, 8, 12, 1
    ev = small_params.evaluate
    ev.backend, ev.samples, ev.max_new_tokens, ev.budgets = "transformers", 2, 12, [6, 12]
    small_params.ablation.variants = ["grpo", "lead"]
    small_params.ablation.seeds = [0, 1]
    small_params.ablation.max_steps = 1
    return small_params


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

    again = ablation.run(params, out)  # every run is reused: same numbers, no new training
    assert again["variants"] == result["variants"]
    assert again["seconds"] < result["seconds"] / 2
