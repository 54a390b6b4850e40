"""Calibration: every training problem's pass rate under a model, and the band kept for RL.

The library of the ``calibrate`` stage (:mod:`lead.stages.calibrate`: the warm start, stage 1's band) and of
``calibrate_stage2`` (the stage-1 model, the curriculum's stage-2 band): one :class:`Target` names the model,
the band and the reward whose verdicts are counted; :func:`calibrate_pool` samples, judges, writes and publishes.

For each problem of ``<paths.curated>/train.parquet``: sample ``calibrate.samples`` (k) completions from the
current model (``<paths.models>/warmstart``, or ``model.base`` when ``warmstart.enabled`` is false) for the
user message problem + ``model.prompt_suffix`` in the model's chat template, through
:func:`lead.io.sampling.make_sampler` — or, with ``calibrate.server`` set, a running generation server that
serves this very model (``lead serve``, :class:`lead.io.sampling.ServerSampler`: no engine start per run) —,
judge them with the one outcome function (:func:`lead.core.outcomes.judge`) under the *reward's* rules and
token budget (``train.preset``, ``train.extraction``, ``train.truncation``, ``train.repetition_penalty``,
``train.max_completion_length``: :func:`lead.training.presets.outcome_rules`; recorded in the summary), and
summarise them with :func:`lead.core.difficulty.calibrate_problem`: c scored correct, pass rate p = c/k, 95 %
Wilson interval, mean length. So p is the share of completions the trainer will score correct: a problem kept
with 0 < p < 1 gives its groups a learning signal.

Outputs
-------
* ``<paths.curated>/calibrated.parquet`` — the **whole pool** (every input column, input order) plus ``k,
  n_correct, pass_rate, wilson_low, wilson_high, mean_length, band`` and a boolean ``keep`` =
  ``calibrate.min_pass_rate < p < calibrate.max_pass_rate`` (stage 1; default 0 < p < 1; ``keep_inclusive``
  closes either end). All rows are kept rather than only the kept ones (the train stage reads ``keep``), so
  that the bands of the whole pool stay visible. The curriculum's stage 2 is its own DVC stage
  (:mod:`lead.stages.calibrate_stage2`: the same calibration with the stage-1 model and its own rule).
* ``<paths.curated>/calibrate.manifest.json``, written last: the content fingerprints of these outputs and of
  the model sampled (:func:`lead.io.fingerprint.publish`); readers refuse outputs it does not name.
* ``<paths.reports>/calibrate/summary.json``: counts per band, kept, the histogram (and, when the pool has
  difficulty levels, per level: problems, kept, mean pass rate, histogram), what was sampled vs. reused, time,
  grader statistics of this run's completions; ``headline.json`` (DVC metrics): kept, kept share, mean pass rate.
* ``<paths.reports>/calibrate/histogram.csv`` (the table: ``pass_rate,problems,kept``) and
  ``pass_rate_histogram.png`` (also logged to MLflow, run tagged ``stage=calibrate``).

Incremental cache (``<paths.resume>/calibrate/cache.jsonl``, resume state outside DVC:
:func:`lead.dag.resume_dir`): its format and keys are in :mod:`lead.io.calibration_cache`.
"""

from lead.calibration.outputs import (
    HEADLINE_KEYS,
    RECORD_COLUMNS,
    calibrate,
    calibrate_pool,
    log_to_mlflow,
    publish_disabled,
)
from lead.calibration.pass_rates import PoolCalibration, pool_records, resolve_backend
from lead.calibration.target import (
    CACHE_NAME,
    JudgeKeys,
    Target,
    model_path,
    reward_judge,
    stage1_target,
    stage2_target,
)

__all__ = [
    "CACHE_NAME",
    "HEADLINE_KEYS",
    "RECORD_COLUMNS",
    "JudgeKeys",
    "PoolCalibration",
    "Target",
    "calibrate",
    "calibrate_pool",
    "log_to_mlflow",
    "model_path",
    "pool_records",
    "publish_disabled",
    "resolve_backend",
    "reward_judge",
    "stage1_target",
    "stage2_target",
]
