"""The calibrate stage on a temporary folder: outputs, MLflow, and the incremental cache (hits, new problems,
invalidation, resume after an interruption). Where real generation matters (the stage end to end, resuming
to the same draws) an untrained 1-layer model samples with transformers (2 samples, 8 tokens); the cache
logic runs on a scripted sampler with known pass rates, which takes no time."""

import json
import shutil

import pandas as pd
import pytest

import lead.io.sampling
from lead import calibration
from lead.config import Params
from lead.core.proxy import generate_problems
from lead.dag import StageError, manifest_path, output
from lead.io.calibration_cache import CalibrationCache
from lead.io.fingerprint import StaleOutputError, verify, without_run_facts
from lead.io.sampling import Completion
from lead.io.sources import proxy_records
from lead.stages import calibrate
from tests.conftest import calibration_target, write_pool


def _write_pool(params: Params, n: int) -> pd.DataFrame:
    """The first ``n`` proxy training problems (a longer draw extends a shorter one: same prefix)."""
    records = proxy_records(generate_problems(n, split="train", seed=0, max_ops=3))
    pool = pd.DataFrame(records)
    write_pool(params, pool)
    return pool


@pytest.fixture(autouse=True)
def one_torch_thread():
    # Tiny matrices: with 2 OpenMP threads on a shared 2-core machine generation was measured 70x slower
    # (spin-waiting threads), with 1 thread it takes milliseconds.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    # One store for the module: creating an sqlite store runs MLflow's migrations (~2 s) each time.
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def params(small_params: Params, tiny_model, mlflow_uri) -> Params:
    shutil.copytree(tiny_model[0], small_params.paths.models / "warmstart")
    small_params.tracking.uri = mlflow_uri
    cfg = small_params.calibrate
    cfg.backend, cfg.samples, cfg.chunk_size = "transformers", 2, 16
    small_params.train.max_completion_length = 8  # the reward's budget is calibration's too
    _write_pool(small_params, 40)
    return small_params


class Counter:
    """Wraps ``lead.io.sampling.make_sampler``: how often a sampler is built, which prompts it samples, and an
    optional failure on the n-th ``sample`` call (a crash mid-run)."""

    def __init__(self, make, fail_on_call: int | None = None) -> None:
        self.make, self.fail_on_call = make, fail_on_call
        self.built, self.calls, self.closed, self.prompts = 0, 0, 0, []

    def __call__(self, *args, **kwargs):
        self.built += 1
        inner = self.make(*args, **kwargs)
        counter = self

        class Sampler:
            tokenizer = getattr(inner, "tokenizer", None)

            def sample(self, prompts, spec, progress=None):
                counter.calls += 1
                if counter.calls == counter.fail_on_call:
                    raise RuntimeError("simulated crash")
                counter.prompts.extend(prompts)
                return inner.sample(prompts, spec, progress)

            def close(self):
                counter.closed += 1
                inner.close()

        return Sampler()


@pytest.fixture
def counter(monkeypatch):
    c = Counter(lead.io.sampling.make_sampler)
    monkeypatch.setattr(lead.io.sampling, "make_sampler", c)
    return c


def done(answer) -> str:
    """A finished completion that answers ``answer`` (boxed in and after the reasoning: every preset reads it)."""
    return f"<think>\nso \\boxed{{{answer}}}\n</think>\nThe answer is \\boxed{{{answer}}}."


class ScriptedSampler:
    """Problem j (in pool order) gets exactly ``j % (k + 1)`` correct completions out of k."""

    def __init__(self, pool: pd.DataFrame) -> None:
        self.answers = dict(zip(pool["problem"], pool["answer"], strict=True))
        self.index = {p: j for j, p in enumerate(pool["problem"])}

    def sample(self, prompts, spec, progress=None):
        out = []
        for prompt in prompts:
            problem = next(p for p in self.answers if p in prompt)
            c = self.index[problem] % (spec.n + 1)
            answer = int(self.answers[problem])
            texts = [done(answer if i < c else answer + 1) for i in range(spec.n)]
            out.append([Completion(text=t, num_tokens=10 + i, finished=True) for i, t in enumerate(texts)])
        if progress:
            progress(len(prompts))
        return out

    def close(self) -> None:
        """Nothing to stop."""


