"""The last ``params.yaml`` that passed the check, kept so that a refused one can be put back in one command.

``dvc exp run -S key=value`` writes its values into ``params.yaml`` before any stage runs and puts nothing back
when the experiment fails (DVC's workspace holds the last experiment, params and outputs, until you go back). A
refused experiment would then leave its mistake in the file, and the next ``dvc exp run`` would carry it too.
Each successful check of the workspace's ``params.yaml`` -- the ``params`` stage, which ``dvc repro`` and
``dvc exp run`` run before any other, and ``lead params --check`` -- keeps a byte copy of it beside DVC's own
state (``.dvc/tmp/lead/params.yaml``, ignored by git and by DVC); a refusal names what differs from it
(:func:`changes`) and ``lead params --restore`` (:func:`restore`) puts it back.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from lead.config.load import ParamsError, read_yaml

KEPT = Path(".dvc/tmp/lead/params.yaml")


def kept_copy(params_file: Path) -> Path | None:
    """Where the last valid copy of ``params_file`` is kept: in its folder's ``.dvc/tmp``; None outside a DVC
    workspace (no place that git and DVC both ignore) or for a params file other than ``params.yaml``."""
    folder = params_file.resolve().parent
    if params_file.name != "params.yaml" or not (folder / ".dvc").is_dir():
        return None
    return folder / KEPT


def remember(params_file: Path) -> None:
    """Keep ``params_file``'s bytes as the last valid ones (call it only after the file passed the check)."""
    kept = kept_copy(params_file)
    if kept is None:
        return
    kept.parent.mkdir(parents=True, exist_ok=True)
    tmp = kept.with_suffix(".tmp")
    shutil.copyfile(params_file, tmp)
    tmp.replace(kept)


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix.rstrip("."): data} if prefix else {"(top level)": data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changes(params_file: Path) -> list[str] | None:
    """What ``params_file`` changed against its last valid copy, one ``key: was -> now`` each (``added``,
    ``removed``); None when there is no copy. A file that cannot be read as YAML is one line saying so."""
    kept = kept_copy(params_file)
    if kept is None or not kept.is_file():
        return None
    if kept.read_bytes() == params_file.read_bytes():
        return []
    before = _leaves(read_yaml(kept.read_bytes(), str(kept)) or {})
    try:
        after = _leaves(read_yaml(params_file.read_bytes(), str(params_file)) or {})
    except ParamsError:
        return ["the file as a whole (it no longer reads as YAML)"]
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in before:
            lines.append(f"{key}: {after[key]!r} (added)")
        elif key not in after:
            lines.append(f"{key}: {before[key]!r} (removed)")
        elif before[key] != after[key]:
            lines.append(f"{key}: {before[key]!r} -> {after[key]!r}")
    return lines or ["comments or layout only"]


def restore(params_file: Path) -> list[str]:
    """Put the last valid copy back in place of ``params_file`` (atomically); what it changed back."""
    kept = kept_copy(params_file)
    if kept is None or not kept.is_file():
        raise ParamsError(
            f"{params_file}: no valid copy kept to restore (one is kept each time the params stage or "
            "`lead params --check` passes); `git checkout -- params.yaml` restores the committed one"
        )
    undone = changes(params_file) or []
    tmp = params_file.with_name(f".{params_file.name}.restoring")
    shutil.copyfile(kept, tmp)
    tmp.replace(params_file)
    return undone
