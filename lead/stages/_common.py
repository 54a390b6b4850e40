"""What every stage's ``main()`` shares: one argument parser, params loading, clean error exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from lead.config import DEFAULT_PARAMS, Params, ParamsError, load_params


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
        raise SystemExit(2) from None
    run(params)
