"""A flow run with params overrides, as a DVC experiment in a copy of the workspace that the workspace never sees.

:func:`experiment_copy` makes the copy: a git worktree of the workspace's ``HEAD`` (same repository, so the
experiment refs it saves are the workspace's) under ``.dvc/tmp/lead-pipeline/runs/<flow run id>`` — ignored by
git and by DVC, on the same file system as the DVC cache — holding what the workspace holds:

* the workspace's uncommitted changes and untracked (not ignored) files, so the experiment is "the workspace
  plus the overrides", as ``dvc exp run`` would take it (a ``dvc.lock`` not yet committed included);
* the workspace's DVC cache (``cache.dir`` in the copy's ``config.local``, beside a copy of the workspace's own
  ``config.local``), from which ``dvc checkout`` restores the outputs, and into which the run's new outputs go;
* copies of the outputs DVC does not cache (``cache: false``: the calibration caches, the training
  checkpoints), without which DVC would call their stages changed. Copies, not links: the calibration cache is
  appended to in place. At full scale the checkpoints are large; this is the price of a run that cannot touch
  the workspace's resume state;
* ``params.yaml`` with the overrides written in (:func:`write_overrides`: round-trip YAML, every other byte
  kept, comments included), checked to read back as the params the flow validated.

:func:`save_experiment` records the result with ``dvc exp save -n <name> <stages>``: one experiment commit on
the workspace's ``HEAD``, listed by ``dvc exp show`` in the workspace; ``dvc exp apply <name>`` brings its
params and outputs (from the shared cache) into the workspace on demand. Only the flow's stages are committed
(``dvc exp save`` would otherwise mark any other stale stage as done). The copy is removed when the run ends,
whatever the ending; one left by a killed flow is removed, with the commands still running in it
(:func:`flows.commands.stop_orphans`), by the next flow's :func:`clean_stale`.

Limits. What a stage adds to the copied resume state is not kept: a killed experiment run trains afresh when
run again, and after ``dvc exp apply`` the stages it reran show their uncached outputs as modified until they
run once more. ``dvc exp save`` uses the repository's shared experiment refs (``refs/exps/exec``) for a
moment: a ``dvc exp run``/``save`` in the workspace at that same moment may collide with it (the flow lock
only keeps flows apart).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flows.commands import CommandError, dvc_executable, git, logger, run, stop_orphans
from lead.config import apply_overrides, load_params

RUNS = ".dvc/tmp/lead-pipeline/runs"


def clean_stale(workspace: Path) -> list[Path]:
    """Stop what killed flows left running in ``workspace`` and in their copies, remove those copies and git's
    records of them; returns the copies removed. Only under the workspace lock (no live flow owns them)."""
    runs = workspace / RUNS
    stale = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    for folder in (workspace, *stale):
        stopped = stop_orphans(folder)
        if stopped:
            logger().warning("stopped %s in %s, left running by a flow run that was killed", stopped, folder)
    for copy in stale:
        shutil.rmtree(copy)
        logger().warning("removed %s, the copy of a flow run that was killed", copy)
    if stale:
        git(["worktree", "prune"], workspace)
    return stale


def _flow_style(value: Any) -> Any:
    """``value`` as ruamel writes it on one line (``[24, 48]``, ``{a: 1}``), the way an override is typed."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    node: CommentedMap | CommentedSeq
    if isinstance(value, list):
        node = CommentedSeq(_flow_style(v) for v in value)
    elif isinstance(value, dict):
        node = CommentedMap((k, _flow_style(v)) for k, v in value.items())
    else:
        return value
    node.fa.set_flow_style()
    return node


def _round_trip(text: str) -> Any:
    """A ruamel round-trip YAML (the parser DVC reads params with) that writes ``text``, loaded, back byte for
    byte: comments and quotes kept, and the first indentation, of the usual ones, that reproduces the file."""
    from ruamel.yaml import YAML

    def make(mapping: int, offset: int) -> YAML:
        rt = YAML()
        rt.preserve_quotes = True
        rt.width = 4096  # long comments and strings stay on their lines
        rt.indent(mapping=mapping, sequence=mapping + offset, offset=offset)
        # `null` as the shipped params.yaml writes it (ruamel's default is an empty value)
        rt.representer.add_representer(
            type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
        )
        return rt

    for mapping, offset in ((2, 2), (2, 0), (4, 2), (4, 0)):
        rt = make(mapping, offset)
        out = io.StringIO()
        rt.dump(rt.load(text), out)
        if out.getvalue() == text:
            return rt
    return make(2, 2)  # a layout of its own: the file is rewritten in the shipped one


