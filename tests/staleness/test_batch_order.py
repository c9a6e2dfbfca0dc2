"""A training batch comes in one canonical order (prompt as submitted, session, output index), whatever
order its trajectories reached the TransferQueue in: verl's replay buffer with the CPU ``batch_order``
patch, and delayed_sync's ScheduledReplayBuffer with or without it.

Real: verl's TransferQueue on a local Ray (the ``transfer_queue`` fixture), verl's ReplayBuffer, the
delayed_sync replay buffer. The trajectories are written the way verl's agent-loop worker writes them
(key ``{uid}_{session}_{index}``, one put each, in the order they finish), here in a shuffled order.
"""

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from verl_ext.batch_order import canonical_order, trajectory_key_parts

PARTITION = "train"
SESSIONS = 3


def test_trajectory_keys_are_parsed_and_bad_ones_named():
    assert trajectory_key_parts("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed_2_0") == ("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", 2, 0)
    with pytest.raises(ValueError, match="not a trajectory key"):
        trajectory_key_parts("uid_only")


@settings(max_examples=50, deadline=None)
@given(prompts=st.integers(1, 5), sessions=st.integers(1, 4), outputs=st.integers(1, 2), seed=st.integers(0, 10**6))
def test_canonical_order_does_not_depend_on_the_arrival_order(prompts, sessions, outputs, seed):
    uids = [str(uuid.UUID(int=random.Random(seed + p).getrandbits(128))) for p in range(prompts)]
    canonical = [f"{uid}_{s}_{i}" for uid in uids for s in range(sessions) for i in range(outputs)]
    arrived = canonical[:]
    random.Random(seed).shuffle(arrived)
    assert [arrived[i] for i in canonical_order(arrived, uids)] == canonical


def test_a_trajectory_of_an_unknown_prompt_is_an_error():
    with pytest.raises(ValueError, match="missing from the prompt order"):
        canonical_order(["a_0_0", "b_0_0"], ["a"])


def submit_and_finish_in_shuffled_order(tq, prompts: int, step_tag: dict | None = None) -> list[str]:
    """Prompt groups submitted in order, their trajectories written in a shuffled order; returns the
    trajectory keys in canonical order."""
    uids = [str(uuid.uuid4()) for _ in range(prompts)]
    prompt_tag = {"is_prompt": True, "status": "pending", "global_steps": 1, **(step_tag or {})}
    tq.kv_batch_put(keys=uids, partition_id=PARTITION, tags=[dict(prompt_tag) for _ in uids])
    canonical = [f"{uid}_{session}_0" for uid in uids for session in range(SESSIONS)]
    finished = canonical[:]
    random.Random(7).shuffle(finished)
    assert finished != canonical
    for key in finished:
        tag = {"status": "success", "prompt_len": 4, "response_len": 3, "seq_len": 7, "global_steps": 1}
        tq.kv_batch_put(keys=[key], partition_id=PARTITION, tags=[tag])
    for uid in uids:
        tq.kv_put(key=uid, partition_id=PARTITION, tag={"status": "finished"})
    return canonical, finished


def verl_replay_buffer():
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer(
        trainer_mode="sync",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        poll_interval=0.01,
        train_batch_size=4,
        gen_batch_size=4,
    )


@pytest.fixture
def cpu_patches():
    """Set the CPU patches as a test asks (``cpu_patches(True/False)``); restored afterwards."""
    from verl_ext.cpu_runtime import patches

    active = patches.active_patches()

    def set_patches(on: bool) -> None:
        patches.apply_cpu_patches() if on else patches.remove_cpu_patches()
        import verl.trainer.ppo.v1.replay_buffer  # noqa: F401  (a patch waiting for the import applies now)

    yield set_patches
    patches.remove_cpu_patches()
    if active:
        patches.apply_cpu_patches()


def clear(tq, keys):
    tq.kv_clear(keys=list(keys), partition_id=PARTITION)


def test_verl_hands_out_trajectories_in_the_order_they_finished(transfer_queue, cpu_patches):
    """Still needed: without the patch, verl's batch follows the TransferQueue's arrival order."""
    cpu_patches(False)
    canonical, finished = submit_and_finish_in_shuffled_order(transfer_queue, prompts=4)
    batch, _ = verl_replay_buffer().sample(global_steps=1, partition_id=PARTITION, batch_size=4)
    assert batch.keys == finished, "verl now orders its batches: remove the batch_order patch"
    clear(transfer_queue, canonical)


def test_patched_verl_hands_out_the_canonical_order(transfer_queue, cpu_patches):
    cpu_patches(True)
    canonical, _finished = submit_and_finish_in_shuffled_order(transfer_queue, prompts=4)
    batch, _ = verl_replay_buffer().sample(global_steps=1, partition_id=PARTITION, batch_size=4)
    assert batch.keys == canonical
    assert [tag["seq_len"] for tag in batch.tags] == [7] * len(canonical)  # tags moved with their keys
    clear(transfer_queue, canonical)


@pytest.mark.parametrize("patched", [False, True])
def test_delayed_sync_hands_out_the_canonical_order(transfer_queue, cpu_patches, patched):
    from verl_ext.staleness.pending_batches import STEP_TAG
    from verl_ext.staleness.replay_buffer import ScheduledReplayBuffer

    cpu_patches(patched)
    canonical, _finished = submit_and_finish_in_shuffled_order(transfer_queue, prompts=4, step_tag={STEP_TAG: 0})
    buffer = ScheduledReplayBuffer(
        trainer_mode="delayed_sync",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        poll_interval=0.01,
    )
    prepared = buffer.prepare_step(0, 4)
    assert prepared.kept_uids == list(dict.fromkeys(key.split("_")[0] for key in canonical))  # as submitted
    batch, _ = buffer.sample(global_steps=1, partition_id=PARTITION, batch_size=4)
    assert batch.keys == canonical
    clear(transfer_queue, canonical)
