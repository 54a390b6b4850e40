"""Outcome rewards of GRPO-LEAD: the length-dependent accuracy reward (L) and the explicit penalty (E).

Every completion of a prompt's group is first judged into one :class:`~lead.core.outcomes.Outcome` by
:func:`lead.core.outcomes.outcome` (GRPO-LEAD.md §3, the reference code's table; the presets' rules there):

==============  ===========================================================  ===================
outcome         decided by                                                    reward (faithful)
==============  ===========================================================  ===================
``correct``     has ``</think>`` and the graded answer matches the gold       ``exp(-alpha * z)``
``wrong``       has ``</think>``, answer wrong or missing                     ``-1``
``unfinished``  no ``</think>`` (e.g. truncated), not degenerate              ``0``
``degenerate``  no ``</think>`` and a repetition loop (``is_degenerate``)     ``-2``
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
numpy float64 arrays out. What a completion is comes from :mod:`lead.core.outcomes`; this module only maps
outcomes + lengths to rewards.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lead.core._arrays import as_1d_float, check_group_size
from lead.core.outcomes import Outcome

__all__ = ["lead_rewards"]

# Added to sigma before dividing, as in the reference code, so a group whose correct lengths are all
# equal (sigma = 0) gives z = 0 instead of 0/0.
Z_EPS = 1e-6
# The gate averages this many shortest completions of a group (reference code: min1, min2, min3).
GATE_SHORTEST = 3


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
