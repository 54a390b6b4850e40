"""Stage ``train_stage2``: the curriculum's later stage -- continue from the stage-1 model on what it finds hard.

What it trains on, with which settings, and what it writes (``<paths.models>/train_stage2``, its report and
manifest; only a note saying so when ``train.stage2.enabled`` is false) is :mod:`lead.training.curriculum`'s.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.stages._common import as_process, stage_main
from lead.training.curriculum import STAGE, train_stage2
from lead.training.grpo_config import check_train_settings
from lead.training.inputs import Inputs


def run(params: Params) -> dict[str, Any]:
    """Train curriculum stage 2 from the stage-1 model (off unless ``train.stage2.enabled``)."""
    bound = params.curate.max_prompt_tokens
    if params.train.stage2.enabled:  # TRL's and the launch's judgement before any hashing or loading
        check_train_settings(params.train, params.paths, max_prompt_tokens=bound)
    inputs = Inputs(params.paths, params.model, warm_start=params.warmstart.enabled)
    return train_stage2(params.train, bound, inputs, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main(STAGE, run, argv)


if __name__ == "__main__":
    as_process(main)
