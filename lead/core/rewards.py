"""Outcome rewards of GRPO-LEAD: the length-dependent accuracy reward (L) and the explicit penalty (E).

Every completion of a prompt's group is first classified into one :class:`Outcome`
(GRPO-LEAD.md §3, the reference code's table):

==============  ===========================================================  ===================
outcome         decided by                                                    reward (faithful)
==============  ===========================================================  ===================
``correct``     has ``</think>`` and the graded answer matches the gold       ``exp(-alpha * z)``
``wrong``       has ``</think>``, answer wrong or missing                     ``-1``
``unfinished``  no ``</think>`` (e.g. truncated), not degenerate              ``0``
``degenerate``  no ``</think>`` and a repetition loop (:func:`is_degenerate`)  ``-2``
==============  ===========================================================  ===================

The correct completions of a group are then shaped by their length (GRPO-LEAD.md §2)::

    z_i = (|o_i| - mu) / (sigma + 1e-6),    R(o_i) = correct * exp(-alpha * z_i),    alpha = 0.05

where mu and sigma are the mean and the *sample* (n - 1) standard deviation of the token lengths of the
group's correct completions only (sigma := 1 when fewer than two are correct). Shorter-than-average
correct answers get more than ``correct``, longer ones less, and every correct answer stays positive.

Decision on ``correct``: it *multiplies* the shaped factor, ``R = correct * exp(-alpha z)``, exactly as
the reference code does (``rewards[i] = rewards[i] * exp(-alpha * z_i)`` with ``rewards[i] == 1``). So
``correct`` is the reward of an unshaped correct answer (alpha = 0, a single correct answer of average
length, or a group that fails the length gate), and with the default ``correct=1.0`` the paper's
``exp(-alpha z)`` is recovered exactly.

The reference code also has a *gate* the paper does not mention: a group is shaped only when the mean
length of its three shortest completions (any outcome) exceeds 4000 tokens. Here it is ``length_gate``
(``None`` = off, the paper; ``4000`` = the reference code).

All functions are pure: flat, group-contiguous sequences (lists, numpy arrays or torch tensors) in,
numpy float64 arrays out. The correctness judgement itself comes from the grader; this module only maps
(text, is_correct) to an outcome and outcomes + lengths to rewards.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lead.core._arrays import as_1d_float, check_group_size

__all__ = ["Outcome", "classify_outcome", "is_degenerate", "lead_rewards"]

THINK_CLOSE = "</think>"
# Added to sigma before dividing, as in the reference code, so a group whose correct lengths are all
# equal (sigma = 0) gives z = 0 instead of 0/0.
Z_EPS = 1e-6
# The gate averages this many shortest completions of a group (reference code: min1, min2, min3).
GATE_SHORTEST = 3


class Outcome(enum.StrEnum):
    """What a completion amounts to for the reward (GRPO-LEAD.md §3).

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


# Row order of the per-outcome reward table built in ``lead_rewards``.
_OUTCOME_INDEX = {outcome: i for i, outcome in enumerate(Outcome)}
_ALLOWED = ", ".join(repr(o.value) for o in Outcome)


def _outcome_codes(outcomes: Iterable[Outcome | str]) -> np.ndarray:
    """Map outcomes (enum members or their string values) to row indices of the reward table."""
    codes = []
    for value in outcomes:
        try:
            codes.append(_OUTCOME_INDEX[Outcome(value)])
        except ValueError:
            raise ValueError(f"unknown outcome {value!r}; allowed: {_ALLOWED}") from None
    return np.asarray(codes, dtype=np.intp)


