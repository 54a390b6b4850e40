"""Training checkpoints a run can resume from: each save is sealed with the sizes of its files, written last.

A kill during a save (SIGKILL, the OOM killer, a pod evicted) or a full disk leaves a checkpoint folder whose
files exist but are cut short; resuming from it fails deep inside safetensors or torch with no path named.
:class:`SealCheckpoints` writes ``lead_files.json`` (every file of the checkpoint and its size in bytes) after
the trainer has written everything else, and :func:`last_complete_checkpoint` resumes only from a checkpoint
whose files are all there at their recorded sizes, falling back to the previous one and saying so. Sizes, not
hashes: a cut-short file is what a kill or a full disk leaves, and hashing a 14B model's weights and optimizer
state at every save would cost minutes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

SEAL = "lead_files.json"


def seal(folder: Path) -> None:
    """Write ``folder``'s :data:`SEAL`: every other file under it (relative path) and its size."""
    files = {
        str(p.relative_to(folder)): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != SEAL
    }
    tmp = folder / f".{SEAL}.tmp"
    tmp.write_text(json.dumps(files, indent=1, sort_keys=True))
    tmp.replace(folder / SEAL)


def damage(folder: Path) -> str | None:
    """Why the checkpoint in ``folder`` cannot be resumed from (no seal, a file missing or of another size than
    sealed), or None when it is complete."""
    try:
        files = json.loads((folder / SEAL).read_text())
    except (OSError, ValueError):
        return "never sealed (the save did not finish)"
    for name, size in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, {size} were saved"
    return None


def last_complete_checkpoint(folder: Path, say: Callable[[str], Any] = print) -> Path | None:
    """The newest ``checkpoint-N`` under ``folder`` that is complete (:func:`damage`); each newer one that is not
    is named with the reason (through ``say``) and skipped."""
    candidates = sorted(
        (p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
        reverse=True,
    )
    for path in candidates:
        why = damage(path)
        if why is None:
            return path
        say(f"skipping {path}: {why}; resuming from an earlier checkpoint if there is one")
    return None


class SealCheckpoints(TrainerCallback):
    """Seal every checkpoint once the trainer has saved it: every process waits until all have written their
    parts (sharded weights and optimizer states under DeepSpeed), then the main one seals."""

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            seal(folder)
