"""params.yaml validation: the shipped file is valid, and every bad file stops with one precise message."""

import json
from pathlib import Path

import pytest
import yaml

from lead.config import (
    Params,
    ParamsError,
    apply_overrides,
    load_params,
    merge,
    recipe_overrides,
    section_type,
    set_path,
    yaml_fields,
)

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_params_are_valid_and_complete():
    params = load_params(ROOT / "params.yaml")
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    # Every section of the model is written out in the shipped file (it is the one place people edit).
    assert set(data) == {f.alias or name for name, f in Params.model_fields.items()}
    assert params.train.batch_size % params.train.num_generations == 0


# (what is wrong, the yaml, fragments the message must contain: key, value, what is allowed)
BAD = [
    (
        "unknown section",
        "trian: {max_steps: 3}",
        ["unknown key 'trian'", "did you mean 'train'", "allowed keys"],
    ),
    ("unknown key", "train: {lerning_rate: 0.1}", ["train.lerning_rate", "learning_rate"]),
    ("wrong type", "train: {max_steps: ten}", ["train.max_steps", "'ten'", "valid integer"]),
    ("out of range", "train: {learning_rate: -1}", ["train.learning_rate", "-1", "greater than 0"]),
    (
        "probability > 1",
        "warmstart: {verbosity: {slip: 1.5}}",
        ["warmstart.verbosity.slip", "1.5", "less than"],
    ),
    ("bad choice", "train: {preset: fast}", ["train.preset", "'fast'", "'faithful', 'paper' or 'improved'"]),
    ("unknown benchmark", "evaluate: {benchmarks: [aime]}", ["evaluate.benchmarks.0", "'aime'", "'aime24'"]),
    (
        "group does not divide the batch",
        "train: {num_generations: 6, batch_size: 64}",
        ["train.num_generations = 6", "must divide batch_size (64)"],
    ),
    (
        "micro-batches do not divide the batch",
        "warmstart: {batch_size: 32, micro_batches: 3}",
        ["warmstart.micro_batches = 3", "must divide batch_size (32)"],
    ),
    (
        "kv heads",
        "model: {tiny: {num_heads: 4, num_kv_heads: 3}}",
        ["model.tiny.num_kv_heads = 3", "num_heads (4)"],
    ),
    ("head_dim too small for vLLM", "model: {tiny: {head_dim: 16}}", ["model.tiny.head_dim", "16", "32"]),
    (
        "empty band",
        "calibrate: {min_pass_rate: 0.8, max_pass_rate: 0.2}",
        ["calibrate.min_pass_rate = 0.8", "< max"],
    ),
    ("levels", "curate: {proxy: {min_ops: 5, max_ops: 2}}", ["curate.proxy.min_ops = 5", "<= max_ops (2)"]),
    (
        "server is not a URL",
        "calibrate: {server: 'localhost:8000'}",
        ["calibrate.server", "localhost:8000", "http"],
    ),
    (
        "unknown key in a source entry",
        "curate: {sources: [{name: p, path: proxy, wieght: 2}]}",
        [
            "curate.sources.0.wieght",
            "did you mean 'curate.sources.0.weight'",
            "allowed keys here: name, path, weight",
        ],
    ),
    ("section is a scalar", "train: 3", ["train", "3", "valid dictionary"]),
    ("top level is a list", "- a\n- b", ["top level must be a mapping"]),
    ("not yaml", "train: {max_steps: [1,", ["not valid YAML"]),
    # YAML's true is not a count: pydantic alone reads it as 1 (one training step).
    ("boolean for a count", "train: {max_steps: true}", ["train.max_steps", "boolean"]),
    ("boolean in a list of seeds", "ablation: {seeds: [0, true]}", ["ablation.seeds", "boolean"]),
    ("negative seed", "train: {seed: -1}", ["train.seed", "-1", "greater than or equal to 0"]),
    ("seed past 32 bits", "curate: {seed: 4294967296}", ["curate.seed", "less than or equal to 4294967295"]),
    ("tracking uri without a scheme", "tracking: {uri: not a uri}", ["tracking.uri", "scheme"]),
    (
        "stage-2 model without stage 2",
        "evaluate: {model: train_stage2}",
        ["evaluate.model = 'train_stage2'", "train.stage2.enabled"],
    ),
    # Hostile or mistaken files, refused while reading, before any value is built (issue: trust at the edges).
    ("a string for a boolean", "train: {bf16: 'yes'}", ["train.bf16", "expected true or false", "'yes'"]),
    ("YAML 1.1's yes is a string, as DVC reads it", "train: {bf16: yes}", ["train.bf16", "'yes'"]),
    (
        "a key twice",
        "train:\n  max_steps: 3\n  max_steps: 4\n",
        ["line 3", "'max_steps' is given twice", "line 2"],
    ),
    ("an alias", "a: &x 3\ntrain: {max_steps: *x}", ["line 2", "alias *x"]),
    (
        "the proxy's warm start on another model",
        "model: {base: evil/model}",
        ["warmstart.dataset = 'proxy'", "needs model.base = 'tiny'", "evil/model"],
    ),
    (
        "a local folder that is no model",
        "model: {base: /etc}\nwarmstart: {enabled: false}",
        ["model.base = '/etc'", "no config.json"],
    ),
    (
        "remote code by the back door",
        "train: {grpo_config: {model_init_kwargs: {trust_remote_code: true}}}",
        ["train.grpo_config", "train.trust_remote_code"],
    ),
    (
        "a local store outside the workspace",
        "tracking: {uri: 'file:///tmp/elsewhere'}",
        ["tracking.uri", "outside"],
    ),
]


