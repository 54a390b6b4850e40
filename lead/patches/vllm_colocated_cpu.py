"""vLLM generating inside the trainer on CPU: the colocated engine computes with the weights TRL syncs into it.

- Upstream: vllm 0.31 (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``), trl 1.16.0
  (``trl.generation.vllm_generation.LLM``, ``VLLMGeneration.sync_weights``).
- Why: without it, TRL's first weight sync into a colocated CPU engine fails, or the engine generates from the
  policy's old weights (below); and the engine compiles the model with inductor at every start.
- Delete when: vLLM's CPU linear layers keep a loadable ``weight`` after packing (the sync works on CPU) and TRL
  passes ``enforce_eager`` through ``GRPOConfig``.
- Contract: ``tests/contracts/test_patches.py`` (the dispatch and the engine name are where vLLM and TRL look
  them up); ``tests/stages/test_train.py`` trains through it.

TRL's ``vllm_mode="colocate"`` builds a vLLM engine in the training process and, before each generation, loads
the policy's current weights into it (``model.load_weights``). On CPU, vLLM (0.31) prepares each linear layer
for oneDNN once its weights are loaded: ``UnquantizedLinearMethod.process_weights_after_loading`` calls
``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``, which packs the
weight into a kernel handle and replaces ``layer.weight`` by an empty Parameter without its ``weight_loader``.
The first weight sync then fails (``'Parameter' object has no attribute 'weight_loader'``); and a layer packed
with ``remove_weight=False`` (the embedding that serves as the output head) would keep computing with the
packed copy of the *old* weights, generating from a policy that no longer exists, silently.

:func:`live_weights` is the one adapter: while it is active, that dispatch gives every 2-D (linear) layer
``torch.nn.functional.linear`` on its own ``layer.weight`` — vLLM's own fallback for CPUs without oneDNN — so
a sync's in-place ``load_weights`` is what the next generation computes with. Other layers (3-D MoE expert
weights, convolutions) keep vLLM's dispatch. It costs oneDNN's packed GEMMs, which matter for large models on
large CPUs, not for the tiny proxy model; on GPU it is never applied (:func:`needed`).

:func:`eager_engine` builds that engine eager, as lead's own CPU sampler is (``lead.io.sampling.CPU_ENGINE_ARGS``):
TRL does not pass ``enforce_eager``, and vLLM's default on CPU compiles the model with inductor first, most of
an engine start for the tiny model on 2 cores, every time a trainer is built. :func:`colocated` applies
both around the construction of the trainer.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

# Where vLLM decides, per layer, how a CPU GEMM is computed (called by the linear and embedding methods at load).
SEAM_MODULE = "vllm.model_executor.layers.utils"
SEAM = "dispatch_cpu_unquantized_gemm"
# Where TRL's colocated generation looks up the engine class it builds (``from vllm import LLM`` at its import).
ENGINE_MODULE = "trl.generation.vllm_generation"
ENGINE = "LLM"


def needed(config: Any) -> bool:
    """Whether a trainer with the GRPOConfig ``config`` needs :func:`live_weights`: its vLLM engine colocated,
    on a machine without CUDA."""
    import torch

    return bool(
        config and config.use_vllm and config.vllm_mode == "colocate" and not torch.cuda.is_available()
    )


def _live_dispatch(original: Callable[..., None]) -> Callable[..., None]:
    def dispatch(layer: Any, remove_weight: bool) -> None:
        import torch

        if layer.weight.ndim != 2:  # not a linear layer: vLLM's own handling
            original(layer, remove_weight)
            return
        layer.cpu_linear = torch.nn.functional.linear  # called as cpu_linear(x, layer.weight, bias)

    return dispatch


@contextlib.contextmanager
def live_weights() -> Iterator[None]:
    """While active, vLLM engines built in this process compute every linear layer on CPU from its live
    ``layer.weight`` (see the module docstring); the dispatch is restored on exit. Wrap the construction of
    the trainer (where TRL builds its colocated engine): the dispatch runs once, when the engine loads."""
    module = importlib.import_module(SEAM_MODULE)
    original = getattr(module, SEAM)
    setattr(module, SEAM, _live_dispatch(original))
    try:
        yield
    finally:
        setattr(module, SEAM, original)


@contextlib.contextmanager
def eager_engine() -> Iterator[None]:
    """While active, the vLLM engine TRL's colocated generation builds runs eager (``enforce_eager``, whatever TRL
    passes): no torch.compile at its start, and no loading bar (:func:`lead.io.sampling.quiet_engine_args`). TRL's
    module name is restored on exit."""
    from lead.io.sampling import CPU_ENGINE_ARGS, quiet_engine_args

    module = importlib.import_module(ENGINE_MODULE)
    engine = getattr(module, ENGINE)

    def build(*args: Any, **kwargs: Any) -> Any:
        return engine(
            *args, **{**kwargs, "enforce_eager": CPU_ENGINE_ARGS["enforce_eager"], **quiet_engine_args()}
        )

    setattr(module, ENGINE, build)
    try:
        yield
    finally:
        setattr(module, ENGINE, engine)


@contextlib.contextmanager
def colocated() -> Iterator[None]:
    """Both CPU adapters (:func:`live_weights`, :func:`eager_engine`), around the construction of a trainer whose
    vLLM engine is colocated on CPU (:func:`needed`)."""
    with live_weights(), eager_engine():
        yield
