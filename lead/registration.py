"""Registration: the trained model becomes a new version in the MLflow model registry, for review.

The library of the ``register`` stage (:mod:`lead.stages.register`: :func:`register`) and of ``lead promote``
(:func:`promote`); the pure parts (the gate, the description, the review section) are :mod:`lead.core.registry`'s.

Inputs: the model ``evaluate.model`` names (``train``, or ``train_stage2`` after the curriculum's stage 2) and
what ``evaluate`` wrote about it (``<paths.reports>/evaluate/metrics.json``), the manifests of both stages,
``dvc.lock``. Nothing is registered unless they tell one story (:func:`evidence`): the evaluation's manifest
names this model by content, the training stage published this very model, and the evaluate MLflow run (which the
version links) finished holding exactly the figures registered.

What is registered: the model in MLflow's **transformers flavor** (``mlflow.transformers.log_model``, task
``text-generation``, explicit pip requirements pinned to the versions that trained it), so that a reviewer can
``mlflow.transformers.load_model("models:/<name>@champion")`` or serve it without knowing our folder layout.
The weights are copied into the artifact store (for a 14B model that is the point of a registry: the version
stays loadable whatever happens to the training workspace).

The version carries

* **lineage tags**: ``git.commit``, ``dvc.train_data_md5`` and ``dvc.model_md5`` (from ``dvc.lock``),
  ``model.fingerprint`` and ``params.fingerprint`` (:mod:`lead.io.fingerprint`), ``train.preset``,
  ``mlflow.parent_run_id``, ``train.run_id``, ``evaluate.run_id``, ``eval.protocol`` (a hash of the evaluate
  params) and its scores ``eval.<benchmark>.<metric>``; ``lead.state`` is ``registered`` once the version is
  complete, before any alias moves (a version a killed run left ``registering``, without aliases, is deleted
  by the next run for the same model);
* a **description**: the evaluation table against the current ``@champion`` (same protocol), the gate's
  verdict, the params changed against the champion's, and links a reviewer can click in MLflow's UI — the
  evaluate and train runs, the champion's version, the evaluation plots (viewer page and file) — written as
  routes and server URLs relative to the UI's page (:mod:`lead.core.registry`), so they work on whatever host
  the UI is opened at.

The version's *Source Run* is this stage's run, and it holds the version's evidence: the figures of
``metrics.json`` as metrics (exactly those the evaluate run logged) and the params the train and evaluate runs
logged, beside its own ``register.*`` (tags ``train.run_id`` / ``evaluate.run_id`` name the runs). So the UI's
Source Run page shows the registered figures, and its version *Compare* (which compares the versions' source
runs) shows which params and metrics differ.

Aliases: the new version becomes ``@challenger``; ``@champion`` moves to it only when the gate passes
(``register.pass_tolerance``, ``register.length_tolerance``), or later by ``lead promote VERSION --reason``.
Every move is recorded on the versions as tags (``champion.promoted`` / ``champion.replaced``: time, how, why).

Output: ``<paths.reports>/register.json`` (model name, version, aliases, the gate's decision, lineage).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from lead.config import EvaluateParams, Params, PathParams, RegisterParams, TrackingParams
from lead.core import registry
from lead.dag import manifest_path, output, output_name, published_model, summary_file
from lead.io.files import repo_root, write_json
from lead.io.fingerprint import StaleOutputError, read_verified, value_fingerprint, verify, without_run_facts
from lead.io.tracking import ENDED_BY_TAG, PARENT_RUN_ENV, published_run, tracking_uri

CHAMPION, CHALLENGER = "champion", "challenger"
# What the transformers flavor needs to load the model again, pinned to the versions in this environment.
REQUIREMENTS = ("torch", "transformers", "accelerate", "safetensors", "tokenizers")


def report_path(paths: PathParams) -> Path:
    return summary_file(paths, "register")


def pip_requirements() -> list[str]:
    """``name==version`` of :data:`REQUIREMENTS` as installed here (a CUDA build keeps only its public part)."""
    out = []
    for name in REQUIREMENTS:
        version = importlib.metadata.version(name).split("+")[0]
        out.append(f"{name}=={version}")
    return out


# What the pipeline itself rewrites while it runs: a change there says nothing about the code or params used.
PIPELINE_RECORDS = frozenset({"dvc.lock"})


def git_commit(root: Path) -> str:
    """``HEAD``'s commit, with ``+dirty`` when tracked files other than the pipeline's own records
    (:data:`PIPELINE_RECORDS`: ``dvc repro`` rewrites ``dvc.lock`` stage by stage) differ from it;
    ``unknown`` outside git. Params that differ from the commit's (``dvc exp run -S``) show as ``+dirty``
    too; the version's description lists them against the champion."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    dirty = [line[3:] for line in changed if line[3:].strip() not in PIPELINE_RECORDS]
    return head + ("+dirty" if dirty else "")


