"""The ablation's stages on seconds-sized settings: cells (a variant x seed, the warm start x seed), the report."""

import json

import mlflow
import pytest

from lead.config import Params, ParamsError
from lead.dag import StageError, manifest_path
from lead.io.fingerprint import model_fingerprint, publish
from lead.stages import ablation, ablation_cell

pytestmark = pytest.mark.slow


@pytest.fixture
def params(rl_params: Params) -> Params:
    ev = rl_params.evaluate
    ev.backend, ev.samples, ev.max_new_tokens, ev.budgets = "transformers", 2, 12, [6, 12]
    rl_params.ablation.variants = {
        "grpo": {"length_reward": False, "penalty": False, "reweight": False},
        "lead": {"length_reward": True, "penalty": True, "reweight": True},
    }
    rl_params.ablation.seeds = [0, 1]
    rl_params.ablation.max_steps = 1
    warmstart = rl_params.paths.models / "warmstart"  # the fixture's tiny model, published as the warm start
    publish(manifest_path(rl_params.paths, "warmstart"), "warmstart", [], model=model_fingerprint(warmstart))
    return rl_params


def test_cells_then_the_report_with_every_claim_and_one_mlflow_parent(params: Params):
    with pytest.raises(
        StageError, match=r"6 of 6 cells have no result \(warmstart-s0, warmstart-s1, grpo-s0"
    ):
        ablation.run(params)
    for seed in params.ablation.seeds:
        ablation_cell.run(params, None, seed)
        for variant in params.ablation.variants:
            ablation_cell.run(params, variant, seed)
    cell = json.loads((params.paths.reports / "ablation/cells/lead-s1/result.json").read_text())
    assert cell["variant"] == "lead" and cell["seed"] == 1 and cell["train"]["steps"] == 1
    [point] = cell["train"]["curve"]  # a point per logged step: what the report's curves are drawn from
    assert point["step"] == 1 and {"reward", "length", "truncated", "weight_spread"} <= set(point)
    assert 0.0 <= cell["scores"]["pass_at_1"] <= 1.0 and "level_1" in cell["scores"]["levels"]
    assert (params.paths.models / "ablation" / "lead-s1" / "model.safetensors").exists()
    assert (
        json.loads((params.paths.reports / "ablation/cells/warmstart-s0/result.json").read_text())[
            "evaluated"
        ]
        == "warmstart"
    )

    result = ablation.run(params)
    data = json.loads((params.paths.reports / "ablation" / "ablation.json").read_text())
    assert set(data["variants"]) == {"grpo", "lead"} and len(data["baseline_runs"]) == 2
    for runs in data["variants"].values():
        assert [r["seed"] for r in runs] == [0, 1]
    assert data["summary"]["lead"]["seeds"] == 2 and "lead_vs_grpo_length_ratio" in data["target"]
    assert set(data["gains"]) == {"grpo", "lead"} and data["gains"]["grpo"]["n"] == 2
    assert data["claims"] == []  # L, E and AD each need a pair of variants that differ in one part
    metrics = json.loads((params.paths.reports / "ablation" / "metrics.json").read_text())
    assert set(metrics["grpo"]) == {"pass_at_1", "mean_length", "precision", "hard_pass_at_1", "gain"}
    assert "| GRPO-LEAD | 2 |" in (params.paths.reports / "ablation" / "ablation.md").read_text()
    assert (params.paths.reports / "ablation" / "ablation.png").stat().st_size > 0
    assert (params.paths.reports / "ablation" / "curves.png").read_bytes()[:4] == b"\x89PNG"

    mlflow.set_tracking_uri(params.tracking.uri)
    children = mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.mlflow.parentRunId = '{result['mlflow_run_id']}'",
        output_format="list",
    )
    names = sorted(r.info.run_name for r in children)
    assert names == ["grpo-s0", "grpo-s1", "lead-s0", "lead-s1", "warmstart-s0", "warmstart-s1"]
    lead_s1 = next(r for r in children if r.info.run_name == "lead-s1")
    assert lead_s1.data.tags["variant"] == "lead" and "pass_at_1" in lead_s1.data.metrics
    # the cell's own train and evaluate runs are nested under it
    inner = mlflow.search_runs(
        experiment_names=["lead"],
        filter_string=f"tags.mlflow.parentRunId = '{lead_s1.info.run_id}'",
        output_format="list",
    )
    assert sorted(r.data.tags["stage"] for r in inner) == ["evaluate", "train"]


def test_a_cell_of_an_unknown_variant_is_a_params_error(params: Params):
    with pytest.raises(ParamsError, match=r"--variant 'grpo_x': not in ablation.variants \(grpo, lead\)"):
        ablation_cell.run(params, "grpo_x", 0)
