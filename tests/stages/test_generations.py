"""One generation per stage: curate, evaluate and register killed (SIGKILL) at random moments, again and again.

Each try runs the stage in a child process — forked from a server that has imported the stages already, so a
try costs the stage's work, not its imports — with a seed that differs from the previous try's, so that two
generations of outputs differ, and kills it somewhere between its start and a little after its usual end.
Then a reader takes what is on disk:

* it either refuses (:class:`lead.io.fingerprint.StaleOutputError`: no manifest, or a file the manifest does not
  name), or what it accepts is exactly one complete generation — checked against the outputs of uninterrupted
  runs with each seed, an oracle independent of the manifests;
* once per stage the kill comes the moment the first output is replaced, so that the files on disk *are* a
  mixed set (the try that would fail if readers did not check), and the reader must refuse it;
* register never leaves a version whose figures differ from the evaluate run it links, and a version a kill
  left half-made is removed by the next run.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import random
import time
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from lead.config import Params
from lead.dag import manifest_path
from lead.io.fingerprint import StaleOutputError, file_fingerprint, verify

pytestmark = pytest.mark.slow

CURATE_OUTPUTS = ("train.parquet", "test.parquet", "quarantine.jsonl", "curation.json")
EVALUATE_OUTPUTS = (
    "samples.parquet",
    "metrics.json",
    "headline.json",
    "accuracy_vs_length.png",
    "budget_curve.png",
)


def run_stage(name: str, data: dict) -> None:
    """A child's work: ``lead.stages.<name>.run`` (module level, so that the fork server can call it)."""
    import importlib

    importlib.import_module(f"lead.stages.{name}").run(Params.model_validate(data))


@pytest.fixture(scope="module")
def forks():
    context = multiprocessing.get_context("forkserver")
    # What the stages import when they run, imported once in the fork server: each child then starts with them
    # (the stages import their libraries lazily; in a child each import would cost seconds, every try).
    context.set_forkserver_preload(
        [
            "lead.stages.curate",
            "lead.stages.evaluate",
            "lead.stages.register",
            "lead.io.sampling",
            "lead.io.tracking",
            "lead.io.benchmarks",
            "lead.core.metrics",
            "torch",
            "transformers",
            "transformers.pipelines",
            "mlflow",
            "mlflow.transformers",
            "matplotlib.pyplot",
            "pyarrow.parquet",
            __name__,
        ]
    )
    return context


def _run(forks, name: str, params: Params, kill_after: float | None = None) -> tuple[float, bool]:
    """Run the stage in a child; with ``kill_after``, SIGKILL it then. Returns (seconds, whether it finished)."""
    child = forks.Process(target=run_stage, args=(name, params.model_dump(mode="json", by_alias=True)))
    started = time.perf_counter()
    child.start()
    child.join(kill_after)
    finished = not child.is_alive()
    if not finished:
        child.kill()
        child.join()
    if kill_after is None:
        assert child.exitcode == 0, f"{name} failed ({child.exitcode})"
    return time.perf_counter() - started, finished and child.exitcode == 0


def _hashes(folder: Path, names) -> tuple[str | None, ...]:
    return tuple(file_fingerprint(folder / n) if (folder / n).exists() else None for n in names)


def _tries(forks, name, params, seeds, generations, read, n: int) -> dict[str, int]:
    """``n`` killed runs alternating ``seeds``; ``read()`` is the reader. Returns what happened, counted."""
    rng = random.Random(0)
    counts = {"refused": 0, "accepted": 0, "tries": 0}
    duration = generations["seconds"]
    for i in range(n):
        seed = seeds[i % len(seeds)]
        _run(forks, name, seed(params), kill_after=rng.uniform(0.3, 1.15) * duration)
        counts["tries"] += 1
        try:
            seen = read()
        except StaleOutputError:
            counts["refused"] += 1
            continue
        counts["accepted"] += 1
        assert seen in generations["sets"], f"try {i}: a reader accepted a mixed set of outputs"
    return counts


def _kill_mid_write(forks, name, params, watched: Path, read, folder: Path, outputs, generations) -> bool:
    """Kill the stage the moment its first output is replaced (the others are still the old generation), up
    to 3 times, until what is left on disk is a mixed set. Returns whether it was; the reader must refuse it.
    This is the try that would fail if the readers did not check the manifest."""
    for _ in range(3):
        before = watched.stat().st_ino
        child = forks.Process(target=run_stage, args=(name, params.model_dump(mode="json", by_alias=True)))
        child.start()
        deadline = time.monotonic() + 120
        while child.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError):
                if watched.stat().st_ino != before:  # atomic writes replace the file: a new inode
                    break
        child.kill()
        child.join()
        if _hashes(folder, outputs) not in generations["sets"]:
            with pytest.raises(StaleOutputError):
                read()
            return True
    return False


def _seeded(section: str, seed: int):
    """``params`` with ``<section>.seed = seed``: two seeds give two distinguishable generations of outputs."""

    def apply(params: Params) -> Params:
        getattr(params, section).seed = seed
        return params

    return apply


def _generations(forks, name: str, params: Params, section: str, folder: Path, outputs) -> dict:
    """The oracle: the complete outputs of uninterrupted runs with seeds 0 and 1, and how long a run takes."""
    generations = {"sets": [], "seconds": 0.0}
    for seed in (0, 1):
        seconds, _ = _run(forks, name, _seeded(section, seed)(params))
        generations["sets"].append(_hashes(folder, outputs))
        generations["seconds"] = seconds  # the second run's: the first also creates the MLflow store
    assert generations["sets"][0] != generations["sets"][1]
    return generations


