"""What a flow run did, for people: one line per stage (the run log) and a markdown table (a Prefect artifact).

Each stage's line comes from the summary JSON it wrote (:func:`flows.pipeline.summary_file`) and from what
``dvc repro`` said it did with it (:data:`OUTCOMES`); links go to the MLflow UI when the tracking URI is one
(``http(s)://``), otherwise the run ids are given as they are (``mlflow ui --backend-store-uri <uri>`` shows them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# What became of a stage in a flow run. The first four are DVC's own verdicts (flows.pipeline reads them from
# `dvc repro`'s output); "failed" and "not run" are the flow's, for the table of a run that stopped early.
OUTCOMES = {
    "ran": "ran",
    "skipped": "skipped (up to date)",
    "restored": "restored from the DVC run cache",
    "pulled": "pulled from the DVC remote",
    "failed": "failed",
    "not run": "not run",
}


def _number(value: Any, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _steps(n: int) -> str:
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
        return f"{_steps(summary['steps'])}, final loss {_number(summary.get('final_loss'))}"
    if stage in ("calibrate", "calibrate_stage2"):
        return (
            f"kept {summary['kept']} of {summary['problems']} ({summary['keep_rule']}); "
            f"mean pass rate {_number(summary.get('mean_pass_rate'))}"
        )
    if stage in ("train", "train_stage2"):
        resumed = f", resumed from {summary['resumed_from']}" if summary.get("resumed_from") else ""
        return f"{_steps(summary['steps'])}, last reward {_number(summary.get('last_reward'))}{resumed}"
    if stage == "evaluate":
        # "<benchmark>.pass_at_1" at the top level; deeper keys are per budget or difficulty level
        names = [
            key.partition(".")[0] for key in summary if key.count(".") == 1 and key.endswith(".pass_at_1")
        ]
        return "; ".join(
            f"{name} Pass@1 {_number(summary[f'{name}.pass_at_1'])}, "
            f"Len {_number(summary.get(f'{name}.len_avg'), '.1f')}"
            for name in names
        )
    if stage == "register":
        return f"{summary['model_name']} version {summary['version']} ({_aliases(summary)})"
    raise KeyError(f"no headline for the stage {stage!r}")


def _aliases(register: Mapping[str, Any]) -> str:
    return ", ".join(register.get("aliases") or []) or "no alias"


def stage_line(stage: str, outcome: str, summary: Mapping[str, Any]) -> str:
    """``"<stage>: <outcome> — <headline>"``, the line the run log gets for each stage."""
    return f"{stage}: {OUTCOMES[outcome]} — {headline(stage, summary)}"


def _ui(tracking_uri: str) -> str | None:
    return tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) else None


def run_link(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A markdown link to the MLflow run in the UI at ``tracking_uri``; the run id alone when it is no UI."""
    ui = _ui(tracking_uri)
    return f"[{run_id[:12]}]({ui}/#/experiments/{experiment_id}/runs/{run_id})" if ui else f"`{run_id}`"


def model_link(tracking_uri: str, name: str, version: int | str) -> str:
    """A markdown link to a registered model version in the UI at ``tracking_uri``, else its name and version."""
    ui = _ui(tracking_uri)
    text = f"{name} version {version}"
    return f"[{text}]({ui}/#/models/{name}/versions/{version})" if ui else f"`{text}`"


@dataclass(frozen=True)
class StageRow:
    """One stage of a flow run: what became of it, its summary, its time and its MLflow run, if any."""

    stage: str
    outcome: str
    summary: Mapping[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    run: tuple[str, str] | None = None  # (experiment id, run id)
    earlier_run: bool = (
        False  # the run its summary names, from before this flow run (nothing ran under it now)
    )


def _cell(text: str) -> str:
    return text.replace("|", r"\|").replace("\n", " ")


def markdown(
    *,
    flow_run: str,
    tracking_uri: str,
    parent: tuple[str, str],
    overrides: list[str],
    experiment: Mapping[str, str] | None,
    rows: list[StageRow],
) -> str:
    """The flow run's summary as markdown: where its results are (the DVC experiment or the workspace), the
    overrides, the registered version, the MLflow parent run, then one table row per stage."""
    if experiment:
        where = (
            f"DVC experiment `{experiment['name']}` (commit `{experiment['rev'][:10]}` on "
            f"`{experiment['baseline'][:10]}`): `dvc exp show`, `dvc exp apply {experiment['name']}`"
        )
    elif overrides:
        where = "none: the run stopped before its DVC experiment was saved"
    else:
        where = "the workspace itself (no overrides): its `dvc.lock` and outputs"
    registered = next(
        (r for r in rows if r.stage == "register" and r.summary.get("version") is not None), None
    )
    lines = [
        f"# lead-pipeline: {flow_run}",
        "",
        f"- **Results**: {where}",
        f"- **Overrides**: {', '.join(f'`{o}`' for o in overrides) or 'none'}",
        "- **Registered**: "
        + (
            f"{model_link(tracking_uri, registered.summary['model_name'], registered.summary['version'])} "
            f"({_aliases(registered.summary)})"
            + ("" if registered.outcome == "ran" else ", registered by an earlier run")
            if registered
            else "no version"
        ),
        f"- **MLflow**: parent run {run_link(tracking_uri, *parent)} in `{tracking_uri}`",
        "",
        "| stage | outcome | result | seconds | MLflow run |",
        "|---|---|---|---:|---|",
    ]
    for row in rows:
        result = headline(row.stage, row.summary) if row.outcome not in ("failed", "not run") else "-"
        run = "-"
        if row.run:
            run = run_link(tracking_uri, *row.run) + (" (an earlier run)" if row.earlier_run else "")
        seconds = _number(row.seconds, ".1f") if row.seconds is not None else "-"
        lines.append(f"| {row.stage} | {OUTCOMES[row.outcome]} | {_cell(result)} | {seconds} | {run} |")
    return "\n".join(lines) + "\n"
