"""The ablation's report (``ablation/dvc.yaml``, stage ``report``): every cell's result, compared claim by claim.

What it reads (every cell's ``result.json``) and writes (``<paths.reports>/ablation/``: ``ablation.json``, ``.md``,
``metrics.json``, the figures; one MLflow run, the cells' runs its children) is :mod:`lead.ablation.report`'s.
"""

from __future__ import annotations

from typing import Any

from lead.ablation.report import report
from lead.config import Params
from lead.stages._common import as_process, stage_main


def run(params: Params) -> dict[str, Any]:
    """Read every cell, compare the variants claim by claim, write the JSON, table and plots."""
    return report(params.ablation, params.train, params.evaluate, params.paths, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main("ablation", run, argv)


if __name__ == "__main__":
    as_process(main)
