"""verl's metrics file: where verl's file logger writes it, and the one reader of what a run logged, which every
verl-ext tool uses (the lab, ``verl-ext plot``, the smoke checks, the quickstart, the launcher's results, the
benchmarks): the file's records (:func:`read_metrics_file`), the steps that trained (:func:`trained_steps`), a
metric's series (:func:`metric_series`) and a run's summary (:func:`run_summary`: reward at the start and the end,
step rate).

verl's ``FileLogger`` (``verl/utils/tracking.py``, backend ``file`` of ``trainer.logger``) appends one line
``{"step": int, "data": {metric: value}}`` per ``Tracking.log`` call, at ``$VERL_FILE_LOGGER_PATH`` or
``$VERL_FILE_LOGGER_ROOT/<project_name>/<experiment_name>.jsonl``. A step can have several records
(validation before training is logged at the start step too); they are merged, a later value winning.
Metric names: :mod:`verl_ext.metric_names`.

The reading policy, the same for ``verl-ext plot``, the lab, the smoke checks, the CPU run summary and the
benchmarks:

- every line must be a file-logger record; one that is not is a :class:`MetricsFileError` naming the file,
  the line and, where it applies, the field;
- except the last line when it does not end with a newline and does not parse: that is a write cut short
  (a run killed mid-write, or a file read while verl writes it). It is skipped and counted
  (:attr:`MetricsFile.skipped_lines`) so that the caller can say so; a complete last line is checked like
  any other;
- metric values are kept as written; :meth:`MetricsFile.series` keeps the numbers among them (strings,
  lists and ``null`` -- verl's NaN -- are left out) as floats, and :meth:`MetricsFile.not_numbers` lists what it left
  out, so that a caller says so (``verl-ext plot`` counts them per run) instead of dropping a step without a word;
- a step is an integer of at most :data:`MAX_STEP` in size (a float holds every integer up to it: the plot's axis, a
  mean over steps); one beyond it (``10**400`` is valid JSON) is an error naming the file and the line;
- the file must be a regular file of at most :data:`MAX_BYTES` (a FIFO would block the reader, a link to
  ``/dev/zero`` would never end: :func:`verl_ext.files.open_regular`), read a line at a time.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from verl_ext import metric_names
from verl_ext.files import open_regular

# A verl record is a few KB (hundreds of metrics): 512 MiB is some 100,000 steps; more is not a metrics file
MAX_BYTES = 512 * 1024 * 1024
MAX_STEP = 2**53  # the largest integer up to which a float holds every integer


class MetricsFileError(ValueError):
    """A metrics file that is not verl's file-logger JSONL (names the file, the line and the field)."""


def file_logger_path(root: str | os.PathLike, project_name: str, experiment_name: str) -> Path:
    """Where verl's FileLogger writes when ``VERL_FILE_LOGGER_ROOT=root`` (and no VERL_FILE_LOGGER_PATH)."""
    return Path(root) / project_name / f"{experiment_name}.jsonl"


