"""Contracts of lead.patches: each patch of another project's internals still finds what it patches where it
expects it, and says what it was written against, why, when to delete it and which test guards it."""

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
import textwrap

import pytest

import lead.patches

# Libraries whose module attributes a patch might assign (``torch.set_num_threads = ...``).
LIBRARIES = {
    "torch",
    "trl",
    "vllm",
    "transformers",
    "mlflow",
    "prefect",
    "dvc",
    "datasets",
    "accelerate",
    "peft",
}
PATCHES = sorted(m.name for m in pkgutil.iter_modules(lead.patches.__path__))


@pytest.mark.parametrize("name", PATCHES)
def test_every_patch_says_what_it_was_written_against_why_when_to_delete_it_and_its_contract(name):
    module = importlib.import_module(f"lead.patches.{name}")
    doc = inspect.getdoc(module) or ""
    for field in ("- Upstream:", "- Why:", "- Delete when:", "- Contract:"):
        assert f"\n{field} " in doc, f"lead/patches/{name}.py: no '{field}' line in its docstring"


def test_patches_of_third_party_internals_live_in_lead_patches_only():
    """Nothing outside lead/patches swaps a library's module attribute or calls an interpreter internal."""
    from tests.conftest import ROOT

    found = []
    for path in sorted((ROOT / "lead").rglob("*.py")):
        if path.parent.name == "patches":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr" and len(node.args) == 3:
                target = ast.unparse(node.args[0])
                if target not in ("self", "cls"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} setattr({target}, ...)")
            if isinstance(node, ast.Attribute) and ast.unparse(node).startswith(("atexit._", "threading._")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
            if isinstance(node, ast.Attribute) and node.attr in ("_logs", "_metrics"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and ast.unparse(t).split(".")[0] in LIBRARIES
                for t in node.targets
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node.targets[0])} = ...")
    assert not found, found


def test_the_buffers_trl_buffers_writes_are_built_and_filled_where_it_expects():
    """lead.patches.trl_buffers: TRL appends the gathered batch's advantages to ``_logs["advantages"]`` while
    scoring, and keeps ``_metrics[mode]`` as lists per name that ``log`` averages."""
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert 'self._logs["advantages"].extend(all_process_advantages.tolist())' in source
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "self._logs = {" in init
    assert 'self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}' in init
    log = inspect.getsource(GRPOTrainer.log)
    assert "for key, val in self._metrics[mode].items()" in log and "sum(valid) / len(valid)" in log


EXITING = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from lead.patches.interpreter_exit import exit_now

    out = Path(sys.argv[1])
    pool = ThreadPoolExecutor(2)
    pool.submit(time.sleep, 0.1).result()  # its workers now wait for more work, never shut down
    late = threading.Thread(target=lambda: (time.sleep(0.5), (out / "thread").write_text("joined")))
    late.start()
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    exit_now(3)
    """
)


def test_exit_now_stops_a_live_thread_pool_joins_threads_runs_atexit_and_keeps_the_code(tmp_path):
    """The stages' exit: a process that leaves a ThreadPoolExecutor alive exits (its workers are told to stop by
    the hook threading._shutdown runs first) instead of hanging on their join."""
    assert callable(getattr(__import__("threading"), "_shutdown", None))
    assert callable(getattr(__import__("atexit"), "_run_exitfuncs", None))
    done = subprocess.run(
        [sys.executable, "-c", EXITING, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "thread").read_text() == "joined" and (tmp_path / "atexit").read_text() == "ran"


def test_the_cpu_gemm_dispatch_that_live_weights_replaces_is_where_vllm_looks_it_up():
    """lead.patches.vllm_colocated_cpu replaces vLLM's CPU GEMM dispatch by module attribute: it acts only if vLLM keeps
    the function there, looks it up there when a layer's weights are processed, and computes a CPU linear layer
    as ``layer.cpu_linear(x, weight, bias)``; and TRL's colocated sync loads weights into that same model."""
    import importlib

    from trl.generation.vllm_generation import VLLMGeneration
    from vllm.model_executor.layers import linear, utils, vocab_parallel_embedding

    from lead.patches.vllm_colocated_cpu import SEAM, SEAM_MODULE

    module = importlib.import_module(SEAM_MODULE)
    assert list(inspect.signature(getattr(module, SEAM)).parameters) == ["layer", "remove_weight"]
    lookup = f"from {SEAM_MODULE} import {SEAM}"  # inside the method: the attribute is read at each call
    for method in (
        linear.UnquantizedLinearMethod.process_weights_after_loading,
        vocab_parallel_embedding.UnquantizedEmbeddingMethod.process_weights_after_loading,
    ):
        assert lookup in inspect.getsource(method), method.__qualname__
    assert "layer.cpu_linear(x, weight, bias)" in inspect.getsource(utils.cpu_unquantized_gemm)
    assert "model_runner.model.load_weights" in inspect.getsource(VLLMGeneration.sync_weights)


def test_trls_colocated_engine_is_built_from_the_name_eager_engine_replaces():
    """lead.patches.vllm_colocated_cpu.eager_engine replaces the engine class in TRL's generation module: it acts
    only if TRL builds its colocated engine by calling that module-level name, and vLLM's engine takes
    ``enforce_eager`` (and ``use_tqdm_on_load``, lead.io.sampling.quiet_engine_args)."""
    import importlib

    from vllm import LLM

    from lead.patches.trl_without_vllm import match_trl_to
    from lead.patches.vllm_colocated_cpu import ENGINE, ENGINE_MODULE, eager_engine

    match_trl_to(True)
    module = importlib.import_module(ENGINE_MODULE)
    assert getattr(module, ENGINE) is LLM
    assert f"self.llm = {ENGINE}(" in inspect.getsource(module.VLLMGeneration)
    assert "enforce_eager" in inspect.signature(LLM.__init__).parameters
    from vllm.engine.arg_utils import EngineArgs

    assert "use_tqdm_on_load" in inspect.signature(EngineArgs).parameters  # (LLM passes **kwargs on to it)
    with eager_engine():
        assert getattr(module, ENGINE) is not LLM
    assert getattr(module, ENGINE) is LLM


def test_a_trainer_without_vllm_leaves_it_unimported_and_one_with_it_gets_trl_whole_again():
    """lead.patches.trl_without_vllm: TRL's generation modules imported while its vLLM check answers False import no
    vLLM (nothing else in GRPOTrainer's imports does either); re-executed for a vLLM trainer, they import it and
    hold its names again. In a fresh interpreter: this module's own imports already brought vLLM in."""
    import subprocess
    import sys

    code = """
import sys
from lead.patches.trl_without_vllm import match_trl_to
match_trl_to(False)
from trl import GRPOTrainer
import trl.generation.vllm_generation as generation
assert "vllm" not in sys.modules, "something imported vLLM: the start-up saving is gone"
assert not hasattr(generation, "LLM")
match_trl_to(True)
import vllm
import trl.generation
assert generation.LLM is vllm.LLM and generation.is_vllm_available()
assert trl.generation.VLLMGeneration is generation.VLLMGeneration
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
