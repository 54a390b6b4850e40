"""Sealed checkpoints (lead.training.checkpoints): resume only from one whose files are all there, at their size."""

import json

from lead.training.checkpoints import SEAL, damage, last_complete_checkpoint, seal


def _checkpoint(folder, step, *, sealed=True):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"w" * 100)
    (path / "optimizer.pt").write_bytes(b"o" * 50)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if sealed:
        seal(path)
    return path


def test_a_checkpoint_cut_short_is_skipped_for_the_previous_one_and_said(tmp_path):
    older = _checkpoint(tmp_path, 25)
    newer = _checkpoint(tmp_path, 50)
    assert last_complete_checkpoint(tmp_path) == newer and damage(newer) is None
    with (newer / "model.safetensors").open("r+b") as fh:  # a kill or a full disk mid-write
        fh.truncate(60)
    said = []
    assert last_complete_checkpoint(tmp_path, say=said.append) == older
    assert said == [
        f"skipping {newer}: model.safetensors has 60 bytes, 100 were saved; resuming from an earlier checkpoint "
        "if there is one"
    ]


def test_an_unsealed_or_incomplete_checkpoint_is_never_resumed(tmp_path):
    _checkpoint(tmp_path, 25, sealed=False)  # killed before the seal: the save did not finish
    assert last_complete_checkpoint(tmp_path, say=lambda _: None) is None
    sealed = _checkpoint(tmp_path, 50)
    (sealed / "optimizer.pt").unlink()
    assert damage(sealed) == "optimizer.pt is missing"
    assert damage(tmp_path / "checkpoint-25") == "never sealed (the save did not finish)"
    assert SEAL not in (sealed / SEAL).read_text()  # the seal lists the others
