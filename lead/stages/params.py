"""Stage ``params``: the check of ``params.yaml`` that ``dvc repro`` and ``dvc exp run`` run before any other stage.

DVC removes a stage's outputs before running it, so a stage that refuses its params has already lost them. This
stage runs first (the DAG's roots depend on its record, so every stage is downstream of it) and depends on
``params.yaml`` as a *file*: any edit -- a ``dvc exp run -S +trian.max_steps=3`` typo included, which no stage's
declared params would notice -- reruns it, and a refusal stops ``dvc repro`` before any output is removed. Its
record, ``<paths.reports>/params.json``, is the same bytes whenever the params are valid, so passing the check
makes nothing downstream stale; DVC never removes it before a run (``persist: true``) and caches it (``dvc pull``
brings it to a clone).

The checks are the ones every way in makes: the schema (:func:`lead.config.load_params`: keys, types, ranges,
cross-section rules), then :func:`lead.checks.check_params` (the train settings only TRL can judge, the local
files ``curate.sources`` names). A refusal names what ``dvc exp run`` left changed in ``params.yaml`` and the
command that restores the last valid one (:mod:`lead.config.last_valid`).
"""

from __future__ import annotations

from typing import Any

from lead.checks import check_params
from lead.config import Params
from lead.dag import output
from lead.io.files import write_json
from lead.stages._common import as_process, stage_main

RECORD = {"params.yaml": "valid"}  # constant: a valid file's check changes nothing downstream


def run(params: Params) -> dict[str, Any]:
    """Check params.yaml before any other stage runs; write the (constant) record."""
    check_params(params.curate, params.train, params.paths)
    write_json(output(params.paths, "params", "record"), RECORD)
    return dict(RECORD)


def main(argv: list[str] | None = None) -> None:
    stage_main("params", run, argv)


if __name__ == "__main__":
    as_process(main)
