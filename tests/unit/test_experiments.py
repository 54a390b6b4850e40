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