@pytest.fixture
def scripted(monkeypatch, params: Params) -> Counter:
    """``make_sampler`` returns a :class:`ScriptedSampler` over the pool as it is when the sampler is built."""

    def make(*args, **kwargs):
        return ScriptedSampler(pd.read_parquet(params.paths.curated / "train.parquet"))

    c = Counter(make)
    monkeypatch.setattr(lead.io.sampling, "make_sampler", c)
    return c


def _out(params: Params) -> pd.DataFrame:
    return pd.read_parquet(output(params.paths, "calibrate", "pool"))


def test_run_writes_the_calibrated_pool_reports_and_an_mlflow_run(params: Params, counter):
    from mlflow.tracking import MlflowClient

    params.calibrate.keep_inclusive = "left"  # 0 <= p < 1: the untrained model solves (next to) nothing
    summary = calibrate.run(params)
    out = _out(params)
    pool = pd.read_parquet(params.paths.curated / "train.parquet")
    assert list(out.columns) == [*pool.columns, *calibration.RECORD_COLUMNS, "band", "keep"]
    assert out["id"].tolist() == pool["id"].tolist()
    assert (out["k"] == 2).all() and (out["pass_rate"] == out["n_correct"] / 2).all()
    assert out["keep"].tolist() == [0 <= p < 1 for p in out["pass_rate"]]
    assert (out["mean_length"] >= 1).all() and (out["mean_length"] <= 8).all()
    assert (out["wilson_low"] <= out["pass_rate"]).all() and (out["pass_rate"] <= out["wilson_high"]).all()
    assert (
        counter.built == 1 and len(counter.prompts) == 40 and counter.calls == 3 and counter.closed == 1
    )  # 16, 16, 8

    reports = params.paths.reports / "calibrate"
    assert json.loads((reports / "summary.json").read_text()) == without_run_facts(summary)  # (no times)
    assert (summary["problems"], summary["sampled_problems"], summary["cached_problems"]) == (40, 40, 0)
    assert summary["kept"] == int(out["keep"].sum()) and sum(summary["bands"].values()) == 40
    assert summary["grader"]["total"] == 80 and summary["chunks"] == 3
    histogram = pd.read_csv(reports / "histogram.csv")
    assert histogram["pass_rate"].tolist() == [0.0, 0.5, 1.0] and histogram["problems"].sum() == 40
    assert histogram["kept"].tolist() == [1, 1, 0]
    assert (reports / "pass_rate_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    client = MlflowClient(params.tracking.uri)
    experiment = client.get_experiment_by_name(params.tracking.experiment)
    runs = client.search_runs([experiment.experiment_id], "tags.stage = 'calibrate'")
    run = next(r for r in runs if r.data.tags["settings"] == summary["settings"])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["problems"] == 40 and run.data.params["calibrate.samples"] == "2"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "calibrate")}
    assert "calibrate/pass_rate_histogram.png" in artifacts and "calibrate/summary.json" in artifacts


def test_pass_rates_keep_bands_and_histogram_are_exact(params: Params, scripted):
    params.calibrate.samples = 4
    summary = calibration.calibrate_pool(calibration_target(params))
    out = _out(params)
    expected = [j % 5 for j in range(40)]
    assert out["n_correct"].tolist() == expected
    assert out["keep"].tolist() == [0 < c < 4 for c in expected]
    assert out["mean_length"].tolist() == [11.5] * 40
    assert summary["histogram"] == {"0": 8, "0.25": 8, "0.5": 8, "0.75": 8, "1": 8}
    assert summary["bands"] == {
        "0": 8,
        "(0, 0.25]": 8,
        "(0.25, 0.5]": 8,
        "(0.5, 0.75]": 8,
        "(0.75, 1)": 0,
        "1": 8,
    }
    assert summary["kept"] == 24
    assert summary["grader"]["n_correct"] == sum(expected) and summary["grader"]["fast_path"] == 160
    # Per difficulty level (the pool's levels 1, 2, 3 in turn): where each level's problems sit in the band.
    assert out["level"].tolist() == [1 + j % 3 for j in range(40)]
    for level in (1, 2, 3):
        mine = [c for j, c in enumerate(expected) if 1 + j % 3 == level]
        assert summary["by_level"][str(level)] == {
            "problems": len(mine),
            "kept": sum(0 < c < 4 for c in mine),
            "mean_pass_rate": round(sum(mine) / len(mine) / 4, 4),
            "histogram": {f"{c / 4:g}": mine.count(c) for c in range(5)},
        }
    # Another stage-1 band from params: 0.25 < p < 1.
    params.calibrate.min_pass_rate = 0.25
    assert calibration.calibrate_pool(calibration_target(params))["kept"] == 16


