"""Stage ``curate``: the problems the pipeline calibrates, trains and evaluates on.

What it reads and writes (``<paths.curated>``: ``train.parquet``, ``test.parquet``, ``quarantine.jsonl``,
``curation.json``, the manifest; ``<paths.reports>/curate/``) is :mod:`lead.curation`'s; the steps are
:mod:`lead.core.curation`'s.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.curation import curate
from lead.stages._common import as_process, stage_main


def run(params: Params) -> dict[str, Any]:
    """Curate the training pool and test split; write them, the quarantine and the report."""
    return curate(params.curate, params.model, params.evaluate.benchmarks, params.paths, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main("curate", run, argv)


if __name__ == "__main__":
    as_process(main)
