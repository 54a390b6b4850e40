"""The CPU proxy task: arithmetic chains whose difficulty is the number of operations.

A problem is a chain such as "Start with 7, add 3, multiply by 2, subtract 4." evaluated left to right;
its difficulty level is the number of operations (1 … ``max_ops``). Every intermediate value stays in
``[0, max_value]`` so that each step is a small, learnable fact, and errors compound with length: the
pass rate of a partly trained model falls with the level, which is what difficulty calibration and the
difficulty-aware reweighting (AD) need to see.

Solutions are reasoning traces in the same shape as a real reasoner's::

    <think>
    7+3=10
    10*2=20
    20-4=16
    </think>
    The answer is \\boxed{16}.

Warm-start traces are *verbose on purpose* (restatements, plans, redundant double-checks, a full
re-verification, a closing summary — each drawn independently, so the same problem gets traces of very
different lengths) and *occasionally wrong* (an arithmetic slip that is either corrected with "Wait" or
propagates to a wrong answer). A model fine-tuned on them learns both habits, which gives the length
reward (L) something to remove and the explicit penalty (E) something to punish.

Everything is deterministic given a seed. Train and test problems never overlap: a problem's split is a
function of its text (a hash), not of the order it was drawn in.
"""

from __future__ import annotations

import collections
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

OPERATIONS: dict[str, tuple[str, str]] = {
    # symbol: (phrase in the problem, symbol in the trace)
    "+": ("add", "+"),
    "-": ("subtract", "-"),
    "*": ("multiply by", "*"),
}

SPLITS = ("train", "test")


def apply_op(value: int, op: str, operand: int) -> int:
    """Apply one chain operation: ``value op operand``."""
    if op == "+":
        return value + operand
    if op == "-":
        return value - operand
    if op == "*":
        return value * operand
    raise ValueError(f"unknown operation {op!r}; allowed: {', '.join(OPERATIONS)}")


@dataclass(frozen=True)
class ProxyProblem:
    """One arithmetic chain: a start value and a tuple of ``(op, operand)`` steps."""

    start: int
    steps: tuple[tuple[str, int], ...]

    @property
    def level(self) -> int:
        """Difficulty level = number of operations."""
        return len(self.steps)

    @property
    def question(self) -> str:
        """The problem statement as the model sees it."""
        parts = [f"{OPERATIONS[op][0]} {operand}" for op, operand in self.steps]
        return f"Start with {self.start}, " + ", ".join(parts) + "."

    def values(self) -> list[int]:
        """Running values after each step (the last one is the answer)."""
        out, value = [], self.start
        for op, operand in self.steps:
            value = apply_op(value, op, operand)
            out.append(value)
        return out

    @property
    def answer(self) -> int:
        return self.values()[-1]

    @property
    def uid(self) -> str:
        """A stable id derived from the text, so the same problem always gets the same id."""
        return "proxy-" + hashlib.sha1(self.question.encode()).hexdigest()[:12]

    @property
    def split(self) -> str:
        """``train`` or ``test``, decided by the text's hash: the splits can never overlap."""
        return "test" if int(self.uid[-8:], 16) % 5 == 0 else "train"


def random_problem(rng: random.Random, level: int, max_value: int = 99) -> ProxyProblem:
    """Draw a chain of ``level`` operations with every running value in ``[0, max_value]``.

    Operands are 1–9; at each step the operation is drawn among those that keep the value in range
    (``+`` and ``*`` are dropped near the top, ``-`` near zero; ``*1`` is never drawn, it is a no-op).
    """
    value = rng.randint(1, 9)
    start, steps = value, []
    for _ in range(level):
        choices = []
        for op in OPERATIONS:
            for operand in range(1, 10):
                if op == "*" and operand == 1:
                    continue
                if 0 <= apply_op(value, op, operand) <= max_value:
                    choices.append((op, operand))
        op, operand = rng.choice(choices)
        steps.append((op, operand))
        value = apply_op(value, op, operand)
    return ProxyProblem(start, tuple(steps))


