"""Stage ``evaluate``: sample the model on the benchmarks, grade, and score it the paper's way (§7).

The method, the model it evaluates (``evaluate.model``) and its outputs (``samples.parquet``, ``metrics.json``,
``headline.json``, the plots and, written last, the manifest) are :mod:`lead.evaluation`'s; the outputs'
paths are :data:`lead.dag.REGISTRY`'s.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.evaluation import evaluate
from lead.stages._common import as_process, stage_main


def run(params: Params) -> dict[str, Any]:
    """Sample, grade and score the model on every benchmark; write records, metrics.json and plots."""
    return evaluate(params.evaluate, params.model, params.paths, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main("evaluate", run, argv)


if __name__ == "__main__":
    as_process(main)
