"""One calibration's job (:class:`Target`): the model sampled, the band kept, the reward whose verdicts are counted,
where its pool, cache and outputs are; stage 1's and stage 2's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lead.config import CalibrateParams, ModelParams, PathParams, TrainParams
from lead.core import difficulty
from lead.dag import REGISTRY, output, published_model, resume_dir

if TYPE_CHECKING:
    from lead.core.outcomes import OutcomeRules


CACHE_NAME = "cache.jsonl"  # in the stage's resume_dir


@dataclass(frozen=True)
class Target:
    """One calibration's job: which model it samples and how (params' ``calibrate`` section: samples, seed,
    chunks, backend, server; the model section's dtype and prompt suffix), the band of pass rates it keeps, the
    reward whose verdicts it counts, and where its pool, cache and outputs are (``paths``; ``files``: the stage's
    outputs by name, :data:`lead.dag.REGISTRY`). The ``calibrate`` stage calibrates the warm start for stage 1
    (:func:`stage1_target`); ``calibrate_stage2`` the stage-1 model for the curriculum's stage 2
    (:func:`stage2_target`)."""

    stage: str
    model: Path | str
    cache: Path
    files: dict[str, Path]
    low: float
    high: float
    inclusive: difficulty.Inclusive
    rules: OutcomeRules  # what a completion is for the reward this pool trains
    max_new_tokens: int  # that reward's token budget (train.max_completion_length)
    cfg: CalibrateParams
    model_settings: ModelParams
    paths: PathParams
    base: str | None = (
        None  # model.base when it is what is calibrated (no warm start): the empty pool's message
    )

    @property
    def rule(self) -> str:
        return difficulty.band_rule(self.low, self.high, self.inclusive)

    @property
    def output(self) -> Path:
        """The calibrated pool."""
        return self.files["pool"]

    @property
    def reports(self) -> Path:
        """The folder of its reports (summary, headline, histogram table and plot)."""
        return self.files["summary"].parent


def stage1_target(
    cfg: CalibrateParams, train: TrainParams, model: ModelParams, paths: PathParams, *, warm_start: bool
) -> Target:
    """The ``calibrate`` stage: the warm start's pass rates (``model.base``'s without ``warm_start``) under stage
    1's reward (``train``'s :class:`JudgeKeys`), the keep band of ``cfg``."""
    band = (cfg.min_pass_rate, cfg.max_pass_rate, cfg.keep_inclusive)
    sampled = model_path(model, paths.models, warm_start=warm_start)
    base = None if warm_start else model.base
    return _target("calibrate", sampled, band, JudgeKeys.of(train), cfg, model, paths, base=base)


def stage2_target(cfg: CalibrateParams, train: TrainParams, model: ModelParams, paths: PathParams) -> Target:
    """The ``calibrate_stage2`` stage: the stage-1 model (``<paths.models>/train``, checked to be the one the train
    stage published) under stage 2's reward (``train.stage2.overrides`` over ``train``), the stage-2 band
    p <= ``train.stage2.max_pass_rate``, zero included (:func:`lead.core.difficulty.stage2_band`)."""
    band = difficulty.stage2_band(train.stage2.max_pass_rate)
    trained = published_model(paths, "train")[0]
    keys = JudgeKeys.of(train, train.stage2.overrides)
    return _target("calibrate_stage2", trained, band, keys, cfg, model, paths)


def _target(
    stage: str,
    sampled: Path | str,
    band: tuple[float, float, Any],
    keys: JudgeKeys,
    cfg: CalibrateParams,
    model: ModelParams,
    paths: PathParams,
    base: str | None = None,
) -> Target:
    low, high, inclusive = band
    return Target(
        stage=stage,
        model=sampled,
        cache=resume_dir(paths, stage) / CACHE_NAME,
        files={name: output(paths, stage, name) for name in REGISTRY[stage].outputs},
        low=low,
        high=high,
        inclusive=inclusive,
        **reward_judge(keys),
        cfg=cfg,
        model_settings=model,
        paths=paths,
        base=base,
    )


@dataclass(frozen=True)
class JudgeKeys:
    """The train keys that decide what the reward scores correct (the outcome rules and the token budget): all
    that a calibration reads of ``train`` (dvc.yaml declares exactly these), read one by one."""

    preset: str
    extraction: str | None
    truncation: str | None
    repetition_penalty: float | None
    max_completion_length: int

    @classmethod
    def of(cls, train: TrainParams, overrides: Mapping[str, Any] | None = None) -> JudgeKeys:
        """``train``'s values, each one in ``overrides`` (stage 2's ``train.stage2.overrides``) over it."""
        over = overrides or {}
        return cls(**{f.name: over.get(f.name, getattr(train, f.name)) for f in fields(cls)})


def reward_judge(keys: JudgeKeys | TrainParams) -> dict[str, Any]:
    """``rules`` and ``max_new_tokens`` of the reward that trains with ``keys`` (:class:`JudgeKeys`, or the
    ``TrainParams`` they come from): a pass rate is measured as the reward will measure it -- same extraction,
    ``</think>``, truncation and loop rules, same token budget --, not as evaluation does: the keep band
    0 < p < 1 is there to keep exactly the problems whose groups carry a learning signal, and a completion the
    reward does not score correct gives none."""
    from lead.training.presets import outcome_rules

    return {"rules": outcome_rules(keys), "max_new_tokens": keys.max_completion_length}


# --------------------------------------------------------------------------------------------------
# The model and the backend
# --------------------------------------------------------------------------------------------------
def model_path(model: ModelParams, models: Path, *, warm_start: bool) -> Path | str:
    """The model calibrated: the warm-started one (``<models>/warmstart``, ``models`` = ``paths.models``), or
    ``model.base`` when warm start is disabled."""
    if warm_start:
        path = models / "warmstart"
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no warm-started model (run `lead warmstart` first)")
        return path
    if model.is_tiny:
        raise ValueError(
            "warmstart.enabled = false with model.base = 'tiny': the tiny model exists only after warm start"
        )
    return model.base
