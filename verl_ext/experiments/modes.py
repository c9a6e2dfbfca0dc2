"""Run a run script's runs in the mode the environment chooses (docs/run-scripts.md, "The modes").

==================  =========================================================================================
mode                what happens
==================  =========================================================================================
dry run             ``VERL_EXT_DRY_RUN=1``: every run's config composed and checked in this process
                    (:func:`verl_ext.preflight.report_runs`, YAML parsed once), each summarised; nothing starts
CPU / GPU smoke     ``VERL_EXT_CPU_SMOKE=1`` / ``VERL_EXT_GPU_SMOKE=1``: every metrics, log and checkpoint folder
                    checked writable (one GPU counted for the GPU smoke), every run checked quietly on the
                    platform it will use (a failure stops before anything starts), the tiny assets built when
                    missing, then each run for real for 2 steps on the smoke's backend
real                every metrics, log and checkpoint folder checked writable, the GPUs counted
                    (``N_GPUS_PER_NODE``), every run checked quietly (a failure stops before any data work),
                    then per run: the dataset prepared when missing or incomplete (once; ``DATA_DIR`` checked
                    writable first), ``python -m verl.trainer.main_ppo`` as a child process
==================  =========================================================================================

Every run is composed and checked by the one composition (:mod:`verl_ext.runs.compose`; the backend and outputs:
:class:`verl_ext.experiments.environment.RunEnvironment`) and started by the one launcher
(:func:`verl_ext.runs.launch.start`), which writes the run's description (``<name>.run.json``) once its folder is
prepared: its output is streamed to this terminal and kept in ``OUTPUT_DIR/logs/<project>/<name>.log``, an earlier
run's metrics and log of the same name are kept as parts.
A grid's runs go one after the other; a failed one stops the grid unless ``CONTINUE_ON_ERROR=1``. What needs a
GPU or starts a process is a :class:`Tools` field, so tests can replace exactly those.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from verl_ext.experiments.environment import RunEnvironment
from verl_ext.experiments.profiles import Profile, profile_named
from verl_ext.files import output_place_problem
from verl_ext.runs.claims import describe
from verl_ext.runs.compose import CheckedRun, ComposedRun, compose
from verl_ext.runs.launch import ChildProcess, Measure, start
from verl_ext.runs.monitor import run_and_measure
from verl_ext.runs.outputs import refuse_links
from verl_ext.runs.run import Run


class LaunchStop(Exception):
    """The launcher stops on purpose: ``message`` is printed as it is, ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def note(message: str) -> None:
    print(f"[verl-ext] {message}", file=sys.stderr, flush=True)


