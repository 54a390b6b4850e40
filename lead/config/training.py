"""The sections of RL: ``calibrate`` (pass rates, and the difficulty band RL keeps) and ``train`` (GRPO-LEAD),
with its subsections ``train.stage2`` (the curriculum's second stage) and ``train.lora``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from lead.config.base import Section, Seed, _rule
from lead.core.difficulty import STAGE2_MAX_PASS_RATE


class CalibrateParams(Section):
    """``calibrate``: per-problem pass rates of the current model, and the difficulty band kept for RL."""

    samples: int = Field(8, ge=1, le=1024, description="completions per problem (k): pass rate = correct / k")
    temperature: float = Field(1.0, gt=0.0, le=10.0, description="sampling temperature")
    min_pass_rate: float = Field(0.0, ge=0.0, le=1.0, description="keep problems with pass rate > this")
    max_pass_rate: float = Field(1.0, ge=0.0, le=1.0, description="keep problems with pass rate < this")
    keep_inclusive: Literal["neither", "both", "left", "right"] = Field(
        "neither", description="which ends of the keep band are closed (both: min <= p <= max)"
    )
    seed: Seed = Field(
        0,
        description="base seed: each chunk's seed is a hash of it and the chunk's problems (a resumed run "
        "draws the same samples)",
    )
    backend: Literal["auto", "vllm", "transformers"] = Field(
        "auto", description="sampling backend; auto = vLLM when it imports, else transformers"
    )
    server: str | None = Field(
        None,
        pattern=r"^https?://",
        description="URL of a running generation server (`lead serve`) serving this model; null = start an "
        "engine in the stage",
    )
    chunk_size: int = Field(
        128, ge=1, le=1_000_000, description="problems per sampling chunk; the cache is appended after each"
    )
    bands: list[float] = Field(
        default_factory=lambda: [0.25, 0.5, 0.75],
        max_length=100,
        description="interior edges of the reported difficulty bands, strictly increasing in (0, 1)",
    )

    @model_validator(mode="after")
    def _band(self) -> CalibrateParams:
        if self.min_pass_rate >= self.max_pass_rate:
            raise _rule(
                "min_pass_rate", self.min_pass_rate, f"must be < max_pass_rate ({self.max_pass_rate})"
            )
        edges = self.bands
        if any(not 0.0 < e < 1.0 for e in edges) or edges != sorted(set(edges)):
            raise _rule("bands", edges, "edges must be strictly increasing and inside (0, 1)")
        return self


class LoraParams(Section):
    """``train.lora``: train low-rank adapters (peft) instead of every weight; merged into the saved model."""

    enabled: bool = Field(False, description="train LoRA adapters instead of every weight")
    r: int = Field(16, ge=1, le=4096, description="adapter rank")
    alpha: int = Field(32, ge=1, le=65536, description="scaling numerator (scale = alpha / r)")
    dropout: float = Field(
        0.05, ge=0.0, lt=1.0, description="dropout on the adapters' input (peft's lora_dropout)"
    )
    target_modules: str | list[str] = Field(
        "all-linear", description="peft's target_modules: 'all-linear' or a list of module names"
    )


class Stage2Params(Section):
    """``train.stage2``: the paper's later curriculum stage (continue from stage 1 on what it still finds hard)."""

    enabled: bool = Field(
        False,
        description="run stage 2 (the calibrate_stage2 and train_stage2 stages); false = they only write "
        "that it is off",
    )
    max_pass_rate: float = Field(
        STAGE2_MAX_PASS_RATE,
        ge=0.0,
        le=1.0,
        description="keep problems the stage-1 model solves at most this often (0 included)",
    )
    max_steps: int = Field(
        50,
        ge=1,
        le=10_000_000,
        description="optimizer steps of stage 2 (its own budget, not train.max_steps)",
    )
    overrides: dict[str, Any] = Field(
        default_factory=lambda: {"length_reward": False, "repetition_penalty": -1.5},
        description="train keys for stage 2 (default: the paper's, length reward off and loops -1.5)",
    )


