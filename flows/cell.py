"""The ``lead-cell`` Prefect flow: one stage of ``ablation/dvc.yaml`` (a cell, or a seed's baseline) on whichever
worker of a pool picks it up.

``lead-ablation`` with ``cell_deployment`` set submits each stale cell as a flow run of this deployment
(``run_deployment``): a pool of N workers, one node each, trains N cells at once. The machines share the DVC
remote, the MLflow server and the Prefect server, nothing on disk. A cell's flow run:

1. runs in a fresh clone of the repository (the deployment's ``git_clone`` pull step; ``prefect.yaml``) and
   checks out the parent's commit (``rev``);
2. writes the parent's ``params.yaml`` and ``dvc.lock`` (the settings, and the versions of the upstream outputs
   the cell reads) and ``dvc pull``s those outputs from the remote (``remote``: the parent's DVC remote);
3. runs the stage with ``dvc repro --single-item`` (its MLflow run a child of the parent's run);
4. pushes the stage's outputs with its ``dvc.lock`` entry as one bundle (:mod:`flows.bundle`), and names the
   bundle in its table artifact ``lead-cell`` — what the parent pulls, checks against its own workspace and
   records in ``ablation/dvc.lock``.

A cell's flow run that crashes (its machine gone, its process killed) pushes nothing: the parent records only
cells whose outputs are on the remote, and a rerun of ``lead-ablation`` submits only the unrecorded ones.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger

from flows import bundle
from flows.commands import CommandError, dvc_executable, git, run, stage_env

ARTIFACT_KEY = "lead-cell"
UPSTREAM = (
    "params",
    "curate",
    "warmstart",
    "calibrate",
)  # what the cells read, and the check of params.yaml before them (tests/flows/test_ablation.py checks it)
CREDENTIALS = ("password", "secret", "token", "key_id", "access_key", "credential")  # never travel as options


def remote_options(workspace: Path) -> dict[str, str]:
    """The default DVC remote of ``workspace``: its ``url`` and other settings (an S3 endpoint, a region), its
    credentials left out — each machine has its own (environment, ``dvc remote modify --local``)."""
    from dvc.repo import Repo

    with Repo(str(workspace)) as repo:
        name = repo.config["core"].get("remote")
        if not name:
            raise CommandError(
                f"cells on a pool carry their inputs and outputs through the DVC remote, and {workspace} has "
                "no default one: `dvc remote add -d <name> <url>` (infra/README.md)"
            )
        # what the user set at any level, not the schema's defaults; the URL as DVC resolves it (a folder's path)
        options = {}
        for level in repo.config.LEVELS:
            options.update(repo.config.load_one(level).get("remote", {}).get(name, {}))
        options["url"] = repo.config["remote"][name]["url"]
    return {k: str(v) for k, v in options.items() if not any(c in k for c in CREDENTIALS)}


def use_remote(root: Path, options: dict[str, str], name: str = "lead-cell") -> None:
    """Make ``options`` (:func:`remote_options`) the default DVC remote of the repository ``root``, in its
    ``config.local`` (nothing committed)."""
    dvc = dvc_executable()
    options = dict(options)
    run([dvc, "remote", "add", "--local", "--force", "-d", name, options.pop("url")], root)
    for key, value in options.items():
        run([dvc, "remote", "modify", "--local", name, key, value], root)


def _check_out(root: Path, rev: str) -> None:
    """``rev`` checked out in the clone ``root``, fetched from its origin if the clone lacks it."""
    if git(["status", "--porcelain", "--untracked-files=no"], root).strip():
        raise CommandError(
            f"{root} has uncommitted changes: lead-cell runs in a clone of its own (the deployment's pull step "
            "makes one), never in a checkout someone works in"
        )
    try:
        git(["cat-file", "-e", f"{rev}^{{commit}}"], root)
    except CommandError:
        try:
            git(["fetch", "-q", "origin", rev], root)
        except CommandError as exc:
            raise CommandError(
                f"commit {rev} is not in the repository the workers clone: push it, then run again"
            ) from exc
    git(["checkout", "-q", "--detach", rev], root)


def lock_entry(root: Path, address: str) -> dict[str, Any]:
    """The ``dvc.lock`` entry DVC wrote for the stage ``address`` (``<dvc.yaml>:<stage>``)."""
    pipeline, stage = address.rsplit(":", 1)
    lock = yaml.safe_load((root / pipeline).with_name("dvc.lock").read_text())
    return dict(lock["stages"][stage])


@flow(name="lead-cell")
def lead_cell(
    address: str,
    rev: str,
    params: str,
    lock: str,
    remote: dict[str, str],
    parent_run_id: str,
    tracking_uri: str,
    threads: int | None = None,
    workspace: str = ".",
) -> dict[str, Any]:
    """One stage of ``ablation/dvc.yaml`` (``address``) at the commit ``rev`` with the parent's ``params.yaml``
    and ``dvc.lock`` texts, its inputs pulled from and its outputs pushed to the DVC ``remote``; the bundle."""
    from prefect.artifacts import create_table_artifact

    root = Path(workspace).resolve()
    log = get_run_logger()
    _check_out(root, rev)
    (root / "params.yaml").write_text(params)
    (root / "dvc.lock").write_text(lock)
    use_remote(root, remote)
    run([dvc_executable(), "pull", "-q", *UPSTREAM], root)
    started = time.perf_counter()
    env = stage_env(parent_run_id, tracking_uri, threads=threads)
    run([dvc_executable(), "repro", "--single-item", address], root, env)
    seconds = round(time.perf_counter() - started, 1)
    entry = lock_entry(root, address)
    md5 = bundle.push(root, entry, remote["url"])
    result = {"address": address, "bundle": md5, "host": socket.gethostname(), "seconds": seconds}
    create_table_artifact(key=ARTIFACT_KEY, table=[result], description=f"lead-cell {address}")
    log.info(
        "lead-cell %s: done in %.0f s on %s; outputs pushed as bundle %s",
        address,
        seconds,
        result["host"],
        md5,
    )
    return result
