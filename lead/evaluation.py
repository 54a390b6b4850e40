"""Evaluation: sample a model on the benchmarks, grade, and score it the paper's way (§7).

The library of the ``evaluate`` stage (:mod:`lead.stages.evaluate`) and of each ablation cell
(:mod:`lead.stages.ablation_cell`, which evaluates its model into its own folder): :func:`evaluate`.

For each benchmark in ``evaluate.benchmarks`` (:mod:`lead.io.benchmarks`; the first ``evaluate.max_problems``
problems of each, or all), every problem is rendered with the model's chat template (problem + the
instruction suffix), sampled ``evaluate.samples`` times through :func:`lead.io.sampling.make_sampler`, and each
completion judged by the one outcome function (:func:`lead.core.outcomes.judge`) under evaluation's rules
(:data:`lead.core.outcomes.EVALUATION`: the ``"any"`` extraction rule, math-verify's priority list, recorded as
``<benchmark>.extraction``), which gives the verdict on the answer as written (Pass@1), the answer it was
judged by (recorded per sample, voted on for Cons@n) and the outcome (answered share, precision). The metrics are
:mod:`lead.core.evaluation`'s: Pass@k, Cons@n over answer equivalence classes, Len_avg (all / correct /
incorrect), truncation rate, a token-budget sweep and, where a benchmark has levels, a difficulty-band table.

The model is ``evaluate.model``: a name means ``<paths.models>/<name>`` (``warmstart``, ``train``,
``train_stage2``: checked to be the model its stage published); a value containing ``/`` or naming an
existing path is used as is (path or hub id).

Context window: a problem whose prompt leaves fewer than ``max_new_tokens`` positions in the model's
context (``max_position_embeddings``) is not sampled; its samples count as unanswered and wrong, and
``<benchmark>.over_context`` counts such problems. Past its context a RoPE model would be extrapolating
(transformers does so silently, vLLM refuses), so both backends get exactly the same workload. This only
happens with small-context models such as the 512-position tiny model on AIME / MATH-500 prompts.

Outputs under ``<paths.reports>/evaluate/``:

* ``samples.parquet`` -- one row per sample: benchmark, problem_id, band, gold, sample, completion, answer
  (extracted, null = none), correct, tokens, finished (hit EOS), in_context;
* ``metrics.json`` -- flat ``<benchmark>.<metric>`` names (MLflow keys cannot hold ``@``: ``pass_at_1``,
  ``cons_at_8``, ``len_avg``, ``budget_128.pass_at_1``, ``level_3.precision``, ``grader_timeouts``, ...);
  ``null`` where a metric is undefined (e.g. the length of correct samples when none is correct);
* ``accuracy_vs_length.png`` and ``budget_curve.png``;
* ``evaluate.manifest.json`` -- written last, once the MLflow run has finished: the content fingerprints of
  the files above, the evaluated model's :func:`~lead.io.fingerprint.model_fingerprint` and path (the MLflow run
  that made them is tagged with the manifest's fingerprint). ``register`` refuses an evaluation whose manifest
  does not name, by content, the model it registers.

:mod:`lead.replay` scores completions made elsewhere with the same judge, metrics and plots.

Everything is logged to one MLflow run tagged ``stage=evaluate`` (undefined metrics are left out there).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lead.config import EvaluateParams, ModelParams, PathParams, TrackingParams
from lead.dag import REGISTRY, manifest_path, output_name, published_model
from lead.io.files import atomic_path, write_json
from lead.io.fingerprint import model_fingerprint, publish, verify

RECORDS = output_name("evaluate", "records")
METRICS = output_name("evaluate", "metrics")
ACCURACY_PLOT = output_name("evaluate", "accuracy_plot")
BUDGET_PLOT = output_name("evaluate", "budget_plot")
HEADLINE = output_name(
    "evaluate", "headline"
)  # the few figures DVC shows (`dvc exp show`); metrics.json: all
# One generation, named by the manifest: every output but the manifest, by file name (a cell evaluates into its
# own folder, so the names, not evaluate's paths, are what is shared).
OUTPUTS = tuple(output_name("evaluate", name) for name in REGISTRY["evaluate"].outputs if name != "manifest")
PIPELINE_MODELS = ("warmstart", "train", "train_stage2")  # evaluate.model names whose stage publishes them
GRADER_STATS = ("fast_path", "verified", "no_answer", "unparseable", "timeouts")


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
class _Prepared:
    """A benchmark's problems with their user messages and whether each prompt fits in the context window."""

    problems: list[Any]
    messages: list[str]
    fits: list[bool]
    prompt_tokens: list[int]


