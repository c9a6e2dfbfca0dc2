"""``verl-ext lab`` end to end: a tiny run of verl's real ``main_ppo`` on the CPU backend through the lab's command.

RED-Drop (its estimator drops excess negatives, plain REINFORCE as the loss), 4 steps under sync_interval=2 (lags
0, 1, 0, 1). Evidence comes from what verl logged (its file logger) and what the lab printed (table and the JSON
last line), not from exit codes: the estimator and the loss that ran are ours (RED-Drop's dropped fraction and
REINFORCE's metrics are logged, no clip fraction), the schedule is delayed_sync's, the KL to the initial policy is
measured, and the JSON agrees with the logged rewards. This is also the suite's RED-Drop run (tests/cpu/
test_e2e_main_ppo.py runs the other families); how the lab runs several runs in one Ray start-up is
tests/lab/test_runner.py's and test_cli.py's.
"""

import json

import pytest

# the extended tier (CI's second session, `pytest -m extended`): the README's command stays within its 20 minutes
# (docs/testing.md); the lab's commands without a real run are tests/lab/test_cli.py's and test_runner.py's
pytestmark = [pytest.mark.e2e, pytest.mark.extended]
BACKGROUND_MINUTES = 3  # how long background_runs took (two cores, under the suite's load): the queue's order
BACKGROUND_PEAK_GIB = 5  # the memory its runs take at their peak (PSS), for the queue's pairing

STEPS = 4
ALGORITHM = "red_drop"
RUN = f"{ALGORITHM}-lr0.001-sync_interval_2-T{STEPS}-seed0"  # the lab's run name


def background_runs(root):
    """The lab's command, in a child process while the rest of the suite runs (tests/background_runs.py)."""
    import contextlib
    import io

    from verl_ext.lab.cli import lab_main
    from verl_ext.tiny.assets import build_tiny_assets

    out, assets = root / "lab_e2e", root / "assets"
    build_tiny_assets(assets)
    stdout = io.StringIO()
    argv = ["--algorithms", ALGORITHM, "--sync-interval", "2", "--steps", str(STEPS),
            "--out", str(out), "--assets", str(assets), "--json"]
    with contextlib.redirect_stdout(stdout):
        status = lab_main(argv)
    return {"status": status, "out": out, "stdout": stdout.getvalue()}


@pytest.fixture(scope="module")
def lab(background_results):
    return background_results


def logged(out, name):
    from verl_ext.metrics_file import read_metrics_file

    return read_metrics_file(out / "verl_ext_cpu" / f"{name}.jsonl").steps


def test_the_lab_exits_cleanly_and_prints_json_last(lab):
    assert lab["status"] == 0, (lab["out"] / "lab.log").read_text()[-4000:]
    records = json.loads(lab["stdout"].strip().splitlines()[-1])
    assert [(r["algorithm"], r["sync_interval"], r["sync_offset"], r["offline"], r["seed"]) for r in records] == [
        (ALGORITHM, 2, 0, False, 0)]
    assert all(r["error"] is None and r["steps"] == STEPS for r in records)
    assert ALGORITHM in lab["stdout"] and "KL to initial" in lab["stdout"]
    assert (lab["out"] / "custom.png").stat().st_size > 10_000


def test_json_figures_are_the_logged_rewards(lab):
    record, = json.loads(lab["stdout"].strip().splitlines()[-1])
    rewards = [step["critic/score/mean"] for step in logged(lab["out"], RUN)]
    assert len(rewards) == STEPS and all(0.0 <= reward <= 1.0 for reward in rewards)
    assert record["final_reward"] == pytest.approx(rewards[-1], abs=1e-4)  # 10% of 4 steps: the last


def test_the_run_used_our_estimator_and_loss_the_staleness_schedule_and_measured_kl(lab):
    from verl_ext.algorithms.registry import loss_metric_names
    from verl_ext import metric_names

    steps = logged(lab["out"], RUN)
    assert [step["step"] for step in steps] == list(range(1, STEPS + 1))
    assert [step["staleness/lag"] for step in steps] == [0, 1, 0, 1]
    assert [step["staleness/synced"] for step in steps] == [0, 1, 0, 1]
    assert steps[0]["actor/kl_loss"] < 1e-3  # the first step trains the initial policy (numerical noise only)
    assert steps[-1]["actor/kl_loss"] > 100 * steps[0]["actor/kl_loss"]  # three optimizer steps later it is not
    for step in steps:
        assert step["actor/grad_norm"] > 0, step["step"]
        assert 0.0 <= step[metric_names.RED_DROP_DROPPED_FRACTION] <= 1.0, step["step"]  # the estimator's own
        assert "actor/pg_clipfrac" not in step  # plain REINFORCE clips nothing
    missing = loss_metric_names("rec_reinforce") - set(steps[-1])
    assert not missing, f"REINFORCE's metrics not logged: {sorted(missing)}"
