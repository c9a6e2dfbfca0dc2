"""Read what a verl run logged: the JSONL written by verl's ``file`` logger, one record per training step.

verl's ``FileLogger`` (``verl/utils/tracking.py``, backend ``file`` of ``trainer.logger``) appends
``{"step": int, "data": {metric: value}}`` per ``Tracking.log`` call, at ``VERL_FILE_LOGGER_PATH`` or
``$VERL_FILE_LOGGER_ROOT/<project_name>/<experiment_name>.jsonl``. Validation before training is logged
at the start step too; :func:`read_step_metrics` merges records of the same step.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from verl_ext.jsonl import json_lines


def file_logger_path(root: str | os.PathLike, project_name: str, experiment_name: str) -> Path:
    """Where verl's FileLogger writes when ``VERL_FILE_LOGGER_ROOT=root`` (and no VERL_FILE_LOGGER_PATH)."""
    return Path(root) / project_name / f"{experiment_name}.jsonl"


def read_step_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """``[{"step": 1, metric: value, ...}, ...]`` sorted by step; a malformed line raises naming it."""
    by_step: dict[int, dict[str, Any]] = {}
    for line_number, record in json_lines(path):
        try:
            step, data = int(record["step"]), dict(record["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: line {line_number} is not a verl file-logger record: {error!r}") from error
        by_step.setdefault(step, {"step": step}).update(data)
    return [by_step[step] for step in sorted(by_step)]


def metric_series(steps: Iterable[dict[str, Any]], name: str) -> list[float]:
    """The value of ``name`` at every step that logged it, in step order."""
    return [float(step[name]) for step in steps if name in step]


def training_steps(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records of steps that trained (they carry ``training/global_step``), excluding validation-only ones."""
    return [step for step in steps if "training/global_step" in step]


def summarize(steps: list[dict[str, Any]], reward_metric: str = "critic/score/mean") -> dict[str, Optional[float]]:
    """Reward at the start and the end (mean over the first / last tenth of the steps, at least one), step rate.

    ``steps_per_second`` is ``1 / mean(timing_s/step)`` over the steps after the first (training time only:
    the first step also waits for verl's agent-loop and reward workers to start; it is ``first_step_seconds``).
    """
    trained = training_steps(steps)
    rewards = metric_series(trained, reward_metric)
    step_times = metric_series(trained, "timing_s/step")
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
