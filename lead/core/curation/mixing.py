"""Mixing (step 8 of :mod:`lead.core.curation`): how many problems each source keeps (:func:`quotas`, by
weight under a total) and which ones (:func:`sample_in_order`, a seeded sample in original order)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any


def quotas(available: Mapping[str, int], weights: Mapping[str, float], total: int | None) -> dict[str, int]:
    """How many problems each source keeps: all of them without ``total``; else ``total`` shared by weight,
    sources with fewer than their share keeping all theirs and the rest re-shared among the others
    (largest remainders, ties in source order).

    >>> quotas({"a": 10, "b": 100}, {"a": 1, "b": 1}, 50)
    {'a': 10, 'b': 40}
    """
    if total is None or total >= sum(available.values()):
        return dict(available)
    out = {name: 0 for name in available}
    active = [name for name in available if available[name] > 0]
    remaining = total
    while active:
        wsum = sum(weights[n] for n in active)
        full = [n for n in active if available[n] <= remaining * weights[n] / wsum]
        if not full:
            break
        for n in full:
            out[n] = available[n]
            remaining -= available[n]
            active.remove(n)
    if active:
        wsum = sum(weights[n] for n in active)
        exact = {n: remaining * weights[n] / wsum for n in active}
        for n in active:
            out[n] = math.floor(exact[n])
        order = sorted(active, key=lambda n: (-(exact[n] - out[n]), active.index(n)))
        for n in order[: remaining - sum(out[n] for n in active)]:
            out[n] += 1
    return out


def sample_in_order(items: Sequence[Any], k: int, seed: str) -> list[Any]:
    """A seeded sample of ``k`` items, in their original order."""
    if k >= len(items):
        return list(items)
    picked = sorted(random.Random(seed).sample(range(len(items)), k))
    return [items[i] for i in picked]
