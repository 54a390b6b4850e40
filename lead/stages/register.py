"""Stage ``register``: the trained model becomes a new version in the MLflow model registry, for review.

What is registered, with which lineage, description and aliases, and what is refused, is
:mod:`lead.registration`'s; the output (``<paths.reports>/register.json``) is :data:`lead.dag.REGISTRY`'s.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.registration import register
from lead.stages._common import as_process, stage_main


def run(params: Params) -> dict[str, Any]:
    """Register the evaluated model with lineage and review description; run the champion gate."""
    return register(
        params.register_, params.evaluate, params.paths, params.tracking, preset=params.train.preset
    )


def main(argv: list[str] | None = None) -> None:
    stage_main("register", run, argv)


if __name__ == "__main__":
    as_process(main)
