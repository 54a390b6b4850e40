"""What a completion is (lead.core.outcomes): the repetition detector, the outcome rule, and each preset's
documented table checked completion by completion against an independent oracle (the conformance test).

The oracles below are written from GRPO-LEAD.md §3 and the reference code's scoring (``deepscaler_reward_fn``
and its trainer's score map, github.com/aeroplanepaper/GRPO-LEAD at 9344bef), not from lead's code: plain
string work, ``rfind`` for the last box, brace counting, the reference's chunked repetition scan.
"""

from __future__ import annotations

import itertools
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lead.config import TrainParams
from lead.core.outcomes import (
    EVALUATION,
    Outcome,
    OutcomeRules,
    is_degenerate,
    judge,
    outcome,
    repeats_ngram,
)
from lead.core.rewards import lead_rewards
from lead.training.presets import resolve

FAST = settings(deadline=None, max_examples=50)


# --------------------------------------------------------------------------------------------------
# is_degenerate
# --------------------------------------------------------------------------------------------------
def reference_aligned_count(text, max_ngram=30):
    """Straight port of the reference code's chunked scan: best consecutive run of equal chunks."""
    words = text.split()
    best = 0
    for n in range(1, max_ngram + 1):
        segments = [tuple(words[i : i + n]) for i in range(0, len(words) - n + 1, n)]
        count = 1
        for a, b in itertools.pairwise(segments):
            count = count + 1 if a == b else 1
            best = max(best, count)
    return best


def brute_force_any_offset(text, max_ngram=30, min_repeats=10):
    """By definition: some n-gram at some offset followed by min_repeats - 1 identical copies."""
    words = text.split()
    for n in range(1, max_ngram + 1):
        for i in range(len(words) - n * min_repeats + 1):
            gram = words[i : i + n]
            if all(words[i + j * n : i + (j + 1) * n] == gram for j in range(1, min_repeats)):
                return True
    return False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("wait " * 10, True),
        ("wait " * 9, False),
        ("a b c " * 10, True),
        ("a b c " * 9, False),
        ("Hmm, so " + "let me check again. " * 10 + "Done.", True),  # any offset, surrounded by text
        ("Hmm, so " + "let me check again. " * 9 + "Done.", False),
        ((" ".join(f"w{i}" for i in range(30)) + " ") * 10, True),  # a 30-gram is the longest checked
        ((" ".join(f"w{i}" for i in range(30)) + " ") * 9, False),
        ((" ".join(f"w{i}" for i in range(31)) + " ") * 10, False),  # a 31-gram is not
        ("x" * 120, True),
        ("x" * 119, False),
        ("see " + "=" * 150 + " above", True),
        ("", False),
        ("The sum of the roots is 3, so the answer is \\boxed{3}.", False),
        ("1 1 1 1 1 1 1 1 1 2 1", False),  # nine ones, not ten
    ],
)
def test_is_degenerate_table(text, expected):
    assert is_degenerate(text) is expected


def test_is_degenerate_parameters():
    assert is_degenerate("a b " * 3, min_repeats=3)
    assert not is_degenerate("a b " * 10, max_ngram=1)
    assert is_degenerate("abcdef", max_word_chars=6)


def test_aligned_mode_reproduces_reference_chunking():
    # One prefix word shifts the loop off the 3-word chunk grid: the reference counts only 9 copies.
    text = "so " + "a b c " * 10
    assert is_degenerate(text)
    assert not is_degenerate(text, aligned=True)
    assert reference_aligned_count(text) == 9
    assert is_degenerate("a b c " * 10, aligned=True)


@FAST
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=60),
    st.integers(2, 5),
    st.integers(1, 6),
)
def test_detector_matches_definitions(words, min_repeats, max_ngram):
    text = " ".join(words)
    want = brute_force_any_offset(text, max_ngram, min_repeats)
    assert is_degenerate(text, max_ngram=max_ngram, min_repeats=min_repeats) is want
    want_aligned = reference_aligned_count(text, max_ngram) >= min_repeats
    assert is_degenerate(text, max_ngram=max_ngram, min_repeats=min_repeats, aligned=True) is want_aligned


