"""The lab's figures of a run (final reward, steps to target, peak, KL) and their aggregation over seeds."""

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lab.synthetic import as_steps, step_records
from verl_ext.lab.summary import Spread, aggregate, final_window, smoothed, summarize_run


@given(st.lists(st.floats(-10, 10), max_size=40), st.integers(1, 8))
@settings(max_examples=60, deadline=None)
def test_smoothed_is_the_trailing_mean(values, window):
    expected = [statistics.fmean(values[max(0, i - window + 1): i + 1]) for i in range(len(values))]
    assert smoothed(values, window) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("length, window", [(0, 0), (1, 1), (9, 1), (10, 1), (11, 2), (20, 2), (40, 4), (45, 5)])
def test_the_final_window_is_ten_percent_rounded_up(length, window):
    assert final_window(length) == window


def test_final_reward_is_the_mean_of_the_last_tenth_as_a_fraction_of_the_maximum():
    rewards = [0.1] * 18 + [0.6, 0.8]
    summary = summarize_run(as_steps(step_records(rewards)), max_reward=2.0)
    assert summary.final_reward == pytest.approx((0.6 + 0.8) / 2 / 2.0)
    assert summary.reward[0] == pytest.approx(0.05)


def test_steps_to_target_needs_the_five_step_mean_one_lucky_step_does_not_count():
    rewards = [0.2, 0.2, 1.0, 0.2, 0.2, 0.9, 0.9, 0.9, 0.9, 0.95, 0.95]
    summary = summarize_run(as_steps(step_records(rewards)), target=0.9)
    # 5-step means: step 10 -> (0.9*4 + 0.95)/5 = 0.91, step 9 -> (0.2 + 0.9*4)/5 = 0.76
    assert summary.steps_to_target == 10
    assert summary.peak_reward == pytest.approx((0.9 * 3 + 0.95 * 2) / 5)


def test_a_lucky_start_does_not_count_and_a_short_run_has_one_window():
    summary = summarize_run(as_steps(step_records([1.0, 0.1, 0.1, 0.1, 0.1, 0.1])), target=0.9)
    assert summary.steps_to_target is None
    assert summary.peak_reward == pytest.approx(0.28)
    short = summarize_run(as_steps(step_records([0.9, 1.0, 0.95])), target=0.9)
    assert short.steps_to_target == 3 and short.peak_reward == pytest.approx(0.95)


def test_a_run_that_never_reaches_the_target_reports_none_and_its_peak_before_collapse():
    rewards = [0.1, 0.5, 0.8, 0.85, 0.85, 0.8, 0.2, 0.0, 0.0, 0.0]
    summary = summarize_run(as_steps(step_records(rewards)), target=0.9)
    assert summary.steps_to_target is None
    assert summary.peak_reward == pytest.approx((0.5 + 0.8 + 0.85 + 0.85 + 0.8) / 5)
    assert summary.final_reward == 0.0


def test_kl_and_lag_come_from_verls_metrics_when_logged():
    steps = as_steps(step_records([0.1] * 20, kl=[i / 100 for i in range(20)], lag=[i % 4 for i in range(20)]))
    summary = summarize_run(steps)
    assert summary.kl_to_initial == pytest.approx((0.18 + 0.19) / 2)
    assert summary.max_lag == 3
    bare = summarize_run(as_steps(step_records([0.1] * 5)))
    assert bare.kl_to_initial is None and bare.max_lag is None


def test_steps_without_a_reward_are_ignored_and_no_reward_means_no_figures():
    steps = as_steps(step_records([0.4, 0.6])) + [{"step": 0, "val-core/x/acc/mean@1": 0.3}]
    summary = summarize_run(steps)
    assert summary.steps == [1, 2]
    empty = summarize_run([{"step": 1, "val-core/x/acc/mean@1": 0.3}])
    assert (empty.final_reward, empty.steps_to_target, empty.peak_reward) == (None, None, None)


def test_spread_is_mean_and_sample_std():
    spread = Spread.of([0.2, 0.4, None, 0.9])
    assert spread.count == 3
    assert spread.mean == pytest.approx(0.5)
    assert spread.std == pytest.approx(math.sqrt(((0.3) ** 2 + 0.1 ** 2 + 0.4 ** 2) / 2))
    assert spread.format(2) == "0.50 ± 0.36"
    assert Spread.of([0.25]).format(2) == "0.25"
    assert Spread.of([None]).format() == "-"


def record(algorithm, seed, rewards, setting="sync_interval_20", lr=0.01):
    summary = summarize_run(as_steps(step_records(rewards))) if rewards is not None else None
    return {"setting": setting, "algorithm": algorithm, "learning_rate": lr, "seed": seed, "summary": summary}


def test_aggregate_groups_by_setting_algorithm_and_lr_in_first_seen_order():
    records = [
        record("rec_reinforce", 0, [0.95] * 10),
        record("rec_reinforce", 1, [0.2] * 10),
        record("rec_oneside_nois", 0, [0.95] * 10),
        record("rec_oneside_nois", 1, None),  # failed
        record("rec_reinforce", 0, [0.5] * 10, setting="on_policy"),
        record("rec_reinforce", 0, [0.5] * 10, lr=0.02),
    ]
    groups = aggregate(records)
    assert [(g.setting, g.algorithm, g.learning_rate) for g in groups] == [
        ("sync_interval_20", "rec_reinforce", 0.01),
        ("sync_interval_20", "rec_oneside_nois", 0.01),
        ("on_policy", "rec_reinforce", 0.01),
        ("sync_interval_20", "rec_reinforce", 0.02),
    ]
    reinforce, oneside = groups[0], groups[1]
    assert reinforce.final_reward.mean == pytest.approx((0.95 + 0.2) / 2)
    assert reinforce.reached == 1 and reinforce.steps_to_target.mean == 5  # the first full 5-step window
    assert reinforce.steps_to_target_text() == "5 (1/2)"
    assert oneside.failed_seeds == [1] and oneside.seeds == [0, 1]
    assert oneside.steps_to_target_text() == "5"  # one seed finished (the failure shows in the seeds column)
    assert groups[2].steps_to_target_text() == "never"


def test_kl_to_behaviour_is_the_largest_ppo_kl_when_pi_old_is_the_behaviour_policy():
    ppo_kl = [0.0, 0.02, 0.05, 0.01] * 5
    steps = as_steps(step_records([0.5] * 20, ppo_kl=ppo_kl))
    summary = summarize_run(steps)
    assert summary.max_kl_to_behaviour == pytest.approx(0.05)
    assert summary.kl_to_behaviour_curve == pytest.approx(ppo_kl)
    # pi_old recomputed by the current actor (offpolicy_grpo): ppo_kl is not against the behaviour policy
    recomputed = summarize_run(steps, pi_old_is_behaviour=False)
    assert recomputed.max_kl_to_behaviour is None and set(recomputed.kl_to_behaviour_curve) == {None}
    assert summarize_run(as_steps(step_records([0.5] * 3))).max_kl_to_behaviour is None  # not logged
