"""Shared fixtures: a Params object whose every output path lives in a temporary folder."""

import gc
import os
import shutil
from pathlib import Path

import pytest

from lead.config import Params, TinySpec, load_params

# Nested sections merged key by key: lead.config's one mechanism (tests/flows/conftest.py imports this name).
from lead.config import merge as _merge
from lead.core.proxy import generate_problems, warmstart_traces
from lead.io.tiny_model import build_model, train_tokenizer

ROOT = Path(__file__).resolve().parents[1]


# The longest modules (seconds of one test worker in a `make test` on 2 idle cores, setup and teardown included),
# longest first. The workers take files in collection order, so these go out first and the many short files fill
# in around them at the end (longest-first is how a list of jobs splits most evenly over two machines); left to
# xdist's order (by number of tests), the one-test stack modules came last and one worker ran alone for minutes.
# A stale figure costs only balance: re-measure with `make test PYTEST_ARGS="-n 2 --dist loadfile --durations=0"`.
LONGEST = {
    "tests/flows/test_dag.py": 300,  # with tests/flows/conftest.py's FIRST_RUN_MODULES, which share its run
    "tests/stack/test_stack.py": 163,
    "tests/stack/test_cells.py": 152,
    "tests/flows/test_ablation.py": 144,
    "tests/stages/test_train.py": 117,
    "tests/stages/test_generations.py": 67,
    "tests/stack/test_registry_ui.py": 54,
    "tests/stages/test_generation_server.py": 38,
    "tests/unit/test_stage_common.py": 18,
    "tests/stages/test_ablation.py": 14,
    "tests/flows/test_experiment.py": 12,
    "tests/contracts/test_trl_seam.py": 12,
}


