"""Stage ``train``: GRPO-LEAD reinforcement learning with ``LEADTrainer`` (TRL's GRPOTrainer underneath).

Inputs: the starting model (``<paths.models>/warmstart``, or ``model.base`` when the warm start is off) and
the training pool — ``<paths.curated>/calibrated.parquet`` (rows with ``keep``) when calibration ran, else
``<paths.curated>/train.parquet``.

Outputs: ``<paths.models>/train`` (final model, Hugging Face layout, for evaluate and register),
``<paths.reports>/train.json`` (summary), per-step metrics in the stage's MLflow run.

``<paths.models>/train.manifest.json`` is written last (:func:`lead.io.fingerprint.publish`): the model's content
fingerprint, the MLflow run and the run's identity, so that register can tell which run made the model it holds.

**Same run** means the same :func:`run_identity`: the train settings, the start model's *content*, the training
and dev rows, the training code.
Checkpoints go to ``<paths.resume>/train`` (resume state, outside DVC) every ``train.save_steps`` steps, with
``lead_run.json`` (identity, MLflow run id, state). Started again with the same identity, a killed run (even by
SIGKILL) resumes from its last complete checkpoint into the same MLflow run, losing at most one checkpoint
interval; a finished one is reused as a whole (nothing trained, the same model and summary). Any other identity —
a new warm start, other rows, other settings, edited reward code — deletes the checkpoints and trains afresh in
a new MLflow run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from lead.config import Params, ParamsError, did_you_mean
from lead.core import difficulty
from lead.io.files import atomic_path, link_tree, write_json, write_text
from lead.io.fingerprint import (
    StaleOutputError,
    code_fingerprint,
    model_fingerprint,
    publish,
    rows_fingerprint,
    unpublish,
    value_fingerprint,
    verify,
)
from lead.stages._common import StageError, empty_pool_message, manifest_path, resume_dir, stage_main

# Pass@1 on the dev split under evaluation's rules (LEADTrainer's validation), what checkpoint = best maximises.
DEV_METRIC = "eval_pass_at_1"
RUN_FILE = "lead_run.json"  # in the checkpoint folder: the run's identity, MLflow run id and state
FINAL_COPY = "final"  # in the checkpoint folder: the finished run's model (hard links to the output's files)


def model_dir(params: Params) -> Path:
    return params.paths.models / "train"


def checkpoint_dir(params: Params) -> Path:
    return resume_dir(params, "train")


def start_model(params: Params) -> str:
    """Where RL starts: the warm-started model, or ``model.base`` when the warm start is off."""
    return str(params.paths.models / "warmstart") if params.warmstart.enabled else params.model.base


def pool_source(params: Params) -> tuple[str, Path]:
    """(stage, file) of the RL pool: calibrate's ``calibrated.parquet`` when calibration ran, else curate's
    ``train.parquet``."""
    calibrated = params.paths.curated / "calibrated.parquet"
    if calibrated.exists():
        return "calibrate", calibrated
    return "curate", params.paths.curated / "train.parquet"


def training_rows(params: Params, start_fingerprint: str | None = None) -> list[dict[str, Any]]:
    """The RL pool: calibrated rows marked ``keep`` when calibration ran, else the curated training set,
    checked against the manifest its stage published (never a file of an unfinished run) and, given the
    start model's fingerprint, refused when calibration measured another model (a newer warm start). An
    empty pool is a :class:`StageError` saying why and which knob to change."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    stage, path = pool_source(params)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no training pool; run `lead curate` (and `lead calibrate`) first")
    published = verify(manifest_path(params, stage), stage, [path])
    measured = published.get("model")
    if start_fingerprint and stage == "calibrate" and measured != start_fingerprint:
        raise StaleOutputError(
            f"{path}: pass rates of another model ({measured}) than the one training starts from "
            f"({start_fingerprint}): run the calibrate stage again"
        )
    # datasets cannot read a parquet file without rows (curate writes one when nothing passes its filters).
    pool = Dataset.from_parquet(str(path)).to_list() if pq.read_metadata(path).num_rows else []
    rows = [r for r in pool if r["keep"]] if "keep" in (pool[0] if pool else {}) else pool
    if not rows:
        if stage == "curate":
            raise StageError(
                f"{path}: the curated pool is empty, nothing to train on; check curate.sources and the "
                f"curation report ({params.paths.reports / 'curate'})"
            )
        # calibrate now stops before publishing an empty pool; this one was published without that check.
        samples = pool[0]["k"] if pool else 0
        why = empty_pool_message([r["correct"] for r in pool], samples, params)
        raise StageError(f"{path}: nothing to train on: {why}; then run the calibrate stage again")
    return as_prompts(rows, params.model.prompt_suffix)


