"""Calibration: every training problem's pass rate under a model, and the band kept for RL.

The library of the ``calibrate`` stage (:mod:`lead.stages.calibrate`: the warm start, stage 1's band) and of
``calibrate_stage2`` (the stage-1 model, the curriculum's stage-2 band): one :class:`Target` names the model,
the band and the reward whose verdicts are counted; :func:`calibrate_pool` samples, judges, writes and publishes.

For each problem of ``<paths.curated>/train.parquet``: sample ``calibrate.samples`` (k) completions from the
current model (``<paths.models>/warmstart``, or ``model.base`` when ``warmstart.enabled`` is false) for the
user message problem + ``model.prompt_suffix`` in the model's chat template, through
:func:`lead.io.sampling.make_sampler` — or, with ``calibrate.server`` set, a running generation server that
serves this very model (``lead serve``, :class:`lead.io.sampling.ServerSampler`: no engine start per run) —,
judge them with the one outcome function (:func:`lead.core.outcomes.judge`) under the *reward's* rules and
token budget (``train.preset``, ``train.extraction``, ``train.truncation``, ``train.repetition_penalty``,
``train.max_completion_length``: :func:`lead.training.presets.outcome_rules`; recorded in the summary), and
summarise them with :func:`lead.core.difficulty.calibrate_problem`: c scored correct, pass rate p = c/k, 95 %
Wilson interval, mean length. So p is the share of completions the trainer will score correct: a problem kept
with 0 < p < 1 gives its groups a learning signal.

Outputs
-------
* ``<paths.curated>/calibrated.parquet`` — the **whole pool** (every input column, input order) plus ``k,
  correct, pass_rate, wilson_low, wilson_high, mean_length, band`` and a boolean ``keep`` =
  ``calibrate.min_pass_rate < p < calibrate.max_pass_rate`` (stage 1; default 0 < p < 1; ``keep_inclusive``
  closes either end). All rows are kept rather than only the kept ones (the train stage reads ``keep``), so
  that the bands of the whole pool stay visible. The curriculum's stage 2 is its own DVC stage
  (:mod:`lead.stages.calibrate_stage2`: the same calibration with the stage-1 model and its own rule).
* ``<paths.curated>/calibrate.manifest.json``, written last: the content fingerprints of these outputs and of
  the model sampled (:func:`lead.io.fingerprint.publish`); readers refuse outputs it does not name.
* ``<paths.reports>/calibrate/summary.json``: counts per band, kept, the histogram (and, when the pool has
  difficulty levels, per level: problems, kept, mean pass rate, histogram), what was sampled vs. reused, time,
  grader statistics of this run's completions; ``headline.json`` (DVC metrics): kept, kept share, mean pass rate.
* ``<paths.reports>/calibrate/histogram.csv`` (the table: ``pass_rate,problems,kept``) and
  ``pass_rate_histogram.png`` (also logged to MLflow, run tagged ``stage=calibrate``).

Incremental cache (``<paths.resume>/calibrate/cache.jsonl``, resume state outside DVC:
:func:`lead.dag.resume_dir`): its format and keys are in :mod:`lead.io.calibration_cache`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lead.io.sampling as sampling
from lead.config import CalibrateParams, ModelParams, PathParams, TrackingParams, TrainParams
from lead.core import difficulty
from lead.dag import REGISTRY, manifest_path, output, published_model, published_outputs, resume_dir
from lead.io import calibration_cache
from lead.io.files import atomic_path, write_json, write_text
from lead.io.fingerprint import model_fingerprint, publish, verify, without_run_facts

if TYPE_CHECKING:
    from lead.core.outcomes import OutcomeRules

CACHE_NAME = "cache.jsonl"  # in the stage's resume_dir
# The few figures DVC shows as this stage's metrics (`dvc exp show`, `dvc metrics diff`); summary.json keeps all.
HEADLINE_KEYS = ("kept", "kept_share", "mean_pass_rate")
# Columns added to the pool: the per-problem record (lead.core.difficulty.ProblemCalibration), then band and keep.
RECORD_COLUMNS = tuple(f.name for f in fields(difficulty.ProblemCalibration))


@dataclass(frozen=True)
class Target:
    """One calibration's job: which model it samples and how (params' ``calibrate`` section: samples, seed,
    chunks, backend, server; the model section's dtype and prompt suffix), the band of pass rates it keeps, the
    reward whose verdicts it counts, and where its pool, cache and outputs are (``paths``; ``files``: the stage's
    outputs by name, :data:`lead.dag.REGISTRY`). The ``calibrate`` stage calibrates the warm start for stage 1
    (:func:`stage1_target`); ``calibrate_stage2`` the stage-1 model for the curriculum's stage 2
    (:func:`stage2_target`)."""

    stage: str
    model: Path | str
    cache: Path
    files: dict[str, Path]
    low: float
    high: float
    inclusive: difficulty.Inclusive
    rules: OutcomeRules  # what a completion is for the reward this pool trains
    max_new_tokens: int  # that reward's token budget (train.max_completion_length)
    cfg: CalibrateParams
    model_settings: ModelParams
    paths: PathParams
    base: str | None = (
        None  # model.base when it is what is calibrated (no warm start): the empty pool's message
    )

    @property
    def rule(self) -> str:
        return difficulty.band_rule(self.low, self.high, self.inclusive)

    @property
    def output(self) -> Path:
        """The calibrated pool."""
        return self.files["pool"]

    @property
    def reports(self) -> Path:
        """The folder of its reports (summary, headline, histogram table and plot)."""
        return self.files["summary"].parent


def stage1_target(
    cfg: CalibrateParams, train: TrainParams, model: ModelParams, paths: PathParams, *, warm_start: bool
) -> Target:
    """The ``calibrate`` stage: the warm start's pass rates (``model.base``'s without ``warm_start``) under stage
    1's reward (``train``'s :class:`JudgeKeys`), the keep band of ``cfg``."""
    band = (cfg.min_pass_rate, cfg.max_pass_rate, cfg.keep_inclusive)
    sampled = model_path(model, paths.models, warm_start=warm_start)
    base = None if warm_start else model.base
    return _target("calibrate", sampled, band, JudgeKeys.of(train), cfg, model, paths, base=base)


def stage2_target(cfg: CalibrateParams, train: TrainParams, model: ModelParams, paths: PathParams) -> Target:
    """The ``calibrate_stage2`` stage: the stage-1 model (``<paths.models>/train``, checked to be the one the train
    stage published) under stage 2's reward (``train.stage2.overrides`` over ``train``), the stage-2 band
    p <= ``train.stage2.max_pass_rate``, zero included (:func:`lead.core.difficulty.stage2_band`)."""
    band = difficulty.stage2_band(train.stage2.max_pass_rate)
    trained = published_model(paths, "train")[0]
    keys = JudgeKeys.of(train, train.stage2.overrides)
    return _target("calibrate_stage2", trained, band, keys, cfg, model, paths)


def _target(
    stage: str,
    sampled: Path | str,
    band: tuple[float, float, Any],
    keys: JudgeKeys,
    cfg: CalibrateParams,
    model: ModelParams,
    paths: PathParams,
    base: str | None = None,
) -> Target:
    low, high, inclusive = band
    return Target(
        stage=stage,
        model=sampled,
        cache=resume_dir(paths, stage) / CACHE_NAME,
        files={name: output(paths, stage, name) for name in REGISTRY[stage].outputs},
        low=low,
        high=high,
        inclusive=inclusive,
        **reward_judge(keys),
        cfg=cfg,
        model_settings=model,
        paths=paths,
        base=base,
    )


@dataclass(frozen=True)
class JudgeKeys:
    """The train keys that decide what the reward scores correct (the outcome rules and the token budget): all
    that a calibration reads of ``train`` (dvc.yaml declares exactly these), read one by one."""

    preset: str
    extraction: str | None
    truncation: str | None
    repetition_penalty: float | None
    max_completion_length: int

    @classmethod
    def of(cls, train: TrainParams, overrides: Mapping[str, Any] | None = None) -> JudgeKeys:
        """``train``'s values, each one in ``overrides`` (stage 2's ``train.stage2.overrides``) over it."""
        over = overrides or {}
        return cls(**{f.name: over.get(f.name, getattr(train, f.name)) for f in fields(cls)})


def reward_judge(keys: JudgeKeys | TrainParams) -> dict[str, Any]:
    """``rules`` and ``max_new_tokens`` of the reward that trains with ``keys`` (:class:`JudgeKeys`, or the
    ``TrainParams`` they come from): a pass rate is measured as the reward will measure it -- same extraction,
    ``</think>``, truncation and loop rules, same token budget --, not as evaluation does: the keep band
    0 < p < 1 is there to keep exactly the problems whose groups carry a learning signal, and a completion the
    reward does not score correct gives none."""
    from lead.training.presets import outcome_rules

    return {"rules": outcome_rules(keys), "max_new_tokens": keys.max_completion_length}


# --------------------------------------------------------------------------------------------------
# The model and the backend
# --------------------------------------------------------------------------------------------------
def model_path(model: ModelParams, models: Path, *, warm_start: bool) -> Path | str:
    """The model calibrated: the warm-started one (``<models>/warmstart``, ``models`` = ``paths.models``), or
    ``model.base`` when warm start is disabled."""
    if warm_start:
        path = models / "warmstart"
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no warm-started model (run `lead warmstart` first)")
        return path
    if model.is_tiny:
        raise ValueError(
            "warmstart.enabled = false with model.base = 'tiny': the tiny model exists only after warm start"
        )
    return model.base


def resolve_backend(backend: str, server: str | None = None) -> str:
    """``auto`` → ``vllm`` when vLLM imports, else ``transformers`` (the same rule as ``make_sampler``); with a
    generation ``server`` always ``vllm`` (it is vLLM's server, whether or not vLLM imports here)."""
    if server:
        if backend == "transformers":
            raise ValueError(
                f"calibrate.backend = transformers with calibrate.server = {server}: a generation server is "
                "vLLM; set backend to auto or vllm, or unset the server"
            )
        return "vllm"
    if backend == "auto":
        return "vllm" if sampling.vllm_available() else "transformers"
    return backend


# --------------------------------------------------------------------------------------------------
# The stage
# --------------------------------------------------------------------------------------------------
def _read_pool(paths: PathParams):
    import pandas as pd

    path = paths.curated / "train.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no curated training pool (run `lead curate` first)")
    verify(manifest_path(paths, "curate"), "curate", [path])
    pool = pd.read_parquet(path)
    missing = {"id", "problem", "answer"} - set(pool.columns)
    if missing:
        raise ValueError(f"{path}: missing column(s) {sorted(missing)}; has {list(pool.columns)}")
    return pool


