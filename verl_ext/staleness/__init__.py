"""Controlled staleness: the ``delayed_sync`` v1 trainer mode (docs/staleness.md).

- :mod:`~verl_ext.staleness.setting`: the setting (m, n, offline), its one check and its one name (pure).
- :mod:`~verl_ext.staleness.schedule`: which policy version generates each step's batch of a setting (pure).
- :mod:`~verl_ext.staleness.config`: the ``trainer.v1.delayed_sync`` keys and their checks.
- :mod:`~verl_ext.staleness.trainer`: the verl trainer mode (imports verl's v1 trainer: heavy).
- :mod:`~verl_ext.staleness.mismatch_in_update`: the log-prob mismatch taken from the actor update's own forward
  pass (in the actor's worker process).
- :mod:`~verl_ext.staleness.cli`: ``verl-ext schedule``, a preview of the schedule.
"""

from verl_ext.import_hooks import OnImport, install

VERL_TRAINER_MODULE = "verl.trainer.ppo.v1.trainer_base"
VERL_ENGINE_WORKERS_MODULE = "verl.workers.engine_workers"


def register_staleness() -> None:
    """Register ``trainer.v1.trainer_mode=delayed_sync`` with verl's ``register_trainer``.

    verl loads plugins on ``import verl`` in every process, while only the TaskRunner needs the trainer,
    and importing verl's v1 trainer costs seconds: the registration runs when (and wherever) verl's
    ``trainer_base`` module is imported, right before verl looks the mode up; likewise the actor's workers get
    the mismatch measurement when they import verl's engine workers (:data:`ON_IMPORT`). Errors are not swallowed.
    """
    install(ON_IMPORT)


def _register_trainer(_trainer_base_module) -> None:
    # importing the module runs its @register_trainer("delayed_sync") decorator
    import verl_ext.staleness.trainer  # noqa: F401


def _install_mismatch_in_update(engine_workers_module) -> None:
    from verl_ext.staleness import mismatch_in_update

    mismatch_in_update.install(engine_workers_module)


ON_IMPORT = (
    OnImport(VERL_TRAINER_MODULE, "trainer mode delayed_sync, with register_trainer", _register_trainer),
    # the actor's workers (their own processes) measure the log-prob mismatch inside the update when the trainer asks
    OnImport(VERL_ENGINE_WORKERS_MODULE, "the mismatch_in_update patch of TrainingWorker.train_batch",
             _install_mismatch_in_update),
)
