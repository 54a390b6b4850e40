"""One training launch over several processes (``accelerate launch``), or one: who decides, who writes.

Under ``accelerate launch`` every process runs the stage; only the main one owns the MLflow run and the files,
and the others must decide exactly as it does (resume, reuse or train afresh) without waiting for ever on a main
process that failed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lead.io.files import atomic_path

T = TypeVar("T")


def distributed_state():
    """accelerate's view of the processes (one, unless launched with `accelerate launch`). Built as the trainer's
    Accelerator builds it (GRPOConfig.use_cpu without CUDA): the first PartialState fixes the shared state, and a
    default one on a machine without CUDA sees a single process in each of a CPU launch's processes, so that every
    one of them would think itself the main one (two MLflow runs, two writers of each file)."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def from_main(state, compute: Callable[[], T]) -> T:
    """``compute()`` run by the main process only, its result (or its error) shared with every process, so
    that all of them decide alike and none waits forever for a main process that failed (hashing a 14B model
    takes a minute; reading a file the main process may be deleting, or restoring a model, is its job)."""
    if state.num_processes == 1:
        return compute()
    from accelerate.utils import broadcast_object_list

    box: list[Any] = [None]
    if state.is_main_process:
        try:
            box = [("ok", compute())]
        except Exception as exc:  # re-raised on every process, after the others have heard of it
            box = [("error", f"{type(exc).__name__}: {exc}")]
            broadcast_object_list(box)
            raise
    broadcast_object_list(box)
    kind, value = box[0]
    if kind == "error":
        raise RuntimeError(f"the main process failed: {value}")
    return value


def save_model(trainer, tokenizer, final: Path, *, lora: bool, state) -> None:
    """Save the trained model to ``final`` (Hugging Face layout), replacing it only once complete. Every
    process takes part (ZeRO-3 gathers the sharded weights); the main one writes and moves it into place."""
    if state.num_processes == 1:
        with atomic_path(final) as tmp:
            _save_to(trainer, tokenizer, tmp, lora)
        return
    saving = final.with_name(f".{final.name}.saving")  # one folder all processes agree on
    if state.is_main_process:
        shutil.rmtree(saving, ignore_errors=True)
    state.wait_for_everyone()
    _save_to(trainer, tokenizer, saving, lora)
    state.wait_for_everyone()
    if state.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(saving, final)
    state.wait_for_everyone()


def _save_to(trainer, tokenizer, folder: Path, lora: bool) -> None:
    if lora:  # adapters merged into the base weights: evaluate, vLLM and the registry get a plain model
        model = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
        if trainer.accelerator.is_main_process:
            model.save_pretrained(str(folder))
    else:
        trainer.save_model(str(folder))  # writes from the main process only
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(folder)
