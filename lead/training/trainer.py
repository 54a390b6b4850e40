"""The single TRL seam: ``LEADTrainer(GRPOTrainer)`` swaps GRPO's reward and advantage for GRPO-LEAD's.

TRL 1.16 has no advantage hook, so two private methods are overridden (a contract test pins them), and a
third, ``_get_train_sampler``, so that a resumed run sees the data order an uninterrupted one sees:

* ``_calculate_rewards`` — judge this process's completions with the one outcome function
  (:func:`lead.core.outcomes.judge` under the preset's rules: correct / wrong / unfinished / degenerate), sum the
  grader's statistics over the processes (a step whose grades mostly time out stops the run), **gather** outcome
  codes and token lengths from every process
  (a prompt's group can straddle processes), and compute the LEAD rewards on the whole batch
  (:func:`lead.core.rewards.lead_rewards`: the length-dependent accuracy reward L and the penalties E). TRL then
  logs these rewards as the ``lead`` reward function.
* ``_generate_and_score_completions`` — after TRL has built the batch, replace its advantages by
  :func:`lead.core.advantages.lead_advantages` (unbiased group std, ε = 1e-6 — or no std scaling under Dr. GRPO —,
  difficulty-aware reweighting AD, dropped uninformative groups) computed on the gathered rewards, slice back
  this process's part, overwrite the advantages TRL buffered for its completion table (it only prints them at
  the next log), and record LEAD's own metrics (reward by outcome, lengths of correct and incorrect answers,
  ρ, weights, dropped groups) and the grader's (``grader/timeouts``, ``grader/unparseable``, ...).
  With ``train.dynamic_sampling`` the step first refills its uninformative groups with further prompts' groups,
  each round generated and scored by TRL as the first (:mod:`lead.core.dynamic_sampling` decides on the gathered
  batch, :mod:`lead.training.refill` joins what each process keeps), and the advantages are computed on the batch
  it trains on.
* ``_get_train_sampler`` — TRL's ``RepeatSampler`` draws each epoch's order from one generator seeded once, so
  epoch k's order is its (k+1)-th permutation; a run resumed in epoch k >= 1 starts a fresh sampler and would
  train on epoch 0's order again (the Trainer skips the epochs' batches, never the generator's draws).
  :class:`EpochSampler` makes the order a function of (seed, epoch) through the ``set_epoch`` the Trainer calls
  before each epoch: the same orders as TRL's in an uninterrupted run, and the same ones after a resume.

Validation (a dev split held out of the pool) samples the dev prompts as TRL samples training ones and scores
them twice: with the reward (``eval_lead/*``, ``eval_reward``) and as evaluation judges them
(``eval_pass_at_1``, ``eval_answered``: :data:`lead.core.outcomes.EVALUATION`, the rules of the Pass@1 users read
in ``metrics.json`` and the registry), which is what ``train.checkpoint: best`` maximises.

Everything numeric lives in the pure modules; this file is glue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from lead.core import dynamic_sampling
from lead.core.advantages import lead_advantages, lead_metrics, uninformative_groups
from lead.core.outcomes import ANSWERED, EVALUATION, OUTCOMES, Outcome, judge
from lead.core.rewards import lead_rewards
from lead.grading import GradeStats
from lead.patches import vllm_colocated_cpu
from lead.patches.trl_buffers import overwrite_logged_advantages, record_metrics
from lead.training import refill
from lead.training.presets import LeadSettings

# A step where more than this share of the grades timed out is not trusted: math-verify is broken or starved,
# and every such answer would silently score as wrong (the grader's statistics are logged on every step).
MAX_TIMEOUT_SHARE = 0.2
# The grader's statistics logged per step, as shares of the step's completions (lead.grading.GradeStats).
GRADER_FIELDS = ("timeouts", "unparseable", "no_answer", "fast_path", "verified")


class GraderFailure(RuntimeError):
    """Too many of a step's grades timed out (:data:`MAX_TIMEOUT_SHARE`)."""


