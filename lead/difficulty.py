"""Difficulty as measured pass rates: per-problem rates, Wilson intervals, and summaries by level.

A problem's difficulty *for the current model* is its pass rate over k sampled completions; GRPO-LEAD's
curriculum and reweighting depend on it. Pure functions over counts; sampling and grading live elsewhere.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


def wilson_interval(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a pass rate ``correct / n``.

    centre = (p + z²/2n) / (1 + z²/n),  half-width = z·sqrt(p(1−p)/n + z²/4n²) / (1 + z²/n).
    Unlike the normal approximation it stays inside [0, 1] and is sensible at p = 0 or 1 with small n.

    >>> tuple(round(x, 3) for x in wilson_interval(4, 8))
    (0.215, 0.785)
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= correct <= n:
        raise ValueError(f"correct must be in [0, {n}], got {correct}")
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class LevelSummary:
    """Pass-rate and length statistics of the problems of one difficulty level."""

    level: int
    problems: int
    pass_rate: float  # mean over problems of the per-problem pass rate
    informative: float  # share of problems whose pass rate lies in [0.1, 0.9]: RL groups with reward spread
    mean_length: float  # tokens, over all completions
    length_ratio: float  # median over problems of (longest / shortest) completion


def summarize_by_level(
    levels: Sequence[int], correct: Sequence[Sequence[bool]], lengths: Sequence[Sequence[int]]
) -> list[LevelSummary]:
    """One :class:`LevelSummary` per level; ``correct[i]``/``lengths[i]`` are problem i's k samples."""
    if not len(levels) == len(correct) == len(lengths):
        raise ValueError("levels, correct and lengths must have one entry per problem")
    by_level: dict[int, list[int]] = defaultdict(list)
    for i, level in enumerate(levels):
        by_level[level].append(i)
    out = []
    for level in sorted(by_level):
        idx = by_level[level]
        rates = [sum(correct[i]) / len(correct[i]) for i in idx]
        out.append(
            LevelSummary(
                level=level,
                problems=len(idx),
                pass_rate=statistics.fmean(rates),
                informative=sum(0.1 <= r <= 0.9 for r in rates) / len(rates),
                mean_length=statistics.fmean(x for i in idx for x in lengths[i]),
                length_ratio=statistics.median(max(lengths[i]) / max(1, min(lengths[i])) for i in idx),
            )
        )
    return out
