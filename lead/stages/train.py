"""Stage ``train``: GRPO-LEAD reinforcement learning (:mod:`lead.training`: ``LEADTrainer`` on TRL's GRPOTrainer).

Inputs: the starting model (``<paths.models>/warmstart``, or ``model.base`` when the warm start is off) and
the training pool — ``<paths.curated>/calibrated.parquet`` (rows with ``keep``) when calibration ran, else
``<paths.curated>/train.parquet`` (:mod:`lead.training.inputs`).

Outputs: ``<paths.models>/train`` (final model, Hugging Face layout, for evaluate and register),
``<paths.reports>/train.json`` (summary), the training curves, per-step metrics in the stage's MLflow run.
``<paths.models>/train.manifest.json`` is written last (:func:`lead.io.fingerprint.publish`): the model's content
fingerprint, the MLflow run and the run's identity, so that register can tell which run made the model it holds.

Checkpoints go to ``<paths.resume>/train`` every ``train.save_steps`` steps. Started again with the same run
identity (:func:`lead.training.identity.run_identity`), a killed run (even by SIGKILL) resumes from its last
complete checkpoint into the same MLflow run, losing at most one checkpoint interval; a finished one is reused as
a whole. Any other identity deletes the checkpoints and trains afresh in a new MLflow run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lead.config import Params
from lead.dag import output, resume_dir
from lead.stages._common import as_process, stage_main
from lead.training.distributed import distributed_state
from lead.training.grpo_config import check_train_settings
from lead.training.inputs import Inputs
from lead.training.phase import Phase, train
from lead.training.reports import publish_training

STAGE = "train"


def model_dir(params: Params) -> Path:
    return output(params.paths, STAGE, "model")


def run(params: Params) -> dict[str, Any]:
    """Train with GRPO-LEAD from the warm-started model and save the final model to ``<paths.models>/train``.
    Curriculum stage 2 is the next DVC stage (``train_stage2``)."""
    bound = params.curate.max_prompt_tokens
    # Before any work: the settings only TRL or the launch can judge.
    check_train_settings(params.train, params.paths, max_prompt_tokens=bound)
    state = distributed_state()
    phase = Phase(params.train, bound, model_dir(params), resume_dir(params.paths, STAGE), STAGE)
    inputs = Inputs(params.paths, params.model, warm_start=params.warmstart.enabled)
    summary = train(phase, inputs, params.tracking)
    publish_training(state, params.paths, STAGE, summary, curves=True)
    return {k: v for k, v in summary.items() if k != "curve"}


def main(argv: list[str] | None = None) -> None:
    stage_main(STAGE, run, argv)


if __name__ == "__main__":
    as_process(main)
