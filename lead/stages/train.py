"""Stage ``train``: GRPO-LEAD reinforcement learning with ``LEADTrainer`` (TRL's GRPOTrainer underneath).

Inputs: the starting model (``<paths.models>/warmstart``, or ``model.base`` when the warm start is off) and
the training pool — ``<paths.curated>/calibrated.parquet`` (rows with ``keep``) when calibration ran, else
``<paths.curated>/train.parquet``.

Outputs: ``<paths.models>/train`` (final model, Hugging Face layout, for evaluate and register),
``<paths.reports>/train.json`` (summary), per-step metrics in the stage's MLflow run.

Checkpoints go to ``<paths.models>/train_checkpoints`` every ``train.save_steps`` steps. A run that is killed
(even with SIGKILL) and started again resumes from the last complete checkpoint, into the same MLflow run,
losing at most one checkpoint interval. Checkpoints written under other training params are discarded, not
resumed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from lead.config import Params
from lead.io import atomic_path, sha256_text, write_json
from lead.stages._common import stage_main

RUN_FILE = "lead_run.json"  # in the checkpoint folder: the params hash and the MLflow run id


def model_dir(params: Params) -> Path:
    return params.paths.models / "train"


def checkpoint_dir(params: Params) -> Path:
    return params.paths.models / "train_checkpoints"


def start_model(params: Params) -> str:
    """Where RL starts: the warm-started model, or ``model.base`` when the warm start is off."""
    return str(params.paths.models / "warmstart") if params.warmstart.enabled else params.model.base


def training_rows(params: Params) -> list[dict[str, Any]]:
    """The RL pool: calibrated rows marked ``keep`` when calibration ran, else the curated training set."""
    from datasets import Dataset

    calibrated = params.paths.curated / "calibrated.parquet"
    path = calibrated if calibrated.exists() else params.paths.curated / "train.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no training pool; run `lead curate` (and `lead calibrate`) first")
    rows = Dataset.from_parquet(str(path)).to_list()
    if "keep" in (rows[0] if rows else {}):
        rows = [r for r in rows if r["keep"]]
    if not rows:
        raise ValueError(
            f"{path}: no problems left to train on (check calibrate.min_pass_rate/max_pass_rate)"
        )
    suffix = params.model.prompt_suffix
    return [
        {
            "prompt": [{"role": "user", "content": r["problem"] + suffix}],
            "answer": str(r["answer"]),
            "id": r["id"],
        }
        for r in rows
    ]


def params_fingerprint(params: Params) -> str:
    """What a checkpoint must agree with to be resumed: the train section and where training starts."""
    data = {"train": params.train.model_dump(mode="json"), "start": start_model(params)}
    return sha256_text(json.dumps(data, sort_keys=True))


def last_complete_checkpoint(folder: Path) -> Path | None:
    """The newest ``checkpoint-N`` whose trainer state was fully written (a kill mid-save leaves a partial one)."""
    candidates = sorted(
        (p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
        reverse=True,
    )
    for path in candidates:
        try:
            json.loads((path / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue
        if any(path.glob("*.safetensors")) and (path / "optimizer.pt").exists():
            return path
    return None


def grpo_config(params: Params, output_dir: Path):
    """TRL ``GRPOConfig`` from ``params.train`` with the preset applied (fully on-policy, constant lr)."""
    import torch
    from trl import GRPOConfig

    from lead.training.presets import resolve

    t = params.train
    r = resolve(t)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=t.batch_size // world,
        gradient_accumulation_steps=1,
        steps_per_generation=1,  # one optimizer step per rollout batch, as in the paper
        num_iterations=1,
        num_generations=t.num_generations,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        top_p=t.top_p,
        top_k=0,
        learning_rate=r.learning_rate,
        lr_scheduler_type="constant",
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm,
        loss_type=r.loss_type,
        epsilon=t.epsilon,
        epsilon_high=r.epsilon_high,
        beta=t.beta,
        entropy_coef=r.entropy_coef,
        mask_truncated_completions=r.mask_truncated,
        max_steps=t.max_steps,
        save_strategy="steps",
        save_steps=t.save_steps,
        save_total_limit=2,
        logging_steps=t.logging_steps,
        report_to=["mlflow"],
        disable_tqdm=True,
        use_cpu=not cuda,
        bf16=cuda and t.bf16,
        gradient_checkpointing=t.gradient_checkpointing,
        use_vllm=t.use_vllm,
        vllm_mode=t.vllm_mode,
        model_init_kwargs={"trust_remote_code": t.trust_remote_code},
        seed=t.seed,
        data_seed=t.seed,
    )


def run(params: Params) -> dict[str, Any]:
    """Train with GRPO-LEAD from the warm-started model and save the final model to ``<paths.models>/train``."""
    import mlflow
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback

    from lead.progress import RichProgressCallback
    from lead.tracking import stage_run
    from lead.training.presets import resolve
    from lead.training.trainer import LEADTrainer

    started = time.perf_counter()
    rows = training_rows(params)
    ckpt = checkpoint_dir(params)
    run_file = ckpt / RUN_FILE
    fingerprint = params_fingerprint(params)
    previous = json.loads(run_file.read_text()) if run_file.exists() else {}
    if previous.get("fingerprint") != fingerprint:
        shutil.rmtree(ckpt, ignore_errors=True)  # other params: nothing to resume
        previous = {}
    resume = last_complete_checkpoint(ckpt) if previous else None
    with stage_run(params, "train", log_sections=("train",), run_id=previous.get("run_id")) as run:
        ckpt.mkdir(parents=True, exist_ok=True)
        write_json(run_file, {"fingerprint": fingerprint, "run_id": run.info.run_id})
        model_path = start_model(params)
        tokenizer = AutoTokenizer.from_pretrained(
            model_path, trust_remote_code=params.train.trust_remote_code
        )
        trainer = LEADTrainer(
            model=model_path,
            args=grpo_config(params, ckpt),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            lead=resolve(params.train).lead,
            callbacks=[RichProgressCallback("train (GRPO-LEAD)")],
        )
        trainer.remove_callback(PrinterCallback)
        result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        with atomic_path(model_dir(params)) as tmp:
            trainer.save_model(str(tmp))
            tokenizer.save_pretrained(tmp)
        history = [h for h in trainer.state.log_history if "reward" in h]
        summary = {
            "steps": result.global_step,
            "resumed_from": resume.name if resume else None,
            "problems": len(rows),
            "preset": params.train.preset,
            "seconds": round(time.perf_counter() - started, 1),
            "first_reward": history[0]["reward"] if history else None,
            "last_reward": history[-1]["reward"] if history else None,
            "mlflow_run_id": run.info.run_id,
        }
        mlflow.log_metrics({"train_seconds": summary["seconds"]})
    write_json(params.paths.reports / "train.json", summary)
    return summary


def main(argv: list[str] | None = None) -> None:
    stage_main("train", run, argv)


if __name__ == "__main__":
    main()
