"""dvc.yaml, read fast (no DVC run): every stage is a module that exists, every declared param and code path
exists, and outputs are restorable. What each stage really reads is checked by tests/flows/test_dag_contract.py."""

import importlib

import yaml

from lead.config import load_params
from lead.stages import STAGES
from tests.conftest import ROOT

DAG = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_every_stage_is_a_module_run_as_dvc_says():
    assert list(DAG) == list(STAGES)
    for name, stage in DAG.items():
        assert stage["cmd"] == f"python -m lead.stages.{name}"
        assert callable(importlib.import_module(f"lead.stages.{name}").main)


def test_declared_params_and_code_exist():
    data = load_params(ROOT / "params.yaml").model_dump(by_alias=True)
    for name, stage in DAG.items():
        for key in stage["params"]:
            node = data
            for part in key.split("."):
                assert part in node, f"{name}: params key {key!r} is not in params.yaml"
                node = node[part]
        for dep in stage["deps"]:
            if dep.startswith("lead/"):
                assert (ROOT / dep).exists(), f"{name}: {dep} does not exist"


def test_outputs_are_cached_unless_they_are_resume_state():
    for name, stage in DAG.items():
        for entry in stage["outs"] + stage.get("metrics", []) + stage.get("plots", []):
            path, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
            if options.get("persist"):  # read back by the stage itself: kept, not versioned
                assert options.get("cache") is False, (name, path)
            else:  # restorable with `dvc checkout` after a failed run removed it
                assert options.get("cache", True), (name, path)
