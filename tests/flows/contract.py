"""The DAG contract's rules (``tests/flows/test_dag_contract.py``, and the ablation's cells in
``tests/flows/test_ablation.py``): what a recorded stage process read and wrote against what its pipeline declares."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CELL = re.compile(r"cell@(.+)-(\d+)")  # an ablation cell as DVC names it: cell@<variant>-<seed>

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
TEMP = re.compile(r"(^|/)\.([^/]+)\.[^/]*-\d+\.[^/]+/\2(?=/|$)")


def declarations(workspace: Path, pipeline: str = "dvc.yaml") -> dict[str, dict[str, list[str]]]:
    """Each stage of ``pipeline`` (``dvc.yaml`` or ``ablation/dvc.yaml``, whose stages are named as DVC names them:
    ``cell@grpo-0``) with its declared params keys, dependencies and outputs, resolved by DVC itself, and its
    resume state (:func:`lead.dag.resume_dir`, :func:`lead.dag.cell_resume_dir`)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    from flows.ablation import stage_file
    from lead.config import load_params
    from lead.dag import cell_resume_dir, resume_dir

    loaded = load_params(workspace / "params.yaml")

    out = {}
    with Repo(str(workspace)) as repo:
        for stage in repo.index.stages:
            if stage_file(repo, stage) != pipeline:
                continue
            cell = CELL.fullmatch(stage.name)
            resume = (
                cell_resume_dir(loaded.paths, *cell.groups())
                if cell
                else resume_dir(loaded.paths, stage.name)
            )
            # a whole-file declaration (`- params.yaml:`) declares every section of the file
            params = [
                k
                for d in stage.deps
                if isinstance(d, ParamsDependency)
                for k in d.params or yaml.safe_load(Path(d.fs_path).read_text())
            ]
            deps = [d.def_path for d in stage.deps if not isinstance(d, ParamsDependency)]
            if "params.yaml" in deps:  # the params file as a file: any change to any key reruns the stage
                params += list(yaml.safe_load((workspace / "params.yaml").read_text()))
            out[stage.name] = {
                "params": params,
                "deps": deps,
                "outs": [o.def_path for o in stage.outs],
                "resume": [str(resume)],
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
        path = TEMP.sub(r"\1\2", path)
        if path.startswith(("lead/", "flows/")) or _exempt_file(path):
            continue  # code is checked through the modules imported
        if not _under(path, declared["deps"] + declared["outs"] + declared["resume"]):
            problems.append(f"reads {path}, neither a declared dependency nor its own output or resume state")
    for path in record["written"]:
        path = TEMP.sub(r"\1\2", path)
        if _exempt_file(path):
            continue
        if not _under(path, declared["outs"] + declared["resume"]):
            problems.append(f"writes {path}, not a declared output nor its own resume state")
    return problems
