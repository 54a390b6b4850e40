r"""Evaluation metrics (GRPO-LEAD.md §7) as pure functions over graded samples: no I/O, no sampling.

Each problem of a benchmark is sampled ``n`` times. A :class:`Sample` holds what the evaluation stage
learned about one completion: its extracted answer (``None`` = no answer), the grader's verdict, its
length in tokens and whether it ended by itself (EOS) rather than at ``max_new_tokens``.

Metrics
-------
* **Pass@k** (Chen et al. 2021, unbiased): per problem with ``c`` correct out of ``n``,
  ``1 − C(n−c, k) / C(n, k)``, averaged over problems. Pass@1 is the mean correctness ``c / n``.
* **Cons@k**: majority vote over the first ``k`` samples' answers, where a vote goes to an
  *equivalence class* of answers (``\frac12`` and ``0.5`` are one class), not to a raw string. Samples
  without an answer do not vote; ties go to the class that appeared first. The problem counts as solved
  when the winning class's representative (its first member) was graded correct.
* **Len_avg**: mean generated tokens over all samples, and over correct / incorrect ones separately.
* **Truncation rate**: share of samples that hit ``max_new_tokens`` before EOS.
* **Token-budget sweep**: the same samples scored as if generation had stopped at a smaller budget ``B``:
  a sample longer than ``B`` tokens has no answer (wrong). No resampling, so the curve costs nothing.
* **Answered, precision** (the paper's claim for its explicit penalty: fewer wrong answers among those given):
  a sample *answered* when its outcome under evaluation's rules (:data:`lead.core.outcomes.EVALUATION`, the one
  outcome function every judge calls) is correct or wrong: it ended by itself (EOS) with an extracted answer —
  a completion cut at the token limit gave no answer, whatever number its text last mentioned. Precision =
  correct answered / answered.
  Pass@1 = answered × precision + the share correct among the cut ones (graded as written, as the field does).
* **Difficulty bands**: per band (e.g. MATH-500 ``level``), Cons@k, the answered share, precision and Pass@1.

Samples that were never generated (the prompt left no room for ``max_new_tokens`` in the model's context
window, see :mod:`lead.evaluation`) count as unanswered and wrong in every accuracy metric and are left
out of the length metrics and the truncation rate, which describe what the model actually wrote.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lead.core.outcomes import ANSWERED, EVALUATION, Outcome, outcome
from lead.grading import answers_equal

ALL = "all"  # the band of a benchmark without a difficulty field

# equal(answer, representative): does `answer` belong to the representative's class?
Equal = Callable[[str, str], bool]


@dataclass(frozen=True)
class Sample:
    """One graded completion. ``generated=False``: never sampled (no room in the context window).

    ``outcome``: what the completion is under evaluation's rules (:func:`lead.core.outcomes.judge` with
    :data:`~lead.core.outcomes.EVALUATION` gives it from the text); left out, it is decided by the same
    function from the verdict and ``finished`` alone (no text: evaluation's rules need none to tell answered
    from not).
    """

    answer: str | None
    correct: bool
    tokens: int
    finished: bool = True
    generated: bool = True
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if self.outcome is None:
            verdict = None if self.answer is None else self.correct
            judged = outcome("", verdict, truncated=not self.finished, rules=EVALUATION)
            object.__setattr__(self, "outcome", judged)


@dataclass(frozen=True)
class ProblemSamples:
    """The ``n`` samples of one problem, and the difficulty band the problem belongs to."""

    samples: tuple[Sample, ...]
    band: str = ALL

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def n_correct(self) -> int:
        """How many of its samples are correct."""
        return sum(s.correct for s in self.samples)


# --------------------------------------------------------------------------------------------------
# Pass@k
# --------------------------------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: the chance that ``k`` of the ``n`` samples, drawn without replacement,
    include at least one of the ``c`` correct ones.

    pass@k = 1 − C(n−c, k) / C(n, k) = 1 − ∏_{i=n−c+1}^{n} (1 − k/i)

    The product form never builds the huge binomials (C(1024, 512) has 307 digits). When fewer than ``k``
    samples are wrong (n − c < k) every draw of k contains a correct one: 1.

    >>> pass_at_k(10, 3, 1)
    0.3
    >>> round(pass_at_k(10, 3, 5), 6)  # 1 − C(7,5)/C(10,5) = 1 − 21/252
    0.916667
    >>> pass_at_k(4, 3, 2)  # n − c = 1 < k = 2
    1.0
    """
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs n >= 1, 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n  # exact (the product would leave float noise: 1 − 7/8·8/9·9/10 = 0.30000000000000004)
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(problems: Sequence[ProblemSamples], k: int) -> float:
    """Pass@k of a benchmark: the mean of :func:`pass_at_k` over its problems.

    >>> solved_once = ProblemSamples((Sample("1", True, 5), Sample("2", False, 5)))
    >>> never = ProblemSamples((Sample("3", False, 5),) * 2)
    >>> p = [solved_once, never]
    >>> mean_pass_at_k(p, 1), mean_pass_at_k(p, 2)
    (0.25, 0.5)
    """
    if not problems:
        raise ValueError("no problems to score")
    return statistics.fmean(pass_at_k(p.n, p.n_correct, k) for p in problems)


