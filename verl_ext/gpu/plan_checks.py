"""The GPU plan's checks: pure functions over the metrics verl's file logger wrote in the plan's two runs.

The main run (:data:`verl_ext.gpu.plan.MAIN`) carries what the seven runs of ``tests/gpu`` checked apart:
``delayed_sync`` (3, 1) with a resident engine and ``overlap``, REC-OneSide-NoIS, checkpoints every 2 steps (step 4
is mid-interval), validation every 3 steps, zero-variance masking (the counting reward with every odd "count n"
prompt scored the same: :func:`verl_ext.tiny.task.compute_score_odd_constant`), and the log-prob mismatch both
ways (in the update, and a separate forward pass). The resumed run (:data:`verl_ext.gpu.plan.RESUMED`) resumes it
from ``global_step_4`` with a second loss family (OPMD; a checkpoint holds weights, optimizer and data position,
not the loss). The expectation comes from :class:`StalenessSchedule`, never a hand-written number.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

from verl_ext import metric_names
from verl_ext.algorithms.registry import loss_metric_names
from verl_ext.metrics_file import trained_steps
from verl_ext.gpu.smoke_checks import Check, values_by_step, summarize_smoke
from verl_ext.staleness.schedule import StalenessSchedule

# the smoke checks that hold as they are for a run with validation and masking (its pushes and gradients do not)
SMOKE_CHECKS_KEPT = ("steps logged", "lags = schedule", "behaviour versions = schedule",
                     "syncs after the schedule's steps", "weight syncs counted", "rollout vs actor log-probs at lag 0",
                     "reward in [0, 1] at every step")
REMOVED_FRACTION = metric_names.ZERO_VARIANCE_GROUPS_REMOVED_FRACTION
# the old_log_prob phase of a step without a separate forward pass: copying the rollout's log-probs
OLD_LOG_PROB_SHARE = 0.15


def expected_pushes(schedule: StalenessSchedule, steps: int, test_freq: int) -> dict[int, int]:
    """``staleness/weight_pushes`` logged at each 0-based step: the start-up push, one per sync point so far, and
    one per earlier validation that followed a step without a sync (validation evaluates the current weights,
    which the engine holds only right after a sync). The logged value is taken before the step's own validation."""
    pushes, expected = 1, {}
    for step in range(steps):
        pushes += schedule.synced_after(step)
        expected[step] = pushes
        global_step = step + 1
        validates = test_freq > 0 and (global_step % test_freq == 0 or global_step == steps)
        if validates and not schedule.synced_after(step):
            pushes += 1
    return expected


def validated_steps(steps: list[dict]) -> list[int]:
    """Global steps whose record holds validation metrics (``val-core/...``)."""
    return sorted(int(record["step"]) for record in steps if any(key.startswith("val-core/") for key in record))


def _updated(trained: list[dict]) -> dict[int, bool]:
    """0-based step -> whether it updated the actor (zero-variance masking left a group)."""
    fractions = values_by_step(trained, REMOVED_FRACTION)
    return {int(record["step"]) - 1: fractions.get(int(record["step"]) - 1, 0.0) < 1 for record in trained}


def _gradient_checks(trained: list[dict], loss_mode: str) -> list[Check]:
    updated = _updated(trained)
    norms = values_by_step(trained, metric_names.GRAD_NORM)
    good = all(math.isfinite(norms.get(step, math.nan)) and norms[step] > 0 for step, did in updated.items() if did)
    checks = [Check("finite positive gradient at every step that updated",
                    good and {step for step, did in updated.items() if did} == set(norms),
                    f"{metric_names.GRAD_NORM} {[None if s not in norms else round(norms[s], 4) for s in sorted(updated)]}")]
    expected = loss_metric_names(loss_mode)
    missing = expected - set().union(*(record for record in trained if metric_names.GRAD_NORM in record))
    checks.append(Check(f"{loss_mode}'s own metrics logged", not missing, f"missing {sorted(missing)}" if missing else
                        f"{len(expected)} metrics"))
    return checks


