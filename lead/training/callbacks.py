"""Trainer callbacks: a rich progress bar for transformers/TRL training runs."""

from __future__ import annotations

from rich.progress import Progress
from transformers import TrainerCallback

from lead.progress import new_progress


class RichProgressCallback(TrainerCallback):
    """One rich bar for a transformers/TRL training run, showing the latest loss (or reward)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._bar: Progress | None = None
        self._task = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._bar = new_progress()
        self._bar.start()
        self._task = self._bar.add_task(self.description, total=state.max_steps, status="")

    def on_step_end(self, args, state, control, **kwargs):
        if self._bar is not None:
            self._bar.update(self._task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._bar is not None and logs:
            shown = {k: logs[k] for k in ("loss", "reward", "mean_token_accuracy") if k in logs}
            self._bar.update(self._task, status=" ".join(f"{k}={v:.3g}" for k, v in shown.items()))

    def on_train_end(self, args, state, control, **kwargs):
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
