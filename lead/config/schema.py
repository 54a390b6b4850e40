"""The schema of ``params.yaml``: one pydantic model per section, pure (no file is read here).

Every section is a model with ``extra="forbid"`` so a typo is an error rather than a silently ignored knob;
ranges and choices are declared on the fields; cross-field rules (a group size that must divide the batch,
...) are validators, which raise :func:`_rule` errors that :mod:`lead.config.load` turns into one message
naming the key, its value and the rule. Every field carries its ``description``: the one place a key's meaning
is written for tools (``lead params --explain KEY``, ``params.schema.json``).

DVC reads the same file (``params:`` in ``dvc.yaml``), so a section's name is also the stage's name.

This module holds the root, :class:`Params`, and re-exports every section; the sections live by concern:

* :mod:`lead.config.base` -- :class:`Section` (the base of every section), :data:`Seed`, :func:`_rule`,
  :func:`yaml_fields` and :func:`section_type`;
* :mod:`lead.config.common` -- what every stage reads: ``model`` (and ``model.tiny``), ``paths``, ``tracking``;
* :mod:`lead.config.data` -- ``curate``, its ``sources`` and the proxy task (``curate.proxy``);
* :mod:`lead.config.warmstart` -- ``warmstart``, its ``verbosity`` (built from :class:`lead.core.proxy.Verbosity`)
  and ``report``;
* :mod:`lead.config.training` -- ``calibrate``, and ``train`` with its ``stage2`` and ``lora``;
* :mod:`lead.config.evaluation` -- ``evaluate`` and ``register``;
* :mod:`lead.config.ablation` -- ``ablation`` (its variants are checked as ``train`` settings).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from lead.config.ablation import DEFAULT_VARIANTS, AblationParams, VariantName
from lead.config.base import Section, Seed, _rule, section_type, yaml_fields
from lead.config.common import PAPER_PROMPT_SUFFIX, ModelParams, PathParams, TinySpec, TrackingParams
from lead.config.data import CurateParams, ProxyParams, SourceSpec
from lead.config.evaluation import BENCHMARKS, EvaluateParams, RegisterParams
from lead.config.training import CalibrateParams, LoraParams, Stage2Params, TrainParams
from lead.config.warmstart import ReportParams, VerbosityParams, WarmstartParams

__all__ = [
    "BENCHMARKS",
    "DEFAULT_VARIANTS",
    "PAPER_PROMPT_SUFFIX",
    "AblationParams",
    "CalibrateParams",
    "CurateParams",
    "EvaluateParams",
    "LoraParams",
    "ModelParams",
    "Params",
    "PathParams",
    "ProxyParams",
    "RegisterParams",
    "ReportParams",
    "Section",
    "Seed",
    "SourceSpec",
    "Stage2Params",
    "TinySpec",
    "TrackingParams",
    "TrainParams",
    "VariantName",
    "VerbosityParams",
    "WarmstartParams",
    "section_type",
    "yaml_fields",
]


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

    def sections(self, *names: str) -> dict[str, Any]:
        """The sections ``names`` as params.yaml writes them (``register``, not the attribute ``register_``):
        what a stage's MLflow run logs as its params (:func:`lead.io.tracking.stage_run`)."""
        return {
            name: getattr(self, "register_" if name == "register" else name).as_written() for name in names
        }

    @model_validator(mode="after")
    def _stage2_model(self) -> Params:
        if self.evaluate.model == "train_stage2" and not self.train.stage2.enabled:
            raise ValueError(
                "evaluate.model = 'train_stage2' needs the curriculum's stage 2: set train.stage2.enabled: true "
                "(or evaluate train)"
            )
        return self

    @model_validator(mode="after")
    def _proxy_warm_start(self) -> Params:
        # The proxy's SFT traces are tokenized by the tokenizer built with the tiny model, for it.
        if self.warmstart.enabled and self.warmstart.dataset == "proxy" and not self.model.is_tiny:
            raise _rule(
                "warmstart.dataset",
                "proxy",
                f"needs model.base = 'tiny' (model.base is {self.model.base!r}): the proxy's traces are written "
                "for the tokenizer built with the tiny model; give a real model an SFT dataset (a hub id or a "
                ".jsonl/.parquet) or set warmstart.enabled: false",
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
