"""The one launcher: a :class:`~verl_ext.runs.run.Run` on a :class:`Backend`, writing into :class:`Outputs` ->
``main_ppo``, checked first.

A run is *what* to train; a backend says *where* (verl's own GPUs, as the overrides say; the CPU backend,
:class:`verl_ext.cpu.backend.CPUBackend`; one GPU with the tiny model, :class:`verl_ext.gpu.backend.GPUBackend`);
outputs say where it writes (:mod:`verl_ext.runs.outputs`). :func:`launch` does, in this order:

1. compose the run (:func:`verl_ext.runs.compose.compose`: the overrides, the paths) and check it in this process
   as ``main_ppo``'s driver will (:meth:`~verl_ext.runs.compose.ComposedRun.check`): a refusal raises
   :class:`~verl_ext.runs.run.RunRefused` naming the key and what is allowed, in seconds, before anything is
   written or started;
2. prepare the run's folder (:func:`verl_ext.runs.outputs.prepare_run_folder`): an earlier run of the same name is
   kept, a link refused; the run's description written when the caller gives one (the run scripts' ``<name>.run.json``);
3. execute it: by default ``python -m verl.trainer.main_ppo`` in a child process (:class:`ChildProcess`: its own Ray,
   or the cluster the backend starts around it; output in the run's log; the child dies with this process), or in
   this process through an executor the caller holds (:class:`verl_ext.cpu.ray_session.CPURaySession`: several CPU
   runs sharing one Ray start-up).

Every run goes through here: the run scripts' smoke and real runs, the quickstart, the GPU smoke, the lab, the tests
and benchmarks. :func:`start` is steps 2-3 for a run already checked (the run scripts check every run of a grid
first, the quickstart checks before it builds its assets).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from verl_ext.metrics_file import read_metrics_file
from verl_ext.rollout_events import read_rollout_events
from verl_ext.run_description import RunDescription, write_run_description
from verl_ext.runs.backend import HARNESS_DEFAULTS, HARNESS_STEPS, SMOKE_CAPS, SMOKE_STEPS, Backend, Surroundings
from verl_ext.runs.claims import recorded_values
from verl_ext.runs.compose import (LOGGER_PATH_KEY, LOGGER_PATH_VARIABLE, LOGGER_ROOT_VARIABLE, CheckedRun,
                                   ComposedRun, compose)
from verl_ext.runs.monitor import RunMeasurements, run_and_measure, sigterm_as_interrupt
from verl_ext.runs.outputs import CPU_PROJECT, LAYOUTS, KeptRun, Outputs, RunPaths, prepare_run_folder
from verl_ext.runs.run import Run, RunRefused

# the launcher's public names, wherever they are defined
__all__ = ["launch", "start", "Run", "Backend", "Outputs", "RunPaths", "RunResult", "RunRefused", "Surroundings",
           "ChildProcess", "Execution", "Executor", "HARNESS_DEFAULTS", "HARNESS_STEPS", "SMOKE_CAPS", "SMOKE_STEPS",
           "LOGGER_PATH_KEY", "LOGGER_PATH_VARIABLE", "CPU_PROJECT", "LAYOUTS"]


@dataclass
class RunResult:
    """What a run left: its paths, how long it took, its error (None when ``main_ppo`` succeeded), its
    measurements (:class:`verl_ext.runs.monitor.RunMeasurements`), and lazily what verl logged."""

    run: Run
    paths: RunPaths
    wall_seconds: float
    error: Optional[str] = None
    command: tuple[str, ...] = ()  # the child's command line (``python -m verl.trainer.main_ppo ...``)
    measurements: Optional[RunMeasurements] = None
    log_path: Optional[Path] = None  # main_ppo's output (None for a run in this process: the caller's output)
    peak_gpu_mib: Optional[float] = None  # on a GPU backend: the peak of nvidia-smi's memory used, all processes
    kept_part: Optional[int] = None  # scripts layout: the part number an earlier run's metrics were kept as
    kept_earlier: Optional[Path] = None  # per_run layout: the folder an earlier run's files were moved into
    overrides: tuple[str, ...] = ()  # what main_ppo was given (the composed layers)
    config: dict = field(default_factory=dict)  # what ran: the composed values that define it (runs.claims)
    _steps: Optional[list[dict[str, Any]]] = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def run_dir(self) -> Path:
        return self.paths.run_dir

    @property
    def metrics_path(self) -> Path:
        return self.paths.metrics

    @property
    def events_path(self) -> Path:
        return self.paths.events

    @property
    def checkpoint_dir(self) -> Path:
        return self.paths.checkpoints

    @property
    def steps(self) -> list[dict[str, Any]]:
        """verl's logged metrics, one dict per step (see :func:`verl_ext.metrics_file.read_metrics_file`)."""
        if self._steps is None:
            self._steps = read_metrics_file(self.metrics_path).steps if self.metrics_path.is_file() else []
        return self._steps

    @property
    def events(self) -> list[dict[str, Any]]:
        """The CPU rollout's weight events (see :mod:`verl_ext.rollout_events`)."""
        return read_rollout_events(self.events_path) if self.events_path.is_file() else []

    def raise_for_error(self) -> "RunResult":
        if self.error is not None:
            log = f"; log: {self.log_path}" if self.log_path else ""
            raise RuntimeError(f"run {self.run.name!r} failed: {self.error}{log}")
        return self


