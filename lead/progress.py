"""Rich progress bars for long work: a context manager for loops, a callback for HF/TRL trainers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from transformers import TrainerCallback

console = Console(stderr=True)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        # DVC and CI capture stderr: redraw rarely there, and never with cursor tricks.
        refresh_per_second=4 if console.is_terminal else 0.2,
    )


@contextlib.contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[..., None]]:
    """``with progress_bar("sampling", n) as advance: advance(k, status="…")``."""
    with _progress() as bar:
        task = bar.add_task(description, total=total, status="")

        def advance(k: int = 1, status: str | None = None) -> None:
            bar.update(task, advance=k, **({"status": status} if status is not None else {}))

        yield advance


class RichProgressCallback(TrainerCallback):
    """One rich bar for a transformers/TRL training run, showing the latest loss (or reward)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._bar: Progress | None = None
        self._task = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._bar = _progress()
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
