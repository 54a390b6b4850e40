r"""Tests of the answer grader (lead/grading/).

The equivalence table is built from real gold answers of MATH-500, AIME 2024/2025 and AMC 2023
(``test_table_golds_are_real`` checks that every gold string occurs in those files when they are present).
Each row is checked as written (gold second), and, where the relation is symmetric, also with the two
strings swapped -- math-verify's ``verify(gold, pred)`` is not symmetric, so the rows that are not are
marked and say why.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lead import grading
from lead.grading import (
    GradeStats,
    answers_equal,
    extract_answer,
    grade,
    grade_batch,
    grade_batch_with_stats,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "raw"  # shipped with the repository
# Slack on top of a time limit: process start-up of a replacement worker, a busy 2-core machine.
SLACK_S = 3.0

# (pred, gold, equal?, symmetric?, why)
TABLE: list[tuple[str, str, bool, bool, str]] = [
    # ---- equivalent ----
    (r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", True, True, r"\left \right dropped"),
    (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)", True, True, "tuple entries compared by sympy"),
    (r"\dfrac{14}{3}", r"\frac{14}{3}", True, True, "dfrac = frac"),
    ("14/3", r"\frac{14}{3}", True, True, "slash fraction = frac (exact)"),
    ("4.666666666666667", r"\frac{14}{3}", True, False, "long decimal: math-verify rounding"),
    ("Evelyn", r"\text{Evelyn}", True, True, r"\text{} word answer"),
    ("90", r"90^\circ", True, True, "degree sign dropped"),
    (r"\sqrt{117}", r"3\sqrt{13}", True, True, "radical simplified by sympy"),
    ("3/56", r"\frac{3}{56}", True, True, "plain fraction"),
    ("6-5i", "6 - 5i", True, True, "whitespace"),
    ("-5i+6", "6 - 5i", True, True, "complex, reordered (sympy)"),
    ("5", "x=5", True, True, "leading assignment dropped"),
    ("-2, 1", "1,-2", True, True, "unordered list of solutions"),
    (r"\{7, 3, 5\}", "3, 5, 7", True, True, "set braces vs bare list"),
    ("52_{8}", "52_8", True, True, "base subscript braces"),
    ("52", "52_8", True, True, "base subscript omitted"),
    (r"11\sqrt{2}", r"11\sqrt2", True, True, r"\sqrt2 = \sqrt{2}"),
    (r"\frac{5}{4}", "1.25", True, True, "decimal = fraction (exact)"),
    (r"\frac{3}{20}", "0.15", True, True, "decimal = fraction (exact)"),
    ("(6, 31, -1)", "(6,31,-1)", True, True, "ordered triple, whitespace"),
    (r"\frac{\cos x}{\sin x}", r"\cot x", True, True, "trig identity (sympy)"),
    (r"\frac{3\sqrt3}{4}", r"\frac{3\sqrt{3}}{4}", True, True, r"\sqrt3 braces"),
    (r"x \le 0", r"(-\infty, 0]", True, True, "inequality = interval"),
    (r"3 < x \le 4", "(3,4]", True, True, "inequality = half-open interval"),
    ("x > 2", r"(2,\infty)", True, True, "inequality = ray"),
    (
        r"\begin{pmatrix} -\frac13 \\ \frac23 \\ \frac53 \end{pmatrix}",
        r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        True,
        True,
        "vector entries",
    ),
    ("145", r"145^\circ", True, True, "degrees"),
    ("C", r"\text{(C)}", True, True, "multiple-choice letter"),
    ("(C)", r"\text{(C)}", True, True, "multiple-choice letter in parentheses"),
    (r"\textbf{(C)} Plane", r"\text{(C)}", True, False, "letter followed by the option text"),
    (r"\frac{4}{3}", r"\frac43", True, True, r"\frac43 shorthand"),
    ("10080", r"10,\!080", True, True, "thousands separator with \\!"),
    ("11111111100", r"11,\! 111,\! 111,\! 100", True, True, "several thousands separators"),
    ("32348", r"\$32,\!348", True, True, "currency and thousands separator"),
    ("998.5", r"\frac{1997}{2}", True, True, "decimal = fraction"),
    (r"\frac{270}{7}", r"\frac{270}7\text{ degrees}", True, True, "unit text dropped"),
    ("864", r"864 \mbox{ inches}^2", True, True, r"\mbox unit with a square"),
    ("1.8", r"1\frac{4}{5}", True, True, "mixed number"),
    ("137.5", r"137 \frac{1}{2}", True, True, "mixed number with a space"),
    ("0.0000672", ".0000672", True, True, "leading zero"),
    (r"6.72 \times 10^{-5}", ".0000672", True, True, "scientific notation"),
    (r"-\pi/6", r"-\frac{\pi}{6}", True, True, "symbolic fraction (sympy)"),
    (r"1+\sqrt{19}, 1-\sqrt{19}", r"1 \pm \sqrt{19}", True, True, r"\pm = both roots"),
    (r"-2, 1+\sqrt{5}, 1-\sqrt{5}", r"\{1\pm\sqrt{5},-2\}", True, True, r"set with \pm, reordered"),
    ("5.4", r"5.4 \text{ cents}", True, True, "unit text"),
    ("15", r"15\mbox{ cm}^2", True, True, "unit cm^2"),
    ("18.9", r"\$18.90", True, True, "currency, trailing zero"),
    ("2(k+1)", "2k+2", True, True, "factored (sympy)"),
    ("[-2, 7]", r"x \in [-2,7]", True, True, r"x \in dropped"),
    ("y=2x+3", "y = 2x + 3", True, True, "equation, whitespace"),
    (r"(0,9)\cup(9,36)", r"(0,9) \cup (9,36)", True, True, "union of intervals"),
    (
        r"\left[\frac{\pi^2}{8}, \frac{5\pi^2}{4}\right]",
        r"\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]",
        True,
        True,
        "closed interval",
    ),
    ("58500", "58,500", True, True, "plain thousands separator"),
    ("Even", r"\text{even}", True, True, "word answer, case-insensitive"),
    (r"\frac{9}{19}", r"\frac9{19}", True, True, r"\frac9{19} shorthand"),
    (r"\frac{5}{9}", r"\frac 59", True, True, r"\frac 59 shorthand"),
    (r"50\%", r"\frac{1}{2}", True, True, "percent = p/100"),
    ("25", "025", True, True, "AIME leading zero"),
    ("73", "073", True, True, "AIME leading zero"),
    ("204.0", "204", True, True, "integer written as decimal"),
    ("27", "27.0", True, True, "AMC float gold"),
    ("-1", "-1.0", True, True, "AMC negative float gold"),
    ("3159", "3159.0", True, True, "AMC float gold"),
    # ---- not equivalent ----
    (r"(\frac{\pi}{2}, 3)", r"\left( 3, \frac{\pi}{2} \right)", False, True, "a tuple is ordered"),
    ("(1,-2)", "(-2,1)", False, True, "an ordered pair is ordered"),
    (
        "-2<x<1",
        "(-2,1)",
        True,
        False,
        "a chained inequality in one variable is the open interval of its gold",
    ),
    ("-2 \\le x<1", "(-2,1)", False, False, "... and a half-closed one is not the open interval"),
    ("-2 \\le x \\le 1", "(-2,1)", False, False, "... nor a closed one"),
    ("1 > y > -2", "(-2,1)", True, False, "... read right to left, in any variable"),
    ("Bob", r"\text{Evelyn}", False, True, "different word"),
    ("nylevE", r"\text{Evelyn}", False, False, "sympy alone would call this a product of the same symbols"),
    ("D", r"\text{(C)}", False, True, "other choice"),
    ("c", r"\text{(C)}", False, False, "lower-case c is a variable, not the choice (C)"),
    ("24", "025", False, True, "off by one"),
    ("27.5", "27.0", False, True, "different decimal"),
    ("0.333", r"\frac{1}{3}", False, True, "truncated decimal"),
    ("3.14", r"\pi", False, True, "approximation of pi"),
    ("(3,4)", "(3,4]", False, True, "open vs half-open interval"),
    ("[3,4]", "(3,4]", False, True, "closed vs half-open interval"),
    ("1, 2", "1,-2", False, True, "sign of a solution"),
    ("3, 5", "3, 5, 7", False, True, "a solution missing"),
    ("53_8", "52_8", False, True, "different base-8 number"),
    ("52_9", "52_8", False, True, "different base"),
    ("6+5i", "6 - 5i", False, True, "conjugate"),
    (r"\sqrt{13}", r"3\sqrt{13}", False, True, "missing factor"),
    ("x^5 - x^4 + x^3 - x^2 + x + 1", "x^5 - x^4 + x^3 - x^2 + x - 1", False, True, "constant term"),
    ("west", r"\text{east}", False, True, "different word"),
    (r"\text{odd}", r"\text{even}", False, True, "different word"),
    ("10800", r"10,\!080", False, True, "digits moved"),
    ("1.0000672", ".0000672", False, True, "different decimal"),
    (r"\frac{3}{2}", r"\frac{2}{3}", False, True, "inverted fraction"),
    ("(6, -1, 31)", "(6,31,-1)", False, True, "triple in another order"),
    (
        r"\begin{pmatrix} -1/3 \\ 5/3 \\ 2/3 \end{pmatrix}",
        r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        False,
        True,
        "vector entries swapped",
    ),
    ("2k+1", "2k+2", False, True, "different expression"),
    (r"x \ge 0", r"(-\infty, 0]", False, False, "wrong side of the ray"),
    (r"\frac{\pi}{6}", r"-\frac{\pi}{6}", False, True, "sign"),
    ("50", r"\frac{1}{2}", False, True, "50 without a percent sign"),
    ("", "5", False, False, "empty prediction"),
]


# Gaps closed after comparing with math-verify on its own suite and on model-style answers (issue 14).
# Their golds are not all real benchmark golds, so they sit beside TABLE rather than in it.
GAPS: list[tuple[str, str, bool, bool, str]] = [
    (r"x \gt 5", "x > 5", True, True, r"\gt = >"),
    ("x >= 5", r"x \geq 5", True, True, "ASCII >= = \\geq"),
    ("x != 3", r"x \neq 3", True, True, "ASCII != = \\neq"),
    (
        r"\begin{bmatrix}1 & 2\\3 & 4\end{bmatrix}",
        r"\begin{pmatrix}1 & 2\\3 & 4\end{pmatrix}",
        True,
        True,
        "matrix brackets",
    ),
    ("(3,2)", "(p,q)=(3,2)", True, False, "a named tuple's value"),
    (r"0.\overline{3}", r"\frac{1}{3}", True, True, "repeating decimal"),
    (r"0.1\overline{6}", r"\frac{1}{6}", True, True, "repeating decimal after a digit"),
    ("50¢", "50", True, True, "cent sign"),
    ("€20", "20", True, True, "euro sign"),
    ("12 m²", "12", True, True, "square metres"),
    ("12{,}345", "12345", True, True, "thousands separator in braces"),
    ("1000,99", "1000.99", True, True, "decimal comma (no thousands grouping reads so)"),
    ("0,5", r"\frac12", True, True, "decimal comma after 0"),
    ("0.0833333333333333", r"\frac{1}{12}", True, False, "a machine float of the exact value"),
    ("y = -\\frac{1}{2}x + \\frac{3}{4}", "2x+4y-3=0", True, False, "equivalent equations"),
    ("(2,3)", "(p,q)=(3,2)", False, False, "a named tuple is ordered"),
    (r"0.\overline{3}", r"\frac{1}{4}", False, True, "another repeating decimal"),
    ("3,5", "3.5", False, False, "3,5 is a list, not a decimal comma (a grouping reads it so too)"),
    ("0.33", r"\frac{1}{3}", False, True, "an approximation is not the value"),
    ("0.3333333", r"\frac{1}{3}", False, True, "7 digits: still an approximation (math-verify rounds to 6)"),
    (
        r"-\sqrt{3} < x < \sqrt{3}",
        r"(-\sqrt{3}, \sqrt{3})",
        True,
        False,
        "an open-interval gold, as an inequality",
    ),
    (r"-\sqrt{3} < x < \sqrt{2}", r"(-\sqrt{3}, \sqrt{3})", False, False, "... with another end"),
    ("-2<x<1", "(-2,1]", False, False, "an open interval is not a half-open gold"),
]


def _ids(rows: list[tuple[str, str, bool, bool, str]]) -> list[str]:
    return [f"{i}-{'eq' if r[2] else 'ne'}-{r[4][:30]}" for i, r in enumerate(rows)]


def test_table_size() -> None:
    assert len(TABLE) >= 40
    assert sum(r[2] for r in TABLE) >= 20 and sum(not r[2] for r in TABLE) >= 20


@pytest.mark.parametrize(
    ("pred", "gold", "expected", "symmetric", "why"), TABLE + GAPS, ids=_ids(TABLE + GAPS)
)
def test_answers_equal_table(pred: str, gold: str, expected: bool, symmetric: bool, why: str) -> None:
    assert answers_equal(pred, gold) is expected, why
    if symmetric:
        assert answers_equal(gold, pred) is expected, f"swapped: {why}"


def _real_golds() -> set[str]:
    golds: set[str] = set()
    for name in ("math500", "aime2024", "aime2025", "amc2023"):
        with open(DATA / name / "test.jsonl") as fh:
            golds.update(str(json.loads(line)["answer"]) for line in fh if line.strip())
    return golds


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        # A word answer stated in prose after a final-answer phrase, without a box, for a \text{} gold.
        ("Counting days from Monday. The final answer is Tuesday.", r"\text{tuesday}", True),
        ("So the curve is a parabola. The final answer is a parabola.", r"\text{parabola}", True),
        ("The answer is: The Parabola", r"\text{parabola}", True),
        ("The final answer is Wednesday.", r"\text{tuesday}", False),  # a wrong name
        ("The final answer is an ellipse.", r"\text{parabola}", False),
        (
            "I am not sure the answer is right.",
            r"\text{right}",
            False,
        ),  # "answer is" + a verdict, not an answer
        # A chained inequality in one variable, inside a box, for an open-interval gold.
        (r"Thus \boxed{-2 < x < \sqrt{5}}.", r"(-2, \sqrt{5})", True),
        (r"Thus \boxed{\sqrt{5} > t > -2}.", r"(-2, \sqrt{5})", True),
        (r"Thus \boxed{-2 \le x \le \sqrt{5}}.", r"(-2, \sqrt{5})", False),  # a closed interval
        (r"Thus \boxed{-2 < x < \sqrt{6}}.", r"(-2, \sqrt{5})", False),
    ],
)
def test_word_answers_in_prose_and_inequalities_for_open_intervals(completion, gold, expected) -> None:
    assert grade(completion, gold) is expected


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        # An ordinal for a numeric gold: the number, whatever way the suffix is written, a word after it or not.
        (r"So it is the \boxed{21^{\text{st}}\text{ term}}.", "21", True),
        (r"Hence \boxed{\text{the } 5^\mathrm{th} \text{ place}}.", "5", True),
        (r"\boxed{22^{nd}}", "22", True),
        (r"\boxed{3rd}", "3", True),
        (r"\boxed{113^{\text{th}}}", "113", True),
        # ... and never another number, nor a power whose exponent only looks like a suffix.
        (r"So it is the \boxed{21^{\text{st}}\text{ term}}.", "20", False),
        (r"\boxed{2^{th}}", "2", False),  # 2th is no ordinal: 2 to the power t*h
        (r"\boxed{3^{rd}}", "9", False),
        (r"\boxed{11^{st}}", "11", False),  # eleventh, not eleven-st
    ],
)
def test_ordinal_answers_are_their_number(completion, gold, expected) -> None:
    assert grade(completion, gold) is expected


_REASONING = "<think>Let me work it out. " + "We compute 3 + 4 = 7 and check it again. " * 100


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        # A long chain of thought that states its answer at the end of its reasoning, with no box anywhere and
        # nothing after </think>: evaluation's rule reads that final statement ...
        (_REASONING + "Therefore, the value of $k$ is 7.</think>", "7", True),
        (_REASONING + "So I am confident that 52 is the correct answer.</think>", "52", True),
        (_REASONING + "Therefore, the value of $k$ is 7.</think>", "8", False),
        (
            _REASONING + "So I am confident that 52 is the correct answer.</think>",
            "7",
            False,
        ),  # not an earlier 7
        # ... while a box in the reasoning still wins over any statement, and a reasoning without any answer
        # stays unanswered.
        (_REASONING + r"so \boxed{9}. Therefore, the value of $k$ is 7.</think>", "9", True),
        ("<think>I am not sure how to start this problem.</think>", "7", False),
    ],
)
def test_a_final_statement_of_an_unboxed_chain_of_thought_is_evaluations_answer(completion, gold, expected):
    assert grade(completion, gold) is expected
    # the reward's rules stay the paper's: a box, or no answer
    assert grade(completion, gold, extraction="boxed") is (expected and r"\boxed" in completion)


def test_table_golds_are_real() -> None:
    real = _real_golds()
    missing = {gold for _, gold, *_ in TABLE if gold and gold not in real}
    assert not missing


def test_every_real_gold_equals_itself_and_passes_the_guards() -> None:
    real = _real_golds()
    assert all(answers_equal(g, g) for g in real)  # fast path: identical canonical strings
    assert [g for g in real if grading.guards.guard(grading.normalise.clean(g))] == []


def test_raw_json_gold_types() -> None:
    # AIME 2025 golds are ints, AMC 2023 floats, AIME 2024 strings with leading zeros.
    completions = [r"so \boxed{70}", r"\boxed{27}", r"\boxed{25}", r"\boxed{26}"]
    golds = [70, 27.0, "025", 27.0]
    assert grade_batch(completions, golds) == [True, True, True, False]  # type: ignore[arg-type]
    assert grade(r"\boxed{27}", 27.0) is True  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Extraction
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (r"so \boxed{\boxed{5}}", "5"),  # nested: the inner (last-starting) box
        (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{1}{\sqrt{2}}"),  # nested braces
        (r"\boxed{3}. Wait. That is wrong. I dropped a term. So \boxed{4}", "4"),  # the last box wins
        (r"\boxed{3} and \boxed{4}", "3, 4"),  # boxes close together are one answer (math-verify's rule)
        (
            r"$$\boxed{(2, 2)} \quad \text{for (a) and} \quad \boxed{(6, 2)}$$",
            "(2, 2), (6, 2)",
        ),  # one formula
        (r"\(\boxed{1}\) and \(\boxed{-2}\).", "1, -2"),  # formulas joined by "and"
        (r"\boxed{3} then \boxed{4", "3"),  # unbalanced last box ignored
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # escaped braces are not delimiters
        (r"\fbox{7}", "7"),
        (r"$\boxed 5$.", "5"),  # TeX's undelimited argument
        (r"\boxed{} and \boxed{}", None),  # empty boxes carry no answer
        (r"\boxed{2} ... \boxed{ }", "2"),
        ("The final answer is $\\frac{1}{2}$. I hope it is correct.", r"\frac{1}{2}"),
        ("Thus the answer is 42.", "42"),
        ("The answer is \\(x^2\\), done.", "x^2"),
        ("**Answer:** 17\nbye", "17"),
        ("**Final Answer**: $3\\sqrt{2}$", r"3\sqrt{2}"),
        ("work\nAnswer: 3.5", "3.5"),
        ("The final answer is:\n\n$$\n5\n$$", "5"),  # a display block on the next lines
        ("The final answer is:\n\n$$5$$", "5"),  # the answer on the next line
        ("The answer is 3. Wait, no. The answer is 4.", "4"),  # the latest statement wins
        ("no answer here", None),
        ("", None),
        # A completion that is only its answer (math-verify's suite: -5, 7,425,000, $x \geq 5$).
        ("-5", "-5"),
        ("7,425,000", "7,425,000"),
        ("$x \\geq 5$", "x \\geq 5"),
        (r"\text{Evelyn}", r"\text{Evelyn}"),
        # Prose without a box: math-verify's own extraction reads it (the last number of the statement).
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("Therefore $x \\gt 5$ is the solution.", "x \\gt 5"),
    ],
)
def test_extract_answer(completion: str, expected: str | None) -> None:
    assert extract_answer(completion) == expected


@pytest.mark.parametrize(
    ("completion", "default", "reference", "boxed"),
    [
        (r"<think>\boxed{1}</think> so \boxed{2}", "2", "1", "2"),
        # text after </think> beats a box inside; the box rule takes the box inside
        (r"<think>\boxed{1}</think> The answer is 3.", "3", "1", "1"),
        (r"<think>\boxed{1}</think> no answer", "1", "1", "1"),  # nothing after: last box of the whole text
        (
            r"<think>\boxed{1} \boxed{50}</think>\boxed{2}",
            "2",
            "50",
            "2",
        ),  # reference: the last box before, alone
        (r"<think>\boxed{1} \boxed{}</think>\boxed{2}", "2", None, "2"),  # ... an empty one is no answer
        (r"<think>x</think>\boxed{2}</think>\boxed{3}", "3", None, "3"),  # reference: before the FIRST one
        (r"<think>\boxed{1} cut off", "1", None, "1"),  # no </think>: the reference rule has no answer
        (r"The answer is 9. \boxed{7}", "7", None, "7"),  # a box beats a text fall-back
        ("The answer is 9.", "9", None, None),  # the box rules need a box
    ],
)
def test_think_rules(completion: str, default: str | None, reference: str | None, boxed: str | None) -> None:
    assert extract_answer(completion) == default
    assert extract_answer(completion, "boxed_before_think") == reference
    assert extract_answer(completion, "boxed") == boxed


def test_grade_uses_the_extraction_rule() -> None:
    completion = r"<think>maybe \boxed{3}</think> The final answer is $\boxed{4}$."
    assert grade(completion, "4") and not grade(completion, "3")
    assert grade(completion, "3", extraction="boxed_before_think")
    assert not grade("The answer is 4.", "4", extraction="boxed") and grade("The answer is 4.", "4")
    with pytest.raises(ValueError, match="extraction must be one of"):
        grade("4", "4", extraction="last")  # type: ignore[arg-type]


def test_extract_answer_is_linear_on_huge_inputs() -> None:
    start = time.monotonic()
    assert extract_answer("x" * 1_000_000 + "\\boxed{" * 1000) is None
    assert extract_answer("\\boxed{" * 140_000) is None  # 1 MB of unbalanced boxes
    assert extract_answer("{" * 500_000 + r"\boxed{5}") == "5"
    tail = extract_answer("The answer is " + "9" * 1_000_000)  # only the last 4000 characters are read
    assert tail is None or (tail.isdigit() and len(tail) <= 4000)
    assert time.monotonic() - start < 5.0


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("\\boxed{}fracsqt()[]$^_,.0123456789 xAnswer:</think>é💥")), max_size=80
    )
)
def test_cheap_layers_never_raise(text: str) -> None:
    for extraction in grading.EXTRACTIONS:
        found = grading.extract.locate(text, extraction)
        for p in (text, found.answer or ""):
            grading.answers_equal(p, "5", timeout=0.5)
            grading.guards.guard(grading.normalise.clean(p))


# ------------------------------------------------------------------------------------------------
# Batches, stats, bad input, time limits
# ------------------------------------------------------------------------------------------------
def test_table_through_grade_batch() -> None:
    rows = [r for r in TABLE + GAPS if r[0]]
    completions = [f"<think>working</think>The final answer is $\\boxed{{{pred}}}$." for pred, *_ in rows]
    golds = [gold for _, gold, *_ in rows]
    results, stats = grade_batch_with_stats(completions, golds, timeout=5.0)
    assert results == [r[2] for r in rows]
    assert stats.total == len(rows)
    assert (
        stats.fast_path + stats.verified + stats.no_answer + stats.unparseable + stats.timeouts == stats.total
    )
    assert stats.fast_path > stats.verified > 0  # most items never touch a worker
    assert stats.timeouts == 0 and stats.no_answer == 0
    assert stats.n_correct == sum(results)


ADVERSARIAL = [
    "",
    "no answer at all",
    "\\boxed{",
    "\\boxed{5",
    "x" * 1_000_000,  # 1 MB, no answer
    "\\boxed{" + "1" * 1_000_000 + "}",  # 1 MB answer
    "\\boxed{9^{9^{9^{9}}}}",
    "\\boxed{10^{10^{10}}}",
    "\\boxed{2^{2^{30}}}",
    "\\boxed{9**9**9}",
    "\\boxed{(10^{999})^{999}}",
    "\\boxed{" + "\\frac{1}{2+" * 40 + "1" + "}" * 40 + "}",  # deeply nested fractions
    "\\boxed{" + "(" * 200 + "1" + ")" * 200 + "}",
    "\\boxed{(10^{6})!}",
    "\\boxed{100000!}",
    "\\boxed{\\binom{10^{9}}{10^{5}}}",
    "\\boxed{\\prod_{k=1}^{10^{6}} k}",
    "\\boxed{\\int_0^1 e^{-x^2} dx}",
    "\\boxed{\U0001f4a5\x00\ud800\u202e}",  # junk unicode, a NUL, a lone surrogate
    "\\boxed{" + "\\sqrt{" * 50 + "2" + "}" * 50 + "}",
]


@pytest.mark.parametrize("completion", ADVERSARIAL, ids=[f"adv{i}" for i in range(len(ADVERSARIAL))])
def test_adversarial_grade_in_process(completion: str) -> None:
    start = time.monotonic()
    assert grade(completion, "5", timeout=1.0) is False
    assert time.monotonic() - start < 1.0 + SLACK_S


def test_adversarial_grade_batch_bounded_and_counted() -> None:
    timeout = 1.0
    start = time.monotonic()
    results, stats = grade_batch_with_stats(ADVERSARIAL, ["5"] * len(ADVERSARIAL), timeout=timeout)
    elapsed = time.monotonic() - start
    assert results == [False] * len(ADVERSARIAL)
    assert stats.total == len(ADVERSARIAL)
    assert stats.no_answer == 5  # "", plain text, "\boxed{", "\boxed{5" (unbalanced) and the 1 MB of x's
    assert stats.unparseable == len(ADVERSARIAL) - 5  # every other one is refused before sympy
    assert (
        stats.no_answer + stats.unparseable + stats.timeouts + stats.verified + stats.fast_path == stats.total
    )
    assert stats.n_correct == 0
    # Items run two at a time at worst; each one is hard-limited to timeout + 1 s.
    assert elapsed < (len(ADVERSARIAL) / 2) * (timeout + grading.pool.HARD_GRACE_S) + SLACK_S


def test_soft_timeout_is_counted() -> None:
    # Passes the guards but takes ~1 s of sympy (10 nested parentheses); unique so no cache helps.
    slow = "(" * 10 + str(time.time_ns() % 99991) + ")" * 10
    start = time.monotonic()
    results, stats = grade_batch_with_stats([f"\\boxed{{{slow}}}"], ["5"], timeout=0.1)
    assert results == [False]
    assert stats.timeouts == 1
    assert time.monotonic() - start < 0.1 + grading.pool.HARD_GRACE_S + SLACK_S


def test_stats_counts() -> None:
    completions = [
        "I do not know",  # no_answer
        r"\boxed{25}",  # fast path (025)
        r"\boxed{24}",  # fast path, wrong
        r"\boxed{\sqrt{8}}",  # math-verify
        r"\boxed{9^{9^{9}}}",  # guard -> unparseable
    ]
    golds = ["025", "025", "025", r"2\sqrt2", "5"]
    results, stats = grade_batch_with_stats(completions, golds)
    assert results == [False, True, False, True, False]
    assert stats == GradeStats(
        total=5, fast_path=2, verified=1, no_answer=1, unparseable=1, timeouts=0, n_correct=2
    )
    assert stats.merge(stats).total == 10


def test_batch_deduplicates_and_handles_empty() -> None:
    assert grade_batch([], []) == []
    comps = [r"\boxed{\sqrt{8}}"] * 6 + [r"\boxed{\sqrt{9}}"] * 2
    assert grade_batch(comps, [r"2\sqrt{2}"] * 8, workers=1) == [True] * 6 + [False] * 2
    with pytest.raises(ValueError):
        grade_batch(["a"], [])


def test_grading_from_a_thread() -> None:
    """Off the main thread math-verify's signal timeouts cannot work: the grader must still bound work."""
    out: dict[str, object] = {}

    def work() -> None:
        out["batch"] = grade_batch_with_stats(
            [r"\boxed{\sqrt{8}}", r"\boxed{3}", r"\boxed{9^{9^{9}}}", "none"],
            [r"2\sqrt{2}", "3", "5", "5"],
        )
        slow = "(" * 10 + str(time.time_ns() % 99989) + ")" * 10  # ~1 s of sympy, unique: no cache
        out["slow"] = grade_batch_with_stats([f"\\boxed{{{slow}}}"], ["5"], timeout=0.1)
        out["grade"] = grade(r"\boxed{\frac{\cos x}{\sin x}}", r"\cot x")
        out["equal"] = answers_equal(r"-\pi/6", r"-\frac{\pi}{6}"), answers_equal("0.333", r"\frac13")
        out["adversarial"] = grade(ADVERSARIAL[-1], "5", timeout=0.5)

    thread = threading.Thread(target=work, name="not-main")
    start = time.monotonic()
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert time.monotonic() - start < 20
    results, stats = out["batch"]  # type: ignore[misc]
    assert results == [True, True, False, False]
    # "none" is a one-word answer (as "Evelyn" is), graded wrong by math-verify
    assert stats == GradeStats(total=4, fast_path=1, verified=2, no_answer=0, unparseable=1, n_correct=2)
    slow_results, slow_stats = out["slow"]  # type: ignore[misc]
    assert slow_results == [False] and slow_stats.timeouts == 1
    assert out["grade"] is True
    assert out["equal"] == (True, False)
    assert out["adversarial"] is False