def completion_text(completion: Any) -> str:
    """TRL hands completions as strings, or as message lists for conversational prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion)


def classify(
    texts: Sequence[str], golds: Sequence[str], truncated: Sequence[bool], settings: LeadSettings
) -> tuple[list[Outcome], GradeStats]:
    """Each completion's outcome under the settings' rules (:func:`lead.core.outcomes.judge`), and the grader's
    statistics of the batch."""
    judged, stats = judge(texts, golds, truncated, settings.rules)
    return [j.outcome for j in judged], stats


def outcome_reward_func(settings: LeadSettings):
    """A plain TRL reward function with LEAD's *unshaped* outcome table (for ``GRPOTrainer`` baselines).

    It sees only this process's completions, so it cannot shape by group: that is what ``LEADTrainer`` adds.
    """
    table = settings.reward_table()

    def lead_outcome(completions, answer, completion_ids, **_: Any) -> list[float]:
        texts = [completion_text(c) for c in completions]
        # Without the tokenizer here, a completion that never produced EOS cannot be told apart: treat none as cut.
        outcomes, _ = classify(texts, answer, [False] * len(texts), settings)
        return [table[o] for o in outcomes]

    return lead_outcome


def grader_metrics(counts: np.ndarray) -> dict[str, float]:
    """``grader/<field>`` shares of a step's completions from the gathered counts (``total`` first, then
    :data:`GRADER_FIELDS`); raises :class:`GraderFailure` when the timeouts exceed :data:`MAX_TIMEOUT_SHARE`.

    >>> grader_metrics(np.array([10, 1, 0, 2, 7, 0]))["grader/timeouts"]
    0.1
    >>> grader_metrics(np.array([10, 3, 0, 0, 7, 0]))
    Traceback (most recent call last):
    lead.training.trainer.GraderFailure: 3 of 10 grades timed out in one step (more than 20%): ...
    """
    total = max(int(counts[0]), 1)
    shares = {f"grader/{name}": float(n) / total for name, n in zip(GRADER_FIELDS, counts[1:], strict=True)}
    if shares["grader/timeouts"] > MAX_TIMEOUT_SHARE:
        raise GraderFailure(
            f"{int(counts[1])} of {int(counts[0])} grades timed out in one step (more than "
            f"{MAX_TIMEOUT_SHARE:.0%}): math-verify is failing or starved of CPU, and those answers would all "
            "score as wrong; see the grader/* metrics of the training run"
        )
    return shares


class EpochSampler(RepeatSampler):
    """TRL's ``RepeatSampler`` whose epoch ``e`` (``set_epoch``, called by the Trainer before each epoch) is the
    ``(e+1)``-th permutation of a generator seeded with ``seed``, however many epochs this process has iterated:
    an uninterrupted run gets TRL's orders, a run resumed in a later epoch gets the same (module docstring)."""

    epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if self.shuffle and self.seed is not None:
            self.generator = torch.Generator().manual_seed(self.seed)
            for _ in range(self.epoch):  # the earlier epochs' draws
                torch.randperm(self.num_samples, generator=self.generator)
        return super().__iter__()  # type: ignore[no-untyped-call,no-any-return]