def test_rerun_is_a_cache_hit_and_added_problems_alone_are_sampled(params: Params, scripted):
    counter = scripted
    first = calibration.calibrate_pool(calibration_target(params))
    before = _out(params)
    counter.prompts.clear()
    counter.built = 0

    again = calibration.calibrate_pool(calibration_target(params))
    assert counter.built == 0 and counter.prompts == []  # no sampler built at all
    assert (again["sampled_problems"], again["cached_problems"]) == (0, 40)
    assert again["settings"] == first["settings"]
    pd.testing.assert_frame_equal(_out(params), before)

    pool = _write_pool(params, 46)
    added = calibration.calibrate_pool(calibration_target(params))
    assert counter.built == 1 and (added["sampled_problems"], added["cached_problems"]) == (6, 40)
    new = pool["problem"].tolist()[40:]
    assert len(counter.prompts) == 6 and all(
        p in prompt for p, prompt in zip(new, counter.prompts, strict=True)
    )
    pd.testing.assert_frame_equal(_out(params).iloc[:40], before)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("calibrate", "temperature", 0.5),
        ("calibrate", "seed", 1),
        ("calibrate", "samples", 3),
        ("model", "prompt_suffix", "\nAnswer in a box."),
        # The reward's rules and budget decide what counts as correct.
        ("train", "max_completion_length", 6),
        ("train", "extraction", "any"),
        ("train", "truncation", "graded"),
        ("train", "repetition_penalty", -1.5),
    ],
)
def test_changing_sampling_settings_invalidates_and_changing_back_reuses(
    params, scripted, section, key, value
):
    calibration.calibrate_pool(calibration_target(params))
    old = getattr(getattr(params, section), key)
    setattr(getattr(params, section), key, value)
    assert calibration.calibrate_pool(calibration_target(params))["sampled_problems"] == 40
    setattr(getattr(params, section), key, old)
    assert (
        calibration.calibrate_pool(calibration_target(params))["sampled_problems"] == 0
    )  # results of both settings are kept


def test_pass_rates_are_measured_with_the_rewards_extraction_rule(params: Params, monkeypatch):
    # Unboxed answers: evaluation's "any" rule credits them, the paper preset's reward ("boxed") does not, so
    # a pool calibrated under evaluation's rule would keep problems whose groups all earn the same reward.
    class Unboxed(ScriptedSampler):
        def sample(self, prompts, spec, progress=None):
            out = []
            for prompt in prompts:
                answer = next(a for p, a in self.answers.items() if p in prompt)
                text = f"<think>\nSo the final result is {answer}.\n</think>\nThe answer is {answer}."
                out.append([Completion(text=text, num_tokens=12, finished=True)] * spec.n)
            return out

    monkeypatch.setattr(
        lead.io.sampling,
        "make_sampler",
        lambda *a, **k: Unboxed(pd.read_parquet(params.paths.curated / "train.parquet")),
    )
    assert params.train.preset == "paper" and params.train.extraction is None
    summary = params.paths.reports / "calibrate" / "summary.json"
    with pytest.raises(StageError, match="solved 0 of 80 samples"):  # an empty pool stops the stage
        calibration.calibrate_pool(calibration_target(params))
    boxed = json.loads(summary.read_text())
    assert boxed["outcome_rules"]["extraction"] == "boxed" and boxed["kept"] == 0
    params.train.extraction = "any"
    with pytest.raises(StageError, match="solved all 80 samples"):
        calibration.calibrate_pool(calibration_target(params))
    anywhere = json.loads(summary.read_text())
    assert anywhere["outcome_rules"]["extraction"] == "any" and anywhere["sampled_problems"] == 40
    assert anywhere["grader"]["n_correct"] == 80 and anywhere["settings"] != boxed["settings"]


