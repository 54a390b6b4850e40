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
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from lead.core.difficulty import STAGE2_MAX_PASS_RATE
from lead.core.proxy import Verbosity

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

    vocab_size: int = Field(
        512,
        ge=300,
        le=65536,
        description="most tokens the byte-level BPE tokenizer is trained to (256 byte symbols and 4 special "
        "tokens included; <think> and </think> are added on top)",
    )
    hidden_size: int = Field(128, ge=32, le=4096, description="width of the residual stream (embedding size)")
    num_layers: int = Field(4, ge=1, le=64, description="transformer decoder layers")
    num_heads: int = Field(4, ge=1, le=64, description="attention (query) heads per layer")
    num_kv_heads: int = Field(
        4,
        ge=1,
        le=64,
        description="key/value heads per layer (grouped-query attention); must divide num_heads",
    )
    head_dim: int = Field(
        32, ge=32, le=256, description="size of each attention head (vLLM's CPU backend needs >= 32)"
    )
    intermediate_size: int = Field(384, ge=32, le=65536, description="hidden width of each layer's MLP")
    max_position_embeddings: int = Field(
        512,
        ge=64,
        le=131072,
        description="context window in tokens (prompt + completion): evaluate does not sample a problem whose "
        "prompt leaves fewer than evaluate.max_new_tokens",
    )

    @model_validator(mode="after")
    def _heads(self) -> TinySpec:
        if self.num_heads % self.num_kv_heads:
            raise _rule("num_kv_heads", self.num_kv_heads, f"must divide num_heads ({self.num_heads})")
        return self


class ModelParams(Section):
    """``model``: which base model the pipeline starts from."""

    base: str = Field(
        "tiny",
        min_length=1,
        description="'tiny' (tokenizer and model built locally from model.tiny) or a hub id / local path of a "
        "causal language model",
    )
    tiny: TinySpec = Field(TinySpec(), description="shape of the tiny model (used only when base is 'tiny')")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="dtype a real base model is loaded in for the warm start, and models are sampled in "
        "(vLLM runs float32 as bfloat16)",
    )
    prompt_suffix: str = Field(
        PAPER_PROMPT_SUFFIX,
        description="appended to every problem in the one user message (curate's length check, warm start, "
        "calibration, training, evaluation); default: the paper's instruction",
    )

    @property
    def is_tiny(self) -> bool:
        return self.base == "tiny"


class PathParams(Section):
    """``paths``: where each stage reads and writes, relative to the repository root."""

    raw: Path = Field(
        Path("data/raw"),
        description="shipped source data: the built-in curate.sources files and the evaluation benchmarks "
        "(data/raw/README.md)",
    )
    curated: Path = Field(
        Path("data/curated"),
        description="curate's training pool and test split, the calibrated pools",
    )
    models: Path = Field(
        Path("models"),
        description="trained models (<models>/warmstart, train, train_stage2)",
    )
    reports: Path = Field(Path("reports"), description="metrics, plots and summaries, one entry per stage")
    resume: Path = Field(
        Path("resume"),
        description="what stages read back themselves, keyed by content (calibration caches, training "
        "checkpoints): outside DVC, not pushed; deleting it costs recomputation, never a wrong result",
    )


class TrackingParams(Section):
    """``tracking``: MLflow. ``uri: null`` means an sqlite file at the repository root (absolute URI)."""

    uri: str | None = Field(
        None,
        description="an MLflow tracking URI with its scheme (http(s)://host:port, sqlite:///abs/path.db, "
        "file:///abs/folder, databricks, ...); null = sqlite file mlflow.db at the repository root",
    )
    experiment: str = Field(
        "lead",
        min_length=1,
        description="MLflow experiment every stage logs its run in (created when missing)",
    )

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
    """``curate.proxy``: the synthetic arithmetic-chain task (see ``lead.core.proxy``)."""

    train_problems: int = Field(
        1200,
        ge=1,
        le=1_000_000,
        description="distinct training problems drawn for a 'proxy' source (level 1 holds only ~165: the "
        "other levels fill its share)",
    )
    test_per_level: int = Field(
        50, ge=1, le=100_000, description="test-split problems per level (the 'proxy' evaluation benchmark)"
    )
    min_ops: int = Field(1, ge=1, le=20, description="fewest operations in a chain: the easiest level")
    max_ops: int = Field(6, ge=1, le=20, description="most operations in a chain: the hardest level")
    max_value: int = Field(
        99, ge=9, le=10_000, description="every start and running value stays in [0, max_value]"
    )

    @model_validator(mode="after")
    def _levels(self) -> ProxyParams:
        if self.min_ops > self.max_ops:
            raise _rule("min_ops", self.min_ops, f"must be <= max_ops ({self.max_ops})")
        return self


