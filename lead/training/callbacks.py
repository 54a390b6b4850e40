"""Trainer callbacks: the progress of a transformers/TRL training run (:mod:`lead.io.progress`)."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from lead.io.progress import Tracker, open_progress


class RichProgressCallback(TrainerCallback):
    """The progress of a transformers/TRL training run with the latest loss (or reward): a rich bar on a
    terminal, log lines elsewhere. Only the main process shows it (under ``accelerate launch`` every
    process runs the callbacks)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._tracker: Tracker | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._tracker = open_progress(self.description, state.max_steps)
            self._tracker.update(completed=state.global_step)  # a resumed run starts where it stopped

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._tracker is not None:
            self._tracker.update(completed=state.global_step)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if self._tracker is not None and logs:
            shown = {k: logs[k] for k in ("loss", "reward", "mean_token_accuracy") if k in logs}
            self._tracker.update(status=" ".join(f"{k}={v:.3g}" for k, v in shown.items()))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
