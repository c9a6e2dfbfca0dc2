"""What the lab reads off one run's logged metrics, and how runs of the same algorithm and setting combine.

Pure functions over verl's per-step metrics (``[{"step": 1, "critic/score/mean": 0.31, ...}, ...]``, the
``steps`` of :func:`verl_ext.metrics_file.read_metrics_file`; names from :mod:`verl_ext.metric_names`). Definitions:

- reward at step t: ``critic/score/mean`` (the mean sequence reward of the step's training batch) divided
  by the task's maximum reward (1 for the counting task), so it is a fraction of the maximum;
- ``final_reward``: mean reward over the last 10% of the logged steps (at least one step);
- smoothed reward at step t: the mean of the rewards of steps t - W + 1 .. t, W = 5 (a trailing window:
  one lucky batch does not reach the target), defined from step W on (a run shorter than
  W has one smoothed value, the mean of all its steps, at its last step);
- ``steps_to_target``: the first step whose smoothed reward is >= the target fraction (0.9 by default);
  None if no step is;
- ``peak_reward``: the highest smoothed reward (a run that learned and then collapsed has a high peak and a
  low final reward);
- ``kl_to_initial``: ``actor/kl_loss`` (the KL to the reference model = the initial weights, logged with
  coefficient 0, see :mod:`verl_ext.lab.plan`), mean over the same last 10% of steps; None if not logged.
- ``max_kl_to_behaviour``: the largest ``actor/ppo_kl`` of the run: mean over the step's batch of
  log pi_behaviour - log pi_current before the update (an estimate of KL(behaviour || current) on the
  behaviour's samples), i.e. how far the trained policy got from the policy whose data it trains on. Only when
  pi_old is the behaviour policy (``bypass_mode=true``, every preset but ``offpolicy_grpo``); None otherwise.

Across seeds (:func:`aggregate`): mean and sample standard deviation (n - 1; None with one seed) of
``final_reward``, ``peak_reward``, ``kl_to_initial`` and ``max_kl_to_behaviour``; ``steps_to_target`` as the mean over the seeds
that reached the target, with how many did.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from verl_ext import metric_names
from verl_ext.metrics_file import trained_steps
from verl_ext.plotting import running_average

REWARD_METRIC = metric_names.SCORE_MEAN
KL_METRIC = metric_names.KL_LOSS
BEHAVIOUR_KL_METRIC = metric_names.PPO_KL
LAG_METRIC = metric_names.LAG
TASK_MAX_REWARD = 1.0  # verl_ext.tiny.task.count_reward is in [0, 1]
DEFAULT_TARGET = 0.9
SMOOTHING_WINDOW = 5
FINAL_FRACTION = 0.1


def final_window(length: int) -> int:
    """How many last steps make "the last 10%": ceil(10% of length), at least 1 (0 for no steps)."""
    return 0 if length == 0 else max(1, math.ceil(FINAL_FRACTION * length - 1e-9))


def smoothed(values: Sequence[float], window: int = SMOOTHING_WINDOW) -> list[float]:
    """Trailing mean over ``window`` steps (:func:`verl_ext.plotting.running_average`, the curves of ``verl-ext plot``)."""
    return running_average(values, window)


@dataclass
class RunSummary:
    """The lab's figures for one run (see the module docstring for the definitions)."""

    steps: list[int]
    reward: list[float]  # fraction of the task's maximum, per step
    kl_to_initial_curve: list[Optional[float]]
    lag: list[Optional[float]]
    final_reward: Optional[float]
    steps_to_target: Optional[int]
    peak_reward: Optional[float]
    kl_to_initial: Optional[float]
    max_lag: Optional[float]
    kl_to_behaviour_curve: list[Optional[float]] = field(default_factory=list)
    max_kl_to_behaviour: Optional[float] = None


