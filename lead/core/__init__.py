"""The pure core: GRPO-LEAD's concepts as functions of values (lists, arrays, records in; the same out).

Nothing here reads or writes files, starts processes or servers, or imports torch, MLflow, Prefect or the
stages; an import contract in ``make lint`` (``[tool.importlinter]`` in ``pyproject.toml``) keeps it so. The
one dependency outside this package is :mod:`lead.grading`, the verdict of an answer.

* :mod:`~lead.core.rewards` — (L) the length-dependent accuracy reward and (E) the explicit penalties.
* :mod:`~lead.core.advantages` — group-normalised advantages and (AD) the difficulty-aware reweighting.
* :mod:`~lead.core.difficulty` — pass rates, Wilson intervals, bands, the keep rule, the dev split.
* :mod:`~lead.core.curation` — the curation steps (normalise, gradable gold, dedup, decontaminate, mix).
* :mod:`~lead.core.metrics` — Pass@k, Cons@k, lengths, budgets, per-seed summaries.
* :mod:`~lead.core.proxy` — the proxy task's problem generator.
* :mod:`~lead.core.review` — a candidate model's comparison with the champion and its description.
* :mod:`~lead.core.claims` — the ablation's variants and its table.
"""
