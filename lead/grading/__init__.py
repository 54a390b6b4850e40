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

Pipeline for one (completion, gold) pair:

1. **Extraction** (:mod:`.extract`) of both sides under a named rule (``extraction``): ``"any"`` -- math-verify's
   priority list, the default of :func:`grade` and what evaluation uses -- or the reward's stricter
   ``"boxed"`` / ``"boxed_before_think"`` (the preset picks; calibration counts with the reward's rule, so a pass
   rate is the share the trainer will score correct). A gold is read the same way, so a gold
   that is a whole solution is graded by its boxed answer.
2. When string work found an answer on both sides: clean-up, then the **fast paths** (exact, no sympy) and
   the **guards**. When it did not (a prediction that states its answer in prose), math-verify's own
   extraction reads that text: the field's reference decides where the answer is.
3. **math-verify** (``parse`` both, ``verify(gold, pred)``, gold first; floats to 12 decimals, i.e. no
   approximations) in a worker process, for whatever the fast paths left.

Time limits (math-verify's own ``signal.alarm`` timeouts are switched off everywhere): :func:`grade_batch`
sends the pairs that reach math-verify to the worker pool (:mod:`.pool`); :func:`grade` /
:func:`answers_equal` on the main thread run it in-process under our own ``setitimer`` alarm, elsewhere (or
when another interval timer is running, e.g. pytest-timeout) in the pool.

Everything here is pure (no I/O; only caches of pure functions) except the worker pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from lead.grading.extract import EXTRACTIONS, Extraction, locate
from lead.grading.fastpaths import fast_compare, parse_number
from lead.grading.guards import guard
from lead.grading.normalise import (
    canon,
    clean,
    drop_assignment,
    inequality_as_interval,
    looks_like_interval,
)
from lead.grading.pool import serve_many, shutdown_worker_pool
from lead.grading.verify import FAST, NO_ANSWER, UNPARSEABLE, VERIFIED, bounded_serve, can_use_alarm

__all__ = [
    "EXTRACTIONS",
    "Extraction",
    "GradeStats",
    "Graded",
    "answers_equal",
    "extract_answer",
    "gold_problem",
    "gold_problems",
    "grade",
    "grade_batch",
    "grade_batch_detailed",
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
    n_correct: how many were graded ``True`` (an extra, not part of the sum).
    """

    total: int = 0
    fast_path: int = 0
    verified: int = 0
    no_answer: int = 0
    unparseable: int = 0
    timeouts: int = 0
    n_correct: int = 0

    def merge(self, other: GradeStats) -> GradeStats:
        """Field-wise sum of two stats (for accumulating over batches)."""
        return GradeStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def _count(self, status: str, ok: bool) -> None:
        setattr(self, status, getattr(self, status) + 1)
        self.n_correct += int(ok)


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


# One number as a model writes it: math-verify's own number rules read it best (1000,99 7,425,000 1 000).
# A decimal comma only where no list reads so (0,5 and 1000,99; 3,5 is a list).
_PLAIN_NUMBER_RE = re.compile(
    r"[-+]?(?:[1-9]\d{0,2}(?:[, ]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|(?:0|\d{4,}),\d+|\.\d+)\s*%?"
)


def _source(answer: str, cleaned: str) -> str:
    """What math-verify parses for an answer string: a plain number as written (its number rules read
    ``1000,99``, ``7,425,000``, ``1 000``), anything else as LaTeX, cleaned, in ``$...$``."""
    raw = answer.strip()
    return raw if _PLAIN_NUMBER_RE.fullmatch(raw) else f"${cleaned}$"


@dataclass(frozen=True)
class _Side:
    """One side of a pair after extraction: the answer string (None: string work found none), its clean
    form (``full``: keeping a leading ``x =``, for golds that are equations), and what math-verify parses
    (None: nothing at all to read)."""

    answer: str | None
    clean: str | None
    source: str | None
    full: str | None = None

    def as_equation(self) -> _Side:
        """This side compared with an equation: ``y = 2x + 3`` keeps its left-hand side."""
        if self.answer is None or self.full is None:
            return self
        return _Side(self.answer, self.full, _source(self.answer, self.full), self.full)


def _side(text: str, extraction: Extraction) -> _Side:
    found = locate(text, extraction)
    if found.answer is None:
        return _Side(None, None, found.source)
    if len(found.answer) > _MAX_FAST_CHARS:
        return _Side(found.answer, None, None)
    full = clean(found.answer)
    c = drop_assignment(full)
    return _Side(found.answer, c, _source(found.answer, c), full)


def _pair(pred: _Side, gold: _Side) -> tuple[_Side, _Side]:
    """The forms compared: values (``x = 5`` is 5), unless the gold is itself an equation; a chained inequality
    in one variable is read as the interval it describes when the gold is an interval (math-verify reads the
    gold ``(-2, 3)`` as a pair, which no inequality equals)."""
    if gold.full is not None and "=" in gold.full:
        return pred.as_equation(), gold.as_equation()
    if pred.clean is not None and gold.clean is not None and looks_like_interval(gold.clean):
        interval = inequality_as_interval(pred.clean)
        if interval is not None and pred.answer is not None:
            return _Side(pred.answer, interval, f"${interval}$", interval), gold
    return pred, gold


def _decide(pred: _Side, gold: _Side) -> tuple[bool | None, str]:
    """(decision, status) from string work alone; decision None = needs math-verify on the sources."""
    if gold.source is None:
        return False, UNPARSEABLE
    if pred.source is None:
        return False, NO_ANSWER if pred.answer is None else UNPARSEABLE
    if pred.clean is None or gold.clean is None or pred.answer is None or gold.answer is None:
        return None, VERIFIED  # prose on one side: math-verify's extraction reads it
    fast = fast_compare(pred.answer, gold.answer, pred.clean, gold.clean)
    if fast is not None:
        return fast, FAST
    if guard(pred.clean) is not None or guard(gold.clean) is not None:
        return False, UNPARSEABLE
    return None, VERIFIED


@dataclass(frozen=True)
class Graded:
    """One graded completion: the verdict, the answer it was judged by (``None``: no answer found), and
    how it was decided (a :class:`GradeStats` field name)."""

    correct: bool
    answer: str | None
    status: str


def _check_extraction(extraction: str) -> None:
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}; got {extraction!r}")


def _grade_one(pred: _Side, gold: _Side, timeout: float) -> Graded:
    try:
        pred, gold = _pair(pred, gold)
        decision, status = _decide(pred, gold)
        if decision is not None:
            return Graded(decision, pred.answer, status)
        request = {"pred": pred.source, "gold": gold.source}
        # Cheap, guarded answers can run here under an alarm; a raw text goes where a hang can be killed.
        if pred.clean is not None and gold.clean is not None and can_use_alarm():
            ok, status, found = bounded_serve(request, timeout)
        else:
            ok, status, found = serve_many([request], timeout, 1)[0]
        return Graded(ok, pred.answer if pred.answer is not None else found, status)
    except Exception:
        logger.debug("grading failed", exc_info=True)
        return Graded(False, pred.answer, UNPARSEABLE)


def answers_equal(pred: str, gold: str, *, timeout: float = 5.0) -> bool:
    """Whether an extracted answer equals the gold answer (both answer strings, e.g. ``"0.5"``, ``"\\frac12"``;
    taken as they are, nothing is extracted).

    The relation is math-verify's, which is not symmetric (``gold`` is parsed as the reference: e.g. the
    gold ``3 < x \\le 4`` accepts ``(3,4]`` but only an interval-looking gold accepts an inequality). For
    majority voting over equivalence classes, compare each answer with a class representative as ``gold``.
    Never raises; bounded by ``timeout`` (see the module docstring for how, per thread).
    """
    sides = []
    for text in (_gold_str(pred), _gold_str(gold)):
        full = clean(text) if text and len(text) <= _MAX_FAST_CHARS else None
        c = drop_assignment(full) if full else None
        sides.append(_Side(text or None, c, _source(text, c) if c else None, full))
    return _grade_one(sides[0], sides[1], _timeout(timeout)).correct


def extract_answer(completion: str, extraction: Extraction = "any", *, timeout: float = 5.0) -> str | None:
    """The final answer of ``completion`` under ``extraction`` (:mod:`lead.grading.extract`), or ``None``.

    Under ``"any"``, a completion whose answer string work cannot find (prose) is read by math-verify's own
    extraction, bounded by ``timeout`` in a worker process: the same answer :func:`grade` judges."""
    _check_extraction(extraction)
    side = _side(completion, extraction)
    if side.answer is not None or side.source is None:
        return side.answer
    return serve_many([{"op": "parse", "source": side.source}], _timeout(timeout), 1)[0][2]


def grade(completion: str, gold: str, *, extraction: Extraction = "any", timeout: float = 5.0) -> bool:
    """Whether the completion's final answer (``extraction`` rule; the gold is read with ``"any"``) equals
    ``gold``.

    Never raises and never hangs: ``False`` for no answer, unparseable or guarded answers, and on timeout.
    On the main thread a cheap answer's sympy step runs in-process under an alarm; elsewhere, and for a
    prediction read by math-verify's extraction, in a worker process.
    """
    _check_extraction(extraction)
    return _grade_one(_side(completion, extraction), _side(_gold_str(gold), "any"), _timeout(timeout)).correct


def grade_batch_detailed(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    extraction: Extraction = "any",
    timeout: float = 5.0,
    workers: int | None = None,
) -> tuple[list[Graded], GradeStats]:
    """Grade many completions: each verdict with the answer it was judged by and how it was decided, and
    the batch's :class:`GradeStats` (the evaluate stage records these answers: nothing is extracted twice).

    Extraction and the fast paths run in this process; only the pairs left (deduplicated) go to worker
    processes, each with a hard per-item limit of ``timeout`` (+1 s grace before a kill). ``workers``
    caps the worker processes used (default: min(items needing sympy, CPUs, 8)). Safe from any thread.
    Never raises, except ``ValueError`` when the two sequences differ in length or ``extraction`` is
    unknown (caller bugs).
    """
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    _check_extraction(extraction)
    limit = _timeout(timeout)
    graded: list[Graded | None] = [None] * len(completions)
    preds: list[_Side] = []
    jobs: dict[tuple[str, str], list[int]] = {}
    gold_sides: dict[str, _Side] = {}  # a group's golds repeat
    for i, (completion, gold) in enumerate(zip(completions, golds, strict=True)):
        pred = _side(completion, extraction)
        preds.append(pred)
        key = _gold_str(gold)
        if key not in gold_sides:
            gold_sides[key] = _side(key, "any")
        try:
            pred, gold_side = _pair(pred, gold_sides[key])
            decision, status = _decide(pred, gold_side)
        except Exception:
            logger.debug("fast path failed", exc_info=True)
            decision, status, gold_side = False, UNPARSEABLE, gold_sides[key]
        if decision is not None:
            graded[i] = Graded(decision, pred.answer, status)
        elif pred.source is not None and gold_side.source is not None:  # always so: _decide checked
            jobs.setdefault((pred.source, gold_side.source), []).append(i)
    if jobs:
        keys = list(jobs)
        try:
            answers = serve_many([{"pred": p, "gold": g} for p, g in keys], limit, workers)
        except Exception:  # defensive: the pool is written not to raise
            logger.warning("grading pool failed", exc_info=True)
            answers = [(False, UNPARSEABLE, None)] * len(keys)
        for pair, (ok, status, found) in zip(keys, answers, strict=True):
            for i in jobs[pair]:
                graded[i] = Graded(ok, preds[i].answer if preds[i].answer is not None else found, status)
    done = [g if g is not None else Graded(False, None, UNPARSEABLE) for g in graded]
    stats = GradeStats(total=len(done))
    for g in done:
        stats._count(g.status, g.correct)
    return done, stats


def grade_batch_with_stats(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    extraction: Extraction = "any",
    timeout: float = 5.0,
    workers: int | None = None,
) -> tuple[list[bool], GradeStats]:
    """:func:`grade_batch_detailed`'s verdicts and stats."""
    graded, stats = grade_batch_detailed(
        completions, golds, extraction=extraction, timeout=timeout, workers=workers
    )
    return [g.correct for g in graded], stats


def grade_batch(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    extraction: Extraction = "any",
    timeout: float = 5.0,
    workers: int | None = None,
) -> list[bool]:
    """:func:`grade_batch_detailed`'s verdicts."""
    return grade_batch_with_stats(
        completions, golds, extraction=extraction, timeout=timeout, workers=workers
    )[0]


def gold_problems(
    golds: Sequence[str], *, timeout: float = 5.0, workers: int | None = None
) -> list[str | None]:
    """For each gold, why the grader could never give a reward against it (a short reason), or None when
    it can read it: the same extraction and parse the reward makes. Curation keeps a problem only when
    this is None.

    A plain number needs no sympy; a guarded answer is refused; anything else must parse with math-verify
    (``\\frac{1}{`` does not), in worker processes, ``timeout`` each."""
    reasons: list[str | None] = [None] * len(golds)
    asks: dict[str, list[int]] = {}
    for i, gold in enumerate(golds):
        side = _side(_gold_str(gold), "any")
        if side.source is None:
            reasons[i] = "no answer in the gold"
        elif side.clean is not None and not canon(side.clean):
            reasons[i] = "empty after the grader's clean-up"
        elif side.clean is not None and parse_number(side.clean) is not None:
            continue
        elif side.clean is not None and guard(side.clean) is not None:
            reasons[i] = guard(side.clean)
        else:
            asks.setdefault(side.source, []).append(i)
    sources = list(asks)
    requests = [{"op": "parse", "source": source} for source in sources]
    for source, (ok, status, _) in zip(
        sources, serve_many(requests, _timeout(timeout), workers), strict=True
    ):
        if not ok:
            why = "math-verify timed out on it" if status == "timeouts" else "math-verify cannot parse it"
            for i in asks[source]:
                reasons[i] = why
    return reasons


def gold_problem(gold: str, *, timeout: float = 5.0) -> str | None:
    """:func:`gold_problems` for one gold."""
    return gold_problems([gold], timeout=timeout)[0]
