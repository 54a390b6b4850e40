"""The sections every stage reads: ``model`` (the base model, and the tiny one built locally), ``paths`` and
``tracking`` (MLflow)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from lead.config.base import Section, _rule

PAPER_PROMPT_SUFFIX = "\nLet's think step by step and put the final answer within \\boxed{}."


class TinySpec(Section):
    """``model.tiny``: the shape of the locally built Qwen2 (used when ``model.base: tiny``)."""

    vocab_size: int = Field(
        512,
        ge=300,
        le=65536,
        description="most tokens the byte-level BPE tokenizer is trained to (256 byte symbols and 4 special "
        "tokens included; <think> and </think> are added on top)",
    )
    hidden_size: int = Field(160, ge=32, le=4096, description="width of the residual stream (embedding size)")
    num_layers: int = Field(2, ge=1, le=64, description="transformer decoder layers")
    num_heads: int = Field(5, ge=1, le=64, description="attention (query) heads per layer")
    num_kv_heads: int = Field(
        5,
        ge=1,
        le=64,
        description="key/value heads per layer (grouped-query attention); must divide num_heads",
    )
    head_dim: int = Field(
        32, ge=32, le=256, description="size of each attention head (vLLM's CPU backend needs >= 32)"
    )
    intermediate_size: int = Field(320, ge=32, le=65536, description="hidden width of each layer's MLP")
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
