"""The one run value: what a run of verl's ``main_ppo`` is, as every entry point describes it.

A :class:`Run` is *what* to train: a name, the Hydra overrides that make its config, its length, and, when it
was built from the presets, which algorithm preset, staleness setting, learning rate and seed it is (for
names, tables, plots and ``<name>.run.json``). *Where* it trains (verl's own GPUs, the CPU backend, one GPU)
is a :class:`~verl_ext.runs.launch.Backend`, and *where it writes* an :class:`~verl_ext.runs.launch.Outputs`:
:func:`verl_ext.runs.compose.compose` joins the three into the overrides ``main_ppo`` is given, which the dry run
checks and :func:`verl_ext.runs.launch.launch` checks and starts.

Who builds Runs: the one planner, :meth:`verl_ext.runs.grid.Grid.runs` (the run scripts' grids in the environment
the scripts read, :mod:`verl_ext.experiments`; the lab's, :mod:`verl_ext.lab.plan`), the quickstart, the GPU smoke,
and the tests and benchmarks (a Run of plain overrides).

A Run built from the presets (:meth:`Run.from_preset`) has these overrides, merged in this order, a key set
later winning (:func:`verl_ext.overrides.merge_overrides`):

1. ``base``: what the run is built on (a run profile's Table 1 column, the lab's batch);
2. the algorithm preset (:mod:`verl_ext.algorithms.presets`: estimator, loss, clipping range, its settings);
3. the staleness setting (:mod:`verl_ext.staleness.setting`: ``trainer.v1.delayed_sync``), when given;
4. the learning rate (``actor.optim.lr``), when given;
5. the seed: ``data.seed`` (the prompt order), ``rollout.seed`` (the per-request sampling seeds,
   :mod:`verl_ext.seeding`) and ``actor.data_loader_seed`` (the mini-batch shuffle and, through the recipe's
   default, RED-Drop's ``algorithm.red_drop_seed``), when given;
6. off-policy GRPO's zero-variance masking, when on;
7. ``overrides``: the caller's own (a figure's, the user's), last. They may not contradict what the name says
   (layers 2-6): the composition's check refuses that (:mod:`verl_ext.runs.claims`).

Pure: nothing here imports verl or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from verl_ext.algorithms.presets import AlgorithmChoice, number_label
from verl_ext.config_values import ConfigError
from verl_ext.recipe import CONFIG_NAME as RECIPE_CONFIG_NAME
from verl_ext.recipe import config_dir as recipe_config_dir
from verl_ext.run_description import RunDescription
from verl_ext.runs.names import check_name, run_name
from verl_ext.overrides import merge_overrides, override_key
from verl_ext.staleness.setting import Setting

LEARNING_RATE_KEY = "actor_rollout_ref.actor.optim.lr"
SEED_KEYS = ("data.seed", "actor_rollout_ref.rollout.seed", "actor_rollout_ref.actor.data_loader_seed")
ZERO_VARIANCE_MASKING = "trainer.v1.delayed_sync.zero_variance_masking=true"
BYPASS_MODE_KEY = "algorithm.rollout_correction.bypass_mode"
VERL_CONFIG_NAME = "ppo_trainer"  # verl's own trainer config, for a run without verl-ext's recipe


class RunRefused(ConfigError):
    """A run refused before anything was written or started: its configuration failed the driver's checks
    (:meth:`verl_ext.runs.compose.ComposedRun.check`), or a file it would write is not verl-ext's to write
    (:func:`verl_ext.runs.outputs.prepare_run_folder`). The message names the run, then the key and what is
    allowed (or the path) last."""

    def __init__(self, name: str, reason: str, what: str = "its configuration failed the driver's checks"):
        super().__init__(f"run {name!r} refused before anything was written or started: {what}:\n  {reason}")
        self.name, self.reason = name, reason


def verl_config_dir() -> Path:
    """verl's ``trainer/config`` folder (found without importing verl)."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent / "trainer" / "config"


def preset_overrides(
    algorithm: AlgorithmChoice,
    setting: Optional[Setting] = None,
    learning_rate: Optional[float] = None,
    seed: Optional[int] = None,
    zero_variance_masking: bool = False,
) -> list[str]:
    """Layers 2-6 of the module docstring: a preset, a setting, a learning rate, a seed, masking."""
    return [
        *algorithm.overrides(),
        *(setting.overrides() if setting is not None else []),
        *([f"{LEARNING_RATE_KEY}={learning_rate}"] if learning_rate is not None else []),
        *([f"{key}={seed}" for key in SEED_KEYS] if seed is not None else []),
        *([ZERO_VARIANCE_MASKING] if zero_variance_masking else []),
    ]


