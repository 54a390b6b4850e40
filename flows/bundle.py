"""A stage's uncached outputs carried between machines through the DVC remote, as one content-addressed bundle.

A cell of the ablation that runs on another machine (:mod:`flows.cell`) must hand its outputs to the flow that
records it, and the machines share the DVC remote, not a disk. DVC pushes only cached outputs, and a cell's are
``cache: false`` (``ablation/dvc.yaml`` says why). So the worker puts the outputs and the stage's ``dvc.lock``
entry in one folder, the *bundle*, and ``dvc add --to-remote``s it from a throw-away DVC repository (no git)
whose remote is the project's; the recorder ``dvc pull``s it back by its md5 the same way. The remote is
content-addressed: the md5 names the bundle's contents exactly, and an output inside it hashes to the md5 its
lock entry records (DVC's own directory hash), so the recorder can check that what it got is what ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from flows.commands import CommandError, dvc_executable

BUNDLE = "bundle"
RECORD = "record.json"  # in the bundle: the stage's lock entry and where each output goes
REMOTE = "carrier"


def _dvc(root: Path, *args: str) -> None:
    """``dvc <args>`` in the carrier ``root``; :class:`CommandError` with what it printed if it fails."""
    done = subprocess.run(
        [dvc_executable(), *args],
        cwd=root,
        env={**os.environ, "DVC_NO_ANALYTICS": "1"},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        lines = (done.stdout + done.stderr).splitlines()
        raise CommandError(f"`dvc {' '.join(args)}` failed ({done.returncode}):\n" + "\n".join(lines), lines)


@contextlib.contextmanager
def _carrier(remote: str) -> Iterator[Path]:
    """A throw-away DVC repository (no git) whose default remote is ``remote`` (a URL or folder)."""
    with tempfile.TemporaryDirectory(prefix="lead-bundle-") as tmp:
        root = Path(tmp)
        _dvc(root, "init", "--no-scm", "-q")
        _dvc(root, "remote", "add", "-d", REMOTE, remote)
        yield root


def _link_tree(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` as hard links where the filesystem allows (a model is gigabytes)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    if source.is_dir():
        shutil.copytree(source, target, copy_function=link)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        link(str(source), str(target))


def push(workspace: Path, lock_entry: dict[str, Any], remote: str) -> str:
    """Bundle the outputs ``lock_entry`` names (paths relative to ``workspace``) with the entry itself, push the
    bundle to ``remote``; its md5 (what :func:`pull` needs)."""
    outs = [o["path"] for o in lock_entry.get("outs", [])]
    with _carrier(remote) as root:
        bundle = root / BUNDLE
        bundle.mkdir()
        for i, path in enumerate(outs):
            if not (workspace / path).exists():
                raise FileNotFoundError(f"the stage's output {path} is not in {workspace}")
            _link_tree(workspace / path, bundle / str(i))
        record = {"lock": lock_entry, "outs": outs}
        (bundle / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
        _dvc(root, "add", "-q", "--to-remote", BUNDLE)
        (out,) = yaml.safe_load((root / f"{BUNDLE}.dvc").read_text())["outs"]
        return str(out["md5"])


def pull(md5: str, remote: str, workspace: Path) -> dict[str, Any]:
    """The bundle ``md5`` from ``remote``: its outputs put in place in ``workspace`` (replacing what is there);
    the stage's lock entry as the worker recorded it (the recorder checks the outputs against it)."""
    with _carrier(remote) as root:
        out = {"md5": md5, "hash": "md5", "path": BUNDLE}  # hash: DVC 3's md5 (without it, 2's dos2unix md5)
        (root / f"{BUNDLE}.dvc").write_text(yaml.safe_dump({"outs": [out]}))
        try:
            _dvc(root, "pull", f"{BUNDLE}.dvc")
        except CommandError as exc:
            raise CommandError(
                f"bundle {md5} could not be pulled from the DVC remote {remote}: {exc}"
            ) from exc
        bundle = root / BUNDLE
        record = json.loads((bundle / RECORD).read_text())
        for i, path in enumerate(record["outs"]):
            target = workspace / path
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(bundle / str(i), target)
    return dict(record["lock"])
