"""The DAG contract's recorder (``recorder/sitecustomize.py``) misses nothing a fast writer creates."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.flows.conftest import RECORDER


def _recorder():
    spec = importlib.util.spec_from_file_location("lead_recorder", RECORDER / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # LEAD_RECORD_DIR unset: defines the classes, installs nothing
    return module


def test_files_written_into_a_new_folder_before_its_watch_exists_are_recorded(tmp_path: Path):
    # The writer outruns the watching thread (as save_pretrained into a fresh temporary folder did under load):
    # the folder and its files all exist before the thread sees the folder's creation and can watch it.
    files = _recorder()._Files(tmp_path)
    (tmp_path / "models" / "train").mkdir(parents=True)
    (tmp_path / "models" / "train" / "model.safetensors").write_bytes(b"weights")
    files.start()
    (tmp_path / "models" / "train" / "config.json").write_text("{}")  # after: seen as an event
    files.stop()
    assert {"models/train/model.safetensors", "models/train/config.json"} <= files.written


def test_a_mapping_key_records_the_entries_read_and_the_whole_key_when_all_are_seen():
    keys: set[str] = set()
    variants = _recorder()._Entries({"grpo": {"penalty": False}, "lead": {}}, "ablation.variants", keys)
    assert "grpo" in variants and variants["grpo"] == {"penalty": False} and variants.get("x") is None
    assert keys == {"ablation.variants.grpo", "ablation.variants.x"}  # one cell reads its own variant only
    assert ", ".join(variants) == "grpo, lead"
    assert "ablation.variants" in keys  # listing every variant depends on every variant
