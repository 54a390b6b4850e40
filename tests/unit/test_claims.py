"""The ablation's pure parts: variants as params, a cell's scores, paired comparisons, verdicts, the report."""

import pytest

from lead.config import ParamsError, load_params
from lead.core import claims
from lead.reports.ablation import markdown
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
    params = load_params(ROOT / "params.yaml", ["ablation.max_steps=7"])
    train = params.ablation.variant_train(params.train, variant, seed=2)
    lead = resolve(train).lead
    assert (lead.alpha > 0) == alpha_on and lead.wrong == wrong and lead.reweight == reweight
    assert train.seed == 2 and train.max_steps == 7


def test_a_variant_is_any_set_of_train_keys_and_bad_ones_fail_at_load():
    params = load_params(
        ROOT / "params.yaml", ['ablation.variants={"lead_faithful": {"preset": "faithful"}}']
    )
    assert params.ablation.variant_train(params.train, "lead_faithful", 0).preset == "faithful"
    with pytest.raises(ParamsError, match=r"ablation.variants.x.*learning_rat"):
        load_params(ROOT / "params.yaml", ['ablation.variants={"x": {"learning_rat": 1}}'])
    with pytest.raises(ParamsError, match=r"ablation\.seeds and ablation\.max_steps"):
        load_params(ROOT / "params.yaml", ['ablation.variants={"x": {"seed": 1}}'])
    with pytest.raises(ParamsError, match=r"ablation\.variants"):
        load_params(ROOT / "params.yaml", ['ablation.variants={"Bad-Name": {}}'])


METRICS = {
    "proxy.problems": 70,
    "proxy.pass_at_1": 0.3,
    "proxy.answered": 0.75,
    "proxy.precision": 0.4,
    "proxy.len_avg": 50.0,
    "proxy.cons_at_8": 0.4,
    "proxy.truncation_rate": 0.25,
    **{f"proxy.level_{i}.problems": n for i, n in ((1, 10), (2, 10), (3, 20), (10, 30))},
    **{f"proxy.level_{i}.pass_at_1": p for i, p in ((1, 0.9), (2, 0.5), (3, 0.2), (10, 0.1))},
    **{f"proxy.level_{i}.precision": 0.5 for i in (1, 2, 3, 10)},
    **{f"proxy.level_{i}.answered": 1.0 for i in (1, 2, 3, 10)},
}


def test_cell_scores_come_from_evaluate_metrics_and_the_hardest_two_levels():
    s = claims.cell_scores(METRICS, samples=8)
    assert (s["pass_at_1"], s["mean_length"], s["answered"], s["precision"]) == (0.3, 50.0, 0.75, 0.4)
    assert s["cons_at_k"] == 0.4 and s["truncation_rate"] == 0.25 and s["len_correct"] is None
    assert list(s["levels"]) == ["level_1", "level_2", "level_3", "level_10"]  # natural order
    # levels 3 and 10, weighted by their problems: (0.2 x 20 + 0.1 x 30) / 50
    assert s["hard_pass_at_1"] == pytest.approx(0.14)


def rows(*values, score="pass_at_1"):
    return [{"seed": i, score: v} for i, v in enumerate(values)]


def test_summary_is_mean_and_sample_std_over_seeds_per_level_too():
    a = claims.cell_scores(METRICS, 8)
    b = claims.cell_scores({**METRICS, "proxy.pass_at_1": 0.34, "proxy.level_1.pass_at_1": 0.7}, 8)
    s = claims.summarise({"grpo": [{"seed": 0, **a}, {"seed": 1, **b}]})["grpo"]
    assert s["seeds"] == 2 and s["pass_at_1_mean"] == pytest.approx(0.32)
    assert s["pass_at_1_std"] == pytest.approx(0.0283, abs=1e-4)
    assert s["levels"]["level_1"]["pass_at_1_mean"] == pytest.approx(0.8)


def test_paired_difference_and_its_t_interval():
    # differences 0.02, 0.03, 0.01, 0.04, 0.00: mean 0.02, s_d = 0.0158, t(4) = 2.776 -> ± 0.0196
    treatment = {0: 0.32, 1: 0.33, 2: 0.31, 3: 0.34, 4: 0.30}
    control = {0: 0.30, 1: 0.30, 2: 0.30, 3: 0.30, 4: 0.30, 5: 0.9}  # seed 5 has no pair: left out
    d = claims.paired(treatment, control)
    assert d.n == 5 and d.higher == 4
    assert d.mean == pytest.approx(0.02) and d.std == pytest.approx(0.015811, abs=1e-6)
    assert (d.low, d.high) == (
        pytest.approx(0.02 - 0.019632, abs=1e-5),
        pytest.approx(0.02 + 0.019632, abs=1e-5),
    )
    assert claims.paired({0: 1.0}, {1: 1.0}) is None
    one = claims.paired({0: 1.0}, {0: 0.5})
    assert one.n == 1 and one.low is None and claims.verdict(one, 1) == "not shown"


