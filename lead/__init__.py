"""lead: GRPO-LEAD as a pipeline — curation, difficulty calibration, GRPO-LEAD training, evaluation.

Importing the package applies the offline hygiene once for every entry point (CLI, DVC stages, Prefect
flows, tests): no Hugging Face hub look-ups, no telemetry. Values already set by the user win, so a user
with a hub sets ``HF_HUB_OFFLINE=0`` to download a real base model, and ``LEAD_VERBOSE=1`` (or
``VLLM_LOGGING_LEVEL=INFO``) brings back vLLM's start-up log.
"""

import logging
import os

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",  # models load from local paths; no hub round-trips
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DVC_NO_ANALYTICS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",  # honoured by MLflow and others
    "TOKENIZERS_PARALLELISM": "false",  # tokenizers' threads fight torch's on 2 cores and warn after fork
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # Our own rich bars show progress; the libraries' tqdm bars would interleave with them.
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
# vLLM logs ~34 INFO lines and a dozen warnings about optional CPU libraries (Triton, tcmalloc, NUMA binding)
# per engine start, torch's C++ side a NUMA warning: errors only, unless LEAD_VERBOSE=1 (`lead -v` sets it) or
# the variables are set.
QUIET_ENV = {"VLLM_LOGGING_LEVEL": "ERROR", "TORCH_CPP_LOG_LEVEL": "ERROR"}
VERBOSE_ENV = "LEAD_VERBOSE"  # `lead -v` sets it: engines' logs, libraries' bars, errors with their traceback


def verbose() -> bool:
    """Whether the user asked for everything (``LEAD_VERBOSE=1``, ``lead -v``), read when asked."""
    return os.environ.get(VERBOSE_ENV) == "1"


for _key, _value in {**OFFLINE_ENV, **({} if verbose() else QUIET_ENV)}.items():
    os.environ.setdefault(_key, _value)
# vLLM checks Triton while it imports, before it configures its logger from VLLM_LOGGING_LEVEL: that warning
# ("Triton is installed, but `triton.backends` could not be imported") reaches Python's last-resort handler
# whatever the variable says, unless the logger already has the level.
_level = logging.getLevelName(os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper())
if isinstance(_level, int):  # (a name Python does not know is vLLM's to refuse)
    logging.getLogger("vllm").setLevel(_level)

__version__ = "0.1.0"
