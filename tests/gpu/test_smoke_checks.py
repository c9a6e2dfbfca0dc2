"""The GPU smoke command's summary and checks, on CPU: run on the metrics verl's file logger wrote in a real
delayed_sync (3, 1) run of the CPU backend (tests/fixtures/gpu_smoke/README.md), the expectation taken from
the schedule; every altered copy fails exactly the check it should. Without a GPU the command stops at once."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.metrics_file import read_metrics_file
from verl_ext.gpu import smoke
from verl_ext.gpu.smoke_checks import BF16_LAG0_TOLERANCE, FLOAT32_LAG0_TOLERANCE, summarize_smoke
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.gpu.device import gpu_unavailable_reason

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "gpu_smoke" / "cpu_backend_delayed_sync_3_1.jsonl"
SCHEDULE, STEPS = StalenessSchedule(sync_interval=3, sync_offset=1), 10


def failed_checks(steps, schedule=SCHEDULE, tolerance=FLOAT32_LAG0_TOLERANCE):
    return {check.name for check in summarize_smoke(steps, schedule, STEPS, tolerance).checks if not check.ok}


def test_a_real_delayed_sync_run_passes_every_check():
    summary = summarize_smoke(read_metrics_file(RUN).steps, SCHEDULE, STEPS, FLOAT32_LAG0_TOLERANCE)
    assert summary.ok, [check for check in summary.checks if not check.ok]
    assert summary.lags == summary.scheduled_lags == [row.lag for row in SCHEDULE.preview(STEPS)]
    assert summary.pushes_after_steps == [row.step for row in SCHEDULE.preview(STEPS) if row.synced]
    assert summary.weight_pushes == 1 + SCHEDULE.sync_count(STEPS)
    assert len(summary.lag0_gaps) == sum(row.lag == 0 for row in SCHEDULE.preview(STEPS))
    assert abs(summary.max_lag_gap) > max(abs(gap) for gap in summary.lag0_gaps)  # staleness shows in the gap
    assert summary.seconds_per_step > 0 and 0 <= summary.reward_start <= 1


def test_checked_against_another_schedule_the_same_run_fails():
    assert {"lags = schedule", "behaviour versions = schedule", "syncs after the schedule's steps"} <= failed_checks(
        read_metrics_file(RUN).steps, StalenessSchedule(sync_interval=3, sync_offset=0))


def _altered(step: int, key: str, value):
    steps = read_metrics_file(RUN).steps
    steps[step][key] = value
    return steps


@pytest.mark.parametrize(
    "steps, failing",
    [
        (lambda: read_metrics_file(RUN).steps[:-1], {"steps logged", "weight syncs counted", "weight pushes = start-up + syncs",
                                              "lags = schedule", "behaviour versions = schedule",
                                              "syncs after the schedule's steps", "reward in [0, 1] at every step",
                                              "finite positive gradient at every step"}),
        (lambda: _altered(4, "staleness/lag", 0.0), {"lags = schedule"}),
        (lambda: _altered(4, "staleness/behaviour_version", 4.0), {"behaviour versions = schedule"}),
        (lambda: _altered(2, "staleness/synced", 1.0), {"syncs after the schedule's steps"}),
        (lambda: _altered(9, "staleness/weight_pushes", 5.0), {"weight pushes = start-up + syncs"}),
        (lambda: _altered(9, "staleness/weight_syncs", 2.0), {"weight syncs counted"}),
        (lambda: _altered(0, "staleness/behaviour_minus_current_log_prob", 0.01), {"rollout vs actor log-probs at lag 0"}),
        (lambda: _altered(3, "critic/score/mean", math.nan), {"reward in [0, 1] at every step"}),
        (lambda: _altered(5, "actor/grad_norm", 0.0), {"finite positive gradient at every step"}),
    ],
    ids=["step-missing", "lag", "version", "sync", "pushes", "syncs", "lag0-gap", "reward", "gradient"],
)
def test_each_alteration_fails_its_check(steps, failing):
    assert failed_checks(steps()) == failing


def test_the_bf16_tolerance_admits_a_bf16_sized_gap_and_not_a_policy_update():
    assert not failed_checks(_altered(0, "staleness/behaviour_minus_current_log_prob", BF16_LAG0_TOLERANCE / 2), tolerance=BF16_LAG0_TOLERANCE)
    assert failed_checks(_altered(0, "staleness/behaviour_minus_current_log_prob", -2 * BF16_LAG0_TOLERANCE),
                         tolerance=BF16_LAG0_TOLERANCE) == {"rollout vs actor log-probs at lag 0"}


def test_the_command_checks_a_metrics_file_and_exits_1_on_a_failed_check(tmp_path, capsys):
    assert smoke.main(["--metrics", str(RUN), "--backend", "cpu"]) == 0
    assert "smoke: all checks passed" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    records = [json.loads(line) for line in RUN.read_text().splitlines()]
    records[4]["data"]["staleness/lag"] = 7.0
    bad.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert smoke.main(["--metrics", str(bad), "--backend", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] lags = schedule" in out and "smoke: 1 check(s) FAILED" in out


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="this machine has a CUDA GPU and vLLM")
def test_without_a_gpu_the_command_stops_at_once_saying_why(tmp_path, capsys, monkeypatch):
    # at once: before the smoke run (assets, Ray, main_ppo), whatever the machine's load
    monkeypatch.setattr(smoke, "run_smoke", lambda *args, **kwargs: pytest.fail("the smoke run was started"))
    assert smoke.main(["--out", str(tmp_path / "out")]) == 2
    assert "needs a CUDA GPU and vLLM: no CUDA GPU is visible" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    result = subprocess.run(["bash", str(REPO / "run_scripts" / "gpu" / "smoke.sh")], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 2 and "Nothing was started" in result.stderr
