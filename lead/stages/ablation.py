"""The ablation's report (``ablation/dvc.yaml``, stage ``report``): every cell's result, compared claim by claim.

Reads ``<paths.reports>/ablation/cells/<cell>/result.json`` of every variant x seed of ``ablation.variants`` x
``ablation.seeds`` and of the warm start per seed (:mod:`lead.stages.ablation_cell`; a missing or unfinished
cell stops it, naming the cells to run), then writes, under ``<paths.reports>/ablation/``:

* ``ablation.json`` — ``{"variants": {name: [{"seed", "pass_at_1", "mean_length", "answered", "precision",
  "hard_pass_at_1", "cons_at_k", "truncation_rate", "len_correct", "levels"}, ...]}, "baseline": {mean scores of
  the warm start}, "baseline_runs": [...], "summary": {name: {<score>_mean, <score>_std, seeds, levels}},
  "claims": [...], "gains": {...}, "target": {...}, "notes": {...}, "settings": {...}, "seconds": ...}``;
* ``ablation.md`` — the tables and the verdict per claim (:func:`lead.core.ablation.markdown`);
* ``metrics.json`` — the headline per variant (Pass@1, length, precision, hardest levels, gain), the
  verdicts: what ``dvc metrics show`` and ``dvc exp show`` list;
* ``ablation.png`` — Pass@1 against mean length (dots: seeds; markers: mean ± std) and Pass@1 per level.

MLflow: one run (tag ``stage=ablation``) with the summaries as metrics and the three files as artifacts; every
cell's run becomes its child, so variants compare side by side in the MLflow UI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lead.config import Params
from lead.core import ablation
from lead.dag import CELL_RESULT, StageError, cell_result_dir
from lead.io.files import write_json, write_text
from lead.stages._common import stage_main

OUTPUT = "ablation.json"
METRICS = "metrics.json"  # the headline, flat, for `dvc metrics show` / `dvc exp show`
HEADLINE = ("pass_at_1", "mean_length", "precision", "hard_pass_at_1")


def out_dir(params: Params) -> Path:
    return params.paths.reports / "ablation"


def read_cells(params: Params) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[str]]:
    """(variants → per-seed rows, the warm start's per-seed rows, the cells' MLflow run ids)."""
    cfg = params.ablation
    wanted = [(None, s) for s in cfg.seeds] + [(v, s) for v in cfg.variants for s in cfg.seeds]
    missing = [
        cell_result_dir(params, v, s)
        for v, s in wanted
        if not (cell_result_dir(params, v, s) / CELL_RESULT).exists()
    ]
    if missing:
        names = ", ".join(p.name for p in missing)
        raise StageError(
            f"{len(missing)} of {len(wanted)} cells have no result ({names}): run them first "
            "(`dvc repro ablation/dvc.yaml`, or the `lead-ablation` flow)"
        )
    variants: dict[str, list[dict[str, Any]]] = {v: [] for v in cfg.variants}
    baseline: list[dict[str, Any]] = []
    runs = []
    for v, s in wanted:
        result = json.loads((cell_result_dir(params, v, s) / CELL_RESULT).read_text())
        row = {"seed": s, **result["scores"]}
        (baseline if v is None else variants[v]).append(row)
        runs.append(result["mlflow_run_id"])
    return variants, baseline, runs


def penalty_notes(params: Params, summary: dict[str, dict[str, Any]]) -> dict[str, str]:
    """For every E claim whose variants ran: why the penalty may have nothing to act on (the outcome tables
    the two variants train with, and the answered share seen)."""
    from lead.training.presets import resolve

    def outcomes(variant: str) -> tuple[float, ...]:
        lead = resolve(params.ablation.variant_train(params.train, variant, seed=0)).lead
        return (lead.correct, lead.wrong, lead.unfinished, lead.degenerate)

    notes = {}
    for claim in ablation.CLAIMS:
        if claim.score == "precision" and claim.treatment in summary and claim.control in summary:
            answered = summary[claim.treatment]["answered_mean"]
            notes[claim.key] = ablation.penalty_note(
                outcomes(claim.treatment), outcomes(claim.control), answered
            )
    return notes


def _num(value: float | None) -> float:
    return float("nan") if value is None else value  # matplotlib leaves NaN out; None breaks it


def _plot(path: Path, variants: dict[str, list[dict[str, Any]]], summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, levels) = plt.subplots(1, 2, figsize=(11, 4.4))
    for i, (name, s) in enumerate(summary.items()):
        color = "grey" if name == ablation.WARMSTART else f"C{i}"
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
            fmt="*" if name == ablation.WARMSTART else "o",
            color=color,
            markersize=10 if name == ablation.WARMSTART else 8,
            capsize=3,
            label=ablation.label(name),
        )
        bands = list(s["levels"])
        levels.errorbar(
            range(len(bands)),
            [_num(s["levels"][b]["pass_at_1_mean"]) for b in bands],
            yerr=[s["levels"][b]["pass_at_1_std"] or 0 for b in bands],
            color=color,
            marker="o",
            capsize=2,
            label=ablation.label(name),
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
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _adopt(client: Any, parent: str, runs: list[str]) -> int:
    """Make every cell's run a child of ``parent`` (those this tracking store has); how many it found."""
    from mlflow.exceptions import MlflowException

    found = 0
    for run_id in runs:
        try:
            client.set_tag(run_id, "mlflow.parentRunId", parent)
            found += 1
        except MlflowException:  # a cell restored by DVC from another machine's run: its run is elsewhere
            continue
    return found


