"""Writes into ``GRPOTrainer``'s private logging buffers: LEAD's advantages in its completions table, LEAD's
metrics in its per-step logs.

- Upstream: trl 1.16.0 (``GRPOTrainer._logs["advantages"]``, ``GRPOTrainer._metrics[mode][name]``).
- Why: TRL buffers the advantages it computed for the completions table it logs at the next step, and averages
  ``_metrics`` into every log; it has no public way to replace the first or add to the second from inside a step,
  and LEAD's advantages replace TRL's.
- Delete when: TRL takes the advantages from the batch it trains on when it logs, and offers a metrics hook.
- Contract: ``tests/contracts/test_patches.py`` (the buffers are built and filled where these writes expect).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def overwrite_logged_advantages(trainer: Any, advantages: Sequence[float]) -> None:
    """Replace the last ``len(advantages)`` advantages TRL buffered for its completions table (the whole gathered
    batch, appended by ``_generate_and_score_completions``) by ``advantages``."""
    logged = trainer._logs["advantages"]
    for i, value in enumerate(advantages, start=len(logged) - len(advantages)):
        if i >= 0:
            logged[i] = value


def record_metrics(trainer: Any, mode: str, metrics: Mapping[str, float]) -> None:
    """Add one value per metric to the step's logs of ``mode`` (``train`` or ``eval``): TRL averages them into the
    next ``log`` call, with its own metrics."""
    for name, value in metrics.items():
        trainer._metrics[mode][name].append(value)
