"""The curate and warmstart stages on a temporary folder, with seconds-sized settings."""

import json

import pytest

from lead.config import Params


def test_curate_writes_disjoint_splits_in_one_schema(small_params: Params):
    from datasets import Dataset

    from lead.stages import curate

    summary = curate.run(small_params)
    root = small_params.paths.curated
    train = Dataset.from_parquet(str(root / "train.parquet"))
    test = Dataset.from_parquet(str(root / "test.parquet"))
    assert summary == json.loads((root / "curation.json").read_text())
    assert (len(train), len(test)) == (60, 12)
    assert set(train.column_names) == {"id", "problem", "answer", "source", "split", "level"}
    assert not set(train["problem"]) & set(test["problem"])
    assert set(train["split"]) == {"train"} and set(test["split"]) == {"test"}
    assert sorted(set(test["level"])) == [1, 2, 3]
    # Deterministic: a second run writes the same rows.
    curate.run(small_params)
    assert Dataset.from_parquet(str(root / "train.parquet"))["problem"] == train["problem"]


def test_warmstart_trains_saves_and_reports(small_params: Params):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lead.stages import warmstart

    summary = warmstart.run(small_params)
    out = warmstart.model_dir(small_params)
    assert summary["steps"] == 4 and summary["examples"] == 64
    assert json.loads((small_params.paths.reports / "warmstart.json").read_text()) == summary
    assert AutoModelForCausalLM.from_pretrained(str(out)).config.num_hidden_layers == 1
    assert AutoTokenizer.from_pretrained(str(out)).eos_token == "<|endoftext|>"
    assert not (out / "_trainer").exists()

    rows = warmstart.report(small_params, backend="transformers")
    assert [r.level for r in rows] == [1, 2, 3]
    assert all(r.problems == 2 and 0.0 <= r.pass_rate <= 1.0 and r.mean_length > 0 for r in rows)


def test_warmstart_disabled_points_at_the_base_model(small_params: Params):
    from lead.stages import warmstart

    small_params.warmstart.enabled = False
    assert warmstart.run(small_params) == {"enabled": False, "model": "tiny"}
    assert not warmstart.model_dir(small_params).exists()


def test_proxy_sft_set_needs_the_tiny_model(small_params: Params):
    from lead.stages import warmstart

    small_params.model.base = "some-org/some-model"
    with pytest.raises(ValueError, match=r"needs model\.base = 'tiny'"):
        warmstart.run(small_params)


def test_external_sft_set_from_a_local_file(small_params: Params, tmp_path):
    from lead.stages import warmstart

    path = tmp_path / "sft.jsonl"
    path.write_text('{"problem": "1+1?", "solution": "<think>\\n1+1=2\\n</think>\\n\\\\boxed{2}"}\n')
    small_params.warmstart.dataset = str(path)
    records = warmstart.external_sft_records(small_params)
    assert records[0]["prompt"][0]["content"].startswith("1+1?")
    assert records[0]["completion"][0]["content"].endswith("\\boxed{2}")
    path.write_text('{"question": "1+1?"}\n')
    with pytest.raises(ValueError, match="needs columns prompt/completion or problem/solution"):
        warmstart.external_sft_records(small_params)
    small_params.warmstart.dataset = str(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="no such file"):
        warmstart.external_sft_records(small_params)
