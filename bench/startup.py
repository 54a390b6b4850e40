"""Benchmark: a training process's imports, with and without vLLM behind TRL (lead/patches/trl_without_vllm.py).

TRL imports vLLM whenever it is installed; a trainer that does not generate with it (``train.use_vllm: false``,
the embedded default) has no use for it. Each round starts two fresh interpreters, one importing TRL's
GRPOTrainer as TRL does and one after :func:`lead.patches.trl_without_vllm.match_trl_to` (False), in alternating order
so that a change in machine load hits both alike; the headline is the ratio of the median wall times.

Run: ``python -m bench startup`` (about a minute on 2 cores).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from bench import Result, alternating, table

ROUNDS = 4
PLAIN = "from trl import GRPOTrainer"
LAZY = (
    "from lead.patches.trl_without_vllm import match_trl_to; match_trl_to(False); from trl import GRPOTrainer"
)
CHECK = "; import sys; assert ('vllm' in sys.modules) == {}"


def _seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def run() -> Result:
    times: dict[str, list[float]] = {"plain": [], "lazy": []}
    codes = {"plain": PLAIN + CHECK.format(True), "lazy": LAZY + CHECK.format(False)}
    for name in alternating(("plain", "lazy"), ROUNDS):
        times[name].append(_seconds(codes[name]))
    plain, lazy = (statistics.median(times[k]) for k in ("plain", "lazy"))
    runs = {k: ", ".join(f"{t:.2f}" for t in v) for k, v in times.items()}
    body = table(
        ["imports", "median s", "runs (s)"],
        [
            ["`from trl import GRPOTrainer` (TRL imports vLLM)", f"{plain:.2f}", runs["plain"]],
            ["the same after `match_trl_to(False)`", f"{lazy:.2f}", runs["lazy"]],
        ],
    )
    body += [
        "",
        f"A fresh interpreter each, {ROUNDS} rounds in alternating order; every `train`, `train_stage2` and ablation "
        f"cell process of the embedded default saves the difference, {plain - lazy:.1f} s.",
    ]
    return Result(
        name="startup",
        title="Training process imports without vLLM behind TRL",
        ratio=lazy / plain,
        ratio_label="median import time, without ÷ with vLLM",
        goal="none (a start-up lever of the 300 s goal)",
        met=None,
        body=body,
    )
