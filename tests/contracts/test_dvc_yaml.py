"""dvc.yaml, read fast (no DVC run): every stage is a module that exists, every declared param and code path
exists, and outputs are restorable. What each stage really reads is checked by tests/flows/test_dag_contract.py."""

import importlib

import yaml

from lead.config import load_params
from lead.core.claims import WARMSTART, cell_name
from lead.dag import ABLATION, REGISTRY, STAGES, ablation_output, cell_output, cell_resume_dir
from tests.conftest import ROOT

DAG = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
ABLATION_DAG = yaml.safe_load((ROOT / "ablation" / "dvc.yaml").read_text())["stages"]


def _declared_outputs(stage: dict) -> list[str]:
    declared = [e for kind in ("outs", "metrics", "plots") for e in stage.get(kind, [])]
    return [next(iter(e)) if isinstance(e, dict) else e for e in declared]


def test_every_stage_is_a_module_run_as_dvc_says():
    assert list(DAG) == list(STAGES)
    for name, stage in DAG.items():
        assert stage["cmd"] == f"sh infra/stage.sh {name}"
        assert callable(importlib.import_module(f"lead.stages.{name}").main)


def test_the_stage_registry_names_exactly_the_outputs_dvc_yaml_declares():
    # lead.dag is where code finds an output (manifests, summaries, evaluate's records): dvc.yaml must agree.
    for name, stage in DAG.items():
        assert sorted(REGISTRY[name].outputs.values()) == sorted(_declared_outputs(stage)), name
        assert REGISTRY[name].summary in REGISTRY[name].outputs, name


def test_the_ablation_registry_names_exactly_the_outputs_its_dvc_yaml_declares():
    # The cells' folders and models, and the report's files, are found through lead.dag as well.
    assert list(ABLATION_DAG) == list(ABLATION)
    for name, stage in ABLATION_DAG.items():
        assert sorted(ABLATION[name].outputs.values()) == sorted(_declared_outputs(stage)), name
        assert ABLATION[name].summary in ABLATION[name].outputs, name
    params = load_params(ROOT / "params.yaml")
    reports, models = params.paths.reports, params.paths.models
    assert cell_output(params.paths, None, 3) == reports / "ablation" / "cells" / cell_name(WARMSTART, 3)
    assert cell_output(params.paths, "grpo", 0) == reports / "ablation" / "cells" / cell_name("grpo", 0)
    assert cell_output(params.paths, "grpo", 0, "model") == models / "ablation" / cell_name("grpo", 0)
    assert cell_resume_dir(params.paths, "grpo", 0) == params.paths.resume / "ablation" / cell_name("grpo", 0)
    assert ablation_output(params.paths, "markdown") == reports / "ablation" / "ablation.md"


def test_declared_params_and_code_exist():
    data = load_params(ROOT / "params.yaml").model_dump(by_alias=True)
    for name, stage in DAG.items():
        for key in stage.get("params", []):
            node = data
            for part in key.split("."):
                assert part in node, f"{name}: params key {key!r} is not in params.yaml"
                node = node[part]
        for dep in stage["deps"]:
            if dep.startswith("lead/"):
                assert (ROOT / dep).exists(), f"{name}: {dep} does not exist"


# Stages whose effect lives outside DVC (the registry): their record is neither cached nor restorable from DVC's run
# cache (persist: DVC's run cache skips such a stage), so it is never replayed as if it had run here; every other
# output is cached.
UNCACHED = {"register": ["${paths.reports}/register.json"]}
# The params check's record: cached (a clone's `dvc pull` brings it) and never removed before a run (a refused
# check leaves it), which is why DVC's run cache skips that stage: rerunning it costs a second.
PERSISTENT_CACHED = {"params": ["${paths.reports}/params.json"]}


def test_every_output_is_cached_and_none_is_resume_state():
    # Restorable with `dvc checkout` after a failed run removed it, and on the remote after `dvc push`: a fresh
    # clone's `dvc pull` then leaves no stage changed. Resume state (read back by a stage itself) is no output:
    # it lives under paths.resume (lead.dag.resume_dir).
    resume = str(load_params(ROOT / "params.yaml").paths.resume)
    for name, stage in DAG.items():
        uncached = []
        for entry in stage["outs"] + stage.get("metrics", []) + stage.get("plots", []):
            path, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
            if not options.get("cache", True):
                uncached.append(path)
                assert options.get("persist"), (name, path)
            else:
                assert bool(options.get("persist")) == (path in PERSISTENT_CACHED.get(name, [])), (name, path)
            assert not path.startswith(("${paths.resume}", resume)), (name, path)
        assert uncached == UNCACHED.get(name, []), name


