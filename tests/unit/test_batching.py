"""train.micro_batch_tokens: completions per optimizer step split into micro-batches that fit a token budget,
and what reaches TRL's GRPOConfig (built without a GPU or a model)."""

import pytest

from lead.config import ParamsError, load_params, recipe_overrides
from lead.training.batching import Batching, micro_batching
from tests.conftest import ROOT

# (batch_size, G, world, tokens per sequence, budget) -> (per_device, accumulation, eval_per_device)
CASES = [
    (
        (64, 8, 1, 512, None),
        (64, 1, 64),
    ),  # no budget: the whole share at once (the behaviour before the knob)
    ((256, 8, 8, 13312, None), (32, 1, 32)),
    ((256, 8, 8, 13312, 13312), (1, 32, 1)),  # the 7B recipe: one longest sequence per GPU
    ((256, 8, 8, 13312, 13311), (1, 32, 1)),  # under one sequence: still one at a time
    ((256, 8, 8, 1000, 8000), (8, 4, 8)),
    ((256, 8, 8, 1000, 3000), (2, 16, 2)),  # 3 fit but do not divide the share of 32: 2
    ((256, 8, 8, 1000, 10**6), (32, 1, 32)),  # a budget above the share changes nothing
    ((224, 8, 7, 13312, 13312), (1, 32, 8)),  # 7 processes: validation needs whole groups, 8 x 7 = 7 groups
    ((64, 8, 2, 100, 300), (2, 16, 4)),  # validation: 4 per process x 2 = one group of 8
    ((48, 4, 2, 100, 900), (8, 3, 8)),
]


@pytest.mark.parametrize(("args", "expected"), CASES)
def test_micro_batching_splits_the_share_within_the_budget(args, expected):
    batch_size, groups, world, sequence, budget = args
    got = micro_batching(*args)
    assert (got.per_device, got.accumulation, got.eval_per_device) == expected
    # The same completions per optimizer step, in one generation of whole groups (TRL's rules).
    assert got.per_device * got.accumulation * world == batch_size
    assert (got.per_device * world * got.accumulation) % groups == 0
    assert (got.eval_per_device * world) % groups == 0
    if budget is not None and budget >= sequence:
        assert got.per_device * sequence <= budget


def test_a_batch_that_the_processes_cannot_share_is_a_params_error_naming_the_knob():
    with pytest.raises(
        ParamsError, match=r"train.batch_size = 256: must be a multiple of the 7 training"
    ) as err:
        micro_batching(256, 8, 7, 1000, None)
    assert "e.g. 224 or 280" in str(err.value)  # multiples of both G = 8 and 7 processes
    with pytest.raises(ParamsError, match=r"e.g. 12 \(multiples"):  # no lower multiple of 12
        micro_batching(8, 4, 3, 100, 100)


def _recipe_params(name: str):
    return load_params(ROOT / "params.yaml", recipe_overrides(ROOT / "recipes" / name))


@pytest.mark.parametrize("name", ["grpo-lead-7b.yaml", "grpo-lead-14b.yaml"])
def test_scale_recipes_reach_trl_with_micro_batches_within_the_token_budget(name, tmp_path, monkeypatch):
    """The issue's acceptance: the recipe on the 8 processes of infra/accelerate/zero3.yaml gives a GRPOConfig
    whose per-device micro-batch x (prompt + completion tokens) fits train.micro_batch_tokens, with the same
    256 completions per optimizer step (one generation)."""
    import yaml
    from trl import GRPOConfig

    from lead.training.grpo_config import grpo_config_kwargs

    world = yaml.safe_load((ROOT / "infra/accelerate/zero3.yaml").read_text())["num_processes"]
    assert world == 8
    params = _recipe_params(name)
    t = params.train
    kwargs = grpo_config_kwargs(
        t, tmp_path, max_prompt_tokens=params.curate.max_prompt_tokens, world=world, cuda=False
    )
    # TRL's own checks, for 8 processes without launching them (WORLD_SIZE alone would make accelerate look
    # for a process group).
    monkeypatch.setattr(GRPOConfig, "world_size", property(lambda self: world))
    config = GRPOConfig(**kwargs)
    sequence = params.curate.max_prompt_tokens + t.max_completion_length
    assert t.micro_batch_tokens == 13312 and sequence == 1024 + 12288
    assert config.per_device_train_batch_size * sequence <= t.micro_batch_tokens
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps) == (1, 32)
    per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps * world
    assert per_step == config.generation_batch_size == t.batch_size == 256
    assert config.steps_per_generation == config.gradient_accumulation_steps  # one generation per step
    assert config.per_device_eval_batch_size == 1
    # vLLM's batch is the whole share, as before: micro-batches change the backward pass only.
    assert config.per_device_train_batch_size * config.steps_per_generation == 256 // world


def test_without_a_budget_the_grpo_config_is_the_one_micro_batch_of_before(tmp_path):
    from lead.training.grpo_config import grpo_config_kwargs

    params = load_params(ROOT / "params.yaml")
    assert params.train.micro_batch_tokens is None
    kwargs = grpo_config_kwargs(
        params.train, tmp_path, max_prompt_tokens=params.curate.max_prompt_tokens, world=2, cuda=False
    )
    assert (kwargs["per_device_train_batch_size"], kwargs["gradient_accumulation_steps"]) == (32, 1)
    assert kwargs["steps_per_generation"] == 1 and kwargs["per_device_eval_batch_size"] == 32
    assert micro_batching(64, 8, 2, 512, None) == Batching(per_device=32, accumulation=1, eval_per_device=32)
