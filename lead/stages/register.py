"""Stage ``register``: the trained model becomes a new version in the MLflow model registry, for review.

Inputs: ``<paths.models>/train`` and what ``evaluate`` wrote about it (``<paths.reports>/evaluate/metrics.json``
and ``run.json``), ``reports/train.json``, ``dvc.lock``.

What is registered: the model in MLflow's **transformers flavor** (``mlflow.transformers.log_model``, task
``text-generation``, explicit pip requirements pinned to the versions that trained it), so that a reviewer can
``mlflow.transformers.load_model("models:/<name>@champion")`` or serve it without knowing our folder layout.
The weights are copied into the artifact store (for a 14B model that is the point of a registry: the version
stays loadable whatever happens to the training workspace).

The version carries

* **lineage tags**: ``git.commit``, ``dvc.train_data_md5`` and ``dvc.model_md5`` (from ``dvc.lock``),
  ``params.sha256``, ``train.preset``, ``mlflow.parent_run_id``, ``train.run_id``, ``evaluate.run_id``,
  ``eval.protocol`` (a hash of the evaluate params) and its scores ``eval.<benchmark>.<metric>``;
* a **description**: the evaluation table against the current ``@champion`` (same protocol), the gate's
  verdict and links to the evaluation plots (:mod:`lead.registry`).

Aliases: the new version becomes ``@challenger``; ``@champion`` moves to it only when the gate passes
(``register.pass_tolerance``, ``register.length_tolerance``), or later by ``lead promote VERSION --reason``.
Every move is recorded on the versions as tags (``champion.promoted`` / ``champion.replaced``: time, how, why).

Output: ``<paths.reports>/register.json`` (model name, version, aliases, the gate's decision, lineage).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from lead import registry
from lead.config import Params
from lead.io import repo_root, sha256_text, write_json
from lead.stages._common import stage_main
from lead.tracking import PARENT_RUN_ENV, tracking_uri

CHAMPION, CHALLENGER = "champion", "challenger"
# What the transformers flavor needs to load the model again, pinned to the versions in this environment.
REQUIREMENTS = ("torch", "transformers", "accelerate", "safetensors", "tokenizers")


def report_path(params: Params) -> Path:
    return params.paths.reports / "register.json"


def pip_requirements() -> list[str]:
    """``name==version`` of :data:`REQUIREMENTS` as installed here (a CUDA build keeps only its public part)."""
    out = []
    for name in REQUIREMENTS:
        version = importlib.metadata.version(name).split("+")[0]
        out.append(f"{name}=={version}")
    return out


def git_commit(root: Path) -> str:
    """``HEAD``'s commit, with ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def dvc_lock_hashes(root: Path, params: Params) -> dict[str, str]:
    """The md5s ``dvc.lock`` records for the train stage's data and model (``none`` when not run by DVC)."""
    hashes = {"dvc.train_data_md5": "none", "dvc.model_md5": "none"}
    lock = root / "dvc.lock"
    if not lock.exists():
        return hashes
    train = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get("train", {})
    model = os.path.normpath(params.paths.models / "train")
    for dep in train.get("deps", []):
        if dep["path"].endswith(".parquet") and "md5" in dep:
            hashes["dvc.train_data_md5"] = dep["md5"]
    for out in train.get("outs", []):
        if os.path.normpath(out["path"]) == model and "md5" in out:
            hashes["dvc.model_md5"] = out["md5"]
    return hashes


