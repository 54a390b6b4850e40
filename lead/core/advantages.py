"""Group-relative advantages: plain GRPO and GRPO-LEAD's difficulty-aware reweighting (AD).

GRPO (GRPO-LEAD.md §1) scores each completion against the other completions of its prompt's group::

    A~_i = (r_i - mean_g r) / (std_g r + eps),    unbiased (n - 1) std,  eps = 1e-6

GRPO-LEAD (§4) then rescales by how hard the prompt currently is. With rho the online pass rate, the
share of the group with reward > 0::

    w(x) = A + (B - A) / (1 + exp(k (x - rho0))),    A = 0.4, B = 1.5, k = 10, rho0 = 0.75
    A^_i = A~_i * w(rho)       if A~_i > 0     (rare successes on hard prompts are boosted)
    A^_i = A~_i * w(1 - rho)   if A~_i <= 0    (failures on easy prompts are punished harder)

Note the second weight is the logistic evaluated at 1 - rho, not 1 - w(rho). Since w > 0, reweighting
never flips a sign, but the advantages no longer sum to zero within a group.

Group filtering (§5, reference code only): groups whose rewards are all <= 0 (nothing solved) or all
exactly 1 (all solved, unshaped) carry no signal and get advantage 0, which gives the same gradient as
dropping them.

All functions are pure and vectorized: flat, group-contiguous inputs (lists, numpy arrays, torch tensors)
are reshaped to ``(n_groups, group_size)``; outputs are flat numpy float64 arrays.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from lead.core._arrays import as_1d_float, check_group_size
from lead.core.outcomes import OUTCOMES, Outcome

__all__ = ["difficulty_weight", "group_advantages", "lead_advantages", "uninformative_groups"]


def _grouped(values: Any, group_size: int) -> np.ndarray:
    """Flat rewards -> ``(n_groups, group_size)`` float64 matrix, validating the sizes."""
    array = as_1d_float(values, "rewards")
    check_group_size(len(array), group_size, "rewards")
    if not np.all(np.isfinite(array)):
        raise ValueError("rewards must be finite")
    return array.reshape(-1, group_size)


@overload
def difficulty_weight(
    rho: float, *, A: float = ..., B: float = ..., k: float = ..., rho0: float = ...
) -> float: ...
@overload
def difficulty_weight(
    rho: np.ndarray | Any, *, A: float = ..., B: float = ..., k: float = ..., rho0: float = ...
) -> np.ndarray: ...
def difficulty_weight(
    rho: float | np.ndarray | Any,
    *,
    A: float = 0.4,
    B: float = 1.5,
    k: float = 10.0,
    rho0: float = 0.75,
) -> float | np.ndarray:
    """Logistic difficulty weight ``w(x) = A + (B - A) / (1 + exp(k (x - rho0)))`` (GRPO-LEAD.md §4).

    Decreasing in x from about B (x << rho0) to about A (x >> rho0), equal to (A + B) / 2 at rho0.
    A scalar gives a float; an array (or list / tensor) gives a float64 array of the same shape.

    >>> round(difficulty_weight(0.5), 3), round(difficulty_weight(0.75), 3)
    (1.417, 0.95)
    >>> difficulty_weight([0.0, 1.0]).round(3).tolist()
    [1.499, 0.483]
    """
    if hasattr(rho, "detach"):
        rho = rho.detach().cpu().numpy()
    x = np.asarray(rho, dtype=np.float64)
    # 1 / (1 + exp(u)) == (1 - tanh(u / 2)) / 2, which cannot overflow for a steep k.
    weight = A + (B - A) * 0.5 * (1.0 - np.tanh(0.5 * k * (x - rho0)))
    return float(weight) if x.ndim == 0 else weight


def group_advantages(
    rewards: Any,
    group_size: int,
    *,
    eps: float = 1e-6,
    scale_by_std: bool = True,
) -> np.ndarray:
    """Plain GRPO advantages ``A~_i = (r_i - mean_g) / (std_g + eps)`` with the unbiased (n - 1) std.

    ``scale_by_std=False`` gives Dr. GRPO's ``r_i - mean_g``. A group of size 1 has std 0 and
    ``r_i - mean_g = 0``, so its advantage is 0 (the reference code instead used mean 0, std 1 there).

    >>> group_advantages([1, 0, 0, 2, 2, 2], 3).round(4).tolist()  # mean 1/3, std 1/sqrt(3)
    [1.1547, -0.5773, -0.5773, 0.0, 0.0, 0.0]
    """
    r = _grouped(rewards, group_size)
    # Centre on each group's first reward before averaging: a group of equal rewards then gives exactly
    # 0 (r - mean(r) can leave ~1e-16, which the division by std + eps would blow up to ~1e-10).
    shifted = r - r[:, :1]
    centred: np.ndarray = shifted - shifted.mean(axis=1, keepdims=True)
    if not scale_by_std:
        return centred.reshape(-1)
    # ddof = 1, with the denominator clamped so a group of one gives std 0 rather than 0/0 = nan.
    std = np.sqrt((centred**2).sum(axis=1, keepdims=True) / max(group_size - 1, 1))
    scaled: np.ndarray = centred / (std + eps)
    return scaled.reshape(-1)


def uninformative_groups(rewards: Any, group_size: int) -> np.ndarray:
    """Per group, whether it carries no signal: every reward <= 0 (nothing solved) or every reward exactly 1 (all
    solved, unshaped). The one definition that ``drop_uninformative`` zeroes and dynamic sampling refills
    (:mod:`lead.core.dynamic_sampling`).

    >>> uninformative_groups([0, -1, -2, 0, 1, 1, 1, 1, 1, -1, -1, -1], 4).tolist()
    [True, True, False]
    """
    r = _grouped(rewards, group_size)
    flags: np.ndarray = np.all(r <= 0, axis=1) | np.all(r == 1.0, axis=1)
    return flags


def lead_advantages(
    rewards: Any,
    group_size: int,
    *,
    eps: float = 1e-6,
    reweight: bool = True,
    drop_uninformative: bool = True,
    scale_by_std: bool = True,
) -> np.ndarray:
    """GRPO-LEAD advantages: group-normalized, then reweighted by the group's pass rate.

    With ``A~`` from :func:`group_advantages` and ``rho`` = share of the group with reward > 0::

        A^_i = A~_i * w(rho)        if A~_i > 0
        A^_i = A~_i * w(1 - rho)    if A~_i <= 0

    ``reweight=False`` returns plain ``A~``. ``drop_uninformative``: groups with all rewards <= 0 or all
    rewards exactly 1 get advantage 0 (the reference code filters them out of the batch).

    >>> # 1 of 4 correct: rho = 0.25, A~ = (1.5, -0.5, -0.5, -0.5), w(0.25) = 1.4926, w(0.75) = 0.95
    >>> lead_advantages([1, -1, -1, -1], 4).round(4).tolist()
    [2.239, -0.475, -0.475, -0.475]
    >>> lead_advantages([0, -1, -2, 0, 1, 1, 1, 1], 4).tolist()  # nothing solved / all solved
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    r = _grouped(rewards, group_size)
    adv = group_advantages(r.reshape(-1), group_size, eps=eps, scale_by_std=scale_by_std)
    adv = adv.reshape(r.shape)
    if reweight:
        rho = (r > 0).mean(axis=1, keepdims=True)
        adv = np.where(adv > 0, adv * difficulty_weight(rho), adv * difficulty_weight(1.0 - rho))
    if drop_uninformative:
        adv = np.where(uninformative_groups(r.reshape(-1), group_size)[:, None], 0.0, adv)
    return adv.reshape(-1)


