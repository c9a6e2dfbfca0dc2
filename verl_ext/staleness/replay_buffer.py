"""verl's synchronous replay buffer, made to hand out exactly the batch planned for the current step.

The delayed_sync trainer keeps several generated batches in the TransferQueue at once (a FIFO of the
batches generated ahead). verl's :class:`ReplayBuffer` would take the oldest ``batch_size`` finished
prompt groups, mixing batches; this subclass hands out, at step l, only the prompt groups tagged for step
l, in two phases:

1. :meth:`ScheduledReplayBuffer.prepare_step` (called by the trainer before verl samples) waits until the
   step's ``data.train_batch_size`` groups are all terminal and, with zero-variance masking, removes the
   finished groups whose rewards are all equal (:mod:`verl_ext.staleness.zero_variance`) from the
   TransferQueue. It never asks for new prompts: the rollout engine holds no weights between sync points.
2. :meth:`ScheduledReplayBuffer.sample` (verl's call) hands out the groups that are left. When masking
   leaves none, the trainer skips the step's update and takes the removed groups as the step's batch
   instead, so that verl's end-of-step clearing removes them like any consumed batch.

Both hand out the step's responses in :mod:`verl_ext.batch_order`'s canonical order (prompt groups as
submitted, then session, then output index), not in the order they finished: the same batch gives the
same update in every run. Validation is unchanged (verl's own sampling). The private ``ReplayBuffer`` methods
overridden or called here are listed in :mod:`verl_ext.verl_internals` (checked by ``verl-ext doctor``).
"""

import time
from dataclasses import dataclass, field

import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from verl_ext.batch_order import order_batch
from verl_ext.staleness.pending_batches import STEP_TAG, prompt_uid
from verl_ext.staleness.zero_variance import zero_variance_groups

TRAIN_PARTITION = "train"
REWARD_FIELD = "rm_scores"


@dataclass
class PreparedStep:
    """The prompt groups of one training step, after zero-variance masking."""

    step: int
    # groups handed out for training
    kept_uids: list[str] = field(default_factory=list)
    # zero-variance groups removed from the batch (and from the TransferQueue)
    removed_uids: list[str] = field(default_factory=list)
    # prompt tags (step, behaviour version, status) and trajectory tags of every group of the step, removed
    # ones included
    prompt_tags: list[dict] = field(default_factory=list)
    trajectory_tags: list[dict] = field(default_factory=list)

    @property
    def group_count(self) -> int:
        return len(self.kept_uids) + len(self.removed_uids)

    @property
    def update_skipped(self) -> bool:
        """Masking removed every group: nothing to train on at this step."""
        return not self.kept_uids


class ScheduledReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` whose training batch at step l is the prompt groups tagged for step l."""

    def __init__(self, *args, zero_variance_masking: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.zero_variance_masking = zero_variance_masking
        self.prepared: PreparedStep | None = None
        self._prompt_tags: dict[str, dict] = {}

    def _sync_metadata_from_transfer_queue(self):
        super()._sync_metadata_from_transfer_queue()
        listing = tq.kv_list(TRAIN_PARTITION) or {}
        self._prompt_tags = {
            key: tag for key, tag in listing.get(TRAIN_PARTITION, {}).items() if tag.get("is_prompt", False)
        }

    def prepare_step(self, step: int, batch_size: int) -> PreparedStep:
        """Wait for the ``batch_size`` groups of ``step``; remove the zero-variance ones when masking is on."""
        uids = self._wait_for_step(step, batch_size)
        partition = self.partitions[TRAIN_PARTITION]
        trajectory_keys = [key for key in partition if prompt_uid(key) in uids]
        removed: set[str] = set()
        if self.zero_variance_masking:
            finished = uids & self.finished_keys[TRAIN_PARTITION]
            removed = zero_variance_groups(self._group_rewards([k for k in trajectory_keys if prompt_uid(k) in finished]))
        ordered = [uid for uid in self._prompt_tags if uid in uids]  # as submitted (listing order)
        kept = [uid for uid in ordered if uid not in removed]
        self.prepared = PreparedStep(
            step=step,
            kept_uids=kept,
            removed_uids=[uid for uid in ordered if uid in removed],
            prompt_tags=[dict(self._prompt_tags[uid]) for uid in ordered],
            trajectory_tags=[dict(partition[key]) for key in trajectory_keys],
        )
        if not self.prepared.update_skipped:
            # verl's own clearing: the groups' prompt keys and all their trajectories leave the TransferQueue
            self._clear_groups(TRAIN_PARTITION, removed)
        return self.prepared

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """Training: the groups :meth:`prepare_step` kept (the step's removed groups when it kept none)."""
        if partition_id != TRAIN_PARTITION:
            return super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        prepared = self.prepared
        if prepared is None:
            raise RuntimeError("ScheduledReplayBuffer.prepare_step must be called before sampling a training batch")
        self.prepared = None
        uids = prepared.removed_uids if prepared.update_skipped else prepared.kept_uids
        self._sync_metadata_from_transfer_queue()
        partition_snapshot = dict(self.partitions[TRAIN_PARTITION])
        if not any(prompt_uid(key) in set(uids) for key in partition_snapshot):
            raise RuntimeError(
                f"step {prepared.step}: its prompt groups have no trajectories in the TransferQueue "
                "(every session failed)"
            )
        return self._materialize_batch(TRAIN_PARTITION, uids, partition_snapshot), {}

    def _materialize_batch(
        self, partition_id: str, selected_prompt_uids: list[str], partition_snapshot: dict[str, dict]
    ) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        return order_batch(batch, list(self.prompt_global_steps[partition_id]))

    def _wait_for_step(self, step: int, batch_size: int) -> set[str]:
        """The uids of the step's prompt groups, once exactly ``batch_size`` of them exist, all terminal."""
        last_debug_time = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            uids = {uid for uid, tag in self._prompt_tags.items() if tag.get(STEP_TAG) == step}
            if len(uids) > batch_size:
                raise RuntimeError(
                    f"step {step} has {len(uids)} prompt groups, expected exactly data.train_batch_size={batch_size}"
                )
            terminal = uids & (self.finished_keys[TRAIN_PARTITION] | self.failure_keys[TRAIN_PARTITION])
            if len(terminal) == batch_size:
                return uids
            last_debug_time = self._wait_for_next_poll(TRAIN_PARTITION, last_debug_time)

    def _group_rewards(self, trajectory_keys: list[str]) -> dict[str, list[float]]:
        """``{uid: [reward of each trajectory]}``, a reward being the sum of the trajectory's ``rm_scores``
        (what verl's group filter reads). Rewards are computed at sampling time (the config check rejects a
        colocated reward model); a trajectory without them is an error, not a zero."""
        rewards: dict[str, list[float]] = {}
        if not trajectory_keys:
            return rewards
        try:
            data = tq.kv_batch_get(keys=trajectory_keys, partition_id=TRAIN_PARTITION, select_fields=[REWARD_FIELD])
        except ValueError as error:
            raise RuntimeError(
                f"zero-variance masking reads each trajectory's {REWARD_FIELD} when the batch is sampled, and the "
                f"TransferQueue could not return them ({error}); rewards must be computed by the rollout "
                "(rule-based reward, or reward.reward_model.enable_resource_pool=true)"
            ) from error
        for key, scores in zip(trajectory_keys, list(data[REWARD_FIELD]), strict=True):
            rewards.setdefault(prompt_uid(key), []).append(float(scores.sum().item()))
        return rewards