def test_hung_worker_is_killed_and_replaced() -> None:
    """A hang that ignores signals (as a C-level big-integer operation does) is killed by the parent."""
    pool = grading.pool.WorkerPool()
    try:
        start = time.monotonic()
        answers = pool.run(
            [{"op": "_test_hang", "seconds": 600}, {"pred": r"$\sqrt{4}$", "gold": "$2$"}], 0.5, 2
        )
        assert [a[:2] for a in answers] == [(False, grading.verify.TIMEOUT), (True, grading.verify.VERIFIED)]
        assert (
            time.monotonic() - start < 0.5 + grading.pool.HARD_GRACE_S + 15
        )  # includes two worker start-ups
        start = time.monotonic()
        assert pool.run([{"pred": "0.5", "gold": r"$\frac12$"}], 0.5, 1)[0][:2] == (
            True,
            grading.verify.VERIFIED,
        )
        assert not pool.broken
    finally:
        pool.shutdown()
    assert pool.workers == []


def test_pool_that_cannot_start_falls_back_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading.pool, "_WORKER_BOOT", "import sys; sys.exit(3)")
    pool = grading.pool.WorkerPool()
    try:
        assert pool.run([{"pred": r"$\sqrt{4}$", "gold": "$2$"}], 2.0, 1)[0][:2] == (
            True,
            grading.verify.VERIFIED,
        )
        assert pool.broken
    finally:
        pool.shutdown()


def test_majority_vote_classes() -> None:
    """answers_equal partitions sampled answers into equivalence classes (Cons@k)."""
    answers = [r"\frac12", "0.5", "1/2", "2", r"\dfrac{1}{2}", "2.0"]
    classes: list[list[str]] = []
    for a in answers:
        for cls in classes:
            if answers_equal(a, cls[0]):
                cls.append(a)
                break
        else:
            classes.append([a])
    assert sorted(len(c) for c in classes) == [2, 4]


def test_odd_arguments_never_raise() -> None:
    assert grade(None, "5") is False  # type: ignore[arg-type]
    assert grade(r"\boxed{5}", None) is False  # type: ignore[arg-type]
    assert grade(r"\boxed{5}", "5", timeout=0) is True
    assert grade(r"\boxed{5}", "5", timeout=float("nan")) is True
    assert answers_equal("5", "") is False
