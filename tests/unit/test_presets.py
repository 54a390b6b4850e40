"""Presets and ablation switches resolve to the documented settings."""

import pytest

from lead.config import CurateParams, TrainParams
from lead.training.presets import resolve

BOUND = CurateParams().max_prompt_tokens  # the prompt bound GRPOConfig's vLLM context is sized from


def test_faithful_is_the_reference_code():
    r = resolve(TrainParams(preset="faithful"))
    s = r.lead
    assert (s.correct, s.wrong, s.unfinished, s.degenerate) == (1.0, -1.0, 0.0, -2.0)
    assert (
        s.rules.extraction == "boxed_before_think"
        and s.length_gate == 4000
        and s.alpha == 0.05
        and s.reweight
    )
    assert s.rules.truncation == "graded"  # the reference code never looks at the token limit
    assert (r.loss_type, r.learning_rate, r.entropy_coef, r.epsilon_high) == ("grpo", 1e-6, 0.001, 0.2)
    assert not r.mask_truncated


def test_paper_scores_only_correct_or_incorrect_and_has_no_gate():
    s = resolve(TrainParams(preset="paper")).lead
    assert (s.wrong, s.unfinished, s.degenerate) == (-1.0, -1.0, -1.0)
    assert s.length_gate is None and s.rules.extraction == "boxed" and s.rules.truncation == "unfinished"


def test_improved_grades_cut_completions_with_dapo_and_clip_higher():
    r = resolve(TrainParams(preset="improved"))
    assert r.lead.rules.truncation == "graded" and r.loss_type == "dapo" and r.epsilon_high == 0.28
    assert resolve(TrainParams(preset="improved", truncation="mask")).mask_truncated


@pytest.mark.parametrize(
    ("switches", "alpha", "wrong", "reweight"),
    [
        ({"length_reward": False, "penalty": False, "reweight": False}, 0.0, 0.0, False),  # GRPO
        ({"penalty": False, "reweight": False}, 0.05, 0.0, False),  # GRPO + L
        ({"penalty": False}, 0.05, 0.0, True),  # GRPO + L + AD
        ({}, 0.05, -1.0, True),  # GRPO-LEAD
    ],
)
def test_ablation_switches(switches, alpha, wrong, reweight):
    s = resolve(TrainParams(preset="paper", **switches)).lead
    assert (s.alpha, s.wrong, s.reweight) == (alpha, wrong, reweight)
    if not switches.get("penalty", True):
        assert s.unfinished == s.degenerate == 0.0


def test_dr_grpo_drops_the_std_scaling_of_the_advantage():
    assert resolve(TrainParams(preset="paper")).lead.scale_by_std
    assert not resolve(TrainParams(preset="paper", loss_type="dr_grpo")).lead.scale_by_std


@pytest.mark.parametrize(("preset", "on"), [("faithful", False), ("paper", False), ("improved", True)])
def test_vllm_importance_sampling_correction_is_the_presets_and_reaches_trl(preset, on, tmp_path):
    from lead.training.grpo_config import grpo_config

    r = resolve(TrainParams(preset=preset))
    assert (
        r.vllm_importance_sampling_correction is on
        and r.record()["vllm_importance_sampling_correction"] is on
    )
    train = TrainParams(preset=preset, vllm_importance_sampling_correction=not on)
    explicit = grpo_config(train, tmp_path, max_prompt_tokens=BOUND).vllm_importance_sampling_correction
    assert explicit is (not on)  # explicit wins


def test_explicit_params_override_the_preset():
    r = resolve(TrainParams(preset="faithful", learning_rate=3e-5, length_gate_tokens=0, loss_type="dapo"))
    assert (r.learning_rate, r.lead.length_gate, r.loss_type) == (3e-5, None, "dapo")