def lead_rewards(
    outcomes: Sequence[Outcome | str],
    lengths: Sequence[float] | np.ndarray | Any,
    group_size: int,
    *,
    alpha: float = 0.05,
    length_gate: float | None = None,
    correct: float = 1.0,
    wrong: float = -1.0,
    unfinished: float = 0.0,
    degenerate: float = -2.0,
) -> np.ndarray:
    """Rewards of GRPO-LEAD: length-shaped accuracy reward plus explicit penalties, per group.

    For each group of ``group_size`` consecutive completions, with mu and sigma the mean and sample
    (ddof = 1) standard deviation of the lengths of the group's CORRECT completions (sigma := 1 when
    fewer than two are correct)::

        correct:     correct * exp(-alpha * (len - mu) / (sigma + 1e-6))
        wrong:       wrong            (-1)
        unfinished:  unfinished       (0)
        degenerate:  degenerate       (-2)

    ``alpha = 0`` switches shaping off (correct answers get exactly ``correct``). ``length_gate``: when
    not ``None``, a group is shaped only if the mean length of its 3 shortest completions (any outcome;
    all of them when the group has fewer than 3) is strictly greater than ``length_gate`` tokens;
    otherwise its correct completions get ``correct`` unshaped. The reference code uses 4000.

    Args:
        outcomes: one :class:`Outcome` (or its string value) per completion, groups contiguous.
        lengths: completion token lengths (including EOS), same order and length as ``outcomes``.
        group_size: completions per prompt (G).

    Returns:
        float64 array of shape ``(len(outcomes),)``.

    Raises:
        ValueError: mismatched lengths, a size not divisible by ``group_size``, ``group_size < 1``,
            an unknown outcome, or a negative / non-finite length.

    >>> r = lead_rewards(["correct", "correct", "wrong", "degenerate"], [100, 300, 50, 4096], 4)
    >>> r.round(4).tolist()  # mu = 200, sigma = 141.42, z = -/+0.7071
    [1.036, 0.9653, -1.0, -2.0]
    """
    codes = _outcome_codes(outcomes)
    length_array = as_1d_float(lengths, "lengths")
    if len(codes) != len(length_array):
        raise ValueError(f"outcomes has {len(codes)} items but lengths has {len(length_array)}")
    check_group_size(len(codes), group_size, "outcomes")
    if not np.all(np.isfinite(length_array)) or np.any(length_array < 0):
        raise ValueError("lengths must be finite and non-negative")

    table = np.empty(len(Outcome), dtype=np.float64)
    table[_OUTCOME_INDEX[Outcome.CORRECT]] = correct
    table[_OUTCOME_INDEX[Outcome.WRONG]] = wrong
    table[_OUTCOME_INDEX[Outcome.UNFINISHED]] = unfinished
    table[_OUTCOME_INDEX[Outcome.DEGENERATE]] = degenerate
    rewards: np.ndarray = table[codes]
    if len(codes) == 0 or alpha == 0:
        return rewards

    # One row per prompt: all group statistics become row reductions.
    lens = length_array.reshape(-1, group_size)
    is_correct = (codes == _OUTCOME_INDEX[Outcome.CORRECT]).reshape(-1, group_size)
    n_correct = is_correct.sum(axis=1)
    mu = np.where(is_correct, lens, 0.0).sum(axis=1) / np.maximum(n_correct, 1)
    sq_dev = np.where(is_correct, (lens - mu[:, None]) ** 2, 0.0).sum(axis=1)
    sigma = np.where(n_correct >= 2, np.sqrt(sq_dev / np.maximum(n_correct - 1, 1)), 1.0)
    # z is only meaningful for correct completions; zero it elsewhere so that, e.g., a long wrong answer
    # next to a single correct one (sigma := 1) cannot overflow exp(). For correct ones |z| <= (n-1)/sqrt(n).
    z = np.where(is_correct, (lens - mu[:, None]) / (sigma[:, None] + Z_EPS), 0.0)
    shaped = correct * np.exp(-alpha * z)

    shape_mask = is_correct
    if length_gate is not None:
        k = min(GATE_SHORTEST, group_size)
        shortest_mean = np.sort(lens, axis=1)[:, :k].mean(axis=1)
        shape_mask = shape_mask & (shortest_mean > length_gate)[:, None]

    flat_mask = shape_mask.reshape(-1)
    rewards[flat_mask] = shaped.reshape(-1)[flat_mask]
    return rewards


def _longest_true_run(mask: np.ndarray) -> int:
    """Length of the longest run of consecutive True values in a 1-D boolean array."""
    if mask.size == 0:
        return 0
    # Runs of True lie between consecutive False positions (with virtual Falses at both ends).
    false_at = np.flatnonzero(~mask)
    bounds = np.concatenate(([-1], false_at, [mask.size]))
    return int(np.diff(bounds).max()) - 1


