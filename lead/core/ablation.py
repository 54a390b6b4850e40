"""The paper's ablation, pure: which switches make each variant, how runs are summarised, the target.

Variants (all from the same warm-started model, the same calibrated pool, seeds, steps and budget):

============  ==================================================  =====================================
variant       reward                                              switches (``train.*``)
============  ==================================================  =====================================
``grpo``      0/1 accuracy, plain group-normalised advantages     L, E, AD off
``grpo_l``    + length-dependent accuracy exp(−α·z)               L
``grpo_l_ad`` + difficulty-aware advantage reweighting            L, AD
``lead``      + explicit penalty (wrong −1): GRPO-LEAD            L, E, AD
``improved``  GRPO-LEAD under the ``improved`` preset             L, E, AD, ``preset: improved``
============  ==================================================  =====================================

The target (issue: "reproduce the paper's ablation"): averaged over seeds, GRPO-LEAD's mean completion length
is at most :data:`LENGTH_RATIO_GOAL` × plain GRPO's while its Pass@1 is at least GRPO's − :data:`PASS_SLACK`,
and every RL variant raises Pass@1 over the warm-started model it starts from.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "grpo": {"length_reward": False, "penalty": False, "reweight": False},
    "grpo_l": {"length_reward": True, "penalty": False, "reweight": False},
    "grpo_l_ad": {"length_reward": True, "penalty": False, "reweight": True},
    "lead": {"length_reward": True, "penalty": True, "reweight": True},
    "improved": {"length_reward": True, "penalty": True, "reweight": True, "preset": "improved"},
}
LABELS = {
    "grpo": "GRPO",
    "grpo_l": "GRPO+L",
    "grpo_l_ad": "GRPO+L+AD",
    "lead": "GRPO-LEAD",
    "improved": "GRPO-LEAD (improved)",
}
LENGTH_RATIO_GOAL = 0.8
PASS_SLACK = 0.01
SCORES = ("pass_at_1", "mean_length", "cons_at_k", "precision", "len_correct")


def run_overrides(variant: str, seed: int, max_steps: int) -> list[str]:
    """``-S``-style overrides that turn params.yaml's train section into one ablation run."""
    switches = VARIANTS[variant]
    out = [f"train.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in switches.items()]
    return [*out, f"train.seed={seed}", f"train.max_steps={max_steps}", f"evaluate.seed={seed}"]


def run_name(variant: str, seed: int) -> str:
    return f"{variant}-s{seed}"


def scores_from_metrics(metrics: Mapping[str, Any], samples: int, benchmark: str = "proxy") -> dict[str, Any]:
    """One run's scores from evaluate's flat metrics: Pass@1 (mean over samples), mean length (tokens),
    Cons@k, precision = Pass@1 / answered share (correct among answered), mean length of correct answers."""

    def get(key: str) -> Any:
        return metrics.get(f"{benchmark}.{key}")

    pass_at_1, answered = get("pass_at_1"), get("answered")
    return {
        "pass_at_1": pass_at_1,
        "mean_length": get("len_avg"),
        "cons_at_k": get(f"cons_at_{samples}"),
        "precision": pass_at_1 / answered if pass_at_1 is not None and answered else None,
        "len_correct": get("len_correct"),
    }


def mean_spread(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for fewer than two values) of the defined values."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else None


def summarise(variants: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per variant: ``<score>_mean`` and ``<score>_std`` over its seeds, and the number of seeds."""
    out: dict[str, dict[str, Any]] = {}
    for name, runs in variants.items():
        row: dict[str, Any] = {"seeds": len(runs)}
        for score in SCORES:
            row[f"{score}_mean"], row[f"{score}_std"] = mean_spread([r.get(score) for r in runs])
        out[name] = row
    return out


def target(summary: Mapping[str, Mapping[str, Any]], baseline_pass_at_1: float | None) -> dict[str, Any]:
    """The ablation's target, checked on the seed means (see the module docstring)."""
    result: dict[str, Any] = {"length_ratio_goal": LENGTH_RATIO_GOAL, "pass_slack": PASS_SLACK}
    if "grpo" in summary and "lead" in summary:
        g, lead = summary["grpo"], summary["lead"]
        ratio = lead["mean_length_mean"] / g["mean_length_mean"]
        pass_delta = lead["pass_at_1_mean"] - g["pass_at_1_mean"]
        result.update(
            lead_vs_grpo_length_ratio=ratio,
            lead_minus_grpo_pass_at_1=pass_delta,
            length_met=ratio <= LENGTH_RATIO_GOAL,
            accuracy_met=pass_delta >= -PASS_SLACK,
        )
    if baseline_pass_at_1 is not None:
        result["warmstart_pass_at_1"] = baseline_pass_at_1
        result["every_variant_improves"] = all(
            s["pass_at_1_mean"] is not None and s["pass_at_1_mean"] > baseline_pass_at_1
            for s in summary.values()
        )
    checks = [result.get(k) for k in ("length_met", "accuracy_met", "every_variant_improves")]
    result["met"] = all(c is True for c in checks)
    return result


def _cell(mean: float | None, std: float | None, digits: int) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def markdown(
    summary: Mapping[str, Mapping[str, Any]], goal: Mapping[str, Any], baseline: Mapping[str, Any]
) -> str:
    """The result table (mean ± sample std over seeds) and the target's verdict."""
    lines = [
        "| variant | seeds | Pass@1 | mean length (tokens) | Cons@k | precision | length of correct |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    if baseline:
        lines.append(
            f"| warm start (no RL) | – | {_cell(baseline.get('pass_at_1'), None, 3)} "
            f"| {_cell(baseline.get('mean_length'), None, 1)} | {_cell(baseline.get('cons_at_k'), None, 3)} "
            f"| {_cell(baseline.get('precision'), None, 3)} | {_cell(baseline.get('len_correct'), None, 1)} |"
        )
    for name, s in summary.items():
        lines.append(
            f"| {LABELS.get(name, name)} | {s['seeds']} | {_cell(s['pass_at_1_mean'], s['pass_at_1_std'], 3)} "
            f"| {_cell(s['mean_length_mean'], s['mean_length_std'], 1)} "
            f"| {_cell(s['cons_at_k_mean'], s['cons_at_k_std'], 3)} "
            f"| {_cell(s['precision_mean'], s['precision_std'], 3)} "
            f"| {_cell(s['len_correct_mean'], s['len_correct_std'], 1)} |"
        )
    lines.append("")
    if "lead_vs_grpo_length_ratio" in goal:
        lines.append(
            f"GRPO-LEAD / GRPO mean length: **{goal['lead_vs_grpo_length_ratio']:.3f}** (goal ≤ "
            f"{LENGTH_RATIO_GOAL}: {'met' if goal['length_met'] else 'NOT met'}); Pass@1 difference "
            f"**{goal['lead_minus_grpo_pass_at_1']:+.3f}** (goal ≥ −{PASS_SLACK}: "
            f"{'met' if goal['accuracy_met'] else 'NOT met'})."
        )
    if "every_variant_improves" in goal:
        lines.append(
            f"Every RL variant above the warm start's Pass@1 ({goal['warmstart_pass_at_1']:.3f}): "
            f"{'yes' if goal['every_variant_improves'] else 'NO'}."
        )
    return "\n".join(lines) + "\n"