def weights_sha256(folder: Path) -> str:
    """One sha256 over the model's safetensors files (in name order): identifies the exact weights."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing ({what})")
    return json.loads(path.read_text())


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


def promote(params: Params, version: str, reason: str) -> dict[str, Any]:
    """``lead promote``: make ``version`` the champion by hand, whatever the gate said; the reason is recorded."""
    import mlflow
    from mlflow import MlflowClient

    if not reason.strip():
        raise ValueError("a promotion needs a reason (it is recorded on the model version)")
    mlflow.set_tracking_uri(tracking_uri(params))
    client = MlflowClient()
    name = params.register_.model_name
    client.get_model_version(name, str(version))  # a clear MLflow error when it does not exist
    move_champion(client, name, str(version), "hand (lead promote)", reason)
    return {"model_name": name, "champion": str(version), "reason": reason}


def _plot_links(eval_run_id: str | None, uri: str) -> dict[str, str]:
    if not eval_run_id:
        return {}
    from lead.stages.evaluate import ACCURACY_PLOT, BUDGET_PLOT

    links = {p: f"runs:/{eval_run_id}/evaluate/{p}" for p in (ACCURACY_PLOT, BUDGET_PLOT)}
    if uri.startswith("http"):  # a tracking server: a link the reviewer can click
        links["evaluate run"] = f"{uri.rstrip('/')}/#/runs/{eval_run_id}"
    return links


def run(params: Params) -> dict[str, Any]:
    """Register ``<paths.models>/train`` with lineage and review description; run the champion gate."""
    import mlflow
    from mlflow import MlflowClient

    from lead.stages.evaluate import METRICS, RUN, output_dir
    from lead.tracking import stage_run

    root = repo_root()
    model = params.paths.models / "train"
    if not model.is_dir():
        raise FileNotFoundError(f"{model}: no trained model (run `lead train` first)")
    evaluated = _read_json(output_dir(params) / RUN, "run `lead evaluate` on the trained model first")
    if Path(evaluated["model_path"]).resolve() != model.resolve():
        raise ValueError(
            f"the evaluation in {output_dir(params)} is of {evaluated['model_path']}, not {model}: set "
            "evaluate.model = train and evaluate again, so the registered scores describe the registered model"
        )
    metrics = _read_json(output_dir(params) / METRICS, "run `lead evaluate` first")
    trained = _read_json(params.paths.reports / "train.json", "run `lead train` first")
    evaluate_section = params.evaluate.model_dump(mode="json")
    scores = registry.headline_scores(metrics, params.evaluate.benchmarks)
    proto = registry.protocol_id(evaluate_section)
    ev = params.evaluate
    protocol_text = (
        f"{', '.join(ev.benchmarks)}; {ev.samples} samples/problem, T={ev.temperature}, "
        f"{ev.max_new_tokens} tokens, protocol {proto}"
    )
    name = params.register_.model_name
    uri = tracking_uri(params)

    with stage_run(params, "register", log_sections=("register",)) as run:
        parent = os.environ.get(PARENT_RUN_ENV) or run.data.tags.get("mlflow.parentRunId", "")
        lineage = {
            "git.commit": git_commit(root),
            **dvc_lock_hashes(root, params),
            "model.weights_sha256": weights_sha256(model),
            "params.sha256": sha256_text(json.dumps(params.model_dump(mode="json"), sort_keys=True)),
            "train.preset": params.train.preset,
            "train.run_id": trained.get("mlflow_run_id", ""),
            "evaluate.run_id": evaluated["mlflow_run_id"],
            "mlflow.parent_run_id": parent or "none",
        }
        info = mlflow.transformers.log_model(
            transformers_model=str(model),
            name="model",
            task="text-generation",
            pip_requirements=pip_requirements(),
        )
        client = MlflowClient()
        champion = _champion(client, name)
        champion_scores = registry.scores_from_tags(champion.tags) if champion else None
        same = champion is None or champion.tags.get("eval.protocol") == proto
        decision = registry.gate(
            scores,
            champion_scores,
            pass_tolerance=params.register_.pass_tolerance,
            length_tolerance=params.register_.length_tolerance,
            same_protocol=same,
        )
        tags = {**lineage, "eval.protocol": proto, **registry.score_tags(scores), "gate": decision.summary()}
        version = mlflow.register_model(info.model_uri, name, tags=tags).version
        text = registry.description(
            candidate=scores,
            champion=champion_scores,
            champion_version=champion.version if champion else None,
            decision=decision,
            protocol_text=protocol_text,
            lineage={k: v for k, v in lineage.items() if not k.endswith("run_id")},
            links=_plot_links(evaluated["mlflow_run_id"], uri),
        )
        client.update_model_version(name, version, description=text)
        client.set_registered_model_alias(name, CHALLENGER, version)
        if decision.promote:
            move_champion(client, name, version, "gate", decision.summary())
        mlflow.set_tags({"registered_model": name, "registered_version": version})
        aliases = client.get_model_version(name, version).aliases
    summary = {
        "model_name": name,
        "version": int(version),
        "aliases": sorted(aliases),
        "promoted": decision.promote,
        "gate": list(decision.reasons),
        "champion_before": int(champion.version) if champion else None,
        "lineage": lineage,
    }
    write_json(report_path(params), summary)
    return summary


def main(argv: list[str] | None = None) -> None:
    stage_main("register", run, argv)


if __name__ == "__main__":
    main()
