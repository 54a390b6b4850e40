#!/usr/bin/env bash
# The GPU path, checked in one short run on a GPU machine (after `make setup-gpu`): a few GRPO-LEAD steps of the
# tiny model on CUDA in bf16, with transformers generation and with TRL's vLLM colocate mode, printing the metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
.venv/bin/python -m pytest -m gpu -s -q tests/gpu "$@"
