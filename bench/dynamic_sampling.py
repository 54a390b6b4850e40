"""Dynamic sampling (``train.dynamic_sampling``) against dropping uninformative groups, paired by seed.

For each configuration (params.yaml as it is, and ``recipes/proxy-headroom.yaml``) the upstream stages run once
in a scratch workspace (curate, warm start, calibration: the same pool for every run). Then, for each seed:

* **off**: ``train.max_steps`` steps as params say (uninformative groups get advantage 0);
* **on**: the same steps with dynamic sampling (uninformative groups refilled, ``train.max_refill_rounds``);
* **off, equal tokens**: off again, for as many steps as it takes to generate the completion tokens *on* generated
  (steps x on's tokens ÷ off's tokens, rounded);

each a fresh ``python -m lead.stages.train`` process, then ``python -m lead.stages.evaluate`` on the proxy test
split. Measured: the informative share per step (of the first batch), completion tokens and wall time per step,
refill rounds, and Pass@1 at equal optimizer steps (on vs off) and at equal generated tokens (on vs off, equal
tokens). The headline ratio is Pass@1 with dynamic sampling ÷ Pass@1 without it at equal generated tokens, on the
default configuration (means over the seeds); the body gives the paired differences and their t statistics.
``LEAD_BENCH_SEEDS``, ``LEAD_BENCH_STEPS`` and ``LEAD_BENCH_CONFIGS`` narrow a run (a smoke test).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import Result, table
from lead.config import load_params, recipe_overrides
from lead.config.load import ALLOW_EXTERNAL_ENV

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    name: recipe
    for name, recipe in {"default": None, "proxy-headroom": ROOT / "recipes" / "proxy-headroom.yaml"}.items()
    if name in os.environ.get("LEAD_BENCH_CONFIGS", "default,proxy-headroom").split(",")
}
SEEDS = tuple(int(s) for s in os.environ.get("LEAD_BENCH_SEEDS", "0,1,2").split(","))
STEPS = int(os.environ.get("LEAD_BENCH_STEPS", "0")) or None  # None: params' train.max_steps


def _stage(name: str, overrides: dict[str, Any]) -> float:
    """Run one stage as ``dvc repro`` would (a fresh process); its wall time."""
    command = [sys.executable, "-m", f"lead.stages.{name}"]
    for key, value in overrides.items():
        command += ["-S", f"{key}={value}"]
    started = time.perf_counter()
    env = {**os.environ, ALLOW_EXTERNAL_ENV: "1"}  # the scratch workspace is a temporary folder on purpose
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{name} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - started


def _upstream(scratch: Path, recipe: list[str]) -> dict[str, Any]:
    """The overrides of a scratch workspace, its curated pool, warm start and calibration made once."""
    base = {
        **dict(item.split("=", 1) for item in recipe),
        "paths.raw": ROOT / "data" / "raw",
        "paths.curated": scratch / "curated",
        "paths.models": scratch / "models",
        "paths.reports": scratch / "reports",
        "paths.resume": scratch / "resume",
        "tracking.uri": f"sqlite:///{scratch / 'mlflow.db'}",
        "evaluate.benchmarks": "[proxy]",
    }
    for stage in ("curate", "warmstart", "calibrate"):
        _stage(stage, base)
    return base


def _run(
    scratch: Path, base: dict[str, Any], name: str, seed: int, steps: int, dynamic: bool
) -> dict[str, Any]:
    """Train and evaluate one arm in its own folders (the warm start and pool shared); what it measured."""
    models, reports = scratch / name / "models", scratch / name / "reports"
    models.mkdir(parents=True)
    for entry in ("warmstart", "warmstart.manifest.json"):
        os.symlink(Path(base["paths.models"]) / entry, models / entry)
    overrides = {
        **base,
        "paths.models": models,
        "paths.reports": reports,
        "paths.resume": scratch / name / "resume",
        "train.seed": seed,
        "train.max_steps": steps,
        "train.dynamic_sampling": str(dynamic).lower(),
    }
    seconds = _stage("train", overrides)
    _stage("evaluate", {**overrides, "evaluate.model": "train"})
    summary = json.loads((reports / "train.json").read_text())
    curve = (reports / "train_curves.csv").read_text().splitlines()
    column = curve[0].split(",").index("informative")
    shares = [float(line.split(",")[column]) for line in curve[1:] if line.split(",")[column]]
    metrics = json.loads((reports / "evaluate" / "metrics.json").read_text())
    return {
        "steps": summary["steps"],
        "seconds_per_step": seconds / summary["steps"],
        "tokens": summary["completion_tokens"],
        "tokens_per_step": summary["completion_tokens"] / summary["steps"],
        "informative": statistics.fmean(shares),
        "refill_rounds": summary["refill_rounds"] / summary["steps"],
        "prompts_per_step": summary["prompts_drawn"] / summary["steps"],
        "pass_at_1": metrics["proxy.pass_at_1"],
        "len_avg": metrics["proxy.len_avg"],
    }


def _paired(diffs: list[float]) -> tuple[float, float]:
    """Mean of paired differences and its t statistic (0 when they do not vary)."""
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return mean, 0.0
    se = statistics.stdev(diffs) / len(diffs) ** 0.5
    return mean, (mean / se if se else 0.0)


def measure() -> dict[str, Any]:
    """Every configuration x seed x arm (module doc)."""
    out: dict[str, Any] = {}
    for config, recipe in CONFIGS.items():
        scratch = Path(tempfile.mkdtemp(prefix=f"lead-bench-dynamic-{config}-"))
        try:
            base = _upstream(scratch, recipe_overrides(recipe) if recipe else [])
            params = load_params(ROOT / "params.yaml", recipe_overrides(recipe) if recipe else [])
            steps = STEPS or params.train.max_steps
            runs = []
            for seed in SEEDS:
                off = _run(scratch, base, f"off-s{seed}", seed, steps, dynamic=False)
                on = _run(scratch, base, f"on-s{seed}", seed, steps, dynamic=True)
                matched = max(steps, round(steps * on["tokens"] / off["tokens"]))
                equal = _run(scratch, base, f"off-tokens-s{seed}", seed, matched, dynamic=False)
                runs.append({"seed": seed, "off": off, "on": on, "off_tokens": equal})
                print(
                    f"{config} seed {seed}: off {off}\n  on {on}\n  off at equal tokens {equal}", flush=True
                )
            out[config] = {"steps": steps, "runs": runs, "max_refill_rounds": params.train.max_refill_rounds}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return out


def _mean(runs: list[dict[str, Any]], arm: str, key: str) -> float:
    return statistics.fmean(r[arm][key] for r in runs)


def run() -> Result:
    """The ``python -m bench`` entry point."""
    measured = measure()
    body: list[str] = []
    headline = 0.0
    for config, m in measured.items():
        runs = m["runs"]
        steps_diff = _paired([r["on"]["pass_at_1"] - r["off"]["pass_at_1"] for r in runs])
        tokens_diff = _paired([r["on"]["pass_at_1"] - r["off_tokens"]["pass_at_1"] for r in runs])
        if config == "default":
            headline = _mean(runs, "on", "pass_at_1") / max(_mean(runs, "off_tokens", "pass_at_1"), 1e-9)
        rows = [
            [
                arm,
                f"{_mean(runs, key, 'steps'):.0f}",
                f"{_mean(runs, key, 'informative'):.2f}",
                f"{_mean(runs, key, 'refill_rounds'):.2f}",
                f"{_mean(runs, key, 'prompts_per_step'):.1f}",
                f"{_mean(runs, key, 'tokens_per_step'):.0f}",
                f"{_mean(runs, key, 'seconds_per_step'):.2f}",
                f"{_mean(runs, key, 'pass_at_1'):.3f}",
                f"{_mean(runs, key, 'len_avg'):.1f}",
            ]
            for arm, key in (("off", "off"), ("on", "on"), ("off, equal tokens", "off_tokens"))
        ]
        body += [
            f"### {config} ({len(runs)} seeds, {m['steps']} steps; max_refill_rounds {m['max_refill_rounds']})",
            "",
            *table(
                [
                    "arm",
                    "steps",
                    "informative share (first batch)",
                    "refill rounds / step",
                    "prompts / step",
                    "completion tokens / step",
                    "s / step",
                    "proxy Pass@1",
                    "Len",
                ],
                rows,
            ),
            "",
            f"Paired Pass@1, on − off: at equal steps {steps_diff[0]:+.3f} (t = {steps_diff[1]:.2f}); at equal "
            f"generated tokens {tokens_diff[0]:+.3f} (t = {tokens_diff[1]:.2f}). Per seed (off / on / off at equal "
            "tokens): "
            + "; ".join(
                f"s{r['seed']} {r['off']['pass_at_1']:.3f} / {r['on']['pass_at_1']:.3f} / "
                f"{r['off_tokens']['pass_at_1']:.3f}"
                for r in runs
            )
            + ".",
            "",
        ]
    body.append(
        "Each arm is a fresh `python -m lead.stages.train` then `python -m lead.stages.evaluate` (proxy test split) "
        "in a scratch workspace whose curate, warm start and calibration ran once per configuration. s / step is "
        "the train stage process's wall time over its steps (its start, about 15 s, included)."
    )
    return Result(
        name="dynamic_sampling",
        title="Dynamic sampling against dropping uninformative groups",
        ratio=headline,
        ratio_label="proxy Pass@1 with ÷ without dynamic sampling at equal generated tokens, default configuration",
        goal="none set: it becomes the default only if it wins at equal tokens (paired t > 2)",
        met=None,
        body=body,
    )


if __name__ == "__main__":
    run()
