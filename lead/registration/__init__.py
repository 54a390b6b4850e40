"""Registration: the trained model becomes a new version in the MLflow model registry, for review.

The library of the ``register`` stage (:mod:`lead.stages.register`: :func:`register`) and of ``lead promote``
(:func:`promote`); the pure parts (the gate, the description, the review section) are :mod:`lead.core.review`'s.

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
  routes and server URLs relative to the UI's page (:mod:`lead.core.review`), so they work on whatever host
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

from lead.registration.champion import CHAMPION, move_champion, promote
from lead.registration.evidence import (
    PIPELINE_RECORDS,
    TRAIN_STAGES,
    Evidence,
    applied_experiment,
    candidate_samples,
    dvc_lock_hashes,
    evidence,
    git_commit,
)
from lead.registration.page import (
    champion_samples,
    evidence_params,
    params_keys,
    params_vs_champion,
    review_links,
)
from lead.registration.version import (
    LINEAGE_TAGS,
    REQUIREMENTS,
    pip_requirements,
    register,
    registered_version,
    report_path,
    skipped_experiment,
)

__all__ = [
    "CHAMPION",
    "LINEAGE_TAGS",
    "PIPELINE_RECORDS",
    "REQUIREMENTS",
    "TRAIN_STAGES",
    "Evidence",
    "applied_experiment",
    "candidate_samples",
    "champion_samples",
    "dvc_lock_hashes",
    "evidence",
    "evidence_params",
    "git_commit",
    "move_champion",
    "params_keys",
    "params_vs_champion",
    "pip_requirements",
    "promote",
    "register",
    "registered_version",
    "report_path",
    "review_links",
    "skipped_experiment",
]