@pytest.mark.parametrize(("what", "text", "fragments"), BAD, ids=[b[0] for b in BAD])
def test_bad_params_stop_with_a_precise_message(tmp_path, what, text, fragments):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as info:
        load_params(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{what}: {fragment!r} not in {message!r}"


def test_a_yaml_alias_bomb_is_refused_at_once_before_any_expansion(tmp_path):
    # Nine levels of nine-way aliases are 9**9 values once walked; the reader refuses the first alias, in
    # milliseconds, whatever the section (pydantic's walk of a free-form dict such as grpo_config never starts).
    import resource
    import time

    lines = ['lol0: &lol0 "lol"']
    lines += [f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * 9)}]" for i in range(1, 10)]
    for where in ("train:\n  stage2:\n    overrides: {bomb: *lol9}", "train:\n  grpo_config: {bomb: *lol9}"):
        path = tmp_path / "params.yaml"
        path.write_text("\n".join(lines) + "\n" + where + "\n")
        before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
        with pytest.raises(ParamsError, match=r"line 2: the alias \*lol0 is not allowed"):
            load_params(path)
        assert time.perf_counter() - started < 1.0
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB


def test_a_params_file_that_is_not_utf8_or_too_large_is_one_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_bytes(b"train:\n  max_steps: 3\n  seed: \xff\n")
    with pytest.raises(ParamsError) as info:
        load_params(path)
    assert str(info.value) == f"{path}: not UTF-8 text (byte 0xff on line 3): save it as UTF-8"
    path.write_text("model:\n  prompt_suffix: '" + "x" * 70_000 + "'\n")
    with pytest.raises(ParamsError, match="line 2: a value of 70,000 characters"):
        load_params(path)
    path.write_text("# padding\n" * 110_000)
    with pytest.raises(ParamsError, match="bytes, over the 1,048,576 a params file may hold"):
        load_params(path)