@dataclass
class _Into:
    """Where sampled results go: the cache, under the settings key; ``header`` (the settings line a new key
    needs) goes in with the first chunk, so the file never describes settings that have no result."""

    cache: calibration_cache.CalibrationCache
    settings: str
    header: list[dict[str, Any]]


def _sample_missing(
    target: Target,
    todo: list[tuple[str, str, str]],
    into: _Into,
    *,
    backend: str,
    server: str | None,
    fingerprint: str,
):
    """Sample ``target.model`` (``fingerprint``) with ``backend``, or through the generation ``server``, grade
    and cache ``todo`` = [(problem key, problem, answer)] chunk by chunk ``into`` the cache. Returns the grader
    statistics of these completions, the number of chunks and the seconds spent starting the sampler
    (importing vLLM, loading the model, vLLM's engine start; for a ``server``, checking that it serves this
    model)."""
    from lead.grading import GradeStats

    if not todo:
        return GradeStats(), 0, 0.0
    started = time.perf_counter()
    dtype = target.model_settings.dtype
    if server:
        sampler = sampling.ServerSampler(server, sampling.served_model_name(fingerprint, dtype))
    else:
        sampler = sampling.make_sampler(target.model, backend, dtype=dtype)
    try:
        start_seconds = time.perf_counter() - started
        stats, chunks = _sample_chunks(target, sampler, todo, into)
    finally:
        sampler.close()  # a vLLM engine (its KV cache; on GPUs a process) must not outlive the stage
    return stats, chunks, start_seconds


