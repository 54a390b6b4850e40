"""``lead ablation``: the paper's ablation on the proxy, in one command (not a DVC stage: a comparison job).

For every variant of ``ablation.variants`` (:mod:`lead.core.ablation`) and seed of ``ablation.seeds``, train from
the same warm-started model on the same calibrated pool with the train stage (``train.run``; the variant's
switches, ``train.seed``, ``ablation.max_steps`` steps), then evaluate the result on the proxy test split with
the evaluate stage (``evaluate.*`` settings, ``evaluate.seed`` = the run's seed). The warm-started model is
evaluated too (one repeat per seed), as the baseline every variant must beat.

Outputs (``--out FILE``, default ``<paths.reports>/ablation/ablation.json``):

* ``FILE`` — ``{"variants": {name: [{"seed", "pass_at_1", "mean_length", "cons_at_k", "precision",
  "len_correct"}, ...]}, "summary": {name: {<score>_mean, <score>_std, seeds}}, "baseline": {...},
  "target": {...}, "settings": {...}, "seconds": ...}``;
* ``FILE`` with suffix ``.md`` (the table) and ``.png`` (Pass@1 against mean length, per seed and mean);
* per run, under ``runs/<variant>-s<seed>/`` beside FILE: ``result.json`` and the stages' reports; the
  models under ``<paths.models>/ablation/``.

MLflow: one parent run (tag ``stage=ablation``), one child run per variant and seed (tags ``variant``,
``seed``; its scores as metrics) holding that run's train and evaluate runs, so variants compare side by
side in the MLflow UI.

Interrupted? Run it again: finished runs are reused (``result.json``, keyed by a fingerprint of the run's
train and evaluate params and the *content* of the starting model, the pool, the test split and the code:
:func:`inputs_fingerprint`), an unfinished training resumes from its checkpoints.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lead.config import Params, apply_overrides, parse_params
from lead.core import ablation
from lead.io.files import write_json, write_text
from lead.io.fingerprint import code_fingerprint, file_fingerprint, model_fingerprint, value_fingerprint


def _with(params: Params, overrides: list[str]) -> Params:
    data = apply_overrides(params.model_dump(mode="json", by_alias=True), overrides)
    return parse_params(data, "ablation run")


# The code a cell's evaluation runs (its training code is train.TRAINING_CODE).
EVALUATION_CODE = ("lead.core.evaluation", "lead.io.benchmarks", "lead.stages.evaluate")


def inputs_fingerprint(params: Params) -> str:
    """What every cell starts from and runs, by content: the start model, the training pool, the proxy test
    split, the training and evaluation code and the libraries that run it."""
    from lead.stages import train

    return value_fingerprint(
        {
            "start": model_fingerprint(train.start_model(params)),
            "pool": file_fingerprint(train.pool_source(params)[1]),
            "test": file_fingerprint(params.paths.curated / "test.parquet"),
            "code": code_fingerprint((*train.TRAINING_CODE, *EVALUATION_CODE)),
            "libraries": train.library_versions(),
        }
    )


def _fingerprint(params: Params, inputs: str) -> str:
    """A cell's key: its train and evaluate settings and :func:`inputs_fingerprint` (never a path)."""
    return value_fingerprint(
        {
            "train": params.train.model_dump(mode="json"),
            "evaluate": params.evaluate.model_dump(mode="json", exclude={"model"}),
            "inputs": inputs,
        }
    )


def _cached(path: Path, fingerprint: str) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return data if data.get("fingerprint") == fingerprint else None


