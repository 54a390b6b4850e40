"""Presets: every difference between the paper, its reference code and known improvements, by name.

=====================  ==================  ===================  ===================================
knob                   ``faithful``        ``paper``            ``improved``
=====================  ==================  ===================  ===================================
answer graded          last box before     last box (after the   last box (after the
(``extraction``)       ``</think>``        last ``</think>``)    last ``</think>``)
cut at the token       graded as written   unfinished           graded as written
limit (``truncation``)  (the reference)
outcome table          1 / -1 / 0 / -2     correct / incorrect   1 / -1 / -1 / -2 (a cut-off answer
(correct/wrong/                            only: 1 / -1 / -1 /   no longer beats a wrong one)
unfinished/degen.)                         -1
length gate (tokens)   4000                off                  off
loss_type              grpo                grpo                 dapo (token-level)
clip (low / high)      0.2 / 0.2           0.2 / 0.2            0.2 / 0.28 (clip-higher)
entropy bonus          0.001               0.001                0
learning rate          1e-6                1e-6                 1e-6
vLLM importance        off                 off                  on (TRL's default: corrects the
sampling correction                                             vLLM/trainer logprob mismatch)
=====================  ==================  ===================  ===================================

What each outcome means is :func:`lead.core.outcomes.outcome`'s rule, with the preset's
:class:`~lead.core.outcomes.OutcomeRules` (:func:`outcome_rules`): a completion without ``</think>`` is
unfinished (or degenerate when it loops) under every preset; one with ``</think>`` but no answer is wrong.
The ablation switches then act on top: ``length_reward: false`` sets α = 0 (no L), ``penalty: false`` sets
every non-correct outcome to 0 (no E: a 0/1 accuracy reward), ``reweight: false`` turns AD off.
``loss_type: dr_grpo`` also drops the std scaling of the advantage (Dr. GRPO). TRL applies an importance-
sampling correction to vLLM rollouts unless told not to: the paper's objective has none, so only ``improved``
turns it on (it acts only with ``use_vllm``). ``repetition_penalty`` (the paper's later stage: -1.5) makes
every completion that repeats an n-gram degenerate, finished or not (a long formula is no loop), and sets the
degenerate reward to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lead.config import TrainParams
from lead.core.outcomes import Outcome, OutcomeRules


@dataclass(frozen=True)
class LeadSettings:
    """GRPO-LEAD's knobs after the preset and the ablation switches are resolved (what ``LEADTrainer`` reads).

    ``alpha = 0`` turns the length reward (L) off; ``wrong = unfinished = degenerate = 0`` turns the explicit
    penalty (E) off; ``reweight = False`` turns the difficulty-aware reweighting (AD) off. All three off is
    plain GRPO with a 0/1 accuracy reward (with ε = 1e-6 and no reweighting, the advantage is GRPO's).
    ``scale_by_std = False`` is Dr. GRPO's advantage ``r - mean`` (``loss_type: dr_grpo``). ``rules`` decide
    what each completion is (:func:`lead.core.outcomes.outcome`): the reward's, calibration's and stage 2's.
    """

    alpha: float = 0.05
    length_gate: float | None = None
    correct: float = 1.0
    wrong: float = -1.0
    unfinished: float = 0.0
    degenerate: float = -2.0
    reweight: bool = True
    drop_uninformative: bool = True
    scale_by_std: bool = True
    dynamic_sampling: bool = False  # refill uninformative groups (lead.core.dynamic_sampling)
    max_refill_rounds: int = 3
    rules: OutcomeRules = field(default_factory=OutcomeRules)

    def reward_table(self) -> dict[Outcome, float]:
        """The reward of each outcome before L's shaping: ``{CORRECT: correct, WRONG: wrong, ...}``.

        >>> list(LeadSettings().reward_table().values())
        [1.0, -1.0, 0.0, -2.0]
        """
        return {
            Outcome.CORRECT: self.correct,
            Outcome.WRONG: self.wrong,
            Outcome.UNFINISHED: self.unfinished,
            Outcome.DEGENERATE: self.degenerate,
        }

    @property
    def method(self) -> str:
        """What these settings train, by the parts on: ``GRPO``, ``GRPO+L``, ``GRPO+E``, ``GRPO+L+AD``, ...,
        ``GRPO-LEAD`` (all three). E is on when any non-correct outcome scores other than 0.

        >>> LeadSettings().method, LeadSettings(alpha=0.0, wrong=0.0, degenerate=0.0, reweight=False).method
        ('GRPO-LEAD', 'GRPO')
        >>> LeadSettings(wrong=0.0, unfinished=0.0, degenerate=0.0).method
        'GRPO+L+AD'
        """
        parts = [
            name
            for name, on in (
                ("L", self.alpha > 0),
                ("E", any(v != 0 for v in (self.wrong, self.unfinished, self.degenerate))),
                ("AD", self.reweight),
            )
            if on
        ]
        return "GRPO-LEAD" if len(parts) == 3 else "+".join(["GRPO", *parts])


PRESETS: dict[str, dict[str, Any]] = {
    "faithful": {
        "extraction": "boxed_before_think",
        "rewards": (1.0, -1.0, 0.0, -2.0),
        "length_gate_tokens": 4000,
        "truncation": "graded",  # the reference code never looks at the token limit
        "loss_type": "grpo",
        "epsilon_high": None,  # = epsilon
        "entropy_coef": 0.001,
        "learning_rate": 1e-6,
        "vllm_importance_sampling_correction": False,
    },
    "paper": {
        "extraction": "boxed",
        "rewards": (1.0, -1.0, -1.0, -1.0),
        "length_gate_tokens": 0,
        "truncation": "unfinished",
        "loss_type": "grpo",
        "epsilon_high": None,
        "entropy_coef": 0.001,
        "learning_rate": 1e-6,
        "vllm_importance_sampling_correction": False,
    },
    "improved": {
        "extraction": "boxed",
        "rewards": (1.0, -1.0, -1.0, -2.0),
        "length_gate_tokens": 0,
        "truncation": "graded",
        "loss_type": "dapo",
        "epsilon_high": 0.28,
        "entropy_coef": 0.0,
        "learning_rate": 1e-6,
        "vllm_importance_sampling_correction": True,
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
    vllm_importance_sampling_correction: bool

    def record(self) -> dict[str, Any]:
        """Flat ``name: value`` of everything resolved (logged on the training run: the objective trained)."""
        return {
            **{f"lead.{k}": v for k, v in asdict(self.lead).items() if k != "rules"},
            **{f"lead.rules.{k}": v for k, v in asdict(self.lead.rules).items()},
            "loss_type": self.loss_type,
            "learning_rate": self.learning_rate,
            "entropy_coef": self.entropy_coef,
            "epsilon_high": self.epsilon_high,
            "mask_truncated": self.mask_truncated,
            "vllm_importance_sampling_correction": self.vllm_importance_sampling_correction,
        }


def outcome_rules(train: Any) -> OutcomeRules:
    """What a completion is for the reward that trains with ``train`` -- a ``TrainParams``, or anything holding
    its ``preset``, ``extraction``, ``truncation`` and ``repetition_penalty`` (stage 2's values) --: the
    preset's rules, then explicit ``extraction`` / ``truncation``; a ``repetition_penalty`` looks for loops
    anywhere. The calibration stages judge their samples with these rules too, so a pass rate is the share the
    trainer will score correct."""
    preset = PRESETS[train.preset]
    return OutcomeRules(
        extraction=train.extraction or preset["extraction"],
        truncation=train.truncation or preset["truncation"],
        loops="unfinished" if train.repetition_penalty is None else "anywhere",
    )


def resolve(train: TrainParams) -> Resolved:
    """Apply ``train.preset``, then explicit values from params, then the ablation switches."""
    preset = PRESETS[train.preset]

    def pick(key: str) -> Any:
        value = getattr(train, key)
        return preset[key] if value is None else value

    correct, wrong, unfinished, degenerate = preset["rewards"]
    rules = outcome_rules(train)
    if not train.penalty:  # E off: a plain 0/1 accuracy reward
        wrong = unfinished = degenerate = 0.0
    if train.repetition_penalty is not None:  # an explicit knob, so it holds with E off too
        degenerate = train.repetition_penalty
    gate = pick("length_gate_tokens")
    loss_type = pick("loss_type")
    lead = LeadSettings(
        alpha=train.alpha if train.length_reward else 0.0,
        length_gate=gate or None,
        correct=correct,
        wrong=wrong,
        unfinished=unfinished,
        degenerate=degenerate,
        reweight=train.reweight,
        drop_uninformative=train.drop_uninformative,
        dynamic_sampling=train.dynamic_sampling,
        max_refill_rounds=train.max_refill_rounds,
        rules=rules,
        # Dr. GRPO (Liu et al. 2025) drops the std scaling of the advantage as well as the length normalisation.
        scale_by_std=loss_type != "dr_grpo",
    )
    epsilon_high = pick("epsilon_high")
    return Resolved(
        lead=lead,
        loss_type=loss_type,
        learning_rate=pick("learning_rate"),
        entropy_coef=pick("entropy_coef"),
        epsilon_high=train.epsilon if epsilon_high is None else epsilon_high,
        mask_truncated=rules.truncation == "mask",
        vllm_importance_sampling_correction=pick("vllm_importance_sampling_correction"),
    )
