"""The headline view of DVC experiments (lead exp) from `dvc exp show --json`'s shape."""

from lead.core import experiments


def _rev(rev: str, name: str | None, steps: int, pass_at_1: float | None, **exps) -> dict:
    metrics = {
        "reports/evaluate/headline.json": {
            "data": {"proxy.pass_at_1": pass_at_1, "proxy.len_avg": 40.0, "proxy.level_1.pass_at_1": 0.9}
        },
        "reports/calibrate/headline.json": {"data": {"kept": 7}},
        "reports/train_headline.json": {"data": {"steps": steps, "last_reward": -0.1}},
    }
    params = {"params.yaml": {"data": {"train": {"max_steps": steps, "lr": 1e-5}, "evaluate": {"n": [1, 2]}}}}
    return {"rev": rev, "name": name, "data": {"params": params, "metrics": metrics}, **exps}


def test_rows_show_what_each_experiment_changed_and_its_headline():
    exp = _rev("e" * 40, "five-steps", 5, 0.25)
    commit = _rev("c" * 40, "main", 100, 0.30, experiments=[{"revs": [exp]}])
    shown = [_rev("workspace", None, 5, 0.25), commit]
    rows = experiments.rows(shown)
    assert [r.name for r in rows] == ["workspace", "main", "five-steps"]
    assert [r.baseline for r in rows] == ["main", "main", "main"]
    assert rows[1].changed == {} and rows[2].changed == {"train.max_steps": 5}
    # Per benchmark Pass@1 and Len (not each level's), then the pool and the training.
    assert rows[2].figures == {
        "proxy Pass@1": 0.25,
        "proxy Len": 40.0,
        "kept": 7,
        "steps": 5,
        "last reward": -0.1,
    }


def test_missing_metrics_are_none_and_an_unnamed_commit_is_its_short_hash():
    bare = {"rev": "abcdef0123", "name": None, "data": {"params": {}, "metrics": {}}}
    (row,) = experiments.rows([bare])
    assert row.name == "abcdef0" and row.figures == {"kept": None, "steps": None, "last reward": None}


def test_a_sweep_is_its_points_with_their_settings_and_the_reports_figures():
    row = experiments.ExperimentRow(
        "sweep-1",
        "main",
        {
            "ablation.variants.alpha_0p5.alpha": 0.5,
            "ablation.variants.alpha_1.alpha": 1.0,
            "ablation.seeds": [0],
        },
        {"proxy Pass@1": 0.8},
        "abc123",
    )
    assert row.sweep and not experiments.ExperimentRow("e", "main", {"train.alpha": 0.5}, {}, "abc").sweep
    assert not experiments.ExperimentRow("workspace", "main", row.changed, {}, "workspace").sweep
    metrics = {
        "warmstart": {"pass_at_1": 0.7, "mean_length": 60.0, "gain": None},
        "alpha_0p5": {"pass_at_1": 0.8, "mean_length": 50.0, "gain": 0.1},
        "alpha_1": {"pass_at_1": 0.79, "mean_length": 45.0, "gain": 0.09},
        "claims": {},
        "target_met": False,
    }
    rows = experiments.sweep_rows(row, metrics)
    assert [r.name for r in rows] == ["warmstart", "alpha_0p5", "alpha_1"] and rows[0].baseline == "sweep-1"
    assert rows[1].changed == {"alpha": 0.5} and rows[2].figures == {
        "Pass@1": 0.79,
        "Len": 45.0,
        "gain": 0.09,
    }
    assert rows[0].changed == {} and all(r.rev == "abc123" for r in rows)
