"""The one path from a :class:`~verl_ext.runs.run.Run` to ``python -m verl.trainer.main_ppo``.

A run is *what* to train; a :class:`Backend` says *where* (verl's own GPUs, as the overrides say; the CPU
backend, :class:`verl_ext.cpu.backend.CPUBackend`; one GPU with the tiny model,
:class:`verl_ext.gpu.backend.GPUBackend`); :class:`Outputs` says where it writes. :func:`main_ppo_arguments`
joins them into the command line's arguments (what the dry run checks, :mod:`verl_ext.preflight`), and
:func:`launch` starts that command line in a child process and returns a :class:`RunResult`. Every child-process
run goes through :func:`launch`: the run scripts' smoke and real runs, the quickstart, the GPU smoke, the tests and
benchmarks. (The CPU backend can also run several runs in this process, sharing one Ray start-up:
:class:`verl_ext.cpu.ray_session.CPURaySession`, with the same arguments.)

The arguments, merged in this order, a key set later winning (:func:`verl_ext.runs.overrides.merge_overrides`):

1. the backend's profile, sized for the run (``Backend.before``: the CPU or GPU profile of a run written for
   that backend, with its bookkeeping: 2 steps, no validation, no checkpoint unless the run asks);
2. the names (``trainer.project_name``, ``trainer.experiment_name``) and the run's ``steps``, when set;
3. the run's own overrides;
4. what the backend must set whatever the run says (``Backend.after``: a run script's CPU or GPU smoke swaps in
   the tiny model and data and caps the run at 2 steps, docs/run-scripts.md);
5. the checkpoint folder and the metrics file (``trainer.default_local_dir``, verl's file-logger path in the Ray
   job's environment, so that every worker on every node writes the metrics where they are read).

Where a run writes (:class:`Outputs`), by layout:

- ``per_run`` (the harness: tests, quickstart, lab, GPU smoke): ``<root>/<project>/<name>.jsonl`` (verl's file
  logger), and ``<root>/<project>/<name>/``: ``main_ppo.log``, ``checkpoints/``, ``rollout_events.jsonl`` (the
  CPU rollout's weight events, :mod:`verl_ext.rollout_events`);
- ``scripts`` (the run scripts): metrics apart from checkpoints, so that ``verl-ext plot`` reads one folder:
  ``<root>/metrics/<project>/<name>.jsonl`` with ``<name>.run.json`` (:mod:`verl_ext.run_description`),
  ``<root>/checkpoints/<project>/<name>/``, ``<root>/logs/<project>/<name>.log``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

from verl_ext.metrics_file import file_logger_path, read_metrics_file
from verl_ext.rollout_events import read_rollout_events
from verl_ext.run_description import description_path
from verl_ext.runs import main_ppo
from verl_ext.runs.monitor import RunMeasurements, run_and_measure, sigterm_as_interrupt
from verl_ext.runs.overrides import hydra_string, merge_overrides
from verl_ext.runs.run import Run

LOGGER_PATH_KEY = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"
LOGGER_PATH_VARIABLE = "VERL_FILE_LOGGER_PATH"
LAYOUTS = ("per_run", "scripts")
CPU_PROJECT = "verl_ext_cpu"  # the folder of a run of the harness that names no project (GPU: verl_ext_gpu)
# What a run written for a backend (the harness: tests, quickstart, lab, GPU smoke) does unless it asks otherwise:
# 2 steps, no validation, no checkpoint.
HARNESS_STEPS = 2
HARNESS_DEFAULTS = (f"trainer.total_training_steps={HARNESS_STEPS}", "trainer.val_before_train=False",
                    "trainer.test_freq=-1", "trainer.save_freq=-1")
# What a run script's smoke (VERL_EXT_CPU_SMOKE=1, VERL_EXT_GPU_SMOKE=1) caps, whatever the script sets: 2 steps,
# no checkpoint, no resume.
SMOKE_STEPS = 2
SMOKE_CAPS = (f"trainer.total_training_steps={SMOKE_STEPS}", "trainer.save_freq=-1", "trainer.resume_mode=disable")


@dataclass(frozen=True)
class RunPaths:
    """Where one run writes."""

    metrics: Path  # verl's file logger (JSONL, one line per step)
    checkpoints: Path  # trainer.default_local_dir
    log: Path  # main_ppo's output, for a child process
    events: Path  # the CPU rollout's weight events
    description: Path  # <name>.run.json, read by verl-ext plot
    run_dir: Path  # the run's own folder: the logs of a local Ray cluster's nodes
    keeps_earlier_metrics: bool = False  # scripts layout: an earlier run's metrics become <name>.partN.jsonl


@dataclass(frozen=True)
class Outputs:
    """Where runs write (module docstring): under ``root``, in one of :data:`LAYOUTS`; ``project``: the folder of a
    run that names none (the CPU harness writes into ``verl_ext_cpu``, the GPU one into ``verl_ext_gpu``)."""

    root: Path
    project: str = CPU_PROJECT
    layout: str = "per_run"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout {self.layout!r}; allowed: {', '.join(LAYOUTS)}")
        object.__setattr__(self, "root", Path(self.root).resolve())

    def project_of(self, run: Run) -> str:
        return run.project or self.project

    def paths(self, run: Run) -> RunPaths:
        project = self.project_of(run)
        if self.layout == "scripts":
            metrics = file_logger_path(self.root / "metrics", project, run.name)
            run_dir = self.root / "logs" / project / run.name
            return RunPaths(
                metrics=metrics,
                checkpoints=_checkpoints(run, self.root / "checkpoints" / project / run.name),
                log=self.root / "logs" / project / f"{run.name}.log",
                events=run_dir / "rollout_events.jsonl",
                description=description_path(metrics, run.name),
                run_dir=run_dir,
                keeps_earlier_metrics=True,
            )
        run_dir = self.root / project / run.name
        metrics = file_logger_path(self.root, project, run.name)
        return RunPaths(
            metrics=metrics,
            checkpoints=_checkpoints(run, run_dir / "checkpoints"),
            log=run_dir / "main_ppo.log",
            events=run_dir / "rollout_events.jsonl",
            description=description_path(metrics, run.name),
            run_dir=run_dir,
        )


def _checkpoints(run: Run, default: Path) -> Path:
    return Path(run.checkpoint_dir).resolve() if run.checkpoint_dir else default


@dataclass
class Surroundings:
    """What a backend puts around a child process (:meth:`Backend.around`): variables to add to its environment,
    processes that are not its descendants to measure with it (a local Ray cluster's nodes), and figures the
    backend measured itself (filled in when the block ends: the peak GPU memory)."""

    environment: dict[str, str] = field(default_factory=dict)
    also_measure: Optional[Callable[[], Iterable[int]]] = None
    peak_gpu_mib: Optional[float] = None


class Backend:
    """Where a run trains. This base is verl's own GPUs, the run as its overrides say (a run script's real run):
    no profile, no environment, nothing around the process. :class:`verl_ext.cpu.backend.CPUBackend` and
    :class:`verl_ext.gpu.backend.GPUBackend` override what they add."""

    def environment(self) -> dict[str, Optional[str]]:
        """Environment variables of a run here (set before Ray starts; its workers inherit them); None: unset."""
        return {}

    def before(self, run: Run, paths: RunPaths) -> list[str]:
        """Overrides under the run's own (layer 1 of the module docstring)."""
        return []

    def after(self, run: Run) -> list[str]:
        """Overrides over the run's own (layer 4)."""
        return []

    @contextlib.contextmanager
    def around(self, arguments: Sequence[str], paths: RunPaths) -> Iterator[Surroundings]:
        """What the child process of ``arguments`` runs inside (a local Ray cluster, a GPU memory sampler)."""
        yield Surroundings()


