"""Reports: the core's numbers and records rendered for people (markdown). Pure: imports lead.core, nothing with I/O.

* :mod:`~lead.reports.curation` — the curation report (:func:`lead.core.curation.curate`) as markdown;
* :mod:`~lead.reports.ablation` — the ablation's tables and verdicts (:mod:`lead.core.claims`) as markdown.
"""
