"""The paper's ablation as a library: a cell (:mod:`lead.ablation.cell`: one variant x seed trained and evaluated,
or the warm start per seed) and the report (:mod:`lead.ablation.report`: every cell compared claim by claim).

The comparison's maths is :mod:`lead.core.claims` (pure); its tables and figures for people are
:mod:`lead.reports.ablation`; the variants and seeds are params' ``ablation`` section; the DAG of cells is
``ablation/dvc.yaml`` and the ``lead-ablation`` flow runs it.
"""
