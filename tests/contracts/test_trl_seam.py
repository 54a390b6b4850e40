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
    # We replace output["advantages"] (local slice) and rewrite the buffered advantages for the completions table.
    assert '"advantages": advantages' in source
    assert 'self._logs["advantages"].extend(all_process_advantages.tolist())' in source
    # Rewards come back gathered from _calculate_rewards and are sliced per process afterwards.
    assert (
        "rewards_per_func = self._calculate_rewards(inputs, prompts, completions, completion_ids_list)"
        in source
    )
    assert "process_slice" in source
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "self._logs = {" in init and "self._metrics" in init
    assert "self.eos_token_ids" in inspect.getsource(GRPOTrainer)


def test_the_cpu_gemm_dispatch_that_live_weights_replaces_is_where_vllm_looks_it_up():
    """lead.training.vllm_cpu replaces vLLM's CPU GEMM dispatch by module attribute: it acts only if vLLM keeps
    the function there, looks it up there when a layer's weights are processed, and computes a CPU linear layer
    as ``layer.cpu_linear(x, weight, bias)``; and TRL's colocated sync loads weights into that same model."""
    import importlib

    from trl.generation.vllm_generation import VLLMGeneration
    from vllm.model_executor.layers import linear, utils, vocab_parallel_embedding

    from lead.training.vllm_cpu import SEAM, SEAM_MODULE

    module = importlib.import_module(SEAM_MODULE)
    assert list(inspect.signature(getattr(module, SEAM)).parameters) == ["layer", "remove_weight"]
    lookup = f"from {SEAM_MODULE} import {SEAM}"  # inside the method: the attribute is read at each call
    for method in (
        linear.UnquantizedLinearMethod.process_weights_after_loading,
        vocab_parallel_embedding.UnquantizedEmbeddingMethod.process_weights_after_loading,
    ):
        assert lookup in inspect.getsource(method), method.__qualname__
    assert "layer.cpu_linear(x, weight, bias)" in inspect.getsource(utils.cpu_unquantized_gemm)
    assert "model_runner.model.load_weights" in inspect.getsource(VLLMGeneration.sync_weights)


def test_trls_colocated_engine_is_built_from_the_name_eager_engine_replaces():
    """lead.training.vllm_cpu.eager_engine replaces the engine class in TRL's generation module: it acts only if
    TRL builds its colocated engine by calling that module-level name, and vLLM's engine takes ``enforce_eager``."""
    import importlib

    from vllm import LLM

    from lead.training.lazy_vllm import match_trl_to
    from lead.training.vllm_cpu import ENGINE, ENGINE_MODULE, eager_engine

    match_trl_to(True)
    module = importlib.import_module(ENGINE_MODULE)
    assert getattr(module, ENGINE) is LLM
    assert f"self.llm = {ENGINE}(" in inspect.getsource(module.VLLMGeneration)
    assert "enforce_eager" in inspect.signature(LLM.__init__).parameters
    with eager_engine():
        assert getattr(module, ENGINE) is not LLM
    assert getattr(module, ENGINE) is LLM


def test_a_trainer_without_vllm_leaves_it_unimported_and_one_with_it_gets_trl_whole_again():
    """lead.training.lazy_vllm: TRL's generation modules imported while its vLLM check answers False import no
    vLLM (nothing else in GRPOTrainer's imports does either); re-executed for a vLLM trainer, they import it and
    hold its names again. In a fresh interpreter: this module's own imports already brought vLLM in."""
    import subprocess
    import sys

    code = """
import sys
from lead.training.lazy_vllm import match_trl_to
match_trl_to(False)
from trl import GRPOTrainer
import trl.generation.vllm_generation as generation
assert "vllm" not in sys.modules, "something imported vLLM: the start-up saving is gone"
assert not hasattr(generation, "LLM")
match_trl_to(True)
import vllm
import trl.generation
assert generation.LLM is vllm.LLM and generation.is_vllm_available()
assert trl.generation.VLLMGeneration is generation.VLLMGeneration
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