@pytest.mark.parametrize(
    ("preset", "overrides", "correct"),
    [
        # Cut at the budget after a right answer: the paper preset's reward scores it unfinished, so does
        # calibration (today's p was 1 here: a problem whose groups all score -1 would be "solved").
        ("paper", {}, 0),
        # The reference code grades a cut completion that closed its reasoning by its box: correct.
        ("faithful", {}, 80),
        # No </think>: unfinished under every preset, whatever the box says.
        ("improved", {"think": False}, 0),
        # Stage 2's loop penalty: a finished, right answer that repeats a phrase 10 times is degenerate.
        ("paper", {"loop": True, "cut": False}, 0),
    ],
)
def test_a_pass_rate_is_the_share_the_trainer_scores_correct(
    params: Params, monkeypatch, preset, overrides, correct
):
    """Calibration and the reward judge a completion with the same function and rules (issue: a problem kept
    with p > 0 whose every sample the trainer scores non-correct is a group without signal)."""
    from lead.training.presets import resolve
    from lead.training.trainer import classify

    shape = {"think": True, "loop": False, "cut": True, **overrides}

    class Shaped(ScriptedSampler):
        def sample(self, prompts, spec, progress=None):
            out = []
            for prompt in prompts:
                answer = next(a for p, a in self.answers.items() if p in prompt)
                loop = "let me check again " * 10 if shape["loop"] else ""
                think = "</think>" if shape["think"] else ""
                text = f"<think>\n{loop}so \\boxed{{{answer}}}\n{think}\nThe answer is \\boxed{{{answer}}}"
                out.append([Completion(text=text, num_tokens=8, finished=not shape["cut"])] * spec.n)
                self.seen += [(text, answer, not shape["cut"])] * spec.n
            return out

    sampler = Shaped(pd.read_parquet(params.paths.curated / "train.parquet"))
    sampler.seen = []
    monkeypatch.setattr(lead.io.sampling, "make_sampler", lambda *a, **k: sampler)
    params.train.preset = preset
    if shape["loop"]:
        params.train.repetition_penalty = -1.5
    params.calibrate.keep_inclusive = "both"  # keep everything: the pass rates are what is checked
    summary = calibration.calibrate_pool(calibration_target(params))
    assert summary["grader"]["total"] == 80
    solved = sum(r for r in pd.read_parquet(params.paths.curated / "calibrated.parquet")["n_correct"])
    assert solved == correct
    # ... and the trainer scores those very completions the same way.
    texts, golds, finished = zip(*sampler.seen, strict=True)
    outcomes, _ = classify(texts, golds, [not f for f in finished], resolve(params.train).lead)
    assert sum(o == "correct" for o in outcomes) == correct
    assert calibration.reward_judge(params.train)["rules"] == resolve(params.train).lead.rules


class Solves(ScriptedSampler):
    """Every problem gets ``correct`` right answers out of k (0: none solved, k: all solved)."""

    correct = 0

    def sample(self, prompts, spec, progress=None):
        c = min(self.correct, spec.n)
        answers = [next(a for p, a in self.answers.items() if p in prompt) for prompt in prompts]
        texts = [[done(a if i < c else int(a) + 1) for i in range(spec.n)] for a in answers]
        return [[Completion(text=t, num_tokens=10, finished=True) for t in group] for group in texts]


