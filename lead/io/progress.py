"""Progress for long work: a rich bar on a terminal, plain timed lines in logs (DVC, CI, a Prefect worker).

Without a terminal rich draws nothing until the end, so a long training would show no progress in a
Prefect flow's logs: there each bar becomes a line whenever another tenth of the work is done or a minute
has passed, with the rate and the time left. :func:`progress_bar` is for loops; :func:`open_progress` is
what the trainers' callback (:class:`lead.training.callbacks.RichProgressCallback`, apart because it
imports transformers) drives step by step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Protocol

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
LINE_EVERY_SECONDS = 60.0  # in logs: a line at least this often ...
LINE_EVERY_SHARE = 0.1  # ... and whenever another tenth of the work is done


class Tracker(Protocol):
    """One piece of work's progress: ``update`` it as it goes, ``close`` it at the end."""

    def update(
        self, *, advance: int = 0, completed: int | None = None, status: str | None = None
    ) -> None: ...

    def close(self) -> None: ...


class _Bar:
    """A rich bar with the project's columns (the ``status`` text is shown after the count)."""

    def __init__(self, description: str, total: int) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, status="")

    def update(self, *, advance: int = 0, completed: int | None = None, status: str | None = None) -> None:
        fields = {"status": status} if status is not None else {}
        if completed is not None:
            self._progress.update(self._task, completed=completed, **fields)
        else:
            self._progress.update(self._task, advance=advance, **fields)

    def close(self) -> None:
        self._progress.stop()


class _Lines:
    """Progress as log lines: ``description: 40/100 (40 %), 2.1/s, 0:28 left, <status>``."""

    def __init__(self, description: str, total: int) -> None:
        self.description, self.total = description, total
        self.done, self.status = 0, ""
        self.started = self._last_time = time.monotonic()
        self._last_done = 0
        self._last_status = ""

    def update(self, *, advance: int = 0, completed: int | None = None, status: str | None = None) -> None:
        self.done = completed if completed is not None else self.done + advance
        self.status = status if status is not None else self.status
        now = time.monotonic()
        step = max(1, round(self.total * LINE_EVERY_SHARE))
        if self.done - self._last_done >= step or (now - self._last_time >= LINE_EVERY_SECONDS and self.done):
            self._line(now)

    def close(self) -> None:
        # a last line when the count or the status moved since the last one (a trainer logs a step's loss and
        # reward after it counted the step: the last line must show the last step's)
        if self.done != self._last_done or self.status != self._last_status or self.done == 0:
            self._line(time.monotonic())

    def _line(self, now: float) -> None:
        self._last_time, self._last_done, self._last_status = now, self.done, self.status
        # One line whatever its length: a log reader (and a grep) wants each report whole, not wrapped at 80.
        line = progress_line(self.description, self.done, self.total, now - self.started, self.status)
        console.print(line, soft_wrap=True, highlight=False)


def progress_line(description: str, done: int, total: int, elapsed: float, status: str = "") -> str:
    """One line of progress: count, share, rate and the time left at that rate.

    >>> progress_line("train", 25, 100, 50.0, "loss=0.1")
    'train: 25/100 (25 %), 0.50/s, 0:02:30 left, loss=0.1'
    """
    share = f" ({100 * done / total:.0f} %)" if total else ""
    rate = done / elapsed if elapsed > 0 else 0.0
    left = f", {_clock((total - done) / rate)} left" if rate > 0 and total >= done else ""
    tail = f", {status}" if status else ""
    return f"{description}: {done}/{total}{share}, {rate:.2f}/s{left}{tail}"


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def open_progress(description: str, total: int) -> Tracker:
    """A bar on a terminal, log lines elsewhere."""
    return _Bar(description, total) if console.is_terminal else _Lines(description, total)


@contextlib.contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[..., None]]:
    """``with progress_bar("sampling", n) as advance: advance(k, status="…")``."""
    tracker = open_progress(description, total)
    try:

        def advance(k: int = 1, status: str | None = None) -> None:
            tracker.update(advance=k, status=status)

        yield advance
    finally:
        tracker.close()
