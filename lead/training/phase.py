"""One RL phase with ``LEADTrainer`` (TRL's GRPOTrainer underneath): train, validate on the dev split, save, and
record the run so that a rerun resumes or reuses it (:mod:`lead.training.identity`).

:func:`train` is stage 1 (``lead.stages.train``, and each ablation cell's variant); curriculum stage 2
(``lead.stages.train_stage2``) runs :func:`train_phase` on its own pool from the stage-1 model.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lead.config import TrackingParams, TrainParams
from lead.core import difficulty
from lead.io.files import write_json, writing
from lead.io.fingerprint import model_fingerprint
from lead.training.distributed import distributed_state, from_main, save_model
from lead.training.grpo_config import DEV_METRIC, grpo_config, lora_config
from lead.training.identity import (
    RUN_FILE,
    keep_final_copy,
    read_run_file,
    restore_finished,
    run_identity,
)
from lead.training.inputs import Inputs, start_model, training_rows
from lead.training.presets import resolve
from lead.training.reports import curve_point, generation_totals


@dataclass(frozen=True)
class Phase:
    """One RL phase: its ``train`` section, the prompt bound (``curate.max_prompt_tokens``: it sizes vLLM's
    context and is part of the run's identity), where the model goes (``final``) and the checkpoints
    (``ckpt``), and the ``stage`` that names the DVC stage, the MLflow run and its tag."""

    train: TrainParams
    max_prompt_tokens: int
    final: Path
    ckpt: Path
    stage: str = "train"


def train(phase: Phase, inputs: Inputs, tracking: TrackingParams) -> dict[str, Any]:
    """Stage 1: from :func:`~lead.training.inputs.start_model` on the training pool less its dev split; the
    summary of :func:`train_phase`."""
    state = distributed_state()
    start = start_model(inputs)
    start_fingerprint = from_main(state, lambda: model_fingerprint(start))
    rows, dev = difficulty.split_dev(
        training_rows(inputs, start_fingerprint), phase.train.dev_problems, phase.train.seed
    )
    return train_phase(phase, rows, dev, tracking, start=start, start_fingerprint=start_fingerprint)


def train_phase(
    phase: Phase,
    rows: list[dict[str, Any]],
    dev: list[dict[str, Any]],
    tracking: TrackingParams,
    *,
    start: str,
    start_fingerprint: str,
) -> dict[str, Any]:
    """One RL phase: train ``phase.train`` from ``start`` (whose content is ``start_fingerprint``) on ``rows``
    (validating on ``dev``) and save the model to ``phase.final``, in an MLflow run of ``tracking``. Its
    :func:`run_identity` decides what happens to an earlier run recorded in ``phase.ckpt``:

    * same identity, **finished** → reused as a whole: its summary is returned and ``final`` holds its model
      (restored from the copy kept in ``ckpt`` if need be); nothing is trained, no MLflow run is touched;
    * same identity, unfinished (killed) → resumed from its last complete checkpoint, into the same MLflow run;
    * anything else → its checkpoints are deleted and training starts afresh, in a new MLflow run.
    """
    import mlflow

    from lead.io.tracking import stage_run
    from lead.training.checkpoints import last_complete_checkpoint

    started = time.perf_counter()
    final, ckpt, stage = phase.final, phase.ckpt, phase.stage
    # Under `accelerate launch` every process runs this; only the main one owns the MLflow run and the files.
    state = distributed_state()
    main = state.is_main_process
    identity = from_main(
        state, lambda: run_identity(phase.train, phase.max_prompt_tokens, start_fingerprint, rows, dev)
    )
    previous = from_main(state, lambda: read_run_file(ckpt))
    if previous.get("identity") != identity:
        previous = {}
    elif previous.get("state") == "finished":
        if from_main(state, lambda: restore_finished(previous, final, ckpt)):
            print(f"{stage}: reusing the finished run {previous['run_id']} (same identity {identity[:19]})")
            return previous["summary"]
        previous = {}  # its model is gone: train afresh
    if not previous and main:
        shutil.rmtree(ckpt, ignore_errors=True)  # another identity (or a lost result): nothing to resume
    state.wait_for_everyone()
    resume = last_complete_checkpoint(ckpt) if previous else None
    tracked = (
        stage_run(tracking, stage, logged={"train": phase.train.as_written()}, run_id=previous.get("run_id"))
        if main
        else contextlib.nullcontext()
    )
    with tracked as run:
        resolved = resolve(phase.train)
        if main:
            ckpt.mkdir(parents=True, exist_ok=True)
            write_json(ckpt / RUN_FILE, {"identity": identity, "run_id": run.info.run_id, "state": "running"})
            if not previous:  # what the preset resolved to: the objective actually trained
                mlflow.log_params({f"resolved.{k}": v for k, v in resolved.record().items()})
            if resume:  # how the run went, not what it made: the run says it (the stage's record does not)
                mlflow.set_tag("resumed_from", resume.name)
        trainer, tokenizer = _trainer(phase, start, rows, dev, resolved.lead)
        with writing(ckpt):  # the checkpoints: inside the workspace, and a full disk named as such
            result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        save_model(trainer, tokenizer, final, lora=phase.train.lora.enabled, state=state)
        summary = {
            **_what_it_did(phase.train, trainer, result.global_step, resume, (len(rows), len(dev)), started),
            "mlflow_run_id": run.info.run_id if main else None,
            "identity": identity,
        }
        if main:
            mlflow.log_metrics({"train_seconds": summary["seconds"]})
            summary["model"] = model_fingerprint(final)
            keep_final_copy(final, ckpt)
            write_json(
                ckpt / RUN_FILE,
                {
                    "identity": identity,
                    "run_id": run.info.run_id,
                    "state": "finished",
                    "model": summary["model"],
                    "summary": summary,
                },
            )
    return summary


def _trainer(phase: Phase, start: str, rows, dev, lead) -> tuple[Any, Any]:
    """The :class:`~lead.training.trainer.LEADTrainer` of one phase (checkpoints into ``phase.ckpt``, the GRPOConfig of
    :func:`grpo_config`, our progress bar and completions table instead of the trainer's printout) and its
    tokenizer."""
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback

    from lead.io.sampling import context_window
    from lead.patches.trl_without_vllm import match_trl_to
    from lead.training.callbacks import CompletionsTable, RichProgressCallback
    from lead.training.checkpoints import SealCheckpoints

    remote = phase.train.trust_remote_code
    args = grpo_config(
        phase.train,
        phase.ckpt,
        max_prompt_tokens=phase.max_prompt_tokens,
        context=context_window(start, trust_remote_code=remote),
    )
    match_trl_to(args.use_vllm)  # no vLLM import (~3.5 s) for a trainer that does not generate with it
    from lead.training.trainer import LEADTrainer

    tokenizer = AutoTokenizer.from_pretrained(start, trust_remote_code=remote)
    table = CompletionsTable()
    trainer = LEADTrainer(
        model=start,
        args=args,
        train_dataset=Dataset.from_list(rows),
        eval_dataset=Dataset.from_list(dev) if dev else None,
        processing_class=tokenizer,
        lead=lead,
        callbacks=[RichProgressCallback(f"{phase.stage} ({lead.method})"), SealCheckpoints(), table],
        peft_config=lora_config(phase.train.lora),
    )
    trainer.remove_callback(PrinterCallback)
    table.rows = lambda: trainer._lead_rows
    return trainer, tokenizer


def _what_it_did(
    train: TrainParams, trainer, steps: int, resume: Path | None, problems: tuple[int, int], started: float
) -> dict[str, Any]:
    """A finished phase from its trainer's log: steps, where it resumed, the training and dev problems
    (``problems``), which checkpoint it hands on, the dev split's Pass@1 and length at each evaluation, the first
    and last reward, and per logged step the training curves (``<stage>_curves.csv``/``.png``; not in the
    stage's metrics file)."""
    log = trainer.state.log_history
    history = [h for h in log if "reward" in h]
    best = trainer.state.best_model_checkpoint
    return {
        "steps": steps,
        "resumed_from": resume.name if resume else None,
        "problems": problems[0],
        "dev_problems": problems[1],
        "checkpoint": train.checkpoint,
        "handed_on": Path(best).name if train.checkpoint == "best" and best else f"step {steps}",
        "dev": [
            {"step": h["step"], "pass_at_1": h[DEV_METRIC], "length": h.get("eval_lead/length_mean")}
            for h in log
            if DEV_METRIC in h
        ],
        "preset": train.preset,
        "seconds": round(time.perf_counter() - started, 1),
        "first_reward": history[0]["reward"] if history else None,
        "last_reward": history[-1]["reward"] if history else None,
        "curve": [curve_point(h) for h in history],
        "dynamic_sampling": train.dynamic_sampling,
        **generation_totals([h for h in log if "reward" in h]),
    }
