"""The one grid model and the one planner: a figure script's runs, a sweep's and the lab's, as points x learning
rates x seeds -> :class:`~verl_ext.runs.run.Run`\\ s.

A :class:`Point` is an algorithm preset in a staleness setting, with a learning-rate factor (the REC paper's
B.4 sweep multiplies the rate by 2 and 5). A :class:`Grid` runs every point at every learning rate and seed, in
that order (seeds innermost): the run's learning rate is the grid's rate times the point's factor. A grid with no
learning rates runs each point at its profile's rate (None; names then carry no ``-lr``), one with no seeds at
the config's seed (None; no ``-seed``), one with no steps or prompts per step at its base's (no ``-T``, ``-P``).

Where grids come from: the catalogue (:mod:`verl_ext.experiments.catalogue`: each figure script's, each finding
the lab tests), ``run``/``sweep`` (:mod:`verl_ext.experiments`) and the lab's ``--algorithms``/``--settings``.
:meth:`Grid.runs` plans them all the same way: each run is :meth:`Run.from_preset` on the caller's base (a run
profile's Table 1 column, the lab's batch), named in the one format (:func:`verl_ext.runs.names.run_name`: the parts
the grid sets), and no two runs may share a name (and so a metrics file).

Pure: nothing here imports verl or torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from verl_ext.algorithms.presets import AlgorithmChoice
from verl_ext.runs.names import check_name, run_name
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
    profile: str = ""  # a figure's run profile (a Table 1 column, verl_ext.experiments.profiles); "": the lab's
    script: str = ""  # a figure's bash entry point, relative to the repository; "": none (a lab grid, a sweep)

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

    def algorithms(self) -> list[AlgorithmChoice]:
        """The grid's algorithms, in the order they first appear."""
        return list(dict.fromkeys(point.algorithm for point in self.points))

    def settings(self) -> list[Setting]:
        """The grid's staleness settings, in the order they first appear."""
        return list(dict.fromkeys(point.setting for point in self.points))

    def runs(
        self,
        base: Iterable[str] = (),
        overrides: Iterable[str] = (),
        *,
        project: Optional[str] = None,
        profile: str = "",
        name: Optional[str] = None,
        prefix: Optional[str] = None,
        named_by: str = "the run name",
        what: str = "",
    ) -> list[Run]:
        """Every run of the grid, in its order: :meth:`Run.from_preset` of each (point, learning rate, seed) on
        ``base``, with ``overrides`` then the grid's own after the preset's layers, the grid's steps, ``project`` and
        ``profile``. Named in the one format with the parts the grid sets (learning rate when it sweeps them,
        zero-variance masking, steps, prompts per step, seed); ``name``: one run's whole name, ``prefix``: every
        name's (``<prefix>-<name>``), both checked as ``named_by`` says. ValueError naming the problem, before any run
        is built: a bad name, ``name`` given to several runs, two runs of one name."""
        choices = self.choices()

        def name_of(point: Point, rate: Optional[float], seed: Optional[int]) -> str:
            full = run_name(point.algorithm, point.setting, rate, self.zero_variance_masking, self.steps,
                            self.prompts_per_step, seed)
            return name or (f"{prefix}-{full}" if prefix else full)

        if name and len(choices) > 1:
            raise ValueError(f"{self.name}: {named_by}={name!r} names {len(choices)} runs the same: use it for one run")
        names = [check_name(name_of(*choice), named_by if name or prefix else "run name") for choice in choices]
        base, layers = tuple(base), (*overrides, *self.overrides)
        runs = [Run.from_preset(run_name_, point.algorithm, point.setting, base=base, learning_rate=rate, seed=seed,
                                zero_variance_masking=self.zero_variance_masking, overrides=layers, steps=self.steps,
                                project=project, profile=profile)
                for run_name_, (point, rate, seed) in zip(names, choices)]
        reject_repeated_names(runs, what or f"grid {self.name}")
        return runs


def reject_repeated_names(runs: Sequence[Run], what: str) -> None:
    """Two runs with one name would share a metrics file: ValueError naming them."""
    counts = Counter(run.name for run in runs)  # linear: a lab of 20,000 seeds is planned in well under a second
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise ValueError(f"{what} would run {', '.join(repeated)} twice")
