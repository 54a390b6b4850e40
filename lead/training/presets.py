"""Presets: every difference between the paper, its reference code and known improvements, by name.

=====================  ==============  ===================  ===================================
knob                   ``faithful``    ``paper``            ``improved``
=====================  ==============  ===================  ===================================
answer graded          last box before last box of the       last box of the completion
                       ``</think>``    completion
outcome table          1 / -1 / 0 / -2 correct / incorrect   1 / -1 / -1 / -2 (a cut-off answer
(correct/wrong/        (cut-off = 0)   only: 1 / -1 / -1 /   no longer beats a wrong one)
unfinished/degen.)                     -1
length gate (tokens)   4000            off                  off
loss_type              grpo            grpo                 dapo (token-level)
clip (low / high)      0.2 / 0.2       0.2 / 0.2            0.2 / 0.28 (clip-higher)
entropy bonus          0.001           0.001                0
learning rate          1e-6            1e-6                 1e-6
=====================  ==============  ===================  ===================================

The ablation switches then act on top: ``length_reward: false`` sets α = 0 (no L), ``penalty: false`` sets
every non-correct outcome to 0 (no E: a 0/1 accuracy reward), ``reweight: false`` turns AD off.
``repetition_penalty`` (the paper's later stage: -1.5) makes every completion that loops degenerate, finished
or not, and sets the degenerate reward to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lead.config import TrainParams
from lead.training.trainer import LeadSettings

PRESETS: dict[str, dict[str, Any]] = {
    "faithful": {
        "grade_before_think_close": True,
        "outcomes": (1.0, -1.0, 0.0, -2.0),
        "length_gate_tokens": 4000,
        "truncation": "unfinished",
        "loss_type": "grpo",
        "epsilon_high": None,  # = epsilon
        "entropy_coef": 0.001,
        "learning_rate": 1e-6,
    },
    "paper": {
        "grade_before_think_close": False,
        "outcomes": (1.0, -1.0, -1.0, -1.0),
        "length_gate_tokens": 0,
        "truncation": "unfinished",
        "loss_type": "grpo",
        "epsilon_high": None,
        "entropy_coef": 0.001,
        "learning_rate": 1e-6,
    },
    "improved": {
        "grade_before_think_close": False,
        "outcomes": (1.0, -1.0, -1.0, -2.0),
        "length_gate_tokens": 0,
        "truncation": "wrong",
        "loss_type": "dapo",
        "epsilon_high": 0.28,
        "entropy_coef": 0.0,
        "learning_rate": 1e-6,
    },
}


@dataclass(frozen=True)
class Resolved:
    """A training configuration with the preset applied: LEAD's settings and TRL's optimisation knobs."""

    lead: LeadSettings
    loss_type: str
    learning_rate: float
    entropy_coef: float
    epsilon_high: float
    mask_truncated: bool


def resolve(train: TrainParams) -> Resolved:
    """Apply ``train.preset``, then explicit values from params, then the ablation switches."""
    preset = PRESETS[train.preset]

    def pick(key: str) -> Any:
        value = getattr(train, key)
        return preset[key] if value is None else value

    correct, wrong, unfinished, degenerate = preset["outcomes"]
    if not train.penalty:  # E off: a plain 0/1 accuracy reward
        wrong = unfinished = degenerate = 0.0
    if train.repetition_penalty is not None:  # an explicit knob, so it holds with E off too
        degenerate = train.repetition_penalty
    truncation = pick("truncation")
    gate = pick("length_gate_tokens")
    lead = LeadSettings(
        alpha=train.alpha if train.length_reward else 0.0,
        length_gate=gate or None,
        correct=correct,
        wrong=wrong,
        unfinished=unfinished,
        degenerate=degenerate,
        reweight=train.reweight,
        drop_uninformative=train.drop_uninformative,
        before_think_close=pick("grade_before_think_close"),
        truncation=truncation,
        loops_anywhere=train.repetition_penalty is not None,
    )
    epsilon_high = pick("epsilon_high")
    return Resolved(
        lead=lead,
        loss_type=pick("loss_type"),
        learning_rate=pick("learning_rate"),
        entropy_coef=pick("entropy_coef"),
        epsilon_high=train.epsilon if epsilon_high is None else epsilon_high,
        mask_truncated=truncation == "mask",
    )