def _sample_chunks(target: Target, sampler, todo: list[tuple[str, str, str]], into: _Into):
    """The chunk loop of :func:`_sample_missing`: sample, check the shape, judge, append to the cache."""
    from lead.core.outcomes import Outcome, judge
    from lead.grading import GradeStats
    from lead.io.progress import progress_bar

    cfg = target.cfg
    header = into.header
    stats = GradeStats()
    chunks = [todo[i : i + cfg.chunk_size] for i in range(0, len(todo), cfg.chunk_size)]
    with progress_bar("calibrate: sampling", len(todo)) as advance:
        for j, chunk in enumerate(chunks, 1):
            advance(0, status=f"chunk {j}/{len(chunks)}")
            keys = [key for key, _, _ in chunk]
            suffix = target.model_settings.prompt_suffix
            messages = [sampling.user_message(problem, suffix) for _, problem, _ in chunk]
            # One seed for every chunk: the samplers seed each prompt by its text (sampling.prompt_seed), so a
            # problem draws the same samples whatever chunk it lands in (a resumed or resampled one included).
            spec = calibration_cache.sampling_spec(cfg, target.max_new_tokens)
            groups = sampler.sample(messages, spec, progress=advance)
            if len(groups) != len(chunk) or any(len(g) != cfg.samples for g in groups):
                raise RuntimeError(
                    f"sampler returned {[len(g) for g in groups]} completions for {len(chunk)} prompts "
                    f"x {cfg.samples} samples"
                )
            flat = [c for g in groups for c in g]
            golds = [answer for _, _, answer in chunk for _ in range(cfg.samples)]
            judged, chunk_stats = judge(
                [c.text for c in flat], golds, [not c.finished for c in flat], target.rules
            )
            verdicts = [j.outcome is Outcome.CORRECT for j in judged]
            stats = stats.merge(chunk_stats)
            rows = [
                {
                    "kind": "result",
                    "settings": into.settings,
                    "problem": key,
                    "correct": verdicts[i * cfg.samples : (i + 1) * cfg.samples],
                    "lengths": [c.num_tokens for c in group],
                    "finished": [c.finished for c in group],
                }
                for i, (key, group) in enumerate(zip(keys, groups, strict=True))
            ]
            into.cache.append(header + rows)
            header = []
    return stats, len(chunks)


