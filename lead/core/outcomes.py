"""What a completion *is* -- correct, wrong, unfinished or degenerate -- decided in one place for every judge.

The reward (every preset), calibration's pass rates (stage 1 and 2), the dev-split validation and evaluation's
answered share and precision all call :func:`outcome` (one completion) or :func:`judge` (a batch: the grader's
verdicts, then :func:`outcome`), each with the :class:`OutcomeRules` of what it measures. A preset chooses its
rules by name (:mod:`lead.training.presets`); nothing else decides what a completion amounts to.

The rule (GRPO-LEAD.md §3, the reference code's table, with the presets' switches)::

    finished = (not rules.think or "</think>" in completion)
               and not (truncated and rules.truncation != "graded")
               and not (answer is None and rules.no_answer == "unfinished")
    not finished                                    -> DEGENERATE if is_degenerate(completion) else UNFINISHED
    finished, rules.loops == "anywhere", repeats    -> DEGENERATE   (repeated n-grams only: repeats_ngram)
    finished                                        -> CORRECT if the answer matches the gold else WRONG

The reference code (``deepscaler_reward_fn`` with its trainer's score map, the ``faithful`` rules) knows nothing
about the token limit: a completion holding ``</think>`` is graded by the last box before it however it ended
-- 1 when right, -1 when wrong or missing (the prompt's own empty ``\\boxed{}`` stands in for a missing box, so
"no answer" is wrong) --, and one without ``</think>`` scores 0, or -2 when it loops (:func:`is_degenerate`:
an n-gram repeated 10 times in a row, or a "word" of 120 characters).

Pure but for :func:`judge`, which asks the grader (:mod:`lead.grading`, its worker pool) for the verdicts.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lead.grading import EXTRACTIONS, Extraction, GradeStats, grade_batch_detailed

__all__ = [
    "EVALUATION",
    "OUTCOMES",
    "Judged",
    "Outcome",
    "OutcomeRules",
    "is_degenerate",
    "judge",
    "outcome",
    "repeats_ngram",
]

THINK_CLOSE = "</think>"
# The reference detector's constants (deepscaler_reward_fn): n-grams of 1..30 words repeated >= 10 times in a
# row, or one whitespace-free "word" of >= 120 characters.
MAX_NGRAM = 30
MIN_REPEATS = 10
MAX_WORD_CHARS = 120

Truncation = Literal["graded", "unfinished", "mask"]
NoAnswer = Literal["wrong", "unfinished"]
Loops = Literal["unfinished", "anywhere"]
TRUNCATIONS: tuple[Truncation, ...] = ("graded", "unfinished", "mask")


class Outcome(enum.StrEnum):
    """What a completion amounts to (GRPO-LEAD.md §3).

    A string enum (``str`` and ``Enum``): plain strings (``"correct"``) and members compare equal, and
    ``str(member)`` is the bare value, so outcomes serialize to JSON / CSV / MLflow tags as-is.

    >>> Outcome("wrong") is Outcome.WRONG
    True
    >>> Outcome.CORRECT == "correct", str(Outcome.CORRECT)
    (True, 'correct')
    """

    CORRECT = "correct"
    WRONG = "wrong"
    UNFINISHED = "unfinished"
    DEGENERATE = "degenerate"


# The outcomes in a fixed order: a batch carries an outcome as its index in this tuple (a tensor of codes).
OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
# Outcomes that gave an answer (evaluation's "answered"): graded right or wrong.
ANSWERED = frozenset({Outcome.CORRECT, Outcome.WRONG})


@dataclass(frozen=True)
class OutcomeRules:
    """The switches of :func:`outcome` (see the module docstring for the rule they configure).

    Attributes:
        extraction: where the graded answer is (:mod:`lead.grading.extract`): ``boxed_before_think`` (the
            reference code: the last box before the first ``</think>``), ``boxed`` (the paper: the last box),
            ``any`` (evaluation: math-verify's priority list).
        think: a completion without ``</think>`` never finished its reasoning (reasoning models); ``False``
            for graders that read the whole completion.
        truncation: a completion cut at the token budget is ``graded`` as written (the reference code), or
            ``unfinished`` whatever it holds; ``mask`` is ``unfinished`` here and, in the trainer, left out of
            the loss (TRL's ``mask_truncated_completions``).
        no_answer: a finished completion without an extractable answer is ``wrong`` (the reference code, via
            the prompt's empty box) or ``unfinished`` (evaluation: it gave no answer).
        loops: where a loop makes a completion DEGENERATE: only in ``unfinished`` ones (the reference code,
            with its long-word rule too), or ``anywhere`` (the paper's later stage: repeated n-grams in any
            completion -- a long formula is never a loop).
    """

    extraction: Extraction = "boxed_before_think"
    think: bool = True
    truncation: Truncation = "graded"
    no_answer: NoAnswer = "wrong"
    loops: Loops = "unfinished"

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("extraction", self.extraction, EXTRACTIONS),
            ("truncation", self.truncation, TRUNCATIONS),
            ("no_answer", self.no_answer, ("wrong", "unfinished")),
            ("loops", self.loops, ("unfinished", "anywhere")),
        ):
            if value not in allowed:
                raise ValueError(f"OutcomeRules.{name} must be one of {', '.join(allowed)}; got {value!r}")


# Evaluation's rules (GRPO-LEAD.md §7): math-verify's extraction on the whole completion; a sample *answered*
# (CORRECT or WRONG) when it ended by itself with an answer. Pass@1 counts a cut sample's verdict as written
# (Judged.correct); answered and precision count outcomes.
EVALUATION = OutcomeRules(extraction="any", think=False, truncation="unfinished", no_answer="unfinished")


def _longest_true_run(mask: np.ndarray) -> int:
    """Length of the longest run of consecutive True values in a 1-D boolean array."""
    if mask.size == 0:
        return 0
    # Runs of True lie between consecutive False positions (with virtual Falses at both ends).
    false_at = np.flatnonzero(~mask)
    bounds = np.concatenate(([-1], false_at, [mask.size]))
    return int(np.diff(bounds).max()) - 1


def repeats_ngram(
    text: str, *, max_ngram: int = MAX_NGRAM, min_repeats: int = MIN_REPEATS, aligned: bool = False
) -> bool:
    """Is ``text`` stuck in a loop: does some n-gram of words (n = 1 ... ``max_ngram``) occur ``min_repeats``
    or more times back to back? Words are ``text.split()`` (case kept).

    A run of r back-to-back copies of an n-gram is exactly a stretch of (r - 1)·n consecutive positions with
    ``words[i] == words[i + n]``, so each n costs one vectorized comparison: O(max_ngram · N) for N words.

    ``aligned=True`` reproduces the reference code's shortcut exactly: it cuts the words into non-overlapping
    chunks starting at word 0 and counts equal neighbouring chunks, so a loop that does not start at a multiple
    of n can be counted one copy short. The default (any offset) finds everything the reference does; the two
    differ only at the threshold (and the reference runs on prompt + completion, which shifts its chunks).

    >>> repeats_ngram("so " + "let me check again " * 10), repeats_ngram("so " + "let me check again " * 9)
    (True, False)
    >>> repeats_ngram("x" * 150)  # one long formula is no loop
    False
    """
    if max_ngram < 1 or min_repeats < 1:
        raise ValueError("max_ngram and min_repeats must be >= 1")
    words = text.split()
    if len(words) < min_repeats:
        return False
    # Integer ids make the n-shifted comparisons numpy-vectorized.
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64, count=len(words))
    for n in range(1, max_ngram + 1):
        if len(words) < min_repeats * n:
            break  # no room for min_repeats copies of an n-gram, nor of any longer one
        same = ids[n:] == ids[:-n]
        if aligned:
            # Chunk j equals chunk j + 1 iff same[j*n : (j+1)*n] is all True.
            n_chunks = len(words) // n
            chunk_same = same[: (n_chunks - 1) * n].reshape(n_chunks - 1, n).all(axis=1)
            if _longest_true_run(chunk_same) >= min_repeats - 1:
                return True
        elif _longest_true_run(same) >= (min_repeats - 1) * n:
            return True
    return False


def is_degenerate(
    text: str,
    *,
    max_ngram: int = MAX_NGRAM,
    min_repeats: int = MIN_REPEATS,
    max_word_chars: int = MAX_WORD_CHARS,
    aligned: bool = False,
) -> bool:
    """The reference code's detector for completions that never finished: a loop (:func:`repeats_ngram`) or
    a "word" of ``max_word_chars`` or more characters (e.g. ``=======...`` or a digit stream).

    >>> is_degenerate("so " + "let me check again " * 10)
    True
    >>> is_degenerate("x" * 120), is_degenerate("The answer is 42.")
    (True, False)
    """
    if any(len(word) >= max_word_chars for word in text.split()):
        return True
    return repeats_ngram(text, max_ngram=max_ngram, min_repeats=min_repeats, aligned=aligned)


def outcome(completion: str, answered: bool | None, *, truncated: bool, rules: OutcomeRules) -> Outcome:
    """What ``completion`` amounts to under ``rules`` (the rule is in the module docstring).

    Args:
        completion: the generated text.
        answered: the grader's verdict on the answer found by ``rules.extraction``: ``True`` / ``False``, or
            ``None`` when no answer could be extracted.
        truncated: the completion hit the token budget (no EOS).
        rules: the judge's :class:`OutcomeRules`.

    >>> faithful = OutcomeRules()
    >>> outcome("<think>6*7=42 \\\\boxed{42}</think> The answer is", True, truncated=True, rules=faithful).value
    'correct'
    >>> outcome("<think>6*7=41 \\\\boxed{41}</think>", False, truncated=False, rules=faithful).value
    'wrong'
    >>> outcome("<think>let me see, first", None, truncated=True, rules=faithful).value
    'unfinished'
    >>> outcome("<think>hmm " + "wait " * 50, None, truncated=True, rules=faithful).value
    'degenerate'
    """
    finished = (
        (not rules.think or THINK_CLOSE in completion)
        and not (truncated and rules.truncation != "graded")
        and not (answered is None and rules.no_answer == "unfinished")
    )
    if not finished:
        return Outcome.DEGENERATE if is_degenerate(completion) else Outcome.UNFINISHED
    if rules.loops == "anywhere" and repeats_ngram(completion):
        return Outcome.DEGENERATE
    return Outcome.CORRECT if answered else Outcome.WRONG


@dataclass(frozen=True)
class Judged:
    """One judged completion: its :class:`Outcome`, the grader's verdict on its answer as written
    (``correct``: what Pass@1 counts, also for a cut completion), the answer judged (``None``: none found)
    and how the grader decided (a :class:`~lead.grading.GradeStats` field name)."""

    outcome: Outcome
    correct: bool
    answer: str | None
    status: str


def judge(
    completions: Sequence[str],
    golds: Sequence[str],
    truncated: Sequence[bool],
    rules: OutcomeRules,
    *,
    timeout: float = 5.0,
    workers: int | None = None,
) -> tuple[list[Judged], GradeStats]:
    """Grade ``completions`` against ``golds`` under ``rules.extraction`` (one grader call for the batch) and
    decide each one's :func:`outcome`; also the batch's grader statistics.

    >>> done = "<think>2+2=4 \\\\boxed{4}</think> So \\\\boxed{4}."
    >>> [j.outcome.value for j in judge([done, done], ["4", "5"], [False, False], OutcomeRules())[0]]
    ['correct', 'wrong']
    """
    if not len(completions) == len(golds) == len(truncated):
        raise ValueError(
            f"{len(completions)} completions, {len(golds)} golds and {len(truncated)} truncation flags"
        )
    graded, stats = grade_batch_detailed(
        list(completions),
        [str(g) for g in golds],
        extraction=rules.extraction,
        timeout=timeout,
        workers=workers,
    )
    judged = [
        Judged(
            outcome(text, None if g.answer is None else g.correct, truncated=bool(cut), rules=rules),
            g.correct,
            g.answer,
            g.status,
        )
        for text, g, cut in zip(completions, graded, truncated, strict=True)
    ]
    return judged, stats