@dataclass
class Execution:
    """How an executor's run ended: its measurements and error (None: ``main_ppo`` succeeded), and where its output
    went."""

    measurements: RunMeasurements
    error: Optional[str] = None
    command: tuple[str, ...] = ()
    log_path: Optional[Path] = None
    peak_gpu_mib: Optional[float] = None


class Executor(Protocol):
    """What runs a checked run: :class:`ChildProcess`, or :class:`verl_ext.cpu.ray_session.CPURaySession`."""

    def admit(self, composed: ComposedRun) -> None:
        """Raise before anything is written when this executor cannot run ``composed``."""

    def execute(self, checked: CheckedRun) -> Execution:
        """Run it; a failed run is in the result, never raised."""


Measure = Callable[..., RunMeasurements]  # run_and_measure's signature: a test may stand in for the child process


@dataclass
class ChildProcess:
    """``python -m verl.trainer.main_ppo`` in a child process (with its own Ray, or inside what the backend puts
    around it: a local Ray cluster), output in the run's log (and this process's stdout with ``echo``), measured
    (:mod:`verl_ext.runs.monitor`). ``environ``: the environment to start from (default: this process's).
    ``timeout``: kill it after that many seconds. The child's exit status is in the result's error, never raised;
    Ctrl-C or SIGTERM (turned into KeyboardInterrupt here, :func:`verl_ext.runs.monitor.sigterm_as_interrupt`) stop
    the child and what the backend put around it, then go on up; a ``kill -9`` of this process stops the child too
    (its parent-death signal)."""

    echo: bool = False
    timeout: Optional[float] = None
    environ: Optional[Mapping[str, str]] = None
    measure: Measure = run_and_measure

    def admit(self, composed: ComposedRun) -> None:
        pass

    def execute(self, checked: CheckedRun) -> Execution:
        composed = checked.composed
        paths, command = composed.paths, composed.command
        given = os.environ if self.environ is None else self.environ
        for name in (LOGGER_PATH_VARIABLE, LOGGER_ROOT_VARIABLE):  # the user's, replaced: said, not silent
            if given.get(name) and given[name] != str(paths.metrics):
                print(f"[verl-ext] {name}={given[name]} in the environment is not used: run {composed.run.name!r} "
                      f"writes its metrics where verl-ext reads them back, {paths.metrics}", file=sys.stderr, flush=True)
        env = {
            **given,
            **composed.backend.environment(),
            LOGGER_PATH_VARIABLE: str(paths.metrics),
            "PYTHONUNBUFFERED": "1",  # the child's output as it happens (it goes through a pipe, not a terminal)
        }
        env = {name: value for name, value in env.items() if value is not None}
        with sigterm_as_interrupt(), composed.backend.around(composed.arguments, paths) as surroundings:
            measurements = self.measure(command, {**env, **surroundings.environment}, paths.log, paths.metrics,
                                        echo=self.echo, timeout=self.timeout, also_measure=surroundings.also_measure)
        error = None if measurements.returncode == 0 else f"main_ppo exited with status {measurements.returncode}"
        return Execution(measurements, error, tuple(command), paths.log, surroundings.peak_gpu_mib)


def start(
    checked: CheckedRun,
    executor: Optional[Executor] = None,
    *,
    announce: bool = False,
    description: Optional[RunDescription] = None,
    keep_with_run: Sequence[Path] = (),
) -> RunResult:
    """Steps 2-3 of the module docstring for a checked run. ``executor``: default a :class:`ChildProcess`.
    ``announce``: print the command line first. ``description``: written as ``<name>.run.json`` beside the metrics.
    ``keep_with_run``: the caller's files that describe the run (kept with an earlier run's files, see
    :mod:`verl_ext.runs.outputs`)."""
    composed = checked.composed
    executor = executor or ChildProcess()
    executor.admit(composed)
    if announce:
        print("[verl-ext] running verl's trainer:\n  " + shlex.join(composed.command), flush=True)
    kept = prepare_run_folder(composed.run.name, composed.paths, keep_with_run) or KeptRun()
    if description is not None:
        write_run_description(composed.paths.description, description)  # whole or absent
    started = time.perf_counter()
    execution = executor.execute(checked)
    return RunResult(run=composed.run, paths=composed.paths, wall_seconds=time.perf_counter() - started,
                     error=execution.error, command=execution.command, measurements=execution.measurements,
                     log_path=execution.log_path, peak_gpu_mib=execution.peak_gpu_mib, kept_part=kept.part,
                     kept_earlier=kept.folder, overrides=composed.overrides,
                     config=recorded_values(composed.run, checked.resolved))


def launch(
    run: Run,
    backend: Backend,
    outputs: Outputs,
    *,
    echo: bool = False,
    announce: bool = False,
    timeout: Optional[float] = None,
    environ: Optional[Mapping[str, str]] = None,
    measure: Measure = run_and_measure,
    executor: Optional[Executor] = None,
    description: Optional[RunDescription] = None,
    keep_with_run: Sequence[Path] = (),
) -> RunResult:
    """Compose ``run`` on ``backend`` writing into ``outputs``, check it, start it (module docstring): RunRefused
    before anything is written or started; else the result. ``echo``, ``timeout``, ``environ``, ``measure``: the
    :class:`ChildProcess`'s, when no other ``executor`` is given."""
    checked = compose(run, backend, outputs).check()
    executor = executor or ChildProcess(echo=echo, timeout=timeout, environ=environ, measure=measure)
    return start(checked, executor, announce=announce, description=description, keep_with_run=keep_with_run)
