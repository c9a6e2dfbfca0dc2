"""Metrics that verl has no channel for, handed from where they arise to the trainer that logs them.

verl's advantage estimators return only (advantages, returns). An estimator that has something to
report (RED-Drop's dropped fraction) records it here; it runs in the trainer's own process, and
verl-ext's trainer mode (``trainer.v1.trainer_mode=delayed_sync``) adds what is pending to the step's
metrics. Under another trainer mode the values are simply not logged.
"""

_pending: dict[str, float] = {}


def record(name: str, value: float) -> None:
    """Keep ``value`` for the current step's metrics (the last value per name wins)."""
    _pending[name] = float(value)


def pop_all() -> dict[str, float]:
    """Return and clear the metrics recorded since the last call."""
    metrics = dict(_pending)
    _pending.clear()
    return metrics