def write_overrides(params_path: Path, overrides: list[str]) -> None:
    """Apply ``overrides`` to ``params_path`` in place, as ``lead -S`` reads them, and change nothing else
    (:func:`_round_trip`); each overridden value is written on its key's line."""
    text = params_path.read_text(encoding="utf-8")
    rt = _round_trip(text)
    data = rt.load(text)
    apply_overrides(data, overrides)
    for key in (item.partition("=")[0] for item in overrides):
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[leaf] = _flow_style(node[leaf])
    with params_path.open("w", encoding="utf-8") as fh:
        rt.dump(data, fh)


def _carry_changes(workspace: Path, copy: Path) -> None:
    """Bring the workspace's changes to tracked files (staged or not, deletions too) and its untracked files
    that git does not ignore into ``copy``, a fresh checkout of the same ``HEAD``."""
    changed = git(["diff", "--name-only", "--no-renames", "-z", "HEAD"], workspace)
    untracked = git(["ls-files", "--others", "--exclude-standard", "-z"], workspace)
    for name in filter(None, f"{changed}\0{untracked}".split("\0")):
        source, target = workspace / name, copy / name
        if source.is_dir() and not source.is_symlink():  # a submodule: not carried
            continue
        if source.exists() or source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
        else:
            target.unlink(missing_ok=True)


def _uncached_outputs(copy: Path) -> list[str]:
    """The paths (relative to the repository) of every ``cache: false`` output of the copy's pipeline."""
    from dvc.repo import Repo

    with Repo(str(copy)) as repo:
        return [os.path.relpath(out.fs_path, copy) for out in repo.index.outs if not out.use_cache]


def _share_cache(workspace: Path, copy: Path) -> None:
    """Point the copy at the workspace's DVC cache, after the workspace's local config (remotes, credentials)."""
    local = workspace / ".dvc" / "config.local"
    if local.exists():
        shutil.copy2(local, copy / ".dvc" / "config.local")
    lines: list[str] = []
    run([dvc_executable(), "cache", "dir"], workspace, on_line=lines.append)
    run([dvc_executable(), "config", "--local", "cache.dir", lines[-1].strip()], copy)


@contextlib.contextmanager
def experiment_copy(workspace: Path, run_id: str, overrides: list[str]) -> Iterator[Path]:
    """A copy of ``workspace`` with ``overrides`` in its params.yaml, for the flow run ``run_id``: see the module
    docstring. Removed when the block ends, however it ends."""
    try:
        top = Path(git(["rev-parse", "--show-toplevel"], workspace).strip()).resolve()
    except CommandError as exc:
        raise CommandError(
            f"overrides run as a DVC experiment, which needs a git repository: {exc}"
        ) from None
    if top != workspace.resolve():
        raise CommandError(
            f"{workspace}: overrides need the workspace at the top of its git repository ({top})"
        )
    copy = workspace / RUNS / run_id
    copy.parent.mkdir(parents=True, exist_ok=True)
    git(["worktree", "add", "--detach", str(copy), "HEAD"], workspace)
    try:
        _carry_changes(workspace, copy)
        for name in _uncached_outputs(copy):
            source, target = workspace / name, copy / name
            if source.is_dir() and not target.exists():
                shutil.copytree(source, target, symlinks=True)
            elif source.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        _share_cache(workspace, copy)
        # Outputs the cache lacks (never computed here, or garbage-collected) are left to their stages.
        run([dvc_executable(), "checkout", "--allow-missing"], copy)
        write_overrides(copy / "params.yaml", overrides)
        wanted = load_params(workspace / "params.yaml", overrides).model_dump()
        if load_params(copy / "params.yaml").model_dump() != wanted:
            raise CommandError(
                f"{copy / 'params.yaml'}: the overrides {overrides} did not read back as validated"
            )
        logger().info("running in %s, a copy of the workspace with %s", copy, " ".join(overrides))
        yield copy
    finally:
        # Errors here would hide the block's own; a copy left behind goes at the next flow's clean_stale.
        shutil.rmtree(copy, ignore_errors=True)
        git(["worktree", "prune"], workspace)


def save_experiment(copy: Path, name: str, stages: list[str]) -> str:
    """``dvc exp save -n <name> <stages>`` in ``copy``: the experiment commit's sha."""
    lines: list[str] = []
    run([dvc_executable(), "exp", "save", "--json", "-n", name, *stages], copy, on_line=lines.append)
    saved = [json.loads(line) for line in lines if line.startswith("{")]
    if not saved or not saved[-1].get("ref"):
        raise CommandError(f"`dvc exp save` in {copy} printed no experiment commit:\n" + "\n".join(lines))
    return str(saved[-1]["ref"])
