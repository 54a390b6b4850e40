"""The CPU proxy task: determinism, disjoint splits, difficulty levels, and the shape of its traces."""

import random
import re
from collections import Counter

import pytest

from lead.core.proxy import (
    ProxyProblem,
    Verbosity,
    apply_op,
    generate_problems,
    solution_trace,
    warmstart_traces,
)
from lead.grading import extract_answer, grade


def test_problem_text_answer_and_level():
    p = ProxyProblem(7, (("+", 3), ("*", 2), ("-", 4)))
    assert p.question == "Start with 7, add 3, multiply by 2, subtract 4."
    assert p.values() == [10, 20, 16]
    assert p.answer == 16
    assert p.level == 3
    assert solution_trace(p) == "<think>\n7+3=10\n10*2=20\n20-4=16\n</think>\nThe answer is \\boxed{16}."


def test_unknown_operation_is_an_error():
    with pytest.raises(ValueError, match="unknown operation '/'"):
        apply_op(1, "/", 2)


def test_generation_is_deterministic_given_a_seed():
    a = generate_problems(200, split="train", seed=3)
    b = generate_problems(200, split="train", seed=3)
    c = generate_problems(200, split="train", seed=4)
    assert a == b
    assert a != c


def test_train_and_test_never_overlap_whatever_the_seeds():
    train = {p.question for p in generate_problems(1000, split="train", seed=0)}
    test = {p.question for p in generate_problems(300, split="test", seed=1)}
    assert not train & test
    assert all(p.split == "test" for p in generate_problems(50, split="test", seed=9))


def test_levels_are_balanced_and_values_stay_in_range():
    problems = generate_problems(600, split="train", seed=0, min_ops=2, max_ops=5, max_value=50)
    assert set(Counter(p.level for p in problems).values()) == {150}
    assert all(0 <= v <= 50 for p in problems for v in p.values())
    assert len({p.question for p in problems}) == 600


def test_a_small_level_drops_out_and_others_fill_its_share():
    problems = generate_problems(600, split="train", seed=0, min_ops=1, max_ops=2)
    counts = Counter(p.level for p in problems)
    assert counts[1] < 200 < counts[2]  # level 1 holds ~160 distinct train problems
    assert sum(counts.values()) == 600
    with pytest.raises(ValueError, match="distinct train problems exist"):
        generate_problems(400, split="train", seed=0, min_ops=1, max_ops=1)


def test_concise_traces_are_always_graded_correct():
    for p in generate_problems(120, split="test", seed=0):
        trace = solution_trace(p)
        assert extract_answer(trace) == str(p.answer)
        assert grade(trace, str(p.answer))


def test_warmstart_traces_are_verbose_varied_and_occasionally_wrong():
    problems = generate_problems(300, split="train", seed=0)
    traces = list(warmstart_traces(problems, per_problem=4, seed=0))
    assert len(traces) == 1200
    assert traces == list(warmstart_traces(problems, per_problem=4, seed=0))
    wrong = sum(extract_answer(t) != str(p.answer) for p, t in traces)
    # slip 0.06 per step, 60% of slips propagate, ~3.5 steps on average: roughly 10% wrong answers.
    assert 0.04 < wrong / len(traces) < 0.2
    assert any("Wait, that is wrong." in t for _, t in traces)
    # The same problem gets traces of very different lengths.
    by_problem: dict[str, list[int]] = {}
    for p, t in traces:
        by_problem.setdefault(p.question, []).append(len(t))
    ratios = sorted(max(v) / min(v) for v in by_problem.values())
    assert ratios[len(ratios) // 2] >= 1.5
    assert all(t.startswith("<think>\n") and "</think>\nThe answer is \\boxed{" in t for _, t in traces)


def test_no_slips_means_no_wrong_answers():
    problems = generate_problems(200, split="train", seed=1)
    clean = Verbosity(slip=0.0)
    rng = random.Random(0)
    assert all(extract_answer(solution_trace(p, rng, clean)) == str(p.answer) for p in problems)


def test_trace_arithmetic_lines_are_true_unless_slipped():
    problems = generate_problems(200, split="train", seed=2)
    rng = random.Random(0)
    for p in problems:
        trace = solution_trace(p, rng, Verbosity(slip=0.0, reverify=1.0, check=1.0))
        for a, op, b, c in re.findall(r"(-?\d+)([+*-])(\d+)=(-?\d+)", trace):
            assert apply_op(int(a), op, int(b)) == int(c)


def test_a_misread_trace_adds_where_the_problem_subtracts_and_the_others_do_not():
    problems = [
        p for p in generate_problems(400, split="train", seed=3) if any(op == "-" for op, _ in p.steps)
    ]
    traces = list(
        warmstart_traces(problems, per_problem=4, seed=0, verbosity=Verbosity(slip=0.0, misread=0.3))
    )
    misread = 0
    for p, t in traces:
        ops = re.findall(r"^-?\d+([+*-])\d+=", t.split("</think>")[0], flags=re.M)[: p.level]
        read = [op for op, _ in p.steps]
        if ops == read:
            assert extract_answer(t) == str(p.answer)
        else:
            # The habit is the whole trace's: every subtraction added, nothing else changed.
            assert ops == ["+" if op == "-" else op for op in read]
            misread += 1
    assert 0.2 < misread / len(traces) < 0.4


def test_the_misread_habit_off_leaves_the_traces_as_they_were():
    # Off, the habit draws nothing: the warm start's corpus (and so the default model) is unchanged by it.
    problems = generate_problems(100, split="train", seed=4)
    rng_a, rng_b = random.Random(5), random.Random(5)
    assert [solution_trace(p, rng_a) for p in problems] == [
        solution_trace(p, rng_b, Verbosity(misread=0.0)) for p in problems
    ]