@dataclass
class PoolCalibration:
    """The pool's calibration under one model: records in pool order, and what sampling it took."""

    pool: Any  # pandas DataFrame of train.parquet
    records: list[difficulty.ProblemCalibration]
    unique: int
    sampled: int
    grader: Any
    chunks: int
    start_seconds: float
    sampling_seconds: float
    backend: str
    model: str
    settings: str
    fingerprint: str


def pool_records(target: Target, *, server: str | None = None) -> PoolCalibration:
    """Pass rates of every problem of the curated pool under ``target.model``, sampling only what
    ``target.cache`` lacks for this model and these settings, through the generation ``server`` when one is
    given (it must serve that model)."""
    cfg = target.cfg
    pool = _read_pool(target.paths)
    model = target.model
    backend = resolve_backend(cfg.backend, server)
    fingerprint = model_fingerprint(model)
    values = calibration_cache.settings(
        cfg, target.model_settings, fingerprint, backend, target.rules, target.max_new_tokens
    )
    key = calibration_cache.settings_key(values)
    cache = calibration_cache.CalibrationCache(target.cache)
    header = [] if key in cache.described else [{"kind": "settings", "settings": key, "values": values}]

    problem_keys = [
        calibration_cache.problem_key(str(p), str(a))
        for p, a in zip(pool["problem"], pool["answer"], strict=True)
    ]
    todo: dict[str, tuple[str, str, str]] = {}  # unique missing problems, in pool order
    for pk, problem, answer in zip(problem_keys, pool["problem"], pool["answer"], strict=True):
        if cache.get(key, pk) is None and pk not in todo:
            todo[pk] = (pk, str(problem), str(answer))
    sampling_started = time.perf_counter()
    grader, chunks, start_seconds = _sample_missing(
        target,
        list(todo.values()),
        _Into(cache, key, header),
        backend=backend,
        server=server,
        fingerprint=fingerprint,
    )
    sampling_seconds = time.perf_counter() - sampling_started
    cache.compact()
    records = [
        difficulty.calibrate_problem(r["correct"], r["lengths"])
        for r in (cache.get(key, pk) for pk in problem_keys)
    ]
    return PoolCalibration(
        pool=pool,
        records=records,
        unique=len(set(problem_keys)),
        sampled=len(todo),
        grader=grader,
        chunks=chunks,
        start_seconds=start_seconds,
        sampling_seconds=sampling_seconds,
        backend=backend,
        model=str(model),
        settings=key,
        fingerprint=fingerprint,
    )


