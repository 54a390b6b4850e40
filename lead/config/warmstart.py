"""The section of the warm start: ``warmstart`` (supervised fine-tuning before RL), with the habits of its proxy
traces (``warmstart.verbosity``) and ``lead warmstart --report``'s sampling (``warmstart.report``).

The habits are :class:`lead.core.proxy.Verbosity`'s fields: ``warmstart.verbosity`` has one key per field, in its
order, with its default and description, so a habit added to the proxy traces is a params key at once.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field, create_model, model_validator

from lead.config.base import Section, Seed, _rule
from lead.core.proxy import Verbosity

# One probability per habit of the proxy traces: a float in [0, 1], keyed, ordered, defaulted and described as
# Verbosity's field is (its metadata["description"]).
_Habits = create_model(
    "_Habits",
    __base__=Section,
    __module__=__name__,
    **{
        habit.name: (float, Field(habit.default, ge=0.0, le=1.0, description=habit.metadata["description"]))
        for habit in dataclasses.fields(Verbosity)
    },
)


class VerbosityParams(_Habits):
    """``warmstart.verbosity``: probabilities of each habit in the proxy warm-start traces (``lead.core.proxy``)."""

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
    micro_batches: int = Field(
        4,
        ge=1,
        le=65536,
        description="forward passes each optimizer step's batch is split into, by length (less padding), "
        "gradients summed over the whole batch: a speed (and memory) knob, not a change of what is learned",
    )
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

    @model_validator(mode="after")
    def _whole_micro_batches(self) -> WarmstartParams:
        if self.batch_size % self.micro_batches:
            raise _rule(
                "micro_batches",
                self.micro_batches,
                f"must divide batch_size ({self.batch_size}) so that every optimizer step sees batch_size sequences",
            )
        return self
