"""Unit tests of lead.core.advantages: the §4 weight table, hand-worked groups, dropping, hypothesis properties."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lead.core.advantages import difficulty_weight, group_advantages, lead_advantages

EPS = 1e-6

# Enough examples to find edge cases, few enough to keep the unit suite well under 10 s.
FAST = settings(deadline=None, max_examples=50)


# --------------------------------------------------------------------------------------------------
# Straightforward per-group loop references, written independently of the vectorized code.
# --------------------------------------------------------------------------------------------------
def loop_w(x, A=0.4, B=1.5, k=10.0, rho0=0.75):
    return A + (B - A) / (1 + math.exp(k * (x - rho0)))


def loop_group_advantages(rewards, g, eps=EPS, scale_by_std=True):
    out = []
    for start in range(0, len(rewards), g):
        group = [float(r) for r in rewards[start : start + g]]
        mean = statistics.fmean(group)
        std = statistics.stdev(group) if g > 1 else 0.0
        out += [(r - mean) / (std + eps) if scale_by_std else r - mean for r in group]
    return np.array(out)


def loop_lead_advantages(rewards, g, eps=EPS, reweight=True, drop_uninformative=True):
    plain = loop_group_advantages(rewards, g, eps)
    out = []
    for start in range(0, len(rewards), g):
        group = [float(r) for r in rewards[start : start + g]]
        rho = sum(r > 0 for r in group) / g
        for a in plain[start : start + g]:
            if drop_uninformative and (all(r <= 0 for r in group) or all(r == 1 for r in group)):
                out.append(0.0)
            elif not reweight:
                out.append(a)
            else:
                out.append(a * loop_w(rho) if a > 0 else a * loop_w(1 - rho))
    return np.array(out)


# Rewards as the reward module produces them (penalties, 0, 1, shaped values) plus arbitrary floats.
REWARD_VALUES = st.one_of(st.sampled_from([-2.0, -1.0, 0.0, 1.0, 1.05, 0.95]), st.floats(-3, 3))


@st.composite
def reward_groups(draw, max_group_size=8, max_groups=5):
    g = draw(st.integers(1, max_group_size))
    n = g * draw(st.integers(1, max_groups))
    return draw(st.lists(REWARD_VALUES, min_size=n, max_size=n)), g


# --------------------------------------------------------------------------------------------------
# difficulty_weight: the G = 8 table of GRPO-LEAD.md §4
# --------------------------------------------------------------------------------------------------
G8_TABLE = {  # correct/8 -> (w(rho), w(1 - rho)), copied from the doc
    0: (1.499, 0.483),
    1: (1.498, 0.645),
    2: (1.493, 0.950),
    3: (1.475, 1.255),
    4: (1.417, 1.417),
    5: (1.255, 1.475),
    6: (0.950, 1.493),
    7: (0.645, 1.498),
    8: (0.483, 1.499),
}


@pytest.mark.parametrize(("n_correct", "weights"), G8_TABLE.items())
def test_weight_table_g8(n_correct, weights):
    rho = n_correct / 8
    assert (round(difficulty_weight(rho), 3), round(difficulty_weight(1 - rho), 3)) == weights


def test_weight_shapes_and_types():
    assert isinstance(difficulty_weight(0.5), float)
    assert isinstance(difficulty_weight(np.float64(0.5)), float)
    arr = difficulty_weight(np.array([[0.0, 0.75], [1.0, 0.5]]))
    assert arr.shape == (2, 2) and arr.dtype == np.float64
    assert arr[0, 1] == pytest.approx(0.95)  # (A + B) / 2 at rho0
    np.testing.assert_allclose(difficulty_weight(torch.tensor([0.0, 1.0])), [loop_w(0.0), loop_w(1.0)])


def test_weight_parameters_and_steep_k():
    assert difficulty_weight(0.3, A=1.0, B=1.0) == pytest.approx(1.0)
    assert difficulty_weight(0.5, rho0=0.5, A=0.0, B=2.0) == pytest.approx(1.0)
    with np.errstate(all="raise"):  # no overflow even for a step function
        assert difficulty_weight(0.0, k=1e6) == pytest.approx(1.5)
        assert difficulty_weight(1.0, k=1e6) == pytest.approx(0.4)


@FAST
@given(st.floats(-1, 2), st.floats(-1, 2))
def test_weight_is_decreasing_and_bounded(x, y):
    wx, wy = difficulty_weight(x), difficulty_weight(y)
    assert 0.4 <= wx <= 1.5
    assert wx == pytest.approx(loop_w(x), rel=1e-12)
    if x < y:
        assert wx >= wy


# --------------------------------------------------------------------------------------------------
# Hand-worked groups
# --------------------------------------------------------------------------------------------------
W25 = 0.4 + 1.1 / (1 + math.exp(-5.0))  # w(0.25): k (0.25 - 0.75) = -5 -> 1.492638
W50 = 0.4 + 1.1 / (1 + math.exp(-2.5))  # w(0.5): k (0.5 - 0.75) = -2.5 -> 1.416556
W75 = 0.95  # w(0.75) = A + (B - A) / 2


def test_hand_worked_groups():
    rewards = [1, -1, -1, -1, 1, 1, 1, -1, 1, 1, -1, -1]
    # Group 1: mean -0.5, deviations (1.5, -0.5, -0.5, -0.5), sample std sqrt(3 / 3) = 1
    #   -> A~ = (1.5, -0.5, -0.5, -0.5); rho = 1/4: positive x w(0.25), negatives x w(0.75) = 0.95.
    # Group 2: mirror image: A~ = (0.5, 0.5, 0.5, -1.5); rho = 3/4: positives x 0.95, negative x w(0.25).
    # Group 3: mean 0, std sqrt(4 / 3) = 1.1547 -> A~ = +/-0.866025; rho = 1/2: both sides x w(0.5).
    s = math.sqrt(3) / 2
    expected = [
        *(1.5 * W25, -0.5 * W75, -0.5 * W75, -0.5 * W75),
        *(0.5 * W75, 0.5 * W75, 0.5 * W75, -1.5 * W25),
        *(s * W50, s * W50, -s * W50, -s * W50),
    ]
    np.testing.assert_allclose(lead_advantages(rewards, 4), expected, rtol=1e-5)
    np.testing.assert_allclose(expected[0], 2.238957, rtol=1e-6)  # the numbers above, spelled out
    np.testing.assert_allclose(expected[8], 1.226774, rtol=1e-6)
    # Without reweighting: plain GRPO.
    plain = [1.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -1.5, s, s, -s, -s]
    np.testing.assert_allclose(lead_advantages(rewards, 4, reweight=False), plain, rtol=1e-5)
    np.testing.assert_allclose(group_advantages(rewards, 4), plain, rtol=1e-5)


def test_group_advantages_eps_and_no_std_scaling():
    # [0, 2]: mean 1, std sqrt(2) -> +/-1 / (sqrt(2) + eps); Dr. GRPO: +/-1.
    assert group_advantages([0, 2], 2)[1] == pytest.approx(1 / (math.sqrt(2) + EPS), rel=1e-12)
    assert group_advantages([0, 2], 2, scale_by_std=False).tolist() == [-1.0, 1.0]
    assert group_advantages([0, 2], 2, eps=1.0)[1] == pytest.approx(1 / (math.sqrt(2) + 1))


def test_group_of_one_gets_zero_advantage():
    assert group_advantages([3.0, -1.0], 1).tolist() == [0.0, 0.0]
    assert lead_advantages([1.5, -1.0], 1, drop_uninformative=False).tolist() == [0.0, 0.0]


def test_all_correct_shaped_group_is_about_minus_z():
    # Known property (§4): with length-shaped rewards exp(-alpha z), A~ is close to -z whatever alpha.
    z = np.array([-1.0, 0.0, 1.0])
    rewards = np.exp(-0.05 * z)
    np.testing.assert_allclose(group_advantages(rewards, 3), -z, atol=0.02)


# --------------------------------------------------------------------------------------------------
# Dropping rules
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("group", "dropped"),
    [
        ([0, -1, -2, 0], True),  # nothing solved
        ([-1, -1, -1, -1], True),
        ([1, 1, 1, 1], True),  # all solved, unshaped
        ([1.05, 1.0, 0.95, 1.0], False),  # all solved but length-shaped: still informative
        ([1, 1, 1, 0], False),
        ([2, 2, 2, 2], False),  # all > 0 but not exactly 1: kept (equal rewards give 0 anyway)
    ],
)
def test_dropping_rules(group, dropped):
    kept = lead_advantages(group, 4, drop_uninformative=False)
    got = lead_advantages(group, 4)
    if dropped:
        assert got.tolist() == [0.0] * 4
    else:
        np.testing.assert_array_equal(got, kept)


def test_dropping_is_per_group_and_switchable():
    rewards = [0, -1, -2, 0, 1, -1, -1, -1]  # group 1 unsolved, group 2 informative
    got = lead_advantages(rewards, 4)
    assert got[:4].tolist() == [0.0] * 4
    assert got[4] > 0
    # Switched off, the unsolved group's different penalties do produce advantages.
    assert np.any(lead_advantages(rewards, 4, drop_uninformative=False)[:4] != 0)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
@FAST
@given(reward_groups())
def test_reweighting_never_flips_a_sign(data):
    rewards, g = data
    plain = group_advantages(rewards, g)
    weighted = lead_advantages(rewards, g, drop_uninformative=False)
    np.testing.assert_array_equal(np.sign(weighted), np.sign(plain))
    assert np.all(np.abs(weighted) >= 0.4 * np.abs(plain) - 1e-12)
    assert np.all(np.abs(weighted) <= 1.5 * np.abs(plain) + 1e-12)


@FAST
@given(st.integers(1, 8), st.integers(1, 4), REWARD_VALUES, st.booleans(), st.booleans())
def test_equal_rewards_give_zero_advantage(g, n_groups, value, reweight, drop):
    rewards = [value] * (g * n_groups)
    assert np.all(lead_advantages(rewards, g, reweight=reweight, drop_uninformative=drop) == 0)
    assert np.all(group_advantages(rewards, g) == 0)


@FAST
@given(reward_groups())
def test_groups_are_zero_mean_before_reweighting(data):
    rewards, g = data
    for scale in (True, False):
        adv = group_advantages(rewards, g, scale_by_std=scale).reshape(-1, g)
        np.testing.assert_allclose(adv.sum(axis=1), 0.0, atol=1e-9)


@FAST
@given(reward_groups(), st.booleans(), st.booleans(), st.sampled_from([1e-6, 1e-4]))
def test_vectorized_matches_loop_reference(data, reweight, drop, eps):
    rewards, g = data
    got = lead_advantages(rewards, g, eps=eps, reweight=reweight, drop_uninformative=drop)
    want = loop_lead_advantages(rewards, g, eps=eps, reweight=reweight, drop_uninformative=drop)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    plain, want_plain = group_advantages(rewards, g, eps=eps), loop_group_advantages(rewards, g, eps)
    np.testing.assert_allclose(plain, want_plain, rtol=1e-9, atol=1e-9)


@settings(deadline=None, max_examples=25)
@given(reward_groups())
def test_torch_numpy_and_list_inputs_agree(data):
    rewards, g = data
    from_list = lead_advantages(rewards, g)
    from_numpy = lead_advantages(np.array(rewards), g)
    from_torch = lead_advantages(torch.tensor(rewards, dtype=torch.float64, requires_grad=True), g)
    assert isinstance(from_torch, np.ndarray) and from_torch.dtype == np.float64
    np.testing.assert_array_equal(from_list, from_numpy)
    np.testing.assert_array_equal(from_list, from_torch)
    np.testing.assert_array_equal(
        group_advantages(rewards, g), group_advantages(torch.tensor(rewards, dtype=torch.float64), g)
    )


def test_float32_tensor_input():
    got = lead_advantages(torch.tensor([1.0, -1.0, -1.0, -1.0]), 4)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got[0], 1.5 * W25, rtol=1e-5)


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------
# Group sizes: tests/unit/test_rewards.py checks every entry point (one shared check, lead.core._arrays).
@pytest.mark.parametrize("rewards", [[[1.0, 0.0]], [1.0, float("nan")], [float("inf"), 0.0]])
def test_bad_rewards_raise(rewards):
    with pytest.raises(ValueError):
        lead_advantages(rewards, 2)


def test_lead_metrics_of_a_step():
    from lead.core.advantages import lead_metrics
    from lead.core.outcomes import OUTCOMES, Outcome

    code = {o: OUTCOMES.index(o) for o in Outcome}
    # Two groups of 2: one solved once (rho 0.5, informative), one never (rho 0, dropped: advantages 0).
    batch = {
        "codes": np.array(
            [code[Outcome.CORRECT], code[Outcome.WRONG], code[Outcome.WRONG], code[Outcome.WRONG]]
        ),
        "lengths": np.array([10.0, 30.0, 20.0, 40.0]),
        "rewards": np.array([1.0, -1.0, -1.0, -1.0]),
        "truncated": np.array([False, False, False, True]),
    }
    out = lead_metrics(batch, np.array([0.7, -0.7, 0.0, 0.0]), group_size=2)
    assert out["lead/share_correct"] == 0.25 and out["lead/share_wrong"] == 0.75
    assert out["lead/reward_wrong"] == -1.0 and "lead/reward_degenerate" not in out
    assert out["lead/length_correct"] == 10.0 and out["lead/length_incorrect"] == 30.0
    assert out["lead/length_mean"] == 25.0 and out["lead/truncated"] == 0.25
    assert out["lead/rho_mean"] == 0.25 and out["lead/rho_0"] == 0.5 and out["lead/rho_low"] == 0.5
    assert out["lead/weight_positive_mean"] == pytest.approx(
        float(difficulty_weight(np.array([0.5, 0.0])).mean())
    )
    assert out["lead/dropped_groups"] == 0.5
    assert out["lead/weight_spread"] == 0.0  # one informative group: nothing to reweight against


def test_the_weight_spread_is_over_the_informative_groups_only():
    from lead.core.advantages import lead_metrics
    from lead.core.outcomes import OUTCOMES, Outcome

    right, wrong = OUTCOMES.index(Outcome.CORRECT), OUTCOMES.index(Outcome.WRONG)
    # Groups of 4 with rho = 1/4, 3/4, 0 (dropped) and 1 (dropped).
    correct = [1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    batch = {
        "codes": np.array([right if c else wrong for c in correct]),
        "lengths": np.full(16, 10.0),
        "rewards": np.array([1.0 if c else -1.0 for c in correct]),
        "truncated": np.zeros(16, dtype=bool),
    }
    out = lead_metrics(batch, np.zeros(16), group_size=4)
    w = difficulty_weight(np.array([0.25, 0.75]))
    assert out["lead/weight_spread"] == pytest.approx(float(np.std(w)))
    assert out["lead/weight_spread"] == pytest.approx(abs(w[0] - w[1]) / 2)
