"""The curate and warmstart stages on a temporary folder, with seconds-sized settings."""

import json

import pytest

from lead.config import Params
from lead.io.fingerprint import without_run_facts


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
    from lead.training import warmstart as warmstart_lib

    summary = warmstart.run(small_params)
    out = warmstart_lib.model_dir(small_params.paths)
    assert summary["steps"] == 4 and summary["examples"] == 64
    # the record: what the run made (its time and MLflow run id are the run's)
    assert json.loads((small_params.paths.reports / "warmstart.json").read_text()) == without_run_facts(
        summary
    )
    assert AutoModelForCausalLM.from_pretrained(str(out)).config.num_hidden_layers == 1
    assert AutoTokenizer.from_pretrained(str(out)).eos_token == "<|endoftext|>"
    assert not (out / "_trainer").exists()
    # Tracked like every stage: an MLflow run tagged stage=warmstart with its params, summary and the trainer log.
    from mlflow import MlflowClient

    client = MlflowClient(small_params.tracking.uri)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["stage"] == "warmstart"
    assert run.data.params["warmstart.examples"] == "64" and run.data.metrics["steps"] == 4
    assert "train_loss" in run.data.metrics  # what the trainer reports to MLflow (per logging step: loss)

    p = small_params
    rows = warmstart_lib.report(
        p.warmstart.report, p.curate, p.paths, p.model.prompt_suffix, backend="transformers"
    )
    assert [r.level for r in rows] == [1, 2, 3]
    assert all(r.problems == 2 and 0.0 <= r.pass_rate <= 1.0 and r.mean_length > 0 for r in rows)


def test_micro_batches_change_the_speed_not_what_is_learned(small_params: Params, tmp_path):
    """``warmstart.micro_batches`` splits each optimizer step's random batch into forward passes of similar
    lengths; the trainer normalises the summed loss by the whole batch's completion tokens, so the weights after
    the steps are the batch's whatever the split (up to float rounding). Each pass's own mean loss averaged
    (what accumulation gives without that normalisation) would learn something else: the control."""
    import torch
    from datasets import Dataset
    from trl import SFTTrainer

    from lead.training.warmstart import base_model_and_tokenizer, proxy_sft_records, sft_config

    ws, model_params = small_params.warmstart, small_params.model

    def records() -> list:
        return proxy_sft_records(ws, small_params.curate.proxy, model_params.prompt_suffix)

    def trained(micro_batches: int, token_normalised: bool = True) -> torch.Tensor:
        ws.micro_batches = micro_batches
        model, tokenizer = base_model_and_tokenizer(model_params, records(), ws.seed)
        args = sft_config(ws, model_params, tmp_path / f"out{micro_batches}")
        args.report_to = []
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=Dataset.from_list(records()), processing_class=tokenizer
        )
        trainer.model_accepts_loss_kwargs = token_normalised
        passes = [len(batch["input_ids"]) for batch in trainer.get_train_dataloader()]
        assert len(passes) == 4 * micro_batches and sum(passes) == 64  # 4 steps of 16 sequences
        trainer.train()
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    start, _ = base_model_and_tokenizer(model_params, records(), ws.seed)
    start = torch.cat([p.detach().flatten() for p in start.parameters()])
    whole, split = trained(1), trained(4)
    moved = (whole - start).abs().max().item()
    assert moved > 1e-3
    assert (split - whole).abs().max().item() < 1e-3 * moved
    assert (trained(4, token_normalised=False) - whole).abs().max().item() > 1e-2 * moved


def test_warmstart_disabled_points_at_the_base_model(small_params: Params):
    from lead.stages import warmstart
    from lead.training import warmstart as warmstart_lib

    small_params.warmstart.enabled = False
    assert warmstart.run(small_params) == {"enabled": False, "model": "tiny"}
    # Only a note, so that DVC's declared output exists whether or not the warm start ran.
    folder = warmstart_lib.model_dir(small_params.paths)
    assert [p.name for p in folder.iterdir()] == [warmstart_lib.SKIPPED]
    assert json.loads((folder / warmstart_lib.SKIPPED).read_text())["model"] == "tiny"


def test_proxy_sft_set_needs_the_tiny_model(small_params: Params):
    from lead.stages import warmstart

    small_params.model.base = "some-org/some-model"
    with pytest.raises(ValueError, match=r"needs model\.base = 'tiny'"):
        warmstart.run(small_params)


def test_external_sft_set_from_a_local_file(small_params: Params, tmp_path):
    from lead.training import warmstart as warmstart_lib

    path = tmp_path / "sft.jsonl"
    path.write_text('{"problem": "1+1?", "solution": "<think>\\n1+1=2\\n</think>\\n\\\\boxed{2}"}\n')
    suffix = small_params.model.prompt_suffix
    records = warmstart_lib.external_sft_records(str(path), suffix)
    assert records[0]["prompt"][0]["content"].startswith("1+1?")
    assert records[0]["completion"][0]["content"].endswith("\\boxed{2}")
    path.write_text('{"question": "1+1?"}\n')
    with pytest.raises(ValueError, match="needs columns prompt/completion or problem/solution"):
        warmstart_lib.external_sft_records(str(path), suffix)
    with pytest.raises(FileNotFoundError, match="no such file"):
        warmstart_lib.external_sft_records(str(tmp_path / "missing.jsonl"), suffix)


