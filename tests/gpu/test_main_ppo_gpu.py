"""verl's real ``main_ppo`` on one GPU: FSDP2 actor, colocated vLLM rollout in bf16, the tiny GPU model.

Evidence comes from verl's file logger (every step's metrics), never from exit codes alone. The rollout
engine's state is what it stamped on every trajectory -- the weight version that generated it
(``staleness/behaviour_version``, from vLLM's reported ``global_steps``) -- and the log-probs it returned,
compared with the actor's at lag 0. Runs: tests/gpu/gpu_runs.py (each started once, on first use).

bf16 tolerance at lag 0: ``|staleness/behaviour_minus_current_log_prob| <= 0.02`` nats/token (mean over
tokens of log pi_vLLM - log pi_actor on the same weights; verl_ext/gpu/smoke_checks.py says why), and in
verl's decoupled mode ``training/rollout_probs_diff_mean <= 0.01`` (mean |p_vLLM - p_actor| per token).
"""

import math

import pytest

from tests.gpu.gpu_runs import FAMILIES, RESUME_AT, SAVE_FREQ, SCHEDULE_STEPS, TEST_FREQ
from verl_ext.algorithms.registry import loss_metric_names
from verl_ext.gpu.plan_checks import expected_pushes
from verl_ext.gpu.smoke_checks import BF16_LAG0_TOLERANCE, summarize_smoke
from verl_ext.staleness.schedule import StalenessSchedule

pytestmark = pytest.mark.gpu

SCHEDULE_3_1 = StalenessSchedule(sync_interval=3, sync_offset=1)
PROBS_DIFF_TOLERANCE = 0.01


def per_step(result, key: str) -> dict[int, float]:
    """``{0-based step: value}`` of a logged metric (verl logs global_steps = step + 1)."""
    return {record["step"] - 1: record[key] for record in result.steps if key in record}


def trained(result) -> list[dict]:
    return [record for record in result.steps if "training/global_step" in record]


# ----------------------------------------------------------------------------------------- schedules


def test_schedule_3_1_lags_versions_syncs_and_pushes(gpu_runs):
    result = gpu_runs["delayed_3_1"]
    rows = SCHEDULE_3_1.preview(SCHEDULE_STEPS)
    assert per_step(result, "staleness/lag") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/behaviour_version") == {row.step: row.behaviour_version for row in rows}
    assert per_step(result, "training/off_policy/trajectory_staleness/mean") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/synced") == {row.step: float(row.synced) for row in rows}
    assert per_step(result, "staleness/weight_syncs")[SCHEDULE_STEPS - 1] == SCHEDULE_3_1.sync_count(SCHEDULE_STEPS)
    assert per_step(result, "staleness/weight_pushes") == expected_pushes(SCHEDULE_3_1, SCHEDULE_STEPS, TEST_FREQ)


def test_vllm_and_actor_log_probs_agree_at_lag_0_within_bf16_tolerance(gpu_runs):
    result = gpu_runs["delayed_3_1"]
    gaps = per_step(result, "staleness/behaviour_minus_current_log_prob")
    lag0 = [row.step for row in SCHEDULE_3_1.preview(SCHEDULE_STEPS) if row.lag == 0]
    assert lag0 and all(abs(gaps[step]) <= BF16_LAG0_TOLERANCE for step in lag0), {step: gaps[step] for step in lag0}
    opmd = per_step(gpu_runs["on_policy_opmd"], "staleness/behaviour_minus_current_log_prob")
    assert len(opmd) == 3 and all(abs(gap) <= BF16_LAG0_TOLERANCE for gap in opmd.values()), opmd


def test_schedule_1_0_is_on_policy_with_a_push_after_every_step(gpu_runs):
    for name in ("on_policy_opmd", "red_weight"):
        result = gpu_runs[name]
        steps = len(trained(result))
        schedule = StalenessSchedule(sync_interval=1, sync_offset=0)
        summary = summarize_smoke(result.steps, schedule, steps, BF16_LAG0_TOLERANCE)
        assert summary.ok, (name, [str(check) for check in summary.checks if not check.ok])
        assert summary.lags == [0] * steps and summary.weight_pushes == 1 + steps


def test_offline_pushes_only_at_the_start(gpu_runs):
    result = gpu_runs["offline_red_drop"]
    assert per_step(result, "staleness/lag") == {step: step for step in range(3)}
    assert per_step(result, "staleness/behaviour_version") == {step: 0 for step in range(3)}
    assert set(per_step(result, "staleness/weight_pushes").values()) == {1.0}
    assert set(per_step(result, "staleness/weight_syncs").values()) == {0.0}


# -------------------------------------------------------------------------- checkpoint, validation