@pytest.mark.parametrize(
    ("correct", "why", "knobs", "fix"),
    [
        (
            0,
            "the warm start solved 0 of 80 samples",
            "use a stronger warm start (warmstart.epochs, warmstart.examples), easier problems (curate.sources) "
            "or calibrate.keep_inclusive: left (keeps p = 0)",
            {"keep_inclusive": "left"},
        ),
        (
            2,
            "the warm start solved all 80 samples",
            "use harder problems (curate.sources) or calibrate.keep_inclusive: right (keeps p = 1; all-correct "
            "groups still carry the length reward's signal)",
            {"keep_inclusive": "right"},
        ),
    ],
    ids=["none-solved", "all-solved"],
)
def test_an_empty_pool_stops_calibrate_after_its_reports_and_names_the_knob(
    params: Params, monkeypatch, capsys, tmp_path, correct, why, knobs, fix
):
    import yaml

    def make(*args, **kwargs):
        sampler = Solves(pd.read_parquet(params.paths.curated / "train.parquet"))
        sampler.correct = correct
        return sampler

    monkeypatch.setattr(lead.io.sampling, "make_sampler", make)
    reports = params.paths.reports / "calibrate"
    expected = (
        f"calibrate kept 0 of 40 problems (0 < pass_rate < 1): {why}; {knobs} "
        f"(histogram: {reports / 'histogram.csv'})"
    )
    with pytest.raises(StageError) as err:
        calibration.calibrate_pool(calibration_target(params))
    assert str(err.value) == expected
    # The reports are there to look at; the pool is not published, so train refuses it.
    assert json.loads((reports / "summary.json").read_text())["kept"] == 0
    problems = pd.read_csv(reports / "histogram.csv")["problems"].tolist()  # p = 0, 1/2, 1
    assert problems == ([40, 0, 0] if correct == 0 else [0, 0, 40])
    with pytest.raises(StaleOutputError):
        verify(manifest_path(params.paths, "calibrate"), "calibrate")
    # As `python -m lead.stages.calibrate` (what dvc repro runs): the message, exit 1, no traceback.
    file = tmp_path / "params.yaml"
    file.write_text(yaml.safe_dump(params.model_dump(mode="json", by_alias=True)))
    monkeypatch.setenv("LEAD_ALLOW_EXTERNAL_PATHS", "1")  # the test's MLflow store lies beside this folder
    with pytest.raises(SystemExit) as exit_:
        calibrate.main(["--params", str(file)])
    assert exit_.value.code == 1
    stderr = capsys.readouterr().err
    assert stderr.splitlines()[-1] == f"error: calibrate: {expected}" and "Traceback" not in stderr
    # The knob named is the one that works.
    for key, value in fix.items():
        setattr(params.calibrate, key, value)
    assert calibration.calibrate_pool(calibration_target(params))["kept"] == 40
    verify(manifest_path(params.paths, "calibrate"), "calibrate")


def test_changing_the_model_invalidates_but_chunk_size_does_not(params: Params, scripted):
    import torch
    from transformers import AutoModelForCausalLM

    calibration.calibrate_pool(calibration_target(params))
    params.calibrate.chunk_size = 7  # an execution knob: same settings, same cached draws
    assert calibration.calibrate_pool(calibration_target(params))["sampled_problems"] == 0
    folder = params.paths.models / "warmstart"
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save_pretrained(folder)
    assert calibration.calibrate_pool(calibration_target(params))["sampled_problems"] == 40