def test_a_killed_curate_never_hands_a_mixed_pool_to_its_readers(forks, small_params: Params, capsys):
    root = small_params.paths.curated
    generations = _generations(forks, "curate", small_params, "curate", root, CURATE_OUTPUTS)

    def read():  # what calibrate and evaluate do before they read the pool and the test split
        verify(manifest_path(small_params.paths, "curate"), "curate", [root / n for n in CURATE_OUTPUTS])
        return _hashes(root, CURATE_OUTPUTS)

    counts = _tries(
        forks, "curate", small_params, [_seeded("curate", 0), _seeded("curate", 1)], generations, read, 10
    )
    with capsys.disabled():
        print(
            f"\ncurate, {counts['tries']} tries: {counts['refused']} refused, {counts['accepted']} read whole"
        )
    _run(forks, "curate", _seeded("curate", 0)(small_params))  # the next full run cleans up and publishes
    assert read() == generations["sets"][0] and not list(root.glob(".*.parquet.*"))


@pytest.fixture
def evaluated(small_params: Params, tiny_model, forks) -> Params:
    """A curated workspace with the tiny model as models/train, its train manifest, a fast evaluation."""
    import shutil

    from lead.io.fingerprint import model_fingerprint, publish

    _run(forks, "curate", small_params)
    model = small_params.paths.models / "train"
    shutil.copytree(tiny_model[0], model)
    report = small_params.paths.reports / "train.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("{}")
    publish(manifest_path(small_params.paths, "train"), "train", [report], model=model_fingerprint(model))
    ev = small_params.evaluate
    ev.model, ev.backend, ev.samples, ev.max_new_tokens, ev.budgets = "train", "transformers", 2, 16, [8, 16]
    small_params.register_.model_name = "lead-kill"
    return small_params


def test_a_killed_evaluate_is_never_registered_with_figures_of_another_run(forks, evaluated: Params, capsys):
    from lead import registration
    from lead.evaluation import output_dir

    out = output_dir(evaluated.paths)
    generations = _generations(forks, "evaluate", evaluated, "evaluate", out, EVALUATE_OUTPUTS)
    mlflow.set_tracking_uri(evaluated.tracking.uri)
    client = MlflowClient()

    def read():  # any reader of the evaluation, then what register checks before it registers anything
        verify(manifest_path(evaluated.paths, "evaluate"), "evaluate", [out / n for n in EVALUATE_OUTPUTS])
        registration.evidence(evaluated.evaluate, evaluated.paths, client)
        return _hashes(out, EVALUATE_OUTPUTS)

    seeds = [_seeded("evaluate", 0), _seeded("evaluate", 1)]
    counts = _tries(forks, "evaluate", evaluated, seeds, generations, read, 6)
    _run(forks, "evaluate", _seeded("evaluate", 0)(evaluated))
    mixed = _kill_mid_write(
        forks,
        "evaluate",
        _seeded("evaluate", 1)(evaluated),
        out / "samples.parquet",
        read,
        out,
        EVALUATE_OUTPUTS,
        generations,
    )
    assert mixed, "never caught evaluate between two of its writes"
    with capsys.disabled():
        print(
            f"\nevaluate, {counts['tries']} tries: {counts['refused']} refused, {counts['accepted']} read whole"
        )


def test_a_killed_register_leaves_no_version_that_misstates_its_run(forks, evaluated: Params, capsys):
    _run(forks, "evaluate", evaluated)
    mlflow.set_tracking_uri(evaluated.tracking.uri)
    client = MlflowClient()
    name = evaluated.register_.model_name

    def versions():
        return client.search_model_versions(f"name = '{name}'")

    def forget_complete():  # the same model and evaluation are one version: each try must make its own
        for v in versions():
            if v.tags.get("lead.state") == "registered":
                client.delete_model_version(name, v.version)

    _run(forks, "register", evaluated)
    forget_complete()
    seconds, _ = _run(forks, "register", evaluated)  # the second: the first also creates the registered model
    rng = random.Random(1)
    finished = 0
    for _ in range(3):
        forget_complete()
        finished += _run(forks, "register", evaluated, kill_after=rng.uniform(0.3, 1.15) * seconds)[1]
    forget_complete()
    # And once at the worst moment: as soon as the new version exists (before its description and aliases,
    # when the poll is quick enough; tests/stages/test_register.py checks the clean-up rule itself).
    known = {v.version for v in versions()}
    child = forks.Process(
        target=run_stage, args=("register", evaluated.model_dump(mode="json", by_alias=True))
    )
    child.start()
    deadline = time.monotonic() + 120
    while child.is_alive() and time.monotonic() < deadline and not {v.version for v in versions()} - known:
        time.sleep(0.02)
    child.kill()
    child.join()
    states = sorted(v.tags.get("lead.state", "-") for v in versions())
    with capsys.disabled():
        print(f"\nregister, 4 tries ({finished} finished first): versions by state {states}")
    _run(forks, "register", evaluated)  # the next run removes what a kill left half-made (if it did)
    assert {v.tags.get("lead.state") for v in versions()} == {"registered"}
    for version in versions():
        linked = client.get_run(version.tags["evaluate.run_id"]).data.metrics
        for key, value in version.tags.items():
            if key.startswith("eval.") and key != "eval.protocol":
                benchmark, metric = key.split(".")[1:]
                assert float(value) == linked[f"{benchmark}.{metric}"], (version.version, key)
    assert json.loads((evaluated.paths.reports / "register.json").read_text())["lineage"]["model.fingerprint"]
