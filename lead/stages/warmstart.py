"""Stage ``warmstart``: supervised fine-tuning (TRL ``SFTTrainer``) of the base model before RL.

The method (the tiny model and its proxy traces by default, or ``model.base`` on ``warmstart.dataset``) and the
outputs (``<paths.models>/warmstart``, ``<paths.reports>/warmstart.json``, the manifest) are
:mod:`lead.training.warmstart`'s.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.stages._common import as_process, stage_main
from lead.training.warmstart import warm_start


def run(params: Params) -> dict[str, Any]:
    """Fine-tune the base model on warm-start traces and save it to ``<paths.models>/warmstart``."""
    return warm_start(params.warmstart, params.model, params.curate.proxy, params.paths, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main("warmstart", run, argv)


if __name__ == "__main__":
    as_process(main)