def main_run_checks(steps: list[dict], schedule: StalenessSchedule, total_steps: int, save_freq: int, test_freq: int,
                    saved_steps: Iterable[int], lag0_tolerance: float, loss_mode: str) -> list[Check]:
    """The main run's checks (module docstring); ``saved_steps``: the global steps of the checkpoints on disk."""
    smoke = summarize_smoke(steps, schedule, total_steps, lag0_tolerance)
    checks = [check for check in smoke.checks if check.name in SMOKE_CHECKS_KEPT]
    trained = trained_steps(steps)
    pushes = {step: int(value) for step, value in values_by_step(trained, metric_names.WEIGHT_PUSHES).items()}
    wanted = expected_pushes(schedule, total_steps, test_freq)
    checks.append(Check("weight pushes = start-up + syncs + validations", pushes == wanted,
                        f"logged {[pushes.get(s) for s in range(total_steps)]}, expected {[wanted[s] for s in range(total_steps)]}"))
    checks += _gradient_checks(trained, loss_mode)
    saved = sorted(saved_steps)
    expected_saves = sorted({*range(save_freq, total_steps + 1, save_freq), total_steps})
    checks.append(Check("checkpoints saved, one mid-interval", saved == expected_saves and any(
        not schedule.synced_after(step - 1) for step in saved), f"global steps {saved}, expected {expected_saves}"))
    validated = validated_steps(steps)
    expected_validations = sorted({*range(test_freq, total_steps + 1, test_freq), total_steps})
    scores = [value for record in steps for key, value in record.items() if key.startswith("val-core/")]
    checks.append(Check("validation at its steps, scores in [0, 1]",
                        validated == expected_validations and bool(scores) and all(0 <= v <= 1 for v in scores),
                        f"validated at {validated}, expected {expected_validations}"))
    removed = values_by_step(trained, metric_names.ZERO_VARIANCE_GROUPS_REMOVED)
    checks.append(Check("zero-variance masking removed the constant groups at every step",
                        set(removed) == set(range(total_steps)) and all(value >= 1 for value in removed.values()),
                        f"groups removed per step {[int(removed[s]) if s in removed else None for s in range(total_steps)]}"))
    checks.append(_mismatch_both_ways(trained, lag0_tolerance))
    return checks


def _mismatch_both_ways(trained: list[dict], tolerance: float) -> Check:
    update = values_by_step(trained, metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB)
    forward = values_by_step(trained, metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB_FORWARD_PASS)
    steps = sorted(set(update) & set(forward))
    differences = [update[step] - forward[step] for step in steps]
    return Check("mismatch in the update = the separate forward pass",
                 bool(steps) and len(steps) == len(_updated(trained)) and all(abs(d) <= tolerance for d in differences),
                 f"largest difference {max((abs(d) for d in differences), default=math.nan):.1e} over {len(steps)} steps "
                 f"(tolerance {tolerance:g})")


def resumed_run_checks(resumed: list[dict], main: list[dict], resume_at: int, total_steps: int,
                       loss_mode: str) -> list[Check]:
    """The resumed run against the main run: the same schedule's metrics from the checkpoint's step on, its own loss
    trained, and no separate forward pass for the mismatch metric."""
    trained, main_trained = trained_steps(resumed), trained_steps(main)
    logged = sorted(int(record["step"]) - 1 for record in trained)
    checks = [Check("resumed at the checkpoint, every later step logged", logged == list(range(resume_at, total_steps)),
                    f"0-based steps {logged}, expected {list(range(resume_at, total_steps))}")]
    for name in (metric_names.LAG, metric_names.BEHAVIOUR_VERSION, metric_names.SYNCED, metric_names.WEIGHT_SYNCS):
        mine = values_by_step(trained, name)
        theirs = {step: value for step, value in values_by_step(main_trained, name).items() if step >= resume_at}
        checks.append(Check(f"{name} = the uninterrupted run's", mine == theirs, f"resumed {mine}, uninterrupted {theirs}"))
    checks += _gradient_checks(trained, loss_mode)
    old, update = (values_by_step(trained, metric_names.timing(phase)) for phase in ("old_log_prob", "update_actor"))
    shares = sorted(old[step] / update[step] for step in old if update.get(step))
    median: Optional[float] = shares[len(shares) // 2] if shares else None
    gaps = values_by_step(trained, metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB)
    checks.append(Check("mismatch taken in the update: no forward pass of its own",
                        median is not None and median < OLD_LOG_PROB_SHARE and set(gaps) == set(_updated(trained)),
                        f"timing_s/old_log_prob / timing_s/update_actor median {median if median is None else round(median, 3)} "
                        f"(< {OLD_LOG_PROB_SHARE}); metric logged at {len(gaps)} steps"))
    return checks
