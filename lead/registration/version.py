"""The registry version: created only from consistent evidence, with its lineage, description and aliases;
the stage's record."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

from lead.config import EvaluateParams, PathParams, RegisterParams, TrackingParams
from lead.core import review
from lead.dag import summary_file
from lead.io.files import repo_root, write_json
from lead.io.fingerprint import value_fingerprint, without_run_facts
from lead.io.tracking import ENDED_BY_TAG, PARENT_RUN_ENV, tracking_uri
from lead.registration.champion import CHALLENGER, champion_version, move_champion
from lead.registration.evidence import Evidence, applied_experiment, dvc_lock_hashes, evidence, git_commit
from lead.registration.page import (
    evidence_params,
    params_keys,
    params_vs_champion,
    review_description,
    review_links,
)

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


REGISTERING, REGISTERED = "registering", "registered"  # tag lead.state: a version is complete once registered


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


def registered_version(client, name: str, fingerprint: str, proto: str, scores: review.Scores):
    """The complete version of ``name`` holding this model (by content) with this evaluation (its protocol and
    figures), or None: registering it again would add a copy that says nothing new."""
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return None
    wanted = review.score_tags(scores)
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
    scores = review.headline_scores(ev.metrics, ev.protocol["benchmarks"])
    proto = review.protocol_id(ev.protocol)
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
    scores: review.Scores,
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
    proto = review.protocol_id(e)
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
        champion = champion_version(client, name)
        champion_scores = review.scores_from_tags(champion.tags) if champion else None
        decision = review.gate(
            scores,
            champion_scores,
            pass_tolerance=reg.pass_tolerance,
            length_tolerance=reg.length_tolerance,
            same_protocol=champion is None or champion.tags.get("eval.protocol") == proto,
        )
        tags = {
            **lineage,
            "eval.protocol": proto,
            **review.score_tags(scores),
            "gate": decision.summary(),
            "lead.state": REGISTERING,
        }
        runs, plots = review_links(client, ev, name, champion)
        samples_review = review_description(client, ev, champion, plots, run.info.run_id, paths=paths)
        version = mlflow.register_model(info.model_uri, name, tags=tags).version
        text = review.description(
            candidate=scores,
            champion=champion_scores,
            champion_version=champion.version if champion else None,
            decision=decision,
            protocol_text=protocol_text,
            lineage={k: v for k, v in lineage.items() if not k.endswith("run_id")},
            runs=runs,
            plots=plots,
            changed=params_vs_champion(client, ev, champion),
            review=samples_review,
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