def applied_experiment(root: Path) -> str:
    """The DVC experiment the workspace holds, ``<name>@<commit>``, or ``none``: after ``dvc exp apply <name>``
    (or the ``dvc exp run`` that made it) the workspace's ``params.yaml`` and ``dvc.lock`` are those of the
    experiment's commit, which is how it is found (DVC keeps no "applied" record). Only experiments of ``HEAD``
    are looked at (``refs/exps/<HEAD>/...``)."""

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout

    try:
        head = git("rev-parse", "HEAD").decode().strip()
        refs = git("for-each-ref", "--format=%(refname) %(objectname)", f"refs/exps/{head[:2]}/{head[2:]}/")
        here = {name: (root / name).read_bytes() for name in ("params.yaml", "dvc.lock")}
    except (OSError, subprocess.CalledProcessError):
        return "none"
    for line in refs.decode().splitlines():
        ref, sha = line.split()
        try:
            if all(git("show", f"{sha}:{name}") == content for name, content in here.items()):
                return f"{ref.rsplit('/', 1)[1]}@{sha}"
        except subprocess.CalledProcessError:
            continue
    return "none"


def dvc_lock_hashes(root: Path, models: Path, stage: str = "train") -> dict[str, str]:
    """The md5s ``dvc.lock`` records for the training stage's data and model ``<models>/<stage>`` (``models`` =
    ``paths.models``; ``none`` when not run by DVC)."""
    hashes = {"dvc.train_data_md5": "none", "dvc.model_md5": "none"}
    lock = root / "dvc.lock"
    if not lock.exists():
        return hashes
    train = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get(stage, {})
    model = os.path.normpath(models / stage)
    for dep in train.get("deps", []):
        if dep["path"].endswith(".parquet") and "md5" in dep:
            hashes["dvc.train_data_md5"] = dep["md5"]
    for out in train.get("outs", []):
        if os.path.normpath(out["path"]) == model and "md5" in out:
            hashes["dvc.model_md5"] = out["md5"]
    return hashes


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _champion(client, name: str):
    """The ``@champion`` version of ``name``, or None (no such model, or no alias yet)."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


def move_champion(client, name: str, version: str, how: str, reason: str) -> None:
    """Point ``@champion`` at ``version`` and record the move on both versions (time, how, why)."""
    stamp = f"{_now()} by {how}: {reason}"
    previous = _champion(client, name)
    if previous is not None and str(previous.version) != str(version):
        client.set_model_version_tag(name, previous.version, "champion.replaced", f"{stamp} (by v{version})")
    client.set_registered_model_alias(name, CHAMPION, str(version))
    client.set_model_version_tag(name, str(version), "champion.promoted", stamp)


def promote(reg: RegisterParams, tracking: TrackingParams, version: str, reason: str) -> dict[str, Any]:
    """``lead promote``: make ``version`` the champion by hand, whatever the gate said; the reason is recorded.
    A version that is champion already is left as it is (its recorded promotion and reason stay): ``already``
    says so."""
    import mlflow
    from mlflow import MlflowClient

    if not reason.strip():
        raise ValueError("a promotion needs a reason (it is recorded on the model version)")
    mlflow.set_tracking_uri(tracking_uri(tracking))
    client = MlflowClient()
    name = reg.model_name
    target = client.get_model_version(name, str(version))  # a clear MLflow error when it does not exist
    if CHAMPION in target.aliases:
        return {
            "model_name": name,
            "champion": str(version),
            "reason": target.tags.get("champion.promoted", ""),
            "failed_gate": None,
            "already": True,
        }
    gate = target.tags.get("gate", "")
    failed = gate.startswith("gate failed")
    how = f"hand (lead promote, over the {gate})" if failed else "hand (lead promote)"
    move_champion(client, name, str(version), how, reason)
    return {
        "model_name": name,
        "champion": str(version),
        "reason": reason,
        "failed_gate": gate if failed else None,
        "already": False,
    }


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
    :mod:`lead.core.registry`), for what exists: the evaluate run (its metrics are the registered figures), the
    train run, the champion's version; the plots the evaluate run holds (viewer page, and the file itself)."""
    runs: dict[str, str] = {}
    for label, run_id in (("evaluate run", ev.evaluate_run_id), ("train run", ev.train_run_id)):
        experiment = _experiment_of(client, run_id)
        if experiment is not None:
            runs[label] = registry.ui_run_link(experiment, run_id)
    if champion is not None:
        runs[f"champion v{champion.version}"] = registry.ui_model_version_link(name, champion.version)
    plots: dict[str, str] = {}
    experiment = _experiment_of(client, ev.evaluate_run_id)
    logged = {a.path for a in client.list_artifacts(ev.evaluate_run_id, "evaluate")} if experiment else set()
    for plot in (output_name("evaluate", "accuracy_plot"), output_name("evaluate", "budget_plot")):
        path = f"evaluate/{plot}"
        if path in logged and experiment is not None:
            plots[plot.removesuffix(".png")] = registry.ui_run_link(experiment, ev.evaluate_run_id, path)
            plots[f"{plot} (file)"] = registry.artifact_file_link(ev.evaluate_run_id, path)
    return runs, plots