def test_overrides_read_values_as_dvc_does(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: {max_steps: 5}")
    with pytest.raises(ParamsError, match=r"train\.bf16 = 'on': expected true or false"):
        load_params(path, ["train.bf16=on"])
    assert load_params(path, ["train.bf16=true"]).train.bf16 is True
    with pytest.raises(ParamsError, match=r"override 'train.max_steps=\*a': the alias \*a"):
        load_params(path, ["train.max_steps=*a"])


def test_every_error_is_reported_at_once(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: {max_steps: 0, temperature: -1}\nevaluate: {samples: 0}")
    with pytest.raises(ParamsError) as info:
        load_params(path)
    message = str(info.value)
    assert len(message.splitlines()) == 3
    assert all(k in message for k in ("train.max_steps", "train.temperature", "evaluate.samples"))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ParamsError, match="no such params file"):
        load_params(tmp_path / "nope.yaml")


def test_overrides_parse_values_as_yaml_and_are_validated(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: {max_steps: 5}")
    params = load_params(path, ["train.max_steps=7", "evaluate.benchmarks=[proxy, aime24]"])
    assert params.train.max_steps == 7
    assert params.evaluate.benchmarks == ["proxy", "aime24"]
    with pytest.raises(ParamsError, match=r"train\.max_steps = 'x'"):
        load_params(path, ["train.max_steps=x"])
    with pytest.raises(ParamsError, match="expected KEY=VALUE"):
        apply_overrides({}, ["train.max_steps"])
    with pytest.raises(
        ParamsError, match=r"override 'train.max_steps.x=1': 'max_steps' is a value, not a section"
    ):
        load_params(path, ["train.max_steps.x=1"])
    # A broken YAML value is a one-line params error, not a YAML traceback.
    with pytest.raises(
        ParamsError, match=r"override 'train.max_steps=\[1': the value '\[1' is not valid YAML"
    ):
        load_params(path, ["train.max_steps=[1"])


def test_booleans_stay_valid_where_a_boolean_is_meant(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(
        "train: {bf16: true, vllm_importance_sampling_correction: true}\ntracking: {uri: 'http://h:5000'}"
    )
    params = load_params(path)
    assert params.train.bf16 is True and params.train.vllm_importance_sampling_correction is True
    assert params.tracking.uri == "http://h:5000"


def test_register_section_keeps_its_yaml_name():
    params = Params.model_validate({"register": {"model_name": "m"}})
    assert params.register_.model_name == "m"
    assert params.model_dump(by_alias=True)["register"]["model_name"] == "m"


def test_set_path_and_merge_are_one_mechanism_for_nested_keys():
    data = {"train": {"max_steps": 5, "lora": {"r": 16, "alpha": 32}}}
    set_path(data, "train.lora.r", 8)
    set_path(data, ("evaluate", "samples"), 3)  # missing sections are created
    assert data == {"train": {"max_steps": 5, "lora": {"r": 8, "alpha": 32}}, "evaluate": {"samples": 3}}
    # Sections merge key by key (siblings kept), values replace, and the same rule refuses a value as a section.
    merged = merge(data, {"train": {"lora": {"alpha": 4}, "seed": 1}, "model": {"base": "tiny"}})
    assert merged is data
    assert data["train"] == {"max_steps": 5, "lora": {"r": 8, "alpha": 4}, "seed": 1}
    assert data["model"] == {"base": "tiny"}
    with pytest.raises(ParamsError, match="'max_steps' is a value, not a section"):
        merge(data, {"train": {"max_steps": {"x": 1}}})
    with pytest.raises(ParamsError, match="'max_steps' is a value, not a section"):
        set_path(data, "train.max_steps.x", 1)


def test_overrides_of_a_file_whose_top_level_is_not_a_mapping_name_the_file_problem(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("- a\n- b")
    with pytest.raises(ParamsError, match="top level must be a mapping"):
        load_params(path, ["train.max_steps=3"])


def _fields(model, prefix=""):
    """``(dotted key, field)`` of every field of ``model`` and of the sections inside it, list entries too."""
    for key, field in yaml_fields(model).items():
        yield prefix + key, field
        section = section_type(field.annotation)
        if section is not None:
            yield from _fields(section, f"{prefix}{key}.")


def test_every_params_field_is_described_in_the_schema():
    fields = dict(_fields(Params))
    # The walk reaches nested sections and the entries of a list of sections.
    assert {"train.stage2.max_steps", "curate.sources.weight", "register.model_name"} <= set(fields)
    missing = sorted(key for key, field in fields.items() if not (field.description or "").strip())
    assert not missing, (
        f"add Field(description=...) in lead/config/ (the section's module) for: {', '.join(missing)}"
    )


def test_a_recipe_becomes_overrides_that_give_back_exactly_what_it_says(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    suffix = '\nIt\'s "boxed": \\boxed{} — über ${x}'
    recipe.write_text(
        yaml.safe_dump(
            {
                "model": {"prompt_suffix": suffix},
                "train": {
                    "learning_rate": 1.0e-6,
                    "micro_batch_tokens": 13312,
                    "vllm_server_base_url": None,
                    "lora": {"r": 8},
                    # Any value here goes to TRL as it is: a float must stay a float (1e-08 is a YAML string).
                    "grpo_config": {"adam_epsilon": 1.0e-8, "optim_args": "a=1, b='x'"},
                },
                "evaluate": {"benchmarks": ["aime24", "aime25"]},
            },
            allow_unicode=True,
        )
    )
    overrides = recipe_overrides(recipe)
    assert "train.lora.r=8" in overrides and "train.micro_batch_tokens=13312" in overrides
    params = load_params(ROOT / "params.yaml", [*overrides, "train.lora.r=4"])  # -S after the recipe wins
    t = params.train
    assert params.model.prompt_suffix == suffix and t.learning_rate == 1e-6 and t.micro_batch_tokens == 13312
    assert t.vllm_server_base_url is None and t.lora.r == 4 and t.lora.alpha == 32  # sections merge
    assert t.grpo_config == {"adam_epsilon": 1e-8, "optim_args": "a=1, b='x'"}
    assert isinstance(t.grpo_config["adam_epsilon"], float)
    assert params.evaluate.benchmarks == ["aime24", "aime25"]
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    assert recipe_overrides(tmp_path / "empty.yaml") == []


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (None, ["recipe", "missing.yaml: no such file"]),
        ("train: {max_steps: [1}", ["not valid YAML"]),
        ("- train\n- evaluate\n", ["expected a mapping of params sections", "got list"]),
        ("trian: {max_steps: 3}", ["unknown section 'trian'", "did you mean 'train'", "sections: model,"]),
    ],
    ids=["missing", "bad-yaml", "not-a-mapping", "unknown-section"],
)
def test_a_bad_recipe_is_one_params_error_naming_it(tmp_path, text, fragments):
    path = tmp_path / "missing.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ParamsError) as info:
        recipe_overrides(path)
    assert str(info.value).startswith(f"recipe {path}")
    for fragment in fragments:
        assert fragment in str(info.value)


def test_train_micro_batch_tokens_and_grpo_config_are_shipped_and_validated(tmp_path):
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())["train"]
    assert shipped["micro_batch_tokens"] is None and shipped["grpo_config"] == {}
    path = tmp_path / "params.yaml"
    for bad, fragment in [
        ("micro_batch_tokens: 0", "greater than or equal to 1"),
        ("micro_batch_tokens: true", "expected a number"),
        ("grpo_config: [beta]", "valid dictionary"),
    ]:
        path.write_text(f"train: {{{bad}}}\n")
        with pytest.raises(ParamsError, match=f"train.{bad.split(':')[0]}.*{fragment}"):
            load_params(path)


def _leaf_keys(data: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out += _leaf_keys(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def test_the_override_schema_takes_every_key_the_loader_takes_and_the_loader_names_a_typo_with_its_nearest_key():
    """What a Prefect deployment's parameter schema says of one override (the server checks it at creation): it
    must never refuse what ``lead -S`` accepts; a mistyped key passes it and is refused by the flow as it starts,
    in the loader's words (the key and the nearest valid one), not JSON Schema's."""
    import jsonschema

    from lead.config.explain import override_schema

    schema = override_schema()
    ok = jsonschema.Draft202012Validator(schema).is_valid
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key, value in _leaf_keys(data):  # every key the shipped file writes, set to the value it has
        override = f"{key}={json.dumps(value)}"
        assert ok(override), override
        load_params(ROOT / "params.yaml", [override])
    assert ok("train.grpo_config.warmup_ratio=0.1")  # free keys under a mapping
    assert not ok("train.max_steps") and not ok("=3") and not ok("train max_steps=3")  # no KEY=VALUE
    for typo, unknown, nearest in (
        ("trian.max_steps=3", "trian", "train"),
        ("train.max_stepz=3", "train.max_stepz", "train.max_steps"),
    ):
        assert ok(typo), typo
        with pytest.raises(ParamsError, match=f"unknown key '{unknown}' \\(did you mean '{nearest}'\\?\\)"):
            load_params(ROOT / "params.yaml", [typo])


def test_warmstart_verbosity_is_the_proxy_traces_habits_one_key_each():
    import dataclasses

    from lead.config import VerbosityParams
    from lead.core.proxy import Verbosity

    habits = dataclasses.fields(Verbosity)
    fields = VerbosityParams.model_fields
    # One key per habit, in its order, with its default and description, and a probability's range.
    assert list(fields) == [h.name for h in habits]
    for habit in habits:
        field = fields[habit.name]
        assert (field.default, field.description) == (habit.default, habit.metadata["description"])
        with pytest.raises(ValueError, match="less than or equal to 1"):
            VerbosityParams(**{habit.name: 1.5})
    assert VerbosityParams().to_verbosity() == Verbosity()
    assert VerbosityParams(slip=0.0).to_verbosity() == Verbosity(slip=0.0)
