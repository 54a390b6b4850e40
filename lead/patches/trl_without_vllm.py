"""A trainer that does not generate with vLLM does not import it.

- Upstream: trl 1.16.0 (``trl.import_utils.is_vllm_available``, ``trl.generation.vllm_client`` and
  ``vllm_generation``), vllm 0.31.
- Why: TRL imports vLLM whenever it is installed: ``trl.generation.vllm_client`` and
  ``trl.generation.vllm_generation`` (imported by ``GRPOTrainer``'s module) ask ``is_vllm_available()`` once, at
  import, and import vLLM's engine, its distributed weight transfer and, through them, torch's inductor: a third
  of every training process's start-up (``bench/startup.py``, bench/RESULTS.md), paid by each ``train`` /
  ``train_stage2`` / ablation-cell process of the embedded default, which never uses vLLM in the trainer
  (``train.use_vllm: false``).
- Delete when: TRL imports vLLM lazily (on the first ``use_vllm=True`` trainer).
- Contract: ``tests/contracts/test_patches.py`` (a fresh interpreter: no vLLM imported, then TRL whole again).

:func:`match_trl_to` is called with the trainer's ``use_vllm`` before its class is imported. Without vLLM, and
before TRL's generation modules exist, it imports them while ``is_vllm_available`` answers False: they are
complete except for vLLM's names, which nothing reaches without ``use_vllm``. A later trainer in the same
process that does use vLLM (a test, a benchmark comparing both) gets them re-executed with the real answer
(``importlib.reload`` runs a module again in its own namespace, so the classes TRL's trainer already holds see
vLLM's names).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

CHECK_MODULE = "trl.import_utils"
CHECK = "is_vllm_available"
# TRL's modules that import vLLM at import time when CHECK says it is there, in dependency order.
GENERATION_MODULES = ("trl.generation.vllm_client", "trl.generation.vllm_generation", "trl.generation")

# Modules imported while CHECK answered False: they lack vLLM's names until reloaded.
_without_vllm: set[str] = set()


def _not_available(min_version: str | None = None) -> bool:
    return False


def match_trl_to(use_vllm: bool) -> None:
    """Make TRL's generation modules match a trainer about to be built: without vLLM's import when
    ``use_vllm`` is false and they are not imported yet; with it (re-executed) when ``use_vllm`` is true and they
    were imported without it. Otherwise nothing: modules already imported with vLLM stay as they are."""
    if use_vllm:
        for name in GENERATION_MODULES:
            if name in _without_vllm:
                importlib.reload(sys.modules[name])
                _without_vllm.discard(name)
        return
    if any(name in sys.modules for name in GENERATION_MODULES):
        return
    check = importlib.import_module(CHECK_MODULE)
    real = getattr(check, CHECK)
    setattr(check, CHECK, _not_available)
    try:
        modules: list[ModuleType] = [importlib.import_module(name) for name in GENERATION_MODULES]
    finally:
        setattr(check, CHECK, real)
    _without_vllm.update(m.__name__ for m in modules)