def mean_pass_at_1(problems: Sequence[ProblemSamples]) -> float:
    """Pass@1 = mean over problems of (correct samples / samples): the paper's headline accuracy.

    >>> mean_pass_at_1([ProblemSamples((Sample("1", True, 5), Sample(None, False, 9)))])
    0.5
    """
    return mean_pass_at_k(problems, 1)


def pass_at_k_values(n: int) -> list[int]:
    """The k reported for ``n`` samples: powers of two below ``n``, and ``n`` itself.

    >>> pass_at_k_values(8), pass_at_k_values(6), pass_at_k_values(1)
    ([1, 2, 4, 8], [1, 2, 4, 6], [1])
    """
    return [k for k in (2**i for i in range(n.bit_length())) if k < n] + [n]


# --------------------------------------------------------------------------------------------------
# Cons@k: majority vote over equivalence classes
# --------------------------------------------------------------------------------------------------
def answer_classes(answers: Sequence[str | None], equal: Equal = answers_equal) -> list[int | None]:
    r"""Equivalence class of each answer, numbered in order of first appearance; ``None`` for no answer.

    An answer joins the first earlier class whose representative (first member) it equals, comparing
    ``equal(answer, representative)`` (the grader's relation is gold-first, so the representative plays
    the gold); otherwise it opens a new class. Identical strings are merged without calling ``equal``.

    >>> answer_classes(["\\frac12", "0.5", None, "2", "1/2"])
    [0, 0, None, 1, 0]
    """
    representatives: list[str] = []
    classes: list[int | None] = []
    for answer in answers:
        if answer is None:
            classes.append(None)
            continue
        found = next(
            (i for i, rep in enumerate(representatives) if answer == rep or equal(answer, rep)), None
        )
        if found is None:
            found = len(representatives)
            representatives.append(answer)
        classes.append(found)
    return classes


def majority_class(classes: Sequence[int | None]) -> int | None:
    """The class with the most votes (``None`` entries do not vote); a tie goes to the class seen first.

    Classes are numbered in order of first appearance, so "seen first" is the smallest number.

    >>> majority_class([1, 0, 1, 0, None]), majority_class([None, None])
    (0, None)
    """
    votes = Counter(c for c in classes if c is not None)
    if not votes:
        return None
    top = max(votes.values())
    return min(c for c, v in votes.items() if v == top)


def cons_at_k(
    answers: Sequence[str | None],
    correct: Sequence[bool],
    k: int | None = None,
    *,
    equal: Equal = answers_equal,
) -> bool:
    r"""Cons@k of one problem: is the majority answer among the first ``k`` samples (default: all) correct?

    The vote is over equivalence classes (:func:`answer_classes`); the winner is :func:`majority_class`;
    its verdict is that of its representative, the class's first sample. No answer at all: ``False``.

    >>> cons_at_k(["7", "\\frac12", "0.5", "7"], [False, True, True, False])  # a 2-2 tie: "7" came first
    False
    >>> cons_at_k(["7", "\\frac12", "0.5", None, "1/2"], [False, True, True, False, True])
    True
    """
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answers but {len(correct)} verdicts")
    answers, correct = answers[:k], correct[:k]
    classes = answer_classes(answers, equal)
    winner = majority_class(classes)
    return winner is not None and bool(correct[classes.index(winner)])


