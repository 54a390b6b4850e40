"""What a registration stands on: the evaluation, the model and the runs that made them, checked to agree
(:class:`Evidence`); the commit, the applied DVC experiment and dvc.lock's hashes."""

from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lead.config import EvaluateParams, PathParams
from lead.core import review
from lead.dag import manifest_path, output, published_model
from lead.io.fingerprint import StaleOutputError, read_verified, verify
from lead.io.tracking import published_run

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


TRAIN_STAGES = ("train", "train_stage2")  # the stages whose model (<paths.models>/<stage>) can be registered


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
    asked = review.protocol(evaluation.model_dump(mode="json"))
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
