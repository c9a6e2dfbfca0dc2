"""What a verl run's logged steps say: a metric's series, the steps that trained, the CPU run summary.

The steps are those of :func:`verl_ext.metrics_file.read_metrics_file` (``MetricsFile.steps``): one dict
per step, ``{"step": 1, metric: value, ...}``, records of the same step merged.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

from verl_ext import metric_names


def metric_series(steps: Iterable[dict[str, Any]], name: str) -> list[float]:
    """The value of ``name`` at every step that logged it, in step order."""
    return [float(step[name]) for step in steps if name in step]


def training_steps(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records of steps that trained (they carry ``training/global_step``), excluding validation-only ones."""
    return [step for step in steps if metric_names.GLOBAL_STEP in step]


def summarize(steps: list[dict[str, Any]], reward_metric: str = metric_names.SCORE_MEAN) -> dict[str, Optional[float]]:
    """Reward at the start and the end (mean over the first / last tenth of the steps, at least one), step rate.

    ``steps_per_second`` is ``1 / mean(timing_s/step)`` over the steps after the first (training time only:
    the first step also waits for verl's agent-loop and reward workers to start; it is ``first_step_seconds``).
    """
    trained = training_steps(steps)
    rewards = metric_series(trained, reward_metric)
    step_times = metric_series(trained, metric_names.STEP_SECONDS)
    window = max(1, len(rewards) // 10)
    mean = lambda values: sum(values) / len(values) if values else math.nan  # noqa: E731
    steady = step_times[1:] or step_times
    return {
        "steps": len(trained),
        "first_step": trained[0]["step"] if trained else None,
        "last_step": trained[-1]["step"] if trained else None,
        "reward_start": mean(rewards[:window]),
        "reward_end": mean(rewards[-window:]),
        "first_step_seconds": step_times[0] if step_times else math.nan,
        "seconds_per_step": mean(steady),
        "steps_per_second": 1.0 / mean(steady) if steady else math.nan,
    }