def cached_equal(equal: Equal = answers_equal) -> Equal:
    """``equal`` memoised on its two strings: one benchmark's votes (full run, every budget, every band)
    compare the same answers many times, and a sympy comparison can take milliseconds."""
    return functools.lru_cache(maxsize=1 << 16)(equal)


def mean_cons_at_k(
    problems: Sequence[ProblemSamples], k: int | None = None, *, equal: Equal = answers_equal
) -> float:
    """Cons@k of a benchmark: the share of problems whose majority answer is correct."""
    if not problems:
        raise ValueError("no problems to score")
    return statistics.fmean(
        cons_at_k([s.answer for s in p.samples], [s.correct for s in p.samples], k, equal=equal)
        for p in problems
    )


# --------------------------------------------------------------------------------------------------
# Lengths and truncation
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LengthStats:
    """Mean generated tokens: over all samples, correct ones, incorrect ones (``None`` when there are none)."""

    len_avg: float | None
    len_correct: float | None
    len_incorrect: float | None


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def length_stats(samples: Iterable[Sample]) -> LengthStats:
    """Len_avg = Σ tokens / samples, over generated samples only; also split by verdict.

    >>> length_stats([Sample("1", True, 10), Sample("2", False, 30), Sample(None, False, 50)])
    LengthStats(len_avg=30.0, len_correct=10.0, len_incorrect=40.0)
    """
    generated = [s for s in samples if s.generated]
    return LengthStats(
        len_avg=_mean(s.tokens for s in generated),
        len_correct=_mean(s.tokens for s in generated if s.correct),
        len_incorrect=_mean(s.tokens for s in generated if not s.correct),
    )


def truncation_rate(samples: Iterable[Sample]) -> float | None:
    """Share of generated samples that stopped at ``max_new_tokens`` instead of EOS (``None``: no samples).

    >>> truncation_rate([Sample("1", True, 10), Sample(None, False, 256, finished=False)])
    0.5
    """
    return _mean(float(not s.finished) for s in samples if s.generated)


def answered(sample: Sample) -> bool:
    """Did the sample give an answer: is its outcome under evaluation's rules correct or wrong (it ended by
    itself, EOS not the token limit, with one extracted)?"""
    return sample.generated and sample.outcome in ANSWERED


def answered_share(samples: Iterable[Sample]) -> float:
    """Share of samples :func:`answered` (never-generated and cut-off samples count as unanswered).

    >>> answered_share([Sample("1", True, 10), Sample(None, False, 256, finished=False)])
    0.5
    >>> answered_share([Sample("7", True, 256, finished=False)])  # cut at the limit: no answer given
    0.0
    """
    samples = list(samples)
    if not samples:
        raise ValueError("no samples")
    return sum(map(answered, samples)) / len(samples)


def precision(samples: Iterable[Sample]) -> float | None:
    """Correct among the answered (:func:`answered`); ``None`` when nothing was answered.

    >>> precision([Sample("1", True, 9), Sample("2", False, 9), Sample("1", True, 256, finished=False)])
    0.5
    """
    given = [s for s in samples if answered(s)]
    return sum(s.correct for s in given) / len(given) if given else None


