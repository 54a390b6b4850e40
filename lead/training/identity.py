"""A training run's identity, and what it decides: resume a killed run, reuse a finished one, or train afresh.

**Same run** means the same :func:`run_identity`: the train settings, the start model's *content*, the training
and dev rows, the training code and the libraries' versions. Checkpoints live in the run's resume folder
(``<paths.resume>/<stage>``) with :data:`RUN_FILE` (identity, MLflow run id, state); a finished run also keeps a
hard-linked copy of its model there (:data:`FINAL_COPY`), so that a rerun finds it after DVC removed the output.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

from lead.config import TrainParams
from lead.io.files import atomic_path, link_tree
from lead.io.fingerprint import code_fingerprint, model_fingerprint, rows_fingerprint, value_fingerprint

RUN_FILE = "lead_run.json"  # in the checkpoint folder: the run's identity, MLflow run id and state
FINAL_COPY = "final"  # in the checkpoint folder: the finished run's model (hard links to the output's files)

# The code that decides what training computes: the rewards, advantages, dynamic sampling's decisions and the
# grader, the model's context (sampling), the training library (the TRL seam, GRPOConfig's table); and the
# libraries that run it.
TRAINING_CODE = (
    "lead.core.rewards",
    "lead.core.advantages",
    "lead.core.dynamic_sampling",
    "lead.grading",
    "lead.io.sampling",
    "lead.training",
)
TRAINING_LIBRARIES = ("torch", "transformers", "trl", "accelerate", "peft", "math-verify")


def library_versions(names: tuple[str, ...] = TRAINING_LIBRARIES) -> dict[str, str]:
    """``name: version`` as installed here (a new TRL is another trainer)."""
    return {name: importlib.metadata.version(name) for name in names}


def run_identity(
    train: TrainParams,
    max_prompt_tokens: int,
    start_fingerprint: str,
    rows: list[dict[str, Any]],
    dev: list[dict[str, Any]],
) -> str:
    """What a training result depends on, by content: the train section (without ``train.stage2``, which is the
    next DVC stage's), the start model's :func:`~lead.io.fingerprint.model_fingerprint`, the training and dev
    rows, the prompt bound that sizes vLLM's context (``max_prompt_tokens``), the training code
    (:data:`TRAINING_CODE`: a fixed reward is another result) and the versions of the libraries that train
    (:func:`library_versions`). Checkpoints are resumed, and a finished run reused, only when this matches;
    where the start model or rows live plays no part."""
    return value_fingerprint(
        {
            "train": train.model_dump(mode="json", exclude={"stage2"}),
            "start": start_fingerprint,
            "rows": rows_fingerprint(rows),
            "dev": rows_fingerprint(dev),
            "max_prompt_tokens": max_prompt_tokens,
            "code": code_fingerprint(TRAINING_CODE),
            "libraries": library_versions(),
        }
    )


def read_run_file(ckpt: Path) -> dict[str, Any]:
    """The run recorded in the checkpoint folder ``ckpt`` (empty: none)."""
    path = ckpt / RUN_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def restore_finished(previous: dict[str, Any], final: Path, ckpt: Path) -> bool:
    """Whether a finished run's model is in ``final``, restored from the copy kept in ``ckpt`` when it is
    missing or differs (DVC removed it before rerunning the stage). False when neither holds the recorded
    content: train afresh. Hashes ``final`` at most twice, the copy never (``final`` is checked after)."""
    if final.is_dir() and model_fingerprint(final) == previous["model"]:
        return True
    kept = ckpt / FINAL_COPY
    if not kept.is_dir():
        return False
    with atomic_path(final) as tmp:
        link_tree(kept, tmp)
    return model_fingerprint(final) == previous["model"]


def keep_final_copy(final: Path, ckpt: Path) -> None:
    """A copy of the result beside the checkpoints (hard links: no extra space), so that a rerun of a finished
    training finds its model even after DVC removed the stage's output first."""
    with atomic_path(ckpt / FINAL_COPY) as tmp:
        link_tree(final, tmp)
