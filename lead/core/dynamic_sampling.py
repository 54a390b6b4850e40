"""Dynamic sampling (DAPO, Yu et al. 2025): a step trains on a full batch of informative groups.

GRPO-LEAD's reference drops the groups that carry no signal (:func:`lead.core.advantages.uninformative_groups`:
every reward <= 0, or every reward exactly 1): their advantages are 0, so a step trains on fewer groups than its
batch holds. Dynamic sampling replaces them: after a batch is scored, further prompts of the pool are generated
and scored the same way, round after round, until every process holds as many informative groups as its batch
has groups, or ``max_refill_rounds`` rounds were drawn; a process still short then fills its batch with its
first uninformative groups (advantage 0, as without refilling), and the step's metrics say so.

The decision is made on the gathered batch, so every process takes the same one: process ``p`` of ``P`` owns the
groups ``[p k, (p + 1) k)`` of each round's gathered groups (``k`` = its groups in that round), which needs each
process to hold whole groups. This module is the pure part: which groups each process keeps
(:func:`plan`), how many prompts the next round draws (:func:`round_prompts`) and where they come from
(:func:`refill_indices`: a function of the seed, the optimizer step and the round, so a resumed run draws the
same prompts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Pick = tuple[int, int]  # (round, the group's index among its process's groups in that round)


@dataclass(frozen=True)
class Plan:
    """Per process, the groups it trains on (``picks``: ``batch_groups`` of them, in round order) and how many of
    those are informative (fewer than ``batch_groups`` when the rounds ran out)."""

    picks: list[list[Pick]]
    informative: list[int]

    @property
    def full(self) -> bool:
        return all(n == len(p) for n, p in zip(self.informative, self.picks, strict=True))


def owned(flags: np.ndarray, processes: int) -> list[np.ndarray]:
    """One round's gathered per-group flags split by the process that owns each group (contiguous, equal parts).

    >>> [a.tolist() for a in owned(np.array([True, False, False, True]), 2)]
    [[True, False], [False, True]]
    """
    if len(flags) % processes:
        raise ValueError(f"{len(flags)} groups cannot be split evenly over {processes} processes")
    return list(np.asarray(flags, dtype=bool).reshape(processes, -1))


def deficits(rounds: Sequence[np.ndarray], processes: int, batch_groups: int) -> list[int]:
    """Per process, how many informative groups it still lacks after ``rounds`` (each a gathered array of
    *informative* flags, one per group).

    >>> deficits([np.array([True, False, False, False])], 2, 2)
    [1, 2]
    """
    have = np.zeros(processes, dtype=int)
    for flags in rounds:
        have += np.array([int(part.sum()) for part in owned(flags, processes)])
    return [max(batch_groups - int(n), 0) for n in have]


def plan(rounds: Sequence[np.ndarray], processes: int, batch_groups: int) -> Plan:
    """Which groups each process trains on: its informative groups in round order, the first ``batch_groups``
    of them; when there are fewer, the uninformative groups of the first round fill the rest, in order (the
    step then trains on what it has, as without refilling).

    >>> first = np.array([True, False, True, False])   # 2 processes, 2 groups each: 1 informative each
    >>> second = np.array([True, False])  # a refill round of 1 group each: only process 0 gets an informative one
    >>> p = plan([first, second], 2, 2)
    >>> p.picks, p.informative, p.full
    ([[(0, 0), (1, 0)], [(0, 0), (0, 1)]], [2, 1], False)
    """
    picks: list[list[Pick]] = []
    informative: list[int] = []
    split = [owned(flags, processes) for flags in rounds]
    for proc in range(processes):
        good = [(r, i) for r, parts in enumerate(split) for i, flag in enumerate(parts[proc]) if flag]
        chosen = good[:batch_groups]
        informative.append(len(chosen))
        if len(chosen) < batch_groups:
            fill = [(0, i) for i, flag in enumerate(split[0][proc]) if not flag]
            chosen = sorted(chosen + fill[: batch_groups - len(chosen)])
        picks.append(chosen)
    return Plan(picks, informative)


def round_prompts(deficit: int, informative_share: float, batch_groups: int) -> int:
    """Prompts per process in the next refill round: the largest deficit over the processes divided by the
    informative share seen so far this step (the expected yield), rounded up; at least 1, at most a whole batch.

    >>> round_prompts(3, 0.5, 8), round_prompts(3, 0.0, 8), round_prompts(1, 1.0, 8)
    (6, 8, 1)
    """
    if deficit <= 0:
        return 0
    expected = math.ceil(deficit / informative_share) if informative_share > 0 else batch_groups
    return max(1, min(batch_groups, expected))


def refill_indices(
    pool_size: int, count: int, *, seed: int, step: int, round_: int, exclude: frozenset[int] = frozenset()
) -> list[int]:
    """``count`` distinct pool rows for refill round ``round_`` of optimizer step ``step``: a permutation drawn
    from (``seed``, ``step``, ``round_``) alone, less ``exclude`` (the step's own prompts), so a resumed run draws
    what an uninterrupted one drew. Fewer when the pool is smaller.

    >>> refill_indices(10, 3, seed=0, step=5, round_=1) == refill_indices(10, 3, seed=0, step=5, round_=1)
    True
    >>> set(refill_indices(4, 4, seed=0, step=0, round_=1, exclude=frozenset({0, 1}))) == {2, 3}
    True
    """
    order = np.random.default_rng([seed, step, round_]).permutation(pool_size)
    return [int(i) for i in order if int(i) not in exclude][:count]
