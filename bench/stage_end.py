"""Benchmark: how a stage process ends, with and without the interpreter's teardown of every module
(``lead.stages._common.as_process``, ``lead.patches.interpreter_exit``).

A stage process imports torch, transformers, TRL and MLflow; at a normal exit the interpreter then frees their
modules one by one. ``as_process`` does what a normal exit does that anything depends on (threads joined,
``atexit`` handlers, streams flushed) and ends the process there. Each round starts two fresh interpreters that
import what the ``train`` stage imports and end one way or the other, in alternating order so that a change in
machine load hits both alike. Timed: from the end of the imports (stamped by the child) to the process's exit
as the parent sees it, and the whole process; the headline is the ratio of the median ends.

Run: ``python -m bench stage_end`` (about a minute on 2 cores).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from bench import Result, alternating, table
from bench.startup import LAZY

ROUNDS = 4
IMPORTS = (
    LAZY + "\nimport mlflow, torch, transformers.pipelines\n"
    "import sys, time; sys.stdout.write(repr(time.time())); sys.stdout.flush()\n"
)
ENDINGS = {
    "normal": IMPORTS,
    "as_process": IMPORTS + "from lead.stages._common import as_process; as_process(lambda: None)\n",
}


def _times(code: str) -> tuple[float, float]:
    """(seconds from the end of the imports to the exit, seconds of the whole process)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    ended_wall, ended = time.time(), time.perf_counter()
    return ended_wall - float(done.stdout), ended - started


def run() -> Result:
    ends: dict[str, list[float]] = {k: [] for k in ENDINGS}
    whole: dict[str, list[float]] = {k: [] for k in ENDINGS}
    names = list(ENDINGS)
    for name in alternating(names, ROUNDS):
        end, total = _times(ENDINGS[name])
        ends[name].append(end)
        whole[name].append(total)
    med = {k: (statistics.median(ends[k]), statistics.median(whole[k])) for k in names}
    body = table(
        ["ending", "median end (s)", "median process (s)", "ends (s)"],
        [
            [f"`{k}`", f"{med[k][0]:.2f}", f"{med[k][1]:.2f}", ", ".join(f"{t:.2f}" for t in ends[k])]
            for k in names
        ],
    )
    saved = med["normal"][0] - med["as_process"][0]
    body += [
        "",
        f"A fresh interpreter each (the `train` stage's imports), {ROUNDS} rounds in alternating order. Every stage "
        f"process of a `dvc repro` saves the difference, {saved:.1f} s: the embedded default's DAG runs 8, the "
        "test suite's whole-DAG fixtures dozens.",
    ]
    return Result(
        name="stage_end",
        title="A stage process's end without the interpreter's module teardown",
        ratio=med["as_process"][0] / med["normal"][0],
        ratio_label="median end of process, as_process ÷ normal exit",
        goal="none (a start-up/shut-down lever of the 300 s goal and of `make test`)",
        met=None,
        body=body,
    )
