"""A killed training resumed past its first epoch trains what an uninterrupted one trains (tests/stages/).

TRL's ``RepeatSampler`` draws epoch k's order as the (k+1)-th permutation of one generator it seeds once; the
Trainer, resuming in epoch k >= 1, skips that epoch's batches but starts a fresh sampler, so the resumed steps
trained on epoch 0's order again (``LEADTrainer._get_train_sampler`` / ``EpochSampler`` fix it).
"""

import json
import shutil

from lead.core.outcomes import Outcome
from lead.dag import resume_dir
from lead.grading import GradeStats
from lead.stages import train
from lead.training import phase
from lead.training import trainer as seam
from lead.training.identity import FINAL_COPY, RUN_FILE

CYCLE = [Outcome.CORRECT, Outcome.WRONG, Outcome.CORRECT, Outcome.UNFINISHED]


def test_a_run_resumed_in_a_later_epoch_trains_what_an_uninterrupted_one_trains(rl_params, monkeypatch):
    """5 training prompts, 2 a step: 2 steps an epoch. Killed after step 3's checkpoint (in epoch 1), the rerun
    resumes from checkpoint-3 and trains step 4 on the uninterrupted run's batch, to the same model bytes."""
    monkeypatch.setattr(  # advantages never zero, whatever the untrained model writes: every step moves weights
        seam,
        "classify",
        lambda texts, *a, **k: ([CYCLE[i % 4] for i in range(len(texts))], GradeStats(total=len(texts))),
    )
    rows = phase.training_rows
    monkeypatch.setattr(phase, "training_rows", lambda *a, **k: rows(*a, **k)[:5])
    seen = []
    original = seam.LEADTrainer._generate_and_score_completions

    def spy(self, inputs):
        if self.model.training:
            seen.append((self.state.global_step, [x["answer"] for x in inputs][:: self.num_generations]))
        return original(self, inputs)

    monkeypatch.setattr(seam.LEADTrainer, "_generate_and_score_completions", spy)
    rl_params.train.max_steps, rl_params.train.save_steps = 4, 1
    first = train.run(rl_params)
    assert first["steps"] == 4 and first["resumed_from"] is None
    model = train.model_dir(rl_params) / "model.safetensors"
    curves = rl_params.paths.reports / "train_curves.csv"
    uninterrupted, curve, batches = model.read_bytes(), curves.read_text(), dict(seen)
    assert len(batches) == 4 and batches[2] != batches[0]  # epoch 1's order is not epoch 0's

    # What a SIGKILL after checkpoint-3 was sealed leaves: the run file says running, no later checkpoint, no
    # model (`dvc repro -f` removes the output too).
    ckpt = resume_dir(rl_params.paths, "train")
    run = json.loads((ckpt / RUN_FILE).read_text())
    shutil.rmtree(ckpt / "checkpoint-4")
    shutil.rmtree(ckpt / FINAL_COPY)
    shutil.rmtree(model.parent)
    (ckpt / RUN_FILE).write_text(
        json.dumps({"identity": run["identity"], "run_id": run["run_id"], "state": "running"})
    )
    seen.clear()
    resumed = train.run(rl_params)

    assert resumed["resumed_from"] == "checkpoint-3" and resumed["steps"] == 4
    assert dict(seen) == {3: batches[3]}, (
        "the resumed step trained on another batch than the uninterrupted one"
    )
    assert model.read_bytes() == uninterrupted
    assert curves.read_text() == curve


def test_the_train_sampler_orders_an_epoch_by_seed_and_epoch_alone():
    """EpochSampler.set_epoch(k) on a fresh sampler gives TRL's RepeatSampler's (k+1)-th order."""
    from trl.trainer.utils import RepeatSampler

    data = list(range(7))
    trl_sampler = RepeatSampler(data, mini_repeat_count=2, batch_size=3, repeat_count=1, seed=0)
    epochs = [list(trl_sampler) for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    for k, order in enumerate(epochs):
        fresh = seam.EpochSampler(data, mini_repeat_count=2, batch_size=3, repeat_count=1, seed=0)
        fresh.set_epoch(k)
        assert list(fresh) == order
        assert list(fresh) == order  # iterating again does not move on to another order