def as_prompts(rows: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """Pool rows as TRL dataset rows: one user turn (problem + instruction suffix), the gold answer, the id."""
    return [
        {
            "prompt": [{"role": "user", "content": r["problem"] + suffix}],
            "answer": str(r["answer"]),
            "id": r["id"],
        }
        for r in rows
    ]


# Allowance for the chat template's tokens around a prompt (curate.max_prompt_tokens counts problem + suffix).
CHAT_TEMPLATE_TOKENS = 64


def world_size() -> int:
    """The processes of this launch (``accelerate launch`` sets ``WORLD_SIZE``; 1 without it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_config(params: Params, output_dir: Path, *, context: int | None = None):
    """TRL ``GRPOConfig`` from ``params.train`` with the preset applied (fully on-policy, constant lr), for
    the :func:`world_size` processes of this launch (:func:`grpo_config_kwargs`). ``train.grpo_config``
    keys that are not GRPOConfig's fields, or values GRPOConfig refuses, are a :class:`ParamsError`.

    ``context`` = the model's context window (vLLM refuses a longer ``vllm_max_model_length``), None = unknown.
    """
    import torch
    from trl import GRPOConfig

    kwargs = grpo_config_kwargs(
        params, output_dir, world=world_size(), cuda=torch.cuda.is_available(), context=context
    )
    extra = params.train.grpo_config
    if not extra:
        return GRPOConfig(**kwargs)
    check_grpo_fields(extra)
    try:
        return GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ParamsError(
            f"train.grpo_config = {extra}: TRL's GRPOConfig refuses these settings: {exc}"
        ) from None


def grpo_config_kwargs(
    params: Params, output_dir: Path, *, world: int, cuda: bool, context: int | None = None
) -> dict[str, Any]:
    """The keyword arguments of :func:`grpo_config` for ``world`` processes, with or without CUDA: the
    pipeline's own (:data:`PIPELINE_KEYS` says which params key sets each), then ``train.grpo_config``.
    Pure (no torch or TRL import), so the settings of a launch can be checked anywhere."""
    from lead.training.batching import micro_batching
    from lead.training.presets import resolve

    t = params.train
    r = resolve(t)
    longest = params.curate.max_prompt_tokens + CHAT_TEMPLATE_TOKENS + t.max_completion_length
    # The token budget counts the bounds params state (prompt + completion), not the chat template's allowance.
    sequence = params.curate.max_prompt_tokens + t.max_completion_length
    batch = micro_batching(t.batch_size, t.num_generations, world, sequence, t.micro_batch_tokens)
    own = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=batch.per_device,
        gradient_accumulation_steps=batch.accumulation,
        # One generation per optimizer step (on-policy, as in the paper), split into its micro-batches.
        steps_per_generation=batch.accumulation,
        num_iterations=1,
        num_generations=t.num_generations,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        top_p=t.top_p,
        top_k=0,
        learning_rate=r.learning_rate,
        lr_scheduler_type="constant",
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm,
        loss_type=r.loss_type,
        epsilon=t.epsilon,
        epsilon_high=r.epsilon_high,
        beta=t.beta,
        entropy_coef=r.entropy_coef,
        mask_truncated_completions=r.mask_truncated,
        vllm_importance_sampling_correction=r.vllm_importance_sampling_correction,
        max_steps=t.max_steps,
        save_strategy="steps",
        save_steps=t.save_steps,
        save_total_limit=2,  # the best checkpoint is kept on top of these when checkpoint = best
        logging_steps=t.logging_steps,
        # Validation: TRL samples the dev prompts like training ones; LEADTrainer logs eval_pass_at_1 (Pass@1
        # as evaluation judges it, at the training temperature) and eval_lead/length_mean.
        eval_strategy="steps" if t.dev_problems else "no",
        eval_steps=t.eval_steps,
        per_device_eval_batch_size=batch.eval_per_device,
        load_best_model_at_end=t.checkpoint == "best",
        metric_for_best_model=DEV_METRIC if t.checkpoint == "best" else None,
        greater_is_better=True,
        report_to=["mlflow"],
        disable_tqdm=True,
        use_cpu=not cuda,
        bf16=cuda and t.bf16,
        gradient_checkpointing=t.gradient_checkpointing,
        use_vllm=t.use_vllm,
        vllm_mode=t.vllm_mode,
        vllm_gpu_memory_utilization=t.vllm_gpu_memory_utilization,
        vllm_tensor_parallel_size=t.vllm_tensor_parallel_size,
        vllm_enable_sleep_mode=t.vllm_enable_sleep_mode,
        vllm_server_base_url=t.vllm_server_base_url,
        # Without it vLLM sizes its context to the model's (131k tokens for R1-Distill-Qwen) and must hold one
        # such sequence in its KV cache; curate bounds prompts, so the longest sequence is known.
        vllm_max_model_length=min(longest, context) if context else longest,
        # TRL's own field: the policy's loading (model_init_kwargs default to it) and vLLM's engine both read it.
        trust_remote_code=t.trust_remote_code,
        seed=t.seed,
        data_seed=t.seed,
    )
    clash = [key for key in t.grpo_config if key in own]
    owned = [key for key in t.grpo_config if key in LEAD_OWNS]
    if clash or owned:
        raise ParamsError(
            "\n".join(
                [f"train.grpo_config.{key}: set by the pipeline; {_instead(key)}" for key in clash]
                + [
                    f"train.grpo_config.{key}: does nothing under LEADTrainer; {LEAD_OWNS[key]}"
                    for key in owned
                ]
            )
        )
    return {**own, **t.grpo_config}


# GRPOConfig fields that LEADTrainer makes meaningless (its one reward and its advantages replace TRL's), with
# the knob that does what the user meant.
LEAD_OWNS = {
    "scale_rewards": "LEAD's advantages divide by the group's std (unbiased, eps 1e-6); train.loss_type "
    "dr_grpo drops that scaling",
    "reward_weights": "LEAD computes one reward from each completion's outcome; set its values with "
    "train.preset, train.penalty and train.repetition_penalty",
}


# Where each GRPOConfig argument of grpo_config_kwargs comes from: what to set instead of train.grpo_config.<key>.
PIPELINE_KEYS = {
    "output_dir": "fixed: the stage's checkpoint folder under paths.models",
    "per_device_train_batch_size": "train.batch_size and train.micro_batch_tokens",
    "gradient_accumulation_steps": "train.batch_size and train.micro_batch_tokens",
    "steps_per_generation": "fixed: one generation per optimizer step, split by train.micro_batch_tokens",
    "num_iterations": "fixed: 1, one update per generation (on-policy, as in the paper)",
    "num_generations": "train.num_generations",
    "max_completion_length": "train.max_completion_length",
    "temperature": "train.temperature",
    "top_p": "train.top_p",
    "top_k": "fixed: 0, rollouts sample the whole distribution (train.top_p narrows it)",
    "learning_rate": "train.learning_rate",
    "lr_scheduler_type": "fixed: constant, as in the paper",
    "weight_decay": "train.weight_decay",
    "max_grad_norm": "train.max_grad_norm",
    "loss_type": "train.loss_type",
    "epsilon": "train.epsilon",
    "epsilon_high": "train.epsilon_high",
    "beta": "train.beta",
    "entropy_coef": "train.entropy_coef",
    "mask_truncated_completions": "train.truncation (mask)",
    "vllm_importance_sampling_correction": "train.vllm_importance_sampling_correction",
    "max_steps": "train.max_steps",
    "save_strategy": "train.save_steps",
    "save_steps": "train.save_steps",
    "save_total_limit": "fixed: 2, the last checkpoints (and the best one when train.checkpoint is best)",
    "logging_steps": "train.logging_steps",
    "eval_strategy": "train.dev_problems and train.eval_steps",
    "eval_steps": "train.eval_steps",
    "per_device_eval_batch_size": "train.batch_size and train.micro_batch_tokens",
    "load_best_model_at_end": "train.checkpoint",
    "metric_for_best_model": "train.checkpoint",
    "greater_is_better": "train.checkpoint",
    "report_to": "fixed: the stage's MLflow run (tracking.uri, tracking.experiment)",
    "disable_tqdm": "fixed: the stage draws its own progress bar",
    "use_cpu": "fixed: CUDA when there is one",
    "bf16": "train.bf16",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "use_vllm": "train.use_vllm",
    "vllm_mode": "train.vllm_mode",
    "vllm_gpu_memory_utilization": "train.vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size": "train.vllm_tensor_parallel_size",
    "vllm_enable_sleep_mode": "train.vllm_enable_sleep_mode",
    "vllm_server_base_url": "train.vllm_server_base_url",
    "vllm_max_model_length": "curate.max_prompt_tokens and train.max_completion_length",
    "trust_remote_code": "train.trust_remote_code",
    "seed": "train.seed",
    "data_seed": "train.seed",
}


def _instead(key: str) -> str:
    """What to do instead of setting the pipeline's own GRPOConfig argument ``key`` (:data:`PIPELINE_KEYS`)."""
    source = PIPELINE_KEYS[key]
    return f"it is {source}" if source.startswith("fixed: ") else f"use {source} instead"


def check_grpo_fields(extra: dict[str, Any]) -> None:
    """Refuse ``train.grpo_config`` keys that are not fields of TRL's ``GRPOConfig``: a :class:`ParamsError`
    listing the fields it may set (GRPOConfig's, less the pipeline's own). Imports TRL only for a non-empty
    ``extra``, which is why the params loader (no TRL) leaves this to the train stage and ``lead params``."""
    if not extra:
        return
    import dataclasses
    import difflib

    from trl import GRPOConfig

    names = sorted(f.name for f in dataclasses.fields(GRPOConfig) if f.init)
    free = [name for name in names if name not in PIPELINE_KEYS and name not in LEAD_OWNS]
    problems = []
    for key in extra:
        if key in names:
            continue
        close = difflib.get_close_matches(key, names, n=1)
        if close and close[0] in PIPELINE_KEYS:  # a typo of a key the pipeline sets: say where it is set
            hint = f" (did you mean '{close[0]}'? set by the pipeline; {_instead(close[0])})"
        else:
            hint = did_you_mean(key, free)
        problems.append(f"train.grpo_config.{key}: not a field of TRL's GRPOConfig{hint}")
    if problems:
        raise ParamsError(
            "\n".join([*problems, f"the GRPOConfig fields train.grpo_config may set: {', '.join(free)}"])
        )


def check_train_settings(params: Params) -> None:
    """Build the GRPOConfig of stage 1 and, when it runs, of curriculum stage 2 as :func:`grpo_config` will, so
    that every train setting that only TRL or the launch can judge fails before any work: the batch split over
    :func:`world_size` processes, ``train.grpo_config`` (names and values; TRL is imported only for a non-empty
    one). The train stage's first lines and ``lead params`` call it."""
    runs = [params]
    if params.train.stage2.enabled:
        runs.append(params.model_copy(update={"train": params.train.stage2_train()}))
    for p in runs:
        if p.train.grpo_config:
            grpo_config(p, checkpoint_dir(p))
        else:
            grpo_config_kwargs(p, checkpoint_dir(p), world=world_size(), cuda=False)


def lora_config(lora):
    """peft's ``LoraConfig`` for ``train.lora``, or None (full fine-tuning)."""
    if not lora.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


# The code that decides what training computes: the rewards, advantages and grader, the TRL seam, the model's
# context (sampling), this stage; and the libraries that run it.
TRAINING_CODE = (
    "lead.core.rewards",
    "lead.core.advantages",
    "lead.grading",
    "lead.io.sampling",
    "lead.training",
    "lead.stages.train",
)
TRAINING_LIBRARIES = ("torch", "transformers", "trl", "accelerate", "peft", "math-verify")


def library_versions(names: tuple[str, ...] = TRAINING_LIBRARIES) -> dict[str, str]:
    """``name: version`` as installed here (a new TRL is another trainer)."""
    import importlib.metadata

    return {name: importlib.metadata.version(name) for name in names}


def run_identity(
    params: Params, start_fingerprint: str, rows: list[dict[str, Any]], dev: list[dict[str, Any]]
) -> str:
    """What a training result depends on, by content: the resolved train settings (without ``train.stage2``,
    which is the next DVC stage's), the start model's :func:`~lead.io.fingerprint.model_fingerprint`, the training
    and dev rows, the prompt bound that sizes vLLM's context, the training code (:data:`TRAINING_CODE`: a
    fixed reward is another result) and the versions of the libraries that train (:func:`library_versions`).
    Checkpoints are resumed, and a finished run reused, only when this matches; where the start model or
    rows live plays no part."""
    return value_fingerprint(
        {
            "train": params.train.model_dump(mode="json", exclude={"stage2"}),
            "start": start_fingerprint,
            "rows": rows_fingerprint(rows),
            "dev": rows_fingerprint(dev),
            "max_prompt_tokens": params.curate.max_prompt_tokens,
            "code": code_fingerprint(TRAINING_CODE),
            "libraries": library_versions(),
        }
    )


def from_main(state, compute):
    """``compute()`` run by the main process only, its result (or its error) shared with every process, so
    that all of them decide alike and none waits forever for a main process that failed (hashing a 14B model
    takes a minute; reading a file the main process may be deleting, or restoring a model, is its job)."""
    if state.num_processes == 1:
        return compute()
    from accelerate.utils import broadcast_object_list

    box: list[Any] = [None]
    if state.is_main_process:
        try:
            box = [("ok", compute())]
        except Exception as exc:  # re-raised on every process, after the others have heard of it
            box = [("error", f"{type(exc).__name__}: {exc}")]
            broadcast_object_list(box)
            raise
    broadcast_object_list(box)
    kind, value = box[0]
    if kind == "error":
        raise RuntimeError(f"the main process failed: {value}")
    return value


def _restore_finished(previous: dict[str, Any], final: Path, ckpt: Path) -> bool:
    """Whether a finished run's model is in ``final``, restored from the copy kept in ``ckpt`` when it is
    missing or differs (DVC removed it before rerunning the stage). False when neither holds the recorded
    content: train afresh. Hashes ``final`` at most twice, the copy never (``final`` is checked after)."""
    if final.is_dir() and model_fingerprint(final) == previous["model"]:
        return True
    kept = ckpt / FINAL_COPY
    if not kept.is_dir():
        return False
    with atomic_path(final) as tmp:
        link_tree(kept, tmp)
    return model_fingerprint(final) == previous["model"]


def _read_run_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def train_phase(
    params: Params,
    rows: list[dict[str, Any]],
    dev: list[dict[str, Any]],
    start: str,
    final: Path,
    ckpt: Path,
    stage: str,
    start_fingerprint: str,
) -> dict[str, Any]:
    """One RL phase: train ``params.train`` from ``start`` (whose content is ``start_fingerprint``) on ``rows``
    (validating on ``dev``) and save the model to ``final``; ``stage`` names the DVC stage, the MLflow run and
    its tag. Its :func:`run_identity` decides what happens to an earlier run recorded in ``ckpt``:

    * same identity, **finished** → reused as a whole: its summary is returned and ``final`` holds its model
      (restored from the copy kept in ``ckpt`` if need be); nothing is trained, no MLflow run is touched;
    * same identity, unfinished (killed) → resumed from its last complete checkpoint, into the same MLflow run;
    * anything else → its checkpoints are deleted and training starts afresh, in a new MLflow run.
    """
    import mlflow
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback

    from lead.io.sampling import context_window
    from lead.io.tracking import stage_run
    from lead.training.callbacks import CompletionsTable, RichProgressCallback
    from lead.training.checkpoints import SealCheckpoints, last_complete_checkpoint
    from lead.training.presets import resolve
    from lead.training.trainer import LEADTrainer

    started = time.perf_counter()
    # Under `accelerate launch` every process runs this; only the main one owns the MLflow run and the files.
    state = _distributed_state()
    main = state.is_main_process
    run_file = ckpt / RUN_FILE
    identity = from_main(state, lambda: run_identity(params, start_fingerprint, rows, dev))
    previous = from_main(state, lambda: _read_run_file(run_file))
    if previous.get("identity") != identity:
        previous = {}
    elif previous.get("state") == "finished":
        if from_main(state, lambda: _restore_finished(previous, final, ckpt)):
            print(f"{stage}: reusing the finished run {previous['run_id']} (same identity {identity[:19]})")
            return previous["summary"]
        previous = {}  # its model is gone: train afresh
    if not previous and main:
        shutil.rmtree(ckpt, ignore_errors=True)  # another identity (or a lost result): nothing to resume
    state.wait_for_everyone()
    resume = last_complete_checkpoint(ckpt) if previous else None
    tracked = (
        stage_run(params, stage, log_sections=("train",), run_id=previous.get("run_id"))
        if main
        else contextlib.nullcontext()
    )
    with tracked as run:
        resolved = resolve(params.train)
        if main:
            ckpt.mkdir(parents=True, exist_ok=True)
            write_json(run_file, {"identity": identity, "run_id": run.info.run_id, "state": "running"})
            if not previous:  # what the preset resolved to: the objective actually trained
                mlflow.log_params({f"resolved.{k}": v for k, v in resolved.record().items()})
        tokenizer = AutoTokenizer.from_pretrained(start, trust_remote_code=params.train.trust_remote_code)
        table = CompletionsTable()
        trainer = LEADTrainer(
            model=start,
            args=grpo_config(
                params, ckpt, context=context_window(start, trust_remote_code=params.train.trust_remote_code)
            ),
            train_dataset=Dataset.from_list(rows),
            eval_dataset=Dataset.from_list(dev) if dev else None,
            processing_class=tokenizer,
            lead=resolved.lead,
            callbacks=[RichProgressCallback(f"{stage} (GRPO-LEAD)"), SealCheckpoints(), table],
            peft_config=lora_config(params.train.lora),
        )
        trainer.remove_callback(PrinterCallback)
        table.rows = lambda: trainer._lead_rows
        result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        _save(trainer, tokenizer, final, lora=params.train.lora.enabled, state=state)
        history = [h for h in trainer.state.log_history if "reward" in h]
        best = trainer.state.best_model_checkpoint
        summary = {
            "steps": result.global_step,
            "resumed_from": resume.name if resume else None,
            "problems": len(rows),
            "dev_problems": len(dev),
            "checkpoint": params.train.checkpoint,
            "handed_on": Path(best).name
            if params.train.checkpoint == "best" and best
            else f"step {result.global_step}",
            "dev": [
                {"step": h["step"], "pass_at_1": h[DEV_METRIC], "length": h.get("eval_lead/length_mean")}
                for h in trainer.state.log_history
                if DEV_METRIC in h
            ],
            "preset": params.train.preset,
            "seconds": round(time.perf_counter() - started, 1),
            "first_reward": history[0]["reward"] if history else None,
            "last_reward": history[-1]["reward"] if history else None,
            # per logged step: the training curves (train_curves.csv/.png; not in the stage's metrics file)
            "curve": [
                {
                    "step": h["step"],
                    "reward": h["reward"],
                    "length": h.get("lead/length_mean"),
                    "correct": h.get("lead/share_correct"),
                }
                for h in history
            ],
            "mlflow_run_id": run.info.run_id if main else None,
            "identity": identity,
        }
        if main:
            mlflow.log_metrics({"train_seconds": summary["seconds"]})
            summary["model"] = model_fingerprint(final)
            # A copy of the result beside the checkpoints (hard links: no extra space), so that a rerun of a
            # finished training finds its model even after DVC removed the stage's output first.
            with atomic_path(ckpt / FINAL_COPY) as tmp:
                link_tree(final, tmp)
            write_json(
                run_file,
                {
                    "identity": identity,
                    "run_id": run.info.run_id,
                    "state": "finished",
                    "model": summary["model"],
                    "summary": summary,
                },
            )
    return summary


def _distributed_state():
    """accelerate's view of the processes (one, unless launched with `accelerate launch`). Built as the trainer's
    Accelerator builds it (GRPOConfig.use_cpu without CUDA): the first PartialState fixes the shared state, and a
    default one on a machine without CUDA sees a single process in each of a CPU launch's processes, so that every
    one of them would think itself the main one (two MLflow runs, two writers of each file)."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _save(trainer, tokenizer, final: Path, *, lora: bool, state) -> None:
    """Save the trained model to ``final`` (Hugging Face layout), replacing it only once complete. Every
    process takes part (ZeRO-3 gathers the sharded weights); the main one writes and moves it into place."""
    if state.num_processes == 1:
        with atomic_path(final) as tmp:
            _save_to(trainer, tokenizer, tmp, lora)
        return
    saving = final.with_name(f".{final.name}.saving")  # one folder all processes agree on
    if state.is_main_process:
        shutil.rmtree(saving, ignore_errors=True)
    state.wait_for_everyone()
    _save_to(trainer, tokenizer, saving, lora)
    state.wait_for_everyone()
    if state.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(saving, final)
    state.wait_for_everyone()


def _save_to(trainer, tokenizer, folder: Path, lora: bool) -> None:
    if lora:  # adapters merged into the base weights: evaluate, vLLM and the registry get a plain model
        model = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
        if trainer.accelerator.is_main_process:
            model.save_pretrained(str(folder))
    else:
        trainer.save_model(str(folder))  # writes from the main process only
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(folder)


def run(params: Params, *, output: Path | None = None, checkpoints: Path | None = None) -> dict[str, Any]:
    """Train with GRPO-LEAD from the warm-started model and save the final model to ``<paths.models>/train``
    (or ``output``, with its checkpoints in ``checkpoints``: how an ablation cell trains its variant in the same
    workspace). Curriculum stage 2 is the next DVC stage (``train_stage2``)."""
    check_train_settings(params)  # before any work: the settings only TRL or the launch can judge
    if (output is None) != (checkpoints is None):
        raise ValueError(
            "train.run: output and checkpoints go together (one run's model and its resume state)"
        )
    final = output or model_dir(params)
    ckpt = checkpoints or checkpoint_dir(params)
    state = _distributed_state()
    manifest = manifest_path(params, "train") if output is None else None
    if state.is_main_process and manifest:
        unpublish(manifest)
    start = start_model(params)
    start_fingerprint = from_main(state, lambda: model_fingerprint(start))
    rows, dev = difficulty.split_dev(
        training_rows(params, start_fingerprint), params.train.dev_problems, params.train.seed
    )
    summary = train_phase(params, rows, dev, start, final, ckpt, "train", start_fingerprint)
    if manifest:
        publish_training(state, params, "train", summary, curves=True)
    return {k: v for k, v in summary.items() if k != "curve"}


def publish_training(
    state, params: Params, stage: str, summary: dict[str, Any], *, curves: bool = False
) -> None:
    """The main process writes ``<paths.reports>/<stage>.json`` (the summary without its per-step curve), with
    ``curves`` the curve as ``<stage>_curves.csv`` and ``.png`` (:func:`write_curves`), and, last, the stage's
    manifest: the model by content, the MLflow run that trained it, the run's identity."""
    if not state.is_main_process:
        return
    report = params.paths.reports / f"{stage}.json"
    write_json(report, {k: v for k, v in summary.items() if k != "curve"})
    outputs = [report, write_headline(params, stage, summary)]
    if curves:
        outputs += write_curves(params.paths.reports / f"{stage}_curves", summary.get("curve") or [])
    facts = {k: summary.get(k) for k in ("model", "mlflow_run_id", "identity")}
    publish(manifest_path(params, stage), stage, outputs, **facts)


HEADLINE_KEYS = (
    "steps",
    "last_reward",
)  # what DVC shows as a training stage's metrics; <stage>.json keeps all


def write_headline(params: Params, stage: str, summary: dict[str, Any]) -> Path:
    """``<paths.reports>/<stage>_headline.json``: the figures of :data:`HEADLINE_KEYS` (DVC's metrics of the stage:
    `dvc exp show` compares them; the run ids, hashes and times of ``<stage>.json`` would fill its columns)."""
    path = params.paths.reports / f"{stage}_headline.json"
    write_json(path, {k: summary[k] for k in HEADLINE_KEYS if k in summary})
    return path


def write_curves(stem: Path, curve: list[dict[str, Any]]) -> list[Path]:
    """Reward, completion length and share correct per logged step: ``<stem>.csv`` (the numbers) and ``<stem>.png``
    (two panels), which ``dvc plots diff`` shows side by side for two experiments or commits."""
    from matplotlib.figure import Figure

    table = stem.with_suffix(".csv")
    rows = "".join(
        f"{p['step']},{p['reward']},{'' if p['length'] is None else p['length']},"
        f"{'' if p['correct'] is None else p['correct']}\n"
        for p in curve
    )
    write_text(table, "step,reward,length,correct\n" + rows)
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    reward, length = fig.subplots(1, 2)
    steps = [p["step"] for p in curve]
    reward.plot(steps, [p["reward"] for p in curve], color="tab:blue")
    reward.set(xlabel="step", ylabel="mean reward", title="reward")
    length.plot(steps, [p["length"] for p in curve], color="tab:orange")
    length.set(xlabel="step", ylabel="tokens", title="completion length")
    image = stem.with_suffix(".png")
    with atomic_path(image) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return [table, image]


def main(argv: list[str] | None = None) -> None:
    stage_main("train", run, argv)


if __name__ == "__main__":
    main()
