"""The command line: help texts, params errors as exit code 2, the stage modules DVC calls."""

import os
import subprocess
import sys

from typer.testing import CliRunner

from lead.cli import app

runner = CliRunner()


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