class LEADTrainer(GRPOTrainer):
    """``GRPOTrainer`` with GRPO-LEAD rewards and advantages (see the module docstring)."""

    def __init__(self, *args: Any, lead: LeadSettings, answer_column: str = "answer", **kwargs: Any) -> None:
        funcs = kwargs.setdefault("reward_funcs", [outcome_reward_func(lead)])
        if isinstance(funcs, list) and len(funcs) != 1:
            # LEAD's reward is one column computed here from the outcomes; other functions would be ignored.
            raise ValueError(
                f"LEADTrainer computes one reward (GRPO-LEAD's, from each completion's outcome) and got "
                f"{len(funcs)} reward functions; set the outcome values through the preset (train.preset, "
                "train.penalty, train.repetition_penalty) instead"
            )
        config = kwargs.get("args") or (args[2] if len(args) > 2 else None)  # GRPOTrainer(model, funcs, args)
        # On CPU the colocated engine must compute with the weights TRL syncs into it, and starts eager
        # (lead.patches.vllm_colocated_cpu).
        with (
            vllm_colocated_cpu.colocated() if vllm_colocated_cpu.needed(config) else contextlib.nullcontext()
        ):
            super().__init__(*args, **kwargs)
        self.lead = lead
        self.answer_column = answer_column
        self._lead_batch: dict[str, np.ndarray] = {}
        self._lead_grader: dict[str, float] = {}
        # This process's part of the last batch, one row per completion (CompletionsTable logs it).
        self._lead_rows: dict[str, list[Any]] = {}
        # Dynamic sampling's pool: a prompt's row by its id (a step's own prompts are not drawn again).
        ids = self.train_dataset["id"] if "id" in getattr(self.train_dataset, "column_names", ()) else []
        self._pool_row = {row_id: i for i, row_id in enumerate(ids)}

    # -- TRL seam 0: the training data's order, a function of (seed, epoch) -----------------------------------
    def _get_train_sampler(self, dataset: Any = None) -> EpochSampler:
        sampler = super()._get_train_sampler(dataset)
        assert isinstance(sampler, RepeatSampler), type(sampler)  # the contract test pins TRL's
        return EpochSampler(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    # -- TRL seam 1: rewards on the gathered batch -------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        device = self.accelerator.device
        eos = set(self.eos_token_ids) | {self._tokenizer.pad_token_id}
        truncated = [not ids or ids[-1] not in eos for ids in completion_ids_list]
        texts = [completion_text(c) for c in completions]
        golds = [x[self.answer_column] for x in inputs]
        outcomes, stats = classify(texts, golds, truncated, self.lead)
        self._lead_rows = {
            "prompt": [completion_text(p) for p in prompts],
            "completion": texts,
            "gold": [str(g) for g in golds],
            "outcome": [o.value for o in outcomes],
            "tokens": [len(ids) for ids in completion_ids_list],
        }
        counts = torch.tensor(
            [stats.total, *(getattr(stats, name) for name in GRADER_FIELDS)], device=device, dtype=torch.long
        )
        codes = torch.tensor([OUTCOMES.index(o) for o in outcomes], device=device)
        lengths = torch.tensor([len(ids) for ids in completion_ids_list], device=device, dtype=torch.float32)
        cut = torch.tensor(truncated, device=device)
        # Group shaping needs whole groups: gather from every process (TRL keeps groups contiguous in order).
        if not self.model.training:  # validation: the users' metric too (module docstring)
            self._dev_metrics(texts, golds, truncated)
        codes, lengths, cut = (self.accelerator.gather(t).cpu().numpy() for t in (codes, lengths, cut))
        # Every process sees the same sums, so all of them stop together on a failing grader (no one waits).
        grader = grader_metrics(self.accelerator.reduce(counts, reduction="sum").cpu().numpy())
        names = [OUTCOMES[c] for c in codes]
        s = self.lead
        rewards = lead_rewards(
            names,
            lengths,
            self.num_generations,
            alpha=s.alpha,
            length_gate=s.length_gate,
            correct=s.correct,
            wrong=s.wrong,
            unfinished=s.unfinished,
            degenerate=s.degenerate,
        )
        self._lead_batch = {"codes": codes, "lengths": lengths, "rewards": rewards, "truncated": cut}
        self._lead_grader = grader
        return torch.tensor(rewards, dtype=torch.float32, device=device).unsqueeze(1)

    def _dev_metrics(self, texts: list[str], golds: list[str], truncated: list[bool]) -> None:
        """Validation batches are also judged as ``evaluate`` judges (:data:`lead.core.outcomes.EVALUATION`):
        ``eval_pass_at_1`` (the verdict on each answer as written, the Pass@1 of ``metrics.json``) is what
        ``checkpoint: best`` maximises, and ``eval_answered`` beside it; summed over the processes."""
        judged, _ = judge(texts, golds, truncated, EVALUATION)
        sums = torch.tensor(
            [len(judged), sum(j.correct for j in judged), sum(j.outcome in ANSWERED for j in judged)],
            device=self.accelerator.device,
            dtype=torch.long,
        )
        total, correct, answered = self.accelerator.reduce(sums, reduction="sum").tolist()
        record_metrics(
            self, "eval", {"pass_at_1": correct / max(total, 1), "answered": answered / max(total, 1)}
        )

    # -- TRL seam 2: replace the advantages (after refilling the batch) ----------------------------------------
    def _generate_and_score_completions(self, inputs):
        started = time.perf_counter()
        output = super()._generate_and_score_completions(inputs)
        batch = self._lead_batch
        s = self.lead
        rounds = [(output, batch, self._lead_rows)]
        if self.model.training:
            rounds = self._refill(inputs, rounds)
        G = self.num_generations
        plan = None
        if len(rounds) > 1:
            output, batch, plan = self._join(rounds)
        sampled = self._sampling_metrics(rounds, batch) if self.model.training else {}
        advantages = lead_advantages(
            batch["rewards"],
            self.num_generations,
            reweight=s.reweight,
            drop_uninformative=s.drop_uninformative,
            scale_by_std=s.scale_by_std,
        )
        local = len(output["advantages"])
        start = self.accelerator.process_index * local
        output["advantages"] = torch.tensor(
            advantages[start : start + local],
            dtype=output["advantages"].dtype,
            device=output["advantages"].device,
        )
        self._lead_rows["reward"] = batch["rewards"][start : start + local].tolist()
        self._lead_rows["advantage"] = advantages[start : start + local].tolist()
        # TRL buffered its own advantages for the completions table; it prints them only at the next log.
        overwrite_logged_advantages(
            self,
            advantages.tolist()
            if plan is None
            else refill.logged_advantages(
                [b for _, b, _ in rounds], plan, advantages, G, self.accelerator.num_processes
            ),
        )
        record_metrics(
            self,
            "train" if self.model.training else "eval",
            {
                **lead_metrics(batch, advantages, self.num_generations),
                **self._lead_grader,
                **sampled,
                "lead/step_seconds": time.perf_counter() - started,
            },
        )
        return output

    # -- dynamic sampling (lead.core.dynamic_sampling) --------------------------------------------------------
    def _refill(
        self, inputs: list[dict[str, Any]], rounds: list[tuple[Any, Any, Any]]
    ) -> list[tuple[Any, Any, Any]]:
        """With ``dynamic_sampling`` on, generate and score further prompts of the pool, round after round, until
        every process holds as many informative groups as its batch has groups (or the rounds run out); each round
        is TRL's own generation and scoring, so its rewards are LEAD's. The rounds, first one first."""
        s, G = self.lead, self.num_generations
        if not s.dynamic_sampling:
            return rounds
        processes = self.accelerator.num_processes
        # This process's groups: the same number on every process, whole (grpo_config_kwargs refuses other splits).
        groups = len(inputs) // G
        flags = [~uninformative_groups(rounds[0][1]["rewards"], G)]
        # The step's own prompts (every process's) are not drawn again.
        taken = {self._pool_row.get(row_id) for row_id in gather_object([x.get("id") for x in inputs[::G]])}
        for round_ in range(1, s.max_refill_rounds + 1):
            deficit = max(dynamic_sampling.deficits(flags, processes, groups))
            share = float(np.concatenate(flags).mean())
            count = dynamic_sampling.round_prompts(deficit, share, groups)
            if not count:
                break
            drawn = dynamic_sampling.refill_indices(
                len(self.train_dataset),
                count * processes,
                seed=self.args.seed,
                step=self.state.global_step,
                round_=round_,
                exclude=frozenset(taken - {None}),
            )
            if len(drawn) < count * processes:  # the pool is spent for this step
                break
            taken.update(drawn)
            mine = drawn[
                self.accelerator.process_index * count : (self.accelerator.process_index + 1) * count
            ]
            more = [self.train_dataset[i] for i in mine for _ in range(G)]
            output = super()._generate_and_score_completions(more)
            rounds.append((output, self._lead_batch, self._lead_rows))
            flags.append(~uninformative_groups(self._lead_batch["rewards"], G))
        return rounds

    def _join(self, rounds: list[tuple[Any, Any, Any]]) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
        """The step's batch from its rounds (:func:`lead.core.dynamic_sampling.plan`): this process's output, the
        gathered arrays, the plan; ``_lead_rows`` and ``num_items_in_batch`` follow the kept groups."""
        G, processes = self.num_generations, self.accelerator.num_processes
        outputs, batches, rows = zip(*rounds, strict=True)
        groups = len(outputs[0]["completion_ids"]) // G
        plan = dynamic_sampling.plan(
            [~uninformative_groups(b["rewards"], G) for b in batches], processes, groups
        )
        mine = plan.picks[self.accelerator.process_index]
        output = refill.join_outputs(outputs, mine, G, self._tokenizer.pad_token_id)
        loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        self._lead_rows = {key: [rows[r][key][i] for r, i in refill.rows_of(mine, G)] for key in rows[0]}
        return output, refill.gathered_batch(batches, plan, G, processes), plan

    def _sampling_metrics(
        self, rounds: list[tuple[Any, Any, Any]], trained: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """What the step generated: the informative share of its first batch, the refill rounds, the prompts
        drawn and the completion tokens of every round (all processes), and those tokens per informative group of
        the ``trained`` batch; with dynamic sampling, the groups it trains on without a signal (rounds ran out)."""
        G = self.num_generations
        batches = [b for _, b, _ in rounds]
        tokens = float(sum(b["lengths"].sum() for b in batches))
        unsignalled = float(uninformative_groups(trained["rewards"], G).sum())
        return {
            "dynamic/informative_share": float((~uninformative_groups(batches[0]["rewards"], G)).mean()),
            "dynamic/refill_rounds": float(len(rounds) - 1),
            "dynamic/prompts_drawn": float(sum(len(b["rewards"]) // G for b in batches)),
            "dynamic/completion_tokens": tokens,
            "dynamic/tokens_per_informative_group": tokens
            / max(len(trained["rewards"]) // G - unsignalled, 1.0),
            **({"dynamic/short_groups": unsignalled} if self.lead.dynamic_sampling else {}),
        }
