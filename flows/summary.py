"""What a flow run did, for people: one line per stage (the run log) and a markdown list (a Prefect artifact).

Each stage's line comes from the summary JSON it wrote (:mod:`lead.io.summaries`) and from what
``dvc repro`` said it did with it (:data:`OUTCOMES`); links go to the MLflow UI when the tracking URI is one
(``http(s)://``), otherwise the run ids are given as they are (``mlflow ui --backend-store-uri <uri>`` shows them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lead.io.summaries import aliases, headline, number

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


def stage_line(stage: str, outcome: str, summary: Mapping[str, Any]) -> str:
    """``"<stage>: <outcome> — <headline>"``, the line the run log gets for each stage."""
    return f"{stage}: {OUTCOMES[outcome]} — {headline(stage, summary)}"


def closing_line(
    flow_run: str,
    tracking_uri: str,
    parent: tuple[str, str],
    experiment: Mapping[str, str] | None,
    rows: list[StageRow],
) -> str:
    """The line a finished ``lead-pipeline`` run ends with: its last results (evaluate's, register's, else the
    last stage's headline), where they are (the DVC experiment, or the workspace) and the MLflow parent run."""
    where = "the workspace"
    if experiment:
        where = f"DVC experiment {experiment['name']} (dvc exp apply {experiment['name']})"
    ui = _ui(tracking_uri)
    run = f"{ui}/#/experiments/{parent[0]}/runs/{parent[1]}" if ui else f"{parent[1]} in {tracking_uri}"
    return f"lead-pipeline {flow_run}: done — {results(rows)} — results in {where}; MLflow parent run {run}"


def results(rows: list[StageRow]) -> str:
    """What a run came to: evaluate's and register's headlines, else the last stage's."""
    shown = [r for r in rows if r.stage in ("evaluate", "register")] or rows[-1:]
    return "; ".join(f"{r.stage}: {headline(r.stage, r.summary)}" for r in shown)


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
    earlier_run: bool = False  # the run that published its outputs, from before this flow run
    manifest: str | None = None  # where its outputs are published (the earlier run is found by its content)


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
            f"({aliases(registered.summary)})"
            + ("" if registered.outcome == "ran" else ", registered by an earlier run")
            if registered
            else next(
                (
                    f"nothing ({r.summary['reason']})"
                    for r in rows
                    if r.stage == "register" and r.summary.get("reason")
                ),
                "no version",
            )
        ),
        f"- **MLflow**: parent run {run_link(tracking_uri, *parent)} in `{tracking_uri}`",
        "",
        "## Stages",
        "",
    ]
    # One bullet per stage, not a table: Prefect's UI renders a table's cells unwrapped (white-space: nowrap), so
    # a long headline or run id pushed the table past a 1,400 px window; a list item wraps.
    for row in rows:
        line = f"- **{row.stage}**: {OUTCOMES[row.outcome]}"
        if row.seconds is not None:
            line += f" in {number(row.seconds, '.1f')} s"
        if row.outcome not in ("failed", "not run"):
            line += f": {' '.join(headline(row.stage, row.summary).split())}"
        if row.run:
            line += f"; MLflow run {run_link(tracking_uri, *row.run)}"
            line += " (an earlier run)" if row.earlier_run else ""
        lines.append(line)
    return "\n".join(lines) + "\n"
