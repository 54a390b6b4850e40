"""Evaluation: sample a model on the benchmarks, grade, and score it the paper's way (§7).

The library of the ``evaluate`` stage (:mod:`lead.stages.evaluate`) and of each ablation cell
(:mod:`lead.stages.ablation_cell`, which evaluates its model into its own folder): :func:`evaluate`.

For each benchmark in ``evaluate.benchmarks`` (:mod:`lead.io.benchmarks`; the first ``evaluate.max_problems``
problems of each, or all), every problem is rendered with the model's chat template (problem + the
instruction suffix), sampled ``evaluate.samples`` times through :func:`lead.io.sampling.make_sampler`, and each
completion judged by the one outcome function (:func:`lead.core.outcomes.judge`) under evaluation's rules
(:data:`lead.core.outcomes.EVALUATION`: the ``"any"`` extraction rule, math-verify's priority list, recorded as
``<benchmark>.extraction``), which gives the verdict on the answer as written (Pass@1), the answer it was
judged by (recorded per sample, voted on for Cons@n) and the outcome (answered share, precision). The metrics are
:mod:`lead.core.metrics`'s: Pass@k, Cons@n over answer equivalence classes, Len_avg (all / correct /
incorrect), truncation rate, a token-budget sweep and, where a benchmark has levels, a difficulty-band table.

The model is ``evaluate.model``: a name means ``<paths.models>/<name>`` (``warmstart``, ``train``,
``train_stage2``: checked to be the model its stage published); a value containing ``/`` or naming an
existing path is used as is (path or hub id).

Context window: a problem whose prompt leaves fewer than ``max_new_tokens`` positions in the model's
context (``max_position_embeddings``) is not sampled; its samples count as unanswered and wrong, and
``<benchmark>.over_context`` counts such problems. Past its context a RoPE model would be extrapolating
(transformers does so silently, vLLM refuses), so both backends get exactly the same workload. This only
happens with small-context models such as the 512-position tiny model on AIME / MATH-500 prompts.

Outputs under ``<paths.reports>/evaluate/``:

* ``samples.parquet`` -- one row per sample: benchmark, problem_id, band, gold, sample, completion, answer
  (extracted, null = none), correct, tokens, finished (hit EOS), in_context;
* ``metrics.json`` -- flat ``<benchmark>.<metric>`` names (MLflow keys cannot hold ``@``: ``pass_at_1``,
  ``cons_at_8``, ``len_avg``, ``budget_128.pass_at_1``, ``level_3.precision``, ``grader_timeouts``, ...);
  ``null`` where a metric is undefined (e.g. the length of correct samples when none is correct);
* ``accuracy_vs_length.png`` and ``budget_curve.png``;
* ``evaluate.manifest.json`` -- written last, once the MLflow run has finished: the content fingerprints of
  the files above, the evaluated model's :func:`~lead.io.fingerprint.model_fingerprint` and path (the MLflow run
  that made them is tagged with the manifest's fingerprint). ``register`` refuses an evaluation whose manifest
  does not name, by content, the model it registers.

:mod:`lead.evaluation.replay` scores completions made elsewhere with the same judge, metrics and plots.

Everything is logged to one MLflow run tagged ``stage=evaluate`` (undefined metrics are left out there).
"""

from lead.evaluation.plots import ACCURACY_PLOT, BUDGET_PLOT, write_plots
from lead.evaluation.records import RECORDS, SAMPLES_TABLE, TABLE_COLUMNS, review_table, write_records
from lead.evaluation.run import (
    HEADLINE,
    METRICS,
    OUTPUTS,
    PIPELINE_MODELS,
    evaluate,
    model_path,
    output_dir,
    sampling_spec,
)
from lead.evaluation.scoring import GRADER_STATS, headline_figures

__all__ = [
    "ACCURACY_PLOT",
    "BUDGET_PLOT",
    "GRADER_STATS",
    "HEADLINE",
    "METRICS",
    "OUTPUTS",
    "PIPELINE_MODELS",
    "RECORDS",
    "SAMPLES_TABLE",
    "TABLE_COLUMNS",
    "evaluate",
    "headline_figures",
    "model_path",
    "output_dir",
    "review_table",
    "sampling_spec",
    "write_plots",
    "write_records",
]
