"""The DAG tells the truth: what each stage of ``dvc.yaml`` declares covers what it actually reads and writes.

The workspace's first ``dvc repro`` (``tests/flows/conftest.py``: seconds-sized settings, the curriculum's
stage 2 on so that its stages do real work) runs with ``tests/flows/recorder`` on ``PYTHONPATH``: every stage
process records the params keys it reads, the ``lead/`` modules it imports and the workspace files it reads
and writes (``recorder/sitecustomize.py``). Then, per stage:

* every params key read is declared under ``params:`` (itself or a section above it);
* every ``lead/`` module imported is a declared dependency (the file or a folder above it);
* every file read is a declared dependency, one of the stage's own outputs or in its own resume state
  (``<paths.resume>/<stage>``: its calibration cache or checkpoints, no DVC output by design);
* every file written is one of its declared outputs (or an atomic write's temporary sibling of one) or in its
  own resume state.

What is deliberately not declared is listed in :data:`EXEMPT`, each with its reason. DVC only reruns what a
declaration names, so an undeclared read is a result that can silently go stale.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from lead.dag import STAGES
from tests.flows.conftest import FirstRun

pytestmark = pytest.mark.slow

EXEMPT = {
    # params: where runs are logged, not what a stage computes (register, whose output is a registry entry,
    # declares it anyway); where the resume state lives (keyed by content: moving it changes no output, so it
    # must not rerun a stage)
    "params": ("tracking", "paths.resume"),
    # modules that only present or log: editing them changes no output
    "modules": (
        "lead/io/progress.py",
        "lead/io/tracking.py",
        "lead/io/summaries.py",  # the line each stage ends with, and why calibration kept nothing
        "lead/training/callbacks.py",
    ),
    # files: the params file (checked key by key above), DVC's and git's own state (register reads git and
    # dvc.lock for its lineage tags: a dependency on dvc.lock would make register stale after every run),
    # MLflow's local store, caches of Python and of the packaging
    "files": (
        "params.yaml",
        "dvc.lock",
        "dvc.yaml",
        ".dvcignore",
        ".git/",
        ".dvc/",
        "mlflow.db",
        "mlruns/",
        "__pycache__/",
        ".egg-info/",
    ),
}

# lead.io.atomic_path writes <dir>/.<name>.<host>-<pid>.<random>/<name>, then moves it to <dir>/<name>
_TEMP = re.compile(r"(^|/)\.([^/]+)\.[^/]*-\d+\.[^/]+/\2(?=/|$)")


def declarations(workspace: Path) -> dict[str, dict[str, list[str]]]:
    """Each stage's declared params keys, dependencies and outputs, resolved by DVC itself, and its resume state
    (:func:`lead.dag.resume_dir`)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    from flows.ablation import stage_file
    from lead.config import load_params

    resume = load_params(workspace / "params.yaml").paths.resume

    out = {}
    with Repo(str(workspace)) as repo:
        for stage in repo.index.stages:
            if stage_file(repo, stage) != "dvc.yaml":  # the ablation's pipeline is not checked here
                continue
            # a whole-file declaration (`- params.yaml:`) declares every section of the file
            params = [
                k
                for d in stage.deps
                if isinstance(d, ParamsDependency)
                for k in d.params or yaml.safe_load(Path(d.fs_path).read_text())
            ]
            deps = [d.def_path for d in stage.deps if not isinstance(d, ParamsDependency)]
            out[stage.name] = {
                "params": params,
                "deps": deps,
                "outs": [o.def_path for o in stage.outs],
                "resume": [f"{resume}/{stage.name}"],
            }
    return out


def _under(path: str, declared: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in declared)


def _exempt_file(path: str) -> bool:
    return any(path == e or path.startswith(e) or f"/{e}" in f"/{path}" for e in EXEMPT["files"])


def violations(record: dict, declared: dict[str, list[str]]) -> list[str]:
    """What ``record`` (one stage's recorded reads and writes) uses that ``declared`` does not declare."""
    problems = []
    for key in record["params"]:
        if any(key == e or key.startswith(e + ".") for e in EXEMPT["params"]):
            continue
        if not any(key == d or key.startswith(d + ".") for d in declared["params"]):
            problems.append(f"reads params key {key!r}, not declared under params:")
    for module in sorted(set(record["modules"])):
        code = module.startswith(("lead/", "flows/")) and module not in EXEMPT["modules"]
        if code and not _under(module, declared["deps"]):
            problems.append(f"imports {module}, not declared under deps:")
    for path in record["read"]:
        path = _TEMP.sub(r"\1\2", path)
        if path.startswith(("lead/", "flows/")) or _exempt_file(path):
            continue  # code is checked through the modules imported
        if not _under(path, declared["deps"] + declared["outs"] + declared["resume"]):
            problems.append(f"reads {path}, neither a declared dependency nor its own output or resume state")
    for path in record["written"]:
        path = _TEMP.sub(r"\1\2", path)
        if _exempt_file(path):
            continue
        if not _under(path, declared["outs"] + declared["resume"]):
            problems.append(f"writes {path}, not a declared output nor its own resume state")
    return problems


@pytest.fixture(scope="module")
def declared(recorded: FirstRun) -> dict[str, dict[str, list[str]]]:
    return declarations(recorded.restore())  # resolved with the params of the recorded run


def test_every_stage_declares_what_it_reads_and_writes(recorded: FirstRun, declared):
    records = recorded.records
    assert sorted(records) == sorted(STAGES) == sorted(declared)
    assert not any(records[s]["overflow"] for s in STAGES), "inotify's queue overflowed: events were lost"
    problems = {stage: violations(records[stage], declared[stage]) for stage in STAGES}
    assert not any(problems.values()), json.dumps({s: p for s, p in problems.items() if p}, indent=1)
    # The recorder saw real work (not an empty record that passes by saying nothing).
    assert "train.max_steps" in records["train"]["params"]
    assert "lead/core/advantages.py" in records["train"]["modules"]
    assert "data/curated/calibrated_stage2.parquet" in records["train_stage2"]["read"]
    written = {_TEMP.sub(r"\1\2", p) for p in records["train_stage2"]["written"]}
    assert "models/train_stage2/model.safetensors" in written
    assert "resume/calibrate/cache.jsonl" in {_TEMP.sub(r"\1\2", p) for p in records["calibrate"]["written"]}
    assert any(p.startswith("resume/train/checkpoint-") for p in records["train"]["written"])


@pytest.mark.parametrize(
    ("stage", "kind", "removed", "expected"),
    [
        ("calibrate", "deps", "data/curated/train.parquet", "reads data/curated/train.parquet"),
        ("train", "deps", "lead/core/advantages.py", "imports lead/core/advantages.py"),
        ("curate", "params", "model.prompt_suffix", "reads params key 'model.prompt_suffix'"),
        ("evaluate", "outs", "reports/evaluate/samples.parquet", "writes reports/evaluate/samples.parquet"),
    ],
)
def test_the_contract_fails_when_a_declaration_is_removed(
    recorded: FirstRun, declared, stage, kind, removed, expected
):
    declared = copy.deepcopy(declared[stage])
    assert removed in declared[kind]
    declared[kind] = [d for d in declared[kind] if d != removed]
    assert any(p.startswith(expected) for p in violations(recorded.records[stage], declared))
