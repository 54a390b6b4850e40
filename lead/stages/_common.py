"""What every stage's ``main()`` shares: one argument parser, params loading, clean error exits."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lead.config import DEFAULT_PARAMS, Params, ParamsError, load_params, recipe_overrides
from lead.core.difficulty import Inclusive, band_rule, in_band


class StageError(RuntimeError):
    """A stage cannot produce a useful result from what it was given or found (an empty training pool, ...).

    The message says what happened, with the real numbers, and the knob to change; :func:`stage_main` prints
    it without a traceback and exits 1. Raised before the stage publishes its manifest, so the next stage
    refuses the unfinished outputs instead of reading them."""


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


def resume_dir(params: Params, name: str) -> Path:
    """``<paths.resume>/<name>``: the resume state of the stage (or ablation cell) ``name`` — its calibration
    cache, its training checkpoints — which it reads back itself and keys by content (a training run's identity,
    a calibration's settings). Deliberately not a DVC output: DVC neither caches nor pushes it, so a fresh clone
    that pulled every output has nothing missing and reruns nothing; a run that finds it resumes or reuses, one
    that does not recomputes."""
    return params.paths.resume / name


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


def stage_main(
    name: str,
    run: Callable[..., Any],
    argv: list[str] | None = None,
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Parse ``--params``, ``--recipe FILE`` and ``-S key=value`` overrides (the recipe's first), validate,
    then ``run``. Bad params exit 2 -- also when ``run`` finds them (a check that needs a library the params
    loader does not import) --, an error the user can fix (:func:`user_error`: a :class:`StageError`, a bad source,
    a stale input, a full disk) exits 1; both print one line without a traceback (``LEAD_VERBOSE=1``: with it).
    ``arguments`` adds a stage's own options (one cell of the ablation: ``--variant``, ``--seed``); their values
    reach ``run`` as keyword arguments.

    SIGTERM (a cancelled flow's command, ``kill``, a pod stopped) raises :class:`~lead.io.tracking.Terminated`
    in the stage, so that it unwinds like any error: its MLflow run ends KILLED instead of staying RUNNING for
    ever (SIGKILL, which nothing can catch, still leaves it RUNNING), exit code 143."""
    parser = argparse.ArgumentParser(prog=f"python -m lead.stages.{name}", description=run.__doc__)
    if arguments:
        arguments(parser)
    parser.add_argument("--params", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    parser.add_argument(
        "--recipe",
        metavar="FILE",
        help="a recipe (params sections, e.g. recipes/grpo-lead-7b.yaml) applied on top of --params, before -S",
    )
    parser.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = vars(parser.parse_args(argv))
    common = {k: args.pop(k) for k in ("params", "recipe", "overrides")}  # the rest: the stage's own options
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        recipe = recipe_overrides(common["recipe"]) if common["recipe"] else []
        params = load_params(common["params"], [*recipe, *common["overrides"]])
        result = run(params, **args)
        say_what_it_did(name, result)
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        stage = os.environ.get("DVC_STAGE")  # dvc repro removed this stage's outputs before running it
        if stage:
            # its own pipeline file: a bare `dvc checkout` also tries the other pipeline's never-run outputs
            pipeline = stage.rpartition(":")[0] or "dvc.yaml"
            print(
                f"hint: fix the params and run again; `dvc checkout {pipeline}` restores the outputs of the last "
                "good run (`make run` and `lead` check params.yaml before DVC touches anything)",
                file=sys.stderr,
            )
        raise SystemExit(2) from None
    except Exception as exc:
        message = user_error(exc)
        if message is None or verbose():
            raise
        print(f"error: {name}: {message}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def say_what_it_did(name: str, result: Any) -> None:
    """The stage's last line: its headline (:func:`lead.io.summaries.headline`: kept N of M, steps and the last
    reward, Pass@1 and length, the version registered), so that a ``dvc repro`` transcript says what happened."""
    from lead.io.summaries import headline
    from lead.stages import STAGES

    if name in STAGES and isinstance(result, dict):
        print(f"{name}: {headline(name, result)}", flush=True)


VERBOSE_ENV = "LEAD_VERBOSE"  # `lead -v` sets it: errors a user can fix show their traceback too


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV) == "1"


def user_error(exc: BaseException) -> str | None:
    """The message of an error the user caused and can fix -- a stage that cannot go on (:class:`StageError`), a
    source that cannot be read, an input another run changed, a missing input the code names, a full disk --,
    printed as one line without a traceback; None for anything else (a bug, whose traceback is the message)."""
    from lead.io.files import DiskFull
    from lead.io.fingerprint import StaleOutputError
    from lead.io.sources import SourceError

    if isinstance(exc, StageError | SourceError | StaleOutputError | DiskFull):
        return str(exc)
    if isinstance(exc, FileNotFoundError) and exc.errno is None:  # raised by this code with its own message
        return str(exc)
    return None


def _terminate(signum: int, frame: object) -> None:
    from lead.io.tracking import Terminated

    raise Terminated(128 + signum)


def _closing(inclusive: str | None, end: str) -> str:
    """The ``calibrate.keep_inclusive`` value that closes ``end`` (``left``/``right``) of the band too."""
    if inclusive is None:  # band unknown
        return f"{end} or both"
    closed = {"left", "right"} if inclusive == "both" else {inclusive} - {"neither"}
    return "both" if closed | {end} == {"left", "right"} else end


def empty_pool_message(
    correct: Sequence[int],
    samples: int,
    params: Params,
    band: tuple[float, float, Inclusive] | None = None,
) -> str:
    """Why stage-1 calibration kept none of its problems, with its numbers, and the knobs for that reason.

    ``correct`` = each problem's correct completions out of ``samples`` (k), so p = c / k; ``band`` = the
    keep band ``(low, high, inclusive)`` of :func:`lead.core.difficulty.in_band` where the caller knows it (the
    calibrate stage), None where it does not (the train stage reads the calibrated pool, not ``calibrate.*``):
    then a problem is too hard when p = 0 and too easy when p = 1. With nothing kept, either

    * every problem is too hard (p at or below the band's low end; "none solved" when p = 0 for all): a
      stronger model, easier problems, or a band that reaches lower (``calibrate.min_pass_rate``,
      ``calibrate.keep_inclusive`` closing the low end);
    * every problem is too easy ("all solved" when p = 1 for all): harder problems, or a band that reaches
      higher (``calibrate.max_pass_rate``, ``keep_inclusive`` closing the high end: all-correct groups still
      carry the length reward's signal);
    * or some of each, none inside: more samples per problem (p moves in steps of 1/k) or a wider band.
    """
    n, total, solved = len(correct), len(correct) * samples, sum(correct)
    rule = f" ({band_rule(*band)})" if band else ""
    head = f"calibrate kept 0 of {n} problems{rule}"
    if not n:
        return f"{head}: the curated pool is empty; check curate.sources and {params.paths.reports}/curate"
    rates = [c / samples for c in correct]
    model = "the warm start" if params.warmstart.enabled else f"model.base ({params.model.base})"
    low, high, inclusive = band if band else (0.0, 1.0, None)
    if band:
        # Too hard = not above the band's low end; with nothing kept, the rest is at or above its high end.
        hard = [p for p in rates if not in_band(p, low, 1.0, _closing(inclusive, "right"))]
        easy = [p for p in rates if p not in hard]
    else:  # the band unknown: too hard = never solved, too easy = always solved
        hard, easy = [p for p in rates if p == 0], [p for p in rates if p == 1]
    if len(hard) == n:
        why = (
            f"{model} solved 0 of {total} samples"
            if solved == 0
            else f"every pass rate is at most {max(hard):g}, none above calibrate.min_pass_rate = {low:g}"
        )
        stronger = (
            "a stronger warm start (warmstart.epochs, warmstart.examples)"
            if params.warmstart.enabled
            else "a stronger model.base (or warmstart.enabled: true)"
        )
        knobs = [stronger, "easier problems (curate.sources)"]
        if low > 0:
            knobs.append("a lower calibrate.min_pass_rate")
        if low in hard and _closing(inclusive, "left") != inclusive:
            knobs.append(f"calibrate.keep_inclusive: {_closing(inclusive, 'left')} (keeps p = {low:g})")
    elif len(easy) == n:
        why = (
            f"{model} solved all {total} samples"
            if solved == total
            else f"every pass rate is at least {min(easy):g}, none below calibrate.max_pass_rate = {high:g}"
        )
        knobs = ["harder problems (curate.sources)"]
        if high < 1:
            knobs.append("a higher calibrate.max_pass_rate")
        if high in easy and _closing(inclusive, "right") != inclusive:
            knobs.append(
                f"calibrate.keep_inclusive: {_closing(inclusive, 'right')} (keeps p = {high:g}; all-correct "
                "groups still carry the length reward's signal)"
            )
    else:
        where = (
            f"{len(hard)} at or below the band (p <= {max(hard):g}) and {len(easy)} at or above it "
            f"(p >= {min(easy):g})"
            if band
            else f"{len(hard)} never solved, {len(easy)} always solved, {n - len(hard) - len(easy)} others"
        )
        why = f"{where}, none inside the band"
        knobs = [
            f"more samples per problem (calibrate.samples = {samples}: p moves in steps of 1/{samples})",
            "a wider band (calibrate.min_pass_rate, calibrate.max_pass_rate, calibrate.keep_inclusive)",
        ]
    return f"{head}: {why}; use {_either(knobs)}"


def _either(options: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
