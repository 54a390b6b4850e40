"""The evaluate stage on a temporary folder: benchmarks by name, records, metrics, plots, MLflow, CLI."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import lead.io.sampling
from lead import evaluation
from lead.config import BENCHMARKS, Params, load_params
from lead.dag import manifest_path
from lead.io.benchmarks import load_benchmark
from lead.io.fingerprint import model_fingerprint, publish
from lead.io.sampling import Completion
from lead.io.tracking import published_run
from lead.stages import evaluate
from tests.conftest import ROOT

ALL_BENCHMARKS = ["proxy", "aime24", "aime25", "math500", "amc23"]
RECORD_COLUMNS = [
    "benchmark",
    "problem_id",
    "problem",
    "band",
    "gold",
    "seed",
    "sample",
    "completion",
    "answer",
    "correct",
    "tokens",
    "finished",
    "in_context",
]


@pytest.fixture(scope="module")
def mlflow_store():
    """One MLflow store for the module, on tmpfs where there is one: MLflow creates its sqlite schema with
    ~50 migrations, each synced to disk (~6 s on a disk, ~1 s on tmpfs). Runs are told apart by model path."""
    shm = Path("/dev/shm")
    store = Path(tempfile.mkdtemp(dir=shm if os.access(shm, os.W_OK) else None))
    yield f"sqlite:///{store / 'mlflow.db'}"
    shutil.rmtree(store, ignore_errors=True)


@pytest.fixture
def eval_params(small_params: Params, tiny_model, mlflow_store) -> Params:
    """small_params with the proxy test split written and the (untrained) tiny model as models/warmstart."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lead.io.sources import proxy_problems, proxy_records

    curated = small_params.paths.curated
    curated.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(proxy_records(proxy_problems(small_params.curate, "test"))),
        curated / "test.parquet",
    )
    publish(
        manifest_path(small_params.paths, "curate"), "curate", [curated / "test.parquet"]
    )  # as curate does
    shutil.copytree(tiny_model[0], small_params.paths.models / "warmstart")
    model = small_params.paths.models / "warmstart"
    publish(manifest_path(small_params.paths, "warmstart"), "warmstart", [], model=model_fingerprint(model))
    small_params.evaluate.model = "warmstart"
    small_params.tracking.uri = mlflow_store
    return small_params


def _evaluate_runs(params: Params):
    import mlflow

    mlflow.set_tracking_uri(params.tracking.uri)
    path = evaluation.model_path(params.evaluate.model, params.paths.models)
    return mlflow.search_runs(
        experiment_names=[params.tracking.experiment],
        filter_string=f"tags.stage = 'evaluate' and tags.model_path = '{path}'",
        output_format="list",
    )


def _records(params: Params) -> list[dict]:
    import pyarrow.parquet as pq

    table = pq.read_table(evaluation.output_dir(params.paths) / evaluation.RECORDS)
    assert table.column_names == RECORD_COLUMNS
    return table.to_pylist()


# --------------------------------------------------------------------------------------------------
# Benchmarks and the model under evaluation
# --------------------------------------------------------------------------------------------------
def test_benchmarks_load_by_name_with_their_quirks_smoothed(eval_params: Params):
    sizes = {name: len(load_benchmark(name, eval_params.paths)) for name in BENCHMARKS}
    assert sizes == {"proxy": 12, "aime24": 30, "aime25": 30, "math500": 500, "amc23": 40}
    aime24, aime25, amc23 = (load_benchmark(n, eval_params.paths) for n in ("aime24", "aime25", "amc23"))
    # AIME 2024 '025' (leading zero kept or dropped: the grader compares numbers), AIME 2025 int, AMC float
    assert aime24[7].answer in ("025", "25") and aime25[0].answer == "70" and amc23[0].answer == "27"
    assert {p.band for p in aime24} == {"all"}
    assert {p.band for p in load_benchmark("math500", eval_params.paths)} == {
        f"level_{k}" for k in range(1, 6)
    }
    assert [p.band for p in load_benchmark("proxy", eval_params.paths, max_problems=4)] == [
        "level_1",
        "level_2",
        "level_3",
        "level_1",
    ]
    with pytest.raises(
        ValueError, match="unknown benchmark 'gsm8k'; known benchmarks: proxy, aime24, aime25"
    ):
        load_benchmark("gsm8k", eval_params.paths)
    (eval_params.paths.curated / "test.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="run `lead curate` first"):
        load_benchmark("proxy", eval_params.paths)


def test_model_is_a_name_under_models_or_a_path_or_hub_id(eval_params: Params, tiny_model):
    assert evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models) == str(
        eval_params.paths.models / "warmstart"
    )
    eval_params.evaluate.model = "train"
    with pytest.raises(FileNotFoundError, match=r"evaluate.model = 'train': .*models/train does not exist"):
        evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models)
    eval_params.evaluate.model = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"
    assert (
        evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models)
        == "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"
    )
    eval_params.evaluate.model = str(tiny_model[0])
    assert evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models) == str(tiny_model[0])


