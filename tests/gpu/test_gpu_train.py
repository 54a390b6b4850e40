"""The GPU path: a few GRPO-LEAD steps on CUDA in bf16, with transformers and with TRL's vLLM colocate mode.

Marked ``gpu`` and skipped where CUDA is absent (CI machines have none); run on a GPU machine with
``infra/gpu-check.sh`` (or ``pytest -m gpu``) after ``make setup-gpu``.
"""

import mlflow
import pytest

from lead.config import Params
from lead.stages import train

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run infra/gpu-check.sh on a GPU)"),
]


@pytest.fixture
def gpu_params(rl_params: Params) -> Params:
    t = rl_params.train
    t.batch_size, t.max_completion_length, t.max_steps, t.save_steps, t.bf16 = 16, 32, 3, 3, True
    return rl_params


def _check(params: Params) -> dict:
    summary = train.run(params)
    assert summary["steps"] == 3
    mlflow.set_tracking_uri(params.tracking.uri)
    metrics = mlflow.get_run(summary["mlflow_run_id"]).data.metrics
    for key in ("lead/share_correct", "lead/rho_mean", "lead/step_seconds", "reward"):
        assert key in metrics, key
    print({k: round(v, 4) for k, v in sorted(metrics.items()) if k.startswith(("lead/", "reward"))})
    return summary


def test_lead_steps_on_cuda_in_bf16_with_transformers_generation(gpu_params):
    _check(gpu_params)


def test_lead_steps_on_cuda_with_vllm_colocate(gpu_params):
    gpu_params.train.use_vllm, gpu_params.train.vllm_mode = True, "colocate"
    _check(gpu_params)
