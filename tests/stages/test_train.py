"""The train stage and LEADTrainer on the tiny model: advantages, metrics, MLflow, checkpoints and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch

from lead.config import TinySpec
from lead.core.advantages import lead_advantages
from lead.core.outcomes import Outcome
from lead.core.rewards import lead_rewards
from lead.dag import output, resume_dir
from lead.grading import GradeStats
from lead.io.fingerprint import StaleOutputError, without_run_facts
from lead.io.tracking import published_run
from lead.stages import train
from lead.training import trainer as seam
from lead.training.checkpoints import last_complete_checkpoint
from lead.training.grpo_config import grpo_config_kwargs
from lead.training.identity import RUN_FILE
from lead.training.inputs import start_model, training_rows
from tests.conftest import rl_inputs, train_from_start

CYCLE = [Outcome.CORRECT, Outcome.WRONG, Outcome.CORRECT, Outcome.UNFINISHED]


@pytest.fixture
def cycled_outcomes(monkeypatch):
    """Whatever the model writes, the outcomes of each group of 4 are CYCLE (so advantages are never zero)."""
    monkeypatch.setattr(
        seam,
        "classify",
        lambda texts, *a, **k: ([CYCLE[i % 4] for i in range(len(texts))], GradeStats(total=len(texts))),
    )


def test_lead_trainer_replaces_advantages_with_lead_maths(rl_params, cycled_outcomes, monkeypatch):
    """Whatever the model writes, the advantages TRL trains on are exactly lead_advantages(lead_rewards(...))."""
    seen = []
    original = seam.LEADTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = original(self, inputs)
        seen.append((dict(self._lead_batch), out["advantages"].clone(), out["completion_mask"].sum(1)))
        return out

    monkeypatch.setattr(seam.LEADTrainer, "_generate_and_score_completions", spy)
    train.run(rl_params)
    assert len(seen) == 2
    for batch, advantages, lengths in seen:
        assert [Outcome(seam.OUTCOMES[c]) for c in batch["codes"]] == CYCLE * 2
        np.testing.assert_array_equal(batch["lengths"], lengths.numpy())
        rewards = lead_rewards(CYCLE * 2, batch["lengths"], 4, wrong=-1.0, unfinished=-1.0, degenerate=-1.0)
        np.testing.assert_allclose(batch["rewards"], rewards)
        np.testing.assert_allclose(advantages.numpy(), lead_advantages(rewards, 4), rtol=1e-6, atol=1e-6)


def test_train_stage_saves_the_model_and_logs_lead_metrics(rl_params):
    from transformers import AutoModelForCausalLM

    summary = train.run(rl_params)
    assert summary["steps"] == 2 and summary["resumed_from"] is None
    # The record holds what the run made (no curve, no time, no run id: a rerun writes the same bytes) ...
    record = json.loads((rl_params.paths.reports / "train.json").read_text())
    assert record == without_run_facts(summary) and "seconds" in summary and "mlflow_run_id" not in record
    published = json.loads((rl_params.paths.models / "train.manifest.json").read_text())
    assert published["model"] == summary["model"] and "mlflow_run_id" not in published
    AutoModelForCausalLM.from_pretrained(str(train.model_dir(rl_params)))
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    # ... and the run that made it is found by the manifest's content.
    assert (
        published_run(rl_params.paths.models / "train.manifest.json").info.run_id == summary["mlflow_run_id"]
    )
    run = mlflow.get_run(summary["mlflow_run_id"])
    assert run.data.tags["stage"] == "train" and run.info.status == "FINISHED"
    for key in (
        "lead/share_correct",
        "lead/rho_mean",
        "lead/dropped_groups",
        "lead/step_seconds",
        "reward",
        "grader/timeouts",  # the grader's statistics, per step
        "grader/no_answer",
    ):
        assert key in run.data.metrics, key
    assert run.data.params["train.preset"] == "paper"
    # A point per step (logging_steps 1), the curves as a plot and its numbers, and the completions of each
    # logged step as an MLflow table.
    client = mlflow.MlflowClient()
    assert [m.step for m in client.get_metric_history(run.info.run_id, "reward")] == [1, 2]
    curves = (rl_params.paths.reports / "train_curves.csv").read_text().splitlines()
    assert curves[0].split(",") == [
        *("step", "reward", "length", "correct", "truncated", "weight_spread"),
        *("informative", "refill_rounds", "tokens_per_informative_group"),
    ]
    assert [line.split(",")[0] for line in curves[1:]] == ["1", "2"]
    assert all(len(line.split(",")) == 9 and "" not in line.split(",")[5:8] for line in curves[1:])
    assert (rl_params.paths.reports / "train_curves.png").stat().st_size > 0
    assert "curve" not in json.loads((rl_params.paths.reports / "train.json").read_text())
    headline = json.loads((rl_params.paths.reports / "train_headline.json").read_text())  # DVC's metrics
    generated = {k: summary[k] for k in ("prompts_drawn", "refill_rounds", "completion_tokens")}
    assert headline == {"steps": 2, "last_reward": summary["last_reward"], **generated}
    assert (
        generated["prompts_drawn"] == 2 * 2 and generated["refill_rounds"] == 0
    )  # 2 groups a step, no refill
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "completions")}
    assert logged == {"completions/step_00001.json", "completions/step_00002.json"}
    table = json.loads(
        Path(
            mlflow.artifacts.download_artifacts(
                run_id=run.info.run_id, artifact_path="completions/step_00002.json"
            )
        ).read_text()
    )
    assert table["columns"] == ["outcome", "reward", "advantage", "gold", "tokens", "completion", "prompt"]
    assert len(table["data"]) == rl_params.train.batch_size


def test_validation_on_a_held_out_dev_split_hands_on_the_best_checkpoint(rl_params):
    from safetensors.torch import load_file

    t = rl_params.train
    t.dev_problems, t.eval_steps, t.max_steps, t.checkpoint = 4, 1, 3, "best"
    summary = train.run(rl_params)
    assert summary["problems"] + summary["dev_problems"] == 60 and summary["dev_problems"] == 4
    assert [d["step"] for d in summary["dev"]] == [1, 2, 3]
    best = max(summary["dev"], key=lambda d: d["pass_at_1"])  # the first of equals, as transformers keeps it
    assert summary["handed_on"] == f"checkpoint-{best['step']}"
    handed = load_file(train.model_dir(rl_params) / "model.safetensors")
    kept = load_file(resume_dir(rl_params.paths, "train") / summary["handed_on"] / "model.safetensors")
    assert all((handed[k] == kept[k]).all() for k in kept)
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    metrics = mlflow.get_run(summary["mlflow_run_id"]).data.metrics
    assert "eval_lead/share_correct" in metrics  # the reward's view, for the curves
    assert (
        0.0 <= metrics["eval_pass_at_1"] <= 1.0 and "eval_answered" in metrics
    )  # evaluation's, what best picks


def test_curriculum_stage2_recalibrates_with_the_stage1_model_and_continues_from_it(rl_params):
    from lead.stages import calibrate_stage2, train_stage2

    t = rl_params.train
    t.max_steps, t.dev_problems, t.eval_steps = 1, 4, 1
    t.stage2.enabled, t.stage2.max_steps, t.stage2.overrides = True, 2, {"length_reward": False}
    c = rl_params.calibrate
    c.backend, c.samples = (
        "transformers",
        2,
    )  # sampled with the reward's budget, train.max_completion_length (12)
    first = train.run(rl_params)
    calibrated = calibrate_stage2.run(rl_params)
    second = train_stage2.run(rl_params)
    assert first["steps"] == 1 and second["steps"] == 2 and second["enabled"]
    # The untrained model solves nothing: every problem is <= 0.75 and goes to stage 2, the dev split excepted.
    assert (
        calibrated["problems"] == 60
        and calibrated["kept"] == 60
        and calibrated["keep_rule"].startswith("0 <=")
    )
    assert second["problems"] == 56 and second["dev_problems"] == 4
    stage1 = train.model_dir(rl_params)
    assert calibrated["model"] == str(stage1)  # sampled the stage-1 model, not the warm start
    assert (output(rl_params.paths, "train_stage2", "model") / "model.safetensors").exists()
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    stage2 = mlflow.get_run(second["mlflow_run_id"])
    assert stage2.info.run_name == "train_stage2" and stage2.data.tags["stage"] == "train_stage2"
    assert stage2.data.params["train.length_reward"] == "False"
    assert mlflow.get_run(first["mlflow_run_id"]).data.params["train.length_reward"] == "True"
    # Stage 1's model changed after the stage-2 pool was measured on it: stage 2 refuses to start from it.
    (stage1 / "config.json").write_text((stage1 / "config.json").read_text() + " ")
    with pytest.raises(StaleOutputError, match="not the model the train stage published"):
        train_stage2.run(rl_params)


def test_curriculum_stage2_off_writes_outputs_that_say_so(rl_params):
    from lead.stages import calibrate_stage2, train_stage2
    from lead.training.curriculum import DISABLED

    assert calibrate_stage2.run(rl_params) == {"enabled": False, "problems": 0, "kept": 0}
    assert train_stage2.run(rl_params) == {"enabled": False}
    assert [p.name for p in output(rl_params.paths, "train_stage2", "model").iterdir()] == [DISABLED]


def test_lora_trains_adapters_only_and_saves_a_merged_plain_model(rl_params):
    from safetensors.torch import load_file

    rl_params.train.lora.enabled, rl_params.train.lora.r = True, 4
    rl_params.train.learning_rate = 5e-2
    train.run(rl_params)
    out = train.model_dir(rl_params)
    assert not (out / "adapter_config.json").exists()  # merged: no peft needed downstream
    merged, start = (
        load_file(out / "model.safetensors"),
        load_file(rl_params.paths.models / "warmstart" / "model.safetensors"),
    )
    assert set(merged) == set(start)  # the base model's tensors, no lora_A / lora_B left
    changed = [k for k in start if not (merged[k] == start[k]).all()]
    assert changed and all("proj" in k for k in changed)  # only adapted linear layers moved
    ckpt = last_complete_checkpoint(resume_dir(rl_params.paths, "train"))
    assert (ckpt / "adapter_model.safetensors").exists()  # checkpoints hold the adapters


def test_two_processes_under_accelerate_launch_share_groups_one_run_one_model(rl_params, tmp_path):
    """What a multi-GPU launch does, on CPU: 2 processes (gloo), a group of 8 split 4 + 4 across them; each
    process trains on its slice of lead_advantages computed on the gathered batch."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from lead.training.presets import resolve

    t = rl_params.train
    t.num_generations, t.batch_size, t.max_steps = 8, 8, 2
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(rl_params.model_dump(mode="json", by_alias=True)))
    # The launched script: the train stage, with every process writing down, per step, the gathered rewards it
    # computed its advantages from and the advantages it trains on.
    spied = tmp_path / "spied"
    spied.mkdir()
    script = tmp_path / "spy_train.py"
    script.write_text(
        "import json, sys\n"
        "from lead.training import trainer as seam\n"
        "original = seam.LEADTrainer._generate_and_score_completions\n"
        "def spy(self, inputs):\n"
        "    out = original(self, inputs)\n"
        "    record = {'rewards': self._lead_batch['rewards'].tolist(), 'advantages': out['advantages'].tolist()}\n"
        f"    name = f'{spied}/{{self.accelerator.process_index}}-{{self.state.global_step}}.json'\n"
        "    open(name, 'w').write(json.dumps(record))\n"
        "    return out\n"
        "seam.LEADTrainer._generate_and_score_completions = spy\n"
        "from lead.stages.train import main\n"
        "main(sys.argv[1:])\n"
    )
    launcher = Path(sys.executable).with_name("accelerate")
    # --multi_gpu picks accelerate's distributed launcher (torch.distributed.run); without CUDA each process
    # runs on the CPU with gloo. (`--cpu` alone starts a single process, whatever --num_processes says.)
    cmd = [
        launcher,
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
    ]
    cmd += ["--dynamo_backend", "no", str(script), "--params", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((rl_params.paths.reports / "train.json").read_text())
    assert summary["steps"] == 2
    assert (train.model_dir(rl_params) / "model.safetensors").exists()
    assert not list(train.model_dir(rl_params).parent.glob(".train.saving"))
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    runs = mlflow.search_runs(
        experiment_names=["lead"], filter_string="tags.stage = 'train'", output_format="list"
    )
    published = published_run(rl_params.paths.models / "train.manifest.json")
    assert [r.info.run_id for r in runs] == [published.info.run_id]  # one run, from the main process
    assert runs[0].data.metrics["lead/share_correct"] >= 0.0
    s = resolve(t).lead
    for step in (0, 1):
        first, second = (json.loads((spied / f"{p}-{step}.json").read_text()) for p in (0, 1))
        assert first["rewards"] == second["rewards"] and len(first["rewards"]) == 8  # the gathered batch
        expected = lead_advantages(
            first["rewards"],
            8,
            reweight=s.reweight,
            drop_uninformative=s.drop_uninformative,
            scale_by_std=s.scale_by_std,
        )
        trained = (
            first["advantages"] + second["advantages"]
        )  # process 0 holds the first 4, process 1 the rest
        assert len(first["advantages"]) == len(second["advantages"]) == 4
        np.testing.assert_allclose(trained, expected, rtol=1e-6, atol=1e-6)


def test_a_crash_marks_the_mlflow_run_failed(rl_params, monkeypatch):
    def boom(self, *a, **k):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(seam.LEADTrainer, "train", boom)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train.run(rl_params)
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    (run,) = mlflow.search_runs(
        experiment_names=["lead"], filter_string="tags.stage = 'train'", output_format="list"
    )
    assert run.info.status == "FAILED"


def test_checkpoints_from_other_params_are_not_resumed(rl_params):
    first = train.run(rl_params)
    rl_params.train.alpha = 0.1  # a different method: its checkpoints must not be continued
    summary = train.run(rl_params)
    assert summary["resumed_from"] is None and summary["mlflow_run_id"] != first["mlflow_run_id"]


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_a_new_start_model_in_the_same_folder_trains_afresh(rl_params, tmp_path):
    """A retrained warm start (another tokenizer and shape) at the same path: never a resume of the old run."""
    from lead.core.proxy import generate_problems, warmstart_traces
    from lead.io.tiny_model import build_model, train_tokenizer
    from tests.conftest import SUFFIX

    first = train.run(rl_params)
    old = _weights(train.model_dir(rl_params))
    start = rl_params.paths.models / "warmstart"
    start.unlink()  # the fixture's symlink; the new warm start lands in the same folder
    problems = generate_problems(200, split="train", seed=1)
    corpus = [p.question + SUFFIX + "\n" + t for p, t in warmstart_traces(problems, per_problem=1, seed=1)]
    tokenizer = train_tokenizer(corpus, vocab_size=350)
    build_model(
        TinySpec(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=2), tokenizer
    ).save_pretrained(start)
    tokenizer.save_pretrained(start)
    second = train.run(rl_params)
    assert second["resumed_from"] is None and second["steps"] == rl_params.train.max_steps
    assert second["mlflow_run_id"] != first["mlflow_run_id"] and second["identity"] != first["identity"]
    new = _weights(train.model_dir(rl_params))
    assert new["model.embed_tokens.weight"].shape != old["model.embed_tokens.weight"].shape
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    assert mlflow.get_run(first["mlflow_run_id"]).info.status == "FINISHED"  # the old run is left as it was


def test_other_training_rows_train_afresh(rl_params):
    from lead.stages import curate

    first = train.run(rl_params)
    rl_params.curate.seed = 1  # another pool at the same path
    curate.run(rl_params)
    second = train.run(rl_params)
    assert second["resumed_from"] is None and second["mlflow_run_id"] != first["mlflow_run_id"]


def test_the_progress_bar_names_what_trains(rl_params, capsys):
    t = rl_params.train
    t.length_reward = t.penalty = t.reweight = False  # an ablation's plain GRPO cell
    train.run(rl_params)
    err = capsys.readouterr().err
    assert "train (GRPO): 2/2 (100 %)" in err and "GRPO-LEAD" not in err


def test_rerunning_a_finished_training_changes_nothing(rl_params):
    import shutil

    first = train.run(rl_params)
    model = train.model_dir(rl_params)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    assert train.run(rl_params) == first  # reused as a whole: no extra step, same run
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    shutil.rmtree(model)  # what `dvc repro -f train` does before running the stage
    assert train.run(rl_params) == first
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    mlflow.set_tracking_uri(rl_params.tracking.uri)
    runs = mlflow.search_runs(
        experiment_names=["lead"], filter_string="tags.stage = 'train'", output_format="list"
    )
    assert [r.info.run_id for r in runs] == [first["mlflow_run_id"]]
    assert mlflow.get_run(first["mlflow_run_id"]).data.params["resolved.loss_type"] == "grpo"


@pytest.mark.slow
def test_sigkill_then_rerun_resumes_into_the_same_mlflow_run(rl_params, tmp_path):
    """Kill -9 mid-run; the rerun continues from the last complete checkpoint, in the same MLflow run."""
    import yaml

    rl_params.train.max_steps = 40
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(rl_params.model_dump(mode="json", by_alias=True)))
    cmd = [sys.executable, "-m", "lead.stages.train", "--params", str(path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = resume_dir(rl_params.paths, "train")
    deadline = time.time() + 240
    while time.time() < deadline and not last_complete_checkpoint(ckpt):
        time.sleep(0.5)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = last_complete_checkpoint(ckpt)
    assert killed_at is not None, "no checkpoint was written before the kill"
    run_id = json.loads((ckpt / RUN_FILE).read_text())["run_id"]
    subprocess.run(cmd, check=True, capture_output=True)
    summary = json.loads((rl_params.paths.reports / "train.json").read_text())
    assert summary["steps"] == 40 and "resumed_from" not in summary  # the record: what was made, not how
    # The rerun's start ended the killed process's run (abandoned: FAILED), then took it up again, as its own,
    # and published the model from it.
    from lead.io.tracking import ENDED_BY_TAG, OWNER_TAG

    mlflow.set_tracking_uri(rl_params.tracking.uri)
    run = published_run(rl_params.paths.models / "train.manifest.json")
    assert run.info.run_id == run_id
    assert int(run.data.tags["resumed_from"].split("-")[1]) >= int(killed_at.name.split("-")[1])
    assert run.info.status == "FINISHED" and ENDED_BY_TAG not in run.data.tags, run.data.tags
    assert f":{proc.pid}:" not in run.data.tags[OWNER_TAG]


def test_an_empty_pool_stops_train_with_the_reason_and_its_knob(small_params):
    """A calibrated pool with nothing kept (calibrate now refuses to publish one; an older run's may be there)
    and an empty curated pool: a StageError naming the knob, not a traceback about calibrate's band."""
    import pandas as pd

    from lead.dag import StageError, manifest_path
    from lead.io.fingerprint import publish
    from tests.conftest import write_pool

    rows = [{"id": str(i), "problem": f"{i} + 1", "answer": str(i + 1)} for i in range(3)]
    write_pool(small_params, pd.DataFrame(rows))
    calibrated = small_params.paths.curated / "calibrated.parquet"
    pd.DataFrame([{**r, "k": 4, "n_correct": 0, "keep": False} for r in rows]).to_parquet(
        calibrated, index=False
    )
    publish(manifest_path(small_params.paths, "calibrate"), "calibrate", [calibrated])
    with pytest.raises(StageError) as err:
        training_rows(rl_inputs(small_params))
    assert str(err.value).startswith(
        f"{calibrated}: nothing to train on: calibrate kept 0 of 3 problems: the warm start solved 0 of 12 "
        "samples; use a stronger warm start (warmstart.epochs, warmstart.examples), easier problems "
        "(curate.sources) or calibrate.keep_inclusive: left or both (keeps p = 0)"
    )
    calibrated.unlink()
    write_pool(small_params, pd.DataFrame(columns=["id", "problem", "answer"]))
    with pytest.raises(
        StageError, match=r"the curated pool is empty, nothing to train on; check curate\.sources"
    ):
        training_rows(rl_inputs(small_params))


def test_micro_batches_train_the_same_step_as_one_batch(rl_params, tmp_path, cycled_outcomes, monkeypatch):
    """train.micro_batch_tokens changes how a step is computed, not what: 4 micro-batches of 2 completions with
    accumulated gradients make the update one batch of 8 makes (same seed, so the same generation), and one
    generation still serves the whole step."""
    from safetensors.torch import load_file

    generated = []
    original = seam.LEADTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = original(self, inputs)
        generated.append((len(out["advantages"]), float(out["advantages"].abs().sum())))
        return out

    monkeypatch.setattr(seam.LEADTrainer, "_generate_and_score_completions", spy)
    t = rl_params.train
    # Plain SGD, so that the update is the gradient itself (Adam's first step would hide a wrongly scaled one);
    # the entropy bonus is a mean per micro-batch in TRL, so it alone would differ: off.
    t.max_steps, t.entropy_coef, t.learning_rate, t.weight_decay = 1, 0.0, 1.0, 0.0
    t.grpo_config = {"optim": "sgd"}
    train_from_start(rl_params, tmp_path / "one", tmp_path / "one-resume")
    sequence = rl_params.curate.max_prompt_tokens + t.max_completion_length
    t.micro_batch_tokens = 2 * sequence
    args = grpo_config_kwargs(
        t, tmp_path, max_prompt_tokens=rl_params.curate.max_prompt_tokens, world=1, cuda=False
    )
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (2, 4)
    train_from_start(rl_params, tmp_path / "micro", tmp_path / "micro-resume")
    assert len(generated) == 2 and all(n == 8 and total > 0 for n, total in generated)  # a signal to train on
    start = load_file(str(start_model(rl_inputs(rl_params)) + "/model.safetensors"))
    one, micro = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("one", "micro"))
    update = {k: one[k] - start[k] for k in start}
    largest = max(float(u.abs().max()) for u in update.values())
    assert largest > 1e-4
    for key, value in update.items():
        torch.testing.assert_close(micro[key] - start[key], value, rtol=1e-3, atol=1e-3 * largest)


# What TRL's colocated engine sets in os.environ for torch.distributed (trl/generation/vllm_generation.py).
DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _leave_the_process_group(environ: dict[str, str | None]) -> None:
    """Leave this process as it was before the colocated engine: its torch.distributed group freed (its port
    included), accelerate's shared state forgotten (it says MULTI_CPU once built under LOCAL_RANK, and a later
    trainer's barrier would wait on a group that no longer exists), ``environ`` (name: value, None = unset) back."""
    from accelerate.state import AcceleratorState
    from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

    destroy_model_parallel()
    destroy_distributed_environment()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)
    for name, value in environ.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.mark.slow