def accuracy_by_length(samples: Iterable[Sample], bins: int = 8) -> list[tuple[float, float, int]]:
    """Accuracy against length: generated samples sorted by length and cut into ``bins`` groups of (nearly)
    equal size; per group (mean tokens, share correct, samples). Equal-count groups never come out empty,
    unlike equal-width ones on a skewed length distribution.

    >>> accuracy_by_length([Sample("1", t < 30, t) for t in (10, 20, 30, 40)], bins=2)
    [(15.0, 1.0, 2), (35.0, 0.0, 2)]
    """
    ordered = sorted((s for s in samples if s.generated), key=lambda s: s.tokens)
    bins = max(1, min(bins, len(ordered)))
    out = []
    for b in range(bins):
        group = ordered[b * len(ordered) // bins : (b + 1) * len(ordered) // bins]
        if group:
            out.append(
                (
                    statistics.fmean(s.tokens for s in group),
                    sum(s.correct for s in group) / len(group),
                    len(group),
                )
            )
    return out


# --------------------------------------------------------------------------------------------------
# Token-budget sweep
# --------------------------------------------------------------------------------------------------
def within_budget(problem: ProblemSamples, budget: int) -> ProblemSamples:
    """The problem's samples scored under a ``budget`` of tokens: a sample longer than ``budget`` would have
    been cut before its answer, so it becomes unanswered and wrong (its length capped at ``budget``).

    >>> cut = within_budget(ProblemSamples((Sample("5", True, 10), Sample("5", True, 40))), 20).samples[1]
    >>> cut.answer, cut.correct, cut.tokens, cut.finished, cut.outcome.value
    (None, False, 20, False, 'unfinished')
    """
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    cut = tuple(
        replace(s, answer=None, correct=False, tokens=budget, finished=False, outcome=None)
        if s.tokens > budget
        else s
        for s in problem.samples
    )
    return replace(problem, samples=cut)


@dataclass(frozen=True)
class BudgetPoint:
    """Scores of a benchmark under one token budget."""

    budget: int
    pass_at_1: float
    cons: float
    answered: float


def budget_sweep(
    problems: Sequence[ProblemSamples], budgets: Iterable[int], *, equal: Equal = answers_equal
) -> list[BudgetPoint]:
    """Pass@1, Cons@n and answered share at each budget (ascending) via :func:`within_budget`.

    >>> right, wrong = Sample("5", True, 10), Sample("6", False, 15)
    >>> p = [ProblemSamples((right, Sample("5", True, 40), wrong, wrong))]
    >>> [(b.budget, b.pass_at_1, b.cons, b.answered) for b in budget_sweep(p, [50, 20])]
    [(20, 0.25, 0.0, 0.75), (50, 0.5, 1.0, 1.0)]
    """
    out = []
    for budget in sorted(set(budgets)):
        cut = [within_budget(p, budget) for p in problems]
        out.append(
            BudgetPoint(
                budget=budget,
                pass_at_1=mean_pass_at_1(cut),
                cons=mean_cons_at_k(cut, equal=equal),
                answered=answered_share(s for p in cut for s in p.samples),
            )
        )
    return out


# --------------------------------------------------------------------------------------------------
# Difficulty bands
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BandRow:
    """One difficulty band. precision = correct answered / answered (``None`` when nothing was answered)."""

    band: str
    problems: int
    cons: float
    answered: float
    precision: float | None
    pass_at_1: float


def level_order(band: str) -> list[int | str]:
    """Sort key of band names in natural order (``level_2`` before ``level_10``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", band)]


def band_table(problems: Sequence[ProblemSamples], *, equal: Equal = answers_equal) -> list[BandRow]:
    """One :class:`BandRow` per band, in natural order (``level_2`` before ``level_10``).

    Pass@1 = answered × precision (+ the cut-off samples graded correct): it separates "answers less often"
    from "answers wrongly more often".

    >>> rows = band_table([
    ...     ProblemSamples((Sample("3", True, 9), Sample(None, False, 9)), band="level_1"),
    ...     ProblemSamples((Sample("4", False, 9), Sample("5", True, 9)), band="level_2"),
    ... ])
    >>> [(r.band, r.cons, r.answered, r.precision, r.pass_at_1) for r in rows]
    [('level_1', 1.0, 0.5, 1.0, 0.5), ('level_2', 0.0, 1.0, 0.5, 0.5)]
    """
    bands: dict[str, list[ProblemSamples]] = {}
    for p in problems:
        bands.setdefault(p.band, []).append(p)
    rows = []
    for band in sorted(bands, key=level_order):
        group = bands[band]
        samples = [s for p in group for s in p.samples]
        rows.append(
            BandRow(
                band=band,
                problems=len(group),
                cons=mean_cons_at_k(group, equal=equal),
                answered=answered_share(samples),
                precision=precision(samples),
                pass_at_1=mean_pass_at_1(group),
            )
        )
    return rows


# --------------------------------------------------------------------------------------------------
# Everything for one benchmark, as flat metric names
# --------------------------------------------------------------------------------------------------
Metrics = dict[str, float | int | None]


def benchmark_metrics(
    problems: Sequence[ProblemSamples], *, budgets: Iterable[int] = (), equal: Equal = answers_equal
) -> Metrics:
    """Every metric of one benchmark under flat, MLflow-safe names (no ``@``; ``None`` = undefined).

    ``pass_at_{k}`` for :func:`pass_at_k_values`, ``cons_at_{n}``, ``answered``, ``precision``, ``len_avg``,
    ``len_correct``, ``len_incorrect``, ``truncation_rate``, ``budget_{B}.{pass_at_1,cons_at_{n},answered}``
    and, when the benchmark has difficulty bands, ``{band}.{problems,cons_at_{n},answered,precision,pass_at_1}``.
    Every problem must have the same number of samples ``n``.

    >>> m = benchmark_metrics([ProblemSamples((Sample("1", True, 4), Sample("2", False, 8, finished=False)))])
    >>> m["pass_at_1"], m["cons_at_2"], m["len_avg"], m["truncation_rate"]
    (0.5, 1.0, 6.0, 0.5)
    """
    if not problems:
        raise ValueError("no problems to score")
    sizes = {p.n for p in problems}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every problem needs the same, positive number of samples; got {sorted(sizes)}")
    (n,) = sizes
    samples = [s for p in problems for s in p.samples]
    cons = f"cons_at_{n}"
    out: Metrics = {"problems": len(problems), "samples_per_problem": n}
    out.update({f"pass_at_{k}": mean_pass_at_k(problems, k) for k in pass_at_k_values(n)})
    out[cons] = mean_cons_at_k(problems, equal=equal)
    out["answered"] = answered_share(samples)
    out["precision"] = precision(samples)
    lengths = length_stats(samples)
    out.update(len_avg=lengths.len_avg, len_correct=lengths.len_correct, len_incorrect=lengths.len_incorrect)
    out["truncation_rate"] = truncation_rate(samples)
    for point in budget_sweep(problems, budgets, equal=equal):
        prefix = f"budget_{point.budget}"
        out.update(
            {
                f"{prefix}.pass_at_1": point.pass_at_1,
                f"{prefix}.{cons}": point.cons,
                f"{prefix}.answered": point.answered,
            }
        )
    rows = band_table(problems, equal=equal)
    if [r.band for r in rows] != [ALL]:
        for r in rows:
            out.update(
                {
                    f"{r.band}.problems": r.problems,
                    f"{r.band}.{cons}": r.cons,
                    f"{r.band}.answered": r.answered,
                    f"{r.band}.precision": r.precision,
                    f"{r.band}.pass_at_1": r.pass_at_1,
                }
            )
    return out


def seed_summary(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics over repeats: the mean of each metric, and for more than one seed ``<metric>_std`` (sample std)
    of the headline scores (``pass_at_*``, ``cons_at_*``, ``len_avg``)."""
    if len(per_seed) == 1:
        return per_seed[0]
    out: dict[str, Any] = {}
    for key in per_seed[0]:
        values = [v[key] for v in per_seed]
        if any(v is None for v in values):
            out[key] = None
            continue
        if not all(isinstance(v, int | float) for v in values):  # a label such as the extraction rule
            out[key] = values[0] if len(set(values)) == 1 else None
            continue
        out[key] = statistics.fmean(values)
        if key.startswith(("pass_at_", "cons_at_", "len_avg")):
            out[f"{key}_std"] = statistics.stdev(values)
    return out
