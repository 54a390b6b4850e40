"""``torch.set_num_threads`` back after a CPU vLLM engine stops.

- Upstream: vllm 0.31 (``vllm/v1/worker/cpu_worker.py``: ``torch.set_num_threads = skip_set_num_threads`` when the
  CPU worker binds its threads, never undone).
- Why: an engine in the process (calibrate or evaluate inside ``lead pipeline``, every variant of ``lead
  ablation``) leaves every later ``torch.set_num_threads`` a no-op with a warning, so a training step or a second
  engine after it runs on vLLM's thread count, not the one asked for.
- Delete when: vLLM restores the function when its CPU worker shuts down.
- Contract: ``tests/stages/test_sampling_backends.py::test_vllm_cpu_serves_the_tiny_model`` (the function is
  replaced while the engine runs and is torch's own again after ``close``).
"""

from __future__ import annotations

from collections.abc import Callable


def keep_set_num_threads() -> Callable[[], None]:
    """torch's ``set_num_threads`` as it is now; the function returned puts it back (call it once the engine that
    replaced it has stopped)."""
    import torch

    original = torch.set_num_threads

    def restore() -> None:
        torch.set_num_threads = original

    return restore
