"""The run monitor measures a child process tree's peak memory and when metric records appear."""

import sys
import textwrap

from verl_ext.cpu.run_monitor import run_and_measure

CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", "b = b'x' * (300 * 2**20); import time; time.sleep(2.5)"])
    time.sleep(1.0)
    with open(sys.argv[1], "a") as f:
        f.write('{"step": 1, "data": {}}\\n')
    time.sleep(1.0)
    with open(sys.argv[1], "a") as f:
        f.write('{"step": 2, "data": {}}\\n')
    grandchild.wait()
    print("done")
    """
)


def test_measures_descendants_and_record_times(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    measured = run_and_measure(
        [sys.executable, "-c", CHILD, str(metrics)], env=None, log_path=tmp_path / "log.txt", metrics_path=metrics
    )
    assert measured.returncode == 0
    assert (tmp_path / "log.txt").read_text().strip() == "done"
    assert measured.peak_rss_bytes > 300 * 2**20  # the grandchild's allocation is counted
    assert measured.peak_pss_bytes > 250 * 2**20
    assert 0 < measured.cpu_seconds < measured.wall_seconds * 2
    assert 0.5 < measured.first_record_seconds < measured.last_record_seconds < measured.wall_seconds
    assert measured.startup_seconds(0.25) == measured.first_record_seconds - 0.25
    assert 0 < measured.teardown_seconds < measured.wall_seconds


def test_a_failing_command_reports_its_status(tmp_path):
    measured = run_and_measure([sys.executable, "-c", "raise SystemExit(3)"], env=None, log_path=tmp_path / "log")
    assert measured.returncode == 3 and measured.first_record_seconds is None and measured.teardown_seconds is None
