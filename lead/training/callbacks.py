"""Trainer callbacks: the progress of a transformers/TRL training run (:mod:`lead.io.progress`), and the table of
a logged step's completions in the run's MLflow record."""

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


# The table's columns in the order a reviewer scans them (the run page's grid shows the first ones without
# scrolling, and gives each the same width): the verdict and what it was worth, then the texts.
COMPLETION_COLUMNS = ("outcome", "reward", "advantage", "gold", "tokens", "completion", "prompt")


class CompletionsTable(TrainerCallback):
    """At every log of a training step, the completions the step trained on -- prompt, completion, gold answer,
    outcome, tokens, reward, advantage; the main process's part of the batch -- as an MLflow table
    (``completions/step_NNNNN.json``), which the run page shows as a grid: a reviewer reads what the policy
    wrote and how it was scored at any step. ``rows`` returns the trainer's last batch (set after the trainer
    is built)."""

    def __init__(self) -> None:
        self.rows: Any = None

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or self.rows is None or not logs or "reward" not in logs:
            return
        rows = self.rows()
        if not rows:
            return
        import mlflow

        if mlflow.active_run() is not None:
            table = {c: rows[c] for c in COMPLETION_COLUMNS if c in rows}
            mlflow.log_table(data=table, artifact_file=f"completions/step_{state.global_step:05d}.json")
