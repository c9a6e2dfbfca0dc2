"""The one grid model: a figure script's runs, a sweep's and the lab's, as points x learning rates x seeds.

A :class:`Point` is an algorithm preset in a staleness setting, with a learning-rate factor (the REC paper's
B.4 sweep multiplies the rate by 2 and 5). A :class:`Grid` runs every point at every learning rate and seed, in
that order (seeds innermost): the run's learning rate is the grid's rate times the point's factor. A grid with no
learning rates runs each point at its profile's rate (None; names then carry no ``-lr``), one with no seeds at
the config's seed (None; no ``-seed``).

Who builds one: the figure scripts and ``run``/``sweep`` (:mod:`verl_ext.experiments`), the lab
(:mod:`verl_ext.lab.grids`: one grid per finding of the paper, or ``--algorithms``/``--settings``). What a
point becomes is theirs to say (:meth:`Grid.runs` takes the function that builds a
:class:`~verl_ext.runs.run.Run`); the grid checks that no two runs share a name (and so a metrics file).

Pure: nothing here imports verl or torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from verl_ext.algorithms.presets import AlgorithmChoice
from verl_ext.runs.run import Run
from verl_ext.staleness.setting import Setting


@dataclass(frozen=True)
class Point:
    """One algorithm preset in one staleness setting; its learning rate is the grid's times ``learning_rate_factor``."""

    algorithm: AlgorithmChoice
    setting: Setting
    learning_rate_factor: float = 1.0


def points(
    algorithms: Iterable[AlgorithmChoice],
    settings: Iterable[Setting],
    learning_rate_factor: float = 1.0,
    settings_outer: bool = True,
) -> tuple[Point, ...]:
    """Every algorithm in every setting: grouped by setting (the lab's tables), or with ``settings_outer=False``
    by algorithm (a figure script's order: each algorithm's settings one after the other)."""
    algorithms, settings = list(algorithms), list(settings)
    if settings_outer:
        return tuple(Point(algorithm, setting, learning_rate_factor) for setting in settings for algorithm in algorithms)
    return tuple(Point(algorithm, setting, learning_rate_factor) for algorithm in algorithms for setting in settings)


Choice = tuple[Point, Optional[float], Optional[int]]  # (point, learning rate, seed)


@dataclass(frozen=True)
class Grid:
    """Runs as ``points`` x ``learning_rates`` x ``seeds``, named ``name`` (a project, or a lab grid), and what every
    run of it shares."""

    name: str
    points: tuple[Point, ...]
    learning_rates: tuple[float, ...] = ()  # empty: the profile's (None)
    seeds: tuple[int, ...] = ()  # empty: the config's (None)
    steps: Optional[int] = None  # training steps of every run; None: the profile's
    prompts_per_step: Optional[int] = None  # prompts per step of every run; None: the profile's
    overrides: tuple[str, ...] = ()  # Hydra overrides of every run, after the presets (a figure's, then the user's)
    zero_variance_masking: bool = False  # off-policy GRPO's masking of equal-reward groups, in every run
    about: str = ""  # what it reproduces or tests

    def __post_init__(self) -> None:
        for name in ("points", "learning_rates", "seeds", "overrides"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.points:
            raise ValueError(f"{self.name}: the grid is empty")

    def choices(self) -> list[Choice]:
        """Every (point, learning rate, seed), seeds innermost."""
        rates: Sequence[Optional[float]] = self.learning_rates or (None,)
        seeds: Sequence[Optional[int]] = self.seeds or (None,)
        return [
            (point, None if rate is None else rate * point.learning_rate_factor, seed)
            for point in self.points
            for rate in rates
            for seed in seeds
        ]

    def runs(self, build: Callable[[Point, Optional[float], Optional[int]], Run], what: str = "") -> list[Run]:
        """``build(point, learning_rate, seed)`` for every choice; ValueError when two runs would share a name."""
        runs = [build(*choice) for choice in self.choices()]
        reject_repeated_names(runs, what or f"grid {self.name}")
        return runs


def reject_repeated_names(runs: Sequence[Run], what: str) -> None:
    """Two runs with one name would share a metrics file: ValueError naming them."""
    counts = Counter(run.name for run in runs)  # linear: a lab of 20,000 seeds is planned in well under a second
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise ValueError(f"{what} would run {', '.join(repeated)} twice")
