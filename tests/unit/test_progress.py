"""Progress without a terminal (DVC, CI, a Prefect worker): timed lines instead of a bar drawn at the end."""

from types import SimpleNamespace

from lead.io import progress


def _lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_a_loop_prints_a_line_per_tenth_and_none_twice(capsys):
    assert not progress.console.is_terminal  # pytest captures: a log, not a terminal
    with progress.progress_bar("calibrate: sampling", 20) as advance:
        for i in range(20):
            advance(1, status=f"chunk {i // 5 + 1}/4")
    lines = _lines(capsys)
    assert len(lines) == 10 and lines[0].startswith("calibrate: sampling: 2/20 (10 %), ")
    assert lines[-1].startswith("calibrate: sampling: 20/20 (100 %)") and lines[-1].endswith("chunk 4/4")


def test_a_minute_without_a_tenth_still_prints(capsys, monkeypatch):
    clock = iter([0.0, 30.0, 61.0, 62.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    tracker = progress.open_progress("train", 1000)
    tracker.update(advance=1)  # 30 s: nothing yet
    tracker.update(advance=1)  # 61 s: a line although 2/1000 is no tenth
    tracker.close()  # nothing new since: no second line
    assert _lines(capsys) == ["train: 2/1000 (0 %), 0.03/s, 8:27:19 left"]  # 998 left at 2 per 61 s


def test_the_last_line_shows_the_last_status(capsys):
    tracker = progress.open_progress("train", 2)
    tracker.update(completed=1, status="reward=0.1")
    tracker.update(completed=2)  # a trainer counts the step ...
    tracker.update(status="reward=0.4")  # ... then logs it
    tracker.close()
    last = _lines(capsys)[-1]
    assert last.startswith("train: 2/2 (100 %)") and last.endswith("reward=0.4")


def test_a_long_status_stays_on_its_line(capsys):
    tracker = progress.open_progress("warmstart (SFT)", 10)
    tracker.update(advance=1, status="loss=0.175 mean_token_accuracy=0.931 " + "x" * 60)
    (line,) = _lines(capsys)
    assert line.startswith("warmstart (SFT): 1/10 (10 %)") and line.endswith("x" * 60)


def test_the_trainer_callback_shows_on_the_main_process_only(capsys):
    from lead.training.callbacks import RichProgressCallback

    for main in (False, True):
        cb = RichProgressCallback("train (GRPO-LEAD)")
        state = SimpleNamespace(is_world_process_zero=main, max_steps=4, global_step=0)
        cb.on_train_begin(None, state, None)
        for step in range(1, 5):
            state.global_step = step
            cb.on_step_end(None, state, None)
            cb.on_log(None, state, None, logs={"loss": 0.5, "reward": 0.25})
        cb.on_train_end(None, state, None)
        lines = _lines(capsys)
        assert (
            (len(lines) == 4 and lines[-1].startswith("train (GRPO-LEAD): 4/4 (100 %)"))
            if main
            else lines == []
        )
    assert "loss=0.5 reward=0.25" in lines[-1]
