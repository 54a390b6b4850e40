"""Stage ``calibrate_stage2``: the curriculum's re-calibration — pass rates of the pool under the stage-1 model.

The paper's later stage (GRPO-LEAD.md §6) trains on the problems that the stage-1 model still finds hard:
stage-1 pass rate p ≤ ``train.stage2.max_pass_rate`` (0.75), zero included (:func:`lead.core.difficulty.stage2_band`).
This stage measures p exactly as ``calibrate`` does (:mod:`lead.calibration`: same ``calibrate.*`` sampling
settings, the same outcome function under stage 2's reward rules and token budget, an incremental cache of its
own), but samples ``<paths.models>/train``, the stage-1 result, and keeps that band
(:func:`lead.calibration.stage2_target`).
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

from typing import Any

from lead.calibration import calibrate, publish_disabled, stage2_target
from lead.config import Params
from lead.stages._common import as_process, stage_main

STAGE = "calibrate_stage2"


def run(params: Params) -> dict[str, Any]:
    """Re-calibrate the pool with the stage-1 model and mark the stage-2 band (``keep``); off unless
    ``train.stage2.enabled``."""
    if not params.train.stage2.enabled:
        return publish_disabled(params.paths, STAGE)
    target = stage2_target(params.calibrate, params.train, params.model, params.paths)
    return calibrate(target, params.tracking, enabled=True)


def main(argv: list[str] | None = None) -> None:
    stage_main(STAGE, run, argv)


if __name__ == "__main__":
    as_process(main)
