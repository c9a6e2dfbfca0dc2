"""The batches generated ahead of training and waiting in verl's TransferQueue, read from its tags.

The delayed_sync trainer tags every prompt group it submits for generation with the training step that
will consume it (:data:`STEP_TAG`) and the policy version it pushed to the rollout engine just before
(:data:`BEHAVIOUR_VERSION_TAG`). verl's agent loop writes each group's trajectories under keys
``{uid}_{session}_{index}`` and sets the group's ``status`` tag to ``finished`` or ``failure`` when all
its sessions are done. This module reads a ``tq.kv_list("train")`` listing (``{key: tag}``) and says which
steps have a complete batch waiting and which keys are leftovers to clear; it does no I/O.
"""

from dataclasses import dataclass, field

STEP_TAG = "delayed_sync_step"
BEHAVIOUR_VERSION_TAG = "delayed_sync_behaviour_version"
TERMINAL_STATUSES = ("finished", "failure")


@dataclass
class PendingBatches:
    """What a ``train`` partition listing holds."""

    # steps whose batch is complete: exactly batch_size prompt groups, all terminal
    complete_steps: set[int] = field(default_factory=set)
    # keys to remove, each with the reason (reported by the trainer, never dropped silently)
    keys_to_clear: dict[str, str] = field(default_factory=dict)

    def clear_reasons(self) -> dict[str, int]:
        """How many keys are to be cleared for each reason."""
        counts: dict[str, int] = {}
        for reason in self.keys_to_clear.values():
            counts[reason] = counts.get(reason, 0) + 1
        return counts


def prompt_uid(key: str) -> str:
    """The prompt group a TransferQueue key belongs to: trajectory keys are ``{uid}_{session}_{index}``."""
    return key.split("_", 1)[0]


def read_pending_batches(listing: dict[str, dict], batch_size: int) -> PendingBatches:
    """Sort a ``train`` partition listing into complete steps and keys to clear.

    Cleared: trajectories whose prompt group is gone (the batch a checkpoint was saved in the middle of:
    already trained on), prompt groups without a step tag (written by another trainer mode), and every
    group of a step that is incomplete or still generating (the trainer regenerates that step).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    result = PendingBatches()
    prompts = {key: tag for key, tag in listing.items() if tag.get("is_prompt", False)}
    groups_by_step: dict[int, list[str]] = {}
    for uid, tag in prompts.items():
        step = tag.get(STEP_TAG)
        if step is None:
            result.keys_to_clear[uid] = "prompt group without a delayed_sync step tag"
            continue
        groups_by_step.setdefault(int(step), []).append(uid)

    for step, uids in groups_by_step.items():
        terminal = all(prompts[uid].get("status") in TERMINAL_STATUSES for uid in uids)
        if terminal and len(uids) == batch_size:
            result.complete_steps.add(step)
            continue
        reason = f"incomplete batch for step {step} ({len(uids)} of {batch_size} groups, terminal={terminal})"
        for uid in uids:
            result.keys_to_clear[uid] = reason

    kept_uids = {uid for uid in prompts if uid not in result.keys_to_clear}
    for key in listing:
        if key in prompts:
            continue
        uid = prompt_uid(key)
        if uid in kept_uids:
            continue
        if uid in prompts:
            result.keys_to_clear[key] = result.keys_to_clear[uid]
        else:
            result.keys_to_clear[key] = "trajectory of an already consumed batch"
    return result
