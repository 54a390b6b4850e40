"""The sections after training: ``evaluate`` (benchmarks and sampling) and ``register`` (the MLflow registry and
the gate that promotes a challenger to champion)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lead.config.base import Section, Seed, _rule

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
