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

from lead.config import (
    CurateParams,
    ModelParams,
    PathParams,
    ProxyParams,
    ReportParams,
    TrackingParams,
    WarmstartParams,
)
from lead.dag import manifest_path, output
from lead.io.files import atomic_path, write_json
from lead.io.fingerprint import model_fingerprint, publish, without_run_facts

SKIPPED = "skipped.json"  # the whole content of <paths.models>/warmstart when warmstart.enabled is false


def model_dir(paths: PathParams) -> Path:
    """``<paths.models>/warmstart``: the warm-started model (or, disabled, the note saying so)."""
    return output(paths, "warmstart", "model")


def _conversation(problem: str, solution: str, suffix: str) -> dict[str, list[dict[str, str]]]:
    return {
        "prompt": [{"role": "user", "content": problem + suffix}],
        "completion": [{"role": "assistant", "content": solution}],
    }


def proxy_sft_records(ws: WarmstartParams, proxy: ProxyParams, suffix: str) -> list[dict[str, Any]]:
    """Verbose warm-start traces on freshly drawn *train-split* proxy problems (never the test split), each
    prompt ending in the instruction ``suffix``."""
    from lead.core.proxy import generate_problems, warmstart_traces

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
    return [_conversation(p.question, t, suffix) for p, t in traces][: ws.examples]


def external_sft_records(name: str, suffix: str) -> list[dict[str, Any]]:
    """The SFT set ``warmstart.dataset`` (``name``: a hub id or a local jsonl/json/parquet file) with
    ``prompt``/``completion`` or ``problem``/``solution`` columns (strings), as one-turn conversations whose
    prompts end in ``suffix``."""
    from datasets import load_dataset

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
    return [_conversation(row[prompt_col], row[answer_col], suffix) for row in data]


def base_model_and_tokenizer(model: ModelParams, records: list[dict[str, Any]], seed: int):
    """The model to fine-tune: the tiny one built from scratch (its tokenizer trained on ``records``, its
    weights drawn with ``seed``), or ``model.base`` loaded."""
    from lead.io.tiny_model import build_model, train_tokenizer

    if model.is_tiny:
        corpus = (r["prompt"][0]["content"] + "\n" + r["completion"][0]["content"] for r in records)
        tokenizer = train_tokenizer(corpus, model.tiny.vocab_size)
        return build_model(model.tiny, tokenizer, seed=seed), tokenizer
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.base)
    loaded = AutoModelForCausalLM.from_pretrained(model.base, dtype=getattr(torch, model.dtype))
    return loaded, tokenizer


def sft_config(ws: WarmstartParams, model: ModelParams, output_dir: Path):
    """TRL ``SFTConfig`` from the ``warmstart`` section for ``model``: completion-only loss, no checkpoints, no
    tqdm."""
    import torch
    from trl import SFTConfig

    steps = max(1, round(ws.epochs * ws.examples / ws.batch_size)) if model.is_tiny else -1
    return SFTConfig(
        output_dir=str(output_dir),
        # Each optimizer step's batch is a random draw, on purpose: length-grouped batches pad far less, but the
        # warm start then solves far less of the pool. Within a step, transformers' batch_rebalance sampler splits
        # the random batch into `micro_batches` forward passes of similar lengths (less padding, faster steps),
        # and the trainer sums their gradients normalised by the whole batch's token count (num_items_in_batch):
        # the gradient of the batch. The figures: bench/RESULTS.md (bench/warmstart.py, and "Measurements behind
        # settings"). That sampler shuffles with its own fixed seed, not data_seed: the batches' order is the
        # same for every warmstart.seed (traces differ).
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
        # TRL tokenizes the traces one chat template at a time; a process per thread the stage may use shares
        # that work out, with the same tokens (bench/RESULTS.md).
        dataset_num_proc=max(1, torch.get_num_threads()),
        # TRL turns gradient checkpointing on by default: pure overhead for small models on CPU.
        gradient_checkpointing=not model.is_tiny,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available() and model.dtype == "bfloat16",
        save_strategy="no",
        report_to=["mlflow"],  # the loss curve, into the stage's MLflow run
        logging_steps=25,
        disable_tqdm=True,
        seed=ws.seed,
        data_seed=ws.seed,
    )


