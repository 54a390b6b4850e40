"""Where a stage writes: never out of the workspace through a symlink, and a full disk is one line naming the file."""

import errno
import json
import os

import pytest

from lead.io import files
from lead.io.calibration_cache import CalibrationCache
from lead.io.files import DiskFull, OutsideWorkspace, atomic_path, write_json, writing


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace (a folder holding params.yaml, the current directory) and a folder outside it."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "params.yaml").write_text("{}\n")
    monkeypatch.chdir(ws)
    monkeypatch.delenv("LEAD_ALLOW_EXTERNAL_PATHS", raising=False)
    return ws, outside


def test_a_symlink_in_the_workspace_does_not_take_a_write_out_of_it(workspace, monkeypatch):
    ws, outside = workspace
    (ws / "reports").mkdir()
    (ws / "reports/curate").symlink_to(outside)  # ln -s /outside reports/curate
    with pytest.raises(
        OutsideWorkspace, match=r"reports/curate/report.json: resolves to .*outside the workspace"
    ):
        write_json("reports/curate/report.json", {"a": 1})
    (ws / "resume").symlink_to(outside)  # ln -s /outside resume: the calibration cache appends through it
    with pytest.raises(OutsideWorkspace, match=r"resume/calibrate/cache\.jsonl"):
        CalibrationCache(ws / "resume/calibrate/cache.jsonl").append([{"kind": "settings", "settings": "s"}])
    with pytest.raises(OutsideWorkspace), writing("resume/train"):  # the trainer's checkpoints
        pytest.fail("entered")
    assert list(outside.iterdir()) == []
    # Inside, or on purpose elsewhere, writes go through; a link that is itself the target is replaced, not
    # written through (DVC may check outputs out as links).
    write_json("reports/ok.json", {"a": 1})
    (ws / "reports/link.json").symlink_to(outside / "x.json")
    write_json("reports/link.json", {"b": 2})
    assert not (ws / "reports/link.json").is_symlink() and list(outside.iterdir()) == []
    monkeypatch.setenv("LEAD_ALLOW_EXTERNAL_PATHS", "1")
    write_json("reports/curate/report.json", {"a": 1})
    assert json.loads((outside / "report.json").read_text()) == {"a": 1}


def test_a_stage_refuses_a_report_folder_that_links_out_of_the_workspace(workspace, capsys):
    from lead.stages import curate
    from lead.stages._common import stage_main
    from tests.conftest import ROOT

    ws, outside = workspace
    params = (ROOT / "params.yaml").read_text().replace("raw: data/raw", f"raw: {ROOT / 'data/raw'}")
    (ws / "params.yaml").write_text(params)
    (ws / "reports").mkdir()
    (ws / "reports/curate").symlink_to(outside)
    overrides = [
        "tracking.uri=sqlite:///mlflow.db",
        "curate.proxy.train_problems=20",
        "curate.proxy.test_per_level=1",
    ]
    with pytest.raises(SystemExit) as exit_:
        stage_main(
            "curate", curate.run, ["--params", "params.yaml", *[a for o in overrides for a in ("-S", o)]]
        )
    assert exit_.value.code == 1
    assert "outside the workspace" in capsys.readouterr().err.splitlines()[-1]
    assert list(outside.iterdir()) == []


def test_a_full_disk_is_one_error_naming_the_file_whichever_library_ran_out(workspace, monkeypatch):
    with (
        pytest.raises(
            DiskFull, match=r"resume/train: no space left on the device while writing it \(.* MiB free"
        ),
        writing("resume/train"),
    ):
        raise OSError(errno.ENOSPC, "No space left on device")
    # torch's serializer says only "basic_ios::clear": a full disk when the device has next to no room left ...
    monkeypatch.setattr(files, "_free", lambda target: 5 * 2**20)
    with pytest.raises(DiskFull, match=r"resume/train: .*\(5.0 MiB free there\)"), writing("resume/train"):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . basic_ios::clear: iostream error")
    # ... and the error it is when there is room
    monkeypatch.setattr(files, "_free", lambda target: 50 * 2**30)
    with pytest.raises(RuntimeError, match="basic_ios"), writing("resume/train"):
        raise RuntimeError("basic_ios::clear: iostream error")


def test_the_calibration_cache_on_a_full_device_names_its_file(workspace, monkeypatch):
    ws, _ = workspace
    cache = CalibrationCache(ws / "resume/calibrate/cache.jsonl")
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFull, match=r"cache\.jsonl: no space left"):
        cache.append([{"kind": "settings", "settings": "s"}])
    monkeypatch.setattr(os, "fsync", real_fsync)


def test_an_atomic_write_on_a_full_disk_leaves_the_previous_file(workspace):
    ws, _ = workspace
    write_json("reports/a.json", {"v": 1})
    with pytest.raises(DiskFull, match=r"reports/a\.json"), atomic_path("reports/a.json") as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert json.loads((ws / "reports/a.json").read_text()) == {"v": 1}
