"""The GPU plan's checks (verl_ext/gpu/plan_checks.py), on CPU: on the metrics of the plan's two runs rehearsed
on the CPU backend (tests/fixtures/gpu_plan/README.md), the expectation taken from the schedule, every check passes;
each altered copy fails exactly the check it should."""

import json
from pathlib import Path

import pytest

from verl_ext.gpu import plan
from verl_ext.gpu.plan_checks import main_run_checks, resumed_run_checks
from verl_ext.gpu.smoke_checks import FLOAT32_LAG0_TOLERANCE
from verl_ext.metrics_file import read_metrics_file
from verl_ext.staleness.schedule import StalenessSchedule

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_plan"
SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
SAVED = json.loads((FIXTURES / "saved_checkpoints.json").read_text())


def main_steps():
    return read_metrics_file(FIXTURES / "plan_main.jsonl").steps


def resumed_steps():
    return read_metrics_file(FIXTURES / "plan_resumed.jsonl").steps


def failed_main(steps, saved=SAVED):
    checks = main_run_checks(steps, SCHEDULE, plan.SCHEDULE_STEPS, plan.SAVE_FREQ, plan.TEST_FREQ, saved,
                             FLOAT32_LAG0_TOLERANCE, plan.MAIN_LOSS)
    return {check.name for check in checks if not check.ok}


def failed_resumed(resumed, main=None):
    checks = resumed_run_checks(resumed, main or main_steps(), plan.RESUME_AT, plan.SCHEDULE_STEPS, plan.RESUMED_LOSS)
    return {check.name for check in checks if not check.ok}


def test_the_rehearsed_runs_pass_every_check():
    assert failed_main(main_steps()) == set()
    assert failed_resumed(resumed_steps()) == set()
    assert len(main_run_checks(main_steps(), SCHEDULE, 7, 2, 3, SAVED, FLOAT32_LAG0_TOLERANCE, "rec_oneside_nois")) == 14


def _altered(steps, global_step: int, key: str, value):
    record = next(record for record in steps if record["step"] == global_step and key in record)
    if value is None:
        del record[key]
    else:
        record[key] = value
    return steps


@pytest.mark.parametrize("alter, failing", [
    (lambda s: _altered(s, 3, "staleness/lag", 0.0), {"lags = schedule"}),
    (lambda s: _altered(s, 4, "staleness/weight_pushes", 9.0), {"weight pushes = start-up + syncs + validations"}),
    (lambda s: _altered(s, 2, "staleness/zero_variance_groups_removed", 0.0),
     {"zero-variance masking removed the constant groups at every step"}),
    (lambda s: _altered(s, 5, "staleness/behaviour_minus_current_log_prob_forward_pass", 0.5),
     {"mismatch in the update = the separate forward pass"}),
    (lambda s: _altered(s, 6, "actor/grad_norm", float("nan")), {"finite positive gradient at every step that updated"}),
    (lambda s: [{key: value for key, value in record.items() if not key.startswith("val-core/")} if record["step"] == 6
                else record for record in s], {"validation at its steps, scores in [0, 1]"}),
])
def test_each_alteration_of_the_main_run_fails_its_check(alter, failing):
    assert failed_main(alter(main_steps())) == failing


def test_a_missing_mid_interval_checkpoint_fails_its_check():
    assert failed_main(main_steps(), saved=[2, 6, 7]) == {"checkpoints saved, one mid-interval"}


@pytest.mark.parametrize("alter, failing", [
    (lambda s: _altered(s, 7, "staleness/behaviour_version", 2.0), {"staleness/behaviour_version = the uninterrupted run's"}),
    (lambda s: _altered(s, 5, "timing_s/old_log_prob", 100.0) and _altered(s, 6, "timing_s/old_log_prob", 100.0)
     and _altered(s, 7, "timing_s/old_log_prob", 100.0), {"mismatch taken in the update: no forward pass of its own"}),
    (lambda s: [record for record in s if record["step"] != 7], {
        "resumed at the checkpoint, every later step logged", "staleness/lag = the uninterrupted run's",
        "staleness/behaviour_version = the uninterrupted run's", "staleness/synced = the uninterrupted run's",
        "staleness/weight_syncs = the uninterrupted run's"}),
    (lambda s: _altered(s, 6, "staleness/behaviour_minus_current_log_prob", None),
     {"mismatch taken in the update: no forward pass of its own"}),
])
def test_each_alteration_of_the_resumed_run_fails_its_check(alter, failing):
    assert failed_resumed(alter(resumed_steps())) == failing


def test_the_resumed_run_is_checked_for_its_own_loss():
    """Checked as if it had trained the main run's loss, it lacks that loss's metrics (each family names its own)."""
    checks = resumed_run_checks(resumed_steps(), main_steps(), plan.RESUME_AT, plan.SCHEDULE_STEPS, "rec_oneside_nois")
    assert {check.name for check in checks if not check.ok} == {"rec_oneside_nois's own metrics logged"}