def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``argv`` with its output streamed to this terminal; its exit status."""
    return subprocess.call(list(argv), env=dict(env))


def _count_gpus() -> int:
    from verl_ext.gpu.device import count_nvidia_gpus

    return count_nvidia_gpus()


@dataclass(frozen=True)
class Tools:
    """The collaborators that start processes or need hardware (tests replace them, nothing else): the data
    preparation's command, ``main_ppo``'s child process (:func:`verl_ext.runs.monitor.run_and_measure`), the GPU
    count and the environment."""

    run_command: Callable[[Sequence[str], Mapping[str, str]], int] = run_command
    measure: Measure = run_and_measure
    count_gpus: Callable[[], int] = _count_gpus
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def gpus_needed_here(environment: RunEnvironment) -> int:
    """GPUs this node must have: the trainer's per node, plus the engine's when both pools are one node each (the
    common split of one node, e.g. 4 + 4 of 8; across nodes Ray places the pools, this node holds one of them)."""
    if environment.engine_on_own_pool and environment.nnodes == environment.engine_nnodes == 1:
        return environment.n_gpus_per_node + environment.engine_gpus_per_node
    return environment.n_gpus_per_node


def require_gpus(needed: int, environment: RunEnvironment, entry: str, tools: Tools) -> None:
    """Stop (exit 1) before anything starts when this node has fewer NVIDIA GPUs than ``needed``."""
    if environment.skip_gpu_check:
        return
    found = tools.count_gpus()
    if found >= needed:
        return
    engine = (f", ENGINE_GPUS_PER_NODE={environment.engine_gpus_per_node}, ENGINE_NNODES={environment.engine_nnodes}"
              if environment.engine_on_own_pool else "")
    raise LaunchStop(
        f"[verl-ext] This run needs {needed} GPU(s) per node (N_GPUS_PER_NODE={environment.n_gpus_per_node}, "
        f"NNODES={environment.nnodes}{engine});\n"
        f"[verl-ext] found {found} NVIDIA GPU(s) on this machine (nvidia-smi, CUDA_VISIBLE_DEVICES). Nothing was started.\n"
        f"[verl-ext]   check the full configuration without a GPU:  VERL_EXT_DRY_RUN=1 {entry}\n"
        f"[verl-ext]   run it for real for 2 steps on the CPU:      VERL_EXT_CPU_SMOKE=1 {entry}\n"
        f"[verl-ext]   see the papers' effects on a CPU:            verl-ext lab\n"
        f"[verl-ext]   fewer GPUs on this node:                     N_GPUS_PER_NODE=<n> {entry}\n"
        f"[verl-ext]   another accelerator (no nvidia-smi):         VERL_EXT_SKIP_GPU_CHECK=1 {entry}",
        status=1,
    )


def check_runs(composed: Sequence[ComposedRun], environment: RunEnvironment, quiet: bool) -> list[CheckedRun]:
    """The dry run's checks on every run in this process (:func:`verl_ext.preflight.report_runs`), each summarised
    (``quiet``: failures only, on stderr); the checked runs when all pass, else LaunchStop."""
    from verl_ext.preflight import report_runs

    titled = [(environment.title(each.run), each) for each in composed]
    results = report_runs(titled, quiet=quiet, out=sys.stderr if quiet else sys.stdout)
    if not all(result.ok for result in results):
        raise LaunchStop("[verl-ext] error: the configuration check failed (above): nothing was prepared or started")
    return [result.checked for result in results]


def prepare_data(profile: Profile, environment: RunEnvironment, tools: Tools) -> None:
    """Prepare the profile's dataset unless data_prep's manifest says its files are one complete run with the
    profile's flags (``python -m data_prep.manifest``: sizes and SHA-256)."""
    from data_prep import manifest

    directory = environment.data_dir / profile.dataset
    flags = list(profile.data_prep_args)
    files = ("train.parquet", profile.val_file)
    if all((directory / name).is_file() for name in files):
        with contextlib.redirect_stdout(sys.stderr):
            complete = manifest.main([str(directory), *files, "--dataset", profile.dataset, f"--args={' '.join(flags)}"]) == 0
        if complete:
            return
    problem = output_place_problem(directory, follow_links=True)
    if problem:
        raise LaunchStop(f"[verl-ext] error: DATA_DIR={str(environment.data_dir)!r}: {directory} must be prepared "
                         f"(python -m data_prep.{profile.dataset}) but {problem}. Nothing was started.")
    note(f"preparing {profile.dataset} in {directory} (python -m data_prep.{profile.dataset})")
    raw = ["--local_dataset_path", environment.raw_data_path] if environment.raw_data_path else []
    argv = [sys.executable, "-m", f"data_prep.{profile.dataset}", "--local_save_dir", str(directory), *raw, *flags]
    if tools.run_command(argv, tools.environ) != 0:
        raise LaunchStop(f"[verl-ext] error: data preparation failed: {' '.join(argv[1:])}")
    if not (directory / profile.val_file).is_file():
        raise LaunchStop(f"[verl-ext] error: data_prep.{profile.dataset} wrote no {directory / profile.val_file}")


def check_output_paths(composed: Sequence[ComposedRun], environment: RunEnvironment) -> None:
    """Every folder and file the runs write under ``OUTPUT_DIR`` can be written: the metrics folder and file,
    the description, the log, the checkpoint folder (LaunchStop naming OUTPUT_DIR and the path, before anything
    runs); none of the run's files is a symbolic link (:class:`verl_ext.runs.run.RunRefused`)."""
    checked: set[Path] = set()
    for each in composed:
        paths = each.paths
        refuse_links(each.run.name, (*paths.files(), paths.description, paths.run_dir))
        for path in (paths.metrics, paths.description, paths.log):
            if path.exists() and not path.is_file():
                _output_stop(environment, f"{path} exists and is not a regular file")
        for folder in (paths.metrics.parent, paths.log.parent, paths.checkpoints):
            if folder in checked:
                continue
            checked.add(folder)
            problem = output_place_problem(folder, follow_links=True)
            if problem:
                _output_stop(environment, f"{folder}: {problem}")


