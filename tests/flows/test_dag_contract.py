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

What is deliberately not declared is listed in :data:`tests.flows.contract.EXEMPT`, each with its reason. DVC
only reruns what a declaration names, so an undeclared read is a result that can silently go stale. The
ablation's cells and report are held to the same rules by ``tests/flows/test_ablation.py``.
"""

from __future__ import annotations

import copy
import json

import pytest

from lead.dag import STAGES
from tests.flows.conftest import FirstRun
from tests.flows.contract import TEMP, declarations, violations

pytestmark = pytest.mark.slow


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
    written = {TEMP.sub(r"\1\2", p) for p in records["train_stage2"]["written"]}
    assert "models/train_stage2/model.safetensors" in written
    assert "resume/calibrate/cache.jsonl" in {TEMP.sub(r"\1\2", p) for p in records["calibrate"]["written"]}
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