def test_checkpoint_mid_interval_and_resume_give_the_same_lags_and_versions(gpu_runs):
    first, resumed = gpu_runs["delayed_3_1"], gpu_runs["resumed_3_1"]
    saved = sorted(int(path.name.rsplit("_", 1)[1]) for path in first.checkpoint_dir.glob("global_step_*"))
    assert saved == sorted({*range(SAVE_FREQ, SCHEDULE_STEPS + 1, SAVE_FREQ), SCHEDULE_STEPS})
    assert not SCHEDULE_3_1.synced_after(RESUME_AT - 1)  # the resumed checkpoint is mid-interval
    assert sorted(per_step(resumed, "staleness/lag")) == list(range(RESUME_AT, SCHEDULE_STEPS))
    for key in ("staleness/lag", "staleness/behaviour_version", "staleness/synced", "staleness/weight_syncs"):
        expected = {step: value for step, value in per_step(first, key).items() if step >= RESUME_AT}
        assert per_step(resumed, key) == expected, key
    assert all(record["actor/grad_norm"] > 0 for record in trained(resumed))


def test_validation_runs_under_delayed_sync_and_leaves_the_schedule_alone(gpu_runs):
    result = gpu_runs["delayed_3_1"]
    validated = sorted(record["step"] for record in result.steps if any(key.startswith("val-core/") for key in record))
    assert validated == sorted({*range(TEST_FREQ, SCHEDULE_STEPS + 1, TEST_FREQ), SCHEDULE_STEPS})
    scores = [value for record in result.steps for key, value in record.items() if key.startswith("val-core/")]
    assert scores and all(0.0 <= value <= 1.0 for value in scores)
    # the lags after a validation are the schedule's (validation wakes the engine with the current weights,
    # which never generate a training batch): checked in test_schedule_3_1_lags_versions_syncs_and_pushes


# ------------------------------------------------------------------------------ masking, loss families


def test_zero_variance_masking_removes_the_constant_reward_groups(gpu_runs):
    """The run's reward scores every response of an odd "count n" prompt the same (tests/staleness/odd_count_reward.py):
    those groups leave each batch; the FSDP worker trains on the rest."""
    result = gpu_runs["offline_red_drop"]
    removed = per_step(result, "staleness/zero_variance_groups_removed")
    fractions = per_step(result, "staleness/zero_variance_groups_removed_fraction")
    assert set(removed) == set(fractions) == set(range(3))
    # n is drawn from 1..5: a batch of 16 prompts without an odd n has probability (2/5)^16 ~ 4e-7
    assert all(value >= 1 for value in removed.values()) and all(0 < fraction <= 1 for fraction in fractions.values())
    grad_norms = per_step(result, "actor/grad_norm")
    assert {step for step, fraction in fractions.items() if fraction < 1} == set(grad_norms)  # no update when all left
    assert all(norm > 0 for norm in grad_norms.values())


@pytest.mark.parametrize("run", list(FAMILIES))
def test_every_family_trains_with_its_loss(gpu_runs, run):
    result = gpu_runs[run]
    steps = trained(result)
    assert [record["step"] for record in steps] == list(range(1, result.run.steps + 1))
    for record in steps:
        if "actor/grad_norm" not in record:  # a fully masked step makes no update (offline_red_drop only)
            assert run == "offline_red_drop" and record["staleness/zero_variance_groups_removed_fraction"] == 1
            continue
        assert math.isfinite(record["actor/grad_norm"]) and record["actor/grad_norm"] > 0, record["step"]
        assert 0.0 <= record["critic/score/mean"] <= 1.0
        assert record.get("actor/perf/max_memory_allocated_gb", 1.0) > 0
    missing = loss_metric_names(FAMILIES[run]) - set().union(*steps)
    assert not missing, f"{run}: loss metrics not logged: {sorted(missing)}"


def test_rec_gspo_runs_in_verls_sync_mode_with_seq_mean_token_mean(gpu_runs):
    result = gpu_runs["sync_rec_gspo"]
    assert not any("staleness/lag" in record for record in result.steps)  # verl's own trainer, not delayed_sync
    assert all(record.get("timing_s/update_weights", 0) > 0 for record in trained(result))
    assert all(abs(record["actor/ppo_kl"]) < BF16_LAG0_TOLERANCE for record in trained(result))


def test_offpolicy_grpo_in_decoupled_mode_logs_vllm_vs_actor_probabilities(gpu_runs):
    result = gpu_runs["offpolicy_grpo"]
    lag0 = [row.step for row in SCHEDULE_3_1.preview(3) if row.lag == 0]
    diffs = per_step(result, "training/rollout_probs_diff_mean")
    valid = per_step(result, "training/rollout_probs_diff_valid")
    assert set(valid.values()) == {1}
    assert all(diffs[step] <= PROBS_DIFF_TOLERANCE for step in lag0), diffs
    assert all("actor/behaviour_ratio_mean" in record for record in trained(result))
    assert per_step(result, "staleness/lag") == {row.step: row.lag for row in SCHEDULE_3_1.preview(3)}
