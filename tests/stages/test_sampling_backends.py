"""Both generation backends load the locally built model and return completions in one format."""

import os

import pytest

from lead.io.sampling import (
    CPU_ENGINE_ARGS,
    CPU_ENGINE_ENV,
    Completion,
    SamplingSpec,
    TransformersSampler,
    make_sampler,
    user_message,
)
from tests.conftest import SUFFIX


def _messages(problems):
    return [user_message(p.question, SUFFIX) for p in problems[:3]]


def test_transformers_backend_samples_n_per_prompt(tiny_model):
    path, problems = tiny_model
    sampler = TransformersSampler(path)
    done = []
    groups = sampler.sample(
        _messages(problems),
        SamplingSpec(n=4, max_new_tokens=12, seed=1),
        progress=done.append,
    )
    assert [len(g) for g in groups] == [4, 4, 4]
    assert sum(done) == 3
    assert all(isinstance(c, Completion) and 1 <= c.num_tokens <= 12 for g in groups for c in g)
    again = sampler.sample(_messages(problems), SamplingSpec(n=4, max_new_tokens=12, seed=1))
    assert again == groups  # same seed, same completions
    # A prompt's completions are its own: sampled alone (a problem resampled after a torn cache line), the same.
    alone = sampler.sample(_messages(problems)[1:2], SamplingSpec(n=4, max_new_tokens=12, seed=1))
    assert alone == groups[1:2]


def test_unknown_backend_is_a_clear_error(tiny_model):
    with pytest.raises(ValueError, match="allowed: auto, vllm, transformers"):
        make_sampler(tiny_model[0], "onnx")


def test_importing_vllm_after_lead_prints_nothing():
    """vLLM warns about Triton while it imports, before its logger reads VLLM_LOGGING_LEVEL: every stage that
    generates printed "Triton is installed, but `triton.backends` could not be imported" (lead -v keeps it)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_LOGGING_LEVEL", "LEAD_VERBOSE")}
    code = "import lead, vllm.triton_utils, vllm.model_executor"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout + done.stderr == ""


@pytest.mark.slow
def test_vllm_cpu_serves_the_tiny_model(tiny_model, capfd):
    """The saved model loads in vLLM (head_dim >= 32, HF layout, our tokenizer) and samples, without its
    weight-loading bar ("Loading safetensors checkpoint shards": ours show the progress)."""
    import torch

    path, problems = tiny_model
    set_num_threads = torch.set_num_threads
    environment = {key: os.environ.get(key) for key in CPU_ENGINE_ENV}
    sampler = make_sampler(path, "vllm")
    # The CPU engine runs in this process, and the settings that put it there do not leak into the
    # environment of anything started later.
    assert {key: os.environ.get(key) for key in CPU_ENGINE_ENV} == environment
    scheduler = sampler.llm.llm_engine.vllm_config.scheduler_config
    assert (scheduler.max_num_seqs, scheduler.max_num_batched_tokens) == (
        CPU_ENGINE_ARGS["max_num_seqs"],
        CPU_ENGINE_ARGS["max_num_batched_tokens"],
    )
    printed = capfd.readouterr()
    assert "Loading safetensors" not in printed.out + printed.err
    groups = sampler.sample(_messages(problems), SamplingSpec(n=4, max_new_tokens=16, seed=0))
    assert [len(g) for g in groups] == [4, 4, 4]
    assert all(1 <= c.num_tokens <= 16 and isinstance(c.text, str) for g in groups for c in g)
    sampler.close()
    sampler.close()  # idempotent
    assert torch.set_num_threads is set_num_threads  # vLLM's CPU worker replaced it while the engine ran
    # With the first engine stopped, a second one starts in the same process (`lead pipeline` runs calibrate
    # then evaluate in one process; `lead ablation` evaluates every variant in one).
    again = make_sampler(path, "vllm")
    assert [len(g) for g in again.sample(_messages(problems), SamplingSpec(n=2, max_new_tokens=4))] == [
        2,
        2,
        2,
    ]


def test_prompt_seeds_differ_between_prompts_and_follow_the_run_seed():
    from lead.io.sampling import prompt_seed

    seeds = {prompt_seed(0, f"problem {i}") for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**31 for s in seeds)
    assert prompt_seed(0, "a") == prompt_seed(0, "a") != prompt_seed(1, "a")


def test_engine_environment_defaults_yield_to_the_users_values(monkeypatch):
    from lead.io.sampling import _environ_defaults

    monkeypatch.setenv("LEAD_TEST_SET", "user")
    monkeypatch.delenv("LEAD_TEST_UNSET", raising=False)
    with _environ_defaults({"LEAD_TEST_SET": "ours", "LEAD_TEST_UNSET": "ours"}):
        assert (os.environ["LEAD_TEST_SET"], os.environ["LEAD_TEST_UNSET"]) == ("user", "ours")
    assert os.environ["LEAD_TEST_SET"] == "user" and "LEAD_TEST_UNSET" not in os.environ


def test_the_generation_server_gets_the_in_process_engine_settings():
    """`lead serve`'s command line, read by vLLM's own server parser, sets what the in-process engine gets on
    CPU (a flag vLLM renamed, or a value rendered wrong, fails here rather than in a server that starts with
    other settings)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.platforms import current_platform
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from lead.io.sampling import serve_command

    if not current_platform.is_cpu():
        pytest.skip("the CPU engine settings apply on CPU only")
    argv, _ = serve_command("/models/tiny", "tiny", dtype="float32", host="127.0.0.1", port=8000)
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[3:])
    assert {key: getattr(parsed, key) for key in CPU_ENGINE_ARGS} == CPU_ENGINE_ARGS
