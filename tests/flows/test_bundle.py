"""What carries a cell between machines: uncached outputs through the DVC remote as one bundle (flows/bundle.py),
the remote's settings without credentials, and the check that a worker's lock entry is the recorder's.
(The whole path, two workers on a pool: tests/stack/test_cells.py.)"""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from flows import bundle
from flows.ablation import _differences
from flows.cell import lock_entry, remote_options
from flows.commands import CommandError
from tests.flows.conftest import dvc

STAGE = {
    "stages": {
        "cell": {
            "cmd": "mkdir -p out/sub && echo trained > out/sub/model.txt && echo 0.5 > metrics.txt",
            "deps": ["input.txt"],
            "outs": [{"out": {"cache": False}}, {"metrics.txt": {"cache": False}}],
        }
    }
}


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    dvc(path, "init", "-q")
    (path / "dvc.yaml").write_text(yaml.safe_dump(STAGE))
    (path / "input.txt").write_text("data\n")
    return path


def test_a_bundle_carries_uncached_outputs_and_the_lock_entry_that_a_commit_there_reproduces(tmp_path):
    remote = tmp_path / "remote"
    remote.mkdir()
    worker = _repo(tmp_path / "worker")
    dvc(worker, "repro")
    entry = lock_entry(worker, "dvc.yaml:cell")
    md5 = bundle.push(worker, entry, str(remote))
    assert md5.endswith(".dir") and any(remote.rglob("*.dir"))

    recorder = _repo(tmp_path / "recorder")  # the same repository elsewhere: no outputs, no lock
    (recorder / "out").mkdir()
    (recorder / "out" / "stale.txt").write_text("from an older run\n")  # replaced, not merged
    assert bundle.pull(md5, str(remote), recorder) == entry
    assert (recorder / "out/sub/model.txt").read_text() == "trained\n"
    assert not (recorder / "out/stale.txt").exists()
    dvc(recorder, "commit", "--force", "dvc.yaml:cell")
    assert _differences(lock_entry(recorder, "dvc.yaml:cell"), entry) == []  # same md5s, DVC's own hashes
    assert "up to date" in dvc(recorder, "status").stdout

    # A recorder whose input differs: its entry names the difference.
    (recorder / "input.txt").write_text("other data\n")
    dvc(recorder, "commit", "--force", "dvc.yaml:cell")
    assert _differences(lock_entry(recorder, "dvc.yaml:cell"), entry) == ["input.txt"]


def test_a_bundle_the_remote_lacks_is_a_clear_error(tmp_path):
    remote = tmp_path / "remote"
    remote.mkdir()
    with pytest.raises(CommandError, match="could not be pulled from the DVC remote"):
        bundle.pull("0123456789abcdef0123456789abcdef.dir", str(remote), tmp_path)


def test_the_remote_travels_without_its_credentials(tmp_path):
    repo = _repo(tmp_path / "repo")
    dvc(repo, "remote", "add", "-d", "team", "s3://bucket/lead")
    dvc(repo, "remote", "modify", "team", "endpointurl", "http://minio:9000")
    dvc(repo, "remote", "modify", "--local", "team", "access_key_id", "AKIA")
    dvc(repo, "remote", "modify", "--local", "team", "secret_access_key", "s3cr3t")
    assert remote_options(repo) == {"url": "s3://bucket/lead", "endpointurl": "http://minio:9000"}
    shutil.rmtree(repo / ".dvc")
    dvc(repo, "init", "-q")
    with pytest.raises(CommandError, match="no default one"):
        remote_options(repo)
