"""Dynamic sampling in LEADTrainer on the tiny model: the groups a step trains on, with one process and two, and
after a kill (lead.core.dynamic_sampling decides, lead.training.refill joins)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from trl import GRPOTrainer

from lead.core import dynamic_sampling
from lead.core.advantages import uninformative_groups
from lead.core.outcomes import Outcome
from lead.dag import resume_dir
from lead.grading import GradeStats
from lead.stages import train
from lead.training import trainer as seam
from lead.training.identity import FINAL_COPY, RUN_FILE

CYCLE = [Outcome.CORRECT, Outcome.WRONG, Outcome.CORRECT, Outcome.UNFINISHED]


def by_gold(texts, golds, truncated, settings):
    """The stub policy's verdicts: a problem with an odd answer is always wrong (its group carries no signal),
    one with an even answer cycles through CYCLE (its group does)."""
    outcomes = [Outcome.WRONG if int(g) % 2 else CYCLE[i % 4] for i, g in enumerate(golds)]
    return outcomes, GradeStats(total=len(texts))


def informative(gold: str) -> bool:
    return int(gold) % 2 == 0


@pytest.fixture
def rounds(monkeypatch):
    """Every generation round TRL scores during training: (optimizer step, the prompts' answers, its output)."""
    seen: list[tuple[int, list[str], dict]] = []
    original = GRPOTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = original(self, inputs)
        if self.model.training:
            seen.append((self.state.global_step, [x["answer"] for x in inputs], out))
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    monkeypatch.setattr(seam, "classify", by_gold)
    return seen


def test_a_step_trains_on_exactly_the_informative_groups_its_rounds_found(rl_params, rounds, monkeypatch):
    trained = []
    original = seam.LEADTrainer._generate_and_score_completions

    def keep(self, inputs):
        out = original(self, inputs)
        if self.model.training:
            trained.append((self.state.global_step, list(self._lead_rows["gold"]), out))
        return out

    monkeypatch.setattr(seam.LEADTrainer, "_generate_and_score_completions", keep)
    t = rl_params.train
    t.dynamic_sampling, t.max_refill_rounds, t.max_steps = True, 4, 3
    summary = train.run(rl_params)
    assert summary["steps"] == 3
    g = t.num_generations
    for step, golds, out in trained:
        step_rounds = [(answers, o) for s, answers, o in rounds if s == step]
        # Expected: the informative groups of the rounds in order, two (the batch's groups) of them.
        groups = [(r, i) for r, (answers, _) in enumerate(step_rounds) for i in range(len(answers) // g)]
        good = [(r, i) for r, i in groups if informative(step_rounds[r][0][i * g])]
        assert len(step_rounds) > 1 or len(good) >= 2  # refilled unless the first batch was all informative
        want = good[:2]
        assert [golds[k * g] for k in range(2)] == [step_rounds[r][0][i * g] for r, i in want]
        assert all(informative(x) for x in golds)
        # The tensors are the kept groups' own rows (completions right-padded to the widest round).
        for k, (r, i) in enumerate(want):
            source = step_rounds[r][1]["completion_ids"][i * g : (i + 1) * g]
            mine = out["completion_ids"][k * g : (k + 1) * g, : source.shape[1]]
            assert torch.equal(mine, source)
        assert (out["advantages"].reshape(2, g).abs().sum(dim=1) > 0).all()  # every group trains
        mask = out["completion_mask"]
        assert int(out["num_items_in_batch"]) == int(mask.sum())
    refills = [s for s, *_ in rounds].count
    assert sum(refills(step) - 1 for step in range(3)) > 0, (
        "no step refilled: the stub's pattern is not tested"
    )


def test_off_draws_nothing_more(rl_params, rounds):
    rl_params.train.max_steps = 2
    train.run(rl_params)
    assert [s for s, *_ in rounds] == [0, 1]


def test_a_run_killed_after_a_checkpoint_draws_the_same_refill_prompts_and_ends_with_the_same_model(
    rl_params, rounds
):
    """4 steps with refills; killed after checkpoint 3 (what SIGKILL leaves: the run file says running, the last
    two checkpoints kept less the unfinished one), the rerun resumes, draws the uninterrupted run's prompts round
    for round in step 4, and saves the same model bytes."""
    t = rl_params.train
    t.dynamic_sampling, t.max_steps, t.save_steps = True, 4, 1
    train.run(rl_params)
    model = train.model_dir(rl_params) / "model.safetensors"
    uninterrupted, drawn = model.read_bytes(), [(s, a) for s, a, _ in rounds]
    assert len(drawn) > 4  # some step refilled
    ckpt = resume_dir(rl_params.paths, "train")
    run = json.loads((ckpt / RUN_FILE).read_text())
    for name in ("checkpoint-4", FINAL_COPY):
        shutil.rmtree(ckpt / name)
    shutil.rmtree(model.parent)
    (ckpt / RUN_FILE).write_text(
        json.dumps({"identity": run["identity"], "run_id": run["run_id"], "state": "running"})
    )
    rounds.clear()
    resumed = train.run(rl_params)
    assert resumed["resumed_from"] == "checkpoint-3"
    again = [(s, a) for s, a, _ in rounds]
    assert again == [(s, a) for s, a in drawn if s >= 3] and len(again) > 1  # step 4 refilled, the same way
    assert model.read_bytes() == uninterrupted


def test_two_processes_take_the_same_decision_on_the_gathered_batch(rl_params, tmp_path):
    """accelerate launch, 2 processes on the CPU, one group each: every round is taken by both processes
    together, both compute the same gathered rewards, and together they train the informative groups the plan
    of the gathered rounds names."""
    t = rl_params.train
    t.dynamic_sampling, t.max_steps = True, 2
    path = tmp_path / "params.yaml"
    import yaml

    path.write_text(yaml.safe_dump(rl_params.as_written()))
    spied = tmp_path / "spied"
    spied.mkdir()
    script = tmp_path / "launch.py"
    script.write_text(
        "import json, sys\n"
        "from trl import GRPOTrainer\n"
        "from lead.training import trainer as seam\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_dynamic_sampling import by_gold\n"
        "seam.classify = by_gold\n"
        "inner, outer = GRPOTrainer._generate_and_score_completions, seam.LEADTrainer._generate_and_score_completions\n"
        "log = []\n"
        "def round_(self, inputs):\n"
        "    out = inner(self, inputs)\n"
        "    if self.model.training:\n"
        "        log.append({'step': self.state.global_step, 'answers': [x['answer'] for x in inputs],\n"
        "                    'gathered': self._lead_batch['rewards'].tolist()})\n"
        "    return out\n"
        "def step(self, inputs):\n"
        "    out = outer(self, inputs)\n"
        "    if self.model.training:\n"
        "        log.append({'step': self.state.global_step, 'kept': list(self._lead_rows['gold']),\n"
        "                    'advantages': out['advantages'].tolist()})\n"
        f"        open(f'{spied}/{{self.accelerator.process_index}}.json', 'w').write(json.dumps(log))\n"
        "    return out\n"
        "GRPOTrainer._generate_and_score_completions = round_\n"
        "seam.LEADTrainer._generate_and_score_completions = step\n"
        "from lead.stages.train import main\n"
        "main(sys.argv[1:])\n"
    )
    launcher = Path(sys.executable).with_name("accelerate")
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no", str(script), "--params", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = [json.loads((spied / f"{p}.json").read_text()) for p in (0, 1)]
    g = t.num_generations
    refilled = 0
    for step in (0, 1):
        mine = [[e for e in log if e["step"] == step] for log in logs]
        rounds0, rounds1 = ([e for e in m if "gathered" in e] for m in mine)
        refilled += len(rounds0) - 1
        assert [e["gathered"] for e in rounds0] == [
            e["gathered"] for e in rounds1
        ]  # the same rounds, same batch
        flags = [~uninformative_groups(e["gathered"], g) for e in rounds0]
        plan = dynamic_sampling.plan(flags, 2, 1)
        for proc in (0, 1):
            ((r, i),) = plan.picks[proc]
            kept = next(e for e in mine[proc] if "kept" in e)["kept"]
            answers = [e for e in mine[proc] if "answers" in e][r]["answers"]
            assert kept == answers[i * g : (i + 1) * g]
            assert informative(kept[0]) == (plan.informative[proc] == 1)
    assert refilled > 0, "no step refilled: the stub's pattern is not tested"
