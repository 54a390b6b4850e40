"""lead.core.difficulty: Wilson intervals, per-problem records, bands, the stage-1 filter and the stage-2 rule."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lead.config import ParamsError, Stage2Params, load_params
from lead.core.difficulty import (
    STAGE2_MAX_PASS_RATE,
    band_counts,
    band_labels,
    band_mask,
    band_of,
    calibrate_problem,
    in_band,
    pass_rate_histogram,
    split_dev,
    stage2_band,
    wilson_interval,
)
from tests.conftest import ROOT

EDGES = [0.25, 0.5, 0.75]


# Hand-worked with z = 1.96: e.g. (0, 8): denominator 1 + 3.8416/8 = 1.4802, centre = 0.2401/1.4802 =
# 0.1622 = half-width, so (0, 0.3244); (1, 1): centre = 2.9208/4.8416 = 0.6033, half = 0.3967.
@pytest.mark.parametrize(
    ("correct", "n", "low", "high"),
    [
        (4, 8, 0.2152, 0.7848),
        (0, 8, 0.0, 0.3244),
        (8, 8, 0.6756, 1.0),
        (1, 1, 0.2065, 1.0),
        (2, 8, 0.0715, 0.5907),
        (6, 8, 0.4093, 0.9285),
        (50, 100, 0.4038, 0.5962),
    ],
)
def test_wilson_interval_table(correct, n, low, high):
    assert wilson_interval(correct, n) == pytest.approx((low, high), abs=5e-5)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_bounds_solve_the_score_equation(case):
    """Each bound π not clamped at 0 or 1 solves (p − π)² = z² π (1 − π) / n, and the interval holds p."""
    correct, n = case
    p, z = correct / n, 1.96
    low, high = wilson_interval(correct, n)
    assert 0.0 <= low <= p <= high <= 1.0
    for bound in (low, high):
        if 0.0 < bound < 1.0:
            assert (p - bound) ** 2 == pytest.approx(z * z * bound * (1 - bound) / n, rel=1e-9, abs=1e-12)
    # Symmetry: swapping successes and failures mirrors the interval.
    mirror = wilson_interval(n - correct, n)
    assert (low, high) == pytest.approx((1 - mirror[1], 1 - mirror[0]), abs=1e-12)


@pytest.mark.parametrize(("correct", "n"), [(0, 0), (3, 2), (-1, 4)])
def test_wilson_rejects_impossible_counts(correct, n):
    with pytest.raises(ValueError):
        wilson_interval(correct, n)


def test_calibrate_problem_record():
    r = calibrate_problem([True, False, True, True], [10, 20, 30, 41])
    assert (r.k, r.n_correct, r.pass_rate, r.mean_length) == (4, 3, 0.75, 25.25)
    assert (r.wilson_low, r.wilson_high) == wilson_interval(3, 4)
    with pytest.raises(ValueError, match="k >= 1"):
        calibrate_problem([], [])
    with pytest.raises(ValueError, match="as many lengths"):
        calibrate_problem([True], [1, 2])


@pytest.mark.parametrize(
    ("p", "low", "high", "inclusive", "expected"),
    [
        (0.0, 0.0, 1.0, "neither", False),  # stage 1: never solved -> no reward spread
        (1.0, 0.0, 1.0, "neither", False),  # stage 1: always solved -> no reward spread
        (0.125, 0.0, 1.0, "neither", True),
        (0.875, 0.0, 1.0, "neither", True),
        (0.0, 0.0, 0.75, "both", True),  # stage 2 keeps unsolved problems
        (0.75, 0.0, 0.75, "both", True),
        (0.75, 0.0, 0.75, "left", False),
        (0.0, 0.0, 0.75, "right", False),
        (0.25, 0.25, 0.5, "left", True),
        (0.5, 0.25, 0.5, "left", False),
    ],
)
def test_in_band_table(p, low, high, inclusive, expected):
    assert in_band(p, low, high, inclusive) is expected


def test_in_band_rejects_an_unknown_inclusive():
    with pytest.raises(ValueError, match="both, neither, left or right"):
        in_band(0.5, 0, 1, "closed")


def test_stage2_rule_keeps_pass_rate_at_most_075_zero_included():
    rates = [0.0, 0.25, 0.75, 0.875, 1.0, 0.5]
    assert STAGE2_MAX_PASS_RATE == 0.75 == Stage2Params().max_pass_rate  # one source for the paper's 0.75
    assert stage2_band(0.75) == (0.0, 0.75, "both")
    assert band_mask(rates, *stage2_band(STAGE2_MAX_PASS_RATE)) == [True, True, True, False, False, True]
    assert band_mask(rates, *stage2_band(0.25)) == [True, True, False, False, False, False]


def test_band_mask_keeps_order_and_its_closed_ends():
    rates = [0.5, 0.0, 1.0, 0.125, 0.875]
    assert band_mask(rates, 0.0, 1.0) == [True, False, False, True, True]
    assert band_mask(rates, 0.125, 0.5, "both") == [True, False, False, True, False]


@pytest.mark.parametrize(
    ("p", "band"),
    [
        (0.0, "0"),
        (0.125, "(0, 0.25]"),
        (0.25, "(0, 0.25]"),
        (0.375, "(0.25, 0.5]"),
        (0.5, "(0.25, 0.5]"),
        (0.75, "(0.5, 0.75]"),
        (0.875, "(0.75, 1)"),
        (1.0, "1"),
    ],
)
def test_band_of_table(p, band):
    assert band_of(p, EDGES) == band


def test_band_labels_and_counts():
    assert band_labels([]) == ["0", "(0, 1)", "1"]
    assert band_of(0.5, []) == "(0, 1)"
    counts = band_counts([0.0, 0.0, 0.5, 1.0, 0.875], EDGES)
    assert list(counts) == ["0", "(0, 0.25]", "(0.25, 0.5]", "(0.5, 0.75]", "(0.75, 1)", "1"]
    assert list(counts.values()) == [2, 0, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="strictly increasing"):
        band_labels([0.5, 0.25])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        band_of(1.5, EDGES)


@given(st.integers(1, 64).flatmap(lambda k: st.lists(st.integers(0, k), max_size=50).map(lambda cs: (k, cs))))
def test_bands_partition_and_stage2_is_a_union_of_whole_bands(case):
    """Every pass rate lands in exactly one band; with 0.75 an edge, p ≤ 0.75 ⇔ a band ending at or below it."""
    k, counts = case
    rates = [c / k for c in counts]
    assert sum(band_counts(rates, EDGES).values()) == len(rates)
    low_bands = set(band_labels(EDGES)[:4])  # 0, (0, .25], (.25, .5], (.5, .75]
    for p in rates:
        assert (band_of(p, EDGES) in low_bands) == (p <= STAGE2_MAX_PASS_RATE)
    hist = pass_rate_histogram(counts, k)
    assert [p for p, _ in hist] == [c / k for c in range(k + 1)]
    assert sum(n for _, n in hist) == len(counts)
    assert all(n == counts.count(c) for c, (_, n) in enumerate(hist))


def test_pass_rate_histogram_rejects_a_count_above_k():
    assert pass_rate_histogram([0, 2, 2], 2) == [(0.0, 1), (0.5, 0), (1.0, 2)]
    with pytest.raises(ValueError, match=r"in \[0, 2\]"):
        pass_rate_histogram([3], 2)


def test_calibrate_params_bands_and_backend_are_validated():
    params = load_params(ROOT / "params.yaml")
    assert params.calibrate.bands == EDGES and params.calibrate.backend in ("auto", "vllm", "transformers")
    with pytest.raises(ParamsError, match=r"calibrate\.bands = \[0\.5, 0\.5\]: edges must be strictly"):
        load_params(ROOT / "params.yaml", ["calibrate.bands=[0.5, 0.5]"])
    with pytest.raises(ParamsError, match=r"calibrate\.bands = \[0\.0\]"):
        load_params(ROOT / "params.yaml", ["calibrate.bands=[0.0]"])
    with pytest.raises(ParamsError, match=r"calibrate\.backend = 'onnx'"):
        load_params(ROOT / "params.yaml", ["calibrate.backend=onnx"])
    assert load_params(ROOT / "params.yaml", ["calibrate.bands=[]"]).calibrate.bands == []  # one band (0, 1)


def test_split_dev_is_seeded_disjoint_and_refuses_a_too_small_pool():
    rows = [{"id": i} for i in range(10)]
    kept, dev = split_dev(rows, 3, seed=0)
    assert len(dev) == 3 and {r["id"] for r in kept} | {r["id"] for r in dev} == set(range(10))
    assert split_dev(rows, 3, seed=0) == (kept, dev) and split_dev(rows, 0, seed=0) == (
        rows,
        [],
    )
    with pytest.raises(ValueError, match="has only 10 problems"):
        split_dev(rows, 10, seed=0)
