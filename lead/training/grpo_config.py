"""TRL's ``GRPOConfig`` from params, as one table: each field the pipeline sets, where its value comes from.

:data:`SETTINGS` is the only place a training knob meets TRL: a row names the ``GRPOConfig`` field, its source
(the params key, the preset's resolved value, or ``fixed:`` and why) and how its value is computed from a
:class:`Launch`. Everything else reads the table: :func:`grpo_config_kwargs` builds the arguments from it,
:data:`PIPELINE_KEYS` (the fields ``train.grpo_config`` may not set, and what to set instead) is its source
column, and :func:`check_grpo_fields` judges the pass-through against it. A new plain knob is a field of
``TrainParams`` and a row here (``_train("name")``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lead.config import ParamsError, PathParams, TrainParams, did_you_mean
from lead.dag import resume_dir
from lead.training.batching import Batching, micro_batching
from lead.training.presets import Resolved, resolve

# Pass@1 on the dev split under evaluation's rules (LEADTrainer's validation), what checkpoint = best maximises.
DEV_METRIC = "eval_pass_at_1"

# Allowance for the chat template's tokens around a prompt (curate.max_prompt_tokens counts problem + suffix).
CHAT_TEMPLATE_TOKENS = 64


def world_size() -> int:
    """The processes of this launch (``accelerate launch`` sets ``WORLD_SIZE``; 1 without it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class Launch:
    """What the fields' values are computed from: the train section, the prompt bound (``curate.max_prompt_tokens``),
    the preset resolved, the batch split over the launch's processes, the checkpoint folder, CUDA or not, and the
    model's context window (None = unknown)."""

    train: TrainParams
    max_prompt_tokens: int
    resolved: Resolved
    batch: Batching
    output_dir: Path
    cuda: bool
    context: int | None

    @property
    def longest(self) -> int:
        """The longest sequence vLLM must hold: prompt bound + the chat template's allowance + completion."""
        return self.max_prompt_tokens + CHAT_TEMPLATE_TOKENS + self.train.max_completion_length


@dataclass(frozen=True)
class Setting:
    """One row: ``GRPOConfig.<field>`` = ``value(launch)``; ``source`` says where it comes from (a params key, or
    ``fixed: <why>``), which is what a user is told when ``train.grpo_config`` tries to set it."""

    field: str
    source: str
    value: Callable[[Launch], Any]


def _train(key: str, field: str | None = None) -> Setting:
    """A field that is ``train.<key>`` as it stands in params."""
    return Setting(field or key, f"train.{key}", lambda launch: getattr(launch.train, key))


def _preset(key: str, field: str | None = None) -> Setting:
    """A field that is ``train.<key>``, or the preset's value when params leave it unset (:func:`resolve`)."""
    return Setting(field or key, f"train.{key}", lambda launch: getattr(launch.resolved, key))


def _fixed(field: str, value: Any, why: str) -> Setting:
    return Setting(field, f"fixed: {why}", lambda launch: value)


def _best(launch: Launch) -> bool:
    return launch.train.checkpoint == "best"


_BATCH = "train.batch_size and train.micro_batch_tokens"

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "output_dir",
        "fixed: the stage's checkpoint folder under paths.resume",
        lambda launch: str(launch.output_dir),
    ),
    # One generation per optimizer step (on-policy, as in the paper), split into its micro-batches.
    Setting("per_device_train_batch_size", _BATCH, lambda launch: launch.batch.per_device),
    Setting("gradient_accumulation_steps", _BATCH, lambda launch: launch.batch.accumulation),
    Setting(
        "steps_per_generation",
        "fixed: one generation per optimizer step, split by train.micro_batch_tokens",
        lambda launch: launch.batch.accumulation,
    ),
    _fixed("num_iterations", 1, "1, one update per generation (on-policy, as in the paper)"),
    _train("num_generations"),
    _train("max_completion_length"),
    _train("temperature"),
    _train("top_p"),
    _fixed("top_k", 0, "0, rollouts sample the whole distribution (train.top_p narrows it)"),
    _preset("learning_rate"),
    _fixed("lr_scheduler_type", "constant", "constant, as in the paper"),
    _train("weight_decay"),
    _train("max_grad_norm"),
    _preset("loss_type"),
    _train("epsilon"),
    _preset("epsilon_high"),
    _train("beta"),
    _preset("entropy_coef"),
    Setting(
        "mask_truncated_completions", "train.truncation (mask)", lambda launch: launch.resolved.mask_truncated
    ),
    _preset("vllm_importance_sampling_correction"),
    _train("max_steps"),
    _fixed("save_strategy", "steps", "steps, every train.save_steps"),
    _train("save_steps"),
    _fixed("save_total_limit", 2, "2, the last checkpoints (and the best one when train.checkpoint is best)"),
    _train("logging_steps"),
    # Validation: TRL samples the dev prompts like training ones; LEADTrainer logs eval_pass_at_1 (Pass@1
    # as evaluation judges it, at the training temperature) and eval_lead/length_mean.
    Setting(
        "eval_strategy",
        "train.dev_problems and train.eval_steps",
        lambda launch: "steps" if launch.train.dev_problems else "no",
    ),
    _train("eval_steps"),
    Setting("per_device_eval_batch_size", _BATCH, lambda launch: launch.batch.eval_per_device),
    Setting("load_best_model_at_end", "train.checkpoint", _best),
    Setting(
        "metric_for_best_model", "train.checkpoint", lambda launch: DEV_METRIC if _best(launch) else None
    ),
    Setting("greater_is_better", "train.checkpoint", lambda launch: True),
    _fixed("report_to", ["mlflow"], "the stage's MLflow run (tracking.uri, tracking.experiment)"),
    _fixed("disable_tqdm", True, "the stage draws its own progress bar"),
    Setting("use_cpu", "fixed: CUDA when there is one", lambda launch: not launch.cuda),
    Setting("bf16", "train.bf16", lambda launch: launch.cuda and launch.train.bf16),
    _train("gradient_checkpointing"),
    _train("use_vllm"),
    _train("vllm_mode"),
    _train("vllm_gpu_memory_utilization"),
    _train("vllm_tensor_parallel_size"),
    _train("vllm_enable_sleep_mode"),
    _train("vllm_server_base_url"),
    # Without it vLLM sizes its context to the model's (131k tokens for R1-Distill-Qwen) and must hold one
    # such sequence in its KV cache; curate bounds prompts, so the longest sequence is known.
    Setting(
        "vllm_max_model_length",
        "curate.max_prompt_tokens and train.max_completion_length",
        lambda launch: min(launch.longest, launch.context) if launch.context else launch.longest,
    ),
    # TRL's own field: the policy's loading (model_init_kwargs default to it) and vLLM's engine both read it.
    _train("trust_remote_code"),
    _train("seed"),
    _train("seed", "data_seed"),
)

