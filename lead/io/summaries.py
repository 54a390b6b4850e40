"""What each stage wrote about its run: where (:func:`summary_file`) and its one line for people (:func:`headline`).

Read by the stages themselves (each ends by saying what it did), by ``lead results`` (what ``make run`` ends
with: the headline figures and where the results are) and by the Prefect flows (the run log and the summary
artifact): one rule, written here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lead.config import Params


def summary_file(params: Params, stage: str) -> Path:
    """The JSON each stage writes about its run (a DVC metrics file or output)."""
    return {
        "curate": params.paths.curated / "curation.json",
        "warmstart": params.paths.reports / "warmstart.json",
        "calibrate": params.paths.reports / "calibrate" / "summary.json",
        "train": params.paths.reports / "train.json",
        "calibrate_stage2": params.paths.reports / "calibrate_stage2" / "summary.json",
        "train_stage2": params.paths.reports / "train_stage2.json",
        "evaluate": params.paths.reports / "evaluate" / "metrics.json",
        "register": params.paths.reports / "register.json",
    }[stage]


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
        return f"{steps_text(summary['steps'])}, last reward {number(summary.get('last_reward'))}{resumed}"
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
