"""Dynamic sampling inside ``LEADTrainer``: the tensors of the groups a step keeps, joined from its rounds.

The decision (which groups each process keeps, how many prompts a round draws, which ones) is pure and lives in
:mod:`lead.core.dynamic_sampling`; this module turns a :class:`~lead.core.dynamic_sampling.Plan` into the
batch TRL trains on: this process's rows of every kept group (TRL's output of each round, padded to one width:
prompts on the left, completions on the right, as TRL pads them) and the gathered arrays LEAD's rewards,
advantages and metrics are computed from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lead.core.dynamic_sampling import Pick, Plan

# TRL's outputs padded on the left (the prompt's side); every other per-token tensor is padded on the right.
LEFT = ("prompt_ids", "prompt_mask")
# Padding values where 0 is not the neutral one (token ids take the tokenizer's pad id).
PAD = {"tool_mask": 1, "importance_sampling_ratio": 1.0}


def rows_of(picks: Sequence[Pick], group_size: int) -> list[tuple[int, int]]:
    """(round, row) of every completion of the picked groups, in order.

    >>> rows_of([(0, 1), (1, 0)], 2)
    [(0, 2), (0, 3), (1, 0), (1, 1)]
    """
    return [(r, g * group_size + j) for r, g in picks for j in range(group_size)]


def _pad(tensor: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    extra = width - tensor.shape[1]
    if extra <= 0:
        return tensor
    fill = torch.full(
        (tensor.shape[0], extra, *tensor.shape[2:]), value, dtype=tensor.dtype, device=tensor.device
    )
    return torch.cat([fill, tensor] if left else [tensor, fill], dim=1)


def join_outputs(
    outputs: Sequence[dict[str, Any]], picks: Sequence[Pick], group_size: int, pad_token_id: int
) -> dict[str, Any]:
    """This process's batch from its rounds' TRL outputs: the rows of the picked groups, every per-row tensor
    padded to the rounds' widest. ``num_items_in_batch`` is left to the caller (it counts all processes).
    Anything per row that is not a tensor (images) is refused: dynamic sampling is for text."""
    rows = rows_of(picks, group_size)
    n = len(outputs[0]["completion_ids"])
    joined: dict[str, Any] = {}
    for key, first in outputs[0].items():
        if key == "num_items_in_batch":
            continue
        if not isinstance(first, torch.Tensor) or first.ndim == 0 or first.shape[0] != n:
            if isinstance(first, list | tuple) and len(first) == n:
                raise NotImplementedError(f"train.dynamic_sampling: TRL's per-row {key!r} cannot be refilled")
            joined[key] = first
            continue
        parts = [o[key] for o in outputs]
        if first.ndim >= 2:
            width = max(p.shape[1] for p in parts)
            value = pad_token_id if key.endswith("_ids") else PAD.get(key, 0)
            parts = [_pad(p, width, value, key in LEFT) for p in parts]
        joined[key] = torch.stack([parts[r][i] for r, i in rows])
    return joined


def _kept_groups(batches: Sequence[dict[str, np.ndarray]], plan: Plan, group_size: int, processes: int):
    """(round, gathered group index) of every kept group, process after process: the trained batch's order."""
    for proc, picks in enumerate(plan.picks):
        for r, i in picks:
            yield r, proc * (len(batches[r]["rewards"]) // group_size // processes) + i


def gathered_batch(
    batches: Sequence[dict[str, np.ndarray]], plan: Plan, group_size: int, processes: int
) -> dict[str, np.ndarray]:
    """The gathered arrays (outcome codes, lengths, rewards, truncation) of the kept groups, process after
    process: the order of the gathered batch TRL trains on."""
    kept = list(_kept_groups(batches, plan, group_size, processes))
    return {
        k: np.concatenate([batches[r][k][g * group_size : (g + 1) * group_size] for r, g in kept])
        for k in batches[0]
    }


def logged_advantages(
    batches: Sequence[dict[str, np.ndarray]],
    plan: Plan,
    advantages: np.ndarray,
    group_size: int,
    processes: int,
) -> list[float]:
    """The advantage of every completion the step generated, round after round in TRL's gathered order (what
    its completions table buffered): the trained ones' as computed, NaN for the ones the step did not train on."""
    out = [np.full(len(b["rewards"]), np.nan) for b in batches]
    for k, (r, g) in enumerate(_kept_groups(batches, plan, group_size, processes)):
        out[r][g * group_size : (g + 1) * group_size] = advantages[k * group_size : (k + 1) * group_size]
    return np.concatenate(out).tolist()
