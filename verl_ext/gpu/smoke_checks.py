"""The smoke run's summary and checks: pure functions over the metrics verl's file logger wrote.

A ``delayed_sync`` run logs, per step, the staleness of the batch it trained on and the weight pushes so
far (:mod:`verl_ext.staleness.trainer`); the checks compare them with :class:`StalenessSchedule` -- the
schedule is the expectation, no number is written here by hand -- and bound the numerics:

- every step logged, with a finite, positive gradient norm and a reward in [0, 1] (the counting task);
- ``staleness/lag`` and ``staleness/behaviour_version`` equal the schedule's at every step;
- ``staleness/synced`` is 1 exactly after the schedule's sync points; ``staleness/weight_syncs`` counts
  them; ``staleness/weight_pushes`` is the start-up push plus one per sync point (no validation here);
- at lag 0 the rollout's log-probs and the actor's agree: ``|staleness/behaviour_minus_current_log_prob|``
  (mean over tokens of log pi_rollout - log pi_actor, same weights) within a tolerance -- 1e-3 for the CPU
  backend (float32 on both sides), :data:`BF16_LAG0_TOLERANCE` for vLLM in bf16 against the FSDP actor.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from verl_ext import metric_names
from verl_ext.metrics_file import trained_steps
from verl_ext.staleness.schedule import StalenessSchedule

# Mean per-token log-prob gap between vLLM (bf16 weights and compute) and the FSDP actor (bf16 compute,
# float32 master weights) on the same weights. bf16 keeps 8 bits of mantissa: logits of order 1-10 carry
# errors of ~1e-2 per token, which mostly cancel in the mean over tokens; 0.02 nats/token is a few times
# that and far below the gap one policy update makes at the smoke run's learning rate.
BF16_LAG0_TOLERANCE = 0.02
FLOAT32_LAG0_TOLERANCE = 1e-3

LAG, VERSION = metric_names.LAG, metric_names.BEHAVIOUR_VERSION
SYNCED, SYNCS, PUSHES = metric_names.SYNCED, metric_names.WEIGHT_SYNCS, metric_names.WEIGHT_PUSHES
GAP, REWARD = metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB, metric_names.SCORE_MEAN
GRAD_NORM, STEP_TIME = metric_names.GRAD_NORM, metric_names.STEP_SECONDS
# What the summary reads (a metrics file cut down to these keys still checks the same).
METRICS_READ = (metric_names.GLOBAL_STEP, LAG, VERSION, SYNCED, SYNCS, PUSHES, GAP, REWARD, GRAD_NORM, STEP_TIME)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class SmokeSummary:
    steps: int
    lags: list[int]
    scheduled_lags: list[int]
    pushes_after_steps: list[int]  # 0-based steps after which the weights were synced, as logged
    scheduled_pushes_after_steps: list[int]
    weight_pushes: Optional[int]
    lag0_gaps: list[float]
    max_lag_gap: Optional[float]
    reward_start: float
    reward_end: float
    first_step_seconds: float
    seconds_per_step: float
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class SmokeMetricsError(ValueError):
    """A logged value the summary cannot read (names the step and the metric): a counter of the schedule that is
    not a whole number, a measurement that is not a number."""


# counted by the trainer: whole numbers, or the file is not a delayed_sync run's
COUNTERS = (LAG, VERSION, SYNCED, SYNCS, PUSHES)


def _value(record: dict, name: str) -> float:
    """``record[name]`` as the summary reads it: a counter must be a whole number; a measurement a number, or null
    (verl's file logger writes NaN as null; a NaN fails its check, it is not an unreadable file)."""
    value = record[name]
    whole = name in COUNTERS
    if value is None and not whole:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise SmokeMetricsError(f"step {record['step']}: {name} = {shown} is not a number")
    if whole and not (math.isfinite(value) and float(value).is_integer()):
        raise SmokeMetricsError(f"step {record['step']}: {name} = {value!r} is not a whole number (a count of the "
                                "delayed_sync trainer)")
    return float(value)


def values_by_step(steps: list[dict], name: str) -> dict[int, float]:
    """``{0-based step: value}`` (verl logs global_steps = step + 1), each value checked (:func:`_value`)."""
    return {int(record["step"]) - 1: _value(record, name) for record in steps if name in record}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def summarize_smoke(
    steps: list[dict], schedule: StalenessSchedule, total_steps: int, lag0_tolerance: float = BF16_LAG0_TOLERANCE
) -> SmokeSummary:
    """The summary of a ``delayed_sync`` run of ``total_steps`` steps and its checks against ``schedule``."""
    trained = trained_steps(steps)
    expected = schedule.preview(total_steps)
    lags, versions, synced = values_by_step(trained, LAG), values_by_step(trained, VERSION), values_by_step(trained, SYNCED)
    gaps, rewards, norms = values_by_step(trained, GAP), values_by_step(trained, REWARD), values_by_step(trained, GRAD_NORM)
    step_times = [time for _, time in sorted(values_by_step(trained, STEP_TIME).items())]
    syncs, pushes = values_by_step(trained, SYNCS), values_by_step(trained, PUSHES)
    logged = sorted(int(record["step"]) - 1 for record in trained)
    last = total_steps - 1

    checks = [
        Check("steps logged", logged == list(range(total_steps)), f"{len(logged)} of {total_steps} (steps {logged[:1]}..{logged[-1:]})"),
        Check(
            "lags = schedule",
            {step: int(value) for step, value in lags.items()} == {row.step: row.lag for row in expected},
            f"logged {[int(lags[s]) if s in lags else None for s in range(total_steps)]}, schedule {[row.lag for row in expected]}",
        ),
        Check(
            "behaviour versions = schedule",
            {step: int(value) for step, value in versions.items()} == {row.step: row.behaviour_version for row in expected},
            f"logged {[int(versions[s]) if s in versions else None for s in range(total_steps)]}, "
            f"schedule {[row.behaviour_version for row in expected]}",
        ),
        Check(
            "syncs after the schedule's steps",
            sorted(step for step, value in synced.items() if value) == [row.step for row in expected if row.synced]
            and set(synced) == set(range(total_steps)),
            f"logged after steps {sorted(step for step, value in synced.items() if value)}, "
            f"schedule {[row.step for row in expected if row.synced]}",
        ),
        Check(
            "weight syncs counted",
            syncs.get(last) == schedule.sync_count(total_steps),
            f"{SYNCS} {syncs.get(last)} at the last step, schedule {schedule.sync_count(total_steps)}",
        ),
        Check(
            "weight pushes = start-up + syncs",
            pushes.get(last) == 1 + schedule.sync_count(total_steps),
            f"{PUSHES} {pushes.get(last)} at the last step, expected {1 + schedule.sync_count(total_steps)}",
        ),
    ]
    lag0 = [gaps[row.step] for row in expected if row.lag == 0 and row.step in gaps]
    checks.append(Check(
        "rollout vs actor log-probs at lag 0",
        bool(lag0) and all(abs(gap) <= lag0_tolerance for gap in lag0),
        f"mean gap {', '.join(f'{gap:+.2e}' for gap in lag0) or 'not logged'} (tolerance {lag0_tolerance:g} nats/token)",
    ))
    reward_values = [rewards.get(step) for step in range(total_steps)]
    checks.append(Check(
        "reward in [0, 1] at every step",
        all(value is not None and 0.0 <= value <= 1.0 for value in reward_values),
        f"{REWARD} {min((v for v in reward_values if v is not None), default=math.nan):.3f}.."
        f"{max((v for v in reward_values if v is not None), default=math.nan):.3f}",
    ))
    norm_values = [norms.get(step) for step in range(total_steps)]
    checks.append(Check(
        "finite positive gradient at every step",
        all(value is not None and math.isfinite(value) and value > 0 for value in norm_values),
        f"{GRAD_NORM} {[None if v is None else round(v, 4) for v in norm_values]}",
    ))

    reward_list = [value for value in reward_values if value is not None]
    window = max(1, len(reward_list) // 5)
    max_lag_step = max(expected, key=lambda row: row.lag).step if expected else None
    return SmokeSummary(
        steps=len(logged),
        lags=[int(lags[step]) for step in sorted(lags)],
        scheduled_lags=[row.lag for row in expected],
        pushes_after_steps=sorted(step for step, value in synced.items() if value),
        scheduled_pushes_after_steps=[row.step for row in expected if row.synced],
        weight_pushes=None if last not in pushes else int(pushes[last]),
        lag0_gaps=lag0,
        max_lag_gap=gaps.get(max_lag_step) if max_lag_step is not None else None,
        reward_start=_mean(reward_list[:window]),
        reward_end=_mean(reward_list[-window:]),
        first_step_seconds=step_times[0] if step_times else math.nan,
        seconds_per_step=_mean(step_times[1:] or step_times),
        checks=checks,
    )


def format_smoke(summary: SmokeSummary, title: str, extra: Optional[dict[str, str]] = None) -> str:
    """The summary as the smoke command prints it: figures, then one line per check."""
    lines = ["", "=" * 78, title, "=" * 78]
    rows = dict(extra or {})
    rows.update({
        "steps": str(summary.steps),
        "s per step": f"{summary.seconds_per_step:.2f} s after the first (first step {summary.first_step_seconds:.1f} s)",
        "lags": f"{' '.join(map(str, summary.lags))}   (schedule {' '.join(map(str, summary.scheduled_lags))})",
        "weight syncs after": f"steps {summary.pushes_after_steps}   (schedule {summary.scheduled_pushes_after_steps}); "
                              f"{summary.weight_pushes} pushes in all, start-up included",
        "log-prob gap, lag 0": ", ".join(f"{gap:+.2e}" for gap in summary.lag0_gaps) + " nats/token (rollout - actor)",
        "log-prob gap, max lag": "not logged" if summary.max_lag_gap is None else f"{summary.max_lag_gap:+.2e} nats/token",
        "reward": f"{summary.reward_start:.3f} -> {summary.reward_end:.3f}   (mean of the first / last fifth)",
    })
    lines += [f"  {name:<22} {value}" for name, value in rows.items()]
    lines.append("  checks")
    lines += [f"    [{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}" for check in summary.checks]
    lines.append("=" * 78)
    lines.append("smoke: all checks passed" if summary.ok else
                 f"smoke: {sum(not check.ok for check in summary.checks)} check(s) FAILED")
    return "\n".join(lines)