@pytest.mark.parametrize("name", ["grpo-lead-14b.yaml", "grpo-lead-7b.yaml"])
def test_scale_recipes_are_valid_and_follow_the_paper(name):
    from lead.cli import _recipe_overrides
    from lead.config import load_params
    from tests.conftest import ROOT

    params = load_params(ROOT / "params.yaml", _recipe_overrides(ROOT / "recipes" / name))
    t = params.train
    assert t.preset == "faithful" and resolve(t).learning_rate == 1e-6 and t.temperature == 0.8
    assert t.batch_size == 256 and t.num_generations == 8 and t.max_completion_length == 12288
    assert t.stage2.enabled and t.stage2.max_pass_rate == 0.75 and t.stage2_train().length_reward is False
    assert t.stage2_train().repetition_penalty == -1.5 and t.repetition_penalty is None
    assert t.use_vllm and t.bf16 and t.checkpoint == "best" and t.alpha == 0.05
    assert params.evaluate.model == "train_stage2"  # evaluated and registered after the curriculum's stage 2


@pytest.mark.parametrize("name", ["grpo-lead-14b.yaml", "grpo-lead-7b.yaml"])
def test_scale_recipes_reach_trl_with_a_bounded_vllm_context(name, tmp_path):
    from lead.cli import _recipe_overrides
    from lead.config import load_params
    from lead.training.grpo_config import CHAT_TEMPLATE_TOKENS, grpo_config
    from tests.conftest import ROOT

    params = load_params(ROOT / "params.yaml", _recipe_overrides(ROOT / "recipes" / name))
    bound = params.curate.max_prompt_tokens
    config = grpo_config(params.train, tmp_path, max_prompt_tokens=bound)
    t = params.train
    assert config.use_vllm and config.vllm_mode == "colocate" and config.vllm_enable_sleep_mode
    assert (config.vllm_gpu_memory_utilization, config.vllm_tensor_parallel_size) == (
        t.vllm_gpu_memory_utilization,
        t.vllm_tensor_parallel_size,
    )
    # The longest prompt curate lets through, its chat template and the completion budget; not the model's 131k.
    assert config.vllm_max_model_length == 1024 + CHAT_TEMPLATE_TOKENS + 12288
    # ... and never past the model's own context, which vLLM would refuse.
    assert grpo_config(t, tmp_path, max_prompt_tokens=bound, context=4096).vllm_max_model_length == 4096


@pytest.mark.parametrize("preset", ["faithful", "paper", "improved"])
def test_repetition_penalty_scores_loops_anywhere_even_with_e_off(preset):
    from lead.core.outcomes import Outcome
    from lead.training.trainer import classify

    assert resolve(TrainParams(preset=preset)).lead.rules.loops == "unfinished"
    s = resolve(TrainParams(preset=preset, penalty=False, repetition_penalty=-1.5)).lead
    assert s.rules.loops == "anywhere" and s.degenerate == -1.5 and s.wrong == 0.0
    # The answer is boxed inside and after the reasoning: correct under every preset's grading rule.
    loop = "<think>" + "let me check again " * 12 + "so \\boxed{4}</think> \\boxed{4}"
    plain = "<think>2 + 2 = 4, so \\boxed{4}</think> \\boxed{4}"
    assert classify([loop, plain], ["4", "4"], [False, False], s)[0] == [Outcome.DEGENERATE, Outcome.CORRECT]
    # Without the knob a finished loop is graded like any answer (the reference code's rule).
    off = resolve(TrainParams(preset=preset, penalty=False)).lead
    assert classify([loop], ["4"], [False], off)[0] == [Outcome.CORRECT]


@pytest.mark.parametrize("recipe", [None, "grpo-lead-7b.yaml"])
def test_grpo_configs_table_sets_real_fields_from_params_keys_that_exist(recipe, tmp_path):
    """Each row of the table is a field of TRL's GRPOConfig, set once, from params keys that exist (or fixed,
    saying why); GRPOConfig takes the arguments the table builds."""
    import dataclasses
    import re

    from trl import GRPOConfig

    from lead.config import load_params, recipe_overrides
    from lead.training.grpo_config import PIPELINE_KEYS, SETTINGS, grpo_config_kwargs
    from tests.conftest import ROOT

    fields = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    names = [s.field for s in SETTINGS]
    assert len(names) == len(set(names)) and set(names) <= fields, set(names) - fields
    overrides = recipe_overrides(ROOT / "recipes" / recipe) if recipe else []
    params = load_params(ROOT / "params.yaml", overrides)
    data = params.model_dump()
    for setting in SETTINGS:
        if setting.source.startswith("fixed: "):
            continue
        keys = re.findall(r"\b(?:train|curate)\.\w+", setting.source)
        assert keys, setting
        for key in keys:
            section, name = key.split(".")
            assert name in data[section], f"{setting.field}: {key} is not a params key"
    bound = params.curate.max_prompt_tokens
    kwargs = grpo_config_kwargs(params.train, tmp_path, max_prompt_tokens=bound, world=1, cuda=False)
    assert list(kwargs) == names and set(PIPELINE_KEYS) == set(names)
    GRPOConfig(**kwargs)  # TRL accepts every value the table computes


