"""One cell of the paper's ablation (``ablation/dvc.yaml``): train one variant with one seed, evaluate it.

``python -m lead.stages.ablation_cell --variant grpo --seed 0`` trains from the warm-started model on the
calibrated pool with the train stage's code (:func:`lead.training.phase.train`): ``train:`` of params.yaml with
the variant's keys (``ablation.variants.<variant>``), ``train.seed`` = the seed and ``ablation.max_steps``
steps. Then it evaluates the result on the proxy test split with the evaluate stage's code
(:func:`lead.evaluation.evaluate`, ``evaluate:`` settings, ``evaluate.seed`` = the seed). Without ``--variant``
it evaluates the warm-started model itself with that seed: the baseline every comparison is paired with.

Outputs, per cell ``<variant>-s<seed>`` (``warmstart-s<seed>`` for the baseline):

* ``<paths.reports>/ablation/cells/<cell>/`` — the evaluate stage's reports (``evaluate/metrics.json``,
  ``samples.parquet``, plots) and, written last, ``result.json``: the cell's scores
  (:func:`lead.core.claims.cell_scores`), the trained model's fingerprint, its training curve (reward, length,
  share correct and cut, AD weights' spread per step), its MLflow run, seconds;
* ``<paths.models>/ablation/<cell>/`` — the trained model; its checkpoints (the resume points of a killed cell,
  outside DVC) are in ``<paths.resume>/ablation/<cell>``.

MLflow: one run per cell (named after it; tags ``stage=ablation_cell``, ``variant``, ``seed``; its scores as
metrics) holding the cell's train and evaluate runs. The report stage (:mod:`lead.stages.ablation`) makes it a
child of the ablation's run.

Which cells rerun is DVC's decision: a cell declares the train and evaluate settings, *its own* variant's keys,
the warm-started model, the pool and the test split (each with its manifest) and the code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lead.config import EvaluateParams, ModelParams, PathParams, TrackingParams
from lead.core import claims
from lead.dag import CELL_RESULT
from lead.io.files import write_json

if TYPE_CHECKING:  # a baseline cell imports no training code (its DVC stage does not depend on it)
    from lead.training.inputs import Inputs
    from lead.training.phase import Phase


@dataclass(frozen=True)
class Cell:
    """One cell: its variant (None: the warm start, evaluated as it is) and seed, the folder of its result, and
    for a variant the RL phase that trains it and where that finds its start model and pool."""

    variant: str | None
    seed: int
    result_dir: Path
    phase: Phase | None = None
    inputs: Inputs | None = None

    @property
    def name(self) -> str:
        """The variant's name, or the baseline's (:data:`lead.core.claims.WARMSTART`)."""
        return self.variant or claims.WARMSTART


def run_cell(
    cell: Cell,
    ev: EvaluateParams,
    model: ModelParams,
    paths: PathParams,
    tracking: TrackingParams,
) -> dict[str, Any]:
    """Train ``cell``'s variant from the warm start on the pool, evaluate the result (or the warm start) with
    ``ev`` under ``paths`` (the cell's reports folder), in one MLflow run of ``tracking`` named after the cell;
    write and return its ``result.json`` (module doc)."""
    import mlflow

    from lead.evaluation import evaluate
    from lead.io.tracking import stage_run

    started = time.perf_counter()
    (cell.result_dir / CELL_RESULT).unlink(
        missing_ok=True
    )  # the report refuses a cell until its result is complete
    tags = {"variant": cell.name, "seed": str(cell.seed)}
    with stage_run(tracking, "ablation_cell", name=claims.cell_name(cell.name, cell.seed), tags=tags) as run:
        trained: dict[str, Any] = {}
        if cell.phase and cell.inputs:
            from lead.training.phase import train

            trained = train(cell.phase, cell.inputs, tracking)
        metrics = evaluate(ev, model, paths, tracking)
        scores = claims.cell_scores(metrics, ev.samples)
        mlflow.log_metrics(
            {k: float(v) for k, v in scores.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        )
    result = {
        "variant": cell.name,
        "seed": cell.seed,
        "scores": scores,
        "train": {
            k: trained.get(k) for k in ("model", "steps", "seconds", "first_reward", "last_reward", "curve")
        },
        "evaluated": ev.model,
        "mlflow_run_id": run.info.run_id,
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(cell.result_dir / CELL_RESULT, result)
    return result
