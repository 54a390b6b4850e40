"""What a calibration writes and publishes: the calibrated pool, its summary, headline and histogram, the MLflow run."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lead.config import PathParams, TrackingParams
from lead.core import difficulty
from lead.dag import manifest_path, output, published_outputs
from lead.io.files import atomic_path, write_json, write_text
from lead.io.fingerprint import publish, without_run_facts

if TYPE_CHECKING:
    pass
from lead.calibration.pass_rates import pool_records
from lead.calibration.target import Target

# The few figures DVC shows as this stage's metrics (`dvc exp show`, `dvc metrics diff`); summary.json keeps all.
HEADLINE_KEYS = ("kept", "kept_share", "mean_pass_rate")


# Columns added to the pool: the per-problem record (lead.core.difficulty.ProblemCalibration), then band and keep.
RECORD_COLUMNS = tuple(f.name for f in fields(difficulty.ProblemCalibration))


def calibrate_pool(target: Target, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Calibrate the pool for ``target`` (sampling only what its cache lacks),
    write the calibrated pool and the reports (``extra`` goes into the summary), publish them as one
    generation, return the summary. :func:`calibrate` is this inside the stage's MLflow run.

    ``calibrate.server`` is used for the ``calibrate`` stage only: a generation server serves the warm start,
    never the stage-1 model that ``calibrate_stage2`` samples."""
    started = time.perf_counter()
    cfg = target.cfg
    server = cfg.server if target.stage == "calibrate" else None
    manifest = manifest_path(target.paths, target.stage)
    cal = pool_records(target, server=server)
    records = cal.records
    out = cal.pool.copy()
    for name in RECORD_COLUMNS:
        out[name] = [getattr(r, name) for r in records]
    rates = [r.pass_rate for r in records]
    out["band"] = [difficulty.band_of(p, cfg.bands) for p in rates]
    out["keep"] = difficulty.band_mask(rates, target.low, target.high, target.inclusive)
    with atomic_path(target.output) as tmp:
        out.to_parquet(tmp, index=False)

    histogram = difficulty.pass_rate_histogram((r.n_correct for r in records), cfg.samples)
    by_level = _by_level(out, [r.n_correct for r in records], cfg.samples)
    kept = int(out["keep"].sum())
    summary = {
        **(extra or {}),
        "problems": len(out),
        "unique_problems": cal.unique,
        "samples_per_problem": cfg.samples,
        "keep_rule": target.rule,
        "kept": kept,
        "kept_share": round(kept / len(out), 4) if len(out) else 0.0,
        "bands": difficulty.band_counts(rates, cfg.bands),
        "histogram": {f"{p:g}": n for p, n in histogram},
        **({"by_level": by_level} if by_level else {}),
        "mean_pass_rate": round(statistics.fmean(rates), 4) if rates else 0.0,
        "mean_length": round(statistics.fmean(r.mean_length for r in records), 2) if records else 0.0,
        "sampled_problems": cal.sampled,
        "cached_problems": cal.unique - cal.sampled,
        "chunks": cal.chunks,
        "sampling_seconds": round(cal.sampling_seconds, 2),  # sampler start + sampling + grading + caching
        "sampler_start_seconds": round(cal.start_seconds, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "backend": cal.backend,
        "model": cal.model,
        "settings": cal.settings,
        "grader": asdict(cal.grader),
        "outcome_rules": asdict(target.rules),
        "max_new_tokens": target.max_new_tokens,
    }
    files = target.files
    write_json(files["summary"], without_run_facts(summary))
    write_json(files["headline"], {k: summary[k] for k in HEADLINE_KEYS})
    kept_at = [difficulty.in_band(p, target.low, target.high, target.inclusive) for p, _ in histogram]
    write_text(
        files["histogram"],
        "pass_rate,problems,kept\n"
        + "".join(f"{p:g},{n},{int(k)}\n" for (p, n), k in zip(histogram, kept_at, strict=True)),
    )
    _plot_histogram(files["histogram_plot"], histogram, kept_at, summary, by_level)
    if target.stage == "calibrate" and not kept:
        # Stage 1's pool is all train gets: stop here, where the reason is known, with the reports written
        # (the histogram shows it) and nothing published. Stage 2 keeps p = 0, and only train_stage2 knows the
        # dev split it takes out, so an empty stage-2 pool is train_stage2's to report (it names its knob).
        from lead.dag import StageError
        from lead.io.summaries import empty_pool_message

        band = (target.low, target.high, target.inclusive)
        why = empty_pool_message(
            [r.n_correct for r in records],
            cfg.samples,
            band,
            reports=target.paths.reports,
            base=target.base,
        )
        raise StageError(f"{why} (histogram: {files['histogram']})")
    outputs = published_outputs(target.paths, target.stage)
    publish(manifest, target.stage, outputs, model=cal.fingerprint, settings=cal.settings)
    return summary


def _by_level(pool: Any, correct: list[int], k: int) -> dict[str, dict[str, Any]]:
    """Per difficulty level of the pool (its ``level`` column, when every problem has one): problems, kept,
    mean pass rate and the pass-rate histogram -- whether the keep band holds the hard problems AD weights up."""
    if "level" not in pool or pool["level"].isna().any():
        return {}
    histograms = difficulty.pass_rate_histogram_by_level(pool["level"], correct, k)
    out = {}
    for level, histogram in histograms.items():
        rows = pool[pool["level"].astype(str) == level]
        out[level] = {
            "problems": len(rows),
            "kept": int(rows["keep"].sum()),
            "mean_pass_rate": round(float(rows["pass_rate"].mean()), 4),
            "histogram": {f"{p:g}": n for p, n in histogram},
        }
    return out


def _plot_histogram(
    path: Path,
    histogram: list[tuple[float, int]],
    kept: list[bool],
    summary: dict[str, Any],
    by_level: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Bar chart of problems per pass rate c/k, stacked by difficulty level when the pool has levels; kept bars
    opaque, dropped ones faded (Agg, no pyplot state)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    k = summary["samples_per_problem"]
    rates = [p for p, _ in histogram]
    if by_level:
        colours = colormaps["viridis"].resampled(len(by_level))
        bottom = [0] * len(rates)
        for i, (level, row) in enumerate(by_level.items()):
            counts = list(row["histogram"].values())
            bars = ax.bar(
                rates, counts, width=0.8 / k, bottom=bottom, color=colours(i), label=f"level {level}"
            )
            for bar, keep in zip(bars, kept, strict=True):
                bar.set_alpha(1.0 if keep else 0.3)
            bottom = [b + n for b, n in zip(bottom, counts, strict=True)]
        ax.legend(fontsize=7, ncols=2, title="faded: dropped", title_fontsize=7)
    else:
        ax.bar(
            rates,
            [n for _, n in histogram],
            width=0.8 / k,
            color=["tab:blue" if keep else "lightgrey" for keep in kept],
            edgecolor="black",
            linewidth=0.5,
        )
    ax.set_xlabel(f"pass rate (correct / {k} samples)")
    ax.set_ylabel("problems")
    ax.set_xlim(-0.6 / k, 1 + 0.6 / k)
    ax.set_title(
        f"{summary['problems']} problems; kept {summary['kept']} ({summary['keep_rule']})", fontsize=10
    )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")


def log_to_mlflow(summary: dict[str, Any], target: Target) -> None:
    """The summary's numbers as metrics, its model and settings as tags, the reports as artifacts."""
    import mlflow

    numeric = {
        name: float(summary[name])
        for name in (
            "problems",
            "kept",
            "kept_share",
            "mean_pass_rate",
            "mean_length",
            "sampled_problems",
            "cached_problems",
            "sampling_seconds",
            "seconds",
        )
    }
    numeric.update({f"grader.{name}": float(v) for name, v in summary["grader"].items()})
    numeric.update(
        {
            f"level_{level}.{name}": float(row[name])
            for level, row in summary.get("by_level", {}).items()
            for name in ("kept", "mean_pass_rate")
        }
    )
    mlflow.log_metrics(numeric)
    mlflow.set_tags(
        {"model": summary["model"], "backend": summary["backend"], "settings": summary["settings"]}
    )
    for name in ("summary", "headline", "histogram", "histogram_plot"):
        mlflow.log_artifact(str(target.files[name]), artifact_path=target.reports.name)


def calibrate(target: Target, tracking: TrackingParams, **extra: Any) -> dict[str, Any]:
    """:func:`calibrate_pool` inside an MLflow run of ``target.stage`` in ``tracking``'s store (its ``calibrate``
    params logged), the summary logged to it."""
    from lead.io.tracking import stage_run

    logged = {"calibrate": target.cfg.as_written()}
    with stage_run(tracking, target.stage, logged=logged):
        summary = calibrate_pool(target, extra=extra)
        log_to_mlflow(summary, target)
    return summary


def publish_disabled(paths: PathParams, stage: str = "calibrate_stage2") -> dict[str, Any]:
    """The outputs of ``calibrate_stage2`` when the curriculum's stage 2 is off: an empty pool, a summary and a
    plot saying so, published (the DAG has the same shape either way); the summary."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from matplotlib.figure import Figure

    with atomic_path(output(paths, stage, "pool")) as tmp:
        pq.write_table(pa.table({"id": pa.array([], pa.string()), "keep": pa.array([], pa.bool_())}), tmp)
    summary = {"enabled": False, "problems": 0, "kept": 0}
    write_json(output(paths, stage, "summary"), summary)
    write_json(output(paths, stage, "headline"), {"kept": 0})
    write_text(output(paths, stage, "histogram"), "pass_rate,problems,kept\n")
    fig = Figure(figsize=(6.4, 1.2))
    fig.text(0.5, 0.5, "curriculum stage 2 is off (train.stage2.enabled: false)", ha="center", va="center")
    with atomic_path(output(paths, stage, "histogram_plot")) as tmp:
        fig.savefig(tmp, dpi=80, format="png")
    publish(manifest_path(paths, stage), stage, published_outputs(paths, stage), model=None)
    return summary