def _plot(path: Path, variants: dict[str, list[dict[str, Any]]], summary, baseline: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, (name, runs) in enumerate(variants.items()):
        color = f"C{i}"
        ax.scatter([r["mean_length"] for r in runs], [r["pass_at_1"] for r in runs], color=color, alpha=0.35)
        s = summary[name]
        ax.errorbar(
            s["mean_length_mean"],
            s["pass_at_1_mean"],
            xerr=s["mean_length_std"] or 0,
            yerr=s["pass_at_1_std"] or 0,
            fmt="o",
            color=color,
            markersize=8,
            capsize=3,
            label=ablation.LABELS.get(name, name),
        )
    if baseline.get("pass_at_1") is not None:
        ax.scatter(
            baseline["mean_length"],
            baseline["pass_at_1"],
            marker="*",
            s=160,
            color="grey",
            label="warm start",
        )
    ax.set_xlabel("mean completion length (tokens)")
    ax.set_ylabel("Pass@1 (proxy test split)")
    ax.set_title("Ablation: Pass@1 vs length (dots: seeds; markers: mean ± std)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(params: Params, out: Path | None = None) -> dict[str, Any]:
    """Train and evaluate every variant x seed (reusing finished runs); write the JSON, table and plot."""
    import mlflow
    from rich.console import Console

    from lead.io.tracking import stage_run
    from lead.stages import evaluate, train

    console = Console()
    started = time.perf_counter()
    cfg = params.ablation
    steps = cfg.max_steps or params.train.max_steps
    out = Path(out or params.paths.reports / "ablation" / "ablation.json")
    runs_dir = out.parent / "runs"
    models = params.paths.models / "ablation"
    start = train.start_model(params)
    inputs = inputs_fingerprint(params)
    samples = params.evaluate.samples
    base = [f"evaluate.benchmarks={json.dumps(['proxy'])}"]
    variants: dict[str, list[dict[str, Any]]] = {v: [] for v in cfg.variants}
    total = len(cfg.variants) * len(cfg.seeds)

    with stage_run(params, "ablation", log_sections=("ablation", "train", "evaluate")) as parent:
        # The baseline: the warm-started model, one evaluation repeat per seed.
        p = _with(
            params,
            [
                *base,
                f"paths.reports={runs_dir / 'warmstart'}",
                f"evaluate.model={start}",
                f"evaluate.seed={cfg.seeds[0]}",
                f"evaluate.repeats={len(cfg.seeds)}",
            ],
        )
        key = _fingerprint(p, inputs)
        done = _cached(runs_dir / "warmstart" / "result.json", key)
        if done is None:
            console.rule(f"ablation: the warm-started model ({len(cfg.seeds)} evaluation seeds)")
            with mlflow.start_run(run_name="warmstart", nested=True, tags={"stage": "ablation-run"}):
                scores = ablation.scores_from_metrics(evaluate.run(p), samples)
            done = {"fingerprint": key, "scores": scores}
            write_json(runs_dir / "warmstart" / "result.json", done)
        baseline = done["scores"]

        for i, variant in enumerate(cfg.variants):
            for seed in cfg.seeds:
                name = ablation.run_name(variant, seed)
                folder = runs_dir / name
                p = _with(
                    params, [*base, *ablation.run_overrides(variant, seed, steps), f"paths.reports={folder}"]
                )
                key = _fingerprint(p, inputs)
                done = _cached(folder / "result.json", key)
                if done is None:
                    index = i * len(cfg.seeds) + cfg.seeds.index(seed) + 1
                    console.rule(f"ablation {index}/{total}: {ablation.LABELS[variant]}, seed {seed}")
                    tags = {"stage": "ablation-run", "variant": variant, "seed": str(seed)}
                    with mlflow.start_run(run_name=name, nested=True, tags=tags):
                        trained = train.run(p, output=models / name)
                        metrics = evaluate.run(_with(p, [f"evaluate.model={models / name}"]))
                        scores = ablation.scores_from_metrics(metrics, samples)
                        mlflow.log_metrics({k: float(v) for k, v in scores.items() if v is not None})
                    done = {"fingerprint": key, "scores": scores, "train_seconds": trained["seconds"]}
                    write_json(folder / "result.json", done)
                variants[variant].append({"seed": seed, **done["scores"]})

        summary = ablation.summarise(variants)
        goal = ablation.target(summary, baseline.get("pass_at_1"))
        result = {
            "variants": variants,
            "summary": summary,
            "baseline": baseline,
            "target": goal,
            "settings": {
                "seeds": cfg.seeds,
                "max_steps": steps,
                "preset": params.train.preset,
                "alpha": params.train.alpha,
                "evaluate_samples": samples,
                "evaluate_temperature": params.evaluate.temperature,
                "start_model": start,
            },
            "seconds": round(time.perf_counter() - started, 1),
        }
        write_json(out, result)
        write_text(out.with_suffix(".md"), ablation.markdown(summary, goal, baseline))
        _plot(out.with_suffix(".png"), variants, summary, baseline)
        for name, s in summary.items():
            mlflow.log_metrics(
                {f"{name}.{k}": float(v) for k, v in s.items() if v is not None and k != "seeds"}
            )
        mlflow.log_metric("target_met", float(goal["met"]))
        for path in (out, out.with_suffix(".md"), out.with_suffix(".png")):
            mlflow.log_artifact(str(path))
        result["mlflow_run_id"] = parent.info.run_id
    return result
