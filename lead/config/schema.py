"""The schema of ``params.yaml``: one pydantic model per section, pure (no file is read here).

Every section is a model with ``extra="forbid"`` so a typo is an error rather than a silently ignored knob;
ranges and choices are declared on the fields; cross-field rules (a group size that must divide the batch,
...) are validators, which raise :func:`_rule` errors that :mod:`lead.config.load` turns into one message
naming the key, its value and the rule. Every field carries its ``description``: the one place a key's meaning
is written for tools (``lead params --explain KEY``, ``params.schema.json``).

DVC reads the same file (``params:`` in ``dvc.yaml``), so a section's name is also the stage's name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from lead.difficulty import STAGE2_MAX_PASS_RATE
from lead.proxy import Verbosity

PAPER_PROMPT_SUFFIX = "\nLet's think step by step and put the final answer within \\boxed{}."


# Random seeds: numpy and torch take 0 .. 2**32 - 1.
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]


def _rule(key: str, value: object, rule: str) -> ValueError:
    """A cross-field error naming the key (inside its section), its value and the rule it breaks."""
    return ValueError(rule, key, value)


def _numeric(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float``, optionally ``None``, a list of them...)."""
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in get_args(annotation))


class Section(BaseModel):
    """Base of every params section: unknown keys are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads true as 1: `max_steps: true` would train one step. A boolean is never a count.
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _numeric(field.annotation) or _accepts_bool(field.annotation):
            return value
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the boolean {value}")
        if isinstance(value, list) and any(isinstance(v, bool) for v in value):
            raise ValueError(f"expected numbers, got booleans in {value}")
        return value


def _accepts_bool(annotation: Any) -> bool:
    return annotation is bool or any(_accepts_bool(a) for a in get_args(annotation))


def yaml_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by their ``params.yaml`` key (the alias where there is one: ``register``)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def section_type(annotation: Any) -> type[Section] | None:
    """The section a field holds: its own type, or the entry type of a list of sections (``curate.sources``)."""
    for kind in (annotation, *get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, Section):
            return kind
    return None


class TinySpec(Section):
    """``model.tiny``: the shape of the locally built Qwen2 (used when ``model.base: tiny``)."""

    vocab_size: int = Field(512, ge=300, le=65536, description="BPE vocabulary cap (>= 256 bytes + specials)")
    hidden_size: int = Field(128, ge=32, le=4096)
    num_layers: int = Field(4, ge=1, le=64)
    num_heads: int = Field(4, ge=1, le=64)
    num_kv_heads: int = Field(4, ge=1, le=64)
    head_dim: int = Field(32, ge=32, le=256, description="vLLM's CPU backend needs >= 32")
    intermediate_size: int = Field(384, ge=32, le=65536)
    max_position_embeddings: int = Field(512, ge=64, le=131072)

    @model_validator(mode="after")
    def _heads(self) -> TinySpec:
        if self.num_heads % self.num_kv_heads:
            raise _rule("num_kv_heads", self.num_kv_heads, f"must divide num_heads ({self.num_heads})")
        return self


class ModelParams(Section):
    """``model``: which base model the pipeline starts from."""

    base: str = Field("tiny", min_length=1, description="'tiny' (built locally) or a hub id / local path")
    tiny: TinySpec = TinySpec()
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    prompt_suffix: str = PAPER_PROMPT_SUFFIX

    @property
    def is_tiny(self) -> bool:
        return self.base == "tiny"


class PathParams(Section):
    """``paths``: where each stage reads and writes, relative to the repository root."""

    raw: Path = Path("data/raw")
    curated: Path = Path("data/curated")
    models: Path = Path("models")
    reports: Path = Path("reports")


class TrackingParams(Section):
    """``tracking``: MLflow. ``uri: null`` means an sqlite file at the repository root (absolute URI)."""

    uri: str | None = Field(
        None,
        description="an MLflow tracking URI with its scheme (http(s)://host:port, sqlite:///abs/path.db, "
        "file:///abs/folder, databricks, ...); null = sqlite file mlflow.db at the repository root",
    )
    experiment: str = Field("lead", min_length=1)

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        # "databricks" (MLflow's name for a workspace's own server) is the one URI without a scheme.
        if (
            value is not None
            and value != "databricks"
            and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:\S+", value)
        ):
            raise ValueError(
                "must be a URI with its scheme, e.g. http://127.0.0.1:5000 or sqlite:////abs/path/mlflow.db"
            )
        return value


class ProxyParams(Section):
    """``curate.proxy``: the synthetic arithmetic-chain task (see ``lead.proxy``)."""

    train_problems: int = Field(1200, ge=1, le=1_000_000)
    test_per_level: int = Field(50, ge=1, le=100_000)
    min_ops: int = Field(1, ge=1, le=20)
    max_ops: int = Field(6, ge=1, le=20)
    max_value: int = Field(99, ge=9, le=10_000)

    @model_validator(mode="after")
    def _levels(self) -> ProxyParams:
        if self.min_ops > self.max_ops:
            raise _rule("min_ops", self.min_ops, f"must be <= max_ops ({self.max_ops})")
        return self


class SourceSpec(Section):
    """One entry of ``curate.sources``: where problems come from, and how many of them to take.

    ``path`` is a built-in name (``proxy``, or a shipped file under ``paths.raw``: ``math_train``,
    ``grpo_lead_stage23``, ``grpo_lead_combined27``, ``deepscaler_aime``, ``deepscaler_math``), a local
    ``.jsonl``/``.json``/``.parquet`` file or dataset folder, or a Hugging Face dataset id (``split``/``config``
    pick the part; downloads need ``HF_DATASETS_OFFLINE=0``). ``name`` labels the problems (``source`` column,
    report). ``max_problems`` caps what this source keeps after filtering; ``weight`` is its share of
    ``curate.max_train_problems``.
    """

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    path: str = Field(min_length=1)
    weight: float = Field(1.0, gt=0.0, le=1e6)
    max_problems: int | None = Field(None, ge=1, le=100_000_000)
    split: str = Field("train", min_length=1, description="hub datasets: the split to load")
    config: str | None = Field(None, min_length=1, description="hub datasets: the configuration name")


class CurateParams(Section):
    """``curate``: which problems the pipeline trains and evaluates on, and how they are cleaned.

    ``lead.curation`` documents each step (answer normalisation, gradable-gold check, prompt length, exact and
    near-duplicate removal, decontamination against the evaluation benchmarks, mixing).
    """

    seed: Seed = 0
    sources: list[SourceSpec] = Field(
        default_factory=lambda: [SourceSpec(name="proxy", path="proxy")], min_length=1
    )
    max_train_problems: int | None = Field(
        None, ge=1, le=100_000_000, description="total training pool, shared by source weight; null = all"
    )
    max_prompt_tokens: int = Field(1024, ge=8, le=1_000_000, description="problem + prompt suffix")
    near_duplicate_jaccard: float = Field(
        0.9, gt=0.0, le=1.0, description="word 5-gram Jaccard at which two problems are near-duplicates"
    )
    decontam_ngram: int = Field(8, ge=3, le=50, description="word n-gram length for decontamination")
    decontam_coverage: float = Field(
        0.5, gt=0.0, le=1.0, description="contaminated at this coverage of a benchmark problem, same answer"
    )
    decontam_coverage_any_answer: float = Field(
        0.8, gt=0.0, le=1.0, description="contaminated at this coverage whatever the answer"
    )
    proxy: ProxyParams = ProxyParams()

    @model_validator(mode="after")
    def _sources(self) -> CurateParams:
        if self.decontam_coverage > self.decontam_coverage_any_answer:
            raise _rule(
                "decontam_coverage",
                self.decontam_coverage,
                f"must be <= decontam_coverage_any_answer ({self.decontam_coverage_any_answer})",
            )
        names = [s.name for s in self.sources]
        for name in names:
            if names.count(name) > 1:
                raise _rule("sources", name, "source names must be unique")
        if self.max_train_problems is None:
            for s in self.sources:
                if s.weight != 1.0:
                    raise _rule(
                        "sources",
                        f"{s.name}.weight={s.weight}",
                        "weights only share out curate.max_train_problems: set it, or drop the weight",
                    )
        return self


_VERBOSITY = Verbosity()


class VerbosityParams(Section):
    """``warmstart.verbosity``: probabilities of each habit in the proxy warm-start traces (``lead.proxy``)."""

    restate: float = Field(_VERBOSITY.restate, ge=0.0, le=1.0)
    plan: float = Field(_VERBOSITY.plan, ge=0.0, le=1.0)
    check: float = Field(_VERBOSITY.check, ge=0.0, le=1.0)
    reverify: float = Field(_VERBOSITY.reverify, ge=0.0, le=1.0)
    summary: float = Field(_VERBOSITY.summary, ge=0.0, le=1.0)
    slip: float = Field(_VERBOSITY.slip, ge=0.0, le=1.0, description="per-step chance of an arithmetic slip")
    fix: float = Field(_VERBOSITY.fix, ge=0.0, le=1.0, description="chance a slip is caught with 'Wait'")

    def to_verbosity(self) -> Verbosity:
        return Verbosity(**self.model_dump())


class ReportParams(Section):
    """``warmstart.report``: how ``lead warmstart --report`` samples the warm-started model."""

    problems_per_level: int = Field(20, ge=1, le=10_000)
    samples: int = Field(8, ge=2, le=1024)
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    max_new_tokens: int = Field(256, ge=1, le=131072)
    seed: Seed = 0


class WarmstartParams(Section):
    """``warmstart``: supervised fine-tuning (TRL ``SFTTrainer``) before RL.

    With ``model.base: tiny`` the SFT set is verbose proxy traces; with a real model, ``dataset`` names a hub
    dataset or a local jsonl/parquet with ``prompt``/``completion`` (or ``problem``/``solution``) columns.
    """

    enabled: bool = True
    seed: Seed = 0
    dataset: str = Field("proxy", min_length=1)
    examples: int = Field(19200, ge=1, le=10_000_000, description="proxy traces to draw (ignored otherwise)")
    verbosity: VerbosityParams = VerbosityParams()
    learning_rate: float = Field(3e-3, gt=0.0, le=1.0)
    batch_size: int = Field(32, ge=1, le=65536)
    epochs: float = Field(1.0, gt=0.0, le=1000.0)
    warmup_ratio: float = Field(0.03, ge=0.0, lt=1.0)
    weight_decay: float = Field(0.01, ge=0.0, le=1.0)
    max_length: int = Field(512, ge=16, le=131072)
    report: ReportParams = ReportParams()


class CalibrateParams(Section):
    """``calibrate``: per-problem pass rates of the current model, and the difficulty band kept for RL."""

    samples: int = Field(8, ge=1, le=1024)
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    max_new_tokens: int = Field(256, ge=1, le=131072)
    min_pass_rate: float = Field(0.0, ge=0.0, le=1.0, description="keep problems with pass rate > this")
    max_pass_rate: float = Field(1.0, ge=0.0, le=1.0, description="keep problems with pass rate < this")
    keep_inclusive: Literal["neither", "both", "left", "right"] = Field(
        "neither", description="which ends of the keep band are closed (both: min <= p <= max)"
    )
    seed: Seed = 0
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

    enabled: bool = False
    r: int = Field(16, ge=1, le=4096, description="adapter rank")
    alpha: int = Field(32, ge=1, le=65536, description="scaling numerator (scale = alpha / r)")
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: str | list[str] = Field("all-linear", description="peft's target_modules")


class Stage2Params(Section):
    """``train.stage2``: the paper's later curriculum stage (continue from stage 1 on what it still finds hard)."""

    enabled: bool = False
    max_pass_rate: float = Field(
        STAGE2_MAX_PASS_RATE,
        ge=0.0,
        le=1.0,
        description="keep problems the stage-1 model solves at most this often (0 included)",
    )
    max_steps: int = Field(50, ge=1, le=10_000_000)
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

    preset: Literal["faithful", "paper", "improved"] = "faithful"
    length_reward: bool = True
    penalty: bool = True
    reweight: bool = True
    alpha: float = Field(0.05, ge=0.0, le=10.0, description="L: strength of the length reward exp(-alpha z)")
    drop_uninformative: bool = True
    # null = the preset's value
    length_gate_tokens: int | None = Field(
        None, ge=0, description="shape only groups longer than this; 0 = off"
    )
    extraction: Literal["any", "boxed", "boxed_before_think"] | None = Field(
        None,
        description="where the reward looks for the answer: boxed (the paper: the last box), "
        "boxed_before_think (the reference code: the last box before the first </think>) or any "
        "(evaluation's rule: math-verify's priority list); null = the preset's",
    )
    truncation: Literal["unfinished", "wrong", "mask"] | None = None
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] | None = None
    learning_rate: float | None = Field(None, gt=0.0, le=1.0)
    entropy_coef: float | None = Field(None, ge=0.0, le=1.0)
    epsilon_high: float | None = Field(None, ge=0.0, le=10.0)
    vllm_importance_sampling_correction: bool | None = Field(
        None,
        description="TRL's correction of the vLLM/trainer logprob mismatch (use_vllm only); null = the "
        "preset's: off for faithful and paper (the paper's objective has none), on for improved",
    )
    repetition_penalty: float | None = Field(
        None,
        ge=-100.0,
        le=0.0,
        description="reward of any completion that loops (the repetition detector), finished or not; "
        "null = off (the paper's later stage: -1.5)",
    )
    # optimisation and sampling
    num_generations: int = Field(8, ge=2, le=1024, description="group size G")
    batch_size: int = Field(64, ge=2, le=1_000_000, description="completions per step; a multiple of G")
    max_steps: int = Field(100, ge=1, le=10_000_000)
    epsilon: float = Field(0.2, ge=0.0, le=10.0, description="PPO clip range")
    beta: float = Field(0.0, ge=0.0, le=100.0, description="KL coefficient (the paper uses none)")
    weight_decay: float = Field(0.01, ge=0.0, le=1.0)
    max_grad_norm: float = Field(1.0, gt=0.0, le=1e6)
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_completion_length: int = Field(256, ge=1, le=131072)
    seed: Seed = 0
    # checkpoints, logging, hardware
    save_steps: int = Field(25, ge=1, le=10_000_000, description="checkpoint every N steps (resume point)")
    logging_steps: int = Field(5, ge=1, le=10_000_000)
    # validation on a dev split held out of the RL pool (never an evaluation benchmark: the pool is decontaminated)
    dev_problems: int = Field(0, ge=0, le=1_000_000, description="problems held out for validation; 0 = none")
    eval_steps: int = Field(25, ge=1, le=10_000_000, description="validate every N steps")
    checkpoint: Literal["last", "best"] = Field(
        "last", description="the model handed on: the last step, or the best Pass@1 on the dev split"
    )
    stage2: Stage2Params = Stage2Params()
    lora: LoraParams = LoraParams()
    use_vllm: bool = False
    vllm_mode: Literal["colocate", "server"] = "colocate"
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
    bf16: bool = False
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False

    @model_validator(mode="after")
    def _groups(self) -> TrainParams:
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


