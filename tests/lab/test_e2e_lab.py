"""``verl-ext lab`` end to end: two tiny runs of verl's real ``main_ppo`` on the CPU backend, one Ray start-up.

REINFORCE and REC-OneSide-NoIS, 4 steps each under sync_interval=2 (lags 0, 1, 0, 1). Evidence comes from
what verl logged (its file logger) and what the lab printed (table and the JSON last line), not from exit
codes: the loss that ran is ours (REC-OneSide's clip fraction is logged, REINFORCE's is not), the schedule is
delayed_sync's, the KL to the initial policy is measured, and the JSON agrees with the logged rewards.
"""

import json

import pytest

pytestmark = pytest.mark.e2e
BACKGROUND_MINUTES = 4  # how long background_runs took (two cores, under the suite's load): the queue's order
BACKGROUND_PEAK_GIB = 5  # the memory its runs take at their peak (PSS), for the queue's pairing

STEPS = 4


def background_runs(root):
    """The lab's command, in a child process while the rest of the suite runs (tests/background_runs.py)."""
    import contextlib
    import io

    from verl_ext.lab.cli import lab_main
    from verl_ext.tiny.assets import build_tiny_assets

    out, assets = root / "lab_e2e", root / "assets"
    build_tiny_assets(assets)
    stdout = io.StringIO()
    argv = ["--algorithms", "reinforce,rec_oneside_nois", "--sync-interval", "2", "--steps", str(STEPS),
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
        ("rec_reinforce", 2, 0, False, 0), ("rec_oneside_nois", 2, 0, False, 0)]
    assert all(r["error"] is None and r["steps"] == STEPS for r in records)
    assert "rec_oneside_nois" in lab["stdout"] and "KL to initial" in lab["stdout"]
    assert (lab["out"] / "custom.png").stat().st_size > 10_000


def test_json_figures_are_the_logged_rewards(lab):
    records = {r["algorithm"]: r for r in json.loads(lab["stdout"].strip().splitlines()[-1])}
    for algorithm, name in (("rec_reinforce", "rec_reinforce-lr0.001-sync_interval_2-T4-seed0"),
                            ("rec_oneside_nois", "rec_oneside_nois-lr0.001-sync_interval_2-T4-seed0")):
        steps = logged(lab["out"], name)
        rewards = [step["critic/score/mean"] for step in steps]
        assert len(rewards) == STEPS
        assert records[algorithm]["final_reward"] == pytest.approx(rewards[-1], abs=1e-4)  # 10% of 4 steps: the last


def test_runs_used_our_losses_the_staleness_schedule_and_measured_kl(lab):
    oneside = logged(lab["out"], "rec_oneside_nois-lr0.001-sync_interval_2-T4-seed0")
    reinforce = logged(lab["out"], "rec_reinforce-lr0.001-sync_interval_2-T4-seed0")
    for steps in (oneside, reinforce):
        assert [step["staleness/lag"] for step in steps] == [0, 1, 0, 1]
        assert [step["staleness/synced"] for step in steps] == [0, 1, 0, 1]
        assert steps[0]["actor/kl_loss"] < 1e-3  # the first step trains the initial policy (numerical noise only)
        assert steps[-1]["actor/kl_loss"] > 100 * steps[0]["actor/kl_loss"]  # three optimizer steps later it is not
    assert all("actor/pg_clipfrac" in step for step in oneside)
    assert not any("actor/pg_clipfrac" in step for step in reinforce)