# What to set instead of train.grpo_config.<field>, for every field the pipeline sets.
PIPELINE_KEYS = {s.field: s.source for s in SETTINGS}

# GRPOConfig fields that LEADTrainer makes meaningless (its one reward and its advantages replace TRL's), with
# the knob that does what the user meant.
LEAD_OWNS = {
    "scale_rewards": "LEAD's advantages divide by the group's std (unbiased, eps 1e-6); train.loss_type "
    "dr_grpo drops that scaling",
    "reward_weights": "LEAD computes one reward from each completion's outcome; set its values with "
    "train.preset, train.penalty and train.repetition_penalty",
}


def grpo_config_kwargs(
    train: TrainParams,
    output_dir: Path,
    *,
    max_prompt_tokens: int,
    world: int,
    cuda: bool,
    context: int | None = None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`grpo_config` for the ``train`` section (prompts of at most
    ``max_prompt_tokens``), ``world`` processes, with or without CUDA: every row of
    :data:`SETTINGS`, then ``train.grpo_config`` (a key the table sets, or one :data:`LEAD_OWNS`, is a
    :class:`ParamsError` saying what to set instead). Pure (no torch or TRL import), so the settings of a launch
    can be checked anywhere."""
    t = train
    # The token budget counts the bounds params state (prompt + completion), not the chat template's allowance.
    sequence = max_prompt_tokens + t.max_completion_length
    batch = micro_batching(t.batch_size, t.num_generations, world, sequence, t.micro_batch_tokens)
    if t.dynamic_sampling and (t.batch_size // world) % t.num_generations:
        # Refilling replaces whole groups per process (lead.core.dynamic_sampling): none may straddle two.
        raise ParamsError(
            f"train.dynamic_sampling: each of the {world} processes holds {t.batch_size // world} completions, "
            f"not whole groups of train.num_generations ({t.num_generations}); make train.batch_size a multiple "
            f"of {world * t.num_generations}"
        )
    launch = Launch(t, max_prompt_tokens, resolve(t), batch, output_dir, cuda, context)
    own = {s.field: s.value(launch) for s in SETTINGS}
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


def grpo_config(train: TrainParams, output_dir: Path, *, max_prompt_tokens: int, context: int | None = None):
    """TRL ``GRPOConfig`` from the ``train`` section with the preset applied (fully on-policy, constant lr), for
    the :func:`world_size` processes of this launch (:func:`grpo_config_kwargs`). ``train.grpo_config``
    keys that are not GRPOConfig's fields, or values GRPOConfig refuses, are a :class:`ParamsError`.

    ``context`` = the model's context window (vLLM refuses a longer ``vllm_max_model_length``), None = unknown.
    """
    import torch
    from trl import GRPOConfig

    kwargs = grpo_config_kwargs(
        train,
        output_dir,
        max_prompt_tokens=max_prompt_tokens,
        world=world_size(),
        cuda=torch.cuda.is_available(),
        context=context,
    )
    extra = train.grpo_config
    if not extra:
        return GRPOConfig(**kwargs)
    check_grpo_fields(extra)
    try:
        return GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ParamsError(
            f"train.grpo_config = {extra}: TRL's GRPOConfig refuses these settings: {exc}"
        ) from None


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


def check_train_settings(train: TrainParams, paths: PathParams, *, max_prompt_tokens: int) -> None:
    """Build the GRPOConfig of stage 1 and, when it runs, of curriculum stage 2 as :func:`grpo_config` will, so
    that every train setting that only TRL or the launch can judge fails before any work: the batch split over
    :func:`world_size` processes, ``train.grpo_config`` (names and values; TRL is imported only for a non-empty
    one). The training stages' first lines and ``lead params`` call it."""
    runs = [(train, "train")]
    if train.stage2.enabled:
        runs.append((train.stage2_train(), "train_stage2"))
    for section, stage in runs:
        folder = resume_dir(paths, stage)
        if section.grpo_config:
            grpo_config(section, folder, max_prompt_tokens=max_prompt_tokens)
        else:
            grpo_config_kwargs(
                section, folder, max_prompt_tokens=max_prompt_tokens, world=world_size(), cuda=False
            )


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