def candidate_samples(paths: PathParams) -> list[dict[str, Any]]:
    """Evaluate's sample records of the model being registered, when the evaluation's manifest names them (the
    bytes checked are the bytes read); none otherwise."""
    import io

    import pyarrow.parquet as pq

    try:
        content, _ = read_verified(
            manifest_path(paths, "evaluate"), "evaluate", output(paths, "evaluate", "records")
        )
    except StaleOutputError:
        return []
    return pq.read_table(io.BytesIO(content)).to_pylist()


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


# The version tags that say where it came from (run() writes them; register.json repeats them).
LINEAGE_TAGS = (
    "git.commit",
    "dvc.experiment",
    "dvc.train_data_md5",
    "dvc.model_md5",
    "model.fingerprint",
    "params.fingerprint",
    "train.preset",
    "train.run_id",
    "evaluate.run_id",
    "mlflow.parent_run_id",
)
TRAIN_STAGES = ("train", "train_stage2")  # the stages whose model (<paths.models>/<stage>) can be registered
REGISTERING, REGISTERED = "registering", "registered"  # tag lead.state: a version is complete once registered


@dataclass(frozen=True)
class Evidence:
    """What a version is registered from, each piece checked against the manifest of the stage that wrote it."""

    model: Path
    fingerprint: str
    stage: str
    metrics: dict[str, Any]
    evaluate_run_id: str
    train_run_id: str
    figures: dict[str, float]  # the numbers of ``metrics``: what the evaluate run logged
    protocol: dict[str, Any]  # what the evaluation measured, as its manifest records it


def _run_of(manifest: Path, stage: str, *, required: bool) -> Any:
    """The finished MLflow run that published ``manifest`` (:func:`lead.io.tracking.published_run`); None
    when the store holds none, or, when ``required``, a :class:`StaleOutputError` saying where the runs are."""
    import mlflow

    run = published_run(manifest)
    if run is None and required:
        raise StaleOutputError(
            f"no finished run of the tracking store {mlflow.get_tracking_uri()} made {stage}'s outputs "
            f"({manifest}): they were made against another store (the runs live where {stage} ran), or pulled "
            f"from a DVC remote. Point tracking.uri or MLFLOW_TRACKING_URI at that store, or run {stage} again "
            f"against this one (`dvc repro -f {stage}`)"
        )
    return run