def lead_metrics(batch: dict[str, np.ndarray], advantages: np.ndarray, group_size: int) -> dict[str, float]:
    """Per-step diagnostics: shares and rewards by outcome, lengths, online pass rate ρ, AD weights (mean, and
    the spread of w(ρ) over the informative groups), drops."""
    codes, lengths, rewards = batch["codes"], batch["lengths"], batch["rewards"]
    out: dict[str, float] = {}
    for i, outcome in enumerate(OUTCOMES):
        mask = codes == i
        out[f"lead/share_{outcome.value}"] = float(mask.mean())
        if mask.any():
            out[f"lead/reward_{outcome.value}"] = float(rewards[mask].mean())
    correct = codes == OUTCOMES.index(Outcome.CORRECT)
    if correct.any():
        out["lead/length_correct"] = float(lengths[correct].mean())
    if (~correct).any():
        out["lead/length_incorrect"] = float(lengths[~correct].mean())
    out["lead/length_mean"] = float(lengths.mean())
    out["lead/truncated"] = float(batch["truncated"].mean())
    rho = (rewards.reshape(-1, group_size) > 0).mean(axis=1)
    out["lead/rho_mean"] = float(rho.mean())
    bands = {"0": rho == 0, "low": (rho > 0) & (rho <= 0.5), "high": (rho > 0.5) & (rho < 1), "1": rho == 1}
    for name, inside in bands.items():
        out[f"lead/rho_{name}"] = float(inside.mean())  # a 4-bin histogram of the groups' pass rates
    out["lead/weight_positive_mean"] = float(difficulty_weight(rho).mean())
    out["lead/weight_negative_mean"] = float(difficulty_weight(1 - rho).mean())
    # AD acts only if the weights differ across the groups that carry a signal (0 < rho < 1): their spread
    # (population std, 0 with fewer than two such groups) says whether it had anything to reweight this step.
    informative = (rho > 0) & (rho < 1)
    out["lead/weight_spread"] = (
        float(difficulty_weight(rho[informative]).std()) if informative.sum() > 1 else 0.0
    )
    out["lead/dropped_groups"] = float((np.abs(advantages.reshape(-1, group_size)).sum(axis=1) == 0).mean())
    return out
