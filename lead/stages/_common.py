"""What every stage's ``main()`` shares: one argument parser, params loading, clean error exits."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from lead import verbose
from lead.config import DEFAULT_PARAMS, ParamsError, load_params, params_data, recipe_overrides
from lead.config.last_valid import changes, remember
from lead.dag import STAGES, StageError
from lead.patches.interpreter_exit import exit_now


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

    Params the stage ran with are the params its record says: a params file that passes is kept as the last
    valid one (:mod:`lead.config.last_valid`, what a refusal offers to restore), and one that changed while the
    stage ran fails the stage (:func:`params_changed`) so that DVC does not record its outputs under params they
    were not made with. A refusal under DVC says what it left and the way back (:func:`refusal_hints`).

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
    params_file = Path(common["params"])
    try:
        recipe = recipe_overrides(common["recipe"]) if common["recipe"] else []
        overrides = [*recipe, *common["overrides"]]
        params = load_params(params_file, overrides)
        if not overrides:
            remember(params_file)
        read = params_data(params_file, overrides)
        result = run(params, **args)
        if _params_data_or_none(params_file, overrides) != read:
            raise StageError(params_changed(name, params_file))
        say_what_it_did(name, result)
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        for line in refusal_hints(name, params_file):
            print(line, file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as exc:
        message = user_error(exc)
        if message is None or verbose():
            raise
        print(f"error: {name}: {message}", file=sys.stderr)
        stage = os.environ.get("DVC_STAGE")
        if stage:  # DVC removed this stage's outputs before running it
            print(_checkout_hint(name, stage), file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _params_data_or_none(path: Path, overrides: list[str]) -> Any:
    """What ``path`` holds now (with ``overrides``), or None when it can no longer be read."""
    try:
        return params_data(path, overrides)
    except ParamsError:
        return None


def params_changed(name: str, params_file: Path) -> str:
    """Why a stage fails when its params file changed while it ran: DVC records a stage's params as the file
    holds them when the stage *ends* (in ``dvc.lock``), so finishing would record these outputs under params
    they were not made with (a second ``dvc exp run -S train.seed=5`` writes params.yaml before DVC's lock
    refuses it, while the first trains with seed 4)."""
    return (
        f"{params_file} changed while {name} ran (another command wrote it, e.g. a second `dvc exp run` "
        "started beside this one): this run's outputs were made with the params it read at its start and are "
        f"not recorded under the new ones; run {name} again (one run per workspace at a time)"
    )


def _checkout_hint(name: str, stage: str) -> str:
    """How to get back what DVC removed before running ``stage`` (its DVC address) when it fails."""
    # its own pipeline file: a bare `dvc checkout` also tries the other pipeline's never-run outputs
    pipeline = stage.rpartition(":")[0] or "dvc.yaml"
    return f"DVC removed {name}'s outputs before running it: `dvc checkout {pipeline}` restores the last good run's"


def refusal_hints(name: str, params_file: Path) -> list[str]:
    """What a refusal of the params under DVC leaves behind, and how to go back: the outputs (the ``params``
    stage runs before any other, so none was removed; a stage run alone with ``dvc repro -s`` had lost its own),
    and what ``params.yaml`` holds against its last valid copy (``dvc exp run`` writes its ``-S`` values into
    it before any stage runs and puts nothing back when the experiment fails)."""
    stage = os.environ.get("DVC_STAGE")
    if not stage:  # `lead` and the flows check params before anything is written: nothing to undo
        return []
    if name == "params":
        lines = ["refused before any other stage ran: every output is as it was"]
    else:
        lines = [
            _checkout_hint(name, stage)
            + " (a `dvc repro` of the whole pipeline checks params.yaml first, before any output is removed)"
        ]
    changed = changes(params_file)
    experiment = os.environ.get("DVC_EXP_NAME")
    who = f"`dvc exp run` (experiment {experiment}) wrote its -S values into it and " if experiment else ""
    if changed:
        lines.append(
            f"{params_file} differs from the last valid one in: {'; '.join(changed)} ({who}DVC puts nothing back "
            "when a run fails)"
        )
        lines.append(
            f"restore the last valid params.yaml: lead params --restore (the committed one: git checkout -- "
            f"{params_file})"
        )
    elif changed is None:
        lines.append(f"fix {params_file}, or `git checkout -- {params_file}` for the committed one")
    return lines


def as_process(main: Callable[[], None]) -> NoReturn:
    """Run a stage's ``main`` as the whole process (``python -m lead.stages.<stage>``) and end the process with
    its exit code (:func:`lead.patches.interpreter_exit.exit_now`: what a normal exit does, without the
    interpreter's teardown of every module). An exception other than ``SystemExit`` (a bug: its traceback is the
    message) leaves by the normal way."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is not None and not isinstance(exc.code, int):
            raise  # a message to print: the interpreter's own way
        code = exc.code or 0
    exit_now(code)


def say_what_it_did(name: str, result: Any) -> None:
    """The stage's last line: its headline (:func:`lead.io.summaries.headline`: kept N of M, steps and the last
    reward, Pass@1 and length, the version registered), so that a ``dvc repro`` transcript says what happened."""
    from lead.io.summaries import headline

    if name in STAGES and isinstance(result, dict):
        print(f"{name}: {headline(name, result)}", flush=True)


def user_error(exc: BaseException) -> str | None:
    """The message of an error the user caused and can fix -- a stage that cannot go on (:class:`StageError`), a
    source that cannot be read, an input another run changed, a missing input the code names, a full disk --,
    printed as one line without a traceback; None for anything else (a bug, whose traceback is the message). A write
    that a symlink would take out of the workspace is one too."""
    from lead.io.files import DiskFull, OutsideWorkspace
    from lead.io.fingerprint import StaleOutputError
    from lead.io.sources import SourceError

    if isinstance(exc, StageError | SourceError | StaleOutputError | DiskFull | OutsideWorkspace):
        return str(exc)
    if isinstance(exc, FileNotFoundError) and exc.errno is None:  # raised by this code with its own message
        return str(exc)
    from lead.io.tracking import server_gone

    return server_gone(exc)


def _terminate(signum: int, frame: object) -> None:
    from lead.io.tracking import Terminated

    raise Terminated(128 + signum)
