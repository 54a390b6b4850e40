"""What a reviewer reads on the version page: links to the runs and samples, the params changed against the
champion, the comparison table and plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lead.config import Params, PathParams
from lead.core import review
from lead.dag import output_name
from lead.registration.evidence import Evidence, candidate_samples


def _experiment_of(client, run_id: str | None) -> str | None:
    """The experiment id of a run (None: no run id, or the run is gone)."""
    from mlflow.exceptions import MlflowException

    if not run_id:
        return None
    try:
        return str(client.get_run(run_id).info.experiment_id)
    except MlflowException:
        return None


def review_links(client, ev: Evidence, name: str, champion) -> tuple[dict[str, str], dict[str, str]]:
    """The description's links, as UI routes and server URLs relative to the UI's page (the forms of
    :mod:`lead.core.review`), for what exists: the evaluate run (its metrics are the registered figures), the
    train run, the champion's version; the plots the evaluate run holds (viewer page, and the file itself)."""
    runs: dict[str, str] = {}
    for label, run_id in (("evaluate run", ev.evaluate_run_id), ("train run", ev.train_run_id)):
        experiment = _experiment_of(client, run_id)
        if experiment is not None:
            runs[label] = review.ui_run_link(experiment, run_id)
    if champion is not None:
        runs[f"champion v{champion.version}"] = review.ui_model_version_link(name, champion.version)
    plots: dict[str, str] = {}
    experiment = _experiment_of(client, ev.evaluate_run_id)
    logged = {a.path for a in client.list_artifacts(ev.evaluate_run_id, "evaluate")} if experiment else set()
    for plot in (output_name("evaluate", "accuracy_plot"), output_name("evaluate", "budget_plot")):
        path = f"evaluate/{plot}"
        if path in logged and experiment is not None:
            plots[plot.removesuffix(".png")] = review.ui_run_link(experiment, ev.evaluate_run_id, path)
            plots[f"{plot} (file)"] = review.artifact_file_link(ev.evaluate_run_id, path)
    return runs, plots


def champion_samples(client, champion) -> list[dict[str, Any]] | None:
    """The champion's sample records, from its evaluate run (None: no champion, or its run holds none)."""
    import tempfile

    import pyarrow.parquet as pq
    from mlflow.exceptions import MlflowException

    run_id = champion.tags.get("evaluate.run_id") if champion is not None else None
    if not run_id:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, f"evaluate/{output_name('evaluate', 'records')}", tmp)
        except (MlflowException, OSError):
            return None
        return pq.read_table(path).to_pylist()


def evidence_params(client, ev: Evidence) -> dict[str, str]:
    """The params the train and evaluate runs logged (the evaluate run's win on a key both logged), for the
    register run: the version's *Source Run* then holds what MLflow's version *Compare* compares."""
    out: dict[str, str] = {}
    for run_id in (ev.train_run_id, ev.evaluate_run_id):
        out.update(_run_params(client, run_id) or {})
    return out


def _run_params(client, run_id: str | None) -> dict[str, str] | None:
    """The params an MLflow run logged (None: no such run, e.g. deleted)."""
    from mlflow.exceptions import MlflowException

    if not run_id:
        return None
    try:
        return dict(client.get_run(run_id).data.params)
    except MlflowException:
        return None


def params_vs_champion(client, ev: Evidence, champion) -> list[review.ParamChange] | None:
    """What the candidate's train and evaluate runs logged differently from the champion's (their
    ``train.run_id`` / ``evaluate.run_id`` tags); None when the champion's runs are gone."""
    if champion is None:
        return None
    mine, theirs = {}, {}
    for own, tag in ((ev.train_run_id, "train.run_id"), (ev.evaluate_run_id, "evaluate.run_id")):
        a, b = _run_params(client, own), _run_params(client, champion.tags.get(tag))
        if a is None or b is None:
            return None
        mine.update(a)
        theirs.update(b)
    return review.params_diff(params_keys(mine), params_keys(theirs))


def params_keys(logged: dict[str, str]) -> dict[str, str]:
    """The ``params.yaml`` keys among a run's logged params (``train.max_steps``): the knobs users set, each once.
    Left out: what TRL's and transformers' own logging adds for the same settings (``max_steps``,
    ``learning_rate``, ... of the GRPOConfig) and the preset's resolved values (``resolved.*``), which repeat
    them in other names."""
    sections = {field.alias or name for name, field in Params.model_fields.items()}
    return {k: v for k, v in logged.items() if k.partition(".")[0] in sections}


def review_description(
    client, ev: Evidence, champion, plots: dict[str, str], run_id: str, *, paths: PathParams
) -> str:
    """The description's review section: sample completions of the candidate beside the champion's, and the
    accuracy-against-length plot: of both versions when the champion's samples are there (logged to this
    register run, ``run_id``), else the evaluate run's."""
    accuracy_plot = output_name("evaluate", "accuracy_plot")
    mine, theirs = candidate_samples(paths), champion_samples(client, champion)
    label = f"v{champion.version}" if champion else "champion"
    plot = None
    if mine and theirs:
        plot = review.artifact_file_link(run_id, _both_versions_plot(mine, theirs, label))
    elif f"{accuracy_plot} (file)" in plots:
        plot = review.artifact_file_link(ev.evaluate_run_id, f"evaluate/{accuracy_plot}")
    return review.review_section(mine, theirs, label, plot=plot)


def _both_versions_plot(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], champion_label: str) -> str:
    """Accuracy against completion length of this version and the champion, one line each (equal-count length
    bins over the samples of every benchmark, :func:`lead.core.metrics.accuracy_by_length`), logged to the
    active MLflow run; its artifact path."""
    import tempfile

    import mlflow
    from matplotlib.figure import Figure

    from lead.core.metrics import Sample, accuracy_by_length

    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.subplots()
    for label, rows, style in (("this version", mine, "-"), (f"{champion_label} (champion)", theirs, "--")):
        samples = [
            Sample(r["answer"], bool(r["correct"]), int(r["tokens"]))
            for r in rows
            if r.get("in_context", True)
        ]
        points = accuracy_by_length(samples)
        ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="o", ls=style, label=label)
    ax.set(xlabel="completion length (tokens, mean of an equal-count bin)", ylabel="share correct")
    ax.set(ylim=(-0.02, 1.02), title="Accuracy against length, every benchmark's samples")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")  # inside the axes: the page shows the image at its width, nothing is cut
    path = "review/accuracy_vs_length.png"
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / Path(path).name
        fig.savefig(file, dpi=120, format="png")
        mlflow.log_artifact(str(file), artifact_path=str(Path(path).parent))
    return path
