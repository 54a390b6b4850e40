"""The ablation's report for people: :mod:`lead.core.claims`'s summaries, verdicts and gains as markdown
(``reports/ablation/ablation.md``, and what ``lead ablation`` prints) and as a figure (``ablation.png``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from lead.core.claims import LENGTH_RATIO_GOAL, PASS_SLACK, RL_GAIN_GOAL, WARMSTART, label, mean_curve
from lead.core.metrics import level_order


def _cell(mean: float | None, std: float | None, digits: int) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def _diff(d: Mapping[str, Any] | None, digits: int) -> str:
    if not d:
        return "–"
    interval = f" [{d['low']:+.{digits}f}, {d['high']:+.{digits}f}]" if d.get("low") is not None else ""
    return f"{d['mean']:+.{digits}f}{interval}"


def markdown(
    summary: Mapping[str, Mapping[str, Any]],
    goal: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]] = (),
    gains: Mapping[str, Mapping[str, Any] | None] | None = None,
    notes: Mapping[str, str] | None = None,
) -> str:
    """The report: scores per variant (mean ± sample std over seeds, the warm start first), Pass@1 and
    precision per level, each claim with its paired difference [95 % interval] and verdict, RL's gain."""
    digits = {"mean_length": 1, "len_correct": 1}
    cols = ("pass_at_1", "mean_length", "answered", "precision", "hard_pass_at_1", "cons_at_k")
    lines = [
        "| variant | seeds | Pass@1 | mean length (tokens) | answered | precision | Pass@1, 2 hardest levels "
        "| Cons@k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summary.items():
        cells = " | ".join(_cell(s[f"{c}_mean"], s[f"{c}_std"], digits.get(c, 3)) for c in cols)
        lines.append(f"| {label(name)} | {s['seeds']} | {cells} |")
    bands = sorted({b for s in summary.values() for b in s.get("levels", {})}, key=level_order)
    for key, title in (("pass_at_1", "Pass@1"), ("precision", "precision")):
        if not bands:
            break
        lines += ["", f"{title} per level (mean ± std over seeds):", ""]
        lines.append("| variant | " + " | ".join(bands) + " |")
        lines.append("|---|" + "---:|" * len(bands))
        for name, s in summary.items():
            levels = s.get("levels", {})
            row = [
                _cell(levels[b][f"{key}_mean"], levels[b][f"{key}_std"], 3) if b in levels else "–"
                for b in bands
            ]
            lines.append(f"| {label(name)} | " + " | ".join(row) + " |")
    if claims:
        lines += [
            "",
            "The paper's claims, each a paired comparison over the same seeds (difference = treatment − control, "
            "[95 % t-interval]):",
            "",
            "| claim | treatment vs control | measure | difference | seeds higher | Pass@1 difference | verdict |",
            "|---|---|---|---:|---:|---:|---|",
        ]
        for c in claims:
            d = c["diff"] or {}
            lines.append(
                f"| {c['key']}: {c['statement']} | {label(c['treatment'])} vs {label(c['control'])} | {c['score']} "
                f"| {_diff(c['diff'], digits.get(c['score'], 3))} | {d.get('higher', '–')}/{d.get('n', '–')} "
                f"| {_diff(c['pass_at_1_diff'], 3)} | **{c['verdict']}** |"
            )
    if gains:
        lines += ["", "RL's gain over the warm start (Pass@1, paired by evaluation seed):", ""]
        lines += ["| variant | gain [95 % interval] |", "|---|---:|"]
        lines += [f"| {label(name)} | {_diff(g, 3)} |" for name, g in gains.items()]
    lines.append("")
    if "lead_vs_grpo_length_ratio" in goal:
        lines.append(
            f"GRPO-LEAD / GRPO mean length: **{goal['lead_vs_grpo_length_ratio']:.3f}** (goal ≤ "
            f"{LENGTH_RATIO_GOAL}: {'met' if goal['length_met'] else 'NOT met'}); Pass@1 difference "
            f"**{goal['lead_minus_grpo_pass_at_1']:+.3f}** (goal ≥ −{PASS_SLACK}: "
            f"{'met' if goal['accuracy_met'] else 'NOT met'})."
        )
    if "grpo_gain" in goal:
        lines.append(
            f"GRPO's gain over the warm start: **{goal['grpo_gain']:+.3f}** Pass@1 (goal ≥ +{RL_GAIN_GOAL}: "
            f"{'met' if goal['grpo_gain_met'] else 'NOT met'}); every RL variant above the warm start: "
            f"{'yes' if goal['every_variant_improves'] else 'NO'}."
        )
    for key, text in (notes or {}).items():
        lines += ["", f"Why {key} may not show here: {text}"]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> float:
    return float("nan") if value is None else value  # matplotlib leaves NaN out; None breaks it


def figure(variants: Mapping[str, Sequence[Mapping[str, Any]]], summary: Mapping[str, Any]) -> Figure:
    """Pass@1 against mean length (dots: seeds; markers: mean ± std) and Pass@1 per level, one colour per variant
    (the warm start grey). A figure of its own (no pyplot state): the caller saves it."""
    fig = Figure(figsize=(11, 4.4))
    ax, levels = fig.subplots(1, 2)
    for i, (name, s) in enumerate(summary.items()):
        color = "grey" if name == WARMSTART else f"C{i}"
        runs = variants[name]
        ax.scatter(
            [_num(r["mean_length"]) for r in runs],
            [_num(r["pass_at_1"]) for r in runs],
            color=color,
            alpha=0.35,
        )
        ax.errorbar(
            _num(s["mean_length_mean"]),
            _num(s["pass_at_1_mean"]),
            xerr=s["mean_length_std"] or 0,
            yerr=s["pass_at_1_std"] or 0,
            fmt="*" if name == WARMSTART else "o",
            color=color,
            markersize=10 if name == WARMSTART else 8,
            capsize=3,
            label=label(name),
        )
        bands = list(s["levels"])
        levels.errorbar(
            range(len(bands)),
            [_num(s["levels"][b]["pass_at_1_mean"]) for b in bands],
            yerr=[s["levels"][b]["pass_at_1_std"] or 0 for b in bands],
            color=color,
            marker="o",
            capsize=2,
            label=label(name),
        )
        levels.set_xticks(range(len(bands)), [b.replace("level_", "") for b in bands])
    ax.set_xlabel("mean completion length (tokens)")
    ax.set_ylabel("Pass@1 (proxy test split)")
    ax.set_title("Pass@1 vs length (dots: seeds; markers: mean ± std)", fontsize=10)
    levels.set_xlabel("difficulty level (operations)")
    levels.set_ylabel("Pass@1")
    levels.set_title("Pass@1 per level (mean ± std over seeds)", fontsize=10)
    for a in (ax, levels):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig


# The training curves of the ablation's figure: (curve key, panel title, y label).
CURVE_PANELS = (
    ("reward", "mean reward", "reward"),
    ("length", "completion length", "tokens"),
    ("truncated", "share cut at the token limit (E's third outcome)", "share"),
    ("weight_spread", "AD weights' spread over informative groups", "std of w(ρ)"),
)


def curves_figure(curves: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]]) -> Figure:
    """The training curves of every variant (:data:`CURVE_PANELS`), each the mean over its seeds, one colour per
    variant as in :func:`figure` (C1, C2, ... after the warm start). A curve a cell did not log is left out."""
    fig = Figure(figsize=(11, 7))
    axes = fig.subplots(2, 2).ravel()
    for i, (name, runs) in enumerate(curves.items(), start=1):
        for ax, (key, _, _) in zip(axes, CURVE_PANELS, strict=True):
            steps, means = mean_curve(runs, key)
            if steps:
                ax.plot(
                    steps,
                    means,
                    color=f"C{i}",
                    label=f"{label(name)} ({len(runs)} seed{'s' * (len(runs) != 1)})",
                )
    for ax, (_, title, ylabel) in zip(axes, CURVE_PANELS, strict=True):
        ax.set(xlabel="step", ylabel=ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Training curves per variant (mean over seeds)", fontsize=11)
    fig.tight_layout()
    return fig
