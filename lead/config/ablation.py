"""The section of the paper's ablation: ``ablation`` (variants x seeds, ``ablation/dvc.yaml``); a variant is
the ``train`` keys it sets, so it is checked as train settings (:meth:`AblationParams.variant_train`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field, StringConstraints, ValidationError, model_validator

from lead.config.base import Section, Seed, _rule
from lead.config.training import TrainParams

# The paper's ablation (GRPO-LEAD.md): each variant is the train keys it sets over params.yaml's ``train:``.
DEFAULT_VARIANTS: dict[str, dict[str, Any]] = {
    "grpo": {"length_reward": False, "penalty": False, "reweight": False},
    "grpo_l": {"length_reward": True, "penalty": False, "reweight": False},
    "grpo_l_ad": {"length_reward": True, "penalty": False, "reweight": True},
    "lead": {"length_reward": True, "penalty": True, "reweight": True},
}
VARIANT_NAME = r"^[a-z][a-z0-9_]*$"
VariantName = Annotated[str, StringConstraints(pattern=VARIANT_NAME, max_length=40)]


def sweep_variants(grid: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """A sweep as ablation variants: one per point of the product of ``grid``'s values (train key → values), named
    by its values (``alpha=0.05, learning_rate=1.0e-06`` → ``alpha_0p05__learning_rate_1p0em06``), or ``p<i>``
    (the point's index) where that name would be longer than a variant's name may be."""

    def token(value: Any) -> str:
        return re.sub(r"[^a-z0-9]", "", str(value).lower().replace(".", "p").replace("-", "m"))

    variants = {}
    for i, values in enumerate(itertools.product(*grid.values())):
        point = dict(zip(grid, values, strict=True))
        name = "__".join(f"{key}_{token(value)}" for key, value in point.items())
        fits = len(name) <= 40 and re.match(VARIANT_NAME, name)
        variants[name if fits else f"p{i}"] = point
    return variants


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