def _scope(path: str) -> str:
    """The file a test goes out with: FIRST_RUN_MODULES all go with the first of them."""
    from tests.flows.conftest import FIRST_RUN_MODULES

    return FIRST_RUN_MODULES[0] if path in FIRST_RUN_MODULES else path


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` (``make test``), with the modules that share one expensive session fixture as one file:
    tests/flows/conftest.py's FIRST_RUN_MODULES (the DAG's first run) go to one worker; the files go out in
    collection order (:data:`LONGEST` first, :func:`pytest_collection_modifyitems`), not xdist's by number of
    tests. (``--dist loadgroup`` with ``xdist_group`` marks would group them too, but pytest-xdist 3.8 tags the
    groups on ``Item._nodeid``, which pytest 9.2 no longer reads: every test goes out on its own.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(super()._split_scope(nodeid))

    return Scheduling(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once collected, a test process holds every module the tests import (torch, transformers, TRL, vLLM, ...):
    ~10^6 objects that a full garbage collection walks every time, 0.75 s each on 2 cores -- and every
    ``Trainer.train`` starts with one (accelerate's ``free_memory`` calls ``gc.collect()``), besides the automatic
    ones. ``gc.freeze()`` moves what exists now to the permanent generation, out of every later collection; what
    the tests create is collected as before."""
    gc.freeze()


MAX_SLOWDOWN = 4.0  # the most a busy machine stretches a test's time limit


def slowdown() -> float:
    """How much slower than on an idle machine work runs now: the 1-minute load average per CPU (1 when idle or
    under this suite's own load, at most :data:`MAX_SLOWDOWN`)."""
    return min(max(os.getloadavg()[0] / (os.cpu_count() or 1), 1.0), MAX_SLOWDOWN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The :data:`LONGEST` files first, the others after them in their own order (a file's tests keep theirs).
    Time limits that scale with the machine's load: pyproject's ``timeout`` (and a test's own ``timeout``
    mark) are for an idle machine; on a busy one (CI neighbours, a parallel build) the same work takes longer,
    and a whole-DAG fixture must not fail for it."""
    items.sort(key=lambda item: -LONGEST.get(_scope(item.nodeid.split("::")[0]), 0))
    factor = slowdown()
    if factor == 1.0:
        return
    for item in items:
        marker = item.get_closest_marker("timeout")
        base = marker.args[0] if marker and marker.args else float(config.getini("timeout") or 0)
        if base:
            item.add_marker(pytest.mark.timeout(base * factor), append=False)


_EMPTY_STORE: list[Path] = []  # this test process's empty MLflow store (:func:`empty_mlflow_store`)


@pytest.fixture(scope="session", autouse=True)
def empty_mlflow_store(tmp_path_factory) -> Path:
    """An empty MLflow sqlite store, its tables made, that :func:`tmp_params` copies to where a test's store goes.
    MLflow makes a new store's tables by running every one of its schema migrations: 1.2 s per store on 2 cores,
    in nearly every test that tracks a run; the copy takes milliseconds and is the same empty store."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("empty-mlflow-store")
    store = SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlruns").as_uri())
    store.engine.dispose()  # nothing holds the file open while it is copied
    _EMPTY_STORE[:] = [folder / "mlflow.db"]
    return folder / "mlflow.db"


def tmp_params(tmp_path: Path, **sections) -> Params:
    """The shipped params.yaml with outputs redirected under ``tmp_path`` and ``sections`` merged in; its MLflow
    store, ``tmp_path/mlflow.db``, starts as a copy of :func:`empty_mlflow_store`."""
    params = load_params(ROOT / "params.yaml")
    data = params.model_dump(by_alias=True)
    data["paths"] = {
        "raw": str(ROOT / "data/raw"),
        "curated": str(tmp_path / "curated"),
        "models": str(tmp_path / "models"),
        "reports": str(tmp_path / "reports"),
        "resume": str(tmp_path / "resume"),
    }
    data["tracking"]["uri"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    if _EMPTY_STORE and not (tmp_path / "mlflow.db").exists():
        tmp_path.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_EMPTY_STORE[0], tmp_path / "mlflow.db")
    for name, values in sections.items():
        _merge(data[name], values)
    return Params.model_validate(data)


def calibration_target(params: Params):
    """The ``calibrate`` stage's :class:`lead.calibration.Target` for ``params``, as the stage builds it."""
    from lead.calibration import stage1_target

    return stage1_target(
        params.calibrate, params.train, params.model, params.paths, warm_start=params.warmstart.enabled
    )


def rl_inputs(params: Params):
    """Where RL finds its start model and pool (:class:`lead.training.inputs.Inputs`), as the train stage says."""
    from lead.training.inputs import Inputs

    return Inputs(params.paths, params.model, warm_start=params.warmstart.enabled)


def train_from_start(params: Params, final, ckpt) -> dict:
    """Stage 1's :func:`lead.training.phase.train` of ``params`` into ``final`` (checkpoints in ``ckpt``)."""
    from lead.training.phase import Phase, train

    phase = Phase(params.train, params.curate.max_prompt_tokens, final, ckpt)
    return train(phase, rl_inputs(params), params.tracking)


def write_pool(params: Params, pool) -> None:
    """Write ``pool`` (a DataFrame) as curate's training pool and publish it as curate does (the stages that
    read ``train.parquet`` refuse one that curate's manifest does not name)."""
    from lead.dag import manifest_path
    from lead.io.fingerprint import publish

    path = params.paths.curated / "train.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pool.to_parquet(path, index=False)
    publish(manifest_path(params.paths, "curate"), "curate", [path])


TINY = {
    "tiny": {"hidden_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 128}
}


@pytest.fixture
def small_params(tmp_path) -> Params:
    """Seconds-sized settings: a 1-layer model, 64 warm-start traces, a small proxy pool."""
    return tmp_params(
        tmp_path,
        model=TINY,
        curate={"proxy": {"train_problems": 60, "test_per_level": 4, "max_ops": 3}},
        warmstart={"examples": 64, "batch_size": 16, "report": {"problems_per_level": 2, "samples": 4}},
    )


@pytest.fixture
def rl_params(small_params: Params, tiny_model) -> Params:
    """Seconds-sized RL settings starting from the untrained tiny model of the fixture (as the warm start)."""
    from lead.stages import curate

    curate.run(small_params)
    small_params.paths.models.mkdir(parents=True, exist_ok=True)
    os.symlink(tiny_model[0], small_params.paths.models / "warmstart")
    t = small_params.train
    t.preset, t.learning_rate = "paper", 1e-3
    t.num_generations, t.batch_size, t.max_completion_length = 4, 8, 12
    t.max_steps, t.save_steps, t.logging_steps = 2, 1, 1
    return small_params


SUFFIX = "\nLet's think step by step and put the final answer within \\boxed{}."


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """An untrained 1-layer tiny model + tokenizer saved in HF format, and the problems of its corpus."""
    problems = generate_problems(300, split="train", seed=0)
    corpus = [p.question + SUFFIX + "\n" + t for p, t in warmstart_traces(problems, per_problem=1, seed=0)]
    tokenizer = train_tokenizer(corpus, vocab_size=400)
    model = build_model(TinySpec(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=2), tokenizer)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, problems


@pytest.fixture(autouse=True)
def _no_tracking_store_from_an_earlier_test():
    """Each test starts without MLflow's process-wide tracking URI: ``mlflow.set_tracking_uri`` also sets
    ``MLFLOW_TRACKING_URI`` in ``os.environ`` (for subprocesses), so a store one test chose would otherwise
    receive the runs of the next test's stage subprocesses (``dvc repro`` in a throw-away workspace)."""
    import sys

    os.environ.pop("MLFLOW_TRACKING_URI", None)
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)
