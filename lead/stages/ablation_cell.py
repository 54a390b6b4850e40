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
  (:func:`lead.core.ablation.cell_scores`), the trained model's fingerprint, its training curve (reward, length,
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

import argparse
import time
from typing import Any

from lead.config import Params, ParamsError
from lead.core import ablation
from lead.dag import CELL_RESULT, cell_output, cell_result_dir, cell_resume_dir
from lead.io.files import write_json
from lead.stages._common import as_process, stage_main


def cell_params(params: Params, variant: str | None, seed: int) -> Params:
    """The params one cell runs with: the proxy only, the cell's seed and reports folder; for a variant, its
    train settings (:meth:`lead.config.AblationParams.variant_train`) and its model as the one evaluated."""
    p = params.model_copy(deep=True)
    p.evaluate.benchmarks = ["proxy"]
    p.evaluate.seed = seed
    p.evaluate.repeats = 1
    p.paths.reports = cell_result_dir(params.paths, variant, seed)
    if variant is None:
        p.evaluate.model = "warmstart"
    else:
        if variant not in params.ablation.variants:
            names = ", ".join(params.ablation.variants)
            raise ParamsError(f"--variant {variant!r}: not in ablation.variants ({names})")
        p.train = params.ablation.variant_train(params.train, variant, seed)
        p.evaluate.model = str(cell_output(params.paths, variant, seed, "model"))
    return p


def run(params: Params, variant: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Train variant ``variant`` with ``seed`` (none: the warm start as it is) and evaluate it on the proxy."""
    import mlflow

    from lead.evaluation import evaluate
    from lead.io.tracking import stage_run
    from lead.training.grpo_config import check_train_settings
    from lead.training.inputs import Inputs
    from lead.training.phase import Phase, train

    started = time.perf_counter()
    p = cell_params(params, variant, seed)
    name = variant or ablation.WARMSTART
    out = cell_result_dir(params.paths, variant, seed)
    (out / CELL_RESULT).unlink(missing_ok=True)  # the report refuses a cell until its result is complete
    tags = {"variant": name, "seed": str(seed)}
    with stage_run(p.tracking, "ablation_cell", name=ablation.cell_name(name, seed), tags=tags) as run:
        trained: dict[str, Any] = {}
        if variant is not None:
            bound = p.curate.max_prompt_tokens
            check_train_settings(p.train, p.paths, max_prompt_tokens=bound)
            model = cell_output(params.paths, variant, seed, "model")
            phase = Phase(p.train, bound, model, cell_resume_dir(params.paths, variant, seed))
            trained = train(phase, Inputs(p.paths, p.model, warm_start=p.warmstart.enabled), p.tracking)
        metrics = evaluate(p.evaluate, p.model, p.paths, p.tracking)
        scores = ablation.cell_scores(metrics, p.evaluate.samples)
        mlflow.log_metrics(
            {k: float(v) for k, v in scores.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        )
    result = {
        "variant": name,
        "seed": seed,
        "scores": scores,
        "train": {
            k: trained.get(k) for k in ("model", "steps", "seconds", "first_reward", "last_reward", "curve")
        },
        "evaluated": p.evaluate.model,
        "mlflow_run_id": run.info.run_id,
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(out / CELL_RESULT, result)
    return result


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", help="a name of ablation.variants; omitted: evaluate the warm start")
    parser.add_argument("--seed", type=int, required=True, help="train.seed and evaluate.seed of the cell")


def main(argv: list[str] | None = None) -> None:
    stage_main("ablation_cell", run, argv, arguments=_arguments)


if __name__ == "__main__":
    as_process(main)
