"""One evaluation run: the model sampled on every benchmark, scored, written and logged to one MLflow run."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lead.config import EvaluateParams, ModelParams, PathParams, TrackingParams
from lead.dag import REGISTRY, manifest_path, output_name, published_model
from lead.evaluation.plots import write_plots
from lead.evaluation.records import RECORDS, SAMPLES_TABLE, review_table, write_records
from lead.evaluation.scoring import GRADER_STATS, Prepared, headline_figures, prepare, score_benchmark
from lead.io.files import write_json
from lead.io.fingerprint import model_fingerprint, publish, verify

METRICS = output_name("evaluate", "metrics")


HEADLINE = output_name(
    "evaluate", "headline"
)  # the few figures DVC shows (`dvc exp show`); metrics.json: all


# One generation, named by the manifest: every output but the manifest, by file name (a cell evaluates into its
# own folder, so the names, not evaluate's paths, are what is shared).
OUTPUTS = tuple(output_name("evaluate", name) for name in REGISTRY["evaluate"].outputs if name != "manifest")


PIPELINE_MODELS = ("warmstart", "train", "train_stage2")  # evaluate.model names whose stage publishes them


def output_dir(paths: PathParams) -> Path:
    """The folder of evaluate's outputs (beside its manifest) under params' ``paths``."""
    return manifest_path(paths, "evaluate").parent


def model_path(name: str, models: Path) -> str:
    """The model to evaluate, ``evaluate.model`` = ``name``: ``<models>/<name>`` (``models`` = ``paths.models``),
    or ``name`` itself when it contains ``/`` or names an existing path (a local folder or a hub id)."""
    if "/" in name or Path(name).exists():
        return name
    path = Path(models) / name
    if not path.exists():
        raise FileNotFoundError(
            f"evaluate.model = {name!r}: {path} does not exist (run `lead {name}` first?)"
        )
    return str(path)


def sampling_spec(ev: EvaluateParams):
    """The :class:`lead.io.sampling.SamplingSpec` of params' ``evaluate`` section."""
    from lead.io.sampling import SamplingSpec

    return SamplingSpec(
        n=ev.samples,
        temperature=ev.temperature,
        top_p=ev.top_p,
        min_p=ev.min_p,
        max_new_tokens=ev.max_new_tokens,
        seed=ev.seed,
    )


@dataclass
class _Scores:
    """What sampling every benchmark gave: the flat metrics, the per-sample records, and the first seed's
    scored problems and budget sweeps (for the plots)."""

    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    scored: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    sweeps: dict[str, list[Any]] = dataclasses.field(default_factory=dict)


def _sample_and_score(
    ev: EvaluateParams, prepared: dict[str, Prepared], sampler, spec, backend: str
) -> _Scores:
    """Sample every benchmark ``evaluate.repeats`` times (seeds seed, seed+1, ...) and score each repeat; the
    metrics are each score's mean and spread over the repeats (:func:`lead.core.metrics.seed_summary`)."""
    from lead.core.metrics import benchmark_metrics, budget_sweep, cached_equal, seed_summary
    from lead.core.outcomes import EVALUATION
    from lead.io.progress import progress_bar

    out = _Scores()
    for name, bench in prepared.items():
        messages = [m for m, fit in zip(bench.messages, bench.fits, strict=True) if fit]
        per_seed = []
        for repeat in range(ev.repeats):
            # Repeats re-sample the same problems with seeds seed, seed+1, ...: the spread over them is
            # the sampling noise of every score (AIME has only 30 problems).
            seeded = dataclasses.replace(spec, seed=spec.seed + repeat)
            groups = []
            if messages:
                with progress_bar(f"evaluate {name}", len(messages)) as advance:
                    advance(0, status=f"{ev.samples} samples/problem, seed {seeded.seed}, {backend}")
                    groups = sampler.sample(messages, seeded, progress=advance)
            rows, problems, stats = score_benchmark(name, bench, groups, ev.samples)
            out.records += [{**row, "seed": seeded.seed} for row in rows]
            # One cache of answer comparisons per run: the scores, the sweep and the bands share it.
            equal = cached_equal()
            values = benchmark_metrics(problems, budgets=ev.budgets, equal=equal)
            values["over_context"] = sum(not f for f in bench.fits)
            values["extraction"] = EVALUATION.extraction
            values.update({f"grader_{k}": getattr(stats, k) for k in GRADER_STATS})
            per_seed.append(values)
            if repeat == 0:  # plots show the first seed
                out.scored[name] = problems
                out.sweeps[name] = budget_sweep(problems, ev.budgets, equal=equal)
        out.metrics.update({f"{name}.{k}": v for k, v in seed_summary(per_seed).items()})
    return out