BENCHMARKS = ("proxy", "aime24", "aime25", "math500", "amc23")


class EvaluateParams(Section):
    """``evaluate``: sampling protocol and benchmarks (the paper's is 32 samples, T=0.6, min_p=0.01)."""

    benchmarks: list[Literal[BENCHMARKS]] = Field(default_factory=lambda: ["proxy"], min_length=1)
    samples: int = Field(8, ge=1, le=1024)
    temperature: float = Field(0.6, ge=0.0, le=10.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    min_p: float = Field(0.0, ge=0.0, lt=1.0)
    max_new_tokens: int = Field(256, ge=1, le=131072)
    seed: Seed = 0
    repeats: int = Field(
        1, ge=1, le=100, description="re-sample with seeds seed..seed+repeats-1; report the spread"
    )
    model: str = Field(
        "warmstart",
        min_length=1,
        description="a name = <paths.models>/<name> (warmstart, train); a value with '/' or an existing path as is",
    )
    backend: Literal["auto", "vllm", "transformers"] = "auto"
    max_problems: int | None = Field(None, ge=1, description="first N problems of each benchmark; null = all")
    budgets: list[int] = Field(
        default_factory=lambda: [64, 128, 256], description="token budgets the same samples are rescored at"
    )

    @model_validator(mode="after")
    def _budgets(self) -> EvaluateParams:
        if any(b < 1 for b in self.budgets):
            raise _rule("budgets", self.budgets, "every budget must be a positive number of tokens")
        if self.temperature == 0 and self.samples > 1:
            raise _rule(
                "samples", self.samples, "must be 1 with temperature 0 (greedy decoding repeats itself)"
            )
        return self


class RegisterParams(Section):
    """``register``: the MLflow registered model and the gate that promotes a challenger to champion."""

    model_name: str = Field("lead-proxy", min_length=1)
    pass_tolerance: float = Field(0.01, ge=0.0, le=1.0, description="allowed Pass@1 drop per benchmark")
    length_tolerance: float = Field(0.0, ge=0.0, le=10.0, description="allowed relative length increase")


AblationVariant = Literal["grpo", "grpo_l", "grpo_l_ad", "lead", "improved"]


class AblationParams(Section):
    """``ablation``: ``lead ablation`` — the paper's ablation on the proxy (variants x seeds, one budget)."""

    variants: list[AblationVariant] = Field(
        default_factory=lambda: ["grpo", "grpo_l", "grpo_l_ad", "lead"], min_length=1
    )
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    max_steps: int | None = Field(None, ge=1, description="RL steps per run; null = train.max_steps")

    @model_validator(mode="after")
    def _unique(self) -> AblationParams:
        if len(set(self.variants)) != len(self.variants) or len(set(self.seeds)) != len(self.seeds):
            raise _rule("variants", self.variants, "variants and seeds must not repeat")
        return self


class Params(Section):
    """All of ``params.yaml``."""

    model: ModelParams = ModelParams()
    paths: PathParams = PathParams()
    tracking: TrackingParams = TrackingParams()
    curate: CurateParams = CurateParams()
    warmstart: WarmstartParams = WarmstartParams()
    calibrate: CalibrateParams = CalibrateParams()
    train: TrainParams = TrainParams()
    evaluate: EvaluateParams = EvaluateParams()
    # `register` would shadow BaseModel.register: keep the YAML key, rename the attribute.
    register_: RegisterParams = Field(RegisterParams(), alias="register")
    ablation: AblationParams = AblationParams()

    @model_validator(mode="after")
    def _stage2_model(self) -> Params:
        if self.evaluate.model == "train_stage2" and not self.train.stage2.enabled:
            raise ValueError(
                "evaluate.model = 'train_stage2' needs the curriculum's stage 2: set train.stage2.enabled: true "
                "(or evaluate train)"
            )
        return self