def test_a_train_knob_reaches_grpo_config_through_its_row(tmp_path):
    from lead.training.grpo_config import grpo_config_kwargs

    train = TrainParams(temperature=0.7, learning_rate=3e-6, save_steps=7, dev_problems=0)
    kwargs = grpo_config_kwargs(train, tmp_path, max_prompt_tokens=BOUND, world=1, cuda=False)
    assert (kwargs["temperature"], kwargs["learning_rate"], kwargs["save_steps"]) == (0.7, 3e-6, 7)
    assert (kwargs["eval_strategy"], kwargs["top_k"], kwargs["data_seed"]) == ("no", 0, train.seed)
    improved = TrainParams(preset="improved")
    unset = grpo_config_kwargs(improved, tmp_path, max_prompt_tokens=BOUND, world=1, cuda=False)
    assert (unset["loss_type"], unset["epsilon_high"]) == (
        "dapo",
        0.28,
    )  # the preset's, where params say nothing


def test_other_grpo_config_fields_pass_through_and_the_pipelines_own_are_refused_with_the_key_to_use(
    tmp_path,
):
    from lead.config import ParamsError, PathParams
    from lead.training.grpo_config import check_train_settings, grpo_config

    def params(**grpo):
        return TrainParams(grpo_config=grpo)

    def check(train: TrainParams) -> None:
        check_train_settings(train, PathParams(), max_prompt_tokens=BOUND)

    config = grpo_config(params(adam_beta2=0.99, logging_first_step=True), tmp_path, max_prompt_tokens=BOUND)
    assert config.adam_beta2 == 0.99 and config.logging_first_step is True
    with pytest.raises(ParamsError) as clash:
        check(params(learning_rate=0.1, top_k=5))
    assert str(clash.value).splitlines() == [
        "train.grpo_config.learning_rate: set by the pipeline; use train.learning_rate instead",
        "train.grpo_config.top_k: set by the pipeline; it is fixed: 0, rollouts sample the whole distribution "
        "(train.top_p narrows it)",
    ]
    with pytest.raises(ParamsError) as unknown:
        check(params(adam_beta3=0.9))
    first, fields = str(unknown.value).splitlines()
    assert (
        first == "train.grpo_config.adam_beta3: not a field of TRL's GRPOConfig (did you mean 'adam_beta2'?)"
    )
    assert fields.startswith("the GRPOConfig fields train.grpo_config may set: ") and "adam_beta1" in fields
    assert "learning_rate" not in fields  # the pipeline's own are not on offer
    with pytest.raises(
        ParamsError, match="TRL's GRPOConfig refuses these settings: vllm_importance_sampling_clip"
    ):
        check(params(vllm_importance_sampling_clip_min=5.0, vllm_importance_sampling_clip_max=1.0))
    # Stage 2's settings are checked with stage 1's.
    stage2 = TrainParams(stage2={"enabled": True, "overrides": {"grpo_config": {"beta": 0.1}}})
    with pytest.raises(
        ParamsError, match=r"train\.grpo_config\.beta: set by the pipeline; use train\.beta instead"
    ):
        check(stage2)


def test_the_train_stage_refuses_bad_trl_settings_before_any_work(small_params):
    from lead.config import ParamsError
    from lead.stages import train

    small_params.train.grpo_config = {"lerning_rate": 0.1}
    with pytest.raises(ParamsError) as err:
        train.run(small_params)
    assert str(err.value).splitlines()[0] == (
        "train.grpo_config.lerning_rate: not a field of TRL's GRPOConfig (did you mean 'learning_rate'? set by "
        "the pipeline; use train.learning_rate instead)"
    )
    assert not small_params.paths.models.exists() and not small_params.paths.curated.exists()