def summarize_run(
    steps: Sequence[dict[str, Any]],
    target: float = DEFAULT_TARGET,
    max_reward: float = TASK_MAX_REWARD,
    window: int = SMOOTHING_WINDOW,
    pi_old_is_behaviour: bool = True,
) -> RunSummary:
    """Figures of one run from its logged steps; a run that logged no reward gets None everywhere.
    ``pi_old_is_behaviour``: whether the run's ``actor/ppo_kl`` is against the behaviour policy (bypass_mode)."""
    if not max_reward > 0:
        raise ValueError(f"max_reward must be > 0, got {max_reward}")
    rows = [row for row in trained_steps(steps) if REWARD_METRIC in row]
    reward = [float(row[REWARD_METRIC]) / max_reward for row in rows]
    kl = [float(row[KL_METRIC]) if KL_METRIC in row else None for row in rows]
    lag = [float(row[LAG_METRIC]) if LAG_METRIC in row else None for row in rows]
    to_behaviour = [float(row[BEHAVIOUR_KL_METRIC]) if pi_old_is_behaviour and BEHAVIOUR_KL_METRIC in row else None for row in rows]
    if not rows:
        return RunSummary([], [], [], [], None, None, None, None, None)
    first = min(window, len(rows)) - 1  # index of the first full window (or the last step of a short run)
    curve = smoothed(reward, window)[first:]
    tail = final_window(len(rows))
    reached = next((row["step"] for row, value in zip(rows[first:], curve) if value >= target), None)
    final_kl = [value for value in kl[-tail:] if value is not None]
    lags = [value for value in lag if value is not None]
    behaviour_kls = [value for value in to_behaviour if value is not None]
    return RunSummary(
        steps=[int(row["step"]) for row in rows],
        reward=reward,
        kl_to_initial_curve=kl,
        lag=lag,
        final_reward=statistics.fmean(reward[-tail:]),
        steps_to_target=None if reached is None else int(reached),
        peak_reward=max(curve),
        kl_to_initial=statistics.fmean(final_kl) if final_kl else None,
        max_lag=max(lags) if lags else None,
        kl_to_behaviour_curve=to_behaviour,
        max_kl_to_behaviour=max(behaviour_kls) if behaviour_kls else None,
    )


@dataclass(frozen=True)
class Spread:
    """Mean and sample standard deviation over seeds (std None for one value; both None for none)."""

    mean: Optional[float]
    std: Optional[float]
    count: int

    @classmethod
    def of(cls, values: Sequence[Optional[float]]) -> "Spread":
        present = [value for value in values if value is not None]
        if not present:
            return cls(None, None, 0)
        return cls(statistics.fmean(present), statistics.stdev(present) if len(present) > 1 else None, len(present))

    def format(self, digits: int = 2) -> str:
        if self.mean is None:
            return "-"
        if self.std is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"


@dataclass
class GroupSummary:
    """One algorithm in one setting (and learning rate), over its seeds."""

    setting: str
    algorithm: str
    learning_rate: float
    seeds: list[int]
    failed_seeds: list[int]
    final_reward: Spread
    peak_reward: Spread
    kl_to_initial: Spread
    steps_to_target: Spread  # over the seeds that reached the target
    reached: int  # how many seeds reached the target
    summaries: list[RunSummary] = field(default_factory=list)
    max_kl_to_behaviour: Spread = field(default_factory=lambda: Spread(None, None, 0))

    def steps_to_target_text(self) -> str:
        seeds = len(self.seeds) - len(self.failed_seeds)
        if self.reached == 0:
            return "never" if seeds else "-"
        mean = self.steps_to_target.format(0) if self.reached > 1 else f"{self.steps_to_target.mean:.0f}"
        return mean if self.reached == seeds == 1 else f"{mean} ({self.reached}/{seeds})"


def aggregate(records: Sequence[dict[str, Any]]) -> list[GroupSummary]:
    """Group run records (see :func:`verl_ext.lab.report.run_record`) by (setting, algorithm, learning rate),
    in the order the groups first appear; each record carries its RunSummary under ``"summary"`` (None
    when the run failed)."""
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["setting"], record["algorithm"], record["learning_rate"]), []).append(record)
    out = []
    for (setting, algorithm, learning_rate), members in groups.items():
        done = [member for member in members if member.get("summary") is not None and member["summary"].steps]
        summaries = [member["summary"] for member in done]
        reached = [summary.steps_to_target for summary in summaries if summary.steps_to_target is not None]
        out.append(
            GroupSummary(
                setting=setting,
                algorithm=algorithm,
                learning_rate=learning_rate,
                seeds=[member["seed"] for member in members],
                failed_seeds=[member["seed"] for member in members if member not in done],
                final_reward=Spread.of([summary.final_reward for summary in summaries]),
                peak_reward=Spread.of([summary.peak_reward for summary in summaries]),
                kl_to_initial=Spread.of([summary.kl_to_initial for summary in summaries]),
                steps_to_target=Spread.of([float(value) for value in reached]),
                reached=len(reached),
                summaries=summaries,
                max_kl_to_behaviour=Spread.of([summary.max_kl_to_behaviour for summary in summaries]),
            )
        )
    return out
