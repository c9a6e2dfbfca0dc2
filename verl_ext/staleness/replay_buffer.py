"""verl's synchronous replay buffer, made to hand out exactly the batch planned for the current step.

The delayed_sync trainer keeps several generated batches in the TransferQueue at once (a FIFO of the
batches generated ahead). verl's :class:`ReplayBuffer` would take the oldest ``batch_size`` finished
prompt groups, mixing batches; this subclass only offers the groups tagged for ``step_to_sample``, so it
waits until that step's groups are finished and never touches another step's. Validation is unchanged.
"""

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from verl_ext.staleness.pending_batches import STEP_TAG

TRAIN_PARTITION = "train"


class ScheduledReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` whose training batch at step l is the prompt groups tagged for step l."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.step_to_sample: int | None = None
        self._prompt_tags: dict[str, dict] = {}
        self.selected_prompt_tags: list[dict] = []

    def _sync_metadata_from_transfer_queue(self):
        super()._sync_metadata_from_transfer_queue()
        listing = tq.kv_list(TRAIN_PARTITION) or {}
        self._prompt_tags = {
            key: tag for key, tag in listing.get(TRAIN_PARTITION, {}).items() if tag.get("is_prompt", False)
        }

    def _sampleable_terminal_keys(self, partition_id, eviction_reasons):
        keys = super()._sampleable_terminal_keys(partition_id, eviction_reasons)
        if partition_id != TRAIN_PARTITION:
            return keys
        if self.step_to_sample is None:
            raise RuntimeError("ScheduledReplayBuffer.step_to_sample must be set before sampling a training batch")
        return {uid for uid in keys if self._prompt_tags.get(uid, {}).get(STEP_TAG) == self.step_to_sample}

    def _select_prompt_uids(self, partition_id, sampleable_keys, batch_size):
        selected, partition_snapshot, prompt_global_steps = super()._select_prompt_uids(
            partition_id, sampleable_keys, batch_size
        )
        if partition_id == TRAIN_PARTITION:
            if len(sampleable_keys) != batch_size:
                raise RuntimeError(
                    f"step {self.step_to_sample} has {len(sampleable_keys)} finished prompt groups, "
                    f"expected exactly data.train_batch_size={batch_size}"
                )
            self.selected_prompt_tags = [dict(self._prompt_tags[uid]) for uid in selected]
        return selected, partition_snapshot, prompt_global_steps