@pytest.mark.parametrize(
    ("low", "high", "direction", "expected"),
    [
        (0.01, 0.03, 1, "holds"),
        (-0.03, -0.01, 1, "contradicted"),
        (-0.01, 0.03, 1, "not shown"),
        (-5.0, -1.0, -1, "holds"),
        (1.0, 5.0, -1, "contradicted"),
    ],
)
def test_verdict_reads_the_interval_against_the_claimed_direction(low, high, direction, expected):
    assert claims.verdict(claims.Paired(5, (low + high) / 2, 0.1, low, high, 0), direction) == expected


def seeds(name_values: dict[str, dict[str, list[float]]]) -> dict[str, list[dict]]:
    out = {}
    for name, scores in name_values.items():
        n = len(next(iter(scores.values())))
        out[name] = [{"seed": i, **{k: v[i] for k, v in scores.items()}} for i in range(n)]
    return out


VARIANTS = seeds(
    {
        "grpo": {
            "pass_at_1": [0.30, 0.31, 0.29],
            "mean_length": [60, 62, 61],
            "precision": [0.3] * 3,
            "hard_pass_at_1": [0.1, 0.1, 0.1],
        },
        "grpo_l": {
            "pass_at_1": [0.30, 0.31, 0.30],
            "mean_length": [44, 45, 43],
            "precision": [0.3] * 3,
            "hard_pass_at_1": [0.10, 0.11, 0.09],
        },
        "grpo_l_ad": {
            "pass_at_1": [0.31, 0.31, 0.30],
            "mean_length": [44, 44, 44],
            "precision": [0.30, 0.31, 0.30],
            "hard_pass_at_1": [0.12, 0.13, 0.12],
        },
        "lead": {
            "pass_at_1": [0.31, 0.30, 0.31],
            "mean_length": [45, 45, 46],
            "precision": [0.31, 0.30, 0.31],
            "hard_pass_at_1": [0.12, 0.12, 0.12],
        },
    }
)


def test_each_claim_is_judged_on_its_own_pair():
    judged = {c["key"]: c for c in claims.judge_claims(VARIANTS)}
    assert set(judged) == {"L", "E", "AD"}  # E (faithful) needs variants that did not run
    assert judged["L"]["verdict"] == "holds" and judged["L"]["diff"]["mean"] == pytest.approx(-17.0)
    assert judged["AD"]["verdict"] == "holds"  # +0.02, +0.02, +0.03 on the hardest levels
    assert judged["E"]["verdict"] == "not shown"  # +0.01, -0.01, +0.01


def test_shorter_but_less_accurate_does_not_make_the_length_claim_hold():
    worse = {**VARIANTS, "grpo_l": [{**r, "pass_at_1": r["pass_at_1"] - 0.05} for r in VARIANTS["grpo_l"]]}
    claim = next(c for c in claims.judge_claims(worse) if c["key"] == "L")
    assert claim["verdict"] == "contradicted" and claim["pass_at_1_diff"]["mean"] == pytest.approx(
        -0.0467, abs=1e-4
    )


def test_target_and_rl_gain_over_the_warm_start():
    baseline = rows(0.25, 0.24, 0.26)
    gains = claims.rl_gains(VARIANTS, baseline)
    assert gains["grpo"]["mean"] == pytest.approx(0.05) and gains["grpo"]["n"] == 3
    goal = claims.target(claims.summarise(VARIANTS), gains)
    assert goal["length_met"] and goal["accuracy_met"] and goal["every_variant_improves"] and goal["met"]
    assert goal["grpo_gain_met"]
    assert goal["lead_vs_grpo_length_ratio"] == pytest.approx(45.333 / 61, abs=1e-3)
    flat = claims.target(claims.summarise(VARIANTS), claims.rl_gains(VARIANTS, rows(0.4, 0.4, 0.4)))
    assert not flat["every_variant_improves"] and not flat["met"] and not flat["grpo_gain_met"]


def test_penalty_note_gives_the_arithmetic_when_the_outcome_table_has_two_levels():
    two = claims.penalty_note((1.0, -1.0, -1.0, -1.0), (1.0, 0.0, 0.0, 0.0), answered=1.0)
    assert "affine" in two and "precision equals Pass@1" in two
    three = claims.penalty_note((1.0, -1.0, 0.0, -2.0), (1.0, 0.0, 0.0, 0.0), answered=0.8)
    assert "affine" not in three and "below a cut-off" in three and "equals Pass@1" not in three


def test_the_report_holds_every_table_and_verdict():
    summary = claims.summarise({claims.WARMSTART: rows(0.25, 0.24, 0.26), **VARIANTS})
    gains = claims.rl_gains(VARIANTS, rows(0.25, 0.24, 0.26))
    text = markdown(
        summary, claims.target(summary, gains), claims.judge_claims(VARIANTS), gains, {"E": "two levels."}
    )
    assert "| warm start (no RL) | 3 | 0.250 ± 0.010 |" in text
    assert "| GRPO-LEAD | 3 |" in text
    assert (
        "| L: the length reward shortens at equal accuracy | GRPO+L vs GRPO | mean_length | -17.0 [" in text
    )
    assert "**holds**" in text and "**not shown**" in text
    assert "GRPO's gain over the warm start: **+0.050**" in text
    assert "Why E may not show here: two levels." in text
