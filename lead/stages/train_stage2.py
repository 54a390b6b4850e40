"""Stage ``train_stage2``: the curriculum's later stage — continue from the stage-1 model on what it finds hard.

The paper (GRPO-LEAD.md §6) trains 240 more steps after stage 1 on problems with stage-1 pass rate ≤ 0.75,
with the length reward off and loops penalised at −1.5. Here: start from ``<paths.models>/train`` (checked
against the train stage's manifest), train on the rows of ``<paths.curated>/calibrated_stage2.parquet`` marked
``keep`` (the ``calibrate_stage2`` stage, which must have measured this very stage-1 model), minus stage 1's
dev split (the same rows, validated on again), with
:meth:`lead.config.TrainParams.stage2_train` (``train.*`` with ``train.stage2.overrides`` and
``train.stage2.max_steps``), in an MLflow run ``train_stage2`` (tag ``stage=train_stage2``).

Outputs: ``<paths.models>/train_stage2`` (evaluate it with ``evaluate.model: train_stage2``), checkpoints in
``<paths.resume>/train_stage2`` (resumed and reused by identity, as in :mod:`lead.training.identity`),
``<paths.reports>/train_stage2.json`` and the manifest ``<paths.models>/train_stage2.manifest.json``.

With ``train.stage2.enabled: false`` (the default) nothing is trained: the model folder holds only
``disabled.json`` and the report says ``{"enabled": false}``.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.core import difficulty
from lead.dag import manifest_path, output, published_model, resume_dir, summary_file
from lead.io.files import atomic_path, write_json
from lead.io.fingerprint import StaleOutputError, publish, verify
from lead.stages._common import as_process, stage_main
from lead.training.distributed import distributed_state, from_main
from lead.training.grpo_config import check_train_settings
from lead.training.inputs import Inputs, as_prompts, training_rows
from lead.training.phase import Phase, train_phase
from lead.training.reports import publish_training, write_headline

STAGE = "train_stage2"
POOL = "calibrate_stage2"  # the stage whose kept rows stage 2 trains on
DISABLED = "disabled.json"  # the whole content of the model folder when stage 2 is off


def stage2_rows(params: Params, exclude: set[str], stage1_fingerprint: str) -> list[dict[str, Any]]:
    """The stage-2 pool: rows ``calibrate_stage2`` kept, minus ``exclude`` (the dev split), as TRL prompts;
    refused when they were measured on another stage-1 model than the one stage 2 starts from."""
    import pandas as pd

    path = output(params.paths, POOL, "pool")
    published = verify(manifest_path(params.paths, POOL), POOL, [path])
    if published.get("model") != stage1_fingerprint:
        raise StaleOutputError(
            f"{path}: stage-1 pass rates of another model ({published.get('model')}) than "
            f"{output(params.paths, 'train', 'model')} ({stage1_fingerprint}): run the calibrate_stage2 stage again"
        )
    pool = pd.read_parquet(path)
    chosen = [r for r in pool.to_dict("records") if r["keep"] and r["id"] not in exclude]
    if not chosen:
        limit = params.train.stage2.max_pass_rate
        raise ValueError(
            f"train.stage2: no problem with a stage-1 pass rate <= {limit} left to train on "
            f"({len(pool)} re-calibrated, {int(pool['keep'].sum())} in the band, {len(exclude)} in the dev "
            "split); raise train.stage2.max_pass_rate or train stage 1 less"
        )
    return as_prompts(chosen, params.model.prompt_suffix)


def run(params: Params) -> dict[str, Any]:
    """Train curriculum stage 2 from the stage-1 model (off unless ``train.stage2.enabled``)."""
    manifest = manifest_path(params.paths, STAGE)
    model, report = output(params.paths, STAGE, "model"), summary_file(params.paths, STAGE)
    state = distributed_state()
    main = state.is_main_process
    if not params.train.stage2.enabled:
        summary = {"enabled": False}
        if main:
            with atomic_path(model) as tmp:
                tmp.mkdir()
                write_json(tmp / DISABLED, summary)
            write_json(report, summary)
            headline = write_headline(params.paths, STAGE, summary)
            publish(manifest, STAGE, [report, headline], model=None)
        return summary
    bound = params.curate.max_prompt_tokens
    # TRL's and the launch's judgement before any hashing or loading.
    check_train_settings(params.train, params.paths, max_prompt_tokens=bound)
    start, start_fingerprint = from_main(state, lambda: published_model(params.paths, "train"))
    inputs = Inputs(params.paths, params.model, warm_start=params.warmstart.enabled)
    _, dev = difficulty.split_dev(training_rows(inputs), params.train.dev_problems, params.train.seed)
    rows = stage2_rows(params, {r["id"] for r in dev}, start_fingerprint)
    phase = Phase(params.train.stage2_train(), bound, model, resume_dir(params.paths, STAGE), STAGE)
    summary = train_phase(
        phase, rows, dev, params.tracking, start=str(start), start_fingerprint=start_fingerprint
    )
    summary = {"enabled": True, **summary}
    publish_training(state, params.paths, STAGE, summary)
    summary.pop("curve", None)
    return summary


def main(argv: list[str] | None = None) -> None:
    stage_main(STAGE, run, argv)


if __name__ == "__main__":
    as_process(main)
