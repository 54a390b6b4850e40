"""Unit tests of lead.core.rewards: hand-worked tables and hypothesis properties."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lead.core.advantages import group_advantages, lead_advantages
from lead.core.outcomes import Outcome
from lead.core.rewards import lead_rewards

E_005 = 1.0512710963760241  # exp(+0.05): correct answer one sigma shorter than the mean
E_M005 = 0.951229424500714  # exp(-0.05): one sigma longer
RTOL = 1e-6  # z uses sigma + 1e-6, so hand values (with plain sigma) agree to ~1e-8 relative

OUTCOME_VALUES = [o.value for o in Outcome]
CONSTANTS = {"correct": 1.0, "wrong": -1.0, "unfinished": 0.0, "degenerate": -2.0}

# Enough examples to find edge cases, few enough to keep the unit suite well under 10 s.
FAST = settings(deadline=None, max_examples=50)


# --------------------------------------------------------------------------------------------------
# A straightforward per-group loop, written independently of the vectorized implementation.
# --------------------------------------------------------------------------------------------------
def loop_rewards(outcomes, lengths, group_size, alpha=0.05, length_gate=None, **constants):
    values = {**CONSTANTS, **constants}
    out = []
    for start in range(0, len(outcomes), group_size):
        group_o = [Outcome(o).value for o in outcomes[start : start + group_size]]
        group_l = [float(x) for x in lengths[start : start + group_size]]
        correct_l = [x for o, x in zip(group_o, group_l, strict=True) if o == "correct"]
        mu = statistics.fmean(correct_l) if correct_l else 0.0
        sigma = statistics.stdev(correct_l) if len(correct_l) >= 2 else 1.0
        shortest = sorted(group_l)[:3]
        shape = alpha != 0 and (length_gate is None or sum(shortest) / len(shortest) > length_gate)
        for o, x in zip(group_o, group_l, strict=True):
            if o == "correct" and shape:
                out.append(values["correct"] * math.exp(-alpha * (x - mu) / (sigma + 1e-6)))
            else:
                out.append(values[o])
    return np.array(out)


@st.composite
def groups(draw, max_group_size=8, max_groups=5, outcomes=tuple(OUTCOME_VALUES)):
    g = draw(st.integers(1, max_group_size))
    n = g * draw(st.integers(1, max_groups))
    outs = draw(st.lists(st.sampled_from(outcomes), min_size=n, max_size=n))
    lens = draw(st.lists(st.integers(1, 20_000), min_size=n, max_size=n))
    return outs, lens, g


# --------------------------------------------------------------------------------------------------
# lead_rewards: hand-worked cases
# --------------------------------------------------------------------------------------------------
def test_hand_worked_two_groups():
    outcomes = ["correct", "correct", "correct", "wrong", "unfinished", "degenerate", "correct", "wrong"]
    lengths = [100, 200, 300, 50, 8000, 8000, 500, 30]
    # Group 1: correct lengths 100, 200, 300 -> mu = 200, sample sigma = sqrt((100^2 + 0 + 100^2) / 2) = 100
    #   z = -1, 0, +1 -> exp(0.05) = 1.051271, exp(0) = 1, exp(-0.05) = 0.951229; the wrong one gets -1.
    # Group 2: one correct -> sigma := 1, mu = 500, z = 0 -> 1.0; unfinished 0, degenerate -2, wrong -1.
    expected = [E_005, 1.0, E_M005, -1.0, 0.0, -2.0, 1.0, -1.0]
    np.testing.assert_allclose(lead_rewards(outcomes, lengths, 4), expected, rtol=RTOL)


def test_result_is_float64_array():
    r = lead_rewards(["correct", "wrong"], [10, 20], 2)
    assert isinstance(r, np.ndarray) and r.dtype == np.float64 and r.shape == (2,)
    assert lead_rewards([], [], 4).shape == (0,)


def test_enum_and_string_inputs_agree():
    lengths = [100, 200, 300, 50]
    as_str = lead_rewards(["correct", "correct", "correct", "wrong"], lengths, 4)
    as_enum = lead_rewards([Outcome.CORRECT] * 3 + [Outcome.WRONG], lengths, 4)
    np.testing.assert_array_equal(as_str, as_enum)


def test_alpha_zero_gives_exactly_correct():
    r = lead_rewards(["correct", "correct", "wrong"], [10, 5000, 7], 3, alpha=0.0, correct=1.0)
    assert r.tolist() == [1.0, 1.0, -1.0]


def test_correct_scales_the_shaped_reward():
    # Decision: shaped reward = correct * exp(-alpha z).
    # Lengths 100/300: mu 200, sigma 141.42, z = -/+1/sqrt(2).
    r = lead_rewards(["correct", "correct"], [100, 300], 2, correct=2.0)
    z = 100 / math.sqrt(20_000)
    np.testing.assert_allclose(r, [2 * math.exp(0.05 * z), 2 * math.exp(-0.05 * z)], rtol=RTOL)


def test_custom_penalty_constants():
    r = lead_rewards(
        ["wrong", "unfinished", "degenerate"], [1, 2, 3], 3, wrong=-0.5, unfinished=-1, degenerate=-1.5
    )
    assert r.tolist() == [-0.5, -1.0, -1.5]


def test_single_correct_of_average_length_and_equal_lengths_are_unshaped():
    # Equal correct lengths: sigma = 0, z = 0 / (0 + 1e-6) = 0 -> exactly 1.
    assert lead_rewards(["correct"] * 3, [700, 700, 700], 3).tolist() == [1.0, 1.0, 1.0]


def test_length_gate():
    outcomes = ["correct", "correct", "correct", "wrong"] * 3
    lengths = [5000, 6000, 7000, 4500, 5000, 6000, 7000, 100, 5000, 3000, 4000, 9000]
    # Group 1: 3 shortest (any outcome) 4500, 5000, 6000 -> mean 5166.7 > 4000 -> shaped.
    #   correct 5000/6000/7000: mu 6000, sigma 1000, z = -1, 0, 1.
    # Group 2: the short *wrong* answer counts: 100, 5000, 6000 -> mean 3700 <= 4000 -> unshaped.
    # Group 3: correct 5000/3000/4000, 3 shortest 3000, 4000, 5000 -> mean exactly 4000 -> not > 4000.
    expected = [E_005, 1.0, E_M005, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0]
    np.testing.assert_allclose(lead_rewards(outcomes, lengths, 4, length_gate=4000), expected, rtol=RTOL)
    # Gate off (None): group 2 and 3 are shaped too.
    ungated = lead_rewards(outcomes, lengths, 4)
    assert ungated[4] > 1.0 > ungated[6]


def test_length_gate_with_groups_smaller_than_three():
    # Fewer than 3 completions: the mean of all of them is used.
    assert lead_rewards(["correct", "correct"], [10, 30], 2, length_gate=100).tolist() == [1.0, 1.0]
    assert lead_rewards(["correct", "correct"], [200, 300], 2, length_gate=100)[0] > 1.0


# --------------------------------------------------------------------------------------------------
# lead_rewards: properties
# --------------------------------------------------------------------------------------------------
@FAST
@given(groups(), st.floats(0.001, 1.0))
def test_correct_rewards_strictly_decrease_with_length(data, alpha):
    outcomes, lengths, g = data
    r = lead_rewards(outcomes, lengths, g, alpha=alpha)
    for start in range(0, len(outcomes), g):
        idx = [i for i in range(start, start + g) if outcomes[i] == "correct"]
        for i in idx:
            for j in idx:
                if lengths[i] < lengths[j]:
                    assert r[i] > r[j]
                elif lengths[i] == lengths[j]:
                    assert r[i] == r[j]


@FAST
@given(groups(), st.floats(0.0, 1.0), st.sampled_from([None, 0, 4000, 10_000]))
def test_every_non_correct_scores_below_every_correct(data, alpha, gate):
    outcomes, lengths, g = data
    r = lead_rewards(outcomes, lengths, g, alpha=alpha, length_gate=gate)
    for start in range(0, len(outcomes), g):
        group = range(start, start + g)
        correct = [r[i] for i in group if outcomes[i] == "correct"]
        others = [r[i] for i in group if outcomes[i] != "correct"]
        if correct and others:
            assert max(others) < min(correct)
        assert all(r[i] == -1.0 for i in group if outcomes[i] == "wrong")


@FAST
@given(groups(), st.floats(0.0, 1.0), st.sampled_from([None, 0, 4000, 10_000]), st.floats(0.5, 3.0))
def test_vectorized_matches_loop_reference(data, alpha, gate, correct):
    outcomes, lengths, g = data
    got = lead_rewards(outcomes, lengths, g, alpha=alpha, length_gate=gate, correct=correct)
    want = loop_rewards(outcomes, lengths, g, alpha=alpha, length_gate=gate, correct=correct)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(deadline=None, max_examples=25)
@given(groups())
def test_torch_numpy_and_list_inputs_agree(data):
    outcomes, lengths, g = data
    from_list = lead_rewards(outcomes, lengths, g)
    from_numpy = lead_rewards(np.array(outcomes), np.array(lengths), g)
    from_torch = lead_rewards(outcomes, torch.tensor(lengths), g)
    np.testing.assert_array_equal(from_list, from_numpy)
    np.testing.assert_array_equal(from_list, from_torch)


# --------------------------------------------------------------------------------------------------
# lead_rewards: bad input
# --------------------------------------------------------------------------------------------------
def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="3 items but lengths has 2"):
        lead_rewards(["correct", "wrong", "wrong"], [1, 2], 3)


# Every entry point that takes flat groups checks them the same way (lead.core._arrays.check_group_size).
GROUPED = {
    "lead_rewards": lambda n, g: lead_rewards(["correct"] * n, [1] * n, g),
    "lead_advantages": lambda n, g: lead_advantages([1.0] + [0.0] * (n - 1), g),
    "group_advantages": lambda n, g: group_advantages([1.0] + [0.0] * (n - 1), g),
}


@pytest.mark.parametrize("entry", GROUPED)
def test_non_divisible_size_raises(entry):
    with pytest.raises(ValueError, match="6 items, not divisible by group_size=4"):
        GROUPED[entry](6, 4)


@pytest.mark.parametrize("entry", GROUPED)
@pytest.mark.parametrize("group_size", [0, -2, 1.5, 2.0, True, False])
def test_bad_group_size_raises(entry, group_size):
    with pytest.raises(ValueError, match="group_size must be an integer >= 1"):
        GROUPED[entry](2, group_size)


def test_unknown_outcome_raises_with_value_and_allowed():
    with pytest.raises(ValueError, match=r"unknown outcome 'timeout'.*'correct', 'wrong', 'unfinished'"):
        lead_rewards(["correct", "timeout"], [1, 2], 2)


@pytest.mark.parametrize("lengths", [[1.0, -3.0], [1.0, float("nan")], [[1.0, 2.0]]])
def test_bad_lengths_raise(lengths):
    n = len(lengths) if not isinstance(lengths[0], list) else 2
    with pytest.raises(ValueError):
        lead_rewards(["correct"] * n, lengths, 1)