class SourceSpec(Section):
    """One entry of ``curate.sources``: where problems come from, and how many of them to take."""

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="label of this source's problems (the source column, the curation report); unique",
    )
    path: str = Field(
        min_length=1,
        description="proxy (generated), a shipped file under paths.raw by name (math_train, grpo_lead_stage23, "
        "grpo_lead_combined27, deepscaler_aime, deepscaler_math), a local .jsonl/.json/.parquet file or dataset "
        "folder, or a Hugging Face dataset id (a download needs HF_DATASETS_OFFLINE=0)",
    )
    weight: float = Field(
        1.0,
        gt=0.0,
        le=1e6,
        description="this source's share of curate.max_train_problems (needs it set), relative to the other "
        "sources' weights",
    )
    max_problems: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="most problems kept from this source after filtering; null = all",
    )
    split: str = Field("train", min_length=1, description="hub datasets: the split to load")
    config: str | None = Field(None, min_length=1, description="hub datasets: the configuration name")


class CurateParams(Section):
    """``curate``: which problems the pipeline trains and evaluates on, and how they are cleaned.

    ``lead.core.curation`` documents each step (answer normalisation, gradable-gold check, prompt length, exact and
    near-duplicate removal, decontamination against the evaluation benchmarks, mixing).
    """

    seed: Seed = Field(
        0, description="seed of the proxy problems drawn and of each source's sample when it is cut down"
    )
    sources: list[SourceSpec] = Field(
        default_factory=lambda: [SourceSpec(name="proxy", path="proxy")],
        min_length=1,
        description="where problems come from, in priority order (the first copy of a duplicate wins); "
        "recipes/curate-real.yaml curates the shipped real datasets",
    )
    max_train_problems: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="total training pool, shared out by source weight; null = keep every problem that passes",
    )
    max_prompt_tokens: int = Field(
        1024,
        ge=8,
        le=1_000_000,
        description="longest problem + prompt suffix kept, in tokens of model.base's tokenizer with its chat "
        "template (else estimated from characters); longer ones are quarantined",
    )
    near_duplicate_jaccard: float = Field(
        0.9,
        gt=0.0,
        le=1.0,
        description="word 5-gram Jaccard similarity at which two problems with the same answer are "
        "near-duplicates",
    )
    decontam_ngram: int = Field(
        8, ge=3, le=50, description="length in words of the n-grams shared with the evaluation benchmarks"
    )
    decontam_coverage: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="contaminated when shared n-grams cover this share of a benchmark problem's words and the "
        "answers are equal",
    )
    decontam_coverage_any_answer: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description="contaminated when shared n-grams cover this share, whatever the answer",
    )
    proxy: ProxyParams = Field(
        ProxyParams(),
        description="the proxy task's arithmetic chains: training problems and test split (the warm-start "
        "traces use its levels and values too)",
    )

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
    """``warmstart.verbosity``: probabilities of each habit in the proxy warm-start traces (``lead.core.proxy``)."""

    restate: float = Field(
        _VERBOSITY.restate, ge=0.0, le=1.0, description="chance a trace opens by restating the problem"
    )
    plan: float = Field(
        _VERBOSITY.plan, ge=0.0, le=1.0, description="chance of an 'I will go step by step.' line"
    )
    check: float = Field(
        _VERBOSITY.check,
        ge=0.0,
        le=1.0,
        description="per step: chance of a redundant 'Let me double-check' line",
    )
    reverify: float = Field(
        _VERBOSITY.reverify, ge=0.0, le=1.0, description="chance of writing every step out again at the end"
    )
    summary: float = Field(
        _VERBOSITY.summary,
        ge=0.0,
        le=1.0,
        description="chance of a closing 'So the final result is ...' line",
    )
    slip: float = Field(
        _VERBOSITY.slip, ge=0.0, le=1.0, description="per step: chance of an arithmetic slip (off by 1 to 3)"
    )
    fix: float = Field(
        _VERBOSITY.fix,
        ge=0.0,
        le=1.0,
        description="chance a slip is corrected after 'Wait, that is wrong.' (else it propagates to the answer)",
    )

    def to_verbosity(self) -> Verbosity:
        return Verbosity(**self.model_dump())


