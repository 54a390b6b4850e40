"""The headline view of DVC experiments (``lead exp``): the params each one changed, the figures that matter.

``dvc exp show`` prints every param and every metric — over a hundred columns for this pipeline. A reader
comparing a sweep wants, per experiment, what was changed against its baseline commit and a few numbers:
Pass@1 and mean length per benchmark, the calibrated pool kept, the training steps and last reward. This
module turns ``dvc exp show --json`` (a list of commits, each with its experiments) into those rows; it
reads nothing itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

EVALUATE = "reports/evaluate/headline.json"
CALIBRATE = "reports/calibrate/headline.json"
TRAIN = "reports/train_headline.json"
_PASS = re.compile(r"^(?P<bench>[a-z0-9_]+)\.pass_at_1$")  # a benchmark's headline, not a level or budget


@dataclass(frozen=True)
class ExperimentRow:
    """One line of the view: the revision's name, its baseline, what it changed, its headline figures, and its
    commit (``rev``: what a sweep's report is read from)."""

    name: str
    baseline: str
    changed: dict[str, Any]
    figures: dict[str, float | int | None]
    rev: str = ""

    @property
    def sweep(self) -> bool:
        """Whether it is an ablation run as an experiment (``lead sweep``, ``lead ablation -S``): it changed
        ``ablation.*`` keys only, so the pipeline's own figures are its baseline's and its results are the
        report's (:func:`sweep_rows`)."""
        saved = self.rev not in ("", "workspace")  # a commit: where its report is
        return saved and bool(self.changed) and all(k.startswith("ablation.") for k in self.changed)


ABLATION_METRICS = "reports/ablation/metrics.json"  # the report's headline per variant (in a sweep's commit)


def sweep_rows(row: ExperimentRow, metrics: Mapping[str, Any]) -> list[ExperimentRow]:
    """A sweep's rows, one per variant (the warm start first, then each point of the grid), named after the
    variant (their table is titled with the experiment): the variant's settings as what it changed
    (``ablation.variants.<variant>.*`` of ``row.changed``), and from its report's ``metrics.json``: Pass@1, mean
    length, RL's gain over the warm start (means over the seeds)."""
    settings: dict[str, dict[str, Any]] = {}
    for key, value in row.changed.items():
        parts = key.split(".")
        if len(parts) == 4 and parts[:2] == ["ablation", "variants"]:
            settings.setdefault(parts[2], {})[parts[3]] = value
    out = []
    for variant, scores in metrics.items():
        if isinstance(scores, Mapping) and "pass_at_1" in scores:
            figures = {
                "Pass@1": scores["pass_at_1"],
                "Len": scores.get("mean_length"),
                "gain": scores.get("gain"),
            }
            out.append(ExperimentRow(variant, row.name, settings.get(variant, {}), figures, row.rev))
    return out


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"train": {"max_steps": 5}}`` → ``{"train.max_steps": 5}`` (lists stay values).

    The same as :func:`lead.io.tracking.flatten`, which every stage imports to log params: kept apart so that
    the pure core imports no I/O and the stages' code dependencies (dvc.yaml) do not include this view."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _params(rev: Mapping[str, Any]) -> dict[str, Any]:
    files = (rev.get("data") or {}).get("params") or {}
    return flatten((files.get("params.yaml") or {}).get("data") or {})


def _metrics(rev: Mapping[str, Any], path: str) -> dict[str, Any]:
    files = (rev.get("data") or {}).get("metrics") or {}
    return dict((files.get(path) or {}).get("data") or {})


def headline(rev: Mapping[str, Any]) -> dict[str, float | int | None]:
    """Pass@1 and Len_avg of every benchmark evaluated, kept problems, train steps and last reward."""
    evaluation = _metrics(rev, EVALUATE)
    out: dict[str, float | int | None] = {}
    for key in sorted(evaluation):
        m = _PASS.match(key)
        if m:
            bench = m.group("bench")
            out[f"{bench} Pass@1"] = evaluation[key]
            out[f"{bench} Len"] = evaluation.get(f"{bench}.len_avg")
    out["kept"] = _metrics(rev, CALIBRATE).get("kept")
    train = _metrics(rev, TRAIN)
    out["steps"] = train.get("steps")
    out["last reward"] = train.get("last_reward")
    return out


def changed_params(rev: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, Any]:
    """The params whose values differ from the baseline's (a key only one side has counts, as None)."""
    mine, theirs = _params(rev), _params(baseline)
    return {k: mine.get(k) for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)}


def _revisions(shown: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(revision, its baseline commit) for the workspace, every commit shown and each commit's experiments."""
    commits = [r for r in shown if r.get("rev") != "workspace"]
    workspace = next((r for r in shown if r.get("rev") == "workspace"), None)
    if workspace is not None:
        yield workspace, commits[0] if commits else workspace
    for commit in commits:
        yield commit, commit
        for exp in commit.get("experiments") or []:
            for rev in exp.get("revs") or []:
                yield rev, commit


def _label(rev: Mapping[str, Any]) -> str:
    """An experiment's or branch's name, else the short commit (``workspace`` stays ``workspace``)."""
    ref = str(rev.get("rev", ""))
    return str(rev.get("name") or (ref if ref == "workspace" else ref[:7]))


def rows(shown: Sequence[Mapping[str, Any]]) -> list[ExperimentRow]:
    """The view's rows from ``dvc exp show --json``: the workspace, each commit, then its experiments."""
    out = []
    for rev, base in _revisions(shown):
        name, base_name = _label(rev), _label(base)
        changed = {} if rev is base else changed_params(rev, base)
        out.append(ExperimentRow(name, base_name, changed, headline(rev), str(rev.get("rev", ""))))
    return out
