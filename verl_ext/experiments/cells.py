"""A grid of runs -> its cells: each run's name, its final ``main_ppo`` overrides and where it writes.

A cell is profile + algorithm + setting (+ learning rate). Its overrides are merged in this order, a key set
later winning (:func:`verl_ext.runs.overrides.merge_overrides`):

1. the profile (Table 1 + our resources), the algorithm preset, the staleness setting, the learning rate,
   zero-variance masking;
2. names, logger and nodes (``trainer.project_name``, ``experiment_name``, ``logger``, ``nnodes``,
   ``n_gpus_per_node``), and with ``ENGINE_GPUS_PER_NODE`` the rollout engine on its own pool (weights through
   verl's ``nccl``; :func:`verl_ext.staleness.config.engine_pool_overrides`);
3. the figure's own overrides, then the user's (command-line) overrides;
4. in a smoke mode, the CPU or GPU smoke profile (:mod:`verl_ext.cpu.profile`, :mod:`verl_ext.gpu.profile`:
   tiny model and data, the CPU platform or one GPU) and the smoke caps (2 steps, no checkpoint, no resume),
   after the user's so that a smoke run stays small whatever the script sets. The CPU smoke keeps the
   topology the figure's or the user's overrides set (``trainer.nnodes``, ``trainer.n_gpus_per_node``; world
   size 1 without them, not ``N_GPUS_PER_NODE``'s GPU default of 8): it is sized for it and repeats it; with
   ``ENGINE_GPUS_PER_NODE`` it keeps the split too, with one logical GPU for the engine and weights through
   verl-ext's ``gloo``;
5. bookkeeping: the checkpoint folder and verl's file-logger path (in Ray's runtime environment, so every
   worker on every node writes the metrics where ``verl-ext plot`` reads them).

Pure: nothing here composes a config, reads a file or starts a process.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from verl_ext.experiments.algorithms import AlgorithmChoice, number_label
from verl_ext.experiments.environment import RunEnvironment
from verl_ext.runs import main_ppo
from verl_ext.runs.overrides import hydra_list, hydra_string, merge_overrides
from verl_ext.experiments.profiles import Profile
from verl_ext.experiments.run_names import run_name
from verl_ext.runs.names import check_name
from verl_ext.staleness.setting import Setting
from verl_ext.checkpoint_backends import CPU_BACKEND, GPU_BACKEND
from verl_ext.metrics_file import file_logger_path
from verl_ext.recipe import CONFIG_NAME as RECIPE_CONFIG_NAME
from verl_ext.recipe import config_dir as recipe_config_dir
from verl_ext.staleness.config import engine_pool_overrides
from verl_ext.run_description import RunDescription

SMOKE_STEPS = 2
SMOKE_CAPS = (f"trainer.total_training_steps={SMOKE_STEPS}", "trainer.save_freq=-1", "trainer.resume_mode=disable")
LOGGER_PATH_KEY = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"
MASKING = "trainer.v1.delayed_sync.zero_variance_masking=true"


@dataclass(frozen=True)
class Grid:
    """What a command asks for: every (algorithm, setting, learning rate) of one profile, in one project."""

    project: str
    profile: Profile
    algorithms: Sequence[AlgorithmChoice]
    settings: Sequence[Setting]
    learning_rates: Sequence[float] = ()  # empty: the profile's, and no ``-lr`` in the names
    overrides: Sequence[str] = ()  # the figure's, then the user's
    zero_variance_masking: bool = False
    name_prefix: Optional[str] = None  # EXPERIMENT_NAME of a grid: ``<prefix>-<run name>``
    name: Optional[str] = None  # EXPERIMENT_NAME of a single run: its whole name


@dataclass(frozen=True)
class Cell:
    """One run of a grid, ready to check or start."""

    project: str
    name: str  # trainer.experiment_name, the metrics file's name
    label: str  # the curve's label in plots: the run name without its setting
    profile: Profile
    algorithm: AlgorithmChoice
    setting: Setting
    learning_rate: Optional[float]
    overrides: tuple[str, ...]
    metrics_file: Path
    checkpoints: Path
    smoke: Optional[str] = None
    description: Optional[RunDescription] = field(default=None, compare=False)  # <name>.run.json

    @property
    def title(self) -> str:
        """How the dry run names the cell: ``project/name`` (and the smoke mode)."""
        return f"{self.project}/{self.name}" + (f" ({self.smoke} smoke)" if self.smoke else "")

    @property
    def main_ppo_args(self) -> list[str]:
        """The arguments of ``python -m verl.trainer.main_ppo`` (and of the dry run) for this cell."""
        return main_ppo.arguments(recipe_config_dir(), RECIPE_CONFIG_NAME, self.overrides)


def parse_learning_rates(text: str, what: str = "LEARNING_RATES") -> list[float]:
    """``"2e-6,5e-6"`` (commas or spaces) -> floats; ValueError naming ``what`` on a value that is not a number > 0."""
    rates = []
    for part in (part for part in re.split(r"[,\s]+", text) if part):
        try:
            rate = float(part)
        except ValueError:
            rate = float("nan")
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"{what}: learning rate {part!r} is not a number > 0")
        if rate in rates:
            raise ValueError(f"{what}: learning rate {part!r} given twice")
        rates.append(rate)
    if not rates:
        raise ValueError(f"{what}: no learning rate given")
    return rates


def engine_overrides(environment: RunEnvironment) -> list[str]:
    """With ``ENGINE_GPUS_PER_NODE``: the rollout engine on its own pool, weights through verl's ``nccl``."""
    if not environment.engine_on_own_pool:
        return []
    return engine_pool_overrides(environment.engine_nnodes, environment.engine_gpus_per_node, GPU_BACKEND)