class ReportParams(Section):
    """``warmstart.report``: how ``lead warmstart --report`` samples the warm-started model."""

    problems_per_level: int = Field(
        20,
        ge=1,
        le=10_000,
        description="proxy training problems sampled per level (the first ones, curate's order)",
    )
    samples: int = Field(8, ge=2, le=1024, description="completions sampled per problem")
    temperature: float = Field(1.0, gt=0.0, le=10.0, description="sampling temperature")
    max_new_tokens: int = Field(256, ge=1, le=131072, description="token limit of each completion")
    seed: Seed = Field(0, description="sampling seed")


class WarmstartParams(Section):
    """``warmstart``: supervised fine-tuning (TRL ``SFTTrainer``) before RL.

    With ``model.base: tiny`` the SFT set is verbose proxy traces; with a real model, ``dataset`` names a hub
    dataset or a local jsonl/parquet with ``prompt``/``completion`` (or ``problem``/``solution``) columns.
    """

    enabled: bool = Field(True, description="false = no fine-tuning: later stages start from model.base")
    seed: Seed = Field(0, description="seed of the proxy traces, the tiny model's initial weights and SFT")
    dataset: str = Field(
        "proxy",
        min_length=1,
        description="'proxy' (verbose proxy traces; needs model.base: tiny) or a hub id / local "
        ".jsonl/.json/.parquet with prompt/completion or problem/solution columns",
    )
    examples: int = Field(
        19200, ge=1, le=10_000_000, description="proxy traces to draw, train split only (ignored otherwise)"
    )
    verbosity: VerbosityParams = Field(
        VerbosityParams(),
        description="habits of the proxy traces, verbose on purpose so that the length reward has something "
        "to remove",
    )
    learning_rate: float = Field(
        3e-3, gt=0.0, le=1.0, description="peak learning rate (cosine schedule after the warm-up)"
    )
    batch_size: int = Field(32, ge=1, le=65536, description="sequences per device per optimizer step")
    epochs: float = Field(
        1.0,
        gt=0.0,
        le=1000.0,
        description="passes over the SFT set (fractions allowed); the tiny model trains exactly "
        "round(epochs * examples / batch_size) steps",
    )
    warmup_ratio: float = Field(
        0.03, ge=0.0, lt=1.0, description="share of the steps over which the learning rate warms up"
    )
    weight_decay: float = Field(0.01, ge=0.0, le=1.0, description="AdamW weight decay")
    max_length: int = Field(
        512, ge=16, le=131072, description="SFT sequence limit in tokens (prompt + completion; longer is cut)"
    )
    report: ReportParams = Field(
        ReportParams(), description="`lead warmstart --report`: sampling the warm-started model by level"
    )


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

    benchmarks: list[Literal[BENCHMARKS]] = Field(
        default_factory=lambda: ["proxy"],
        min_length=1,
        description="benchmarks scored: proxy (curate's proxy test split), aime24, aime25, math500, amc23 "
        "(shipped under paths.raw)",
    )
    samples: int = Field(
        8,
        ge=1,
        le=1024,
        description="completions per problem n: Pass@1 = mean correctness, Cons@n = majority vote",
    )
    temperature: float = Field(
        0.6, ge=0.0, le=10.0, description="sampling temperature; 0 = greedy (then samples must be 1)"
    )
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling (1 = off)")
    min_p: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="drop tokens less likely than min_p x the top token's probability (0 = off; the paper: 0.01)",
    )
    max_new_tokens: int = Field(
        256,
        ge=1,
        le=131072,
        description="token limit of each completion; a problem whose prompt leaves less room in the model's "
        "context is not sampled (counted unanswered)",
    )
    seed: Seed = Field(0, description="sampling seed (each prompt's seed is a hash of it and the prompt)")
    repeats: int = Field(
        1, ge=1, le=100, description="re-sample with seeds seed..seed+repeats-1; report the spread"
    )
    model: str = Field(
        "warmstart",
        min_length=1,
        description="a name = <paths.models>/<name> (warmstart, train); a value with '/' or an existing path as is",
    )
    backend: Literal["auto", "vllm", "transformers"] = Field(
        "auto", description="sampling backend; auto = vLLM when it imports, else transformers"
    )
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

    model_name: str = Field(
        "lead-proxy", min_length=1, description="MLflow registered model the trained model is a version of"
    )
    pass_tolerance: float = Field(
        0.01,
        ge=0.0,
        le=1.0,
        description="champion gate: largest Pass@1 drop (absolute) allowed on any benchmark",
    )
    length_tolerance: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="champion gate: largest relative Len_avg increase allowed on any benchmark (0.1 = 10 %)",
    )
    on_experiment: bool = Field(
        False,
        description="register under `dvc exp run` too; by default an experiment's register stage only records "
        "that it registered nothing (sweeps are compared with `dvc exp show`, not pushed into the registry)",
    )


