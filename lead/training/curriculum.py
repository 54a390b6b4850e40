"""Curriculum stage 2 (the ``train_stage2`` stage) — continue from the stage-1 model on what it finds hard.

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

from lead.config import PathParams, TrackingParams, TrainParams
from lead.core import difficulty
from lead.dag import manifest_path, output, published_model, resume_dir, summary_file
from lead.io.files import atomic_path, write_json
from lead.io.fingerprint import StaleOutputError, publish, verify
from lead.training.distributed import distributed_state, from_main
from lead.training.inputs import Inputs, as_prompts, training_rows
from lead.training.phase import Phase, train_phase
from lead.training.reports import publish_training, write_headline

STAGE = "train_stage2"
POOL = "calibrate_stage2"  # the stage whose kept rows stage 2 trains on
DISABLED = "disabled.json"  # the whole content of the model folder when stage 2 is off


def stage2_rows(
    paths: PathParams, suffix: str, max_pass_rate: float, exclude: set[str], stage1_fingerprint: str
) -> list[dict[str, Any]]:
    """The stage-2 pool: rows ``calibrate_stage2`` kept (pass rate <= ``max_pass_rate``), minus ``exclude`` (the
    dev split), as TRL prompts ending in ``suffix``; refused when they were measured on another stage-1 model
    than the one stage 2 starts from."""
    import pandas as pd

    path = output(paths, POOL, "pool")
    published = verify(manifest_path(paths, POOL), POOL, [path])
    if published.get("model") != stage1_fingerprint:
        raise StaleOutputError(
            f"{path}: stage-1 pass rates of another model ({published.get('model')}) than "
            f"{output(paths, 'train', 'model')} ({stage1_fingerprint}): run the calibrate_stage2 stage again"
        )
    pool = pd.read_parquet(path)
    chosen = [r for r in pool.to_dict("records") if r["keep"] and r["id"] not in exclude]
    if not chosen:
        raise ValueError(
            f"train.stage2: no problem with a stage-1 pass rate <= {max_pass_rate} left to train on "
            f"({len(pool)} re-calibrated, {int(pool['keep'].sum())} in the band, {len(exclude)} in the dev "
            "split); raise train.stage2.max_pass_rate or train stage 1 less"
        )
    return as_prompts(chosen, suffix)


def train_stage2(
    train: TrainParams, max_prompt_tokens: int, inputs: Inputs, tracking: TrackingParams
) -> dict[str, Any]:
    """Curriculum stage 2 of ``train`` (off unless ``train.stage2.enabled``) from the stage-1 model on its pool
    (``inputs``: where the pools are, the prompt suffix); publishes what the stage publishes (module doc)."""
    paths = inputs.paths
    model, report = output(paths, STAGE, "model"), summary_file(paths, STAGE)
    state = distributed_state()
    if not train.stage2.enabled:
        summary = {"enabled": False}
        if state.is_main_process:
            with atomic_path(model) as tmp:
                tmp.mkdir()
                write_json(tmp / DISABLED, summary)
            write_json(report, summary)
            headline = write_headline(paths, STAGE, summary)
            publish(manifest_path(paths, STAGE), STAGE, [report, headline], model=None)
        return summary
    start, start_fingerprint = from_main(state, lambda: published_model(paths, "train"))
    _, dev = difficulty.split_dev(training_rows(inputs), train.dev_problems, train.seed)
    exclude = {r["id"] for r in dev}
    rows = stage2_rows(
        paths, inputs.model.prompt_suffix, train.stage2.max_pass_rate, exclude, start_fingerprint
    )
    phase = Phase(train.stage2_train(), max_prompt_tokens, model, resume_dir(paths, STAGE), STAGE)
    summary = train_phase(phase, rows, dev, tracking, start=str(start), start_fingerprint=start_fingerprint)
    summary = {"enabled": True, **summary}
    publish_training(state, paths, STAGE, summary)
    summary.pop("curve", None)
    return summary
