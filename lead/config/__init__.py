"""Typed parameters: ``params.yaml`` parsed into pydantic models, one section per stage.

``params.yaml`` is the only file people edit. The package has one room per concern:

* :mod:`lead.config.schema` -- the sections as pydantic models: types, ranges, choices, cross-field rules and
  every key's description; pure (no file is read). It holds the root :class:`Params` and re-exports the
  sections, which live by concern:

  * :mod:`lead.config.base` -- :class:`Section`, the base of every section, and the helpers that walk them;
  * :mod:`lead.config.common` -- ``model``, ``paths``, ``tracking``: what every stage reads;
  * :mod:`lead.config.data` -- ``curate``: the sources of problems, the proxy task, the cleaning;
  * :mod:`lead.config.warmstart` -- ``warmstart``: SFT before RL, the proxy traces' habits, its report;
  * :mod:`lead.config.training` -- ``calibrate`` and ``train`` (with ``train.stage2`` and ``train.lora``);
  * :mod:`lead.config.evaluation` -- ``evaluate`` and ``register``;
  * :mod:`lead.config.ablation` -- ``ablation``: the paper's variants x seeds;

* :mod:`lead.config.load` -- reading the file, ``-S key=value`` overrides and nested merges (one mechanism,
  :func:`set_path`), recipes as overrides (:func:`recipe_overrides`), and the one :class:`ParamsError`
  message naming each bad key, its value and the rule;
* :mod:`lead.config.explain` -- what a key means (``lead params --explain KEY``) and the JSON Schema that
  editors validate ``params.yaml`` with (``lead params --schema FILE``, committed as ``params.schema.json``);
* :mod:`lead.config.dvc_args` -- the same overrides as ``dvc exp run -S`` arguments (Hydra's grammar), checked
  with DVC's own code to set what the loader sets (``lead params --as-dvc-args``).

Every name below is importable from ``lead.config`` itself, which is where callers import them from (and
what the DAG contract test's recorder, ``tests/flows/recorder/sitecustomize.py``, patches).
"""

from lead.config.load import (
    DEFAULT_PARAMS,
    ParamsError,
    apply_overrides,
    did_you_mean,
    load_params,
    merge,
    params_data,
    parse_params,
    read_yaml,
    recipe_overrides,
    set_path,
)
from lead.config.schema import (
    BENCHMARKS,
    PAPER_PROMPT_SUFFIX,
    AblationParams,
    CalibrateParams,
    CurateParams,
    EvaluateParams,
    LoraParams,
    ModelParams,
    Params,
    PathParams,
    ProxyParams,
    RegisterParams,
    ReportParams,
    Section,
    Seed,
    SourceSpec,
    Stage2Params,
    TinySpec,
    TrackingParams,
    TrainParams,
    VerbosityParams,
    WarmstartParams,
    section_type,
    yaml_fields,
)

__all__ = [
    "BENCHMARKS",
    "DEFAULT_PARAMS",
    "PAPER_PROMPT_SUFFIX",
    "AblationParams",
    "CalibrateParams",
    "CurateParams",
    "EvaluateParams",
    "LoraParams",
    "ModelParams",
    "Params",
    "ParamsError",
    "PathParams",
    "ProxyParams",
    "RegisterParams",
    "ReportParams",
    "Section",
    "Seed",
    "SourceSpec",
    "Stage2Params",
    "TinySpec",
    "TrackingParams",
    "TrainParams",
    "VerbosityParams",
    "WarmstartParams",
    "apply_overrides",
    "did_you_mean",
    "load_params",
    "merge",
    "params_data",
    "parse_params",
    "read_yaml",
    "recipe_overrides",
    "section_type",
    "set_path",
    "yaml_fields",
]
