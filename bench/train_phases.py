"""Benchmark: where a GRPO-LEAD step's time goes, with transformers or TRL's colocated vLLM generating.

Each phase of TRL's step is timed by wrapping its method: generation (``_generate_single_turn``), the reward
(``_calculate_rewards``: grading and LEAD's shaping), the log-probability passes
(``_get_per_token_logps_and_entropies``), the loss (``_compute_loss``) and the whole ``training_step`` (forward,
backward and the rest); the optimizer step is outside it. The same LEADTrainer runs ``STEPS`` steps twice,
``train.use_vllm`` false then true, from the warm start on the calibrated pool, writing only to a temporary
folder. No goal: it says which part of a step a speed-up must come from (issue: the whole DAG in 5 minutes).

Run: ``python -m bench train_phases`` (needs the warm-started model and the calibrated pool: ``make run``).
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path

from bench import Result, table

STEPS = 12
PHASES = (
    "_generate_single_turn",
    "_calculate_rewards",
    "_get_per_token_logps_and_entropies",
    "_compute_loss",
    "training_step",
)


def _timed(spent: dict[str, float]):
    """Wrap each phase of TRL's GRPOTrainer (LEADTrainer's reward included) to add its wall time to ``spent``."""
    from trl import GRPOTrainer

    from lead.training.trainer import LEADTrainer

    originals = {}
    for name in PHASES:
        cls = LEADTrainer if name == "_calculate_rewards" else GRPOTrainer
        original = cls.__dict__[name]
        originals[(cls, name)] = original

        def wrapper(self, *args, _original=original, _name=name, **kwargs):
            started = time.perf_counter()
            try:
                return _original(self, *args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - started

        setattr(cls, name, wrapper)
    return originals


def measure(use_vllm: bool) -> tuple[dict[str, float], float, float]:
    """Seconds per step of each phase and of a whole step (median of the step timer), over :data:`STEPS`; and the
    seconds the trainer took to build (with vLLM: its colocated engine's start)."""
    from bench.trainer import _trainer
    from lead.config import load_params
    from lead.training.inputs import Inputs, training_rows

    params = load_params("params.yaml")
    params.train.use_vllm = use_vllm
    rows = training_rows(Inputs(params.paths, params.model, warm_start=params.warmstart.enabled))
    spent: dict[str, float] = collections.defaultdict(float)
    originals = _timed(spent)
    try:
        with tempfile.TemporaryDirectory(prefix="lead-bench-") as tmp:
            started = time.perf_counter()
            trainer, timer = _trainer("lead", params, rows, Path(tmp), STEPS)
            built = time.perf_counter() - started
            trainer.train()
    finally:
        for (cls, name), original in originals.items():
            setattr(cls, name, original)
    step = sorted(timer.times)[len(timer.times) // 2]
    return {name: seconds / STEPS for name, seconds in spent.items()}, step, built


def run() -> Result:
    from lead.config import load_params

    plain, plain_step, plain_built = measure(use_vllm=False)
    vllm, vllm_step, vllm_built = measure(use_vllm=True)
    steps = load_params("params.yaml").train.max_steps  # the embedded default's training
    rows = [[f"`{name}`", f"{plain[name]:.3f}", f"{vllm[name]:.3f}"] for name in PHASES]
    rows.append(["**a whole step** (median, optimizer included)", f"{plain_step:.3f}", f"{vllm_step:.3f}"])
    rows.append(
        [
            "building the trainer (s, once; with vLLM its engine's start)",
            f"{plain_built:.1f}",
            f"{vllm_built:.1f}",
        ]
    )
    body = [
        f"LEADTrainer on the embedded default (warm start, calibrated pool), {STEPS} steps each way; seconds per "
        "step of each phase (generation, reward, log-probability passes and loss are parts of `training_step`).",
        "",
        *table(["phase", "transformers generate (s/step)", "vLLM colocate (s/step)"], rows),
        "",
        f"Generation is {plain['_generate_single_turn'] / plain_step:.0%} of a step with transformers and "
        f"{vllm['_generate_single_turn'] / vllm_step:.0%} with vLLM. Over the default's "
        f"{steps} steps, vLLM's engine start included: {plain_built + plain_step * steps:.0f} s with "
        f"transformers, {vllm_built + vllm_step * steps:.0f} s with vLLM.",
    ]
    return Result(
        name="train_phases",
        title="Where a training step's time goes",
        ratio=vllm_step / plain_step,
        ratio_label="median step, vLLM colocate / transformers",
        goal="none (a breakdown)",
        met=None,
        body=body,
    )
