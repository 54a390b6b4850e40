"""What a stage says about its run: its one line for people (:func:`headline`), and why calibration kept no
problem (:func:`empty_pool_message`).

Read by the stages themselves (each ends by saying what it did), by ``lead results`` (what ``make run`` ends
with: the headline figures and where the results are, :func:`lead.dag.summary_file`) and by the Prefect flows
(the run log and the summary artifact): one rule, written here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lead.core.difficulty import Inclusive, band_rule, in_band


def number(value: Any, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def steps_text(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def headline(stage: str, summary: Mapping[str, Any]) -> str:
    """The one line that says what ``stage``'s ``summary`` holds (counts, steps, scores, the version).

    A summary without the expected keys says so instead: the line is for people, never a reason to fail a run.
    """
    if not summary:
        return "no summary written"
    try:
        return _headline(stage, summary)
    except (KeyError, TypeError, ValueError) as exc:
        return f"summary unreadable ({type(exc).__name__}: {exc})"


def _headline(stage: str, summary: Mapping[str, Any]) -> str:
    if summary.get("enabled") is False:
        return f"off (starts from {summary['model']})" if stage == "warmstart" else "off"
    if stage == "params":
        return "valid"
    if stage == "curate":
        removed = sum(summary.get("removed", {}).values())
        return f"{summary['train']} train, {summary['test']} test problems" + (
            f"; {removed} removed" if removed else ""
        )
    if stage == "warmstart":
        return f"{steps_text(summary['steps'])}, final loss {number(summary.get('final_loss'))}"
    if stage in ("calibrate", "calibrate_stage2"):
        return (
            f"kept {summary['kept']} of {summary['problems']} ({summary['keep_rule']}); "
            f"mean pass rate {number(summary.get('mean_pass_rate'))}"
        )
    if stage in ("train", "train_stage2"):
        resumed = f", resumed from {summary['resumed_from']}" if summary.get("resumed_from") else ""
        refilled = (  # dynamic sampling: what filling every batch with informative groups cost
            f", {number(summary.get('prompts_drawn'), '.0f')} prompts drawn in "
            f"{number(summary.get('refill_rounds'), '.0f')} refill rounds"
            if summary.get("dynamic_sampling")
            else ""
        )
        return f"{steps_text(summary['steps'])}, last reward {number(summary.get('last_reward'))}{refilled}{resumed}"
    if stage == "evaluate":
        # "<benchmark>.pass_at_1" at the top level; deeper keys are per budget or difficulty level
        names = [
            key.partition(".")[0] for key in summary if key.count(".") == 1 and key.endswith(".pass_at_1")
        ]
        return "; ".join(
            f"{name} Pass@1 {number(summary[f'{name}.pass_at_1'])}, "
            f"Len {number(summary.get(f'{name}.len_avg'), '.1f')}"
            for name in names
        )
    if stage == "register":
        if summary.get("registered") is False:
            return f"nothing registered: {summary.get('reason', '')}"
        again = (
            ", registered before (the same model and evaluation)"
            if summary.get("new_version") is False
            else ""
        )
        return f"{summary['model_name']} version {summary['version']} ({aliases(summary)}){again}"
    raise KeyError(f"no headline for the stage {stage!r}")


def aliases(register: Mapping[str, Any]) -> str:
    return ", ".join(register.get("aliases") or []) or "no alias"


def _closing(inclusive: str | None, end: str) -> str:
    """The ``calibrate.keep_inclusive`` value that closes ``end`` (``left``/``right``) of the band too."""
    if inclusive is None:  # band unknown
        return f"{end} or both"
    closed = {"left", "right"} if inclusive == "both" else {inclusive} - {"neither"}
    return "both" if closed | {end} == {"left", "right"} else end


def empty_pool_message(
    n_correct: Sequence[int],
    samples: int,
    band: tuple[float, float, Inclusive] | None = None,
    *,
    reports: Path,
    base: str | None,
) -> str:
    """Why stage-1 calibration kept none of its problems, with its numbers, and the knobs for that reason.

    ``n_correct`` = each problem's correct completions out of ``samples`` (k), so p = c / k; ``band`` = the
    keep band ``(low, high, inclusive)`` of :func:`lead.core.difficulty.in_band` where the caller knows it (the
    calibrate stage), None where it does not (the train stage reads the calibrated pool, not ``calibrate.*``):
    then a problem is too hard when p = 0 and too easy when p = 1. ``reports`` = ``paths.reports`` (where curate's
    report is); ``base`` = ``model.base`` when the model calibrated is it, None when it is the warm start. With
    nothing kept, either

    * every problem is too hard (p at or below the band's low end; "none solved" when p = 0 for all): a
      stronger model, easier problems, or a band that reaches lower (``calibrate.min_pass_rate``,
      ``calibrate.keep_inclusive`` closing the low end);
    * every problem is too easy ("all solved" when p = 1 for all): harder problems, or a band that reaches
      higher (``calibrate.max_pass_rate``, ``keep_inclusive`` closing the high end: all-correct groups still
      carry the length reward's signal);
    * or some of each, none inside: more samples per problem (p moves in steps of 1/k) or a wider band.
    """
    n, total, solved = len(n_correct), len(n_correct) * samples, sum(n_correct)
    rule = f" ({band_rule(*band)})" if band else ""
    head = f"calibrate kept 0 of {n} problems{rule}"
    if not n:
        return f"{head}: the curated pool is empty; check curate.sources and {reports}/curate"
    rates = [c / samples for c in n_correct]
    model = "the warm start" if base is None else f"model.base ({base})"
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
            if base is None
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
