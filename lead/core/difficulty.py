"""Difficulty as measured pass rates: per-problem rates, Wilson intervals, and summaries by level.

A problem's difficulty *for the current model* is its pass rate over k sampled completions; GRPO-LEAD's
curriculum and reweighting depend on it. Pure functions over counts; sampling and grading live elsewhere.

Calibration (:mod:`lead.calibration`) turns each problem's k verdicts into a :class:`ProblemCalibration`
(k, correct count c, pass rate p = c/k, Wilson interval, mean length). Two selections use p:

* stage 1 (``calibrate.min_pass_rate < p < calibrate.max_pass_rate``, default 0 < p < 1): keep only
  problems whose group of samples can have reward spread — an all-wrong or all-right group has zero
  group-normalised advantage and teaches nothing (GRPO-LEAD.md §5);
* the paper's later stage (GRPO-LEAD.md §6): problems with stage-1 pass rate p ≤ 0.75, zero included
  (:func:`stage2_band`, :data:`STAGE2_MAX_PASS_RATE`).

Difficulty *bands* partition [0, 1] for reporting: ``{0}``, the half-open intervals ``(e_i, e_i+1]`` between
the interior edges of ``calibrate.bands``, the top interval ``(e_last, 1)`` and ``{1}`` (see :func:`band_of`).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Inclusive = Literal["both", "neither", "left", "right"]

# The paper's later-stage pool: problems the stage-1 model solved at most 75 % of the time (GRPO-LEAD.md §6).
STAGE2_MAX_PASS_RATE = 0.75


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
    # At c = 0 (c = n) the lower (upper) bound is exactly 0 (1); rounding would leave it a few ulps off.
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == n else min(1.0, centre + half)
    return low, high


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


@dataclass(frozen=True)
class ProblemCalibration:
    """One problem's calibration: k samples, ``n_correct`` = c of them scored correct.

    pass_rate = c / k; (wilson_low, wilson_high) = :func:`wilson_interval` (c, k) at 95 %;
    mean_length = mean completion length in tokens over all k samples (EOS included).
    """

    k: int
    n_correct: int
    pass_rate: float
    wilson_low: float
    wilson_high: float
    mean_length: float


def calibrate_problem(correct: Sequence[bool], lengths: Sequence[int]) -> ProblemCalibration:
    """The :class:`ProblemCalibration` of one problem from its k verdicts and k completion lengths.

    >>> calibrate_problem([True, False, False, True], [10, 20, 30, 40]).pass_rate
    0.5
    """
    k = len(correct)
    if k == 0 or len(lengths) != k:
        raise ValueError(f"need k >= 1 verdicts and as many lengths, got {k} and {len(lengths)}")
    c = sum(bool(x) for x in correct)
    low, high = wilson_interval(c, k)
    return ProblemCalibration(
        k=k,
        n_correct=c,
        pass_rate=c / k,
        wilson_low=low,
        wilson_high=high,
        mean_length=statistics.fmean(lengths),
    )


def in_band(p: float, low: float, high: float, inclusive: Inclusive = "neither") -> bool:
    """Whether ``low <(=) p <(=) high``; ``inclusive`` names the closed ends, as in ``pandas.Series.between``.

    Stage 1 keeps ``in_band(p, 0, 1)`` (open: 0 < p < 1); stage 2 keeps ``in_band(p, 0, 0.75, "both")``.
    """
    if inclusive not in ("both", "neither", "left", "right"):
        raise ValueError(f"inclusive must be both, neither, left or right; got {inclusive!r}")
    above = p >= low if inclusive in ("both", "left") else p > low
    below = p <= high if inclusive in ("both", "right") else p < high
    return above and below


def band_rule(low: float, high: float, inclusive: Inclusive = "neither") -> str:
    """The band of :func:`in_band` as text, its closed ends as ``<=``.

    >>> band_rule(0, 1), band_rule(0, 0.75, "both")
    ('0 < pass_rate < 1', '0 <= pass_rate <= 0.75')
    """
    if inclusive not in ("both", "neither", "left", "right"):
        raise ValueError(f"inclusive must be both, neither, left or right; got {inclusive!r}")
    left = "<=" if inclusive in ("both", "left") else "<"
    right = "<=" if inclusive in ("both", "right") else "<"
    return f"{low:g} {left} pass_rate {right} {high:g}"


def band_mask(
    pass_rates: Iterable[float], low: float, high: float, inclusive: Inclusive = "neither"
) -> list[bool]:
    """:func:`in_band` for each pass rate (for columnar data: a parquet column, a dataset column)."""
    return [in_band(float(p), low, high, inclusive) for p in pass_rates]


def stage2_band(max_pass_rate: float) -> tuple[float, float, Inclusive]:
    """The paper's later-stage rule as a band ``(low, high, inclusive)``: 0 ≤ p ≤ ``max_pass_rate``.

    Unlike stage 1 the lower end is closed: a problem the stage-1 model never solved stays in (the paper adds
    still harder problems on top).

    >>> stage2_band(0.75)
    (0.0, 0.75, 'both')
    """
    return 0.0, max_pass_rate, "both"


def band_labels(edges: Sequence[float]) -> list[str]:
    """Labels of the bands that interior ``edges`` (strictly increasing, in (0, 1)) make of [0, 1].

    >>> band_labels([0.25, 0.75])
    ['0', '(0, 0.25]', '(0.25, 0.75]', '(0.75, 1)', '1']
    """
    _check_edges(edges)
    bounds = [0.0, *edges]
    inner = [f"({_fmt(a)}, {_fmt(b)}]" for a, b in itertools.pairwise(bounds)]
    return ["0", *inner, f"({_fmt(bounds[-1])}, 1)", "1"]


def band_of(p: float, edges: Sequence[float]) -> str:
    """The band label of pass rate ``p``: ``"0"`` if p = 0, ``"1"`` if p = 1, else the interval
    ``(e_i, e_i+1]`` holding p (right-closed, so that p = 0.75 is in the band ending at 0.75 and the
    stage-2 rule p ≤ 0.75 is a union of whole bands when 0.75 is an edge), or the top one ``(e_last, 1)``.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a pass rate lies in [0, 1], got {p}")
    labels = band_labels(edges)
    if p == 0.0:
        return labels[0]
    if p == 1.0:
        return labels[-1]
    for i, edge in enumerate(edges):
        if p <= edge:
            return labels[i + 1]
    return labels[-2]


