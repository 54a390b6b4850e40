"""A flow run with params overrides, as a DVC experiment in a copy of the workspace that the workspace never sees.

:func:`experiment_copy` makes the copy: a git worktree of the workspace's ``HEAD`` (same repository, so the
experiment refs it saves are the workspace's) under ``.dvc/tmp/lead-pipeline/runs/<flow run id>`` — ignored by
git and by DVC, on the same file system as the DVC cache — holding what the workspace holds:

* the workspace's uncommitted changes and untracked (not ignored) files, so the experiment is "the workspace
  plus the overrides", as ``dvc exp run`` would take it (a ``dvc.lock`` not yet committed included);
* the workspace's DVC cache (``cache.dir`` in the copy's ``config.local``, beside a copy of the workspace's own
  ``config.local``), from which ``dvc checkout`` restores the outputs, and into which the run's new outputs go;
* a copy of the outputs DVC does not cache (``cache: false``: the ablation's cells and baselines, register's
  record), which ``dvc checkout`` cannot restore (:func:`_carry_uncached`): without them every stage owning one
  would run again in the copy, up to date or not (a sweep evaluated every baseline again);
* a copy of the workspace's resume state (``paths.resume``: the calibration caches, the training checkpoints;
  no DVC output), so that a stage the overrides make stale resumes or reuses what its identity allows. A copy,
  not links: the calibration cache is appended to in place. At full scale the checkpoints are large; this is
  the price of a run that cannot touch the workspace's resume state;
* ``params.yaml`` with the overrides written in (:func:`write_overrides`: DVC's round-trip YAML, the form
  params.yaml is kept in, so every other line stays, comments included), checked to read back as the params
  the flow validated.

:func:`save_experiment` records the result with ``dvc exp save -n <name> <stages>``: one experiment commit on
the workspace's ``HEAD``, listed by ``dvc exp show`` in the workspace; ``dvc exp apply <name>`` brings its
params and outputs (from the shared cache) into the workspace on demand. Only the flow's stages are committed
(``dvc exp save`` would otherwise mark any other stale stage as done). The copy is removed when the run ends,
whatever the ending; one left by a killed flow is removed, with the commands still running in it
(:func:`flows.commands.stop_orphans`), by the next flow's :func:`clean_stale`.

Limits. What a stage adds to the copied resume state is not kept: a killed experiment run trains afresh when
run again. ``dvc exp save`` uses the repository's shared experiment refs (``refs/exps/exec``) for a
moment: a ``dvc exp run``/``save`` in the workspace at that same moment may collide with it (the flow lock
only keeps flows apart).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

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


def write_overrides(params_path: Path, overrides: list[str]) -> None:
    """Apply ``overrides`` to ``params_path`` in place, as ``lead -S`` reads them, through DVC's own YAML
    round trip (what ``dvc exp run -S`` writes with): params.yaml is kept in that form (a contract test), so
    only the overridden values' lines change, comments included."""
    from dvc.utils.serialize import modify_yaml

    with modify_yaml(str(params_path)) as data:
        apply_overrides(data, overrides)


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


def _carry_uncached(workspace: Path, copy: Path) -> None:
    """Copy into ``copy`` every output of the workspace's pipelines that DVC does not cache and that is there. DVC
    then judges each as in the workspace: an up-to-date stage is skipped, a stale one runs."""
    from dvc.repo import Repo

    with Repo(str(workspace)) as repo:
        outputs = [Path(out.fs_path) for out in repo.index.outs if not out.use_cache]
    for source in outputs:
        target = copy / source.relative_to(workspace)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        elif source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


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
        _carry_uncached(workspace, copy)
        resume = load_params(workspace / "params.yaml").paths.resume
        if not resume.is_absolute() and (workspace / resume).is_dir():  # an absolute one is shared as it is
            shutil.copytree(workspace / resume, copy / resume, symlinks=True)
        _share_cache(workspace, copy)
        # Outputs the cache lacks (never computed here, or garbage-collected) are left to their stages (quiet: a
        # warning for each of them would be no news).
        run([dvc_executable(), "checkout", "--allow-missing", "--quiet"], copy)
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


def save_experiment(copy: Path, name: str, stages: list[str], include: list[Path] = ()) -> str:
    """``dvc exp save -n <name> <stages>`` in ``copy``: the experiment commit's sha. ``include``: files (under
    ``copy``) that git ignores but the experiment must carry -- small uncached results such as a sweep's report,
    which ``dvc exp apply`` then brings into the workspace with the params and ``dvc.lock``."""
    lines: list[str] = []
    extra = [
        a for path in include if path.exists() for a in ("--include-untracked", str(path.relative_to(copy)))
    ]
    run([dvc_executable(), "exp", "save", "--json", "-n", name, *extra, *stages], copy, on_line=lines.append)
    saved = [json.loads(line) for line in lines if line.startswith("{")]
    if not saved or not saved[-1].get("ref"):
        raise CommandError(f"`dvc exp save` in {copy} printed no experiment commit:\n" + "\n".join(lines))
    return str(saved[-1]["ref"])


def push_experiment(workspace: Path, name: str) -> str | None:
    """``dvc exp push --no-cache origin <name>``: the experiment's git ref to the repository's ``origin`` (its
    outputs went with ``dvc push``), so that a clone elsewhere gets it with ``dvc exp pull origin <name>``; the
    remote pushed to, or None for a workspace without ``origin`` (the ref stays in it)."""
    if "origin" not in git(["remote"], workspace).split():
        return None
    run([dvc_executable(), "exp", "push", "--no-cache", "origin", name], workspace)
    return "origin"