def main_ppo_overrides(run: Run, backend: Backend, outputs: Outputs) -> list[str]:
    """The overrides of ``run`` on ``backend``, writing into ``outputs``: the layers of the module docstring."""
    paths = outputs.paths(run)
    names = [f"trainer.project_name={hydra_string(outputs.project_of(run))}", f"trainer.experiment_name={hydra_string(run.name)}"]
    steps = [f"trainer.total_training_steps={run.steps}"] if run.steps is not None else []
    return merge_overrides(
        backend.before(run, paths),
        [*names, *steps],
        run.overrides,
        backend.after(run),
        [f"trainer.default_local_dir={hydra_string(str(paths.checkpoints))}",
         f"{LOGGER_PATH_KEY}={hydra_string(str(paths.metrics))}"],
    )


def main_ppo_arguments(run: Run, backend: Backend, outputs: Outputs) -> list[str]:
    """``--config-path=DIR --config-name=NAME overrides...``: what :func:`launch` gives ``main_ppo``, and what the dry
    run checks."""
    return main_ppo.arguments(run.resolved_config_dir(), run.config_name, main_ppo_overrides(run, backend, outputs))


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
    kept_part: Optional[int] = None  # where an earlier run's metrics are kept: their part's number (prepare_run_dir)
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


def prepare_run_dir(paths: RunPaths) -> Optional[int]:
    """Make the run's folders, and clear the files a run writes of what an earlier run of the same name left: the
    weight events are removed; the metrics are removed too (the harness reads back this run's), or, where
    ``keeps_earlier_metrics`` (a run script run again, or resumed), kept with its log as ``<name>.partN.jsonl``
    and ``<name>.partN.log`` (verl's file logger truncates its file; ``verl-ext plot`` joins the parts). The
    part's number N, if one was kept."""
    for folder in (paths.metrics.parent, paths.log.parent):
        folder.mkdir(parents=True, exist_ok=True)
    paths.events.unlink(missing_ok=True)
    if not paths.keeps_earlier_metrics:
        paths.run_dir.mkdir(parents=True, exist_ok=True)
        paths.metrics.unlink(missing_ok=True)
        return None
    earlier = [path for path in (paths.metrics, paths.log) if path.is_file() and path.stat().st_size > 0]
    if not earlier:
        return None
    name = paths.metrics.name.removesuffix(".jsonl")

    def part_of(path: Path, number: int) -> Path:
        return path.with_name(f"{name}.part{number}{path.suffix}")

    number = 1
    while any(part_of(path, number).exists() for path in (paths.metrics, paths.log)):
        number += 1
    for path in earlier:
        path.rename(part_of(path, number))
    return number


