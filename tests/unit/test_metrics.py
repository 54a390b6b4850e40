"""Evaluation metrics: hand-worked pass@k, Cons@k over answer classes, lengths, budget sweep, bands."""

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lead.core.metrics
from lead.core.metrics import (
    ProblemSamples,
    Sample,
    answer_classes,
    band_table,
    benchmark_metrics,
    budget_sweep,
    cached_equal,
    cons_at_k,
    length_stats,
    majority_class,
    mean_pass_at_1,
    pass_at_k,
    truncation_rate,
    within_budget,
)


# --------------------------------------------------------------------------------------------------
# pass@k
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 0, 1, 0.0),
        (1, 1, 1, 1.0),
        (2, 1, 1, 0.5),
        (5, 2, 2, 0.7),  # 1 − C(3,2)/C(5,2) = 1 − 3/10
        (10, 3, 5, 1 - 21 / 252),  # 1 − C(7,5)/C(10,5)
        (16, 2, 4, 1 - 1001 / 1820),  # 1 − C(14,4)/C(16,4)
        (8, 0, 8, 0.0),
        (8, 8, 8, 1.0),
        (4, 3, 2, 1.0),  # n − c = 1 < k = 2: every pair holds a correct sample
        (8, 1, 8, 1.0),  # n − c = 7 < 8
        (32, 1, 1, 1 / 32),
    ],
)
def test_pass_at_k_hand_worked(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k needs"):
        pass_at_k(n, c, k)


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    # C(1024, 512) ≈ 4.5e306: a float ratio of binomials would be inf/inf; the product form is exact enough.
    n, c, k = 1024, 3, 512
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_binomial_definition(nck):
    n, c, k = nck
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)
    if c < n:
        assert pass_at_k(n, c + 1, k) >= pass_at_k(n, c, k)
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k)


# --------------------------------------------------------------------------------------------------
# Cons@k
# --------------------------------------------------------------------------------------------------
def test_differently_written_equal_answers_form_one_class():
    answers = ["\\frac12", "3", "0.5", None, "\\dfrac{1}{2}", "3", "1/2"]
    assert answer_classes(answers) == [0, 1, 0, None, 0, 1, 0]
    # 4 votes for ½ against 2 for 3 although no two strings of the ½ class are equal
    correct = [True, False, True, False, True, False, True]
    assert cons_at_k(answers, correct) is True
    # raw-string voting would have picked "3" (2 votes against 1 for each spelling of ½)
    assert cons_at_k(answers, [not c for c in correct]) is False


def test_ties_go_to_the_class_seen_first():
    # 2 votes each; the ½ class appears first in one order, 7 in the other
    assert cons_at_k(["0.5", "7", "\\frac{1}{2}", "7"], [True, False, True, False]) is True
    assert cons_at_k(["7", "0.5", "\\frac{1}{2}", "7"], [False, True, True, False]) is False
    assert majority_class([2, 1, 0, 2, 1, 0]) == 0


def test_unanswered_samples_do_not_vote():
    assert cons_at_k([None, None, None, "5"], [False, False, False, True]) is True
    assert cons_at_k([None, None], [False, False]) is False
    assert majority_class([None, None]) is None


def test_cons_at_k_uses_the_first_k_samples():
    answers, correct = ["4", "9", "9", "4", "4"], [True, False, False, True, True]
    assert cons_at_k(answers, correct, k=3) is False  # 9 leads 2-1 among the first three
    assert cons_at_k(answers, correct) is True  # 4 leads 3-2 overall


def test_the_representative_plays_the_gold_and_equal_strings_skip_the_comparison():
    calls = []

    def equal(answer, rep):
        calls.append((answer, rep))
        return answer.lower() == rep.lower()

    assert answer_classes(["A", "b", "a", "A", "B"], equal) == [0, 1, 0, 0, 1]
    assert calls == [("b", "A"), ("a", "A"), ("B", "A"), ("B", "b")]  # "A" == "A" needs no call


def test_cached_equal_compares_each_pair_once():
    calls = []

    def equal(a, b):
        calls.append((a, b))
        return a == b

    cached = cached_equal(equal)
    assert [cached("1", "2") for _ in range(3)] == [False] * 3
    assert calls == [("1", "2")]


def test_cons_at_k_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="2 answers but 1 verdicts"):
        cons_at_k(["1", "2"], [True])


# --------------------------------------------------------------------------------------------------
# Lengths, truncation, budgets
# --------------------------------------------------------------------------------------------------
def S(answer, correct, tokens, finished=True, generated=True):
    return Sample(answer, correct, tokens, finished, generated)


def test_lengths_split_by_verdict_and_skip_samples_never_generated():
    samples = [S("1", True, 10), S("1", True, 20), S("2", False, 60, False), S(None, False, 0, False, False)]
    assert length_stats(samples) == lead.core.metrics.LengthStats(30.0, 15.0, 60.0)
    assert truncation_rate(samples) == pytest.approx(1 / 3)
    assert length_stats([S("1", False, 8)]).len_correct is None
    assert truncation_rate([S(None, False, 0, False, False)]) is None