def _prepare(
    suites: dict[str, list[Any]], prompt_suffix: str, budget: int, tokenizer, context: int | None
) -> dict[str, _Prepared]:
    """Each benchmark's user messages (the problem and ``prompt_suffix``), and whether each prompt leaves room
    for ``budget`` new tokens in the ``context`` window."""
    from lead.io.sampling import render_prompt, user_message

    out = {}
    for name, problems in suites.items():
        messages = [user_message(p.problem, prompt_suffix) for p in problems]
        prompts = [render_prompt(tokenizer, m) for m in messages]
        # Counted with special tokens: the larger of the counts with and without them (a safe bound).
        lengths = [len(ids) for ids in tokenizer(prompts)["input_ids"]] if prompts else []
        fits = [context is None or n + budget <= context for n in lengths]
        out[name] = _Prepared(problems, messages, fits, lengths)
    return out


def _score_benchmark(name: str, bench: _Prepared, groups: list[list[Any]], n: int):
    """Grade the sampled groups; per-sample records, the evaluation's ProblemSamples and the grader stats."""
    from lead.core.evaluation import ProblemSamples, Sample
    from lead.core.outcomes import EVALUATION, judge

    sampled = [p for p, fit in zip(bench.problems, bench.fits, strict=True) if fit]
    flat = [c for group in groups for c in group]
    golds = [p.answer for p, group in zip(sampled, groups, strict=True) for _ in group]
    # One pass: each verdict with the answer it was judged by (the records and Cons@n use the same answers).
    judged, stats = judge([c.text for c in flat], golds, [not c.finished for c in flat], EVALUATION)
    records, problems = [], []
    position = 0
    for problem, fit in zip(bench.problems, bench.fits, strict=True):
        samples = []
        for i in range(n):
            if fit:
                c, j = flat[position], judged[position]
                position += 1
                sample = Sample(j.answer, j.correct, c.num_tokens, c.finished, outcome=j.outcome)
                text = c.text
            else:
                sample = Sample(answer=None, correct=False, tokens=0, finished=False, generated=False)
                text = ""
            samples.append(sample)
            records.append(
                {
                    "benchmark": name,
                    "problem_id": problem.id,
                    "problem": problem.problem,  # the statement: what a reviewer reads a changed verdict against
                    "band": problem.band,
                    "gold": problem.answer,
                    "sample": i,
                    "completion": text,
                    "answer": sample.answer,
                    "correct": sample.correct,
                    "tokens": sample.tokens,
                    "finished": sample.finished,
                    "in_context": fit,
                }
            )
        problems.append(ProblemSamples(tuple(samples), band=problem.band))
    return records, problems, stats


def headline_figures(metrics: dict[str, Any], benchmarks: list[str], samples: int) -> dict[str, Any]:
    """Per benchmark: Pass@1, Cons@n, Len_avg and the answered share (and their spread over repeats)."""
    names = ("pass_at_1", f"cons_at_{samples}", "len_avg", "answered")
    keys = [f"{b}.{m}{std}" for b in benchmarks for m in names for std in ("", "_std")]
    return {k: metrics[k] for k in keys if k in metrics}


SAMPLES_TABLE = "evaluate/samples.json"  # the records as an MLflow table artifact of the evaluate run
# What decides a verdict first (the UI shows the first few columns without scrolling), then the completion.
TABLE_COLUMNS = (
    "problem_id",
    "answer",
    "correct",
    "gold",
    "completion",
    "tokens",
    "finished",
    "benchmark",
    "seed",
    "sample",
)


