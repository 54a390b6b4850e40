"""The register stage: a registry version with lineage and description; the gate moves @champion or not."""

import json
import re
import shutil

import mlflow
import pytest
from mlflow import MlflowClient

from lead import evaluation, registration
from lead.config import Params
from lead.core.review import UI_MODE, protocol
from lead.dag import manifest_path
from lead.evaluation import ACCURACY_PLOT, BUDGET_PLOT, METRICS, output_dir
from lead.io.fingerprint import StaleOutputError, model_fingerprint, publish
from lead.io.tracking import mark_run, use_experiment
from lead.stages import register
from tests.conftest import tmp_params

pytestmark = pytest.mark.slow  # logs a transformers model per version (~10 s each)


@pytest.fixture
def params(tmp_path, tiny_model) -> Params:
    p = tmp_params(tmp_path, register={"model_name": "lead-test"})
    model = p.paths.models / "train"
    shutil.copytree(tiny_model[0], model)
    (p.paths.reports).mkdir(parents=True)
    # As the train stage does: the model it published, and the MLflow run that trained it.
    use_experiment(p.tracking)
    with mlflow.start_run(run_name="train", tags={"stage": "train"}) as train_run:
        mlflow.log_params({"train.max_steps": 100, "train.preset": "paper"})
    (p.paths.reports / "train.json").write_text(json.dumps({"steps": 100}))
    fingerprint = model_fingerprint(model)
    publish(
        manifest_path(p.paths, "train"),
        "train",
        [p.paths.reports / "train.json"],
        before_writing=mark_run(train_run.info.run_id),
        model=fingerprint,
    )
    p.evaluate.model = "train"
    return p


# A 1x1 PNG: what evaluate's plots are, as far as the registry's links are concerned.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f0000010101005d8d6c540000000049454e44ae426082"
)


# The sample records of two evaluations: the second newly fails p1 and newly solves p2 against the first.
ANSWERS = {
    "first": {"p1": ["7", "7"], "p2": ["3", "5"], "p3": ["9", "9"]},
    "second": {"p1": ["6", "8"], "p2": ["4", "4"], "p3": ["9", "9"]},
}
GOLDS = {"p1": "7", "p2": "4", "p3": "9"}


def sample_records(answers: dict[str, list[str]]) -> list[dict]:
    """Evaluate's records for ``answers`` (problem -> one answer per sample) on the proxy benchmark."""
    return [
        {
            "benchmark": "proxy",
            "problem_id": pid,
            "problem": f"What is 6*{pid}?",
            "band": "level_1",
            "gold": GOLDS[pid],
            "seed": 0,
            "sample": i,
            "completion": f"<think>working on {pid}</think> The answer is \\boxed{{{a}}}." + " so" * (3 * i),
            "answer": a,
            "correct": a == GOLDS[pid],
            "tokens": 10 + 3 * i,
            "finished": True,
            "in_context": True,
        }
        for pid, group in answers.items()
        for i, a in enumerate(group)
    ]