def run(params: Params, out: Path | None = None) -> dict[str, Any]:
    """Read every cell, compare the variants claim by claim, write the JSON, table and plot (module doc)."""
    import mlflow

    from lead.io.tracking import stage_run

    cfg = params.ablation
    variants, baseline_runs, run_ids = read_cells(params)
    summary = ablation.summarise({ablation.WARMSTART: baseline_runs, **variants})
    claims = ablation.judge(variants)
    gains = ablation.rl_gains(variants, baseline_runs)
    goal = ablation.target(summary, gains)
    notes = penalty_notes(params, summary)
    base = summary[ablation.WARMSTART]
    result = {
        "variants": variants,
        "baseline": {k: base[f"{k}_mean"] for k in ablation.SCORES},
        "baseline_runs": baseline_runs,
        "summary": summary,
        "claims": claims,
        "gains": gains,
        "target": goal,
        "notes": notes,
        "settings": {
            "variants": cfg.variants,
            "seeds": cfg.seeds,
            "max_steps": cfg.max_steps or params.train.max_steps,
            "preset": params.train.preset,
            "alpha": params.train.alpha,
            "learning_rate": params.train.learning_rate,
            "evaluate_samples": params.evaluate.samples,
            "evaluate_temperature": params.evaluate.temperature,
            "evaluate_max_new_tokens": params.evaluate.max_new_tokens,
        },
    }
    folder = out_dir(params)
    out = Path(out or folder / OUTPUT)
    headline: dict[str, Any] = {name: {k: s[f"{k}_mean"] for k in HEADLINE} for name, s in summary.items()}
    for name, gain in gains.items():
        headline[name]["gain"] = gain["mean"] if gain else None
    headline["claims"] = {c["key"]: c["verdict"] for c in claims}
    headline["target_met"] = goal["met"]
    with stage_run(params, "ablation", log_sections=("ablation",)) as parent:
        write_json(folder / METRICS, headline)
        write_json(out, result)
        write_text(out.with_suffix(".md"), ablation.markdown(summary, goal, claims, gains, notes))
        _plot(out.with_suffix(".png"), {ablation.WARMSTART: baseline_runs, **variants}, summary)
        for name, s in summary.items():
            mlflow.log_metrics(
                {
                    f"{name}.{k}": float(v)
                    for k, v in s.items()
                    if isinstance(v, int | float) and v is not None and k != "seeds"
                }
            )
        mlflow.log_metric("target_met", float(goal["met"]))
        mlflow.set_tags({f"claim.{c['key']}": c["verdict"] for c in claims})
        for path in (out, out.with_suffix(".md"), out.with_suffix(".png")):
            mlflow.log_artifact(str(path))
        result["cells_in_mlflow"] = _adopt(mlflow.MlflowClient(), parent.info.run_id, run_ids)
        result["mlflow_run_id"] = parent.info.run_id
    return result


def main(argv: list[str] | None = None) -> None:
    stage_main("ablation", run, argv)


if __name__ == "__main__":
    main()
