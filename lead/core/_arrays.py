"""Input checks shared by the reward and advantage maths: flat float arrays, whole groups."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_1d_float(values: Any, name: str) -> np.ndarray:
    """Convert a list / numpy array / torch tensor to a flat float64 numpy array."""
    if hasattr(values, "detach"):  # torch tensor: leave the autograd graph and the device first
        values = values.detach().cpu().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat (1-D) sequence, got shape {array.shape}")
    return array


def check_group_size(n_items: int, group_size: int, what: str) -> None:
    """``group_size`` is an integer >= 1 that divides ``n_items`` (the items of ``what``) into whole groups."""
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
    if n_items % group_size:
        raise ValueError(f"{what} has {n_items} items, not divisible by group_size={group_size}")