def _output_stop(environment: RunEnvironment, problem: str) -> None:
    raise LaunchStop(f"[verl-ext] error: OUTPUT_DIR={str(environment.output_dir)!r}: {problem}. Nothing was started.")


def _smoke_assets(environment: RunEnvironment) -> tuple[str, str, Path]:
    """The smoke's tiny assets: their size, the variable that names their folder, the folder."""
    if environment.smoke == "cpu":
        return "cpu", "VERL_EXT_TINY_ASSETS", environment.tiny_assets
    return "gpu", "VERL_EXT_TINY_GPU_ASSETS", environment.tiny_gpu_assets


@contextlib.contextmanager
def _assets_stop(variable: str, out: Path):
    """An assets folder that cannot be built (not verl-ext's, read-only, no space left): the variable's error."""
    try:
        yield
    except OSError as error:
        raise LaunchStop(f"[verl-ext] error: {variable}={str(out)!r}: the tiny assets cannot be built there "
                         f"({error.strerror or error}). Nothing was started.") from None


def check_smoke_assets_folder(environment: RunEnvironment) -> None:
    """A smoke's assets folder that the build would refuse (not verl-ext's, a link, a file) is refused first, in a
    second: before the runs' checks import verl and compose their configs."""
    from verl_ext.tiny.assets import check_replaceable

    _, variable, out = _smoke_assets(environment)
    with _assets_stop(variable, out):
        check_replaceable(out)  # its absolute path, not resolved: as the build checks it


def build_smoke_assets(environment: RunEnvironment) -> None:
    from verl_ext.tiny.assets import build_tiny_assets

    size, variable, out = _smoke_assets(environment)
    note(f"building the tiny {size.upper()} assets in {out} (skipped when up to date)")
    with _assets_stop(variable, out):
        build_tiny_assets(out, size=size)


def launch_runs(runs: Sequence[Run], environment: RunEnvironment, entry: str, tools: Optional[Tools] = None) -> int:
    """Run ``runs`` in the environment's mode; the exit status (``entry``: how the user started it, for advice).

    Every mode checks every run's config first, as the driver will (on the CPU platform for the CPU smoke), so a
    grid's second run is never refused after its first trained; the dry run stops there."""
    tools = tools or Tools()
    if environment.smoke is not None and not environment.dry_run:
        check_smoke_assets_folder(environment)  # in a second, before the checks below import verl
    backend, outputs = environment.backend(), environment.run_outputs()
    composed = [compose(run, backend, outputs) for run in runs]  # a topology the backend cannot size fails here
    if environment.dry_run:
        try:
            check_runs(composed, environment, quiet=False)
        except LaunchStop:
            return 1
        return 0
    check_output_paths(composed, environment)
    if environment.smoke == "gpu":
        require_gpus(1, environment, entry, tools)  # one GPU, whatever the script asks for
    elif environment.smoke is None:
        require_gpus(gpus_needed_here(environment), environment, entry, tools)
    checked = check_runs(composed, environment, quiet=True)
    if environment.smoke is not None:
        build_smoke_assets(environment)
    executor = ChildProcess(echo=True, environ=tools.environ, measure=tools.measure)
    prepared: set[str] = set()
    failed: list[tuple[str, int]] = []
    for run, each in zip(runs, checked):
        profile = profile_named(run.profile)
        if environment.smoke is None and profile.dataset not in prepared:
            prepare_data(profile, environment, tools)
            prepared.add(profile.dataset)
        note(f"run {environment.title(run)}: metrics in {each.composed.paths.metrics}, output in {each.composed.paths.log}")
        result = start(each, executor, announce=True,
                       description=describe(run, each.resolved, cpu_smoke=environment.smoke == "cpu"))
        status = result.measurements.returncode
        if status != 0:
            failed.append((run.name, status))
            if not environment.continue_on_error:
                if len(runs) > 1:
                    note(f"run {run.name} failed (exit {status}): stopping (CONTINUE_ON_ERROR=1 goes on)")
                break
    if failed:
        if len(runs) == 1:
            return failed[0][1]
        note(f"failed run(s): {', '.join(name for name, _ in failed)}")
        return 1
    note(f"plot the runs: verl-ext plot {composed[-1].paths.metrics.parent}")
    return 0
