r"""The answer grader: a completion's final answer, and whether it equals the gold answer.

Every RL reward, calibrated pass rate and reported score is decided here, so the package is built to be
right first, then cheap, and never to raise or hang on a model's output. One module per concern:

==================  ==================================================================================
:mod:`.extract`     the final answer of a completion (the extraction rules)
:mod:`.normalise`   clean-up of an answer string, pure string work
:mod:`.fastpaths`   exact decisions without sympy (numbers, lists, choices, words, bases), or "defer"
:mod:`.guards`      what must never reach sympy (power towers, huge factorials, ...)
:mod:`.verify`      math-verify's ``parse``/``verify``, bounded by our own timers (standalone file)
:mod:`.pool`        worker processes with hard, process-level time limits
==================  ==================================================================================

Pipeline for one (completion, gold) pair: :func:`extract_answer` → clean-up → fast paths → guards →
math-verify (``parse`` both, ``verify(gold, pred)``, gold first) in a worker process.

Time limits (math-verify's own ``signal.alarm`` timeouts are switched off everywhere): :func:`grade_batch`
sends the pairs that reach math-verify to the worker pool (:mod:`.pool`); :func:`grade` /
:func:`answers_equal` on the main thread run it in-process under our own ``setitimer`` alarm, elsewhere (or
when another interval timer is running, e.g. pytest-timeout) in the pool.

Everything here is pure (no I/O; only caches of pure functions) except the worker pool.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from lead.grading.extract import extract_answer
from lead.grading.fastpaths import fast_compare
from lead.grading.guards import guard
from lead.grading.normalise import clean
from lead.grading.pool import shutdown_worker_pool, sympy_many
from lead.grading.verify import (
    FAST,
    NO_ANSWER,
    UNPARSEABLE,
    VERIFIED,
    bounded_sympy_equal,
    can_use_alarm,
)

__all__ = [
    "GradeStats",
    "answers_equal",
    "extract_answer",
    "grade",
    "grade_batch",
    "grade_batch_with_stats",
    "shutdown_worker_pool",
]

logger = logging.getLogger(__name__)

# Longer extracted answers skip even the string fast paths (no real answer is this long).
_MAX_FAST_CHARS = 20_000


@dataclass
class GradeStats:
    """How a batch was graded. ``fast_path + verified + no_answer + unparseable + timeouts == total``.

    fast_path: decided by exact string/number rules without sympy. verified: decided by math-verify.
    no_answer: nothing could be extracted. unparseable: refused by a guard, not parseable by math-verify,
    or a crashed worker (all graded ``False``). timeouts: math-verify ran out of time (graded ``False``).
    correct: how many were graded ``True`` (an extra, not part of the sum).
    """

    total: int = 0
    fast_path: int = 0
    verified: int = 0
    no_answer: int = 0
    unparseable: int = 0
    timeouts: int = 0
    correct: int = 0

    def merge(self, other: GradeStats) -> GradeStats:
        """Field-wise sum of two stats (for accumulating over batches)."""
        return GradeStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def _count(self, status: str, ok: bool) -> None:
        setattr(self, status, getattr(self, status) + 1)
        self.correct += int(ok)


def _gold_str(gold: Any) -> str:
    # AMC golds come as floats (27.0), AIME 2025 as ints: their str() is handled by the number fast path.
    if isinstance(gold, str):
        return gold
    if isinstance(gold, bool) or gold is None:
        return ""
    return str(gold)


def _timeout(timeout: float) -> float:
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        return 5.0
    return 5.0 if t != t else min(max(t, 0.05), 600.0)  # NaN -> default


def _decide_cheaply(pred: str, gold: str) -> tuple[bool | None, str, str, str]:
    """(decision, status, pred_clean, gold_clean); decision None = needs math-verify."""
    if not pred or not gold or len(pred) > _MAX_FAST_CHARS or len(gold) > _MAX_FAST_CHARS:
        return False, UNPARSEABLE, "", ""
    pc, gc = clean(pred), clean(gold)
    fast = fast_compare(pred, gold, pc, gc)
    if fast is not None:
        return fast, FAST, pc, gc
    if guard(pc) is not None or guard(gc) is not None:
        return False, UNPARSEABLE, pc, gc
    return None, VERIFIED, pc, gc


def _equal_with_status(pred: str, gold: str, timeout: float) -> tuple[bool, str]:
    try:
        decision, status, pc, gc = _decide_cheaply(pred, gold)
        if decision is not None:
            return decision, status
        if can_use_alarm():
            return bounded_sympy_equal(pc, gc, timeout)
        return sympy_many([(pc, gc)], timeout, 1)[0]
    except Exception:
        logger.debug("grading failed", exc_info=True)
        return False, UNPARSEABLE


def answers_equal(pred: str, gold: str, *, timeout: float = 5.0) -> bool:
    """Whether an extracted answer equals the gold answer (both strings, e.g. ``"0.5"``, ``"\\frac12"``).

    The relation is math-verify's, which is not symmetric (``gold`` is parsed as the reference: e.g. the
    gold ``3 < x \\le 4`` accepts ``(3,4]`` but only an interval-looking gold accepts an inequality). For
    majority voting over equivalence classes, compare each answer with a class representative as ``gold``.
    Never raises; bounded by ``timeout`` (see the module docstring for how, per thread).
    """
    return _equal_with_status(_gold_str(pred), _gold_str(gold), _timeout(timeout))[0]


def grade(completion: str, gold: str, *, before_think_close: bool = False, timeout: float = 5.0) -> bool:
    """Whether the completion's final answer (:func:`extract_answer`) equals ``gold``.

    Never raises and never hangs: ``False`` for no answer, unparseable or guarded answers, and on timeout.
    On the main thread the sympy step runs in-process under an alarm; elsewhere in a worker process.
    """
    pred = extract_answer(completion, before_think_close=before_think_close)
    if pred is None:
        return False
    return _equal_with_status(pred, _gold_str(gold), _timeout(timeout))[0]


def grade_batch_with_stats(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    before_think_close: bool = False,
    timeout: float = 5.0,
    workers: int | None = None,
) -> tuple[list[bool], GradeStats]:
    """Grade many completions; also say how each was decided (:class:`GradeStats`).

    Extraction and the fast paths run in this process; only the pairs left (deduplicated) go to worker
    processes, each with a hard per-item limit of ``timeout`` (+1 s grace before a kill). ``workers``
    caps the worker processes used (default: min(items needing sympy, CPUs, 8)). Safe from any thread.
    Never raises, except ``ValueError`` when the two sequences differ in length (a caller bug).
    """
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    limit = _timeout(timeout)
    n = len(completions)
    results = [False] * n
    statuses = [NO_ANSWER] * n
    jobs: dict[tuple[str, str], list[int]] = {}
    for i, (completion, gold) in enumerate(zip(completions, golds, strict=True)):
        pred = extract_answer(completion, before_think_close=before_think_close)
        if pred is None:
            continue
        try:
            decision, status, pc, gc = _decide_cheaply(pred, _gold_str(gold))
        except Exception:
            logger.debug("fast path failed", exc_info=True)
            decision, status, pc, gc = False, UNPARSEABLE, "", ""
        if decision is None:
            jobs.setdefault((pc, gc), []).append(i)
        else:
            results[i], statuses[i] = decision, status
    if jobs:
        keys = list(jobs)
        try:
            answers = sympy_many(keys, limit, workers)
        except Exception:  # defensive: the pool is written not to raise
            logger.warning("grading pool failed", exc_info=True)
            answers = [(False, UNPARSEABLE)] * len(keys)
        for key, (ok, status) in zip(keys, answers, strict=True):
            for i in jobs[key]:
                results[i], statuses[i] = ok, status
    stats = GradeStats(total=n)
    for ok, status in zip(results, statuses, strict=True):
        stats._count(status, ok)
    return results, stats


def grade_batch(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    before_think_close: bool = False,
    timeout: float = 5.0,
    workers: int | None = None,
) -> list[bool]:
    """:func:`grade_batch_with_stats` without the stats."""
    return grade_batch_with_stats(
        completions, golds, before_think_close=before_think_close, timeout=timeout, workers=workers
    )[0]
