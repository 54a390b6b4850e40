"""Benchmark: the warm start's optimizer step (TRL's SFTTrainer on the embedded default), setting against setting.

The warm start is the largest stage of the first ``dvc repro`` (~40 %). It trains on whole random batches of
``warmstart.batch_size`` traces whose lengths vary (the batches stay random: ``lead/training/warmstart.py`` says
why), each split into ``warmstart.micro_batches`` forward passes of similar lengths. This measures what a step
costs per setting: ``micro_batches`` 1 / 2 / 4 — less padding against more passes — and bfloat16 autocast
at the default's (``bf16``; the CPU's bf16 matrix units, where it has them). Each setting trains ``STEPS`` steps
of the default's traces from the same initial model, twice, the settings in A B C D D C B A order so that a change in
machine load hits all alike; the figure is the median step after ``SKIP`` warm-up steps. Padding is measured on
the trainer's own dataloader (padded ÷ real tokens over ``PADDING_BATCHES`` batches).

Run: ``python -m bench warmstart`` (about 5 minutes on 2 cores; needs nothing built).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench import Result, table

STEPS = 25
SKIP = 5
PADDING_BATCHES = 40


def _settings(default: int) -> dict[str, tuple[int, bool]]:
    """name: (micro_batches, bf16); ``default`` = params.yaml's micro_batches."""
    named = {f"micro_batches {n}" + (" (default)" if n == default else ""): (n, False) for n in (1, 2, 4)}
    return {**named, f"micro_batches {default}, bf16 autocast": (default, True)}


def _trainer(params, records, micro_batches: int, bf16: bool, scratch: Path):
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTTrainer

    from bench.trainer import _StepTimer
    from lead.training.warmstart import base_model_and_tokenizer, sft_config

    params = params.model_copy(deep=True)
    params.warmstart.micro_batches = micro_batches
    torch.manual_seed(params.warmstart.seed)
    model, tokenizer = base_model_and_tokenizer(params.model, records, params.warmstart.seed)
    args = sft_config(params.warmstart, params.model, scratch)
    args.max_steps, args.report_to, args.bf16, args.logging_steps = STEPS, [], bf16, STEPS
    timer = _StepTimer()
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(records),
        processing_class=tokenizer,
        callbacks=[timer.callback],
    )
    trainer.remove_callback(PrinterCallback)
    return trainer, timer.times


def _padding(trainer) -> float:
    real = padded = 0
    for i, batch in enumerate(trainer.get_train_dataloader()):
        if i == PADDING_BATCHES:
            break
        mask = batch["attention_mask"]
        real, padded = real + int(mask.sum()), padded + mask.numel()
    return padded / real


def run() -> Result:
    from lead.config import load_params
    from lead.training.warmstart import proxy_sft_records

    params = load_params()
    records = proxy_sft_records(params.warmstart, params.curate.proxy, params.model.prompt_suffix)
    settings = _settings(params.warmstart.micro_batches)
    steps: dict[str, list[float]] = {name: [] for name in settings}
    padding: dict[str, float] = {}
    order = [*settings, *reversed(settings)]
    with tempfile.TemporaryDirectory() as scratch:
        for name in order:
            micro_batches, bf16 = settings[name]
            trainer, times = _trainer(params, records, micro_batches, bf16, Path(scratch) / "out")
            padding.setdefault(name, _padding(trainer))
            trainer.train()
            steps[name] += times[SKIP:]
    median = {name: statistics.median(t) for name, t in steps.items()}
    default = median[f"micro_batches {params.warmstart.micro_batches} (default)"]
    rows = [
        [name, f"{padding[name]:.2f}", f"{median[name]:.3f}", f"{median[name] / default:.2f}"]
        for name in settings
    ]
    best = min(median, key=median.get)
    ws = params.warmstart
    full = round(ws.epochs * ws.examples / ws.batch_size)
    body = table(["setting", "padded ÷ real tokens", "median s/step", "÷ default"], rows)
    body += [
        "",
        f"Batch {ws.batch_size} traces, {STEPS} steps x 2 per setting ({SKIP} warm-up steps dropped each time). "
        f"The default's {full} steps at the default's step time: {full * default:.0f} s of optimizer steps "
        f"(the stage adds drawing the traces, the tokenizer, saving and MLflow).",
    ]
    return Result(
        name="warmstart",
        title="The warm start's optimizer step per setting",
        ratio=median[best] / default,
        ratio_label=f"fastest setting ({best}) ÷ default, median s/step",
        goal="none (where the warm start's time goes; < 1 would be a setting to adopt)",
        met=None,
        body=body,
    )
