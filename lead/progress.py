"""Rich progress bars for long work: a context manager for loops (the bar of HF/TRL trainers is
:class:`lead.training.callbacks.RichProgressCallback`, apart because it imports transformers: ~5 s that a
calibration through a generation server would otherwise pay)."""

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

console = Console(stderr=True)


def new_progress() -> Progress:
    """A rich progress display with the project's columns (a task's ``status`` field is shown after the count)."""
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
    with new_progress() as bar:
        task = bar.add_task(description, total=total, status="")

        def advance(k: int = 1, status: str | None = None) -> None:
            bar.update(task, advance=k, **({"status": status} if status is not None else {}))

        yield advance