@dataclass(frozen=True)
class MetricsFile:
    """One metrics file as read: its records merged by step, and how many cut-short lines were skipped."""

    path: Path
    steps: list[dict[str, Any]]  # [{"step": 1, metric: value, ...}, ...] in step order
    skipped_lines: int = 0  # 1 when the last line was a write cut short, else 0

    def not_numbers(self) -> dict[str, list[tuple[int, Any]]]:
        """``{metric: [(step, value), ...]}`` of the values :meth:`series` leaves out (not numbers: ``null``, verl's
        NaN; a string, a list, true or false), in step order."""
        out: dict[str, list[tuple[int, Any]]] = {}
        for record in self.steps:
            for name, value in record.items():
                if name != "step" and not _is_number(value):
                    out.setdefault(name, []).append((record["step"], value))
        return out

    def series(self) -> dict[str, dict[int, float]]:
        """``{metric: {step: value}}`` of the numeric values (``bool`` is not a number here)."""
        out: dict[str, dict[int, float]] = {}
        for record in self.steps:
            step = record["step"]
            for name, value in record.items():
                if name != "step" and _is_number(value):
                    out.setdefault(name, {})[step] = float(value)
        return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_metrics_file(path: str | os.PathLike) -> MetricsFile:
    """Read one file-logger JSONL under the policy of the module docstring."""
    path = Path(path)
    by_step: dict[int, dict[str, Any]] = {}
    skipped = 0
    read = 0
    with open_regular(path, MAX_BYTES, "metrics file (verl's file-logger JSONL)", MetricsFileError) as file:
        for number, raw in enumerate(file, start=1):
            read += len(raw)
            if read > MAX_BYTES:  # it grew while being read
                raise MetricsFileError(f"{path}: more than the {MAX_BYTES} bytes a metrics file may have")
            if not raw.strip():
                continue
            cut_short = not raw.endswith(b"\n")  # only the last line can lack its newline
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                if cut_short:
                    skipped += 1
                    continue
                raise MetricsFileError(f"{path}, line {number}: not UTF-8 text") from None
            except json.JSONDecodeError as error:
                if cut_short:
                    skipped += 1
                    continue
                raise MetricsFileError(f"{path}, line {number}: not JSON ({error.msg})") from None
            except (RecursionError, ValueError) as error:  # nested too deeply; an integer of thousands of digits
                reason = "nested too deeply" if isinstance(error, RecursionError) else error
                raise MetricsFileError(f"{path}, line {number}: not a file-logger record ({reason})") from None
            step, data = _checked_record(record, path, number)
            by_step.setdefault(step, {"step": step}).update(data)
    return MetricsFile(path, [by_step[step] for step in sorted(by_step)], skipped)


def _checked_record(record: Any, path: Path, number: int) -> tuple[int, dict[str, Any]]:
    where = f"{path}, line {number}"
    if not isinstance(record, dict) or "step" not in record or "data" not in record:
        raise MetricsFileError(f"{where}: expected verl's file-logger record {{\"step\": ..., \"data\": {{...}}}}")
    step, data = record["step"], record["data"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise MetricsFileError(f"{where}, field 'step': expected an integer, got {step!r}")
    if not -MAX_STEP <= step <= MAX_STEP:
        digits = len(str(abs(step)))
        raise MetricsFileError(f"{where}, field 'step': an integer of {digits} digits, beyond the {MAX_STEP} a step may "
                               "be (a float, which the plot's axis uses, holds every integer only up to it)")
    if not isinstance(data, dict):
        raise MetricsFileError(f"{where}, field 'data': expected an object, got {type(data).__name__}")
    if "step" in data:
        raise MetricsFileError(f"{where}, field 'data.step': a metric may not be named 'step' (the record's own field)")
    for name, value in data.items():
        if _is_number(value):
            try:
                float(value)
            except OverflowError:
                raise MetricsFileError(f"{where}, field 'data.{name}': a number too large for a float") from None
    return step, data


def trained_steps(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the steps that trained, in step order: those carrying ``training/global_step`` (a record of
    validation only does not)."""
    return sorted((step for step in steps if metric_names.GLOBAL_STEP in step), key=lambda step: step["step"])


def metric_series(steps: Iterable[dict[str, Any]], name: str) -> list[float]:
    """The value of ``name`` at every step that logged it, in the steps' order."""
    return [float(step[name]) for step in steps if name in step]


def run_summary(steps: Iterable[dict[str, Any]], reward_metric: str = metric_names.SCORE_MEAN) -> dict[str, Optional[float]]:
    """Reward at the start and the end (mean over the first / last tenth of the trained steps, at least one), step rate.

    ``steps_per_second`` is ``1 / mean(timing_s/step)`` over the steps after the first (training time only:
    the first step also waits for verl's agent-loop and reward workers to start; it is ``first_step_seconds``).
    """
    trained = trained_steps(steps)
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