@dataclass(frozen=True)
class Run:
    """One ``main_ppo`` run. ``overrides`` are its own (merged, a key set later winning); the backend's profile
    and the bookkeeping (names, checkpoint folder, metrics path) are added by the launcher."""

    name: str  # trainer.experiment_name, the metrics file's name
    overrides: tuple[str, ...] = ()
    steps: Optional[int] = None  # trainer.total_training_steps; None: the overrides' (or, on a backend, its profile's)
    project: Optional[str] = None  # trainer.project_name, the metrics folder; None: the Outputs' default
    # what the run is, when it was built from the presets (names, tables, plots, <name>.run.json)
    algorithm: Optional[AlgorithmChoice] = None
    setting: Optional[Setting] = None
    learning_rate: Optional[float] = None  # None: the profile's (and no -lr in the name)
    seed: Optional[int] = None
    zero_variance_masking: bool = False
    profile: str = ""  # the run profile it was built on (a Table 1 column), for its description
    # the config it composes, and where its checkpoints go
    config_name: str = RECIPE_CONFIG_NAME
    config_dir: Optional[Path] = None  # default: the recipe's for rec_trainer, verl's for ppo_trainer
    checkpoint_dir: Optional[Path] = None  # default: the Outputs' (share it to resume a run)

    def __post_init__(self) -> None:
        check_name(self.name, "run name")  # the run names' one alphabet (verl_ext.runs.names.SAFE)
        if self.project is not None:
            check_name(self.project, "project")
        if isinstance(self.overrides, str):
            raise TypeError(f"run {self.name!r}: overrides must be a sequence of 'key=value' strings, not one string")
        object.__setattr__(self, "overrides", tuple(self.overrides))
        if self.steps is not None and (not isinstance(self.steps, int) or isinstance(self.steps, bool) or self.steps < 1):
            raise ValueError(f"run {self.name!r}: steps must be an integer >= 1, got {self.steps!r}")
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise ValueError(f"run {self.name!r}: learning rate must be > 0, got {self.learning_rate}")

    @classmethod
    def from_preset(
        cls,
        name: str,
        algorithm: AlgorithmChoice,
        setting: Optional[Setting] = None,
        *,
        base: Iterable[str] = (),
        learning_rate: Optional[float] = None,
        seed: Optional[int] = None,
        zero_variance_masking: bool = False,
        overrides: Iterable[str] = (),
        **fields,
    ) -> "Run":
        """A run of an algorithm preset (layers of the module docstring); ``fields``: the other fields."""
        merged = merge_overrides(
            base, preset_overrides(algorithm, setting, learning_rate, seed, zero_variance_masking), overrides
        )
        return cls(name=name, overrides=tuple(merged), algorithm=algorithm, setting=setting, learning_rate=learning_rate,
                   seed=seed, zero_variance_masking=zero_variance_masking, **fields)

    @property
    def label(self) -> str:
        """The curve's label in plots: the run name without its setting (and without steps or seed), for a run
        built from a preset; else its name."""
        if self.algorithm is None:
            return self.name
        return run_name(self.algorithm, None, self.learning_rate, self.zero_variance_masking)

    def description(self, cpu_smoke: bool = False) -> RunDescription:
        """``<name>.run.json`` (read by ``verl-ext plot``): the curve's label and the figure's row (the setting);
        :func:`verl_ext.runs.claims.describe` adds what the composed config ran."""
        setting = self.setting.label if self.setting is not None else ""
        return RunDescription(
            run=self.label,
            group=setting,
            profile=self.profile,
            algorithm=self.algorithm.label if self.algorithm is not None else "",
            setting=setting,
            learning_rate=number_label(self.learning_rate) if self.learning_rate is not None else "",
            cpu_smoke=cpu_smoke,
        )

    @property
    def pi_old_is_behaviour(self) -> bool:
        """Whether the run's pi_old is the behaviour policy: the last ``bypass_mode`` of its overrides (the recipe's
        default, true, when none sets it)."""
        values = [item.split("=", 1)[1].strip().lower() for item in self.overrides if override_key(item) == BYPASS_MODE_KEY]
        return not values or values[-1] == "true"

    def resolved_config_dir(self) -> Path:
        if self.config_dir is not None:
            return Path(self.config_dir)
        return verl_config_dir() if self.config_name == VERL_CONFIG_NAME else recipe_config_dir()