def evidence(evaluation: EvaluateParams, paths: PathParams, client) -> Evidence:
    """The model ``evaluate.model`` names (``evaluation`` = params' ``evaluate`` section) and its scores, refused
    unless they are one story: the training
    stage published this very model, the evaluation's manifest names it by content, and the evaluate MLflow
    run finished with exactly the figures of ``metrics.json`` (the bytes checked are the bytes read)."""
    stage = evaluation.model
    if stage not in TRAIN_STAGES:
        raise ValueError(
            f"evaluate.model = {stage!r}: register registers a trained model; set evaluate.model = train "
            "(or train_stage2) and evaluate again, so the registered scores describe the registered model"
        )
    model = paths.models / stage
    if not model.is_dir():
        raise FileNotFoundError(f"{model}: no trained model (run `lead {stage.replace('_', '-')}` first)")
    metrics_path = output(paths, "evaluate", "metrics")
    content, evaluated = read_verified(manifest_path(paths, "evaluate"), "evaluate", metrics_path)
    model, fingerprint = published_model(paths, stage)
    if evaluated["model"] != fingerprint:
        raise ValueError(
            f"the evaluation in {metrics_path.parent} is of {evaluated['model_path']} ({evaluated['model']}), "
            f"not of {model} ({fingerprint}): evaluate again, so the registered scores describe the "
            "registered model"
        )
    verify(manifest_path(paths, stage), stage)
    trained = _run_of(manifest_path(paths, stage), stage, required=False)
    measured = evaluated.get("protocol")
    if measured is None:
        raise StaleOutputError(
            f"the evaluation in {metrics_path.parent} records no protocol (an older evaluate): evaluate again"
        )
    asked = registry.protocol(evaluation.model_dump(mode="json"))
    differ = sorted(k for k in set(asked) | set(measured) if asked.get(k) != measured.get(k))
    if differ:
        shown = ", ".join(f"{k} {measured.get(k)!r} (params: {asked.get(k)!r})" for k in differ)
        raise StaleOutputError(
            f"the evaluation in {metrics_path.parent} was measured with other evaluate params than these: {shown}; "
            "evaluate again with these params, or register with the evaluation's"
        )
    metrics = json.loads(content)
    run = _run_of(manifest_path(paths, "evaluate"), "evaluate", required=True)
    logged = run.data.metrics
    numbers = {
        k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    differ = sorted(k for k, v in numbers.items() if not math.isclose(logged.get(k, math.nan), v))
    if run.info.status != "FINISHED" or differ:
        raise StaleOutputError(
            f"evaluate run {run.info.run_id} ({run.info.status}) does not hold the figures of {metrics_path}"
            f"{' (' + ', '.join(differ[:5]) + ')' if differ else ''}: evaluate again"
        )
    return Evidence(
        model,
        fingerprint,
        stage,
        metrics,
        run.info.run_id,
        trained.info.run_id if trained else "",
        numbers,
        measured,
    )


def _remove_unfinished(client, name: str, fingerprint: str) -> None:
    """Delete versions of this model that a killed register left half-made: tagged ``registering``, with no
    alias (a version is marked ``registered`` before any alias moves, so an aliased one is never deleted).
    Only versions of the same model (by content): another workspace may be registering another one.
    The killed run that made one (its source run) is ended FAILED if it still says RUNNING: it could not end
    itself (killed, or the server it would have told was down); either way it is tagged with what became of its
    version (this stage's start may already have ended it: :func:`lead.io.tracking.end_abandoned_runs`)."""
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return
    for v in versions:
        if v.tags.get("lead.state") != REGISTERING or v.tags.get("model.fingerprint") != fingerprint:
            continue
        # search results do not carry aliases in every store: ask for the version itself
        if not client.get_model_version(name, v.version).aliases:
            client.delete_model_version(name, v.version)
            status = client.get_run(v.run_id).info.status if v.run_id else "FINISHED"
            if status != "FINISHED":
                client.set_tag(v.run_id, ENDED_BY_TAG, f"a later register (its version {v.version} deleted)")
            if status == "RUNNING":
                client.set_terminated(v.run_id, "FAILED")


def _run_params(client, run_id: str | None) -> dict[str, str] | None:
    """The params an MLflow run logged (None: no such run, e.g. deleted)."""
    from mlflow.exceptions import MlflowException

    if not run_id:
        return None
    try:
        return dict(client.get_run(run_id).data.params)
    except MlflowException:
        return None


def params_vs_champion(client, ev: Evidence, champion) -> list[registry.ParamChange] | None:
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
    return registry.params_diff(params_keys(mine), params_keys(theirs))


def params_keys(logged: dict[str, str]) -> dict[str, str]:
    """The ``params.yaml`` keys among a run's logged params (``train.max_steps``): the knobs users set, each once.
    Left out: what TRL's and transformers' own logging adds for the same settings (``max_steps``,
    ``learning_rate``, ... of the GRPOConfig) and the preset's resolved values (``resolved.*``), which repeat
    them in other names."""
    sections = {field.alias or name for name, field in Params.model_fields.items()}
    return {k: v for k, v in logged.items() if k.partition(".")[0] in sections}


def registered_version(client, name: str, fingerprint: str, proto: str, scores: registry.Scores):
    """The complete version of ``name`` holding this model (by content) with this evaluation (its protocol and
    figures), or None: registering it again would add a copy that says nothing new."""
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return None
    wanted = registry.score_tags(scores)
    for v in versions:
        tags = v.tags
        if (
            tags.get("lead.state") == REGISTERED
            and tags.get("model.fingerprint") == fingerprint
            and tags.get("eval.protocol") == proto
            and all(tags.get(k) == value for k, value in wanted.items())
        ):
            return v
    return None


def skipped_experiment(reg: RegisterParams) -> dict[str, Any] | None:
    """Under ``dvc exp run`` (DVC sets ``DVC_EXP_NAME`` for the stages), the summary of a register that
    registers nothing, unless ``register.on_experiment``: a sweep is compared with ``dvc exp show``; the
    registry holds the candidates someone chose to review."""
    name = os.environ.get("DVC_EXP_NAME")
    if not name or reg.on_experiment:
        return None
    return {
        "model_name": reg.model_name,
        "version": None,
        "experiment": name,
        "registered": False,
        "reason": f"DVC experiment {name}: not registered (register.on_experiment is false)",
    }


def register(
    reg: RegisterParams,
    evaluated: EvaluateParams,
    paths: PathParams,
    tracking: TrackingParams,
    *,
    preset: str,
) -> dict[str, Any]:
    """Register the model ``evaluated.model`` (params' ``evaluate`` section, whose outputs under ``paths`` are the
    evidence) as ``reg.model_name`` in ``tracking``'s store, with lineage (the training's ``preset`` among it) and
    review description; run the champion gate of ``reg``. Writes ``register.json``; registers nothing under a DVC
    experiment (:func:`skipped_experiment`) nor for a model and evaluation the registry holds already
    (:func:`registered_version`)."""
    import mlflow
    from mlflow import MlflowClient

    skipped = skipped_experiment(reg)
    if skipped is not None:
        write_json(report_path(paths), skipped)
        return skipped

    mlflow.set_tracking_uri(tracking_uri(tracking))
    client = MlflowClient()
    ev = evidence(evaluated, paths, client)  # every check before anything is logged or registered
    scores = registry.headline_scores(ev.metrics, ev.protocol["benchmarks"])
    proto = registry.protocol_id(ev.protocol)
    name = reg.model_name
    _remove_unfinished(client, name, ev.fingerprint)  # what a killed register left half-made, in any case
    existing = registered_version(client, name, ev.fingerprint, proto, scores)
    if existing is not None:  # the same model, evaluated the same way, with the same figures: one version
        summary = {
            "model_name": name,
            "registered": True,
            "new_version": False,
            "version": int(existing.version),
            "aliases": sorted(client.get_model_version(name, existing.version).aliases),
            "reason": f"the same model and evaluation are version {existing.version} already",
            "lineage": {k: v for k, v in existing.tags.items() if k in LINEAGE_TAGS},
        }
    else:
        summary = _register_new(reg, tracking, client, ev, scores, paths=paths, preset=preset)
    # register.json keeps the lineage by content: the run ids and the commit name this store's runs and this
    # checkout (the version's tags hold them), so a collaborator's clean run writes the same record.
    write_json(report_path(paths), without_run_facts(summary))
    return summary


def _register_new(
    reg: RegisterParams,
    tracking: TrackingParams,
    client,
    ev: Evidence,
    scores: registry.Scores,
    *,
    paths: PathParams,
    preset: str,
) -> dict[str, Any]:
    """A new version of the model, inside the register stage's MLflow run (its *Source Run*, holding the
    evidence): logged in the transformers flavor, tagged with its lineage and scores, described against the
    champion, ``@challenger``, and ``@champion`` when the gate passes."""
    import mlflow

    from lead.io.tracking import stage_run

    e = ev.protocol  # what the evaluation measured (evidence checked these params ask for the same)
    proto = registry.protocol_id(e)
    protocol_text = (
        f"{', '.join(e['benchmarks'])}; {e['samples']} samples/problem, T={e['temperature']}, "
        f"{e['max_new_tokens']} tokens, protocol {proto}"
    )
    name = reg.model_name
    with stage_run(tracking, "register", logged={"register": reg.as_written()}) as run:
        lineage = _lineage(client, ev, run, models=paths.models, preset=preset)
        # The version's Source Run is this run: it holds the evidence, so that the UI's run page and its
        # version Compare show the registered figures and the params they were trained and evaluated with.
        own = client.get_run(run.info.run_id).data.params  # register.* (stage_run logged them)
        mlflow.log_params({k: v for k, v in evidence_params(client, ev).items() if k not in own})
        mlflow.log_metrics(ev.figures)
        mlflow.set_tags({k: v for k, v in lineage.items() if k in ("train.run_id", "evaluate.run_id") and v})
        info = mlflow.transformers.log_model(
            transformers_model=str(ev.model),
            name="model",
            task="text-generation",
            pip_requirements=pip_requirements(),
        )
        champion = _champion(client, name)
        champion_scores = registry.scores_from_tags(champion.tags) if champion else None
        decision = registry.gate(
            scores,
            champion_scores,
            pass_tolerance=reg.pass_tolerance,
            length_tolerance=reg.length_tolerance,
            same_protocol=champion is None or champion.tags.get("eval.protocol") == proto,
        )
        tags = {
            **lineage,
            "eval.protocol": proto,
            **registry.score_tags(scores),
            "gate": decision.summary(),
            "lead.state": REGISTERING,
        }
        runs, plots = review_links(client, ev, name, champion)
        review = _review(client, ev, champion, plots, run.info.run_id, paths=paths)
        version = mlflow.register_model(info.model_uri, name, tags=tags).version
        text = registry.description(
            candidate=scores,
            champion=champion_scores,
            champion_version=champion.version if champion else None,
            decision=decision,
            protocol_text=protocol_text,
            lineage={k: v for k, v in lineage.items() if not k.endswith("run_id")},
            runs=runs,
            plots=plots,
            changed=params_vs_champion(client, ev, champion),
            review=review,
        )
        client.update_model_version(name, version, description=text)
        # Complete before any alias points at it: a half-made version (deleted by the next run) has none.
        client.set_model_version_tag(name, version, "lead.state", REGISTERED)
        client.set_registered_model_alias(name, CHALLENGER, version)
        if decision.promote:
            move_champion(client, name, version, "gate", decision.summary())
        mlflow.set_tags({"registered_model": name, "registered_version": version})
        aliases = client.get_model_version(name, version).aliases
    return {
        "model_name": name,
        "registered": True,
        "new_version": True,
        "version": int(version),
        "aliases": sorted(aliases),
        "promoted": decision.promote,
        "gate": list(decision.reasons),
        "champion_before": int(champion.version) if champion else None,
        "lineage": lineage,
    }


def _lineage(client, ev: Evidence, run, *, models: Path, preset: str) -> dict[str, str]:
    """The version's lineage tags (:data:`LINEAGE_TAGS`): code, data, model, params, the runs it comes from.
    ``params.fingerprint`` is of the ``params.yaml`` keys the train and evaluate runs logged -- the params that
    made and measured this model --, not of the whole file: a key no stage of the model reads (the ablation's
    seeds) changes no version."""
    root = repo_root()
    parent = os.environ.get(PARENT_RUN_ENV) or run.data.tags.get("mlflow.parentRunId", "")
    return {
        "git.commit": git_commit(root),
        "dvc.experiment": applied_experiment(root),
        **dvc_lock_hashes(root, models, ev.stage),
        "model.fingerprint": ev.fingerprint,
        "params.fingerprint": value_fingerprint(params_keys(evidence_params(client, ev))),
        "train.preset": preset,
        "train.run_id": ev.train_run_id,
        "evaluate.run_id": ev.evaluate_run_id,
        "mlflow.parent_run_id": parent or "none",
    }


def _review(client, ev: Evidence, champion, plots: dict[str, str], run_id: str, *, paths: PathParams) -> str:
    """The description's review section: sample completions of the candidate beside the champion's, and the
    accuracy-against-length plot: of both versions when the champion's samples are there (logged to this
    register run, ``run_id``), else the evaluate run's."""
    accuracy_plot = output_name("evaluate", "accuracy_plot")
    mine, theirs = candidate_samples(paths), champion_samples(client, champion)
    label = f"v{champion.version}" if champion else "champion"
    plot = None
    if mine and theirs:
        plot = registry.artifact_file_link(run_id, _both_versions_plot(mine, theirs, label))
    elif f"{accuracy_plot} (file)" in plots:
        plot = registry.artifact_file_link(ev.evaluate_run_id, f"evaluate/{accuracy_plot}")
    return registry.review_section(mine, theirs, label, plot=plot)


def _both_versions_plot(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], champion_label: str) -> str:
    """Accuracy against completion length of this version and the champion, one line each (equal-count length
    bins over the samples of every benchmark, :func:`lead.core.evaluation.accuracy_by_length`), logged to the
    active MLflow run; its artifact path."""
    import tempfile

    import mlflow
    from matplotlib.figure import Figure

    from lead.core.evaluation import Sample, accuracy_by_length

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
