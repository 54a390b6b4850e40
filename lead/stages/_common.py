"""What every stage's ``main()`` shares: one argument parser, params loading, clean error exits."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lead.config import DEFAULT_PARAMS, Params, ParamsError, load_params


def manifest_path(params: Params, stage: str) -> Path:
    """Where ``stage`` publishes the manifest of its outputs (:func:`lead.io.fingerprint.publish`), beside them."""
    if stage in ("curate", "calibrate", "calibrate_stage2"):
        folder = params.paths.curated
    elif stage in ("warmstart", "train", "train_stage2"):
        folder = params.paths.models
    elif stage == "evaluate":
        folder = params.paths.reports / "evaluate"
    else:
        raise ValueError(f"stage {stage!r} publishes no manifest")
    return folder / f"{stage}.manifest.json"


def published_model(params: Params, stage: str) -> tuple[Path, str]:
    """``(<paths.models>/<stage>, its fingerprint)``, refused (:class:`lead.io.fingerprint.StaleOutputError`) unless
    it is the very model ``stage`` published last (its manifest names it by content)."""
    from lead.io.fingerprint import StaleOutputError, model_fingerprint, verify

    model = params.paths.models / stage
    published = verify(manifest_path(params, stage), stage)
    fingerprint = model_fingerprint(model) if model.is_dir() else None
    if not published.get("model") or fingerprint != published["model"]:
        raise StaleOutputError(
            f"{model}: not the model the {stage} stage published (changed or written by another run): "
            f"run the {stage} stage again"
        )
    return model, fingerprint


def stage_main(name: str, run: Callable[[Params], Any], argv: list[str] | None = None) -> None:
    """Parse ``--params`` and ``-S key=value`` overrides, validate, then ``run``; bad params exit 2."""
    parser = argparse.ArgumentParser(prog=f"python -m lead.stages.{name}", description=run.__doc__)
    parser.add_argument("--params", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params, args.overrides)
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if os.environ.get("DVC_STAGE"):  # dvc repro removed this stage's outputs before running it
            print(
                "hint: fix the params and run again; `dvc checkout` restores the outputs of the last good run "
                "(`make run` and `lead` check params.yaml before DVC touches anything)",
                file=sys.stderr,
            )
        raise SystemExit(2) from None
    run(params)
