"""Typed parameters: ``params.yaml`` parsed into pydantic models, one section per stage.

``params.yaml`` is the only file people edit. Every section is a model with ``extra="forbid"`` so a typo is
an error rather than a silently ignored knob; ranges and choices are declared on the fields; cross-field
rules (a group size that must divide the batch, …) are validators. Bad input stops before any work with
one :class:`ParamsError` whose message names each bad key, its value and what is allowed.

DVC reads the same file (``params:`` in ``dvc.yaml``), so a section's name is also the stage's name.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lead.proxy import Verbosity

DEFAULT_PARAMS = Path("params.yaml")
PAPER_PROMPT_SUFFIX = "\nLet's think step by step and put the final answer within \\boxed{}."


def _rule(key: str, value: object, rule: str) -> ValueError:
    """A cross-field error naming the key (inside its section), its value and the rule it breaks."""
    return ValueError(rule, key, value)


class Section(BaseModel):
    """Base of every params section: unknown keys are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_by_name=True)


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

    uri: str | None = None
    experiment: str = Field("lead", min_length=1)


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


class CurateParams(Section):
    """``curate``: which problems the pipeline trains and evaluates on."""

    seed: int = 0
    proxy: ProxyParams = ProxyParams()


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
    seed: int = 0


class WarmstartParams(Section):
    """``warmstart``: supervised fine-tuning (TRL ``SFTTrainer``) before RL.

    With ``model.base: tiny`` the SFT set is verbose proxy traces; with a real model, ``dataset`` names a hub
    dataset or a local jsonl/parquet with ``prompt``/``completion`` (or ``problem``/``solution``) columns.
    """

    enabled: bool = True
    seed: int = 0
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
    seed: int = 0

    @model_validator(mode="after")
    def _band(self) -> CalibrateParams:
        if self.min_pass_rate >= self.max_pass_rate:
            raise _rule(
                "min_pass_rate", self.min_pass_rate, f"must be < max_pass_rate ({self.max_pass_rate})"
            )
        return self


class TrainParams(Section):
    """``train``: GRPO-LEAD on TRL. ``batch_size`` counts completions per optimizer step."""

    preset: Literal["faithful", "paper", "improved"] = "faithful"
    num_generations: int = Field(8, ge=2, le=1024, description="group size G")
    batch_size: int = Field(64, ge=2, le=1_000_000, description="completions per step; a multiple of G")
    learning_rate: float = Field(1e-5, gt=0.0, le=1.0)
    max_steps: int = Field(100, ge=1, le=10_000_000)
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    max_completion_length: int = Field(256, ge=1, le=131072)
    seed: int = 0

    @model_validator(mode="after")
    def _groups(self) -> TrainParams:
        if self.batch_size % self.num_generations:
            raise _rule(
                "num_generations",
                self.num_generations,
                f"must divide batch_size ({self.batch_size}) so that every group of completions is whole",
            )
        return self


BENCHMARKS = ("proxy", "aime24", "aime25", "math500", "amc23")


class EvaluateParams(Section):
    """``evaluate``: sampling protocol and benchmarks (the paper's is 32 samples, T=0.6, min_p=0.01)."""

    benchmarks: list[Literal[BENCHMARKS]] = Field(default_factory=lambda: ["proxy"], min_length=1)
    samples: int = Field(8, ge=1, le=1024)
    temperature: float = Field(0.6, ge=0.0, le=10.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    min_p: float = Field(0.0, ge=0.0, lt=1.0)
    max_new_tokens: int = Field(256, ge=1, le=131072)
    seed: int = 0


class RegisterParams(Section):
    """``register``: the MLflow registered model and the gate that promotes a challenger to champion."""

    model_name: str = Field("lead-proxy", min_length=1)
    pass_tolerance: float = Field(0.01, ge=0.0, le=1.0, description="allowed Pass@1 drop per benchmark")
    length_tolerance: float = Field(0.0, ge=0.0, le=10.0, description="allowed relative length increase")


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


class ParamsError(ValueError):
    """Bad ``params.yaml``: the message names every bad key, its value and what is allowed."""


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """YAML keys allowed at the parent of ``loc`` (for 'unknown key' messages)."""
    for part in loc[:-1]:
        fields = {f.alias or name: f for name, f in model.model_fields.items()}
        annotation = getattr(fields.get(str(part)), "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [f.alias or name for name, f in model.model_fields.items()]


def _describe(error: dict[str, Any], source: str) -> str:
    loc = tuple(error["loc"])
    value = error.get("input")
    if error["type"] == "value_error":
        # Cross-field validators raise _rule(key, value, rule): name the key inside its section.
        args = getattr(error.get("ctx", {}).get("error"), "args", ())
        if len(args) == 3:
            rule, key, value = args
            return f"{source}: {'.'.join(map(str, (*loc, key)))} = {value!r}: {rule}"
        return f"{source}: {'.'.join(map(str, loc))}: {error['msg'].removeprefix('Value error, ')}"
    name = ".".join(map(str, loc))
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(Params, loc)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"{source}: unknown key '{name}'{hint}; allowed keys here: {', '.join(allowed)}"
    return f"{source}: {name} = {value!r}: {error['msg']}"


def parse_params(data: dict[str, Any] | None, source: str = "params") -> Params:
    """Validate a parsed params mapping; raise one :class:`ParamsError` listing every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParamsError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e, source) for e in exc.errors()]
        raise ParamsError("\n".join(lines)) from None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides (values parsed as YAML, as ``dvc exp run -S`` does)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"override {item!r}: expected KEY=VALUE, e.g. train.max_steps=20")
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ParamsError(f"override {item!r}: '{part}' is a value, not a section")
            node = child
        node[leaf] = yaml.safe_load(raw)
    return data


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS, overrides: list[str] | None = None) -> Params:
    """Read, override and validate ``params.yaml``. Errors are :class:`ParamsError` with one clear message."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParamsError(
            f"{path}: no such params file (run from the repository root, or pass --params)"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML: {exc}") from None
    if overrides:
        data = apply_overrides(data or {}, overrides)
    return parse_params(data, str(path))