def is_degenerate(
    text: str,
    *,
    max_ngram: int = 30,
    min_repeats: int = 10,
    max_word_chars: int = 120,
    aligned: bool = False,
) -> bool:
    """The reference repetition detector: is ``text`` stuck in a loop?

    Words are ``text.split()`` (whitespace-separated, case kept). ``text`` is degenerate when

    * some n-gram, n = 1 ... ``max_ngram``, occurs ``min_repeats`` or more times back to back, or
    * some "word" has ``max_word_chars`` or more characters (e.g. ``=======...`` or a digit stream).

    A run of r back-to-back copies of an n-gram is exactly a stretch of (r - 1)·n consecutive positions
    with ``words[i] == words[i + n]``, so each n costs one vectorized comparison: O(max_ngram · N)
    overall for N words, instead of comparing tuples of n words at every offset.

    ``aligned=True`` reproduces the reference code's shortcut exactly: it cuts the words into
    non-overlapping chunks starting at word 0 and counts equal neighbouring chunks, so a loop that does
    not start at a multiple of n can be counted one copy short. The default (any offset) detects
    everything the reference does and differs only at the threshold.

    >>> is_degenerate("so " + "let me check again " * 10)
    True
    >>> is_degenerate("so " + "let me check again " * 9)
    False
    >>> is_degenerate("x" * 120), is_degenerate("The answer is 42.")
    (True, False)
    """
    if max_ngram < 1 or min_repeats < 1:
        raise ValueError("max_ngram and min_repeats must be >= 1")
    words = text.split()
    if any(len(word) >= max_word_chars for word in words):
        return True
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


def classify_outcome(
    completion: str,
    is_correct: bool | None,
    *,
    require_think_close: bool = True,
    truncated: bool = False,
    no_answer_as_unfinished: bool = False,
    loops_anywhere: bool = False,
) -> Outcome:
    """Map a completion and the grader's verdict to an :class:`Outcome` (GRPO-LEAD.md §3).

    Rule (faithful preset = defaults)::

        not finished = truncated or (require_think_close and "</think>" not in completion)
        not finished            -> DEGENERATE if is_degenerate(completion) else UNFINISHED
        otherwise               -> CORRECT if is_correct else WRONG   (None = no answer -> WRONG)

    With ``loops_anywhere`` a completion that loops is DEGENERATE whether or not it finished.

    Args:
        completion: the generated text (the reference code runs the detector on the decoded
            prompt + completion; pass whichever text the preset wants inspected).
        is_correct: the grader's verdict; ``None`` means no answer could be extracted.
        require_think_close: a completion without ``</think>`` never finished its reasoning (faithful).
            ``False`` for graders that read the whole completion.
        truncated: the caller knows the completion hit the token limit (``improved`` preset). It is then
            UNFINISHED (or DEGENERATE) whatever it contains, so a cut-off answer is never graded
            correct or wrong; pair it with ``lead_rewards(..., unfinished=-1.0)`` so that running out the
            clock no longer beats a wrong answer, or mask such completions in the trainer.
        no_answer_as_unfinished: route ``is_correct=None`` through the unfinished / degenerate branch
            instead of WRONG. This is what the reference code actually does (no extracted answer scores
            like a missing ``</think>``: 0, or -2 when degenerate); the spec table says WRONG.
        loops_anywhere: run the repetition detector on finished completions too (the paper's later stage,
            "repeated n-grams -1.5"); the reference code checks only unfinished ones.

    >>> classify_outcome("<think>2+2=4</think> The answer is 4.", True)
    <Outcome.CORRECT: 'correct'>
    >>> classify_outcome("<think>2+2=5</think> The answer is 5.", False).value
    'wrong'
    >>> classify_outcome("<think>hmm " + "wait " * 50, None).value
    'degenerate'
    >>> classify_outcome("<think>let me see, first", None).value
    'unfinished'
    """
    unfinished = truncated or (require_think_close and THINK_CLOSE not in completion)
    if no_answer_as_unfinished and is_correct is None:
        unfinished = True
    if (unfinished or loops_anywhere) and is_degenerate(completion):
        return Outcome.DEGENERATE
    if unfinished:
        return Outcome.UNFINISHED
    return Outcome.CORRECT if is_correct else Outcome.WRONG
