"""The flow's summary of a run: one line per stage from its summary JSON, and the markdown artifact."""

from flows.summary import StageRow, markdown, model_link, run_link, stage_line
from lead.io.summaries import headline

# The summaries' shapes as the reduced pipeline writes them (tests/flows/conftest.py), trimmed.
SUMMARIES = {
    "curate": {"train": 60, "test": 6, "removed": {"drop_exact_duplicates": 3}, "sources": {}},
    "warmstart": {"enabled": True, "steps": 4, "final_loss": 5.7841, "model": "sha256:7f50"},
    "calibrate": {"kept": 58, "problems": 60, "keep_rule": "0 <= pass_rate <= 1", "mean_pass_rate": 0.125},
    "train": {"steps": 2, "last_reward": None, "resumed_from": None, "mlflow_run_id": "81a8"},
    "calibrate_stage2": {"enabled": False, "problems": 0, "kept": 0},
    "train_stage2": {"enabled": True, "steps": 1, "last_reward": -0.5, "resumed_from": "checkpoint-1"},
    "evaluate": {
        "proxy.pass_at_1": 0.25,
        "proxy.len_avg": 75.5,
        "proxy.budget_48.pass_at_1": 0.0,
        "proxy.level_1.pass_at_1": 0.5,
        "aime24.pass_at_1": 0.0,
        "aime24.len_avg": 83.375,
    },
    "register": {
        "model_name": "lead-e2e",
        "version": 3,
        "aliases": ["challenger", "champion"],
        "promoted": True,
    },
}


def test_each_stage_has_a_headline_from_its_summary():
    lines = {stage: headline(stage, summary) for stage, summary in SUMMARIES.items()}
    assert lines == {
        "curate": "60 train, 6 test problems; 3 removed",
        "warmstart": "4 steps, final loss 5.784",
        "calibrate": "kept 58 of 60 (0 <= pass_rate <= 1); mean pass rate 0.125",
        "train": "2 steps, last reward n/a",
        "calibrate_stage2": "off",
        "train_stage2": "1 step, last reward -0.500, resumed from checkpoint-1",
        # the top-level Pass@1 and length of each benchmark, not those per budget or level
        "evaluate": "proxy Pass@1 0.250, Len 75.5; aime24 Pass@1 0.000, Len 83.4",
        "register": "lead-e2e version 3 (challenger, champion)",
    }
    assert (
        headline("warmstart", {"enabled": False, "model": "Qwen/Qwen2.5-0.5B"})
        == "off (starts from Qwen/Qwen2.5-0.5B)"
    )
    skipped = {
        "registered": False,
        "reason": "DVC experiment x: not registered (register.on_experiment is false)",
    }
    assert headline("register", skipped) == f"nothing registered: {skipped['reason']}"
    again = {"model_name": "m", "version": 2, "aliases": ["challenger"], "new_version": False}
    assert (
        headline("register", again)
        == "m version 2 (challenger), registered before (the same model and evaluation)"
    )
    assert headline("train", {}) == "no summary written"
    assert headline("train", {"last_reward": 1.0}) == "summary unreadable (KeyError: 'steps')"
    assert stage_line("curate", "skipped", SUMMARIES["curate"]) == (
        "curate: skipped (up to date) — 60 train, 6 test problems; 3 removed"
    )


def test_links_go_to_the_mlflow_ui_only_when_the_tracking_uri_is_one():
    assert run_link("http://mlflow:5000/", "4", "abcdef0123456789") == (
        "[abcdef012345](http://mlflow:5000/#/experiments/4/runs/abcdef0123456789)"
    )
    assert run_link("sqlite:////w/mlflow.db", "4", "abcdef0123456789") == "`abcdef0123456789`"
    assert model_link("https://mlflow.example", "lead", 2) == (
        "[lead version 2](https://mlflow.example/#/models/lead/versions/2)"
    )
    assert model_link("sqlite:////w/mlflow.db", "lead", 2) == "`lead version 2`"


