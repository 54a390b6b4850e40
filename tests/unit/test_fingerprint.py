"""Identity by content: fingerprints follow bytes, not paths; a stage's outputs are read as one generation."""

import json
import os
import shutil

import pytest

from lead.io.files import atomic_path, remove_abandoned
from lead.io.fingerprint import (
    StaleOutputError,
    file_fingerprint,
    model_fingerprint,
    publish,
    rows_fingerprint,
    value_fingerprint,
    verify,
)


def _model(folder, weights: bytes = b"w1"):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text('{"hidden": 8}')
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_model_fingerprint_follows_content_not_place(tmp_path):
    a = _model(tmp_path / "a")
    b = tmp_path / "elsewhere" / "b"
    shutil.copytree(a, b)
    assert model_fingerprint(a) == model_fingerprint(b)
    (b / "training_args.bin").write_bytes(os.urandom(8))  # trainer metadata: paths and clocks
    (b / ".cache").mkdir()
    assert model_fingerprint(a) == model_fingerprint(b)
    (b / "model.safetensors").write_bytes(b"w2")  # same path, other weights: another model
    assert model_fingerprint(a) != model_fingerprint(b)
    (b / "model.safetensors").write_bytes(b"w1")
    (b / "tokenizer.json").write_text('{"added": 1}')  # a retrained tokenizer is another model too
    assert model_fingerprint(a) != model_fingerprint(b)
    with pytest.raises(FileNotFoundError, match="no model files"):
        model_fingerprint((tmp_path / "empty").mkdir() or tmp_path / "empty")


def test_rows_and_values_fingerprint_their_content_in_order():
    rows = [{"id": "a", "answer": "1"}, {"answer": "2", "id": "b"}]
    assert rows_fingerprint(rows) == rows_fingerprint([dict(reversed(list(r.items()))) for r in rows])
    assert rows_fingerprint(rows) != rows_fingerprint(rows[::-1]) != rows_fingerprint(rows[:1])
    assert value_fingerprint({"a": 1, "b": [1, 2]}) == value_fingerprint({"b": [1, 2], "a": 1})
    assert value_fingerprint({"a": 1}) != value_fingerprint({"a": 2})


def test_a_reader_refuses_outputs_of_an_unfinished_or_other_generation(tmp_path):
    manifest, out, other = tmp_path / "stage.manifest.json", tmp_path / "out.txt", tmp_path / "b" / "o.txt"
    other.parent.mkdir()
    out.write_text("generation 1")
    other.write_text("also 1")
    publish(manifest, "stage", [out, other], model="sha256:m1")
    data = verify(manifest, "stage", [out, other])
    assert data["model"] == "sha256:m1" and set(data["outputs"]) == {"out.txt", "b/o.txt"}
    assert data["outputs"]["out.txt"] == file_fingerprint(out)

    manifest.unlink()  # a stage that never finished: nothing of it can be read
    with pytest.raises(StaleOutputError, match="has not published"):
        verify(manifest, "stage", [out])
    publish(manifest, "stage", [out, other])
    out.write_text("generation 2")  # a newer run got this far before it was killed
    with pytest.raises(StaleOutputError, match="not the content stage published"):
        verify(manifest, "stage", [out])
    verify(manifest, "stage", [other])  # what is unchanged still reads
    with pytest.raises(StaleOutputError, match="not among the outputs"):
        verify(manifest, "stage", [tmp_path / "stage.manifest.json"])
    assert json.loads(manifest.read_text())["stage"] == "stage"


def test_atomic_writes_clean_up_after_a_killed_writer(tmp_path):
    import socket

    host = socket.gethostname().replace(".", "_")
    target = tmp_path / "train.parquet"
    dead = tmp_path / f".train.parquet.{host}-999999999.abc"  # no such process here
    alive = tmp_path / f".train.parquet.{host}-{os.getpid()}.xyz"  # a writer still at work
    elsewhere = tmp_path / ".train.parquet.otherhost-1.abc"  # another machine's writer: not ours to judge
    for d in (dead, alive, elsewhere):
        d.mkdir()
    with atomic_path(target) as tmp:
        tmp.write_text("x")
    assert target.read_text() == "x" and not dead.exists() and alive.exists() and elsewhere.exists()
    remove_abandoned(target)
    assert alive.exists()


def test_read_verified_returns_the_bytes_it_checked(tmp_path):
    from lead.io.fingerprint import read_verified

    manifest, out = tmp_path / "m.json", tmp_path / "metrics.json"
    out.write_text('{"a": 1}')
    publish(manifest, "evaluate", [out])
    content, data = read_verified(manifest, "evaluate", out)
    assert content == b'{"a": 1}' and data["stage"] == "evaluate"
    out.write_text('{"a": 2}')
    with pytest.raises(StaleOutputError, match=r"lead evaluate"):
        read_verified(manifest, "evaluate", out)
    with pytest.raises(StaleOutputError, match=r"`lead calibrate-stage2`"):
        verify(tmp_path / "none.json", "calibrate_stage2")


def test_training_code_is_part_of_a_runs_identity(tmp_path, monkeypatch):
    """A fixed reward is another result: the identity follows the training code's source, not its bytecode."""
    import importlib
    import sys

    from lead.io.fingerprint import code_fingerprint
    from lead.training.identity import TRAINING_CODE

    assert "lead.core.rewards" in TRAINING_CODE and "lead.training" in TRAINING_CODE
    package = tmp_path / "seam"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rewards.py").write_text("ALPHA = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    before = code_fingerprint(("seam",))
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "rewards.cpython-311.pyc").write_bytes(os.urandom(16))
    assert code_fingerprint(("seam",)) == before
    (package / "rewards.py").write_text("ALPHA = 2\n")
    assert code_fingerprint(("seam",)) != before
    sys.modules.pop("seam", None)
