"""The warm start: supervised fine-tuning (TRL ``SFTTrainer``) of the base model before RL.

The library of the ``warmstart`` stage (:mod:`lead.stages.warmstart`): :func:`warm_start` trains and publishes,
:func:`report` samples the result by level (``lead warmstart --report``).

One code path for both uses:

* embedded default (``model.base: tiny``): draw ``warmstart.examples`` verbose proxy traces (train split
  only), train a BPE tokenizer on them, build the tiny Qwen2 from ``model.tiny``, fine-tune it;
* real scale (``model.base: <hub id or path>``, ``warmstart.dataset: <hub id or jsonl/parquet path>``):
  load that model and fine-tune it on that set (e.g. the paper's QwQ-32B solutions).

Output: ``<paths.models>/warmstart`` (safetensors + tokenizer, Hugging Face layout) and
``<paths.reports>/warmstart.json`` (time, steps, loss). ``warmstart.enabled: false`` trains nothing and
points later stages at ``model.base`` (for a model that needs no SFT); the output folder then holds only
``skipped.json`` saying so.

``lead warmstart --report`` samples the saved model on the proxy training problems and prints the pass
rate by difficulty level, the share of problems with reward spread, and how much lengths vary.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from lead.config import Params
from lead.dag import manifest_path, output
from lead.io.files import atomic_path, write_json
from lead.io.fingerprint import model_fingerprint, publish, without_run_facts

SKIPPED = "skipped.json"  # the whole content of <paths.models>/warmstart when warmstart.enabled is false


def model_dir(params: Params) -> Path:
    """``<paths.models>/warmstart``: the warm-started model (or, disabled, the note saying so)."""
    return output(params.paths, "warmstart", "model")


def _conversation(problem: str, solution: str, suffix: str) -> dict[str, list[dict[str, str]]]:
    return {
        "prompt": [{"role": "user", "content": problem + suffix}],
        "completion": [{"role": "assistant", "content": solution}],
    }


def proxy_sft_records(params: Params) -> list[dict[str, Any]]:
    """Verbose warm-start traces on freshly drawn *train-split* proxy problems (never the test split)."""
    from lead.core.proxy import generate_problems, warmstart_traces

    ws, proxy = params.warmstart, params.curate.proxy
    problems = generate_problems(
        (ws.examples + 1) // 2,
        split="train",
        seed=ws.seed,
        min_ops=proxy.min_ops,
        max_ops=proxy.max_ops,
        max_value=proxy.max_value,
        distinct=False,
    )
    traces = warmstart_traces(problems, per_problem=2, seed=ws.seed, verbosity=ws.verbosity.to_verbosity())
    return [_conversation(p.question, t, params.model.prompt_suffix) for p, t in traces][: ws.examples]


def external_sft_records(params: Params) -> list[dict[str, Any]]:
    """An SFT set from the hub or a local jsonl/json/parquet file: ``prompt``/``completion`` or
    ``problem``/``solution`` columns (strings), turned into one-turn conversations."""
    from datasets import load_dataset

    name = params.warmstart.dataset
    path = Path(name)
    if path.suffix in {".jsonl", ".json", ".parquet"}:
        if not path.exists():
            raise FileNotFoundError(f"warmstart.dataset = {name!r}: no such file")
        kind = "parquet" if path.suffix == ".parquet" else "json"
        data = load_dataset(kind, data_files=str(path), split="train")
    else:
        data = load_dataset(name, split="train")
    columns = set(data.column_names)
    for prompt_col, answer_col in (("prompt", "completion"), ("problem", "solution")):
        if {prompt_col, answer_col} <= columns:
            break
    else:
        raise ValueError(
            f"warmstart.dataset = {name!r}: needs columns prompt/completion or problem/solution; has {sorted(columns)}"
        )
    suffix = params.model.prompt_suffix
    return [_conversation(row[prompt_col], row[answer_col], suffix) for row in data]


def base_model_and_tokenizer(params: Params, records: list[dict[str, Any]]):
    """The model to fine-tune: the tiny one built from scratch, or ``model.base`` loaded."""
    from lead.io.tiny_model import build_model, train_tokenizer

    if params.model.is_tiny:
        corpus = (r["prompt"][0]["content"] + "\n" + r["completion"][0]["content"] for r in records)
        tokenizer = train_tokenizer(corpus, params.model.tiny.vocab_size)
        return build_model(params.model.tiny, tokenizer, seed=params.warmstart.seed), tokenizer
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(params.model.base)
    model = AutoModelForCausalLM.from_pretrained(params.model.base, dtype=getattr(torch, params.model.dtype))
    return model, tokenizer


def sft_config(params: Params, output_dir: Path):
    """TRL ``SFTConfig`` from ``params.warmstart``: completion-only loss, no checkpoints, no tqdm."""
    import torch
    from trl import SFTConfig

    ws = params.warmstart
    steps = max(1, round(ws.epochs * ws.examples / ws.batch_size)) if params.model.is_tiny else -1
    return SFTConfig(
        output_dir=str(output_dir),
        # Each optimizer step's batch is a random draw, on purpose: length-grouped batches (transformers'
        # group_by_length, or buckets in random order, with or without token-weighted loss) pad 1.02x instead of
        # 1.8x, but the warm start then solves far less of the pool (calibrate's mean pass rate 0.03-0.10
        # against 0.21). Within a step, transformers' batch_rebalance sampler splits the random batch into
        # `micro_batches` forward passes of similar lengths (padded tokens 1.78x the real ones, 1.33x with 2, 1.15x
        # with 4), and the trainer sums their gradients normalised by the whole batch's token count
        # (num_items_in_batch): the gradient of the batch, a step in 0.75-0.80x (2) and 0.60-0.67x (4) the time of one
        # pass (bench/warmstart.py). That sampler shuffles with its
        # own fixed seed, not data_seed: the batches' order is the same for every warmstart.seed (traces differ).
        train_sampling_strategy="batch_rebalance",
        per_device_train_batch_size=ws.batch_size // ws.micro_batches,
        gradient_accumulation_steps=ws.micro_batches,
        learning_rate=ws.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=ws.warmup_ratio,  # a float < 1 is a ratio of the total steps
        weight_decay=ws.weight_decay,
        adam_beta2=0.98,  # faster-adapting second moment: the tiny model's loss falls fast early
        num_train_epochs=ws.epochs,
        max_steps=steps,
        max_length=ws.max_length,
        completion_only_loss=True,
        # TRL tokenizes the 19,200 traces one chat template at a time (13 s on one core); a process per thread
        # the stage may use halves that on 2 cores, with the same tokens.
        dataset_num_proc=max(1, torch.get_num_threads()),
        # TRL turns gradient checkpointing on by default: pure overhead for small models on CPU.
        gradient_checkpointing=not params.model.is_tiny,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available() and params.model.dtype == "bfloat16",
        save_strategy="no",
        report_to=["mlflow"],  # the loss curve, into the stage's MLflow run
        logging_steps=25,
        disable_tqdm=True,
        seed=ws.seed,
        data_seed=ws.seed,
    )


def warm_start(params: Params) -> dict[str, Any]:
    """Fine-tune the base model on warm-start traces, save it to ``<paths.models>/warmstart``, publish it."""
    import mlflow
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTTrainer

    from lead.io.tracking import mark_run, stage_run
    from lead.training.callbacks import RichProgressCallback

    out = model_dir(params)
    summary_path = output(params.paths, "warmstart", "summary")
    manifest = manifest_path(params.paths, "warmstart")
    if not params.warmstart.enabled:
        summary = {"enabled": False, "model": params.model.base}
        # The folder still exists, holding only this note, so that DVC's declared output is there and the
        # DAG stays the same whether or not the warm start runs.
        with atomic_path(out) as tmp:
            tmp.mkdir()
            write_json(tmp / SKIPPED, summary)
        write_json(summary_path, summary)
        publish(manifest, "warmstart", [summary_path], model=None)
        return summary
    started = time.perf_counter()
    torch.manual_seed(params.warmstart.seed)
    is_proxy = params.warmstart.dataset == "proxy"
    if is_proxy and not params.model.is_tiny:
        raise ValueError(
            "warmstart.dataset = 'proxy' needs model.base = 'tiny' (the proxy tokenizer is built for it)"
        )
    records = proxy_sft_records(params) if is_proxy else external_sft_records(params)
    model, tokenizer = base_model_and_tokenizer(params, records)
    # An MLflow run like every other stage's (tag stage=warmstart): the SFT's params, loss curve and summary.
    with (
        stage_run(params.tracking, "warmstart", logged=params.sections("warmstart")) as mlflow_run,
        atomic_path(out) as tmp,
    ):
        trainer = SFTTrainer(
            model=model,
            args=sft_config(params, tmp / "_trainer"),
            train_dataset=Dataset.from_list(records),
            processing_class=tokenizer,
            callbacks=[RichProgressCallback("warmstart (SFT)")],
        )
        # Our rich bar replaces the trainer's per-log print of the metrics dict.
        trainer.remove_callback(PrinterCallback)
        result = trainer.train()
        trainer.model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(tmp / "_trainer", ignore_errors=True)  # the trainer's scratch folder is not the model
        summary = _summary(params, records, result, trainer, model, started)
        mlflow.log_metrics({k: v for k, v in summary.items() if k in METRICS})
    summary = {**summary, "model": model_fingerprint(out), "mlflow_run_id": mlflow_run.info.run_id}
    write_json(summary_path, without_run_facts(summary))
    publish(
        manifest,
        "warmstart",
        [summary_path],
        before_writing=mark_run(mlflow_run.info.run_id),
        model=summary["model"],
    )
    return summary


METRICS = ("examples", "steps", "train_loss", "final_loss", "parameters", "seconds")


def _summary(params: Params, records, result, trainer, model, started: float) -> dict[str, Any]:
    return {
        "enabled": True,
        "base": params.model.base,
        "examples": len(records),
        "steps": result.global_step,
        "train_loss": result.training_loss,
        "final_loss": next(
            (h["loss"] for h in reversed(trainer.state.log_history) if "loss" in h), result.training_loss
        ),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.perf_counter() - started, 1),
    }


def report(params: Params, backend: str = "auto") -> list[Any]:
    """Sample the warm-started model on the proxy training problems; per-level pass rates and lengths."""
    from lead.core.difficulty import summarize_by_level
    from lead.grading import grade_batch
    from lead.io.progress import progress_bar
    from lead.io.sampling import SamplingSpec, make_sampler, user_message
    from lead.io.sources import proxy_problems

    cfg = params.warmstart.report
    problems = proxy_problems(params.curate, "train")
    chosen: dict[int, list] = {}
    for p in problems:  # the first problems_per_level of each level, in curate's order
        if len(chosen.setdefault(p.level, [])) < cfg.problems_per_level:
            chosen[p.level].append(p)
    picked = [p for level in sorted(chosen) for p in chosen[level]]
    sampler = make_sampler(model_dir(params), backend)
    messages = [user_message(p.question, params.model.prompt_suffix) for p in picked]
    spec = SamplingSpec(
        n=cfg.samples, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed
    )
    with progress_bar("report: sampling", len(messages)) as advance:
        groups = sampler.sample(messages, spec, progress=advance)
    sampler.close()
    flat = [c.text for g in groups for c in g]
    golds = [str(p.answer) for p in picked for _ in range(cfg.samples)]
    verdicts = grade_batch(flat, golds)
    correct = [verdicts[i * cfg.samples : (i + 1) * cfg.samples] for i in range(len(picked))]
    lengths = [[c.num_tokens for c in g] for g in groups]
    return summarize_by_level([p.level for p in picked], correct, lengths)
