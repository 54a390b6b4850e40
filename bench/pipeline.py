"""Benchmark: the whole embedded default on a fresh clone (`dvc repro`), per stage, against a baseline commit.

Goals (issue: the whole DAG in 5 minutes on 2 cores): the first `dvc repro` of a fresh clone — curate, warm
start, calibrate, train, evaluate, register — in <= 300 s on 2 cores, the package install excluded (the clones
use this environment); a second `dvc repro` with nothing changed in <= 10 s. The headline is the larger of the
two ratios measured/goal (<= 1 means both goals are met). In the same run, a clone of the baseline commit
(``BENCH_PIPELINE_BASELINE``, default :data:`BASELINE`: the pipeline before the speed work) runs its first
`dvc repro` too, and every stage's time is given as a ratio to the baseline's, measured minutes apart on the
same machine.

A stage's time is read off `dvc repro`'s own output as it streams: from the line that starts the stage
(``Running stage '<name>'``) to the next one (or the end), so it includes the stage process's start-up (Python,
imports) and DVC's hashing of its outputs.

Run: ``python -m bench pipeline`` (commit first: the clone is of ``HEAD``; about 15 minutes of 2 cores).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import Result, table

ROOT = Path(__file__).resolve().parents[1]
FULL_GOAL_S = 300.0
NOOP_GOAL_S = 10.0
BASELINE = "696bd91"  # main before the trainer generated through vLLM on CPU (the issue measured ~590 s)
_STAGE_RE = re.compile(r"^Running stage '(?P<stage>[^']+)'", re.M)


def _dvc_repro(workspace: Path) -> tuple[float, dict[str, float], str]:
    """``dvc repro`` in ``workspace``: total seconds, seconds per stage that ran, and what it printed."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)  # the clone's own sqlite store
    started = time.perf_counter()
    marks: list[tuple[str, float]] = []
    lines: list[str] = []
    with subprocess.Popen(
        [str(Path(sys.executable).with_name("dvc")), "repro"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if m := _STAGE_RE.match(line):
                marks.append((m["stage"], time.perf_counter()))
    total = time.perf_counter() - started
    log = "".join(lines)
    if proc.returncode != 0:
        raise RuntimeError(f"dvc repro failed in {workspace}:\n{log[-4000:]}")
    ends = [t for _, t in marks[1:]] + [started + total] * bool(marks)  # a no-op run starts no stage
    return total, {stage: end - begin for (stage, begin), end in zip(marks, ends, strict=True)}, log


def _clone(rev: str, into: Path) -> str:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=into, check=True)
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=into, capture_output=True, text=True, check=True
    ).stdout.strip()


def run() -> Result:
    baseline_rev = os.environ.get("BENCH_PIPELINE_BASELINE", BASELINE)
    with tempfile.TemporaryDirectory(prefix="lead-bench-") as tmp:
        base = Path(tmp) / "baseline"
        base_commit = _clone(baseline_rev, base)
        base_full, base_stages, _ = _dvc_repro(base)
        clone = Path(tmp) / "lead"
        commit = _clone("HEAD", clone)
        full, stages, log = _dvc_repro(clone)
        noop, _, noop_log = _dvc_repro(clone)
        registered = json.loads((clone / "reports/register.json").read_text())
        metrics = json.loads((clone / "reports/evaluate/metrics.json").read_text())
        base_metrics = json.loads((base / "reports/evaluate/metrics.json").read_text())
        trained = json.loads((clone / "reports/train.json").read_text())
    ratio = max(full / FULL_GOAL_S, noop / NOOP_GOAL_S)
    rows = [
        [
            f"`{stage}`",
            f"{base_stages.get(stage, 0):.0f}",
            f"{seconds:.0f}",
            _ratio(seconds, base_stages.get(stage)),
        ]
        for stage, seconds in stages.items()
    ]
    rows.append(["**whole `dvc repro`**", f"{base_full:.0f}", f"{full:.0f}", _ratio(full, base_full)])
    body = [
        f"`git clone`s of `{commit}` (HEAD) and of the baseline `{base_commit}`, each a first `dvc repro` with "
        "this environment's packages (the baseline first), then `dvc repro` again in HEAD's clone.",
        "",
        *table(["stage", f"baseline {base_commit} (s)", f"HEAD {commit} (s)", "HEAD ÷ baseline"], rows),
        "",
        *table(
            ["run", "wall time", "goal", "ratio"],
            [
                [
                    "`dvc repro` (fresh clone, whole DAG)",
                    f"{full:.0f} s",
                    f"≤ {FULL_GOAL_S:.0f} s",
                    f"{full / FULL_GOAL_S:.2f}",
                ],
                [
                    "`dvc repro` again (nothing changed)",
                    f"{noop:.1f} s",
                    "≤ 10 s",
                    f"{noop / NOOP_GOAL_S:.2f}",
                ],
            ],
        ),
        "",
        f"HEAD: train {trained['steps']} steps in {trained['seconds']} s; proxy Pass@1 "
        f"{metrics['proxy.pass_at_1']:.3f} (baseline {base_metrics['proxy.pass_at_1']:.3f}), mean length "
        f"{metrics['proxy.len_avg']:.1f} tokens (baseline {base_metrics['proxy.len_avg']:.1f}); registered "
        f"`{registered['model_name']}` version {registered['version']}. The second `dvc repro` ran "
        f"{len(_STAGE_RE.findall(noop_log))} stages; the first ran {len(_STAGE_RE.findall(log))}.",
    ]
    return Result(
        name="pipeline",
        title="The embedded default end to end (per stage, against a baseline), and a no-op rerun",
        ratio=ratio,
        ratio_label=f"max(full / {FULL_GOAL_S:.0f} s, no-op / 10 s)",
        goal="≤ 1",
        met=ratio <= 1.0,
        body=body,
    )


def _ratio(seconds: float, baseline: float | None) -> str:
    return f"{seconds / baseline:.2f}" if baseline else "-"