# The paper's ablation (GRPO-LEAD.md): each variant is the train keys it sets over params.yaml's ``train:``.
DEFAULT_VARIANTS: dict[str, dict[str, Any]] = {
    "grpo": {"length_reward": False, "penalty": False, "reweight": False},
    "grpo_l": {"length_reward": True, "penalty": False, "reweight": False},
    "grpo_l_ad": {"length_reward": True, "penalty": False, "reweight": True},
    "lead": {"length_reward": True, "penalty": True, "reweight": True},
}
VariantName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)]


class AblationParams(Section):
    """``ablation``: the paper's ablation on the proxy, the DVC pipeline ``ablation/dvc.yaml`` (one cell per
    variant x seed, trained and evaluated alike, then one report)."""

    variants: dict[VariantName, dict[str, Any]] = Field(
        default_factory=lambda: {k: dict(v) for k, v in DEFAULT_VARIANTS.items()},
        min_length=1,
        description="name -> the train keys it sets over train: (grpo = L, E, AD off; grpo_l; grpo_l_ad; "
        "lead = GRPO-LEAD; e.g. lead_faithful: {preset: faithful}); a cell reruns only when its own "
        "variant's keys change",
    )
    seeds: list[Seed] = Field(
        default_factory=lambda: [0, 1, 2, 3, 4],
        min_length=1,
        description="one cell per variant and seed (its train.seed and evaluate.seed); the warm start is "
        "evaluated with each seed too, so every comparison is paired by seed",
    )
    max_steps: int | None = Field(None, ge=1, description="RL steps per cell; null = train.max_steps")

    @model_validator(mode="after")
    def _unique(self) -> AblationParams:
        if len(set(self.seeds)) != len(self.seeds):
            raise _rule("seeds", self.seeds, "seeds must not repeat")
        for name, keys in self.variants.items():
            bad = sorted(set(keys) & {"seed", "max_steps", "stage2"})
            if bad:
                raise _rule(
                    f"variants.{name}",
                    bad,
                    "a variant sets train keys; seeds and steps are ablation.seeds and ablation.max_steps",
                )
        return self

    def variant_train(self, train: TrainParams, name: str, seed: int) -> TrainParams:
        """``train`` with variant ``name``'s keys, ``seed`` and the ablation's step budget (validated)."""
        data = train.model_dump()
        data.update(self.variants[name], seed=seed, max_steps=self.max_steps or train.max_steps)
        try:
            return TrainParams.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise _rule(
                f"variants.{name}", self.variants[name], f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
            ) from None


class Params(Section):
    """All of ``params.yaml``."""

    model: ModelParams = Field(ModelParams(), description="the base model every stage starts from")
    paths: PathParams = Field(
        PathParams(), description="where stages read and write, from the repository root"
    )
    tracking: TrackingParams = Field(TrackingParams(), description="MLflow: tracking store and experiment")
    curate: CurateParams = Field(CurateParams(), description="stage curate: the training pool and test split")
    warmstart: WarmstartParams = Field(
        WarmstartParams(), description="stage warmstart: supervised fine-tuning before RL"
    )
    calibrate: CalibrateParams = Field(
        CalibrateParams(),
        description="stage calibrate: pass rates and the band kept for RL (calibrate_stage2 samples alike)",
    )
    train: TrainParams = Field(
        TrainParams(), description="stage train: GRPO-LEAD (and stage 2's train_stage2)"
    )
    evaluate: EvaluateParams = Field(EvaluateParams(), description="stage evaluate: benchmarks and sampling")
    # `register` would shadow BaseModel.register: keep the YAML key, rename the attribute.
    register_: RegisterParams = Field(
        RegisterParams(), alias="register", description="stage register: MLflow registry and champion gate"
    )
    ablation: AblationParams = Field(
        AblationParams(),
        description="the paper's ablation on the proxy (ablation/dvc.yaml, `make ablation`): variants x seeds",
    )

    @model_validator(mode="after")
    def _stage2_model(self) -> Params:
        if self.evaluate.model == "train_stage2" and not self.train.stage2.enabled:
            raise ValueError(
                "evaluate.model = 'train_stage2' needs the curriculum's stage 2: set train.stage2.enabled: true "
                "(or evaluate train)"
            )
        return self

    @model_validator(mode="after")
    def _ablation_variants(self) -> Params:
        for name in self.ablation.variants:  # every variant must make valid train settings
            try:
                self.ablation.variant_train(self.train, name, seed=0)
            except ValueError as exc:  # a _rule (rule, key, value) of the ablation section
                rule, key, value = exc.args
                raise _rule(f"ablation.{key}", value, rule) from None
        return self