def test_detector_is_fast_on_long_text():
    rng = random.Random(0)
    vocab = [f"tok{i}" for i in range(2000)] + ["the", "so", "=", "+", "x"]
    normal = " ".join(rng.choice(vocab) for _ in range(40_000))
    assert len(normal) > 200_000
    loop = normal + " " + "then we get x = 2 and " * 1000
    start = time.perf_counter()
    assert not is_degenerate(normal)
    assert not is_degenerate(normal, aligned=True)
    assert is_degenerate(loop)
    assert time.perf_counter() - start < 2.0


def test_a_long_formula_is_no_loop_but_still_gibberish_for_an_unfinished_completion():
    formula = "\\frac{" + "+".join(f"a_{{{i}}}" for i in range(30)) + "}{2}"
    assert len(formula) >= 150 and " " not in formula
    assert not repeats_ngram(f"We get ${formula}$ and so on.")
    assert is_degenerate(f"We get ${formula}$ and so on.")  # the reference's rule for unfinished ones


# --------------------------------------------------------------------------------------------------
# outcome: the rule, switch by switch
# --------------------------------------------------------------------------------------------------
LOOP = "<think> hmm " + "wait, " * 20
CUT = "<think> Let me compute 17 * 23 first"
DONE = "<think> 17 * 23 = 391 </think> The answer is 391."
FAITHFUL = OutcomeRules()
NO_THINK = OutcomeRules(think=False)
CUT_UNFINISHED = OutcomeRules(truncation="unfinished")
NO_ANSWER_UNFINISHED = OutcomeRules(no_answer="unfinished")
LOOPS_ANYWHERE = OutcomeRules(loops="anywhere")


@pytest.mark.parametrize(
    ("completion", "answered", "truncated", "rules", "expected"),
    [
        (DONE, True, False, FAITHFUL, Outcome.CORRECT),
        (DONE, False, False, FAITHFUL, Outcome.WRONG),
        (DONE, None, False, FAITHFUL, Outcome.WRONG),  # no answer before </think>: wrong, as in the reference
        (DONE, True, True, FAITHFUL, Outcome.CORRECT),  # cut after </think>: graded as written
        (CUT, True, False, FAITHFUL, Outcome.UNFINISHED),  # no </think>: never correct
        (CUT, False, True, FAITHFUL, Outcome.UNFINISHED),
        (LOOP, None, True, FAITHFUL, Outcome.DEGENERATE),
        (LOOP + " </think> 5", False, False, FAITHFUL, Outcome.WRONG),  # finished: the loop is not penalized
        (CUT, True, False, NO_THINK, Outcome.CORRECT),
        (CUT, False, False, NO_THINK, Outcome.WRONG),
        (DONE, True, True, CUT_UNFINISHED, Outcome.UNFINISHED),  # hit the limit: never graded
        (LOOP + " </think>", True, True, CUT_UNFINISHED, Outcome.DEGENERATE),
        (DONE, None, False, NO_ANSWER_UNFINISHED, Outcome.UNFINISHED),
        (LOOP + " </think>", None, False, NO_ANSWER_UNFINISHED, Outcome.DEGENERATE),
        (DONE, False, False, NO_ANSWER_UNFINISHED, Outcome.WRONG),
        (LOOP + " </think> 5", True, False, LOOPS_ANYWHERE, Outcome.DEGENERATE),  # the paper's later stage
        (DONE, True, False, LOOPS_ANYWHERE, Outcome.CORRECT),
        (CUT, False, True, LOOPS_ANYWHERE, Outcome.UNFINISHED),
        (DONE, True, True, EVALUATION, Outcome.UNFINISHED),  # evaluation: a cut sample gave no answer
        (DONE, None, False, EVALUATION, Outcome.UNFINISHED),
        (CUT + " 391", False, False, EVALUATION, Outcome.WRONG),  # ... with no </think> needed
    ],
)
def test_outcome_table(completion, answered, truncated, rules, expected):
    assert outcome(completion, answered, truncated=truncated, rules=rules) is expected


def test_outcome_enum_is_string_valued():
    assert Outcome("degenerate") is Outcome.DEGENERATE
    assert [o.value for o in Outcome] == ["correct", "wrong", "unfinished", "degenerate"]
    with pytest.raises(ValueError):
        Outcome("timeout")


def test_rules_refuse_unknown_values():
    with pytest.raises(ValueError, match="truncation must be one of graded, unfinished, mask"):
        OutcomeRules(truncation="wrong")
    with pytest.raises(ValueError, match="extraction"):
        OutcomeRules(extraction="last")


