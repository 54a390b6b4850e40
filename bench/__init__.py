"""Benchmarks (not tests: CI never runs them): measured speed and accuracy of the parts that dominate cost.

Every module ``bench/<name>.py`` other than this one and ``__main__`` defines ``run() -> Result``.
``python -m bench`` (``make bench``) runs them all, prints each result and updates ``bench/RESULTS.md``;
``python -m bench grader`` runs only the named ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field


@dataclass
class Result:
    """What one benchmark measured: a markdown body, its headline ratio and the goal the ratio is held to."""

    name: str
    title: str
    ratio: float  # the headline figure, e.g. pairs/s of ours ÷ pairs/s of the reference
    ratio_label: str  # what the ratio divides, in words
    goal: str  # what the ratio should reach, in words
    met: bool | None  # None: no goal to meet, only a figure to report
    body: list[str] = field(default_factory=list)  # markdown lines: tables, notes

    def headline(self) -> str:
        verdict = {True: "goal met", False: "goal NOT met", None: "no pass/fail goal"}[self.met]
        return f"{self.title}: {self.ratio_label} = {self.ratio:.2f}x (goal: {self.goal}; {verdict})"


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    # A `|` inside a cell (|x| in a gold answer) would end the cell: escape it.
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]


def alternating(names: Sequence[str], rounds: int) -> Iterator[str]:
    """``names`` ``rounds`` times, every other round reversed (A B, B A, A B, ...): a drift in machine load
    during the benchmark then hits every setting alike."""
    for r in range(rounds):
        yield from names if r % 2 == 0 else reversed(names)
