"""Curation's I/O: the problems the pipeline calibrates, trains and evaluates on (the ``curate`` stage).

The pure steps are :mod:`lead.core.curation`; this package reads the sources, writes the outputs and logs the
run. :func:`curate`

Reads every entry of ``curate.sources`` (the embedded default: the proxy task alone; ``recipes/curate-real.yaml``
lists the shipped real sets), runs the curation pass of :mod:`lead.core.curation` (answer normalisation, gradable
golds, prompt length, exact and near duplicates, decontamination, mixing) and writes, under
``<paths.curated>``:

* ``train.parquet`` — the RL training pool; ``test.parquet`` — held-out problems (the proxy test split,
  evaluated as the ``proxy`` benchmark). Columns ``id, problem, answer, source, split, level``, plus
  ``difficulty``, ``correctness`` (the stage-2/3 set's 16-sample pass rate) and ``solution`` — nullable, and
  present only when a source provides them;
* ``quarantine.jsonl`` — every row left out as bad or redundant, one JSON object per line with its
  ``reason`` (:data:`lead.core.curation.REASONS`), ``source``, ``origin`` (file:line), ``detail`` and the row;
* ``curation.json`` — the counts (DVC metrics);
* ``curate.manifest.json`` — written last: the content fingerprint of every output of this run; the stages
  that read them refuse files it does not name (a run killed half-way);

and ``<paths.reports>/curate/report.{json,md}``: counts in and out of every step, per source, contamination
hits per benchmark, timing. All of it is logged to MLflow (run ``curate``).

Decontamination checks the training pool against every real benchmark of ``evaluate.benchmarks``, and
against all of aime24, aime25, amc23 and math500 whenever a source other than the proxy is used. The proxy's
train and test splits are disjoint by construction (and exact duplicates across splits are removed from
train).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lead.config import CurateParams, ModelParams, PathParams, TrackingParams
from lead.core import curation
from lead.dag import manifest_path
from lead.io.files import atomic_path, write_json, write_text
from lead.io.fingerprint import publish, without_run_facts
from lead.io.sources import REAL_BENCHMARKS, load_benchmark, proxy_problems, proxy_records, read_rows
from lead.reports.curation import render_markdown

PROXY = "proxy"
# Output columns: always the first six (downstream stages read them), the optional ones only when filled.
COLUMNS = ("id", "problem", "answer", "source", "split", "level")
OPTIONAL_COLUMNS = ("difficulty", "correctness", "solution")


def source_inputs(cfg: CurateParams, raw: Path) -> list[curation.SourceInput]:
    """The rows of every ``curate.sources`` entry (local files under ``raw``, ``paths.raw``), in order."""
    out = []
    for spec in cfg.sources:
        if spec.path == PROXY:
            rows = [
                (f"proxy:{split}#{i}", row)
                for split in ("train", "test")
                for i, row in enumerate(proxy_records(proxy_problems(cfg, split)))
            ]
            location = "generated (curate.proxy)"
        else:
            location, rows = read_rows(spec.path, raw, split=spec.split, config=spec.config)
        out.append(curation.SourceInput(spec.name, rows, location, spec.weight, spec.max_problems))
    return out


def benchmark_names(cfg: CurateParams, evaluated: list[str]) -> list[str]:
    """Benchmarks to decontaminate against: the real ones of ``evaluated`` (``evaluate.benchmarks``), plus all
    real ones when a source is real."""
    names = [b for b in evaluated if b != PROXY]
    if any(spec.path != PROXY for spec in cfg.sources):
        names += REAL_BENCHMARKS
    return sorted(set(names))


def prompt_token_counter(model: ModelParams) -> tuple[Callable[[list[str]], list[int]] | None, str]:
    """Count prompt tokens with ``model.base``'s tokenizer (chat template applied) when it loads offline;
    the tiny model's tokenizer is trained later (warmstart), so it gets the estimate, as does a hub model
    that is not cached. Returns (counter or None for the estimate, how it counts)."""
    estimate = f"estimate ceil(chars / {curation.CHARS_PER_TOKEN})"
    if model.is_tiny:
        return None, estimate + " (model.base is tiny: its tokenizer is built by warmstart)"
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model.base)
    except Exception as exc:  # offline and not cached, no tokenizer files, ...
        return None, f"{estimate} (tokenizer of {model.base} unavailable: {type(exc).__name__})"
    if not tokenizer.chat_template:
        return (lambda texts: [len(ids) for ids in tokenizer(texts)["input_ids"]]), f"tokenizer {model.base}"

    def count(texts: list[str]) -> list[int]:
        conversations = [[{"role": "user", "content": t}] for t in texts]
        out = tokenizer.apply_chat_template(conversations, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [len(x) for x in ids]

    return count, f"tokenizer {model.base} with its chat template"


def settings(cfg: CurateParams, prompt_suffix: str) -> curation.Settings:
    """The pure curation's settings from the ``curate`` section and the prompt's instruction suffix."""
    return curation.Settings(
        max_prompt_tokens=cfg.max_prompt_tokens,
        prompt_suffix=prompt_suffix,
        near_duplicate_jaccard=cfg.near_duplicate_jaccard,
        decontam_ngram=cfg.decontam_ngram,
        decontam_coverage=cfg.decontam_coverage,
        decontam_coverage_any_answer=cfg.decontam_coverage_any_answer,
        max_train_problems=cfg.max_train_problems,
        seed=cfg.seed,
    )


def _write_parquet(path, records: list[curation.Record], optional: list[str]) -> None:
    from datasets import Dataset, Features, Value

    types = {"level": Value("int64"), "difficulty": Value("float64"), "correctness": Value("float64")}
    columns = [*COLUMNS, *optional]
    features = Features({c: types.get(c, Value("string")) for c in columns})
    rows = [r.row() for r in records]
    data = {c: [row[c] for row in rows] for c in columns}  # columnar, so that an empty split keeps its schema
    with atomic_path(path) as tmp:
        Dataset.from_dict(data, features=features).to_parquet(str(tmp))


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as their text ("nan", "inf"): JSON has no NaN, and a quarantined row
    must stay readable by any JSON reader.

    >>> json.dumps(_json_safe({"answer": float("nan"), "level": [1.0, float("inf")]}), allow_nan=False)
    '{"answer": "nan", "level": [1.0, "inf"]}'
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def curate(
    cfg: CurateParams, model: ModelParams, evaluated: list[str], paths: PathParams, tracking: TrackingParams
) -> dict[str, Any]:
    """Curate the training pool and test split of ``cfg`` for ``model`` (its tokenizer counts prompt tokens),
    decontaminated against ``evaluated`` (:func:`benchmark_names`); write them, the quarantine and the report
    under ``paths``, in an MLflow run of ``tracking``; the summary (``curation.json``)."""
    import mlflow

    from lead.io.tracking import flatten, stage_run

    started = time.perf_counter()
    manifest = manifest_path(paths, "curate")
    with stage_run(tracking, "curate", logged={"curate": cfg.as_written()}):
        inputs = source_inputs(cfg, paths.raw)
        benchmarks = {name: load_benchmark(name, paths.raw) for name in benchmark_names(cfg, evaluated)}
        counter, method = prompt_token_counter(model)
        result = curation.curate(inputs, benchmarks, settings(cfg, model.prompt_suffix), counter, method)

        root = paths.curated
        optional = [
            c for c in OPTIONAL_COLUMNS if any(getattr(r, c) is not None for r in result.train + result.test)
        ]
        _write_parquet(root / "train.parquet", result.train, optional)
        _write_parquet(root / "test.parquet", result.test, optional)
        quarantine = "".join(
            json.dumps(_json_safe(r.line()), ensure_ascii=False, sort_keys=True, default=str, allow_nan=False)
            + "\n"
            for r in result.rejected
        )
        write_text(root / "quarantine.jsonl", quarantine)
        summary = curation.summary(result.report)
        write_json(root / "curation.json", summary)

        # The report holds what curation made; how long each step took is the run's (its seconds.* metrics).
        report = without_run_facts(result.report)
        reports = paths.reports / "curate"
        write_json(reports / "report.json", report)
        write_text(reports / "report.md", render_markdown(report))
        mlflow.log_metrics({k: float(v) for k, v in flatten(summary).items()})
        mlflow.log_metrics(
            {
                "seconds": result.report["seconds"],
                "seconds_total": round(time.perf_counter() - started, 2),
                **{f"seconds.{s['step']}": s["seconds"] for s in result.report["steps"]},
            }
        )
        mlflow.log_artifacts(str(reports), "curate")
    outputs = [root / n for n in ("train.parquet", "test.parquet", "quarantine.jsonl", "curation.json")]
    publish(manifest, "curate", [*outputs, reports / "report.json", reports / "report.md"])
    return summary
