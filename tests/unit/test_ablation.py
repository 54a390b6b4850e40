"""The ablation's pure parts: variant switches, summaries over seeds, the target."""

import pytest

from lead.config import load_params
from lead.core import ablation
from lead.training.presets import resolve
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("variant", "alpha_on", "wrong", "reweight"),
    [
        ("grpo", False, 0.0, False),
        ("grpo_l", True, 0.0, False),
        ("grpo_l_ad", True, 0.0, True),
        ("lead", True, -1.0, True),
    ],
)
def test_variants_switch_exactly_their_parts(variant, alpha_on, wrong, reweight):
    params = load_params(ROOT / "params.yaml", ablation.run_overrides(variant, seed=2, max_steps=7))
    lead = resolve(params.train).lead
    assert (lead.alpha > 0) == alpha_on and lead.wrong == wrong and lead.reweight == reweight
    assert params.train.seed == 2 and params.train.max_steps == 7 and params.evaluate.seed == 2


def test_improved_variant_uses_the_improved_preset():
    params = load_params(ROOT / "params.yaml", ablation.run_overrides("improved", seed=0, max_steps=1))
    assert params.train.preset == "improved" and resolve(params.train).loss_type == "dapo"


def test_scores_come_from_evaluate_metrics():
    metrics = {"proxy.pass_at_1": 0.3, "proxy.answered": 0.75, "proxy.len_avg": 50.0, "proxy.cons_at_8": 0.4}
    s = ablation.scores_from_metrics(metrics, samples=8)
    assert s == {
        "pass_at_1": 0.3,
        "mean_length": 50.0,
        "cons_at_k": 0.4,
        "precision": pytest.approx(0.4),  # correct among answered: 0.3 / 0.75
        "len_correct": None,
    }


def runs(*pairs):
    return [{"pass_at_1": p, "mean_length": n} for p, n in pairs]


def test_summary_is_mean_and_sample_std_over_seeds():
    s = ablation.summarise({"grpo": runs((0.30, 60), (0.32, 64), (0.34, 62))})["grpo"]
    assert s["seeds"] == 3 and s["pass_at_1_mean"] == pytest.approx(0.32)
    assert s["pass_at_1_std"] == pytest.approx(0.02) and s["mean_length_std"] == pytest.approx(2.0)
    assert s["precision_mean"] is None


def test_target_needs_shorter_lead_at_equal_accuracy_and_gains_over_the_warm_start():
    summary = ablation.summarise({"grpo": runs((0.30, 60.0)), "lead": runs((0.295, 47.0))})
    goal = ablation.target(summary, baseline_pass_at_1=0.26)
    assert goal["length_met"] and goal["accuracy_met"] and goal["every_variant_improves"] and goal["met"]
    assert goal["lead_vs_grpo_length_ratio"] == pytest.approx(47 / 60)

    assert not ablation.target(summary, baseline_pass_at_1=0.296)["met"]  # LEAD below the warm start
    longer = ablation.summarise({"grpo": runs((0.30, 60.0)), "lead": runs((0.30, 49.0))})
    assert not ablation.target(longer, 0.2)["length_met"]
    worse = ablation.summarise({"grpo": runs((0.30, 60.0)), "lead": runs((0.285, 40.0))})
    assert not ablation.target(worse, 0.2)["accuracy_met"]


def test_markdown_states_the_verdict():
    summary = ablation.summarise(
        {"grpo": runs((0.30, 60.0), (0.31, 61.0)), "lead": runs((0.30, 50.0), (0.3, 52.0))}
    )
    text = ablation.markdown(
        summary, ablation.target(summary, 0.25), {"pass_at_1": 0.25, "mean_length": 70.0}
    )
    assert "| GRPO-LEAD | 2 | 0.300 ± 0.000 | 51.0 ± 1.4 |" in text
    assert "NOT met" in text and "warm start (no RL)" in text
