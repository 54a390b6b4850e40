"""The command line: help texts, params errors as exit code 2, the stage modules DVC calls."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lead.cli import app
from lead.config import Stage2Params, TrainParams

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
PARAMS = str(ROOT / "params.yaml")


def test_help_lists_every_stage_and_explains_it():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("curate", "warmstart", "pipeline", "params"):
        assert command in result.output
    result = runner.invoke(app, ["warmstart", "--help"])
    assert "--report" in result.output and "--set" in result.output


def test_bad_params_exit_2_with_the_message_and_do_no_work(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(f"paths: {{curated: {tmp_path / 'out'}}}\ntrain: {{num_generations: 3}}\n")
    result = runner.invoke(app, ["curate", "--params", str(bad)])
    assert result.exit_code == 2
    assert "train.num_generations = 3" in result.output
    assert not (tmp_path / "out").exists()


def test_params_prints_resolved_values_with_overrides():
    result = runner.invoke(app, ["params", "-S", "train.max_steps=7"])
    assert result.exit_code == 0
    assert "max_steps: 7" in result.output


def test_params_check_validates_the_whole_file_before_make_run_starts_dvc(tmp_path):
    good = runner.invoke(app, ["params", "--check"])
    assert good.exit_code == 0 and "valid" in good.output
    bad = tmp_path / "params.yaml"
    bad.write_text("train: {max_steps: true}\n")
    result = runner.invoke(app, ["params", "--check", "--params", str(bad)])
    assert result.exit_code == 2 and "train.max_steps" in result.output


def test_stage_module_entry_point_validates_params(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("curate: {seed: x}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "lead.stages.curate", "--params", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "curate.seed = 'x'" in proc.stderr
    # Under dvc repro (which removed the stage's outputs first) the message says how to get them back.
    under_dvc = subprocess.run(
        [sys.executable, "-m", "lead.stages.curate", "--params", str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "DVC_STAGE": "curate"},
    )
    assert under_dvc.returncode == 2 and "dvc checkout" in under_dvc.stderr


def test_params_explain_gives_a_keys_type_default_value_and_description():
    result = runner.invoke(
        app, ["params", "-p", PARAMS, "--explain", "train.max_steps", "-S", "train.max_steps=7"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["key:", "train.max_steps"]
    assert "type:        int (>= 1, <= 10000000)" in lines
    assert "default:     100" in lines
    assert f"value:       7  (from {PARAMS} with -S overrides)" in lines
    assert f"description: {TrainParams.model_fields['max_steps'].description}" in lines
    # Inside a list of sections: the entry key's value in every entry.
    result = runner.invoke(app, ["params", "-p", PARAMS, "--explain", "curate.sources.path"])
    assert result.exit_code == 0, result.output
    assert (
        f'value:       ["proxy"]  (from {PARAMS}, one per entry of curate.sources)'
        in result.output.splitlines()
    )


def test_params_explain_of_a_section_lists_its_keys_with_their_descriptions():
    result = runner.invoke(app, ["params", "-p", PARAMS, "--explain", "train.stage2"])
    assert result.exit_code == 0, result.output
    listed = {
        line.split()[0]: line.split(None, 1)[1]
        for line in result.output.splitlines()
        if line.startswith("  ")
    }
    assert listed == {key: field.description for key, field in Stage2Params.model_fields.items()}


def test_params_explain_of_an_unknown_key_exits_2_with_the_closest_key():
    result = runner.invoke(app, ["params", "-p", PARAMS, "--explain", "train.max_stps"])
    assert result.exit_code == 2
    assert "unknown params key 'train.max_stps'" in result.output
    assert "did you mean 'train.max_steps'?" in result.output
    result = runner.invoke(app, ["params", "-p", PARAMS, "--explain", "train.max_steps.x"])
    assert result.exit_code == 2 and "'train.max_steps' is a value, not a section" in result.output


def test_committed_params_schema_is_what_the_command_writes_now(tmp_path):
    committed = (ROOT / "params.schema.json").read_text(encoding="utf-8")
    result = runner.invoke(app, ["params", "--schema", "-"])
    assert result.exit_code == 0, result.output
    fresh = result.output == committed
    assert fresh, "params.schema.json is stale: `make schema` (lead params --schema params.schema.json)"
    written = tmp_path / "schema.json"
    assert runner.invoke(app, ["params", "--schema", str(written)]).exit_code == 0
    assert written.read_text(encoding="utf-8") == committed
    # One action per call.
    assert runner.invoke(app, ["params", "--check", "--schema", "-"]).exit_code == 2


def test_params_schema_accepts_the_shipped_file_and_recipes_and_flags_what_the_loader_refuses():
    jsonschema = pytest.importorskip("jsonschema")  # installed with the cpu/gpu extras (vLLM needs it)
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "params.schema.json").read_text()))
    for path in [ROOT / "params.yaml", *sorted((ROOT / "recipes").glob("*.yaml"))]:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, f"{path.name}: {errors}"
    bad = {"train": {"max_stps": 3, "batch_size": True}, "evaluate": {"benchmarks": ["aime"]}}
    assert len(list(validator.iter_errors(bad))) == 3


def test_params_as_dvc_args_make_dvc_exp_run_set_what_the_recipe_sets(tmp_path):
    import shlex
    import shutil

    from dvc.utils.cli_parse import to_path_overrides
    from dvc.utils.hydra import apply_overrides

    from lead.config import load_params, recipe_overrides

    recipe = ROOT / "recipes/grpo-lead-7b.yaml"
    copy = tmp_path / "params.yaml"
    shutil.copyfile(ROOT / "params.yaml", copy)
    result = runner.invoke(
        app,
        [
            "params",
            "-p",
            str(copy),
            "--recipe",
            str(recipe),
            "--as-dvc-args",
            "-S",
            "train.grpo_config.logging_first_step=true",
        ],
    )
    assert result.exit_code == 0, result.output
    words = shlex.split(result.output)  # as the shell hands them to `dvc exp run`
    assert words[::2] == ["-S"] * (len(words) // 2)
    args = words[1::2]
    assert f"{copy}:train.micro_batch_tokens=13312" in args  # a key params.yaml has
    assert f"{copy}:++train.grpo_config.logging_first_step=true" in args  # a new key: Hydra's force-add
    # What `dvc exp run -S ...` does to the file (DVC's own grouping and Hydra overrides), read as stages do.
    for path, overrides in to_path_overrides(args).items():
        apply_overrides(path, overrides)
    expected = load_params(
        ROOT / "params.yaml", [*recipe_overrides(recipe), "train.grpo_config.logging_first_step=true"]
    )
    assert load_params(copy).model_dump() == expected.model_dump()


def test_params_as_dvc_args_refuse_what_dvc_would_read_otherwise_and_need_overrides():
    # OmegaConf reads ${...} in a value as an interpolation.
    result = runner.invoke(app, ["params", "-p", PARAMS, "--as-dvc-args", "-S", "model.prompt_suffix='${x}'"])
    assert result.exit_code == 2 and "dvc exp run would refuse" in result.output
    assert runner.invoke(app, ["params", "-p", PARAMS, "--as-dvc-args"]).exit_code == 2
    both = runner.invoke(app, ["params", "-p", PARAMS, "--as-dvc-args", "--check", "-S", "train.seed=1"])
    assert both.exit_code == 2 and "give one of" in both.output


def test_params_takes_a_recipe_and_checks_the_trl_settings_before_make_run_starts_dvc(tmp_path):
    recipe = ROOT / "recipes/grpo-lead-7b.yaml"
    result = runner.invoke(app, ["params", "-p", PARAMS, "--recipe", str(recipe)])
    assert result.exit_code == 0 and "micro_batch_tokens: 13312" in result.output
    bad = runner.invoke(app, ["params", "-p", PARAMS, "--recipe", str(tmp_path / "nope.yaml"), "--check"])
    assert bad.exit_code == 2 and "no such file" in bad.output
    # A GRPOConfig key the pipeline sets: the params key to use instead.
    clash = runner.invoke(app, ["params", "-p", PARAMS, "--check", "-S", "train.grpo_config.beta=0.1"])
    assert clash.exit_code == 2 and "use train.beta instead" in clash.output


def test_the_lead_command_prints_a_stage_error_without_a_traceback(monkeypatch, capsys):
    import sys

    from lead import cli
    from lead.dag import StageError
    from lead.stages import calibrate

    def empty(params):
        raise StageError("calibrate kept 0 of 40 problems (0 < pass_rate < 1): use a stronger warm start")

    monkeypatch.setattr(calibrate, "run", empty)
    monkeypatch.setattr(sys, "argv", ["lead", "calibrate"])
    with pytest.raises(SystemExit) as exit_:
        cli.run_app()
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert "error: calibrate kept 0 of 40 problems" in out and "Traceback" not in out


def test_lead_ablation_is_dvc_repro_of_the_ablation_pipeline_or_a_dvc_experiment_with_overrides(monkeypatch):
    calls = []
    real_run = subprocess.run

    def fake_run(cmd, *args, **kwargs):
        if not str(cmd[0]).endswith("dvc"):  # e.g. matplotlib's `fc-list` when its font cache is first built
            return real_run(cmd, *args, **kwargs)
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 3)  # dvc's exit code is lead's

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert runner.invoke(app, ["ablation"]).exit_code == 3
    assert calls[-1][1:] == ["repro", "ablation/dvc.yaml"]
    assert runner.invoke(app, ["ablation", "-S", "ablation.max_steps=5"]).exit_code == 3
    assert calls[-1][1:] == ["exp", "run", "ablation/dvc.yaml", "-S", "ablation.max_steps=5"]
    bad = runner.invoke(app, ["ablation", "-S", "ablation.seeds=[0,0]"])
    assert bad.exit_code == 2 and "seeds must not repeat" in bad.output and len(calls) == 2


def test_serve_refuses_a_host_other_machines_reach_without_a_key(monkeypatch):
    monkeypatch.delenv("LEAD_SERVE_API_KEY", raising=False)

    class Started(Exception):
        """os.execve was reached: a server would have replaced this process."""

    def execve(*args):
        raise Started

    monkeypatch.setattr(os, "execve", execve)
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--params", PARAMS])
    assert result.exit_code == 2 and not isinstance(result.exception, Started)
    assert "refusing to serve on 0.0.0.0 without LEAD_SERVE_API_KEY" in " ".join(result.output.split())
    # An explicit flag overrides it, with a warning (the command then goes on to the model).
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--insecure", "--params", PARAMS])
    assert "warning: serving on 0.0.0.0 without LEAD_SERVE_API_KEY" in " ".join(result.output.split())


def test_paths_that_stages_write_stay_inside_the_workspace(tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    params = str(workspace / "params.yaml")
    result = runner.invoke(
        app, ["params", "--check", "--params", params, "-S", "paths.reports=/etc/leadtest"]
    )
    assert result.exit_code == 2
    assert "paths.reports = '/etc/leadtest' resolves to /etc/leadtest, outside the workspace" in " ".join(
        result.output.split()
    )
    # Symlinks are followed: a folder inside that points outside is outside.
    (tmp_path / "elsewhere").mkdir()
    (workspace / "out").symlink_to(tmp_path / "elsewhere")
    result = runner.invoke(app, ["params", "--check", "--params", params, "-S", "paths.models=out/models"])
    assert result.exit_code == 2 and "paths.models" in result.output
    # ... and `..` too; inside is fine; a documented setting allows a shared location.
    assert (
        runner.invoke(app, ["params", "--check", "--params", params, "-S", "paths.curated=../x"]).exit_code
        == 2
    )
    assert (
        runner.invoke(app, ["params", "--check", "--params", params, "-S", "paths.curated=a/b"]).exit_code
        == 0
    )
    monkeypatch.setenv("LEAD_ALLOW_EXTERNAL_PATHS", "1")
    assert (
        runner.invoke(app, ["params", "--check", "--params", params, "-S", "paths.curated=../x"]).exit_code
        == 0
    )


def test_results_says_what_each_stage_did_and_where_the_results_are(tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    monkeypatch.chdir(tmp_path)  # paths in params.yaml are relative to where the commands run: the workspace
    (workspace / "reports" / "calibrate").mkdir(parents=True)
    monkeypatch.chdir(workspace)
    (workspace / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    summary = {"kept": 3, "problems": 5, "keep_rule": "0 < pass_rate < 1", "mean_pass_rate": 0.4}
    (workspace / "reports/calibrate/summary.json").write_text(json.dumps(summary))
    result = runner.invoke(app, ["results", "--params", str(workspace / "params.yaml")])
    assert result.exit_code == 0, result.output
    assert "calibrate: kept 3 of 5 (0 < pass_rate < 1); mean pass rate 0.400" in result.output
    assert "train: no summary written" in result.output
    assert (
        "reports/evaluate/samples.parquet" in result.output
        and "mlflow ui --backend-store-uri" in result.output
    )


def test_a_sweep_is_the_ablation_with_a_grid_of_variants():
    from lead.config.ablation import sweep_variants

    variants = sweep_variants({"alpha": [0.05, 0.1], "learning_rate": [1.0e-6, 3.0e-6]})
    assert variants == {
        "alpha_0p05__learning_rate_1em06": {"alpha": 0.05, "learning_rate": 1.0e-6},
        "alpha_0p05__learning_rate_3em06": {"alpha": 0.05, "learning_rate": 3.0e-6},
        "alpha_0p1__learning_rate_1em06": {"alpha": 0.1, "learning_rate": 1.0e-6},
        "alpha_0p1__learning_rate_3em06": {"alpha": 0.1, "learning_rate": 3.0e-6},
    }
    long = sweep_variants({"max_completion_length": [64, 96], "temperature": [0.7]})
    assert list(long) == ["p0", "p1"]  # names past a variant name's 40 characters: the point's index


def test_lead_sweep_checks_every_point_then_runs_the_ablation_flow_with_them():
    import shlex

    ok = runner.invoke(
        app,
        ["sweep", "alpha=0.05,0.1", "--seeds", "0,1", "--cell-deployment", "lead-cell/gpu", "--dry-run"],
    )
    assert ok.exit_code == 0, ok.output
    command = shlex.split(ok.output.strip().splitlines()[-1])
    assert command[1:3] == ["-m", "flows.ablation"]
    assert "ablation.variants={alpha_0p05: {alpha: 0.05}, alpha_0p1: {alpha: 0.1}}" in command
    assert "ablation.seeds=[0, 1]" in command
    assert command[-2:] == ["--cell-deployment", "lead-cell/gpu"]
    typo = runner.invoke(app, ["sweep", "alpah=0.05", "--dry-run"])
    assert typo.exit_code == 2 and "alpah" in typo.output and "flows.ablation" not in typo.output
    bad = runner.invoke(app, ["sweep", "alpha=0.05", "--seeds", "one", "--dry-run"])
    assert bad.exit_code == 2 and "--seeds" in bad.output