Measure = Callable[..., RunMeasurements]  # run_and_measure's signature: a test may stand in for the child process


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
) -> RunResult:
    """Run ``python -m verl.trainer.main_ppo`` for ``run`` on ``backend`` in a child process (its own Ray, or the
    cluster the backend starts around it), output in ``paths.log`` (and this process's stdout with ``echo``).

    ``announce``: print the command line first. ``environ``: the environment to start from (default: this
    process's). A bad run (a topology or batch size the backend cannot size) raises before anything starts. The
    child's exit status is in the result's error, never raised; Ctrl-C or SIGTERM (turned into KeyboardInterrupt
    here, :func:`verl_ext.runs.monitor.sigterm_as_interrupt`) stops the child and what the backend put around it,
    then goes on up.
    """
    paths = outputs.paths(run)
    arguments = main_ppo_arguments(run, backend, outputs)  # a bad topology or batch size fails here, before Ray
    command = main_ppo.command(arguments)
    if announce:
        print("[verl-ext] running verl's trainer:\n  " + shlex.join(command), flush=True)
    env = {
        **(os.environ if environ is None else environ),
        **backend.environment(),
        LOGGER_PATH_VARIABLE: str(paths.metrics),
        "PYTHONUNBUFFERED": "1",  # the child's output as it happens (it goes through a pipe, not a terminal)
    }
    env = {name: value for name, value in env.items() if value is not None}
    kept_part = prepare_run_dir(paths)
    if kept_part is not None:
        print(f"[verl-ext] kept the earlier metrics and log of {run.name} as part {kept_part} "
              f"({paths.metrics.parent}/{run.name}.part{kept_part}.jsonl; verl-ext plot joins the parts)",
              file=sys.stderr, flush=True)
    started = time.perf_counter()
    with sigterm_as_interrupt(), backend.around(arguments, paths) as surroundings:
        measurements = measure(command, {**env, **surroundings.environment}, paths.log, paths.metrics, echo=echo,
                               timeout=timeout, also_measure=surroundings.also_measure)
    error = None if measurements.returncode == 0 else f"main_ppo exited with status {measurements.returncode}"
    return RunResult(run=run, paths=paths, wall_seconds=time.perf_counter() - started, error=error,
                     command=tuple(command), measurements=measurements, log_path=paths.log,
                     peak_gpu_mib=surroundings.peak_gpu_mib, kept_part=kept_part)