def calibrate_pool(target: Target, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Calibrate the pool for ``target`` (sampling only what its cache lacks),
    write the calibrated pool and the reports (``extra`` goes into the summary), publish them as one
    generation, return the summary. :func:`calibrate` is this inside the stage's MLflow run.

    ``calibrate.server`` is used for the ``calibrate`` stage only: a generation server serves the warm start,
    never the stage-1 model that ``calibrate_stage2`` samples."""
    started = time.perf_counter()
    cfg = target.cfg
    server = cfg.server if target.stage == "calibrate" else None
    manifest = manifest_path(target.paths, target.stage)
    cal = pool_records(target, server=server)
    records = cal.records
    out = cal.pool.copy()
    for name in RECORD_COLUMNS:
        out[name] = [getattr(r, name) for r in records]
    rates = [r.pass_rate for r in records]
    out["band"] = [difficulty.band_of(p, cfg.bands) for p in rates]
    out["keep"] = difficulty.band_mask(rates, target.low, target.high, target.inclusive)
    with atomic_path(target.output) as tmp:
        out.to_parquet(tmp, index=False)

    histogram = difficulty.pass_rate_histogram((r.correct for r in records), cfg.samples)
    by_level = _by_level(out, [r.correct for r in records], cfg.samples)
    kept = int(out["keep"].sum())
    summary = {
        **(extra or {}),
        "problems": len(out),
        "unique_problems": cal.unique,
        "samples_per_problem": cfg.samples,
        "keep_rule": target.rule,
        "kept": kept,
        "kept_share": round(kept / len(out), 4) if len(out) else 0.0,
        "bands": difficulty.band_counts(rates, cfg.bands),
        "histogram": {f"{p:g}": n for p, n in histogram},
        **({"by_level": by_level} if by_level else {}),
        "mean_pass_rate": round(statistics.fmean(rates), 4) if rates else 0.0,
        "mean_length": round(statistics.fmean(r.mean_length for r in records), 2) if records else 0.0,
        "sampled_problems": cal.sampled,
        "cached_problems": cal.unique - cal.sampled,
        "chunks": cal.chunks,
        "sampling_seconds": round(cal.sampling_seconds, 2),  # sampler start + sampling + grading + caching
        "sampler_start_seconds": round(cal.start_seconds, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "backend": cal.backend,
        "model": cal.model,
        "settings": cal.settings,
        "grader": asdict(cal.grader),
        "outcome_rules": asdict(target.rules),
        "max_new_tokens": target.max_new_tokens,
    }
    files = target.files
    write_json(files["summary"], without_run_facts(summary))
    write_json(files["headline"], {k: summary[k] for k in HEADLINE_KEYS})
    kept_at = [difficulty.in_band(p, target.low, target.high, target.inclusive) for p, _ in histogram]
    write_text(
        files["histogram"],
        "pass_rate,problems,kept\n"
        + "".join(f"{p:g},{n},{int(k)}\n" for (p, n), k in zip(histogram, kept_at, strict=True)),
    )
    _plot_histogram(files["histogram_plot"], histogram, kept_at, summary, by_level)
    if target.stage == "calibrate" and not kept:
        # Stage 1's pool is all train gets: stop here, where the reason is known, with the reports written
        # (the histogram shows it) and nothing published. Stage 2 keeps p = 0, and only train_stage2 knows the
        # dev split it takes out, so an empty stage-2 pool is train_stage2's to report (it names its knob).
        from lead.dag import StageError
        from lead.io.summaries import empty_pool_message

        band = (target.low, target.high, target.inclusive)
        why = empty_pool_message(
            [r.correct for r in records],
            cfg.samples,
            band,
            reports=target.paths.reports,
            base=target.base,
        )
        raise StageError(f"{why} (histogram: {files['histogram']})")
    outputs = published_outputs(target.paths, target.stage)
    publish(manifest, target.stage, outputs, model=cal.fingerprint, settings=cal.settings)
    return summary


def _by_level(pool: Any, correct: list[int], k: int) -> dict[str, dict[str, Any]]:
    """Per difficulty level of the pool (its ``level`` column, when every problem has one): problems, kept,
    mean pass rate and the pass-rate histogram -- whether the keep band holds the hard problems AD weights up."""
    if "level" not in pool or pool["level"].isna().any():
        return {}
    histograms = difficulty.pass_rate_histogram_by_level(pool["level"], correct, k)
    out = {}
    for level, histogram in histograms.items():
        rows = pool[pool["level"].astype(str) == level]
        out[level] = {
            "problems": len(rows),
            "kept": int(rows["keep"].sum()),
            "mean_pass_rate": round(float(rows["pass_rate"].mean()), 4),
            "histogram": {f"{p:g}": n for p, n in histogram},
        }
    return out


def _plot_histogram(
    path: Path,
    histogram: list[tuple[float, int]],
    kept: list[bool],
    summary: dict[str, Any],
    by_level: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Bar chart of problems per pass rate c/k, stacked by difficulty level when the pool has levels; kept bars
    opaque, dropped ones faded (Agg, no pyplot state)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    k = summary["samples_per_problem"]
    rates = [p for p, _ in histogram]
    if by_level:
        colours = colormaps["viridis"].resampled(len(by_level))
        bottom = [0] * len(rates)
        for i, (level, row) in enumerate(by_level.items()):
            counts = list(row["histogram"].values())
            bars = ax.bar(
                rates, counts, width=0.8 / k, bottom=bottom, color=colours(i), label=f"level {level}"
            )
            for bar, keep in zip(bars, kept, strict=True):
                bar.set_alpha(1.0 if keep else 0.3)
            bottom = [b + n for b, n in zip(bottom, counts, strict=True)]
        ax.legend(fontsize=7, ncols=2, title="faded: dropped", title_fontsize=7)
    else:
        ax.bar(
            rates,
            [n for _, n in histogram],
            width=0.8 / k,
            color=["tab:blue" if keep else "lightgrey" for keep in kept],
            edgecolor="black",
            linewidth=0.5,
        )
    ax.set_xlabel(f"pass rate (correct / {k} samples)")
    ax.set_ylabel("problems")
    ax.set_xlim(-0.6 / k, 1 + 0.6 / k)
    ax.set_title(
        f"{summary['problems']} problems; kept {summary['kept']} ({summary['keep_rule']})", fontsize=10
    )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")


def log_to_mlflow(summary: dict[str, Any], target: Target) -> None:
    """The summary's numbers as metrics, its model and settings as tags, the reports as artifacts."""
    import mlflow

    numeric = {
        name: float(summary[name])
        for name in (
            "problems",
            "kept",
            "kept_share",
            "mean_pass_rate",
            "mean_length",
            "sampled_problems",
            "cached_problems",
            "sampling_seconds",
            "seconds",
        )
    }
    numeric.update({f"grader.{name}": float(v) for name, v in summary["grader"].items()})
    numeric.update(
        {
            f"level_{level}.{name}": float(row[name])
            for level, row in summary.get("by_level", {}).items()
            for name in ("kept", "mean_pass_rate")
        }
    )
    mlflow.log_metrics(numeric)
    mlflow.set_tags(
        {"model": summary["model"], "backend": summary["backend"], "settings": summary["settings"]}
    )
    for name in ("summary", "headline", "histogram", "histogram_plot"):
        mlflow.log_artifact(str(target.files[name]), artifact_path=target.reports.name)


def calibrate(target: Target, tracking: TrackingParams, **extra: Any) -> dict[str, Any]:
    """:func:`calibrate_pool` inside an MLflow run of ``target.stage`` in ``tracking``'s store (its ``calibrate``
    params logged), the summary logged to it."""
    from lead.io.tracking import stage_run

    logged = {"calibrate": target.cfg.as_written()}
    with stage_run(tracking, target.stage, logged=logged):
        summary = calibrate_pool(target, extra=extra)
        log_to_mlflow(summary, target)
    return summary