def generate_problems(
    n: int,
    *,
    split: str,
    seed: int,
    min_ops: int = 1,
    max_ops: int = 6,
    max_value: int = 99,
    distinct: bool = True,
) -> list[ProxyProblem]:
    """``n`` problems of ``split``, levels taken in turn from ``min_ops … max_ops``.

    With ``distinct`` (evaluation and RL sets) no problem repeats; a level that runs out of distinct
    problems (level 1 holds only about 160 per split) drops out of the rotation and the other levels fill
    its share; ``ValueError`` if all of them run out. Without it (warm-start corpora) problems are drawn
    independently and levels stay exactly balanced.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rng = random.Random(f"{seed}-{split}")
    levels = collections.deque(range(min_ops, max_ops + 1))
    seen: set[str] = set()
    out: list[ProxyProblem] = []
    while len(out) < n:
        if not levels:
            raise ValueError(
                f"only {len(out)} distinct {split} problems exist with these settings; asked for {n}"
            )
        level = levels[0]
        levels.rotate(-1)
        # Rejection sampling: the split is a hash of the text; a level is exhausted after many misses.
        for _attempt in range(2_000):
            problem = random_problem(rng, level, max_value)
            if problem.split == split and not (distinct and problem.question in seen):
                break
        else:
            levels.remove(level)
            continue
        seen.add(problem.question)
        out.append(problem)
    return out


def _habit(default: float, description: str) -> float:
    """A :class:`Verbosity` field: its default, and its description (``warmstart.verbosity``'s, in params)."""
    result: float = field(default=default, metadata={"description": description})
    return result


@dataclass(frozen=True)
class Verbosity:
    """Probabilities of each redundant habit in a warm-start trace (drawn independently).

    ``slip`` is the per-step chance of an arithmetic slip (off by 1–3); ``fix`` the chance that a slip
    is followed by "Wait, that is wrong." and the correct value instead of propagating. ``misread`` is the
    per-trace chance of a systematic wrong habit: every "subtract k" of the problem is done as "+k". The
    model learns it as a choice at the first subtraction (later steps follow the trace's own earlier lines);
    a whole-chain 0/1 reward sees it (a misread chain is wrong), so RL can move the policy off it, where the
    model's own imprecise arithmetic is not a choice it can re-weight (``bench/ABLATION.md``).

    These fields are the params keys ``warmstart.verbosity`` (:mod:`lead.config.warmstart` builds its section from
    them): each field's ``description`` is the key's description, so a habit is named, defaulted and described here
    only.
    """

    restate: float = _habit(0.5, "chance a trace opens by restating the problem")
    plan: float = _habit(0.3, "chance of an 'I will go step by step.' line")
    check: float = _habit(0.3, "per step: chance of a redundant 'Let me double-check' line")
    reverify: float = _habit(0.2, "chance of writing every step out again at the end")
    summary: float = _habit(0.5, "chance of a closing 'So the final result is ...' line")
    slip: float = _habit(0.06, "per step: chance of an arithmetic slip (off by 1 to 3)")
    fix: float = _habit(
        0.4, "chance a slip is corrected after 'Wait, that is wrong.' (else it propagates to the answer)"
    )
    misread: float = _habit(
        0.0,
        "chance a trace reads every 'subtract' as 'add': a wrong habit that the other traces contradict, a "
        "choice RL can unlearn (slips are precision, which it cannot)",
    )


def _line(a: int, op: str, b: int, c: int) -> str:
    return f"{a}{OPERATIONS[op][1]}{b}={c}"


def solution_trace(
    problem: ProxyProblem, rng: random.Random | None = None, verbosity: Verbosity | None = None
) -> str:
    """A reasoning trace ending in ``\\boxed{answer}``.

    With no ``rng`` the trace is the concise, always-correct one (one line per step). With an ``rng``
    it is a warm-start trace: verbose habits and slips drawn from ``verbosity``. A slip that is not
    fixed propagates, so the boxed answer is then wrong — on purpose.
    """
    v = verbosity or Verbosity()
    lines: list[str] = []
    draw = rng.random if rng is not None else (lambda: 1.0)  # 1.0 never passes a probability test
    if draw() < v.restate:
        lines.append(f"We start with {problem.start} and apply {problem.level} operations.")
    if draw() < v.plan:
        lines.append("I will go step by step.")
    # Drawn only when the habit is on, so that traces without it keep the random stream they always had.
    misread = v.misread > 0 and draw() < v.misread
    value, computed = problem.start, []
    for read, operand in problem.steps:
        op = "+" if misread and read == "-" else read
        true = apply_op(value, op, operand)
        result = true
        if draw() < v.slip:
            assert rng is not None
            result = true + rng.choice((-3, -2, -1, 1, 2, 3))
        lines.append(_line(value, op, operand, result))
        if result != true and draw() < v.fix:
            lines.append(f"Wait, that is wrong. {_line(value, op, operand, true)}")
            result = true
        elif draw() < v.check:
            lines.append(f"Let me double-check: {_line(value, op, operand, result)}. Yes.")
        computed.append((value, op, operand, result))
        value = result
    if draw() < v.reverify:
        lines.append("Let me verify all steps again.")
        lines.extend(_line(*step) for step in computed)
    if draw() < v.summary:
        lines.append(f"So the final result is {value}.")
    return "<think>\n" + "\n".join(lines) + "\n</think>\nThe answer is \\boxed{" + f"{value}" + "}."


def warmstart_traces(
    problems: list[ProxyProblem], *, per_problem: int, seed: int, verbosity: Verbosity | None = None
) -> Iterator[tuple[ProxyProblem, str]]:
    """``per_problem`` independent verbose traces for each problem (deterministic given ``seed``)."""
    rng = random.Random(f"{seed}-warmstart")
    for problem in problems:
        for _ in range(per_problem):
            yield problem, solution_trace(problem, rng, verbosity)
