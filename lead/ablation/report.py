"""The ablation's report (``ablation/dvc.yaml``, stage ``report``): every cell's result, compared claim by claim.

Reads ``<paths.reports>/ablation/cells/<cell>/result.json`` of every variant x seed of ``ablation.variants`` x
``ablation.seeds`` and of the warm start per seed (:mod:`lead.stages.ablation_cell`; a missing or unfinished
cell stops it, naming the cells to run), then writes, under ``<paths.reports>/ablation/``:

* ``ablation.json`` — ``{"variants": {name: [{"seed", "pass_at_1", "mean_length", "answered", "precision",
  "hard_pass_at_1", "cons_at_k", "truncation_rate", "len_correct", "levels"}, ...]}, "baseline": {mean scores of
  the warm start}, "baseline_runs": [...], "summary": {name: {<score>_mean, <score>_std, seeds, levels}},
  "claims": [...], "gains": {...}, "target": {...}, "notes": {...}, "settings": {...}, "seconds": ...}``;
* ``ablation.md`` — the tables and the verdict per claim (:func:`lead.reports.ablation.markdown`);
* ``metrics.json`` — the headline per variant (Pass@1, length, precision, hardest levels, gain), the
  verdicts: what ``dvc metrics show`` and ``dvc exp show`` list;
* ``ablation.png`` — Pass@1 against mean length (dots: seeds; markers: mean ± std) and Pass@1 per level;
* ``curves.png`` — the training curves per variant, mean over seeds: reward, completion length, share cut at the
  token limit, and the spread of AD's weights (what E and AD had to act on, step by step).

MLflow: one run (tag ``stage=ablation``) with the summaries as metrics and the three files as artifacts; every
cell's run becomes its child, so variants compare side by side in the MLflow UI.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lead.config import AblationParams, EvaluateParams, PathParams, TrackingParams, TrainParams
from lead.core import claims
from lead.dag import CELL_RESULT, StageError, ablation_output, cell_result_dir
from lead.io.files import write_json, write_text
from lead.reports.ablation import curves_figure, figure, markdown

HEADLINE = ("pass_at_1", "mean_length", "precision", "hard_pass_at_1")  # metrics.json's scores per variant


def claim_tag(key: str) -> str:
    """The MLflow tag of a claim's verdict: ``claim.<key>`` with what MLflow refuses in a name (``E (faithful)``'s
    parentheses) left out.

    >>> claim_tag("E (faithful)"), claim_tag("AD")
    ('claim.E faithful', 'claim.AD')
    """
    return "claim." + re.sub(r"[^\w\-. /]", "", key)


def read_cells(
    cfg: AblationParams, paths: PathParams
) -> tuple[
    dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[str], dict[str, list[list[dict[str, Any]]]]
]:
    """(variants → per-seed rows, the warm start's per-seed rows, the cells' MLflow run ids, variants → per-seed
    training curves) of the cells of ``cfg``."""
    wanted = [(None, s) for s in cfg.seeds] + [(v, s) for v in cfg.variants for s in cfg.seeds]
    missing = [
        cell_result_dir(paths, v, s)
        for v, s in wanted
        if not (cell_result_dir(paths, v, s) / CELL_RESULT).exists()
    ]
    if missing:
        names = ", ".join(p.name for p in missing)
        raise StageError(
            f"{len(missing)} of {len(wanted)} cells have no result ({names}): run them first "
            "(`dvc repro ablation/dvc.yaml`, or the `lead-ablation` flow)"
        )
    variants: dict[str, list[dict[str, Any]]] = {v: [] for v in cfg.variants}
    curves: dict[str, list[list[dict[str, Any]]]] = {v: [] for v in cfg.variants}
    baseline: list[dict[str, Any]] = []
    runs = []
    for v, s in wanted:
        result = json.loads((cell_result_dir(paths, v, s) / CELL_RESULT).read_text())
        row = {"seed": s, **result["scores"]}
        (baseline if v is None else variants[v]).append(row)
        if v is not None:
            curves[v].append(result["train"].get("curve") or [])
        runs.append(result["mlflow_run_id"])
    return variants, baseline, runs, curves


def penalty_notes(
    cfg: AblationParams, train: TrainParams, summary: dict[str, dict[str, Any]]
) -> dict[str, str]:
    """For every E claim whose variants ran: why the penalty may have nothing to act on (the outcome tables
    the two variants train with, and the answered share seen)."""
    from lead.training.presets import resolve

    def rewards(variant: str) -> tuple[float, ...]:
        return tuple(resolve(cfg.variant_train(train, variant, seed=0)).lead.reward_table().values())

    notes = {}
    for claim in claims.CLAIMS:
        if claim.score == "precision" and claim.treatment in summary and claim.control in summary:
            answered = summary[claim.treatment]["answered_mean"]
            notes[claim.key] = claims.penalty_note(rewards(claim.treatment), rewards(claim.control), answered)
    return notes


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


def report(
    cfg: AblationParams, train: TrainParams, ev: EvaluateParams, paths: PathParams, tracking: TrackingParams
) -> dict[str, Any]:
    """Read every cell of ``cfg``, compare the variants claim by claim, write the JSON, table and plots (module
    doc) under ``paths``, in an MLflow run of ``tracking``; ``train`` and ``ev`` are the settings the variants
    start from and are evaluated with (recorded, and the penalty notes' outcome tables)."""
    import mlflow

    from lead.io.tracking import stage_run

    variants, baseline_runs, run_ids, curves = read_cells(cfg, paths)
    summary = claims.summarise({claims.WARMSTART: baseline_runs, **variants})
    judged = claims.judge_claims(variants)
    gains = claims.rl_gains(variants, baseline_runs)
    goal = claims.target(summary, gains)
    notes = penalty_notes(cfg, train, summary)
    base = summary[claims.WARMSTART]
    result = {
        "variants": variants,
        "baseline": {k: base[f"{k}_mean"] for k in claims.SCORES},
        "baseline_runs": baseline_runs,
        "summary": summary,
        "claims": judged,
        "gains": gains,
        "target": goal,
        "notes": notes,
        "settings": {
            "variants": cfg.variants,
            "seeds": cfg.seeds,
            "max_steps": cfg.max_steps or train.max_steps,
            "preset": train.preset,
            "alpha": train.alpha,
            "learning_rate": train.learning_rate,
            "evaluate_samples": ev.samples,
            "evaluate_temperature": ev.temperature,
            "evaluate_max_new_tokens": ev.max_new_tokens,
        },
    }
    files = {
        name: ablation_output(paths, name) for name in ("result", "markdown", "metrics", "plot", "curves")
    }
    headline: dict[str, Any] = {name: {k: s[f"{k}_mean"] for k in HEADLINE} for name, s in summary.items()}
    for name, gain in gains.items():
        headline[name]["gain"] = gain["mean"] if gain else None
    headline["claims"] = {c["key"]: c["verdict"] for c in judged}
    headline["target_met"] = goal["met"]
    with stage_run(tracking, "ablation", logged={"ablation": cfg.as_written()}) as parent:
        write_json(files["metrics"], headline)
        write_json(files["result"], result)
        write_text(files["markdown"], markdown(summary, goal, judged, gains, notes))
        figure({claims.WARMSTART: baseline_runs, **variants}, summary).savefig(files["plot"], dpi=120)
        curves_figure(curves).savefig(files["curves"], dpi=120)
        for name, s in summary.items():
            mlflow.log_metrics(
                {
                    f"{name}.{k}": float(v)
                    for k, v in s.items()
                    if isinstance(v, int | float) and v is not None and k != "seeds"
                }
            )
        mlflow.log_metric("target_met", float(goal["met"]))
        mlflow.set_tags({claim_tag(c["key"]): c["verdict"] for c in judged})
        for path in (files["result"], files["markdown"], files["plot"], files["curves"]):
            mlflow.log_artifact(str(path))
        result["cells_in_mlflow"] = _adopt(mlflow.MlflowClient(), parent.info.run_id, run_ids)
        result["mlflow_run_id"] = parent.info.run_id
    return result