MATH500_1411 = (
    'Steve says to Jon, "I am thinking of a polynomial whose roots are all positive integers. The polynomial has '
    "the form $P(x) = 2x^3-2ax^2+(a^2-81)x-c$ for some positive integers $a$ and $c$. Can you tell me the values "
    'of $a$ and $c$?"  After some calculations, Jon says, "There is more than one such polynomial."  Steve says, '
    '"You\'re right. Here is the value of $a$." He writes down a positive integer and asks, "Can you tell me the '
    'value of $c$?"  Jon says, "There are still two possible values of $c$."  Find the sum of the two possible '
    "values of $c$."
)


@pytest.mark.slow  # three curate runs, each an MLflow run (a fresh sqlite store takes seconds to create)
def test_curate_local_source_quarantine_report_and_determinism(small_params: Params, tmp_path):
    import mlflow
    from datasets import Dataset

    from lead.config import SourceSpec
    from lead.io.sources import SourceError
    from lead.io.tracking import tracking_uri
    from lead.stages import curate

    local = tmp_path / "mine.jsonl"
    lines = [
        json.dumps({"id": "a", "problem": "How many primes are below 20?", "answer": "8", "difficulty": 2.0}),
        '{"id": "b", "problem": "truncated',
        json.dumps({"id": "c", "problem": "What is 2+2?", "answer": ""}),
        json.dumps({"id": "a", "problem": "What is 3+3?", "answer": "6"}),
        json.dumps({"id": "d", "problem": MATH500_1411, "answer": "440"}),
        json.dumps({"id": "e", "question": "What is $\\sqrt{49}$?", "solution": "It is \\boxed{7}."}),
    ]
    local.write_text("\n".join(lines) + "\n")
    small_params.curate.sources = [
        SourceSpec(name="proxy", path="proxy"),
        SourceSpec(name="mine", path=str(local)),
    ]

    summary = curate.run(small_params)
    root, reports = small_params.paths.curated, small_params.paths.reports / "curate"
    train = Dataset.from_parquet(str(root / "train.parquet"))
    test = Dataset.from_parquet(str(root / "test.parquet"))
    assert (len(train), len(test)) == (62, 12)  # 60 proxy + mine-a, mine-e; the proxy test split
    assert train.column_names == [
        "id",
        "problem",
        "answer",
        "source",
        "split",
        "level",
        "difficulty",
        "solution",
    ]
    mine = {r["id"]: r for r in train if r["source"] == "mine"}
    assert mine["mine-a"]["difficulty"] == 2.0 and mine["mine-e"]["difficulty"] is None
    assert mine["mine-e"]["answer"] == "7" and mine["mine-e"]["solution"] == "It is \\boxed{7}."
    quarantine = [json.loads(line) for line in (root / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["reason"], q["origin"]) for q in quarantine] == [
        ("malformed_json", "mine.jsonl:2"),
        ("missing_answer", "mine.jsonl:3"),
        ("duplicate_id", "mine.jsonl:4"),
        ("contaminated", "mine.jsonl:5"),
    ]
    assert "math500:math500-test/intermediate_algebra/1411.json" in quarantine[-1]["detail"]
    assert summary == json.loads((root / "curation.json").read_text())
    assert summary["contamination"] == {"aime24": 0, "aime25": 0, "amc23": 0, "math500": 1}
    report = json.loads((reports / "report.json").read_text())
    assert report["sources"]["mine"] == {
        "location": str(local),
        "read": 6,
        "train": 2,
        "test": 0,
        "removed": {"contaminated": 1, "duplicate_id": 1, "malformed_json": 1, "missing_answer": 1},
    }
    assert "| math500 | 500 | 1 | 1 |" in (reports / "report.md").read_text()
    mlflow.set_tracking_uri(tracking_uri(small_params.tracking))
    runs = mlflow.search_runs(experiment_names=[small_params.tracking.experiment], output_format="list")
    assert runs[0].data.metrics["contamination.math500"] == 1.0 and runs[0].data.tags["stage"] == "curate"
    # The report went to the store's own folder (beside mlflow.db), not to ./mlruns of the working directory.
    assert runs[0].info.artifact_uri.startswith((tmp_path / "mlruns").as_uri())
    assert any((tmp_path / "mlruns").rglob("report.md"))

    before = [(root / name).read_bytes() for name in ("train.parquet", "test.parquet", "quarantine.jsonl")]
    curate.run(small_params)
    assert [
        (root / name).read_bytes() for name in ("train.parquet", "test.parquet", "quarantine.jsonl")
    ] == before

    local.write_bytes(b"\x00\x01 not json\n")
    with pytest.raises(SourceError, match=r"mine\.jsonl: no line is valid JSON"):
        curate.run(small_params)


def test_prompt_tokens_are_counted_with_the_model_tokenizer(small_params: Params, tiny_model):
    from transformers import AutoTokenizer

    from lead.curation import prompt_token_counter

    path, _ = tiny_model
    counter, method = prompt_token_counter(small_params.model)
    assert counter is None and method.startswith("estimate")  # model.base: tiny is built after curate
    small_params.model.base = str(path)
    counter, method = prompt_token_counter(small_params.model)
    assert method == f"tokenizer {path} with its chat template"
    text = "Start with 7, add 3."
    plain = len(AutoTokenizer.from_pretrained(str(path))(text)["input_ids"])
    short, longer = counter([text, text + " Then add 4."])
    assert plain < short < longer  # the chat template's tokens are counted too
    small_params.model.base = str(path / "missing")
    counter, method = prompt_token_counter(small_params.model)
    assert counter is None and "unavailable" in method