def test_on_cpu_the_trainer_generates_with_vllm_from_the_weights_it_trains(
    rl_params, tiny_model, cycled_outcomes, monkeypatch, request
):
    """TRL's colocated vLLM on CPU (lead.training.vllm_cpu), an eager engine: two GRPO steps at a learning rate that
    changes the greedy completions; after TRL's own weight sync, vLLM's greedy completions are transformers' with the
    trained weights up to the engine's bfloat16 rounding, and far from the start model's."""
    from transformers import AutoModelForCausalLM
    from vllm import SamplingParams

    from lead.io.sampling import vllm_dtype

    trainers = []
    original = seam.LEADTrainer.train

    def keep(self, *args, **kwargs):
        trainers.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(seam.LEADTrainer, "train", keep)
    # TRL's colocated engine sets these for torch.distributed in this process: undone at the end, or every
    # process this test worker starts later (a `dvc repro`, a Prefect worker) would join a group on port 29500,
    # and every later trainer in it would think itself one of a group. (monkeypatch.delenv of an unset name
    # records nothing to undo: the finalizer puts back what was there.)
    environ = {name: os.environ.pop(name, None) for name in DISTRIBUTED_ENV}
    request.addfinalizer(lambda: _leave_the_process_group(environ))
    rl_params.train.use_vllm, rl_params.train.learning_rate = True, 0.05
    assert train.run(rl_params)["steps"] == 2
    (trainer,) = trainers
    assert trainer.vllm_generation.llm.llm_engine.model_config.enforce_eager  # no torch.compile at its start
    trainer.vllm_generation.sync_weights()  # what TRL does before generating at the next step

    tokenizer = trainer.processing_class
    prompts = [tokenizer(p.question)["input_ids"] for p in tiny_model[1][:6]]

    generated = trainer.vllm_generation.llm.generate(
        [{"prompt_token_ids": ids} for ids in prompts],
        SamplingParams(temperature=0, max_tokens=12),
        use_tqdm=False,
    )
    from_vllm = [list(g.outputs[0].token_ids) for g in generated]

    def shortfall(model) -> float:
        """Teacher-forced on vLLM's completions: the most any token vLLM chose falls short of ``model``'s best
        logit at its position (0 when every token is ``model``'s greedy choice)."""
        worst = 0.0
        with torch.no_grad():
            for ids, completion in zip(prompts, from_vllm, strict=True):
                logits = model(torch.tensor([ids + completion])).logits[0, len(ids) - 1 : -1]
                chosen = logits.gather(1, torch.tensor(completion)[:, None])[:, 0]
                worst = max(worst, float((logits.max(-1).values - chosen).max()))
        return worst

    # Measured in logits rather than as equal token lists: the engine runs the float32 policy in bfloat16 (vLLM's
    # default for a float32 checkpoint, lead.io.sampling.vllm_dtype), so at a near tie its greedy choice may differ
    # from transformers' and the rest of the completion with it, although both hold the same weights. Seen here:
    # a shortfall of 1e-3 with the trained weights, 1.4 with the start model's.
    engine_dtype = trainer.vllm_generation.llm.llm_engine.model_config.dtype
    assert engine_dtype == getattr(torch, vllm_dtype(rl_params.model.dtype)) == torch.bfloat16
    assert shortfall(trainer.model.eval()) < 0.05
    # The start model would not have written these completions: the sync is real.
    assert shortfall(AutoModelForCausalLM.from_pretrained(tiny_model[0]).eval()) > 0.5
