"""One cell of the paper's ablation (``ablation/dvc.yaml``): train one variant with one seed, evaluate it.

``python -m lead.stages.ablation_cell --variant grpo --seed 0``; without ``--variant`` the warm start itself is
evaluated with that seed (the baseline every comparison is paired with). What a cell runs, writes and logs is
:mod:`lead.ablation.cell`'s; :func:`cell_params` is the params it runs with.
"""

from __future__ import annotations

import argparse
from typing import Any

from lead.ablation.cell import Cell, run_cell
from lead.config import Params, ParamsError
from lead.dag import cell_output, cell_result_dir, cell_resume_dir
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
    p = cell_params(params, variant, seed)
    cell = Cell(variant, seed, cell_result_dir(params.paths, variant, seed))
    if (
        variant is not None
    ):  # only a variant imports the training code (the baseline's stage does not declare it)
        from lead.training.grpo_config import check_train_settings
        from lead.training.inputs import Inputs
        from lead.training.phase import Phase

        bound = p.curate.max_prompt_tokens
        check_train_settings(p.train, p.paths, max_prompt_tokens=bound)
        model = cell_output(params.paths, variant, seed, "model")
        phase = Phase(p.train, bound, model, cell_resume_dir(params.paths, variant, seed))
        inputs = Inputs(p.paths, p.model, warm_start=p.warmstart.enabled)
        cell = Cell(variant, seed, cell.result_dir, phase, inputs)
    return run_cell(cell, p.evaluate, p.model, p.paths, p.tracking)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", help="a name of ablation.variants; omitted: evaluate the warm start")
    parser.add_argument("--seed", type=int, required=True, help="train.seed and evaluate.seed of the cell")


def main(argv: list[str] | None = None) -> None:
    stage_main("ablation_cell", run, argv, arguments=_arguments)


if __name__ == "__main__":
    as_process(main)
