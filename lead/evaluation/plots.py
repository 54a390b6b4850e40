"""The evaluation's figures: accuracy against length and the token-budget curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lead.dag import output_name
from lead.io.files import atomic_path

ACCURACY_PLOT = output_name("evaluate", "accuracy_plot")


BUDGET_PLOT = output_name("evaluate", "budget_plot")


def write_plots(out: Path, scored: dict[str, list[Any]], sweeps: dict[str, list[Any]], n: int) -> None:
    """accuracy_vs_length.png (equal-count length bins per benchmark) and budget_curve.png."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers, CI or DVC
    import matplotlib.pyplot as plt

    from lead.core.metrics import accuracy_by_length

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, problems in scored.items():
        points = accuracy_by_length([s for p in problems for s in p.samples])
        if points:
            ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="o", label=name)
    ax.set(
        xlabel="completion length (tokens, mean of an equal-count bin)",
        ylabel="share correct",
        ylim=(-0.02, 1.02),
    )
    ax.set_title("Accuracy against length")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: never over data
    with atomic_path(out / ACCURACY_PLOT) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in sweeps.items():
        if not points:
            continue
        budgets = [p.budget for p in points]
        (line,) = ax.plot(budgets, [p.pass_at_1 for p in points], marker="o", label=f"{name} Pass@1")
        ax.plot(
            budgets,
            [p.cons for p in points],
            marker="s",
            ls="--",
            color=line.get_color(),
            label=f"{name} Cons@{n}",
        )
    if ax.get_legend_handles_labels()[0]:
        ax.set_xscale("log", base=2)  # budgets usually double: evenly spaced on a log axis
        ticks = sorted({p.budget for points in sweeps.values() for p in points})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: never over data
    else:
        ax.text(
            0.5,
            0.5,
            "no budgets (evaluate.budgets is empty)",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set(xlabel="token budget", ylabel="score", ylim=(-0.02, 1.02))
    ax.set_title("Scores when generation is cut at a token budget")
    ax.grid(alpha=0.3)
    with atomic_path(out / BUDGET_PLOT) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
