"""Every problem's pass rate under the target's model: the cache's records reused, the rest sampled (in chunks,
resumable) and judged with the reward's rules."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lead.io.sampling as sampling
from lead.config import PathParams
from lead.core import difficulty
from lead.dag import manifest_path
from lead.io import calibration_cache
from lead.io.fingerprint import model_fingerprint, verify

if TYPE_CHECKING:
    pass
from lead.calibration.target import Target


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