def test_budget_sweep_scores_longer_samples_as_unanswered():
    # budget 50: the 60- and 90-token samples are cut; the exact 50-token one survives
    problem = ProblemSamples(
        (S("12", True, 60, False), S("12", True, 90), S("7", False, 30), S("12", True, 50), S("7", False, 20))
    )
    cut = within_budget(problem, 50)
    assert [s.answer for s in cut.samples] == [None, None, "7", "12", "7"]
    assert [s.tokens for s in cut.samples] == [50, 50, 30, 50, 20]
    points = budget_sweep([problem], [100, 50, 25])
    assert [p.budget for p in points] == [25, 50, 100]
    assert [p.pass_at_1 for p in points] == [0.0, 0.2, 0.6]
    assert [p.cons for p in points] == [0.0, 0.0, 1.0]  # 7 wins 1-0, then 2-1; at 100 tokens 12 wins 3-2
    # at 100 tokens the first sample (cut at its own 60-token limit) still gave no answer: 4 of 5 answered
    assert [p.answered for p in points] == [0.2, 0.6, 0.8]
    with pytest.raises(ValueError, match="budget must be >= 1"):
        within_budget(problem, 0)


# --------------------------------------------------------------------------------------------------
# Difficulty bands and the metric set of one benchmark
# --------------------------------------------------------------------------------------------------
def test_band_table_hand_worked():
    problems = [
        ProblemSamples((S("3", True, 5), S("3", True, 5), S(None, False, 5), S("4", False, 5)), "level_10"),
        ProblemSamples((S(None, False, 5),) * 4, "level_2"),
        ProblemSamples((S("1", False, 5), S("2", False, 5), S("2", False, 5), S("5", True, 5)), "level_2"),
    ]
    rows = band_table(problems)
    assert [r.band for r in rows] == ["level_2", "level_10"]  # natural order
    level2, level10 = rows
    assert (level2.problems, level2.cons, level2.answered, level2.precision, level2.pass_at_1) == (
        2,
        0.0,
        0.5,  # 4 of 8 samples answered
        0.25,  # 1 of those 4 correct
        0.125,  # mean of 0 and 1/4
    )
    assert (level10.cons, level10.answered, level10.precision, level10.pass_at_1) == (1.0, 0.75, 2 / 3, 0.5)
    assert band_table([problems[1]])[0].precision is None  # nothing answered: precision undefined


def test_benchmark_metrics_names_and_values():
    problems = [
        ProblemSamples(
            (S("0.5", True, 10), S("\\frac12", True, 30), S("2", False, 40, False), S(None, False, 20))
        ),
        ProblemSamples((S("9", False, 10), S("9", False, 10), S("8", True, 10), S("8", True, 10))),
    ]
    m = benchmark_metrics(problems, budgets=[25])
    assert m["pass_at_1"] == mean_pass_at_1(problems) == 0.5
    assert m["pass_at_2"] == pytest.approx((pass_at_k(4, 2, 2) + pass_at_k(4, 2, 2)) / 2)
    assert m["pass_at_4"] == 1.0
    assert m["cons_at_4"] == 0.5  # the ½ class wins the first; 9 and 8 tie on the second and 9 came first
    # answered: 6 of 8 (one has no answer, one was cut at the limit with a "2" in its text)
    assert (m["answered"], m["len_avg"], m["truncation_rate"]) == (6 / 8, 17.5, 1 / 8)
    assert m["precision"] == 4 / 6  # correct among those 6
    assert (m["len_correct"], m["len_incorrect"]) == (15.0, 20.0)
    assert (m["budget_25.pass_at_1"], m["budget_25.cons_at_4"], m["budget_25.answered"]) == (
        0.375,
        0.5,
        5 / 8,
    )
    assert not any(k.startswith("all.") for k in m)  # a single band adds no band keys
    assert all("@" not in k for k in m)

    banded = benchmark_metrics([ProblemSamples(p.samples, band=f"level_{i}") for i, p in enumerate(problems)])
    assert banded["level_0.pass_at_1"] == 0.5 and banded["level_1.precision"] == 0.5


def test_benchmark_metrics_needs_one_sample_count():
    with pytest.raises(ValueError, match="same, positive number of samples"):
        benchmark_metrics([ProblemSamples((S("1", True, 1),)), ProblemSamples((S("1", True, 1),) * 2)])
    with pytest.raises(ValueError, match="no problems"):
        benchmark_metrics([])


def test_seed_summary_means_and_spreads():
    summary = lead.core.metrics.seed_summary(
        [
            {"pass_at_1": 0.2, "len_avg": 10.0, "over_context": 1},
            {"pass_at_1": 0.4, "len_avg": 14.0, "over_context": 1},
        ]
    )
    assert summary["pass_at_1"] == pytest.approx(0.3) and summary["pass_at_1_std"] == pytest.approx(
        0.1414, abs=1e-4
    )
    assert summary["len_avg_std"] == pytest.approx(2.8284, abs=1e-4) and "over_context_std" not in summary
    assert lead.core.metrics.seed_summary([{"pass_at_1": 0.2}]) == {"pass_at_1": 0.2}
