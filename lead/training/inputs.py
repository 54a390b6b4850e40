"""What RL trains from and on: the start model and the pool of prompts, each checked against what its stage
published (never a file of an unfinished run, never pass rates measured on another model)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lead.config import ModelParams, PathParams
from lead.dag import StageError, manifest_path, output
from lead.io.fingerprint import StaleOutputError, verify
from lead.io.summaries import empty_pool_message


@dataclass(frozen=True)
class Inputs:
    """Where RL finds its start model and its pool: the paths, the model section (``model.base``, the prompt
    suffix) and whether the warm start ran (``warmstart.enabled``; else RL starts from ``model.base``)."""

    paths: PathParams
    model: ModelParams
    warm_start: bool


def start_model(inputs: Inputs) -> str:
    """Where RL starts: the warm-started model, or ``model.base`` when the warm start is off."""
    return str(output(inputs.paths, "warmstart", "model")) if inputs.warm_start else inputs.model.base


def pool_source(paths: PathParams) -> tuple[str, Path]:
    """(stage, file) of the RL pool: calibrate's ``calibrated.parquet`` when calibration ran, else curate's
    ``train.parquet``."""
    calibrated = output(paths, "calibrate", "pool")
    if calibrated.exists():
        return "calibrate", calibrated
    return "curate", output(paths, "curate", "train")


def training_rows(inputs: Inputs, start_fingerprint: str | None = None) -> list[dict[str, Any]]:
    """The RL pool: calibrated rows marked ``keep`` when calibration ran, else the curated training set,
    checked against the manifest its stage published (never a file of an unfinished run) and, given the
    start model's fingerprint, refused when calibration measured another model (a newer warm start). An
    empty pool is a :class:`~lead.dag.StageError` saying why and which knob to change."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    paths = inputs.paths
    stage, path = pool_source(paths)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no training pool; run `lead curate` (and `lead calibrate`) first")
    published = verify(manifest_path(paths, stage), stage, [path])
    measured = published.get("model")
    if start_fingerprint and stage == "calibrate" and measured != start_fingerprint:
        raise StaleOutputError(
            f"{path}: pass rates of another model ({measured}) than the one training starts from "
            f"({start_fingerprint}): run the calibrate stage again"
        )
    # datasets cannot read a parquet file without rows (curate writes one when nothing passes its filters).
    pool = Dataset.from_parquet(str(path)).to_list() if pq.read_metadata(path).num_rows else []
    rows = [r for r in pool if r["keep"]] if "keep" in (pool[0] if pool else {}) else pool
    if not rows:
        if stage == "curate":
            raise StageError(
                f"{path}: the curated pool is empty, nothing to train on; check curate.sources and the "
                f"curation report ({paths.reports / 'curate'})"
            )
        # calibrate now stops before publishing an empty pool; this one was published without that check.
        samples = pool[0]["k"] if pool else 0
        why = empty_pool_message(
            [r["n_correct"] for r in pool],
            samples,
            reports=paths.reports,
            base=None if inputs.warm_start else inputs.model.base,
        )
        raise StageError(f"{path}: nothing to train on: {why}; then run the calibrate stage again")
    return as_prompts(rows, inputs.model.prompt_suffix)


def as_prompts(rows: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """Pool rows as TRL dataset rows: one user turn (problem + instruction suffix), the gold answer, the id."""
    return [
        {
            "prompt": [{"role": "user", "content": r["problem"] + suffix}],
            "answer": str(r["answer"]),
            "id": r["id"],
        }
        for r in rows
    ]
