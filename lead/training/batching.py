"""How one optimizer step's completions are split over the processes and their micro-batches (pure: no torch, TRL).

An optimizer step trains on ``train.batch_size`` completions, sampled in one generation (on-policy: TRL's
``generation_batch_size`` = ``batch_size``). Each process holds ``share = batch_size / world`` of them. With
``train.micro_batch_tokens`` unset, a process runs its whole share in one forward/backward; set, it runs
``accumulation`` micro-batches of ``per_device`` completions each and the gradients add up
(``gradient_accumulation_steps``; TRL's losses are normalised per accumulation window, so the step is the
same), which bounds the tokens on one device at once by ``per_device`` times the longest sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lead.config import ParamsError


@dataclass(frozen=True)
class Batching:
    """TRL's batch arguments: ``per_device`` = ``per_device_train_batch_size``, ``accumulation`` =
    ``gradient_accumulation_steps`` = ``steps_per_generation`` (one generation per optimizer step),
    ``eval_per_device`` = ``per_device_eval_batch_size``."""

    per_device: int
    accumulation: int
    eval_per_device: int


def micro_batching(
    batch_size: int,
    num_generations: int,
    world: int,
    sequence_tokens: int,
    micro_batch_tokens: int | None,
) -> Batching:
    """Split ``batch_size`` completions per optimizer step over ``world`` processes and micro-batches of at most
    ``micro_batch_tokens`` tokens, each completion counted at ``sequence_tokens`` (prompt bound + completion
    bound: a micro-batch is padded to its longest sequence).

    * ``share = batch_size / world``, completions per process per step; a :class:`ParamsError` naming
      ``train.batch_size`` unless whole (TRL would otherwise train on fewer completions, or refuse);
    * ``fit = max(1, micro_batch_tokens // sequence_tokens)``, completions a micro-batch holds (``share`` when
      ``micro_batch_tokens`` is None: one micro-batch, as before the knob; never below one completion, so a
      budget under one sequence runs one at a time);
    * ``per_device`` = the largest divisor of ``share`` that is ``<= fit``, ``accumulation = share / per_device``:
      ``per_device * accumulation * world = batch_size`` exactly, so TRL's ``generation_batch_size`` (=
      ``per_device * world * steps_per_generation``) is ``batch_size``, which ``num_generations`` divides (a
      params rule): whole groups, the same completions per step;
    * validation runs on ``eval_per_device`` completions per process, which TRL needs in whole groups over the
      processes (``eval_per_device * world`` a multiple of G): ``q = G / gcd(G, world)`` and
      ``eval_per_device = max(q, (per_device // q) * q)``, within the budget unless ``q`` alone exceeds it
      (``share`` without the knob; ``q`` divides ``share``, so this never exceeds it).

    >>> micro_batching(256, 8, 8, 1024 + 12288, 13312)  # the 7B recipe on one 8-GPU node
    Batching(per_device=1, accumulation=32, eval_per_device=1)
    >>> micro_batching(64, 8, 1, 256 + 256, None)  # no budget: the whole share at once
    Batching(per_device=64, accumulation=1, eval_per_device=64)
    >>> micro_batching(256, 8, 8, 1000, 3000)  # 3 fit, 3 does not divide 32: 2 per micro-batch
    Batching(per_device=2, accumulation=16, eval_per_device=2)
    """
    if world < 1:
        raise ValueError(f"world = {world}: there is at least one process")
    if batch_size % world:
        step = math.lcm(world, num_generations)
        lower, higher = batch_size // step * step, (batch_size // step + 1) * step
        hint = f"{lower} or {higher}" if lower else str(higher)
        raise ParamsError(
            f"train.batch_size = {batch_size}: must be a multiple of the {world} training processes (WORLD_SIZE) "
            f"so that each trains on the same share of completions, e.g. {hint} (multiples of both "
            f"num_generations = {num_generations} and {world})"
        )
    share = batch_size // world
    fit = share if micro_batch_tokens is None else max(1, micro_batch_tokens // sequence_tokens)
    per_device = max(d for d in range(1, min(fit, share) + 1) if share % d == 0)
    q = num_generations // math.gcd(num_generations, world)
    eval_per_device = share if micro_batch_tokens is None else max(q, per_device // q * q)
    return Batching(per_device=per_device, accumulation=share // per_device, eval_per_device=eval_per_device)
