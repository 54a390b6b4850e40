"""What a training stage publishes: its summary, the headline DVC compares, the curves, and last its manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lead.config import PathParams
from lead.dag import manifest_path, output, summary_file
from lead.io.files import atomic_path, write_json, write_text
from lead.io.fingerprint import publish, without_run_facts
from lead.io.tracking import mark_run


def publish_training(
    state, paths: PathParams, stage: str, summary: dict[str, Any], *, curves: bool = False
) -> None:
    """The main process writes ``<paths.reports>/<stage>.json`` (the summary without its per-step curve), with
    ``curves`` the curve as ``<stage>_curves.csv`` and ``.png`` (:func:`write_curves`), and, last, the stage's
    manifest: the model by content and the run's identity (the MLflow run that trained it is tagged with it)."""
    if not state.is_main_process:
        return
    report = summary_file(paths, stage)
    write_json(report, without_run_facts({k: v for k, v in summary.items() if k != "curve"}))
    outputs = [report, write_headline(paths, stage, summary)]
    if curves:
        outputs += write_curves(output(paths, stage, "curves").with_suffix(""), summary.get("curve") or [])
    facts = {k: summary.get(k) for k in ("model", "identity")}
    publish(
        manifest_path(paths, stage),
        stage,
        outputs,
        before_writing=mark_run(summary.get("mlflow_run_id")),
        **facts,
    )


# What DVC shows as a training stage's metrics (<stage>.json keeps all): with the generation the steps cost.
HEADLINE_KEYS = ("steps", "last_reward", "prompts_drawn", "refill_rounds", "completion_tokens")


def write_headline(paths: PathParams, stage: str, summary: dict[str, Any]) -> Path:
    """``<paths.reports>/<stage>_headline.json``: the figures of :data:`HEADLINE_KEYS` (DVC's metrics of the stage:
    `dvc exp show` compares them; the run ids, hashes and times of ``<stage>.json`` would fill its columns)."""
    path = output(paths, stage, "headline")
    write_json(path, {k: summary[k] for k in HEADLINE_KEYS if k in summary})
    return path


# A training curve's columns, per logged step, and the trainer's log key each is read from: the mean reward,
# completion length, share correct, share cut at the token limit, and the spread of AD's weights over the
# informative groups (lead.core.advantages.lead_metrics).
CURVE = {
    "step": "step",
    "reward": "reward",
    "length": "lead/length_mean",
    "correct": "lead/share_correct",
    "truncated": "lead/truncated",
    "weight_spread": "lead/weight_spread",
    "informative": "dynamic/informative_share",
    "refill_rounds": "dynamic/refill_rounds",
    "tokens_per_informative_group": "dynamic/tokens_per_informative_group",
}
CURVE_COLUMNS = tuple(CURVE)


def curve_point(logged: dict[str, Any]) -> dict[str, Any]:
    """One logged step of the trainer's ``log_history`` as a curve point (:data:`CURVE`; None where not logged).

    >>> curve_point({"step": 3, "reward": 0.5, "lead/length_mean": 41.0})["length"]
    41.0
    """
    return {column: logged.get(key) for column, key in CURVE.items()}


# The generation a run cost, summed over its steps from the trainer's per-step metrics (lead.training.trainer).
TOTALS = {
    "prompts_drawn": "dynamic/prompts_drawn",
    "refill_rounds": "dynamic/refill_rounds",
    "completion_tokens": "dynamic/completion_tokens",
    "short_groups": "dynamic/short_groups",
}


def generation_totals(log_history: list[dict[str, Any]]) -> dict[str, float]:
    """:data:`TOTALS` over a run: each logged value is the mean of the steps since the previous log, so it
    counts once per step of its interval (exact with ``logging_steps: 1``). A key never logged is left out.

    >>> generation_totals([{"step": 1, "dynamic/refill_rounds": 1.0}, {"step": 3, "dynamic/refill_rounds": 0.5}])
    {'refill_rounds': 2.0}
    """
    totals: dict[str, float] = {}
    previous = 0
    for entry in log_history:
        if "step" not in entry or not any(key in entry for key in TOTALS.values()):
            continue
        steps = entry["step"] - previous
        previous = entry["step"]
        for name, key in TOTALS.items():
            if key in entry:
                totals[name] = totals.get(name, 0.0) + entry[key] * steps
    return totals


def write_curves(stem: Path, curve: list[dict[str, Any]]) -> list[Path]:
    """The columns of :data:`CURVE_COLUMNS` per logged step: ``<stem>.csv`` (the numbers) and ``<stem>.png``
    (reward, length, AD weights' spread, the informative share), which ``dvc plots diff`` shows side by side for
    two experiments or commits."""
    from matplotlib.figure import Figure

    table = stem.with_suffix(".csv")
    rows = "".join(
        ",".join("" if p.get(column) is None else str(p[column]) for column in CURVE_COLUMNS) + "\n"
        for p in curve
    )
    write_text(table, ",".join(CURVE_COLUMNS) + "\n" + rows)
    fig = Figure(figsize=(14, 3.2), layout="constrained")
    reward, length, weights, signal = fig.subplots(1, 4)
    steps = [p["step"] for p in curve]
    reward.plot(steps, [p["reward"] for p in curve], color="tab:blue")
    reward.set(xlabel="step", ylabel="mean reward", title="reward")
    length.plot(steps, [p["length"] for p in curve], color="tab:orange")
    length.set(xlabel="step", ylabel="tokens", title="completion length")
    weights.plot(steps, [p.get("weight_spread") for p in curve], color="tab:green")
    weights.set(xlabel="step", ylabel="std of w(ρ)", title="AD weights' spread (informative groups)")
    signal.plot(steps, [p.get("informative") for p in curve], color="tab:purple", label="informative share")
    signal.set(
        xlabel="step",
        ylabel="share of groups",
        ylim=(-0.05, 1.05),
        title="groups with a signal (first batch)",
    )
    if any(
        p.get("refill_rounds") for p in curve
    ):  # dynamic sampling: how many rounds it took to fill the batch
        rounds = signal.twinx()
        rounds.step(steps, [p.get("refill_rounds") for p in curve], color="tab:gray", where="mid")
        rounds.set_ylabel("refill rounds")
    image = stem.with_suffix(".png")
    with atomic_path(image) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return [table, image]