def _launch(tmp_path, env: dict[str, str]) -> str:
    import subprocess

    done = subprocess.run(
        ["sh", str(ROOT / "infra/stage.sh"), "curate", "--params", "x.yaml"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_stages_run_with_the_projects_python_without_an_activated_venv(tmp_path):
    # A stand-in interpreter that says how it was called: which one the launcher picked, with what.
    for venv in ("project/.venv", "active"):
        fake = tmp_path / venv / "bin/python"
        fake.parent.mkdir(parents=True)
        fake.write_text(f'#!/bin/sh\necho "{venv} $*"\n')
        fake.chmod(0o755)
    # `.venv/bin/dvc repro` from the repository root (DVC_ROOT), nothing activated: the project's .venv.
    project = tmp_path / "project"
    assert (
        _launch(project, {"DVC_ROOT": str(project)}) == "project/.venv -m lead.stages.curate --params x.yaml"
    )
    assert _launch(project, {}) == "project/.venv -m lead.stages.curate --params x.yaml"  # wdir is the root
    # An activated venv wins (a user's own environment).
    active = str(tmp_path / "active")
    assert _launch(project, {"VIRTUAL_ENV": active}) == "active -m lead.stages.curate --params x.yaml"


def test_params_yaml_is_in_the_form_dvc_exp_run_writes(tmp_path):
    # `dvc exp run -S key=value` rewrites params.yaml through ruamel (comments kept, flow lists and `null`
    # re-styled): kept in that form, an experiment's params.yaml differs from its commit's in that line only.
    from dvc.utils.hydra import apply_overrides

    copy = tmp_path / "params.yaml"
    original = (ROOT / "params.yaml").read_text()
    copy.write_text(original)
    steps = load_params(ROOT / "params.yaml").train.max_steps
    apply_overrides(str(copy), [f"train.max_steps={steps + 1}"])
    before, after = original.splitlines(), copy.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert len(before) == len(after) and changed == [
        (f"  max_steps: {steps}", f"  max_steps: {steps + 1}")
    ], (
        "params.yaml is not in the form `dvc exp run -S` writes back; rewrite it with "
        "dvc.utils.hydra.apply_overrides('params.yaml', ['train.max_steps=<its value>'])"
    )


ABLATION_FILE = yaml.safe_load((ROOT / "ablation" / "dvc.yaml").read_text())


def test_the_ablation_pipeline_runs_its_stages_at_the_root_with_the_roots_params():
    assert ABLATION_FILE["vars"] == ["../params.yaml"] and list(ABLATION_FILE["stages"]) == [
        "baseline",
        "cell",
        "report",
    ]
    data = load_params(ROOT / "params.yaml").model_dump(by_alias=True)
    variant = next(iter(data["ablation"]["variants"]))
    for name, stage in ABLATION_FILE["stages"].items():
        assert stage["wdir"] == ".."
        module = stage["cmd"].split()[2]
        assert stage["cmd"].startswith("sh infra/stage.sh ") and module in ("ablation_cell", "ablation"), name
        assert callable(importlib.import_module(f"lead.stages.{module}").main)
        for key in stage["params"]:  # the default params file of wdir (..): the root's params.yaml
            node = data
            for part in key.replace("${item.variant}", variant).split("."):
                assert part in node, f"{name}: params key {key!r} is not in params.yaml"
                node = node[part]
        for dep in stage["deps"]:
            if dep.startswith("lead/"):
                assert (ROOT / dep).exists(), f"{name}: {dep} does not exist"
        # Uncached (DVC's checkout fails on cached outputs of stages that never ran: every clone that never ran
        # the ablation would see `dvc checkout` and `dvc exp apply` fail), and no DVC metrics or plots either.
        assert not stage.get("metrics") and not stage.get("plots"), name
        for entry in stage["outs"]:
            path, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
            assert options.get("cache", True) is False and not options.get("persist"), (name, path)
    # a cell declares its own variant's keys, not the whole ablation section: editing one variant reruns its cells
    assert "ablation" not in ABLATION_FILE["stages"]["cell"]["params"]
    assert "ablation.variants.${item.variant}" in ABLATION_FILE["stages"]["cell"]["params"]
