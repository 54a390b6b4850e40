"""One module per DVC stage: ``run(params)`` does the work, ``main()`` is what ``dvc.yaml`` calls.

Each stage reads its section of ``params.yaml`` and its input files, calls the pure core (``lead/core/``),
writes its outputs atomically and a metrics JSON. Tests call ``run`` directly on a temporary folder.
"""

# The DAG's order (dvc.yaml's stages, the Prefect flow's tasks, `lead pipeline`).
# calibrate_stage2 and train_stage2 are the curriculum's later stage (train.stage2); off, they only say so.
STAGES = (
    "curate",
    "warmstart",
    "calibrate",
    "train",
    "calibrate_stage2",
    "train_stage2",
    "evaluate",
    "register",
)
