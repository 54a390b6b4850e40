"""Calibration: an incremental run after adding 5 % new problems, against a full calibration of the pool.

Each run is a fresh ``python -m lead.stages.calibrate`` process, the command ``dvc repro`` runs (Python and
library imports, MLflow run, model fingerprint, sampler start, sampling, grading, outputs), with
``params.yaml`` as it is except that outputs go to a temporary folder. The pool is the proxy training pool
(``curate.proxy.train_problems`` problems, drawn as ``curate`` draws them); the added problems are the next
``ceil(5 % x N)`` distinct training problems of the same draw. The model is the warm-started one
(``<paths.models>/warmstart``).

1. full: calibrate the N problems into an empty cache;
2. incremental: calibrate the N + added problems; only the added ones are sampled.

ratio = time(incremental) / time(full); the goal is ≤ 0.15. Two ways to run the stage are measured:

* **engine per run** (the default, ``calibrate.server: null``): every run imports vLLM and starts an engine,
  a fixed cost that dominates a small increment, so the ratio falls as the pool grows; measured at the
  default pool and twice its size, and the pool size where the goal starts to hold is fitted;
* **generation server** (``lead serve`` started once, runs with ``-S calibrate.server=<url>``): runs pay no
  engine start; the server's own start is reported beside the ratio.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import Result, table

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.15
ADDED_SHARE = 0.05


def measure(
    problems: int | None = None, backend: str | None = None, server: str | None = None
) -> dict[str, Any]:
    """Time a full and an incremental calibration; ``problems``/``backend`` override params.yaml, ``server``
    is the URL of a running generation server to sample through."""
    import pandas as pd

    from lead.config import load_params
    from lead.io.sources import proxy_problems, proxy_records
    from lead.io.tracking import use_experiment

    params = load_params(ROOT / "params.yaml")
    models = ROOT / params.paths.models
    if not (models / "warmstart").is_dir():
        raise SystemExit(f"{models / 'warmstart'}: no warm-started model (run `lead warmstart`)")
    n = problems or params.curate.proxy.train_problems
    added = math.ceil(ADDED_SHARE * n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-calibration-"))
    try:
        params.paths.curated, params.paths.reports = tmp / "curated", tmp / "reports"
        params.tracking.uri = f"sqlite:///{tmp / 'mlflow.db'}"
        params.curate.proxy.train_problems = n + added
        pool = pd.DataFrame(proxy_records(proxy_problems(params.curate, "train")))
        params.paths.curated.mkdir(parents=True)
        # Create the store outside the timings: both runs then pay the same MLflow cost.
        use_experiment(params.tracking)
        overrides = {
            "paths.models": models,
            "paths.curated": params.paths.curated,
            "paths.reports": params.paths.reports,
            "tracking.uri": params.tracking.uri,
            **({"calibrate.backend": backend} if backend else {}),
            **({"calibrate.server": server} if server else {}),
        }
        command = [sys.executable, "-m", "lead.stages.calibrate"]
        for key, value in overrides.items():
            command += ["-S", f"{key}={value}"]

        times, summaries = [], []
        for rows in (pool.iloc[:n], pool):
            rows.to_parquet(params.paths.curated / "train.parquet", index=False)
            started = time.perf_counter()
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - started)
            summaries.append(json.loads((params.paths.reports / "calibrate" / "summary.json").read_text()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    full, incremental = summaries
    if (full["sampled_problems"], incremental["sampled_problems"]) != (n, added):
        raise RuntimeError(f"expected {n} then {added} problems sampled; got {full} / {incremental}")
    return {
        "problems": n,
        "added": added,
        "samples": params.calibrate.samples,
        "backend": full["backend"] + (" (server)" if server else ""),
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


@contextmanager
def generation_server(port: int = 8391) -> Iterator[tuple[str, float]]:
    """``lead serve`` for the warm-started model, until the ``with`` ends: its URL and start time (s)."""
    from lead.config import load_params
    from lead.io.sampling import wait_for_server

    models = ROOT / load_params(ROOT / "params.yaml").paths.models
    command = [sys.executable, "-m", "lead.cli", "serve", "-S", f"paths.models={models}", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                wait_for_server(url, process, timeout=300)
            except RuntimeError as exc:
                log.seek(0)
                raise RuntimeError(f"`lead serve`: {exc}\n{log.read().decode()[-3000:]}") from None
            yield url, time.perf_counter() - started
        finally:
            process.terminate()
            process.wait(timeout=60)


def main(problems: int | None = None, backend: str | None = None, server: bool = False) -> dict[str, Any]:
    """Measure (through a generation server started for it when ``server``), print the figures, return them."""
    if server:
        with generation_server() as (url, start):
            r = measure(problems, backend, url)
        print(f"generation server started in {start:.1f} s")
    else:
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
    """The ``python -m bench`` entry point: engine per run at the default pool and twice its size, then the
    default pool through a generation server.

    Each kind of engine-per-run run is fitted as time = F + c x (problems sampled) from its two sizes (an
    incremental run samples small batches, which vLLM runs less efficiently, so its F and c are its own); the
    goal then holds from the pool size N where F_inc + c_inc x 5 % N = goal x (F_full + c_full x N).
    """
    runs = [measure()]
    runs.append(measure(2 * runs[0]["problems"]))
    with generation_server() as (url, server_start):
        served = measure(server=url)
    small, large = runs
    full = _line([(r["problems"], r["full_seconds"]) for r in runs])
    incremental = _line([(r["added"], r["incremental_seconds"]) for r in runs])
    slope = GOAL * full[1] - ADDED_SHARE * incremental[1]
    break_even = math.ceil((incremental[0] - GOAL * full[0]) / slope) if slope > 0 else None
    rows = []
    for mode, r in (("engine per run", small), ("engine per run", large), ("generation server", served)):
        for kind, sampled in (("full", r["problems"]), ("incremental", r["added"])):
            rows.append(
                [
                    mode,
                    r["problems"] + (r["added"] if kind == "incremental" else 0),
                    kind,
                    sampled,
                    r[f"{kind}_seconds"],
                    r[f"{kind}_start_seconds"],
                    f"{r['ratio']:.3f}" if kind == "incremental" else "",
                ]
            )
    body = [
        f"Proxy training pool (default {small['problems']} problems, then {large['problems']}) x "
        f"{small['samples']} samples, backend `{small['backend']}`, warm-started tiny model; then 5 % new "
        "problems added to the pool. Every run is a fresh `python -m lead.stages.calibrate` process, as "
        "`dvc repro` runs it: with an engine started in the run (`calibrate.server: null`, the default), or "
        f"through a generation server (`lead serve`, started once, in {server_start:.1f} s, before both runs; "
        "`-S calibrate.server=<url>`).",
        "",
        *table(
            [
                "sampling",
                "pool",
                "run",
                "problems sampled",
                "wall time (s)",
                "of which sampler start (s)",
                "incremental ÷ full",
            ],
            rows,
        ),
        "",
        f"Engine per run, fitted: a full run costs {full[0]:.1f} s + {full[1] * 1000:.0f} ms per problem, an "
        f"incremental one {incremental[0]:.1f} s + {incremental[1] * 1000:.0f} ms per new problem. The fixed "
        "part is the process (Python and library imports, vLLM's import and engine start, MLflow, outputs); "
        + (
            f"the goal holds for pools of about {break_even} problems or more. "
            if break_even
            else "with these costs the goal holds at no pool size. "
        )
        + f"Without the sampler's start the default pool's ratio is {small['ratio_without_start']:.3f}. "
        f"Through the generation server the default pool's ratio is {served['ratio']:.3f}: a run's sampler "
        f"start is a model check ({served['incremental_start_seconds']} s) instead of vLLM's import and engine "
        f"start ({small['incremental_start_seconds']} s).",
    ]
    return Result(
        name="calibration",
        title="Incremental calibration",
        ratio=served["ratio"],
        ratio_label=(
            f"incremental (+5 % problems) ÷ full calibration time, default pool of {served['problems']}, through "
            f"a generation server (engine per run: {small['ratio']:.3f})"
        ),
        goal=f"≤ {GOAL}",
        met=served["met"],
        body=body,
    )


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the line through two points."""
    (x0, y0), (x1, y1) = points
    slope = (y1 - y0) / (x1 - x0)
    return y0 - slope * x0, slope


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, help="pool size (default: curate.proxy.train_problems)")
    parser.add_argument(
        "--backend", choices=["auto", "vllm", "transformers"], help="default: calibrate.backend"
    )
    parser.add_argument(
        "--server", action="store_true", help="sample through a generation server (lead serve)"
    )
    args = parser.parse_args()
    main(args.problems, args.backend, args.server)