def smoke_overrides(environment: RunEnvironment, user_overrides: Sequence[str] = ()) -> list[str]:
    """The smoke profile of the environment's mode (empty outside a smoke mode), then the smoke caps. The CPU
    profile takes its topology from ``user_overrides`` (the figure's, then the user's)."""
    if environment.smoke == "cpu":
        from verl_ext.cpu.profile import cpu_overrides
        from verl_ext.cpu.topology import Topology

        # the split on the CPU: one logical GPU for the engine, weights over gloo (the profile gives Ray the
        # trainer's logical GPUs and the engine's)
        split = engine_pool_overrides(1, 1, CPU_BACKEND) if environment.engine_on_own_pool else []
        topology = Topology.from_overrides([*user_overrides, *split])
        return [*cpu_overrides(environment.tiny_assets, topology=topology), *split, *SMOKE_CAPS]
    if environment.smoke == "gpu":
        from verl_ext.gpu.profile import gpu_smoke_overrides

        if environment.engine_on_own_pool:
            raise ValueError(
                f"ENGINE_GPUS_PER_NODE={environment.engine_gpus_per_node}: the GPU smoke runs on one GPU, and an engine "
                "on its own pool needs a second one; check the split with VERL_EXT_DRY_RUN=1 or VERL_EXT_CPU_SMOKE=1")
        return [*gpu_smoke_overrides(environment.tiny_gpu_assets), *SMOKE_CAPS]
    return []


def build_cells(grid: Grid, environment: RunEnvironment) -> list[Cell]:
    """Every cell of ``grid`` (algorithms x settings x learning rates, in that order); ValueError when empty."""
    rates: Sequence[Optional[float]] = list(grid.learning_rates) or [None]
    check_name(grid.project, "project")
    choices = [(algorithm, setting, rate) for algorithm in grid.algorithms for setting in grid.settings for rate in rates]
    for algorithm, setting, rate in choices:  # a prefix long enough to make a run name too long fails here
        check_name(_name(grid, algorithm, setting, rate), "EXPERIMENT_NAME" if grid.name or grid.name_prefix else "run name")
    smoke = smoke_overrides(environment, grid.overrides)  # after every check: the CPU profile imports torch
    cells = [_cell(grid, environment, algorithm, setting, rate, smoke) for algorithm, setting, rate in choices]
    if not cells:
        raise ValueError(f"{grid.project}: the grid is empty")
    names = [cell.name for cell in cells]
    if len(set(names)) < len(names):
        if grid.name:
            raise ValueError(f"{grid.project}: EXPERIMENT_NAME={grid.name!r} names {len(names)} runs the same: use it for one run")
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"{grid.project}: two runs would share the name (and metrics file) {', '.join(repeated)}")
    return cells


def _full_name(grid: Grid, algorithm: AlgorithmChoice, setting: Setting, rate: Optional[float]) -> str:
    return run_name(algorithm, setting, learning_rate=rate, zero_variance_masking=grid.zero_variance_masking)


def _name(grid: Grid, algorithm: AlgorithmChoice, setting: Setting, rate: Optional[float]) -> str:
    """The run's name: EXPERIMENT_NAME for one run, ``<EXPERIMENT_NAME>-<run name>`` in a grid, else the run name."""
    full = _full_name(grid, algorithm, setting, rate)
    return grid.name or (f"{grid.name_prefix}-{full}" if grid.name_prefix else full)


def _cell(grid: Grid, environment: RunEnvironment, algorithm: AlgorithmChoice, setting: Setting,
          rate: Optional[float], smoke: list[str]) -> Cell:
    full = _full_name(grid, algorithm, setting, rate)
    label = full[: -len(setting.label) - 1]
    name = _name(grid, algorithm, setting, rate)
    outputs = environment.outputs
    metrics_file = file_logger_path(outputs / "metrics", grid.project, name)
    checkpoints = outputs / "checkpoints" / grid.project / name
    overrides = merge_overrides(
        grid.profile.overrides(environment.data_dir, environment.model_path, environment.total_steps,
                               environment.kl_to_initial),
        algorithm.overrides(),
        setting.overrides(),
        [f"actor_rollout_ref.actor.optim.lr={rate}"] if rate is not None else [],
        # off-policy GRPO's zero-variance masking in the delayed_sync trainer: groups whose rewards are all
        # equal leave each step's batch, no prompts are drawn to replace them (docs/staleness.md)
        [MASKING] if grid.zero_variance_masking else [],
        [
            f"trainer.project_name={hydra_string(grid.project)}",
            f"trainer.experiment_name={hydra_string(name)}",
            f"trainer.logger={hydra_list(environment.logger)}",
            f"trainer.nnodes={environment.nnodes}",
            f"trainer.n_gpus_per_node={environment.n_gpus_per_node}",
        ],
        engine_overrides(environment),
        grid.overrides,
        smoke,
        [f"trainer.default_local_dir={hydra_string(str(checkpoints))}", f"{LOGGER_PATH_KEY}={hydra_string(str(metrics_file))}"],
    )
    description = RunDescription(
        run=label,
        group=setting.label,
        profile=grid.profile.name,
        algorithm=algorithm.label,
        setting=setting.label,
        learning_rate=number_label(rate) if rate is not None else "",
        cpu_smoke=environment.smoke == "cpu",
    )
    return Cell(grid.project, name, label, grid.profile, algorithm, setting, rate, tuple(overrides), metrics_file,
                checkpoints, environment.smoke, description)