def test_paper_recipe_is_a_valid_override_set():
    from lead.cli import _recipe_overrides

    params = load_params(ROOT / "params.yaml", _recipe_overrides(ROOT / "recipes/paper-eval.yaml"))
    ev = params.evaluate
    assert (ev.benchmarks, ev.samples, ev.temperature, ev.min_p, ev.max_new_tokens) == (
        ["aime24", "aime25"],
        32,
        0.6,
        0.01,
        14336,
    )
    assert ev.budgets == [4096, 8192, 14336] and ev.max_problems is None
    assert params.paths == load_params(ROOT / "params.yaml").paths  # the rest of params.yaml is kept


# --------------------------------------------------------------------------------------------------
# The stage, end to end
# --------------------------------------------------------------------------------------------------
def test_evaluate_all_benchmarks_with_transformers(eval_params: Params):
    ev = eval_params.evaluate
    ev.benchmarks, ev.max_problems, ev.samples = ALL_BENCHMARKS, 1, 2
    ev.max_new_tokens, ev.budgets, ev.backend = 6, [3, 6], "transformers"
    metrics = evaluate.run(eval_params)

    out = evaluation.output_dir(eval_params.paths)
    assert json.loads((out / evaluation.METRICS).read_text()) == metrics
    for plot in (evaluation.ACCURACY_PLOT, evaluation.BUDGET_PLOT):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = _records(eval_params)
    assert len(records) == 5 * 1 * 2
    assert [(r["benchmark"], r["sample"]) for r in records[:4]] == [
        ("proxy", 0),
        ("proxy", 1),
        ("aime24", 0),
        ("aime24", 1),
    ]
    assert all(r["tokens"] <= 6 for r in records)
    for name in ALL_BENCHMARKS:
        for key in (
            "problems",
            "pass_at_1",
            "pass_at_2",
            "cons_at_2",
            "answered",
            "len_avg",
            "truncation_rate",
            "budget_3.pass_at_1",
            "budget_6.cons_at_2",
            "over_context",
            "grader_timeouts",
            "grader_no_answer",
        ):
            assert f"{name}.{key}" in metrics
        mine = [r for r in records if r["benchmark"] == name]
        assert metrics[f"{name}.pass_at_1"] == sum(r["correct"] for r in mine) / len(mine)
    assert "proxy.level_1.precision" in metrics and "math500.level_2.pass_at_1" in metrics  # banded sets
    assert not any(k.startswith("aime24.level_") for k in metrics)
    assert all("@" not in k for k in metrics)

    (run,) = _evaluate_runs(eval_params)
    assert run.info.status == "FINISHED"
    # Published last: every output by content, the model by content, the run that holds the same figures.
    published = json.loads((out / "evaluate.manifest.json").read_text())
    assert set(published["outputs"]) == set(evaluation.OUTPUTS) and "mlflow_run_id" not in published
    assert published_run(out / "evaluate.manifest.json").info.run_id == run.info.run_id
    assert published["model"] == model_fingerprint(
        evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models)
    )
    assert run.data.tags["backend"] == "transformers"
    assert run.data.params["evaluate.samples"] == "2"
    assert run.data.metrics["aime25.pass_at_1"] == metrics["aime25.pass_at_1"]


class ScriptedSampler:
    """Per user message, four completions with known answers and lengths (the gold is looked up by message)."""

    def __init__(self, golds: dict[str, str]):
        self.golds = golds
        self.prompts: list[str] = []

    def sample(self, prompts, spec, progress=None):
        self.prompts += prompts
        assert spec.n == 4
        out = []
        for prompt in prompts:
            gold = int(self.golds[prompt])
            out.append(
                [
                    Completion(f"So it is \\boxed{{{gold}}}.", 12, True),
                    Completion(f"That is \\boxed{{\\frac{{{2 * gold}}}{{2}}}}.", 40, True),  # same class
                    Completion(f"\\boxed{{{gold + 1}}}", 20, True),
                    Completion("I keep going and going", 64, False),
                ]
            )
        if progress:
            progress(len(prompts))
        return out

    def close(self) -> None:
        """Nothing to stop."""


