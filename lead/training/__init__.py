"""Training: the TRL seam (``trainer.LEADTrainer``) and the presets that configure it (``presets``)."""
