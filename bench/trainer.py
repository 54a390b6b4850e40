"""Benchmark: LEADTrainer vs TRL's plain GRPOTrainer, same config, same seed, same data, in one run.

Both grade with the one grader (GRPOTrainer through LEAD's unshaped outcome reward function), so the
difference is what LEAD adds per step: gathering outcomes, group shaping, reweighting and its metrics.
Goal: LEAD's overhead per step <= 2 %. Steps alternate between the two trainers in rounds so that a change
in machine load hits both alike; the figure is the ratio of median step times.

Run: ``python -m bench trainer`` (needs the warm-started model and the curated pool: ``make run``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench import Result, alternating, table

GOAL = 1.02


class _StepTimer:
    """A trainer callback recording wall time per optimizer step."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        timer = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                timer._start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                timer.times.append(time.perf_counter() - timer._start)

        self.times: list[float] = []
        self._start = 0.0
        self.callback = Callback()


def _trainer(kind: str, params, rows, out: Path, steps: int):
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback
    from trl import GRPOTrainer

    from lead.io.sampling import context_window
    from lead.training.grpo_config import grpo_config
    from lead.training.inputs import Inputs, start_model
    from lead.training.presets import resolve
    from lead.training.trainer import LEADTrainer, outcome_reward_func

    params.train.max_steps = steps
    start = start_model(Inputs(params.paths, params.model, warm_start=params.warmstart.enabled))
    bound = params.curate.max_prompt_tokens
    config = grpo_config(params.train, out, max_prompt_tokens=bound, context=context_window(start))
    config.report_to = []
    config.save_strategy = "no"
    settings = resolve(params.train).lead
    timer = _StepTimer()
    common = dict(
        model=start,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(start),
        callbacks=[timer.callback],
    )
    if kind == "lead":
        trainer = LEADTrainer(lead=settings, **common)
    else:
        trainer = GRPOTrainer(reward_funcs=[outcome_reward_func(settings)], **common)
    trainer.remove_callback(PrinterCallback)
    return trainer, timer


def measure(steps: int = 10, rounds: int = 2) -> dict:
    """Median seconds per step of each trainer and LEAD's overhead ratio."""
    from lead.config import load_params
    from lead.training.inputs import Inputs, training_rows

    params = load_params("params.yaml")
    rows = training_rows(Inputs(params.paths, params.model, warm_start=params.warmstart.enabled))
    times: dict[str, list[float]] = {"grpo": [], "lead": []}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in alternating(("grpo", "lead"), rounds):
            trainer, timer = _trainer(kind, params, rows, Path(tmp) / kind, steps)
            trainer.train()
            times[kind].extend(timer.times[1:])  # the first step includes warm-up
    grpo, lead = statistics.median(times["grpo"]), statistics.median(times["lead"])
    ratio = lead / grpo
    result = {
        "grpo_seconds_per_step": round(grpo, 4),
        "lead_seconds_per_step": round(lead, 4),
        "ratio": round(ratio, 4),
        "goal": f"<= {GOAL}",
        "met": ratio <= GOAL,
        "steps_measured": len(times["lead"]),
        "batch": f"{params.train.batch_size} completions (G={params.train.num_generations})",
    }
    print(
        f"LEADTrainer vs GRPOTrainer: {lead:.3f} s/step vs {grpo:.3f} s/step → ratio {ratio:.3f} "
        f"(goal <= {GOAL}) over {len(times['lead'])} steps each"
    )
    return result


def run() -> Result:
    """The ``python -m bench`` entry point."""
    r = measure()
    rows = [
        ["GRPOTrainer + LEAD outcome reward", r["grpo_seconds_per_step"], r["steps_measured"]],
        ["LEADTrainer", r["lead_seconds_per_step"], r["steps_measured"]],
    ]
    body = [
        *table(["trainer", "median s/step", "steps measured"], rows),
        "",
        f"Batch {r['batch']}, params.yaml's train section, rounds alternating the order of the trainers.",
    ]
    return Result(
        name="trainer",
        title="LEADTrainer overhead per step",
        ratio=r["ratio"],
        ratio_label="LEADTrainer ÷ GRPOTrainer median step time",
        goal=f"<= {GOAL}",
        met=r["met"],
        body=body,
    )


if __name__ == "__main__":
    run()
