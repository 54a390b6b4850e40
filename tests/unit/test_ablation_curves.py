"""The ablation's training curves: a variant's curve is the mean over its seeds, step by step."""

from lead.core.claims import mean_curve
from lead.reports.ablation import CURVE_PANELS, curves_figure


def test_a_mean_curve_averages_the_seeds_at_the_steps_they_all_logged():
    seeds = [
        [{"step": 1, "reward": 0.0, "weight_spread": None}, {"step": 2, "reward": 1.0, "weight_spread": 0.2}],
        [{"step": 1, "reward": 0.5, "weight_spread": 0.1}, {"step": 2, "reward": 0.0, "weight_spread": 0.4}],
        [{"step": 1, "reward": 1.0}, {"step": 2, "reward": 0.5}, {"step": 3, "reward": 9.0}],
    ]
    assert mean_curve(seeds, "reward") == ([1, 2], [0.5, 0.5])  # step 3: one seed only
    # a value some seed lacks leaves its step out: nothing is averaged over fewer seeds than the variant has
    assert mean_curve(seeds[:2], "weight_spread") == ([2], [0.30000000000000004])
    assert mean_curve([], "reward") == ([], [])


def test_the_curves_figure_draws_each_variant_in_each_panel():
    curve = [
        {"step": s, "reward": s / 10, "length": 50 - s, "truncated": 0.1, "weight_spread": 0.05}
        for s in (1, 2)
    ]
    fig = curves_figure({"grpo": [curve, curve], "lead": [curve]})
    axes = fig.axes
    assert len(axes) == len(CURVE_PANELS) == 4
    assert all(len(ax.lines) == 2 for ax in axes)
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == [
        "GRPO (2 seeds)",
        "GRPO-LEAD (1 seed)",
    ]
