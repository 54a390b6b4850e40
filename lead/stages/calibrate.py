"""Stage ``calibrate``: every training problem's pass rate under the warm start, and the band kept for RL.

The method and the outputs (the whole pool with pass rates and ``keep``, its manifest, the summary, headline,
histogram table and plot) are :mod:`lead.calibration`'s; the outputs' paths are :data:`lead.dag.REGISTRY`'s.
"""

from __future__ import annotations

from typing import Any

from lead.calibration import calibrate, stage1_target
from lead.config import Params
from lead.stages._common import as_process, stage_main


def run(params: Params) -> dict[str, Any]:
    """Calibrate the training pool's pass rates (incrementally) and write the calibrated pool and reports."""
    target = stage1_target(
        params.calibrate, params.train, params.model, params.paths, warm_start=params.warmstart.enabled
    )
    return calibrate(target, params.tracking)


def main(argv: list[str] | None = None) -> None:
    stage_main("calibrate", run, argv)


if __name__ == "__main__":
    as_process(main)
