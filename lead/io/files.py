"""File I/O shared by the stages: atomic writes, stable hashes, the repository root.

Stages write every output atomically (to a temporary sibling, then ``os.replace``) so that an interrupted
run never leaves a half-written file that DVC or the next stage would take for a real one.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def repo_root(start: Path | None = None) -> Path:
    """The nearest folder above ``start`` (default: cwd) holding ``params.yaml``; cwd if none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "params.yaml").exists():
            return folder
    return here


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _writer_tag() -> str:
    """This host and process, as atomic writes name their temporary folders (``<host>-<pid>``)."""
    return f"{socket.gethostname().replace('.', '_')}-{os.getpid()}"


def remove_abandoned(target: Path) -> None:
    """Remove the temporary siblings that writers of ``target`` killed mid-write left behind: the
    ``.<name>.<host>-<pid>.*`` folders of processes of *this* host that no longer run (a process id says
    nothing about another machine's processes on a shared volume)."""
    host = socket.gethostname().replace(".", "_")
    for tmp in target.parent.glob(f".{glob.escape(target.name)}.{glob.escape(host)}-*.*"):
        pid = tmp.name[len(target.name) + len(host) + 3 :].split(".", 1)[0]
        if tmp.is_dir() and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


class DiskFull(OSError):
    """A write ran out of space: the message names what was being written and how much room is left there."""


# How C++ writers report a failed write without an errno: torch's serializer ("basic_ios::clear", "file write
# failed"), safetensors' and others'. A failed write where the device has next to no room left is a full disk.
_WRITE_FAILED = ("basic_ios::clear", "file write failed", "iostream error", "failed writing file")
_NEARLY_FULL = 64 * 2**20


def _free(target: Path) -> int:
    where = next((p for p in (target, *target.parents) if p.exists()), Path("."))
    return shutil.disk_usage(where).free


def _no_space(exc: BaseException, target: Path | None = None) -> bool:
    """Whether ``exc`` is a full disk (or quota), however the library that wrote reported it: an ``ENOSPC`` /
    ``EDQUOT`` errno or its words, or (writing ``target``) a write failure with no errno on a device with less
    than 64 MiB free."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    if "No space left on device" in text or "[errno 28]" in text.lower():
        return True
    return target is not None and any(w in text for w in _WRITE_FAILED) and _free(target) < _NEARLY_FULL


def disk_full(target: Path, exc: BaseException) -> DiskFull:
    """The :class:`DiskFull` for a failed write of ``target``."""
    error = DiskFull(
        f"{target}: no space left on the device while writing it ({_free(target) / 2**20:.1f} MiB free there); "
        "free some space and run again"
    )
    error.errno = errno.ENOSPC  # set after: given to the constructor, it would prefix the message
    return error


@contextlib.contextmanager
def writing(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Around a write to ``target`` (a file, or a folder a library fills: the trainer's checkpoints) that is not an
    :func:`atomic_path`: refused when it leaves the workspace (:func:`inside_workspace`), and a full disk becomes
    one :class:`DiskFull` naming ``target`` and the room left, whichever library ran out of it."""
    target = inside_workspace(Path(target))
    try:
        yield target
    except Exception as exc:
        if _no_space(exc, target) and not isinstance(exc, DiskFull):
            raise disk_full(target, exc) from exc
        raise


class OutsideWorkspace(OSError):
    """A write whose path lies in the workspace as written but resolves outside it (a symlink points out)."""


def inside_workspace(target: Path, replaced: bool = False) -> Path:
    """``target``, refused with :class:`OutsideWorkspace` when, written inside the workspace (the folder of
    ``params.yaml``: :func:`repo_root`), it resolves -- symlinks followed -- outside it: ``ln -s /elsewhere
    reports/curate`` must not turn a stage's report into a write elsewhere. A path written outside the workspace is
    the params check's to judge (``paths.*``, :data:`lead.config.load.ALLOW_EXTERNAL_ENV`), as is a workspace
    whose outputs are meant to go elsewhere (that variable set to ``1``). ``replaced``: the write replaces
    ``target`` itself (:func:`atomic_path`), so a link at ``target`` is replaced rather than followed."""
    from lead.config.load import ALLOW_EXTERNAL_ENV

    if os.environ.get(ALLOW_EXTERNAL_ENV) == "1":
        return target
    root = repo_root()
    written = Path(os.path.abspath(target))
    if root != written and root not in written.parents:
        return target
    real = written.parent.resolve() / written.name if replaced else written.resolve()
    real_root = root.resolve()
    if real != real_root and real_root not in real.parents:
        raise OutsideWorkspace(
            f"{target}: resolves to {real}, outside the workspace {real_root} (a symlink inside it points out): "
            f"remove the link, or set {ALLOW_EXTERNAL_ENV}=1 to write there on purpose"
        )
    return target


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; on success move it into place (file or folder).

    The temporary folder is named after this host and process (``.<name>.<host>-<pid>.*``) so that a later
    writer can tell the leftovers of a killed one from the work of a live one, and removes them. A full disk
    while writing is a :class:`DiskFull` naming ``target`` (the previous ``target`` stays as it was); a target
    that resolves out of the workspace is refused before anything is written (:func:`inside_workspace`)."""
    target = Path(target)
    inside_workspace(target, replaced=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{_writer_tag()}.", dir=target.parent)) / target.name
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except Exception as exc:
        if _no_space(exc, target) and not isinstance(exc, DiskFull):
            raise disk_full(target, exc) from exc
        raise
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def json_text(data: Any) -> str:
    """``data`` as the project writes JSON files: pretty, keys sorted (the same data, the same bytes)."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as pretty JSON (:func:`json_text`), atomically."""
    write_text(path, json_text(data))


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def link_tree(source: Path, target: Path) -> None:
    """Copy the folder ``source`` to ``target`` as hard links (no space used; falls back to copies across
    file systems). Writers here replace files (``os.replace``), never rewrite them in place, so the two stay
    independent names of the same bytes."""
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