def evaluate(
    ev: EvaluateParams, model: ModelParams, paths: PathParams, tracking: TrackingParams
) -> dict[str, Any]:
    """Sample, grade and score the model ``ev.model`` on every benchmark of ``ev`` (params' ``evaluate``
    section; ``model`` gives the dtype and the prompt's suffix); write records, metrics.json and plots into
    :func:`output_dir` of ``paths``, log them to an MLflow run (tag ``stage=evaluate``) in ``tracking``'s store,
    then publish them."""
    import mlflow
    from transformers import AutoTokenizer

    from lead.core.outcomes import EVALUATION
    from lead.core.review import protocol
    from lead.io.benchmarks import load_benchmark
    from lead.io.sampling import VLLMSampler, context_window, make_sampler
    from lead.io.tracking import mark_run, stage_run

    manifest = manifest_path(paths, "evaluate")
    # Everything that can fail cheaply fails before the model is loaded, and before the last good evaluation is
    # withdrawn: a refused run leaves it published.
    if "proxy" in ev.benchmarks:  # the proxy test split is curate's output: never a half-written one
        verify(manifest_path(paths, "curate"), "curate", [paths.curated / "test.parquet"])
    suites = {name: load_benchmark(name, paths, ev.max_problems) for name in ev.benchmarks}
    path = model_path(ev.model, paths.models)
    # A model of this pipeline must be the very one its stage published; any other is taken as it is.
    pipeline = ev.model in PIPELINE_MODELS
    fingerprint = published_model(paths, ev.model)[1] if pipeline else model_fingerprint(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    prepared = prepare(suites, model.prompt_suffix, ev.max_new_tokens, tokenizer, context_window(path))
    spec = sampling_spec(ev)
    longest = max(
        (n for b in prepared.values() for n, f in zip(b.prompt_tokens, b.fits, strict=True) if f), default=0
    )
    out = output_dir(paths)
    out.mkdir(parents=True, exist_ok=True)

    with stage_run(tracking, "evaluate", logged={"evaluate": ev.as_written()}) as run:
        started = time.perf_counter()
        # vLLM's engine is sized to the longest prompt + budget, not the model's full context.
        sampler = make_sampler(
            path,
            ev.backend,
            dtype=model.dtype,
            max_model_len=longest + spec.max_new_tokens if longest else None,
        )
        backend = "vllm" if isinstance(sampler, VLLMSampler) else "transformers"
        mlflow.set_tags({"model_path": path, "backend": backend})
        try:
            scores = _sample_and_score(ev, prepared, sampler, spec, backend)
        finally:
            sampler.close()
        seconds = round(time.perf_counter() - started, 1)

        metrics = scores.metrics
        write_records(out / RECORDS, scores.records)
        write_json(out / HEADLINE, headline_figures(metrics, ev.benchmarks, ev.samples))
        # Every completion as an MLflow table (the run page's artifact view shows it as a grid: a reviewer reads
        # answers without downloading samples.parquet).
        mlflow.log_table(data=review_table(scores.records), artifact_file=SAMPLES_TABLE)
        write_json(out / METRICS, metrics)
        write_plots(out, scores.scored, scores.sweeps, ev.samples)
        mlflow.set_tags({"model_fingerprint": fingerprint, "grader.extraction": EVALUATION.extraction})
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if isinstance(v, int | float)})
        mlflow.log_metric("seconds", seconds)
        mlflow.log_artifacts(str(out), artifact_path="evaluate")
    # Published only now that the MLflow run holds the same figures and has finished.
    publish(
        manifest,
        "evaluate",
        [out / name for name in OUTPUTS],
        model=fingerprint,
        model_path=path,
        before_writing=mark_run(run.info.run_id),
        # What was measured, as it was measured: register describes (and the champion gate compares) versions
        # by this, never by the params it is run with.
        protocol=protocol(ev.model_dump(mode="json")),
    )
    return metrics