def warm_start(
    ws: WarmstartParams, model: ModelParams, proxy: ProxyParams, paths: PathParams, tracking: TrackingParams
) -> dict[str, Any]:
    """Fine-tune ``model`` on the warm-start traces of ``ws`` (drawn from the ``proxy`` task, or
    ``warmstart.dataset``), save it to ``<paths.models>/warmstart`` and publish it, in an MLflow run of
    ``tracking``."""
    import mlflow
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTTrainer

    from lead.io.tracking import mark_run, stage_run
    from lead.training.callbacks import RichProgressCallback

    out = model_dir(paths)
    summary_path = output(paths, "warmstart", "summary")
    manifest = manifest_path(paths, "warmstart")
    if not ws.enabled:
        summary = {"enabled": False, "model": model.base}
        # The folder still exists, holding only this note, so that DVC's declared output is there and the
        # DAG stays the same whether or not the warm start runs.
        with atomic_path(out) as tmp:
            tmp.mkdir()
            write_json(tmp / SKIPPED, summary)
        write_json(summary_path, summary)
        publish(manifest, "warmstart", [summary_path], model=None)
        return summary
    started = time.perf_counter()
    torch.manual_seed(ws.seed)
    is_proxy = ws.dataset == "proxy"
    if is_proxy and not model.is_tiny:
        raise ValueError(
            "warmstart.dataset = 'proxy' needs model.base = 'tiny' (the proxy tokenizer is built for it)"
        )
    suffix = model.prompt_suffix
    records = proxy_sft_records(ws, proxy, suffix) if is_proxy else external_sft_records(ws.dataset, suffix)
    base, tokenizer = base_model_and_tokenizer(model, records, ws.seed)
    # An MLflow run like every other stage's (tag stage=warmstart): the SFT's params, loss curve and summary.
    with (
        stage_run(tracking, "warmstart", logged={"warmstart": ws.as_written()}) as mlflow_run,
        atomic_path(out) as tmp,
    ):
        trainer = SFTTrainer(
            model=base,
            args=sft_config(ws, model, tmp / "_trainer"),
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
        summary = _summary(model.base, records, result, trainer, started)
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


def _summary(base: str, records, result, trainer, started: float) -> dict[str, Any]:
    return {
        "enabled": True,
        "base": base,
        "examples": len(records),
        "steps": result.global_step,
        "train_loss": result.training_loss,
        "final_loss": next(
            (h["loss"] for h in reversed(trainer.state.log_history) if "loss" in h), result.training_loss
        ),
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "seconds": round(time.perf_counter() - started, 1),
    }


def report(
    cfg: ReportParams, curate: CurateParams, paths: PathParams, suffix: str, backend: str = "auto"
) -> list[Any]:
    """Sample the warm-started model (``warmstart.report`` settings ``cfg``) on the proxy training problems of
    ``curate``, prompts ending in ``suffix``; per-level pass rates and lengths."""
    from lead.core.difficulty import summarize_by_level
    from lead.grading import grade_batch
    from lead.io.progress import progress_bar
    from lead.io.sampling import SamplingSpec, make_sampler, user_message
    from lead.io.sources import proxy_problems

    problems = proxy_problems(curate, "train")
    chosen: dict[int, list] = {}
    for p in problems:  # the first problems_per_level of each level, in curate's order
        if len(chosen.setdefault(p.level, [])) < cfg.problems_per_level:
            chosen[p.level].append(p)
    picked = [p for level in sorted(chosen) for p in chosen[level]]
    sampler = make_sampler(model_dir(paths), backend)
    messages = [user_message(p.question, suffix) for p in picked]
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