def _review_table(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The sampled records as MLflow table columns (:data:`TABLE_COLUMNS`)."""
    rows = [r for r in records if r["in_context"]]
    return {c: [r[c] for r in rows] for c in TABLE_COLUMNS}


def _write_records(path: Path, records: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("benchmark", pa.string()),
            ("problem_id", pa.string()),
            ("problem", pa.string()),
            ("band", pa.string()),
            ("gold", pa.string()),
            ("seed", pa.int64()),
            ("sample", pa.int32()),
            ("completion", pa.string()),
            ("answer", pa.string()),
            ("correct", pa.bool_()),
            ("tokens", pa.int32()),
            ("finished", pa.bool_()),
            ("in_context", pa.bool_()),
        ]
    )
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp)


def write_plots(out: Path, scored: dict[str, list[Any]], sweeps: dict[str, list[Any]], n: int) -> None:
    """accuracy_vs_length.png (equal-count length bins per benchmark) and budget_curve.png."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers, CI or DVC
    import matplotlib.pyplot as plt

    from lead.core.evaluation import accuracy_by_length

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, problems in scored.items():
        points = accuracy_by_length([s for p in problems for s in p.samples])
        if points:
            ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="o", label=name)
    ax.set(
        xlabel="completion length (tokens, mean of an equal-count bin)",
        ylabel="share correct",
        ylim=(-0.02, 1.02),
    )
    ax.set_title("Accuracy against length")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: never over data
    with atomic_path(out / ACCURACY_PLOT) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in sweeps.items():
        if not points:
            continue
        budgets = [p.budget for p in points]
        (line,) = ax.plot(budgets, [p.pass_at_1 for p in points], marker="o", label=f"{name} Pass@1")
        ax.plot(
            budgets,
            [p.cons for p in points],
            marker="s",
            ls="--",
            color=line.get_color(),
            label=f"{name} Cons@{n}",
        )
    if ax.get_legend_handles_labels()[0]:
        ax.set_xscale("log", base=2)  # budgets usually double: evenly spaced on a log axis
        ticks = sorted({p.budget for points in sweeps.values() for p in points})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: never over data
    else:
        ax.text(
            0.5,
            0.5,
            "no budgets (evaluate.budgets is empty)",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set(xlabel="token budget", ylabel="score", ylim=(-0.02, 1.02))
    ax.set_title("Scores when generation is cut at a token budget")
    ax.grid(alpha=0.3)
    with atomic_path(out / BUDGET_PLOT) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


@dataclass
class _Scores:
    """What sampling every benchmark gave: the flat metrics, the per-sample records, and the first seed's
    scored problems and budget sweeps (for the plots)."""

    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    scored: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    sweeps: dict[str, list[Any]] = dataclasses.field(default_factory=dict)


def _sample_and_score(
    ev: EvaluateParams, prepared: dict[str, _Prepared], sampler, spec, backend: str
) -> _Scores:
    """Sample every benchmark ``evaluate.repeats`` times (seeds seed, seed+1, ...) and score each repeat; the
    metrics are each score's mean and spread over the repeats (:func:`lead.core.evaluation.seed_summary`)."""
    from lead.core.evaluation import benchmark_metrics, budget_sweep, cached_equal, seed_summary
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
            rows, problems, stats = _score_benchmark(name, bench, groups, ev.samples)
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
    from lead.core.registry import protocol
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
    prepared = _prepare(suites, model.prompt_suffix, ev.max_new_tokens, tokenizer, context_window(path))
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
        _write_records(out / RECORDS, scores.records)
        write_json(out / HEADLINE, headline_figures(metrics, ev.benchmarks, ev.samples))
        # Every completion as an MLflow table (the run page's artifact view shows it as a grid: a reviewer reads
        # answers without downloading samples.parquet).
        mlflow.log_table(data=_review_table(scores.records), artifact_file=SAMPLES_TABLE)
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