def test_judge_checks_its_lengths_and_keeps_the_verdict_as_written():
    with pytest.raises(ValueError, match="2 completions, 1 golds"):
        judge(["a", "b"], ["1"], [False, False], FAITHFUL)
    cut = "<think>2+2=4</think> So the answer is \\boxed{4}"
    (j,), stats = judge([cut], ["4"], [True], EVALUATION)
    assert (j.outcome, j.correct, j.answer, stats.total) == (Outcome.UNFINISHED, True, "4", 1)


# --------------------------------------------------------------------------------------------------
# Stage 2's penalty: loops only (issue: a long formula in a correct answer scored -1.5)
# --------------------------------------------------------------------------------------------------
def stage2_score(completion: str, gold: str, preset: str = "paper") -> float:
    s = resolve(TrainParams(preset=preset).stage2_train()).lead  # the default stage-2 overrides
    (j,), _ = judge([completion], [gold], [False], s.rules)
    return float(lead_rewards([j.outcome], [100], 1, **_table(s))[0])


def _table(s) -> dict:
    return {
        "alpha": s.alpha,
        "length_gate": s.length_gate,
        "correct": s.correct,
        "wrong": s.wrong,
        "unfinished": s.unfinished,
        "degenerate": s.degenerate,
    }


FRACTION = "\\frac{" + "+".join(f"x_{{{i}}}^{{2}}" for i in range(16)) + "}{\\sqrt{2}}"


@pytest.mark.parametrize("preset", ["faithful", "paper", "improved"])
def test_stage2_scores_a_correct_answer_with_a_long_formula_plus_one_and_a_loop_minus_one_and_a_half(preset):
    assert len(FRACTION) >= 150
    formula = (
        f"<think>\nThe sum is ${FRACTION}$, which at the given point is 42, so the total is \\boxed{{42}}.\n"
        "</think>\nThe answer is \\boxed{42}."
    )
    looped = (
        "<think>\nThe sum is 6 * 7. " + "Let me check that again. " * 10 + "So it is \\boxed{42}.\n"
        "</think>\nThe answer is \\boxed{42}."
    )
    assert stage2_score(formula, "42", preset) == 1.0
    assert stage2_score(looped, "42", preset) == -1.5


# --------------------------------------------------------------------------------------------------
# Conformance: every preset's documented table, completion by completion, against an independent oracle
# --------------------------------------------------------------------------------------------------
PROMPT_BOX = "\\boxed{}"  # the reference decodes prompt + completion: the prompt's instruction holds this box


def ref_last_box(text: str) -> str | None:
    """The reference's ``last_boxed_only_string`` + ``remove_boxed``: the last ``\\boxed`` and its braced
    content (naive brace counting), None when malformed."""
    i = text.rfind("\\boxed")
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if text[j] == "}" and depth == 0:
            box = text[i : j + 1]
            return box[len("\\boxed{") : -1] if box.startswith("\\boxed{") else None
    return None


def ref_degenerate(text: str) -> bool:
    """The reference's two checks: its chunked n-gram scan (best run >= 10) or a word of >= 120 characters."""
    words = text.split()
    if any(len(w) >= 120 for w in words):
        return True
    for n in range(1, 31):
        chunks = [tuple(words[i : i + n]) for i in range(0, len(words) - n + 1, n)]
        run = 1
        for a, b in itertools.pairwise(chunks):
            run = run + 1 if a == b else 1
            if run >= 10:
                return True
    return False


def same(answer: str | None, gold: str) -> bool:
    return answer is not None and answer.replace(" ", "") == gold.replace(" ", "")


def oracle_faithful(completion: str, gold: str, truncated: bool) -> float:
    """deepscaler_reward_fn on prompt + completion, then the trainer's map (-1 -> 0, 0 -> -1): the token limit
    plays no part."""
    text = PROMPT_BOX + completion
    if "</think>" not in text:
        return -2.0 if ref_degenerate(completion) else 0.0
    answer = ref_last_box(text.split("</think>")[0])
    if answer is None:  # a malformed last box (the corpus has none: the prompt's box is always there)
        return -2.0 if ref_degenerate(completion) else 0.0
    return 1.0 if same(answer, gold) else -1.0