def test_an_interrupted_run_resumes_and_ends_like_an_uninterrupted_one(params: Params, monkeypatch):
    params.calibrate.keep_inclusive = "left"  # the untrained model solves (next to) nothing: keep p = 0
    reference_params = params.model_copy(deep=True)
    reference_params.paths.curated = params.paths.curated.parent / "reference"
    reference_params.paths.resume = params.paths.resume.parent / "reference-resume"  # its own cache
    shutil.copytree(params.paths.curated, reference_params.paths.curated)
    calibration.calibrate_pool(calibration_target(reference_params))

    crashing = Counter(lead.io.sampling.make_sampler, fail_on_call=2)
    monkeypatch.setattr(lead.io.sampling, "make_sampler", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        calibration.calibrate_pool(calibration_target(params))
    assert crashing.closed == 1  # the sampler is stopped even when sampling fails
    cache_path = calibration_target(params).cache
    lines = [json.loads(line) for line in cache_path.read_text().splitlines()]
    assert [row["kind"] for row in lines].count("result") == 16  # the first chunk survived
    assert not output(params.paths, "calibrate", "pool").exists()
    with cache_path.open("a") as fh:  # and a crash tore the next line in half
        fh.write('{"kind": "result", "settings": "')

    resumed = Counter(crashing.make)
    monkeypatch.setattr(lead.io.sampling, "make_sampler", resumed)
    summary = calibration.calibrate_pool(calibration_target(params))
    assert (summary["sampled_problems"], summary["cached_problems"]) == (24, 16)
    assert len(resumed.prompts) == 24
    # Each problem is seeded by its text, so the resumed run drew exactly what the reference drew.
    pd.testing.assert_frame_equal(_out(params), _out(reference_params))
    cache = CalibrationCache(cache_path)
    assert cache.bad_lines == 0 and len(cache.results) == 40  # compacted: the torn line is gone

    # A result torn in the middle of the file (not the last line): that one problem is sampled again, alone,
    # and draws what it drew in its chunk.
    lines = cache_path.read_text().splitlines()
    middle = next(i for i, line in enumerate(lines) if '"result"' in line and i > 20)
    lines[middle] = lines[middle][: len(lines[middle]) // 2]
    cache_path.write_text("\n".join(lines) + "\n")
    summary = calibration.calibrate_pool(calibration_target(params))
    assert (summary["sampled_problems"], summary["cached_problems"]) == (1, 39)
    pd.testing.assert_frame_equal(_out(params), _out(reference_params))


def test_model_choice_and_missing_inputs_are_clear_errors(params: Params, scripted, tmp_path):
    assert (
        calibration.model_path(params.model, params.paths.models, warm_start=params.warmstart.enabled)
        == params.paths.models / "warmstart"
    )
    params.warmstart.enabled = False
    params.model.base = str(params.paths.models / "warmstart")
    assert (
        calibration.model_path(params.model, params.paths.models, warm_start=params.warmstart.enabled)
        == params.model.base
    )
    assert (
        calibration.calibrate_pool(calibration_target(params))["problems"] == 40
    )  # calibrates model.base directly
    params.model.base = "tiny"
    with pytest.raises(ValueError, match="exists only after warm start"):
        calibration.model_path(params.model, params.paths.models, warm_start=params.warmstart.enabled)
    params.warmstart.enabled = True
    models, params.paths.models = params.paths.models, tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="run `lead warmstart` first"):
        calibration.model_path(params.model, params.paths.models, warm_start=params.warmstart.enabled)
    params.paths.models, curated, params.paths.curated = models, params.paths.curated, tmp_path / "empty"
    with pytest.raises(FileNotFoundError, match="run `lead curate` first"):
        calibration.calibrate_pool(calibration_target(params))
    # A pool that curate did not publish (a run killed between its writes) is refused, not calibrated.
    params.paths.curated = curated
    (curated / "train.parquet").write_bytes((curated / "train.parquet").read_bytes() + b" ")
    with pytest.raises(StaleOutputError, match="not the content curate published"):
        calibration.calibrate_pool(calibration_target(params))


def test_cli_has_a_calibrate_command_in_pipeline_order():
    from typer.testing import CliRunner

    from lead.cli import app
    from lead.dag import STAGES

    assert STAGES[: STAGES.index("calibrate") + 1][-2:] == ("warmstart", "calibrate")
    result = CliRunner().invoke(app, ["calibrate", "--help"])
    assert result.exit_code == 0 and "--set" in result.output


def test_stage2_is_calibrated_with_stage2s_reward_rules_and_budget(params: Params):
    params.train.stage2.overrides = {
        "repetition_penalty": -1.5,
        "truncation": "graded",
        "max_completion_length": 6,
    }
    judged = calibration.reward_judge(calibration.JudgeKeys.of(params.train, params.train.stage2.overrides))
    assert judged == calibration.reward_judge(params.train.stage2_train())
    assert judged["rules"].loops == "anywhere" and judged["rules"].truncation == "graded"
    assert judged["max_new_tokens"] == 6