def _plot(path, pass_at_1: float) -> None:
    """A small accuracy-against-length figure, as evaluate draws one (what the description embeds)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 2.6), layout="constrained")
    ax = fig.subplots()
    ax.plot([20, 40, 60, 80], [pass_at_1 + 0.1, pass_at_1, pass_at_1 - 0.05, pass_at_1 - 0.1], marker="o")
    ax.set(xlabel="mean tokens", ylabel="share correct", title="proxy: accuracy against answer length")
    fig.savefig(path, dpi=80)


def evaluated(
    params: Params,
    pass_at_1: float,
    len_avg: float,
    model=None,
    logged=None,
    backend="transformers",
    answers="first",
) -> str:
    """What evaluate leaves: metrics.json and samples.parquet (:data:`ANSWERS`), its MLflow run (finished, with
    ``logged`` or the same figures, the ``evaluate.backend`` param -- which is no part of the protocol -- and its
    files under ``evaluate/``), the manifest naming the model by content and the protocol measured
    (``params.evaluate``'s). Returns the run id."""
    out = output_dir(params.paths)
    out.mkdir(parents=True, exist_ok=True)
    metrics = {"proxy.pass_at_1": pass_at_1, "proxy.len_avg": len_avg}
    (out / METRICS).write_text(json.dumps(metrics))
    records = sample_records(ANSWERS[answers])
    evaluation.write_records(out / evaluation.RECORDS, records)
    _plot(out / ACCURACY_PLOT, pass_at_1)
    (out / BUDGET_PLOT).write_bytes(PNG)
    use_experiment(params.tracking)
    with mlflow.start_run(run_name="evaluate", tags={"stage": "evaluate"}) as run:
        mlflow.log_metrics(logged or metrics)
        mlflow.log_param("evaluate.backend", backend)
        mlflow.log_artifacts(str(out), artifact_path="evaluate")
        mlflow.log_table(data=evaluation.review_table(records), artifact_file=evaluation.SAMPLES_TABLE)
    path = model or params.paths.models / "train"
    publish(
        manifest_path(params.paths, "evaluate"),
        "evaluate",
        [out / METRICS, out / evaluation.RECORDS],
        model=model_fingerprint(path),
        model_path=str(path),
        before_writing=mark_run(run.info.run_id),
        protocol=protocol(params.evaluate.model_dump(mode="json")),
    )
    return run.info.run_id


def test_versions_carry_lineage_and_the_gate_moves_the_champion(params: Params):
    evaluated(params, 0.30, 60.0)
    first = register.run(params)
    assert first["version"] == 1 and first["promoted"] and first["aliases"] == ["challenger", "champion"]

    evaluated(
        params, 0.25, 50.0, backend="vllm", answers="second"
    )  # shorter, less accurate: stays challenger
    second = register.run(params)
    assert second["aliases"] == ["challenger"] and not second["promoted"]
    assert any("Pass@1 0.2500 < champion 0.3000" in r for r in second["gate"])

    mlflow.set_tracking_uri(params.tracking.uri)
    client = MlflowClient()
    v2 = client.get_model_version("lead-test", "2")
    for key in (
        "git.commit",
        "dvc.experiment",
        "dvc.train_data_md5",
        "dvc.model_md5",
        "params.fingerprint",
        "train.preset",
        "mlflow.parent_run_id",
        "train.run_id",
        "evaluate.run_id",
        "eval.protocol",
        "model.fingerprint",
    ):
        assert v2.tags[key], key
    assert v2.tags["lead.state"] == "registered"
    assert (
        v2.tags["train.run_id"] == first["lineage"]["train.run_id"]
        and v2.tags["eval.proxy.pass_at_1"] == "0.25"
    )
    # What differs from the champion's runs (train: the same run; evaluate: another backend).
    assert "**Params changed vs \\@champion (v1)**: `evaluate.backend` transformers → vllm." in v2.description
    cells = ["proxy", "0.250", "0.300", "-0.050", "50.0", "60.0", "-10.0"]  # padded: MLflow's cells have none
    assert "| " + " | ".join(f"&nbsp;&nbsp;{c}&nbsp;&nbsp;" for c in cells) + " |" in v2.description
    assert "(version 1)" in v2.description and "gate failed" in v2.description
    # What a reviewer reads: the problems it newly fails and newly solves with both answers, its shortest and
    # longest correct answers, and the plot itself.
    assert "**Newly failed** against v1:" in v2.description
    # (the problem's statement beside its id, Markdown escaped: 6*p1 is no emphasis)
    for cells in (
        ["proxy p1: What is 6\\*p1?", "7", "6 (0/2)", "7 (2/2)"],
        ["proxy p2: What is 6\\*p2?", "4", "4 (2/2)", "3 (0/2)"],
    ):
        assert "| " + " | ".join(f"&nbsp;&nbsp;{c}&nbsp;&nbsp;" for c in cells) + " |" in v2.description
    assert "**Shortest correct answer** (proxy p2, 10 tokens)" in v2.description
    assert "**Longest correct answer** (proxy p3, 13 tokens)" in v2.description
    # the plot: both versions' curves, drawn by register and held by its run (v1 had no champion: evaluate's own)
    both = f"![accuracy against answer length](get-artifact?path=review%2Faccuracy_vs_length.png&run_uuid={v2.run_id})"
    assert both in v2.description
    assert [a.path for a in client.list_artifacts(v2.run_id, "review")] == ["review/accuracy_vs_length.png"]
    v1_description = client.get_model_version("lead-test", "1").description
    assert f"![accuracy against answer length](get-artifact?path=evaluate%2F{ACCURACY_PLOT}" in v1_description
    assert "@champion" not in v2.description.replace("\\@champion", "")  # escaped: not a GitHub mention

    # The version's source run holds its evidence: MLflow's Compare of v1 and v2 (their source runs) shows the
    # params that differ and the figures; every link of the description names a run, version or file that is.
    v1 = client.get_model_version("lead-test", "1")
    r1, r2 = client.get_run(v1.run_id), client.get_run(v2.run_id)
    assert (
        r2.data.tags["stage"] == "register" and r2.data.tags["evaluate.run_id"] == v2.tags["evaluate.run_id"]
    )
    assert r2.data.metrics == {"proxy.pass_at_1": 0.25, "proxy.len_avg": 50.0}
    assert r1.data.metrics["proxy.pass_at_1"] == 0.30
    assert (r1.data.params["evaluate.backend"], r2.data.params["evaluate.backend"]) == (
        "transformers",
        "vllm",
    )
    assert r2.data.params["train.max_steps"] == "100" and r2.data.params["register.model_name"] == "lead-test"
    links = dict(re.findall(r"(?<!!)\[([^\]]+)\]\(([^)]+)\)", v2.description))  # the links (not the image)
    evaluate_run = client.get_run(v2.tags["evaluate.run_id"])
    experiment = evaluate_run.info.experiment_id
    assert links == {
        "evaluate run": f"#/experiments/{experiment}/runs/{evaluate_run.info.run_id}?{UI_MODE}",
        "train run": f"#/experiments/{experiment}/runs/{v2.tags['train.run_id']}?{UI_MODE}",
        "champion v1": f"#/models/lead-test/versions/1?{UI_MODE}",
        "accuracy_vs_length": f"#/experiments/{experiment}/runs/{evaluate_run.info.run_id}"
        f"/artifacts/evaluate/{ACCURACY_PLOT}?{UI_MODE}",
        f"{ACCURACY_PLOT} (file)": f"get-artifact?path=evaluate%2F{ACCURACY_PLOT}"
        f"&run_uuid={evaluate_run.info.run_id}",
        "budget_curve": f"#/experiments/{experiment}/runs/{evaluate_run.info.run_id}"
        f"/artifacts/evaluate/{BUDGET_PLOT}?{UI_MODE}",
        f"{BUDGET_PLOT} (file)": f"get-artifact?path=evaluate%2F{BUDGET_PLOT}&run_uuid={evaluate_run.info.run_id}",
    }
    logged = {a.path for a in client.list_artifacts(evaluate_run.info.run_id, "evaluate")}
    assert {f"evaluate/{ACCURACY_PLOT}", f"evaluate/{BUDGET_PLOT}"} <= logged

    evaluated(params, 0.31, 59.0)  # better on both: promoted, the move recorded on both versions
    third = register.run(params)
    assert third["promoted"] and third["champion_before"] == 1
    assert str(client.get_model_version_by_alias("lead-test", "champion").version) == "3"
    assert "by gate" in client.get_model_version("lead-test", "3").tags["champion.promoted"]
    assert "(by v3)" in client.get_model_version("lead-test", "1").tags["champion.replaced"]

    promoted = registration.promote(
        params.register_, params.tracking, "2", "shorter answers matter more for this release"
    )
    assert str(client.get_model_version_by_alias("lead-test", "champion").version) == "2"
    assert promoted["failed_gate"].startswith("gate failed")  # said, and recorded with the move
    assert (
        "hand (lead promote, over the gate failed: "
        in client.get_model_version("lead-test", "2").tags["champion.promoted"]
    )
    assert (
        registration.promote(params.register_, params.tracking, "3", "back to the best")["failed_gate"]
        is None
    )
    recorded = client.get_model_version("lead-test", "3").tags["champion.promoted"]
    again = registration.promote(
        params.register_, params.tracking, "3", "another reason"
    )  # champion already: said, nothing overwritten
    assert again["already"] and "back to the best" in again["reason"]
    assert client.get_model_version("lead-test", "3").tags["champion.promoted"] == recorded
    loaded = mlflow.transformers.load_model("models:/lead-test@champion", return_type="components")
    assert loaded["model"].num_parameters() > 0


def test_params_changed_are_the_users_knobs_each_once():
    logged = {"max_steps": "4", "train.max_steps": "4", "resolved.lead.alpha": "1.0", "evaluate.samples": "8"}
    assert registration.params_keys(logged) == {"train.max_steps": "4", "evaluate.samples": "8"}


def test_the_protocol_is_the_evaluations_and_the_same_evaluation_is_one_version(params: Params):
    evaluated(params, 0.30, 60.0)
    params.evaluate.temperature, params.evaluate.samples = 0.1, 4  # not what the evaluation ran with
    with pytest.raises(
        StaleOutputError, match=r"other evaluate params than these: samples 8 \(params: 4\), temp"
    ):
        register.run(params)
    params.evaluate.temperature, params.evaluate.samples = 0.6, 8
    first = register.run(params)
    again = register.run(params)  # the same model, the same evaluation: no copy
    assert (first["new_version"], again["new_version"], again["version"]) == (True, False, first["version"])
    assert again["aliases"] == ["challenger", "champion"] and "version 1 already" in again["reason"]
    # `lead register` of that model once more says so (it once failed with KeyError: 'promoted')
    import yaml

    from lead.cli import app
    from tests.unit.test_cli import runner

    file = params.paths.reports.parent / "params.yaml"
    file.write_text(yaml.safe_dump(params.model_dump(mode="json", by_alias=True)))
    said = runner.invoke(app, ["register", "--params", str(file)])
    assert said.exit_code == 0 and "the same model and evaluation are version 1 already" in said.output, (
        said.output
    )
    mlflow.set_tracking_uri(params.tracking.uri)
    version = MlflowClient().get_model_version("lead-test", "1")
    assert "8 samples/problem, T=0.6" in version.description
    assert len(MlflowClient().search_model_versions("name = 'lead-test'")) == 1


def test_scores_of_another_model_are_refused_before_anything_is_registered(
    params: Params, tiny_model, tmp_path
):
    params.evaluate.model = "warmstart"
    with pytest.raises(ValueError, match=r"set evaluate\.model = train"):
        register.run(params)
    params.evaluate.model = "train"
    other = tmp_path / "other"
    shutil.copytree(tiny_model[0], other)
    (other / "config.json").write_text((other / "config.json").read_text() + " ")
    evaluated(params, 0.3, 60.0, model=other)  # the scores of another model (by content)
    with pytest.raises(ValueError, match="evaluate again, so the registered scores describe"):
        register.run(params)
    evaluated(params, 0.3, 60.0, logged={"proxy.pass_at_1": 0.1, "proxy.len_avg": 60.0})
    with pytest.raises(StaleOutputError, match=r"does not hold the figures .*proxy.pass_at_1"):
        register.run(params)  # the linked run says 0.1: a version claiming 0.3 would lie
    evaluated(params, 0.3, 60.0)
    (output_dir(params.paths) / METRICS).write_text(
        json.dumps({"proxy.pass_at_1": 0.9, "proxy.len_avg": 60.0})
    )
    with pytest.raises(StaleOutputError, match="not the content evaluate published"):
        register.run(params)  # metrics of an evaluation killed before it published
    with pytest.raises(ValueError, match="needs a reason"):
        registration.promote(params.register_, params.tracking, "1", "  ")
    mlflow.set_tracking_uri(params.tracking.uri)
    assert MlflowClient().search_model_versions("name = 'lead-test'") == []


def test_versions_a_killed_register_left_half_made_are_removed_but_never_aliased_ones(params: Params):
    evaluated(params, 0.30, 60.0)
    first = register.run(params)  # v1, complete, @champion
    mlflow.set_tracking_uri(params.tracking.uri)
    client = MlflowClient()
    source = client.get_model_version("lead-test", "1").source
    fingerprint = client.get_model_version("lead-test", "1").tags["model.fingerprint"]
    half = {"lead.state": "registering", "model.fingerprint": fingerprint}
    killed = client.create_run(client.get_experiment_by_name(params.tracking.experiment).experiment_id)
    # killed before its description, its run left RUNNING (the server was down when it would have ended it)
    v2 = client.create_model_version("lead-test", source, run_id=killed.info.run_id, tags=half).version
    v3 = client.create_model_version("lead-test", source, tags=half).version  # ... and one that got an alias
    client.set_registered_model_alias("lead-test", "reviewing", v3)
    other = client.create_model_version("lead-test", source, tags={**half, "model.fingerprint": "sha256:x"})
    evaluated(params, 0.31, 59.0)
    register.run(params)
    left = {str(v.version): v.tags["lead.state"] for v in client.search_model_versions("name = 'lead-test'")}
    assert str(v2) not in left  # removed: half-made, no alias, same model
    assert client.get_run(killed.info.run_id).info.status == "FAILED"  # and the run that made it ended
    assert left[str(v3)] == "registering" and left[str(other.version)] == "registering"  # aliased / other
    assert left[str(first["version"])] == "registered"


def test_a_dvc_experiment_registers_nothing_unless_asked(params: Params, monkeypatch):
    evaluated(params, 0.30, 60.0)
    monkeypatch.setenv("DVC_EXP_NAME", "sweep-lr")  # what `dvc exp run` sets for the stages
    skipped = register.run(params)
    assert skipped == json.loads(registration.report_path(params.paths).read_text())
    assert skipped["registered"] is False and "sweep-lr" in skipped["reason"] and skipped["version"] is None
    mlflow.set_tracking_uri(params.tracking.uri)
    assert MlflowClient().search_model_versions("name = 'lead-test'") == []
    params.register_.on_experiment = True
    assert register.run(params)["version"] == 1


def test_lineage_is_clean_when_only_the_pipelines_own_records_changed(tmp_path):
    import subprocess

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    for name in ("dvc.lock", "params.yaml"):
        (tmp_path / name).write_text("a: 1\n")
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=tmp_path, check=True)
    head = registration.git_commit(tmp_path)
    (tmp_path / "dvc.lock").write_text("a: 2\n")  # dvc repro rewrote its lock
    assert registration.git_commit(tmp_path) == head and not head.endswith("+dirty")
    (tmp_path / "params.yaml").write_text("a: 2\n")  # a param that is not the commit's
    assert registration.git_commit(tmp_path) == head + "+dirty"