def test_scores_known_completions_through_the_cli(eval_params: Params, monkeypatch, tmp_path):
    from transformers import AutoTokenizer

    from lead.cli import app
    from lead.io.sampling import render_prompt, user_message

    ev = eval_params.evaluate
    ev.benchmarks, ev.max_problems, ev.samples = ["proxy", "amc23"], 3, 4
    ev.max_new_tokens, ev.budgets = 450, [16, 64]
    tokenizer = AutoTokenizer.from_pretrained(
        evaluation.model_path(eval_params.evaluate.model, eval_params.paths.models)
    )
    golds, fits = {}, {}
    for name in ev.benchmarks:
        for p in load_benchmark(name, eval_params.paths, ev.max_problems):
            message = user_message(p.problem, eval_params.model.prompt_suffix)
            golds[message] = p.answer
            fits[name, p.id] = len(tokenizer(render_prompt(tokenizer, message))["input_ids"]) + 450 <= 512
    # The tiny model has 512 positions: every short proxy prompt leaves room for 450 tokens, no AMC prompt does.
    assert all(f for (name, _), f in fits.items() if name == "proxy")
    assert not any(f for (name, _), f in fits.items() if name == "amc23")
    sampler = ScriptedSampler(golds)
    monkeypatch.setattr(lead.io.sampling, "make_sampler", lambda *a, **k: sampler)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(eval_params.model_dump(mode="json", by_alias=True)))
    monkeypatch.setenv("LEAD_ALLOW_EXTERNAL_PATHS", "1")  # the test's MLflow store lies outside this folder

    result = CliRunner().invoke(app, ["evaluate", "--params", str(params_file)])
    assert result.exit_code == 0, result.output
    assert "Pass@1" in result.output and "Cons@4" in result.output

    metrics = json.loads((evaluation.output_dir(eval_params.paths) / evaluation.METRICS).read_text())
    assert len(sampler.prompts) == 3  # only the prompts that fit were sampled
    expected = {
        "pass_at_1": 0.5,
        "pass_at_4": 1.0,
        "cons_at_4": 1.0,  # gold and 2·gold/2 form one class of two votes
        "answered": 0.75,
        "len_avg": 34.0,
        "len_correct": 26.0,
        "len_incorrect": 42.0,
        "truncation_rate": 0.25,
        "budget_16.pass_at_1": 0.25,
        "budget_16.cons_at_4": 1.0,
        "budget_16.answered": 0.25,
        "budget_64.pass_at_1": 0.5,
        "over_context": 0,
        "grader_no_answer": 3,
        "level_1.precision": 2 / 3,
    }
    assert {k: metrics[f"proxy.{k}"] for k in expected} == pytest.approx(expected)
    assert metrics["amc23.over_context"] == 3 and metrics["amc23.pass_at_1"] == 0.0
    assert metrics["amc23.len_avg"] is None and metrics["amc23.answered"] == 0.0
    amc = [r for r in _records(eval_params) if r["benchmark"] == "amc23"]
    assert len(amc) == 12 and not any(r["in_context"] or r["correct"] for r in amc)
    # Every sampled completion, as a table the MLflow UI shows on the evaluate run's page.
    import mlflow

    (run,) = _evaluate_runs(eval_params)
    table = json.loads(
        Path(
            mlflow.artifacts.download_artifacts(
                run_id=run.info.run_id, artifact_path=evaluation.SAMPLES_TABLE
            )
        ).read_text()
    )
    assert table["columns"][:5] == ["problem_id", "answer", "correct", "gold", "completion"]
    assert len(table["data"]) == 12  # the 3 proxy problems x 4 samples (the AMC prompts were not sampled)


@pytest.mark.slow
def test_evaluate_with_the_vllm_backend(eval_params: Params):
    ev = eval_params.evaluate
    ev.benchmarks, ev.max_problems, ev.samples = ["proxy", "aime24"], 3, 2
    ev.max_new_tokens, ev.budgets, ev.backend = 16, [8, 16], "vllm"
    metrics = evaluate.run(eval_params)
    records = _records(eval_params)
    assert len(records) == 2 * 3 * 2
    assert all(1 <= r["tokens"] <= 16 for r in records if r["in_context"])
    assert 0.0 <= metrics["proxy.pass_at_1"] <= 1.0 and metrics["proxy.len_avg"] > 0
    (run,) = _evaluate_runs(eval_params)
    assert run.data.tags["backend"] == "vllm" and run.info.status == "FINISHED"


def test_repeats_resample_with_successive_seeds_and_report_the_spread(eval_params: Params):
    ev = eval_params.evaluate
    ev.benchmarks, ev.max_problems, ev.samples = ["proxy"], 3, 2
    ev.max_new_tokens, ev.budgets, ev.backend, ev.repeats, ev.seed = 6, [6], "transformers", 3, 5
    metrics = evaluate.run(eval_params)
    records = _records(eval_params)
    assert sorted({r["seed"] for r in records}) == [5, 6, 7]
    assert len(records) == 3 * 3 * 2
    assert metrics["proxy.pass_at_1_std"] >= 0.0 and "proxy.len_avg_std" in metrics
    # The reported score is the mean over the seeds' scores.
    per_seed = [sum(r["correct"] for r in records if r["seed"] == s) / 6 for s in (5, 6, 7)]
    assert metrics["proxy.pass_at_1"] == pytest.approx(sum(per_seed) / 3)


def test_a_refused_evaluation_leaves_the_last_good_one_published(eval_params: Params):
    from lead.io.fingerprint import StaleOutputError

    manifest = manifest_path(eval_params.paths, "evaluate")
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text('{"stage": "evaluate"}')  # the last good evaluation's
    eval_params.evaluate.model = "train"  # never published: refused
    with pytest.raises((StaleOutputError, FileNotFoundError)):
        evaluate.run(eval_params)
    assert manifest.read_text() == '{"stage": "evaluate"}'
