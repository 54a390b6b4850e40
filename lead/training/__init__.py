"""Training: RL with ``LEADTrainer`` (the TRL seam, ``trainer``) configured by the presets (``presets``) and
GRPOConfig's table (``grpo_config``); one phase's run (``phase``) over its inputs (``inputs``), its identity and
reuse (``identity``), its processes (``distributed``) and what it publishes (``reports``); and the supervised
warm start before RL (``warmstart``: TRL's ``SFTTrainer``)."""
