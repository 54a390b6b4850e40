"""The checks of params that the schema cannot make, because they need a library or the disk: every way in --
the ``params`` stage that ``dvc repro`` runs first, ``lead params --check``, the flows -- runs them right after
:func:`lead.config.load_params`, before any work.

* the train settings that only TRL or the launch can judge (:func:`lead.training.grpo_config.check_train_settings`:
  ``train.grpo_config`` names and values, the batch split over the processes);
* every local file ``curate.sources`` names exists (:func:`lead.io.sources.missing_sources`).
"""

from __future__ import annotations

from lead.config import CurateParams, ParamsError, PathParams, TrainParams


def check_params(curate: CurateParams, train: TrainParams, paths: PathParams) -> None:
    """Raise one :class:`ParamsError` naming every problem the schema could not see in these sections."""
    from lead.io.sources import missing_sources
    from lead.training.grpo_config import check_train_settings

    check_train_settings(train, paths, max_prompt_tokens=curate.max_prompt_tokens)
    missing = missing_sources(curate.sources, paths.raw)
    if missing:
        raise ParamsError("\n".join(missing))