def last_box_after_think(completion: str) -> str | None:
    """The paper's rule, as the presets document it: the last box after the last </think>, else the last box
    of the reasoning; an empty box is none."""
    head, sep, tail = completion.rpartition("</think>")
    for part in (tail, head) if sep else (completion,):
        boxes = []
        i = part.find("\\boxed{")
        while i >= 0:
            content = ref_last_box(part[: _close(part, i) + 1])
            if content:
                boxes.append(content)
            i = part.find("\\boxed{", i + 1)
        if boxes:
            return boxes[-1]
    return None


def _close(text: str, start: int) -> int:
    depth = 0
    for j in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if text[j] == "}" and depth == 0:
            return j
    return len(text)


def oracle_paper(completion: str, gold: str, truncated: bool) -> float:
    """The paper's text: correct 1, anything else -1; a completion is correct when it closed its reasoning,
    was not cut, and its last box is right."""
    if "</think>" not in completion or truncated:
        return -1.0
    return 1.0 if same(last_box_after_think(completion), gold) else -1.0


def oracle_improved(completion: str, gold: str, truncated: bool) -> float:
    """improved: a completion that closed its reasoning is graded by its last box however it ended (1 / -1);
    one that did not is -1, or -2 when it loops (or holds a 120-character word)."""
    if "</think>" not in completion:
        return -2.0 if ref_degenerate(completion) else -1.0
    return 1.0 if same(last_box_after_think(completion), gold) else -1.0


ORACLES = {"faithful": oracle_faithful, "paper": oracle_paper, "improved": oracle_improved}


def corpus() -> list[tuple[str, str, bool]]:
    """(completion, gold, truncated) for every combination of the shapes real models produce: a box inside the
    reasoning, after it, both or neither (right, wrong, empty, with nested braces), ``</think>`` or not, cut
    inside or after the reasoning, a loop before or after ``</think>``, a long formula, a short and a long
    prelude (which moves a loop off the reference's chunk grid)."""
    out = []
    answers = {"42": ("42", "41"), "\\frac{1}{2}": ("\\frac{1}{2}", "\\frac{1}{3}")}
    loop = "Let me check this step again. " * 12
    formula = "$\\frac{" + "+".join(f"a_{{{i}}}" for i in range(30)) + "}{2}$"
    for gold, (right, wrong) in answers.items():
        box = {"right": right, "wrong": wrong, "empty": "", "none": None}
        for inside, after, think, cut, where_loop, long_formula, prelude in itertools.product(
            box,
            ("right", "wrong", "none"),
            (True, False),
            ("no", "after"),
            ("none", "before", "after"),
            (False, True),
            ("", "First, "),
        ):
            reasoning = prelude + "We work it out. "
            if long_formula:
                reasoning += f"The sum is {formula}. "
            if where_loop == "before":
                reasoning += loop
            if box[inside] is not None:
                reasoning += f"So the result is \\boxed{{{box[inside]}}}. "
            summary = "The answer is " + (f"\\boxed{{{box[after]}}}." if box[after] is not None else "done.")
            if where_loop == "after":
                summary = loop + summary
            if think:
                text = f"<think>\n{reasoning}\n</think>\n{summary}"
                if cut == "after":  # cut while writing the summary: the end of it is lost
                    text = text[: len(text) - 3]
            elif cut == "after":
                text = f"<think>\n{reasoning}"  # cut inside the reasoning
            else:
                text = f"<think>\n{reasoning}\n{summary}"  # an end (EOS) without </think>
            out.append((text, gold, cut == "after"))
    return sorted(set(out))


@pytest.mark.parametrize("preset", ["faithful", "paper", "improved"])
def test_every_preset_scores_as_its_documented_table_completion_by_completion(preset):
    from lead.training.trainer import classify

    shapes = corpus()
    assert len(shapes) >= 500
    s = resolve(TrainParams(preset=preset)).lead
    texts, golds, cut = (list(x) for x in zip(*shapes, strict=True))
    outcomes, _ = classify(texts, golds, cut, s)
    # One completion per group: a lone correct answer has z = 0, so the trainer's reward is the table's value.
    scores = lead_rewards(outcomes, [100] * len(texts), 1, **_table(s))
    oracle = ORACLES[preset]
    wrong = [
        (text, gold, truncated, score, oracle(text, gold, truncated))
        for text, gold, truncated, score in zip(texts, golds, cut, scores, strict=True)
        if score != oracle(text, gold, truncated)
    ]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[:3]}"
    # The corpus reaches every level of the preset's table.
    assert len(set(scores.tolist())) == {"faithful": 4, "paper": 2, "improved": 3}[preset]
