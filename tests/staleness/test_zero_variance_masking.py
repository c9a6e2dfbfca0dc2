"""``trainer.v1.delayed_sync.zero_variance_masking``: each step trains on its prompt groups less those whose
rewards are all equal, without new prompts; a step whose groups are all removed makes no update. Run in
verl's real ``fit`` loop (tests/staleness/fit_harness.py): verl's replay-buffer clearing, batch padding,
advantage estimator and metrics are real; the actor stand-in splits the batch into mini-batches with
verl's own iterator and reads the token normaliser the way verl's engines do."""

import shutil

import pytest

from tests.staleness.fit_harness import STEPS, TRAIN_BATCH_SIZE, Run, compose
from tests.staleness.stand_ins import RESPONSE_LENGTH
from verl_ext.staleness.schedule import StalenessSchedule
from verl_ext.staleness.zero_variance import is_zero_variance, zero_variance_groups

REMOVED = "staleness/zero_variance_groups_removed"
FRACTION = "staleness/zero_variance_groups_removed_fraction"
SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
MASKING = "trainer.v1.delayed_sync.zero_variance_masking=true"
# two prompts per mini-batch (4 responses): a batch of 3 groups is padded by verl to 8 rows, 2 mini-batches
MINI_BATCH = "actor_rollout_ref.actor.ppo_mini_batch_size=2"
ROWS_PER_MINI_BATCH = 2 * 2
ALL_EQUAL_STEP = 2  # every group of this step has equal rewards


def reward(step, index, session) -> float:
    """Prompts whose dataset index is a multiple of 3, and every prompt of step 2, get reward 1 for every
    response (zero variance); the others get 0, 1 (responses 0 and 1)."""
    if step == ALL_EQUAL_STEP or index % 3 == 0:
        return 1.0
    return float(session)


def step_groups(run) -> dict[int, dict[str, int]]:
    """``{step: {uid: dataset index}}`` of the training groups the run generated."""
    groups: dict[int, dict[str, int]] = {}
    for group in run.agent_loop.generated:
        if group["partition"] == "train":
            groups.setdefault(group["step"], {})[group["uid"]] = group["index"]
    return groups


def zero_variance_uids(groups: dict[str, int], step: int) -> set[str]:
    return {uid for uid, index in groups.items() if is_zero_variance([reward(step, index, s) for s in (0, 1)])}


@pytest.fixture
def masked_run(transfer_queue, dataset_file, tmp_path, log_dir):
    return Run(compose(dataset_file, tmp_path, *KNOBS, MASKING, MINI_BATCH), transfer_queue, log_dir, "masked", reward=reward)


def test_the_pure_rule():
    assert zero_variance_groups({"a": [1.0, 1.0], "b": [0.0, 1.0], "c": [0.5], "d": [0.0, 0.0, 0.0]}) == {"a", "d"}
    assert not is_zero_variance([0.1 + 0.2, 0.3])  # exact equality: 0.30000000000000004 != 0.3


def test_zero_variance_groups_leave_the_batch_without_refill(masked_run):
    run = masked_run
    groups = step_groups(run)
    assert sorted(groups) == list(range(STEPS))  # the schedule generated every step's batch once, no refill
    assert len(run.agent_loop.generated) == STEPS * TRAIN_BATCH_SIZE
    removed = {step: zero_variance_uids(groups[step], step) for step in range(STEPS)}
    counts = {step: len(uids) for step, uids in removed.items()}
    # the run covers the three cases: nothing removed, some removed (with padding), everything removed
    assert 0 in counts.values() and counts[ALL_EQUAL_STEP] == TRAIN_BATCH_SIZE
    assert any(count % 2 == 1 for count in counts.values())  # an odd number of groups left: verl pads

    assert run.logged(REMOVED) == {step: float(count) for step, count in counts.items()}
    assert run.logged(FRACTION) == pytest.approx({step: count / TRAIN_BATCH_SIZE for step, count in counts.items()})
    # every step keeps the schedule, the skipped one included
    assert run.logged("staleness/lag") == {row.step: row.lag for row in SCHEDULE.preview(STEPS)}
    assert run.logged("staleness/behaviour_version") == {s: SCHEDULE.behaviour_version(s) for s in range(STEPS)}

    trained_steps = [step for step in range(STEPS) if counts[step] < TRAIN_BATCH_SIZE]
    assert run.actor.trained_steps == trained_steps  # no update at the all-removed step
    for update, step in enumerate(trained_steps):
        kept = set(groups[step]) - removed[step]
        assert run.actor.trained_uids[update] == kept
        # verl pads the kept responses to a multiple of one mini-batch (ppo_mini_batch_size x rollout.n) with
        # zero-loss samples; each mini-batch's token normaliser counts only kept responses' tokens
        responses = 2 * len(kept)
        assert run.actor.padding_rows[update] == -responses % ROWS_PER_MINI_BATCH
        mini_batches = run.actor.mini_batch_token_counts[update]
        assert len(mini_batches) == -(-responses // ROWS_PER_MINI_BATCH)
        assert sum(mini_batches) == responses * RESPONSE_LENGTH and min(mini_batches) > 0
        assert run.actor.padding_advantages[update] == 0.0

    # weights: pushes exactly at the schedule's sync points; the skipped step did not change the weights
    assert [push["label"] for push in run.rollout.pushes] == [0, 2, 5]
    assert [push["weights"] for push in run.rollout.pushes] == [0, 2, 4]
    # a step without update still logs its step metrics
    assert run.metrics[ALL_EQUAL_STEP]["training/global_step"] == ALL_EQUAL_STEP + 1
    assert "critic/score/mean" not in run.metrics[ALL_EQUAL_STEP]
    # nothing leaks: removed groups, trained batches and verl's padding samples all left the TransferQueue
    assert run.train_partition_left == {}


def test_without_masking_the_same_groups_are_trained(transfer_queue, dataset_file, tmp_path, log_dir):
    run = Run(compose(dataset_file, tmp_path, *KNOBS, MINI_BATCH), transfer_queue, log_dir, "unmasked", reward=reward)
    groups = step_groups(run)
    assert run.actor.trained_steps == list(range(STEPS))
    assert run.actor.trained_uids == [set(groups[step]) for step in range(STEPS)]
    assert run.actor.padding_rows == [0] * STEPS
    assert REMOVED not in run.metrics[0] and FRACTION not in run.metrics[0]


def test_resume_masks_the_same_groups_as_the_uninterrupted_run(
    transfer_queue, dataset_file, tmp_path, log_dir, masked_run
):
    config = compose(dataset_file, tmp_path / "b", *KNOBS, MASKING, MINI_BATCH, "trainer.save_freq=2")
    # updates at steps 0, 1, 3, ...: the 4th update is step 4, after the checkpoint of global step 4
    crashed = Run(config, transfer_queue, log_dir, "masked_crashed", crash_at_update=3, reward=reward)
    assert crashed.crashed and crashed.actor.trained_steps == [0, 1, 3]
    # the checkpoint holds the batches of steps 4 and 5 whole: masking happens when a batch is handed out
    shutil.rmtree(tmp_path / "b" / "checkpoints" / "global_step_2")
    resumed = Run(config, transfer_queue, log_dir, "masked_resumed", reward=reward)
    assert resumed.start_step == 4
    reference = masked_run
    for key in (REMOVED, "staleness/lag", "staleness/weight_syncs"):
        assert resumed.logged(key) == {s: v for s, v in reference.logged(key).items() if s >= 4}, key
    assert {**crashed.trained_indices(), **resumed.trained_indices()} == reference.trained_indices()
    assert resumed.train_partition_left == {}
