"""Run verl's real ``main_ppo`` on one GPU with the GPU profile, and return what it logged.

Each run is ``python -m verl.trainer.main_ppo --config-path ... --config-name ...`` in a child process with
its own Ray cluster, exactly what a user types: on a GPU the process boundary is what reliably returns the
vLLM engine's memory between runs, and Ray's own start (seconds) is small next to vLLM's (minutes). The run
is described by :class:`verl_ext.cpu.launch.CPURun` (a name, overrides, a step count: nothing in it is
CPU-specific); the result is a :class:`verl_ext.cpu.launch.CPURunResult` with the child's measurements
(start-up, teardown) and the peak GPU memory (``result.peak_gpu_mib``).

Overrides, a key set later winning: the GPU profile (:func:`verl_ext.gpu.profile.gpu_overrides`), then the
bookkeeping (steps, names, checkpoint folder, no validation or checkpoint unless asked), then the run's own.
Each run writes into ``<base_dir>/verl_ext_gpu/``: ``<name>.jsonl`` (verl's file logger) and
``<name>/main_ppo.log``, ``<name>/checkpoints``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from verl_ext.cpu import launch as cpu_launch
from verl_ext.cpu.launch import CPURun, CPURunResult
from verl_ext.runs import main_ppo
from verl_ext.runs.overrides import merge_overrides
from verl_ext.gpu.profile import gpu_environment, gpu_overrides

PROJECT_NAME = "verl_ext_gpu"


def run_paths(base_dir: Path, run: CPURun) -> dict[str, Path]:
    return cpu_launch.run_paths(base_dir, run, PROJECT_NAME)


def gpu_run_overrides(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    """The full override list of ``run`` on one GPU: GPU profile, then bookkeeping, then the run's own."""
    bookkeeping = cpu_launch.bookkeeping_overrides(run, run_paths(base_dir, run), PROJECT_NAME)
    return merge_overrides(gpu_overrides(assets_dir), bookkeeping, run.overrides)


def gpu_main_ppo_command(run: CPURun, base_dir: Path, assets_dir: Path) -> list[str]:
    overrides = gpu_run_overrides(run, base_dir, assets_dir)
    return main_ppo.command(main_ppo.arguments(run.resolved_config_dir(), run.config_name, overrides))


def run_gpu_main_ppo(
    run: CPURun, base_dir: Path, assets_dir: Path, echo: bool = False, timeout: Optional[float] = None
) -> CPURunResult:
    """Run ``main_ppo`` for ``run`` on this machine's GPU in a child process; its output goes to
    ``<run dir>/main_ppo.log`` (and this process's stdout with ``echo``)."""
    from verl_ext.cpu.run_monitor import run_and_measure
    from verl_ext.gpu.device import GPUMemorySampler

    paths = run_paths(base_dir, run)
    paths["run_dir"].mkdir(parents=True, exist_ok=True)
    paths["metrics"].unlink(missing_ok=True)
    env = {**os.environ, **gpu_environment(), "VERL_FILE_LOGGER_PATH": str(paths["metrics"])}
    env.pop("VERL_PLATFORM", None)  # a CPU profile sourced in this shell would select the CPU platform
    started = time.perf_counter()
    with GPUMemorySampler() as memory:
        measurements = run_and_measure(
            gpu_main_ppo_command(run, base_dir, assets_dir), env, paths["log"], paths["metrics"], echo=echo, timeout=timeout
        )
    error = None if measurements.returncode == 0 else f"main_ppo exited with status {measurements.returncode}"
    result = CPURunResult(
        run=run,
        run_dir=paths["run_dir"],
        metrics_path=paths["metrics"],
        events_path=paths["run_dir"] / "no_event_log",  # vLLM keeps no weight-event log (the CPU rollout does)
        checkpoint_dir=paths["checkpoints"],
        log_path=paths["log"],
        wall_seconds=time.perf_counter() - started,
        error=error,
        measurements=measurements,
    )
    result.peak_gpu_mib = memory.peak_mib
    return result
