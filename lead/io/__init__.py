"""The I/O ring: the modules that touch disks, processes, servers and libraries with side effects.

The stages (:mod:`lead.stages`) call these and the pure core (:mod:`lead.core`); the core never imports them.

* :mod:`~lead.io.files` — atomic writes, JSON, the repository root.
* :mod:`~lead.io.fingerprint` — content fingerprints of models, files and rows; stage manifests.
* :mod:`~lead.io.sampling` — generation: the one sampler protocol, vLLM and transformers behind it, servers.
* :mod:`~lead.io.tracking` — MLflow: the tracking URI, one run per stage.
* :mod:`~lead.io.sources` — reading curation sources (jsonl, json, parquet, hub datasets).
* :mod:`~lead.io.benchmarks` — the evaluation sets (the proxy test split, the shipped benchmarks).
* :mod:`~lead.io.tiny_model` — building the embedded default's tiny model and tokenizer.
* :mod:`~lead.io.progress` — progress bars.
"""