def band_counts(pass_rates: Iterable[float], edges: Sequence[float]) -> dict[str, int]:
    """Problems per band, every band listed (zeros included), in increasing order of pass rate."""
    counts = dict.fromkeys(band_labels(edges), 0)
    for p in pass_rates:
        counts[band_of(float(p), edges)] += 1
    return counts


def pass_rate_histogram(correct_counts: Iterable[int], k: int) -> list[tuple[float, int]]:
    """``(c / k, number of problems with c correct)`` for c = 0 … k: with k samples per problem the pass
    rate takes only these k + 1 values, so this is the exact histogram (no binning choice)."""
    counts = [0] * (k + 1)
    for c in correct_counts:
        if not 0 <= c <= k:
            raise ValueError(f"a correct count lies in [0, {k}], got {c}")
        counts[c] += 1
    return [(c / k, n) for c, n in enumerate(counts)]


def pass_rate_histogram_by_level(
    levels: Iterable[Any], correct_counts: Iterable[int], k: int
) -> dict[str, list[tuple[float, int]]]:
    """:func:`pass_rate_histogram` per difficulty level (``str(level)``, in sorted order): where in the pass-rate
    range each level's problems sit, i.e. whether the keep band holds hard problems for AD to weight up.

    >>> pass_rate_histogram_by_level([1, 2, 1], [2, 0, 1], 2)
    {'1': [(0.0, 0), (0.5, 1), (1.0, 1)], '2': [(0.0, 1), (0.5, 0), (1.0, 0)]}
    """
    by_level: dict[Any, list[int]] = {}
    for level, c in zip(levels, correct_counts, strict=True):
        by_level.setdefault(level, []).append(c)
    return {str(level): pass_rate_histogram(counts, k) for level, counts in sorted(by_level.items())}


def _check_edges(edges: Sequence[float]) -> None:
    if any(not 0.0 < e < 1.0 for e in edges) or any(a >= b for a, b in itertools.pairwise(edges)):
        raise ValueError(f"band edges must be strictly increasing and inside (0, 1), got {list(edges)}")


def _fmt(x: float) -> str:
    return f"{x:g}"


def split_dev(
    rows: list[dict[str, Any]], n: int, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train, dev)``: ``n`` rows drawn (seeded) from the pool for validation, the rest kept for RL, in order."""
    if n >= len(rows):
        raise ValueError(f"train.dev_problems = {n}: the pool has only {len(rows)} problems")
    held = set(random.Random(seed).sample(range(len(rows)), n))
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]