class TrainParams(Section):
    """``train``: GRPO-LEAD on TRL's GRPOTrainer. ``batch_size`` counts completions per optimizer step.

    ``preset`` picks the method's variant (``lead.training.presets``): ``faithful`` = the reference code,
    ``paper`` = the paper's text, ``improved`` = known fixes. Keys left ``null`` take the preset's value; a
    value given here wins. ``length_reward`` (L), ``penalty`` (E) and ``reweight`` (AD) are the ablation
    switches: all three false is plain GRPO with a 0/1 accuracy reward.
    """

    preset: Literal["faithful", "paper", "improved"] = Field(
        "faithful",
        description="the method's variant (lead/training/presets.py): faithful = the reference code, paper = "
        "the paper's text, improved = known fixes; it fills every key left null",
    )
    length_reward: bool = Field(
        True,
        description="L: correct answers earn exp(-alpha z), z = length z-score among the group's correct "
        "answers; false = alpha 0",
    )
    penalty: bool = Field(
        True,
        description="E: wrong answers -1, unfinished and degenerate ones as the preset says; false = 0 for "
        "every answer that is not correct (a 0/1 reward)",
    )
    reweight: bool = Field(
        True, description="AD: advantages times a logistic weight of the group's pass rate"
    )
    alpha: float = Field(0.05, ge=0.0, le=10.0, description="L: strength of the length reward exp(-alpha z)")
    drop_uninformative: bool = Field(
        True,
        description="advantage 0 for a group whose rewards are all <= 0 or all exactly 1 (the reference code "
        "drops such groups)",
    )
    dynamic_sampling: bool = Field(
        False,
        description="refill the groups that carry no signal (drop_uninformative's rule) with groups of further "
        "prompts of the pool, generated and scored the same way, until the step's batch is all informative or "
        'max_refill_rounds were drawn (DAPO\'s dynamic sampling; docs/pipeline.md, "Dynamic sampling", says what it '
        "costs and when it pays)",
    )
    max_refill_rounds: int = Field(
        3, ge=1, le=64, description="dynamic_sampling: most refill rounds per optimizer step"
    )
    # null = the preset's value
    length_gate_tokens: int | None = Field(
        None,
        ge=0,
        description="shape lengths only in groups whose 3 shortest completions average more tokens than this; "
        "0 = off; null = the preset's (faithful: 4000, else off)",
    )
    extraction: Literal["any", "boxed", "boxed_before_think"] | None = Field(
        None,
        description="where the reward looks for the answer: boxed (the paper: the last box), "
        "boxed_before_think (the reference code: the last box before the first </think>) or any "
        "(evaluation's rule: math-verify's priority list); null = the preset's",
    )
    truncation: Literal["graded", "unfinished", "mask"] | None = Field(
        None,
        description="a completion cut at max_completion_length: graded (judged by what it wrote, as the "
        "reference code does: with </think> correct or wrong, without it unfinished), unfinished (whatever it "
        "holds) or mask (unfinished, and left out of the loss); null = the preset's (paper: unfinished, else "
        "graded)",
    )
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] | None = Field(
        None,
        description="TRL's loss (dapo: token-level; dr_grpo also drops the advantage's std scaling); null = "
        "the preset's (improved: dapo, else grpo)",
    )
    learning_rate: float | None = Field(
        None, gt=0.0, le=1.0, description="learning rate, constant; null = the preset's (1e-6)"
    )
    entropy_coef: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="weight of the entropy bonus in the loss; null = the preset's (improved: 0, else 0.001)",
    )
    epsilon_high: float | None = Field(
        None,
        ge=0.0,
        le=10.0,
        description="upper clip range (clip-higher); null = the preset's (improved: 0.28, else epsilon)",
    )
    vllm_importance_sampling_correction: bool | None = Field(
        None,
        description="TRL's correction of the vLLM/trainer logprob mismatch (use_vllm only); null = the "
        "preset's: off for faithful and paper (the paper's objective has none), on for improved",
    )
    repetition_penalty: float | None = Field(
        None,
        ge=-100.0,
        le=0.0,
        description="reward of any completion that repeats an n-gram 10 times in a row, finished or not (a "
        "long formula is no loop); null = off (the paper's later stage: -1.5)",
    )
    # optimisation and sampling
    num_generations: int = Field(8, ge=2, le=1024, description="group size G: completions sampled per prompt")
    batch_size: int = Field(
        64,
        ge=2,
        le=1_000_000,
        description="completions per optimizer step, a multiple of G (batch_size / G prompts), split over "
        "the processes",
    )
    micro_batch_tokens: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="tokens a device runs in one forward/backward: max(1, this // (curate.max_prompt_tokens + "
        "max_completion_length)) completions at a time (rounded down to divide its share of batch_size), "
        "gradients accumulated over the share: the same completions per optimizer step, one generation each; "
        "validation batches too (in whole groups); null = the whole share at once",
    )
    max_steps: int = Field(
        100, ge=1, le=10_000_000, description="optimizer steps, one freshly sampled batch each (on-policy)"
    )
    epsilon: float = Field(0.2, ge=0.0, le=10.0, description="PPO clip range")
    beta: float = Field(0.0, ge=0.0, le=100.0, description="KL coefficient (the paper uses none)")
    weight_decay: float = Field(0.01, ge=0.0, le=1.0, description="AdamW weight decay")
    max_grad_norm: float = Field(1.0, gt=0.0, le=1e6, description="gradients are clipped to this global norm")
    temperature: float = Field(1.0, gt=0.0, le=10.0, description="sampling temperature of the rollouts")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling of the rollouts (1 = off)")
    max_completion_length: int = Field(
        256, ge=1, le=131072, description="token limit of each rollout completion (see truncation)"
    )
    seed: Seed = Field(0, description="seed of training (rollout sampling, any random init) and data order")
    # checkpoints, logging, hardware
    save_steps: int = Field(25, ge=1, le=10_000_000, description="checkpoint every N steps (resume point)")
    logging_steps: int = Field(
        1, ge=1, le=10_000_000, description="log training metrics (and a table of completions) every N steps"
    )
    # validation on a dev split held out of the RL pool (never an evaluation benchmark: the pool is decontaminated)
    dev_problems: int = Field(0, ge=0, le=1_000_000, description="problems held out for validation; 0 = none")
    eval_steps: int = Field(25, ge=1, le=10_000_000, description="validate every N steps")
    checkpoint: Literal["last", "best"] = Field(
        "last",
        description="the model handed on: the last step, or the best Pass@1 on the dev split (eval_pass_at_1: "
        "judged as evaluate judges)",
    )
    stage2: Stage2Params = Field(
        Stage2Params(),
        description="the curriculum's stage 2: continue from stage 1 on what it still finds hard",
    )
    lora: LoraParams = Field(
        LoraParams(), description="low-rank adapters (peft), merged into the saved model; off = every weight"
    )
    use_vllm: bool = Field(
        False,
        description="sample rollouts with TRL's vLLM (colocate: an engine in the trainer's process, on GPU or CPU; "
        "on the 2-core default about as fast as transformers: its ~20 s start eats the faster steps)",
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate",
        description="colocate = vLLM inside each training process; server = a separate `trl vllm-serve`",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0.0, le=1.0, description="colocate: share of each GPU's memory for vLLM (weights + KV cache)"
    )
    vllm_tensor_parallel_size: int = Field(1, ge=1, le=64, description="colocate: GPUs per vLLM engine")
    vllm_enable_sleep_mode: bool = Field(
        False, description="colocate: offload vLLM's weights and KV cache during the optimizer step"
    )
    vllm_server_base_url: str | None = Field(
        None, description="server: URL of `trl vllm-serve` (null = TRL's default, localhost:8000)"
    )
    bf16: bool = Field(False, description="bfloat16 mixed precision (CUDA only; ignored on CPU)")
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in the backward pass: less memory, more time"
    )
    trust_remote_code: bool = Field(
        False, description="let transformers run the model repository's own code when loading it"
    )
    grpo_config: dict[str, Any] = Field(
        default_factory=dict,
        description="other fields of TRL's GRPOConfig (trl.GRPOConfig), passed to it as given, e.g. "
        "{logging_first_step: true}; a name that is not a GRPOConfig field, or one the pipeline sets from these "
        "params (learning_rate: use train.learning_rate, ...), is refused before any work",
    )

    @model_validator(mode="after")
    def _groups(self) -> TrainParams:
        init = self.grpo_config.get("model_init_kwargs")
        if isinstance(init, dict) and "trust_remote_code" in init:
            # One switch for running a repository's own code, read by every stage that loads a model.
            raise _rule(
                "grpo_config",
                {"model_init_kwargs": {"trust_remote_code": init["trust_remote_code"]}},
                "set train.trust_remote_code instead (the one switch for a model repository's own code)",
            )
        if self.batch_size % self.num_generations:
            raise _rule(
                "num_generations",
                self.num_generations,
                f"must divide batch_size ({self.batch_size}) so that every group of completions is whole",
            )
        if self.stage2.overrides:
            self.stage2_train()  # stage 2's settings must be valid train settings too
        if self.checkpoint == "best":
            if not self.dev_problems:
                raise _rule("checkpoint", "best", "needs a dev split: set train.dev_problems > 0")
            if self.save_steps % self.eval_steps:
                raise _rule(
                    "save_steps",
                    self.save_steps,
                    f"must be a multiple of eval_steps ({self.eval_steps}) to keep the best checkpoint",
                )
        return self

    def stage2_train(self) -> TrainParams:
        """The train settings of curriculum stage 2: these, with ``stage2.overrides`` and its step budget."""
        bad = sorted(set(self.stage2.overrides) & {"stage2", "max_steps"})
        if bad:
            raise _rule("stage2.overrides", bad, "set stage 2's steps with stage2.max_steps")
        data = self.model_dump()
        data.update(self.stage2.overrides, max_steps=self.stage2.max_steps, stage2=Stage2Params(overrides={}))
        try:
            return TrainParams.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, ValueError) and len(cause.args) == 3:  # a _rule: (rule, key, value)
                rule, key, value = cause.args
                why = f"{key} = {value} in stage 2: {rule}"
            else:
                why = f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
            raise _rule("stage2.overrides", self.stage2.overrides, why) from None
