"""Stage ``calibrate_stage2``: the curriculum's re-calibration — pass rates of the pool under the stage-1 model.

The paper's later stage (GRPO-LEAD.md §6) trains on the problems that the stage-1 model still finds hard:
stage-1 pass rate p ≤ ``train.stage2.max_pass_rate`` (0.75), zero included (:func:`lead.core.difficulty.stage2_band`).
This stage measures p exactly as ``calibrate`` does (same ``calibrate.*`` sampling settings, the same outcome
function under stage 2's reward rules and token budget, an incremental cache of its own), but samples
``<paths.models>/train``, the stage-1 result, and keeps that band.
It is a DVC stage of its own so that ``dvc dag`` shows the loop back through calibration and DVC reruns it
exactly when the stage-1 model, the pool or these settings change.

Outputs (the same layout as ``calibrate``'s): ``<paths.curated>/calibrated_stage2.parquet`` (the whole pool,
pass rates under the stage-1 model, ``keep`` = the stage-2 band),
``<paths.reports>/calibrate_stage2/{summary.json, headline.json, histogram.csv, pass_rate_histogram.png}`` and the
manifest ``<paths.curated>/calibrate_stage2.manifest.json``; its cache is
``<paths.resume>/calibrate_stage2/cache.jsonl``.

With ``train.stage2.enabled: false`` (the default) nothing is sampled: the outputs say the stage is off
(an empty pool, a summary ``{"enabled": false}``), so that the DAG has the same shape either way.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lead.config import Params
from lead.core import difficulty
from lead.dag import manifest_path, published_model, resume_dir
from lead.io.files import atomic_path, write_json, write_text
from lead.io.fingerprint import publish, unpublish
from lead.stages import calibrate
from lead.stages._common import stage_main

STAGE = "calibrate_stage2"
OUTPUT_NAME = "calibrated_stage2.parquet"


def target_paths(params: Params) -> tuple[Path, Path]:
    """(calibrated pool, reports folder) of this stage."""
    return params.paths.curated / OUTPUT_NAME, params.paths.reports / STAGE


def target(params: Params) -> calibrate.Target:
    """Calibrate the stage-1 model (``<paths.models>/train``) and keep the stage-2 band."""
    low, high, inclusive = difficulty.stage2_band(params.train.stage2.max_pass_rate)
    output, reports = target_paths(params)
    return calibrate.Target(
        stage=STAGE,
        model=stage1_model(params),
        cache=resume_dir(params, STAGE) / calibrate.CACHE_NAME,
        output=output,
        reports=reports,
        low=low,
        high=high,
        inclusive=inclusive,
        **calibrate.reward_judge(stage2_judge_keys(params)),  # stage 2's reward decides its pass rates
    )


def stage2_judge_keys(params: Params) -> SimpleNamespace:
    """Stage 2's values of the keys that decide what its reward scores correct (:data:`calibrate.JUDGE_KEYS`:
    ``train.stage2.overrides`` over ``train``), read one by one: this stage depends on those keys only."""
    overrides = params.train.stage2.overrides
    train = params.train
    return SimpleNamespace(**{key: overrides.get(key, getattr(train, key)) for key in calibrate.JUDGE_KEYS})


def stage1_model(params: Params) -> Path:
    """``<paths.models>/train``, checked against the train stage's manifest (the model it published)."""
    return published_model(params, "train")[0]


def _disabled(params: Params) -> dict[str, Any]:
    """The outputs of a stage that is off: an empty pool, a summary and a plot saying so."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from matplotlib.figure import Figure

    t = params.paths.curated
    with atomic_path(t / OUTPUT_NAME) as tmp:
        pq.write_table(pa.table({"id": pa.array([], pa.string()), "keep": pa.array([], pa.bool_())}), tmp)
    reports = params.paths.reports / STAGE
    summary = {"enabled": False, "problems": 0, "kept": 0}
    write_json(reports / "summary.json", summary)
    write_json(reports / "headline.json", {"kept": 0})
    write_text(reports / "histogram.csv", "pass_rate,problems,kept\n")
    fig = Figure(figsize=(6.4, 1.2))
    fig.text(0.5, 0.5, "curriculum stage 2 is off (train.stage2.enabled: false)", ha="center", va="center")
    with atomic_path(reports / "pass_rate_histogram.png") as tmp:
        fig.savefig(tmp, dpi=80, format="png")
    return summary


def run(params: Params) -> dict[str, Any]:
    """Re-calibrate the pool with the stage-1 model and mark the stage-2 band (``keep``); off unless
    ``train.stage2.enabled``."""
    from lead.io.tracking import stage_run

    manifest = manifest_path(params, STAGE)
    if not params.train.stage2.enabled:
        unpublish(manifest)
        summary = _disabled(params)
        publish(manifest, STAGE, calibrate.published_files(target_paths(params)), model=None)
        return summary
    job = target(params)
    with stage_run(params, STAGE, log_sections=("calibrate",)):
        summary = calibrate.calibrate_pool(params, job, extra={"enabled": True})
        calibrate.log_to_mlflow(summary, job.reports)
    return summary


def main(argv: list[str] | None = None) -> None:
    stage_main(STAGE, run, argv)


if __name__ == "__main__":
    main()
