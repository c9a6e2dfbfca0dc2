"""The delayed_sync trainer logs what verl-ext's estimators record (verl_ext.algorithms.step_metrics), here RED-Drop's
dropped fraction, at the step whose advantages they computed. verl's real fit loop, replay buffer and
advantage computation with the registered ``red_drop`` estimator (tests/staleness/fit_harness.py)."""

import pytest

from tests.staleness.fit_harness import TRAIN_BATCH_SIZE, Run, compose
from verl_ext.algorithms import step_metrics

GROUP_SIZE = 4
STEPS = 3


def reward(step, index, session) -> float:
    """Even prompts: rewards 0 0 0 1 (three negatives, one positive); odd prompts: 0 1 1 1."""
    if index % 2 == 0:
        return float(session == GROUP_SIZE - 1)
    return float(session > 0)


def dropped_responses(rewards: list[float]) -> int:
    """RED-Drop (eq. 10) drops a group's negatives in excess of its positives."""
    mean = sum(rewards) / len(rewards)
    negatives = sum(r < mean for r in rewards)
    positives = sum(r > mean for r in rewards)
    return max(0, negatives - positives)


def test_red_drop_dropped_fraction_is_logged_per_step(transfer_queue, dataset_file, tmp_path, log_dir):
    config = compose(
        dataset_file,
        tmp_path,
        "algorithm.adv_estimator=red_drop",
        "actor_rollout_ref.actor.policy_loss.loss_mode=rec_reinforce",
        f"actor_rollout_ref.rollout.n={GROUP_SIZE}",
        f"trainer.total_training_steps={STEPS}",
        "trainer.v1.delayed_sync.sync_interval=2",
    )
    run = Run(config, transfer_queue, log_dir, "red_drop", reward=reward)

    expected = {}
    for step in range(STEPS):
        indices = [group["index"] for group in run.agent_loop.generated if group["step"] == step]
        assert len(indices) == TRAIN_BATCH_SIZE
        dropped = sum(dropped_responses([reward(step, i, s) for s in range(GROUP_SIZE)]) for i in indices)
        expected[step] = dropped / (TRAIN_BATCH_SIZE * GROUP_SIZE)
    assert any(value > 0 for value in expected.values())
    assert run.logged("red_drop/dropped_fraction") == pytest.approx(expected)
    assert step_metrics.pop_all() == {}  # each step's record was consumed by that step
