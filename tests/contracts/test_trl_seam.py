"""Contract: the private TRL methods LEADTrainer overrides still exist with the shapes it relies on.

TRL is pinned exactly (trl==1.16.0); this test is what fails, loudly, when an upgrade moves the seam.
"""

import inspect

import trl
from trl import GRPOTrainer

from lead.training.trainer import LEADTrainer


def test_trl_version_is_the_pinned_one():
    assert trl.__version__ == "1.16.0", (
        "LEADTrainer overrides TRL private methods: re-check the seam, then the pin"
    )


def test_overridden_methods_keep_their_signatures():
    expected = {
        "_calculate_rewards": ["self", "inputs", "prompts", "completions", "completion_ids_list"],
        "_generate_and_score_completions": ["self", "inputs"],
        "_get_train_sampler": ["self", "dataset"],
    }
    for name, params in expected.items():
        assert name in GRPOTrainer.__dict__, f"GRPOTrainer.{name} is gone"
        assert list(inspect.signature(getattr(GRPOTrainer, name)).parameters) == params, name
        assert name in LEADTrainer.__dict__


def test_the_train_sampler_draws_one_permutation_per_epoch_from_its_own_generator():
    """EpochSampler replays TRL's RepeatSampler: one torch.randperm per __iter__ from a generator seeded once."""
    from trl.trainer.utils import RepeatSampler

    source = inspect.getsource(RepeatSampler)
    assert "self.generator.manual_seed(seed)" in source
    assert "torch.randperm(self.num_samples, generator=self.generator)" in source
    assert "return RepeatSampler(" in inspect.getsource(GRPOTrainer._get_train_sampler)


def test_the_batch_dict_and_buffers_we_touch_still_exist():
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    # We replace output["advantages"] (local slice); the buffered ones: tests/contracts/test_patches.py.
    assert '"advantages": advantages' in source
    # Rewards come back gathered from _calculate_rewards and are sliced per process afterwards.
    assert (
        "rewards_per_func = self._calculate_rewards(inputs, prompts, completions, completion_ids_list)"
        in source
    )
    assert "process_slice" in source
    assert "self.eos_token_ids" in inspect.getsource(GRPOTrainer)