def test_the_markdown_has_a_row_per_stage_with_its_outcome_result_and_run():
    rows = [
        StageRow("curate", "skipped", SUMMARIES["curate"], 0.7),
        StageRow("train", "skipped", SUMMARIES["train"], 0.7, run=("1", "81a8"), earlier_run=True),
        StageRow("evaluate", "ran", SUMMARIES["evaluate"] | {"x|y.pass_at_1": 1.0}, 21.5, run=("1", "e38b")),
        StageRow("register", "ran", SUMMARIES["register"], 15.6, run=("1", "e861")),
    ]
    experiment = {
        "name": "taupe-smilodon-71eb5334",
        "rev": "60bbdf97996c1b68",
        "baseline": "fae42890f4b2955a",
    }
    text = markdown(
        flow_run="taupe-smilodon",
        tracking_uri="http://mlflow:5000",
        parent=("1", "53a9"),
        overrides=["evaluate.max_new_tokens=48"],
        experiment=experiment,
        rows=rows,
    )
    assert "`dvc exp apply taupe-smilodon-71eb5334`" in text and "commit `60bbdf9799` on `fae42890f4`" in text
    assert "**Overrides**: `evaluate.max_new_tokens=48`" in text
    assert (
        "[lead-e2e version 3](http://mlflow:5000/#/models/lead-e2e/versions/3) (challenger, champion)" in text
    )
    assert "\n- **curate**: skipped (up to date) in 0.7 s: 60 train, 6 test problems; 3 removed\n" in text
    assert (
        "\n- **train**: skipped (up to date) in 0.7 s: 2 steps, last reward n/a; MLflow run [81a8](" in text
    )
    assert "(an earlier run)\n" in text
    assert "x|y Pass@1 1.000" in text  # (a list item: a "|" is text)
    # One bullet per stage, no table: Prefect's UI does not wrap a table's cells (1,400 px overflowed).
    stages = text.split("## Stages\n", 1)[1]
    assert stages.count("\n- **") == len(rows) and "\n|" not in text


def test_a_run_that_stopped_early_says_which_stage_failed_and_that_no_experiment_was_saved():
    rows = [
        StageRow("curate", "ran", SUMMARIES["curate"], 3.0),
        StageRow("warmstart", "failed"),
        StageRow("calibrate", "not run"),
    ]
    text = markdown(
        flow_run="red-fox",
        tracking_uri="sqlite:////w/mlflow.db",
        parent=("1", "53a9"),
        overrides=["train.max_steps=4"],
        experiment=None,
        rows=rows,
    )
    assert "the run stopped before its DVC experiment was saved" in text
    assert "\n- **warmstart**: failed\n" in text and "\n- **calibrate**: not run\n" in text
    assert "**Registered**: no version" in text and "parent run `53a9`" in text
    workspace_run = markdown(
        flow_run="red-fox",
        tracking_uri="sqlite:///m.db",
        parent=("1", "5"),
        overrides=[],
        experiment=None,
        rows=rows,
    )
    assert "the workspace itself (no overrides)" in workspace_run


def test_what_became_of_a_stage_is_read_from_dvc_repros_own_words():
    from flows.pipeline import verdict

    assert verdict("train", ["Running stage 'train':", "> python -m lead.stages.train"]) == "ran"
    assert verdict("curate", ["Stage 'curate' didn't change, skipping"]) == "skipped"
    assert (
        verdict("evaluate", ["Stage 'evaluate' is cached - skipping run, checking out outputs"]) == "restored"
    )
    assert verdict("curate", ["Pulling data for stage: 'curate'"]) == "pulled"
    # a pull that failed, then the stage ran; another stage's words say nothing about this one
    said = [
        "Pulling data for stage: 'train'",
        "Unable to pull data for stage: 'train'",
        "Running stage 'train':",
    ]
    assert verdict("train", said) == "ran"
    assert verdict("train_stage2", ["Stage 'train' didn't change, skipping"]) == "ran"


def test_prefects_engine_traceback_of_a_run_that_said_why_it_stopped_is_left_out_of_the_run_log():
    """A worker's engine logs a failed flow's exception with its traceback (ENGINE_FAILURE, prefect/flow_engine.py)
    after the run's own one line (flows.prefect_api.stopped): that record is dropped; any other error stays."""
    import inspect
    import logging

    import prefect.flow_engine

    from flows.prefect_api import ENGINE_FAILURE, SAID, quiet_engine_failure

    assert f'"{ENGINE_FAILURE}", exc_info=True' in inspect.getsource(prefect.flow_engine.run_flow)
    quiet_engine_failure()
    quiet_engine_failure()  # once per process
    log = logging.getLogger("prefect.flow_runs")
    heard: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
    log.addHandler(handler)
    disabled, log.disabled = log.disabled, False
    try:
        said, bug = RuntimeError("unknown key 'train.max_stepz'"), ZeroDivisionError("a bug")
        setattr(said, SAID, True)
        for exc in (said, bug):
            log.error(ENGINE_FAILURE, exc_info=(type(exc), exc, None))
        log.error("another error", exc_info=(type(said), said, None))
    finally:
        log.removeHandler(handler)
        log.disabled = disabled
    assert heard == [ENGINE_FAILURE, "another error"]  # the bug's traceback stays; so does any other record
