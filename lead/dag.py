"""The DAG's stages in one place: their order (each runs as ``python -m lead.stages.<name>``), what each writes
(its outputs, by name), which of them is its manifest and which its summary, where its resume state lives; the
same for the ablation's pipeline (:data:`ABLATION`).

An output is written as ``dvc.yaml`` writes it (``${paths.models}/train``): ``tests/contracts/test_dvc_yaml.py``
checks that each stage's outputs here are exactly those ``dvc.yaml`` (and ``ablation/dvc.yaml``) declares
(outs, metrics and plots), in the same order of stages. Code asks for an output by name (:func:`output`,
:func:`cell_output`), never spells its path again: the stages publish and verify manifests through
:func:`manifest_path`, the flows and ``lead results`` read :func:`summary_file`, register finds evaluate's
records and plots here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lead.config.common import PathParams


class StageError(RuntimeError):
    """A stage cannot produce a useful result from what it was given or found (an empty training pool, ...).

    The message says what happened, with the real numbers, and the knob to change; a stage's ``main`` prints
    it without a traceback and exits 1. Raised before the stage publishes its manifest, so the next stage
    refuses the unfinished outputs instead of reading them."""


@dataclass(frozen=True)
class Stage:
    """One stage, run as ``python -m lead.stages.<name>``: its ``outputs`` by name (``dvc.yaml``'s spelling),
    among them ``manifest`` (written last; none for register, whose record is the registry's) and the one named by
    ``summary`` (the JSON that says what the run did)."""

    name: str
    outputs: dict[str, str]
    summary: str


def _calibration(name: str, pool: str) -> Stage:
    reports = f"${{paths.reports}}/{name}"
    return Stage(
        name,
        {
            "pool": f"${{paths.curated}}/{pool}",
            "manifest": f"${{paths.curated}}/{name}.manifest.json",
            "histogram": f"{reports}/histogram.csv",
            "summary": f"{reports}/summary.json",
            "headline": f"{reports}/headline.json",
            "histogram_plot": f"{reports}/pass_rate_histogram.png",
        },
        "summary",
    )


def _training(name: str, curves: bool) -> Stage:
    outputs = {
        "model": f"${{paths.models}}/{name}",
        "manifest": f"${{paths.models}}/{name}.manifest.json",
        "summary": f"${{paths.reports}}/{name}.json",
        "headline": f"${{paths.reports}}/{name}_headline.json",
    }
    if curves:
        outputs["curves"] = f"${{paths.reports}}/{name}_curves.csv"
        outputs["curves_plot"] = f"${{paths.reports}}/{name}_curves.png"
    return Stage(name, outputs, "summary")


# The DAG's order (dvc.yaml's stages, the Prefect flow's tasks, `lead pipeline`). params checks params.yaml first;
# calibrate_stage2 and train_stage2 are the curriculum's later stage (train.stage2); off, they only say so.
REGISTRY: dict[str, Stage] = {
    s.name: s
    for s in (
        # The check of params.yaml, before any stage removes its outputs (lead/stages/params.py).
        Stage("params", {"record": "${paths.reports}/params.json"}, "record"),
        Stage(
            "curate",
            {
                "train": "${paths.curated}/train.parquet",
                "test": "${paths.curated}/test.parquet",
                "quarantine": "${paths.curated}/quarantine.jsonl",
                "report": "${paths.reports}/curate",
                "manifest": "${paths.curated}/curate.manifest.json",
                "summary": "${paths.curated}/curation.json",
            },
            "summary",
        ),
        Stage(
            "warmstart",
            {
                "model": "${paths.models}/warmstart",
                "manifest": "${paths.models}/warmstart.manifest.json",
                "summary": "${paths.reports}/warmstart.json",
            },
            "summary",
        ),
        _calibration("calibrate", "calibrated.parquet"),
        _training("train", curves=True),
        _calibration("calibrate_stage2", "calibrated_stage2.parquet"),
        _training("train_stage2", curves=False),
        Stage(
            "evaluate",
            {
                "records": "${paths.reports}/evaluate/samples.parquet",
                "manifest": "${paths.reports}/evaluate/evaluate.manifest.json",
                "metrics": "${paths.reports}/evaluate/metrics.json",
                "headline": "${paths.reports}/evaluate/headline.json",
                "accuracy_plot": "${paths.reports}/evaluate/accuracy_vs_length.png",
                "budget_plot": "${paths.reports}/evaluate/budget_curve.png",
            },
            "metrics",
        ),
        Stage("register", {"record": "${paths.reports}/register.json"}, "record"),
    )
}
STAGES = tuple(REGISTRY)

_PATHS = re.compile(r"\$\{paths\.(\w+)\}")


def _resolve(paths: PathParams, template: str) -> Path:
    return Path(_PATHS.sub(lambda m: str(getattr(paths, m.group(1))), template))


def output(paths: PathParams, stage: str, name: str) -> Path:
    """The output ``name`` of ``stage`` under ``paths`` (params' ``paths`` section)."""
    return _resolve(paths, REGISTRY[stage].outputs[name])


def output_name(stage: str, name: str) -> str:
    """The file name of the output ``name`` of ``stage`` (what the stage's MLflow run logs it as)."""
    return Path(REGISTRY[stage].outputs[name]).name


def manifest_path(paths: PathParams, stage: str) -> Path:
    """Where ``stage`` publishes the manifest of its outputs (:func:`lead.io.fingerprint.publish`), beside them."""
    if "manifest" not in REGISTRY[stage].outputs:
        raise ValueError(f"stage {stage!r} publishes no manifest")
    return output(paths, stage, "manifest")


def published_outputs(paths: PathParams, stage: str) -> list[Path]:
    """The outputs ``stage`` publishes as one generation: every output but the manifest that names them."""
    return [output(paths, stage, name) for name in REGISTRY[stage].outputs if name != "manifest"]


def summary_file(paths: PathParams, stage: str) -> Path:
    """The JSON ``stage`` writes about its run (a DVC metrics file or output)."""
    return output(paths, stage, REGISTRY[stage].summary)


# The ablation's pipeline (ablation/dvc.yaml), stage by stage as it declares its outputs: a baseline per seed (the
# warm start evaluated), a cell per variant x seed (trained, then evaluated), the report. A cell's folder holds its
# evaluation's reports and, written last, CELL_RESULT: the report stage reads every cell's result there.
ABLATION: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage("baseline", {"reports": "${paths.reports}/ablation/cells/warmstart-s${item.seed}"}, "reports"),
        Stage(
            "cell",
            {
                "model": "${paths.models}/ablation/${item.variant}-s${item.seed}",
                "reports": "${paths.reports}/ablation/cells/${item.variant}-s${item.seed}",
            },
            "reports",
        ),
        Stage(
            "report",
            {
                "result": "${paths.reports}/ablation/ablation.json",
                "markdown": "${paths.reports}/ablation/ablation.md",
                "metrics": "${paths.reports}/ablation/metrics.json",
                "plot": "${paths.reports}/ablation/ablation.png",
                "curves": "${paths.reports}/ablation/curves.png",
            },
            "result",
        ),
    )
}
CELL_RESULT = "result.json"


def ablation_output(paths: PathParams, name: str) -> Path:
    """The output ``name`` of the ablation's report stage under ``paths``."""
    return _resolve(paths, ABLATION["report"].outputs[name])


def cell_output(paths: PathParams, variant: str | None, seed: int, name: str = "reports") -> Path:
    """The output ``name`` (``reports`` or, for a variant, ``model``) of the ablation cell of ``variant`` with
    ``seed``; ``variant`` None is the seed's baseline, the warm start evaluated."""
    stage = ABLATION["baseline" if variant is None else "cell"]
    template = stage.outputs[name].replace("${item.seed}", str(seed))
    return _resolve(paths, template.replace("${item.variant}", variant or ""))


def cell_result_dir(paths: PathParams, variant: str | None, seed: int) -> Path:
    """The folder of the ablation cell of ``variant`` (None: the warm start itself) with ``seed``."""
    return cell_output(paths, variant, seed, "reports")


def cell_resume_dir(paths: PathParams, variant: str, seed: int) -> Path:
    """The resume state (training checkpoints) of the ablation cell of ``variant`` with ``seed``."""
    return resume_dir(paths, f"ablation/{cell_output(paths, variant, seed, 'model').name}")


def resume_dir(paths: PathParams, name: str) -> Path:
    """``<paths.resume>/<name>``: the resume state of the stage (or ablation cell) ``name`` — its calibration
    cache, its training checkpoints — which it reads back itself and keys by content (a training run's identity,
    a calibration's settings). Deliberately not a DVC output: DVC neither caches nor pushes it, so a fresh clone
    that pulled every output has nothing missing and reruns nothing; a run that finds it resumes or reuses, one
    that does not recomputes."""
    return paths.resume / name


def published_model(paths: PathParams, stage: str) -> tuple[Path, str]:
    """``(<paths.models>/<stage>, its fingerprint)``, refused (:class:`lead.io.fingerprint.StaleOutputError`) unless
    it is the very model ``stage`` published last (its manifest names it by content)."""
    from lead.io.fingerprint import StaleOutputError, model_fingerprint, verify

    model = output(paths, stage, "model")
    published = verify(manifest_path(paths, stage), stage)
    fingerprint = model_fingerprint(model) if model.is_dir() else None
    if not published.get("model") or fingerprint != published["model"]:
        raise StaleOutputError(
            f"{model}: not the model the {stage} stage published (changed or written by another run): "
            f"run the {stage} stage again"
        )
    return model, fingerprint
