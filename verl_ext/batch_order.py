"""The order of a training batch's responses: by prompt, then by response, never by which finished first.

verl's v1 replay buffer hands the trainer a batch whose responses are in the order their trajectories
reached the TransferQueue, i.e. the order in which the agent-loop and reward workers finished them: it
changes from run to run. The actor's update, verl's metrics and any group statistic reduce over the
batch in that order, and float addition is not associative, so the same responses in another order give
other bits (and, through a different split into micro-batches, other gradients). This module puts a
batch in one canonical order:

    (position of the prompt among the prompt groups as they were submitted, session, output index)

The prompt groups' submission order is the order of their keys in the TransferQueue listing (its
controller lists keys in insertion order, and the trainer inserts a step's prompts in data-loader
order). A trajectory key is ``{uid}_{session}_{index}`` (verl's agent-loop worker); the ``uid`` itself
(a ``uuid4``) plays no part in the order.

Used by :class:`verl_ext.staleness.replay_buffer.ScheduledReplayBuffer` (delayed_sync) and, for verl's own
modes on the CPU backend, by the ``batch_order`` patch of :mod:`verl_ext.cpu_runtime.patches`.
"""

from __future__ import annotations

from typing import Any, Sequence


def trajectory_key_parts(key: str) -> tuple[str, int, int]:
    """``"{uid}_{session}_{index}"`` -> (uid, session, index)."""
    parts = key.rsplit("_", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"not a trajectory key of verl's agent loop ('{{uid}}_{{session}}_{{index}}'): {key!r}")
    return parts[0], int(parts[1]), int(parts[2])


def canonical_order(keys: Sequence[str], prompt_order: Sequence[str]) -> list[int]:
    """The permutation (indices into ``keys``) that sorts trajectory keys by (prompt position, session, index)."""
    position = {uid: rank for rank, uid in enumerate(prompt_order)}
    parsed = [trajectory_key_parts(key) for key in keys]
    unknown = sorted({uid for uid, _session, _index in parsed if uid not in position})
    if unknown:
        raise ValueError(f"trajectories of prompt groups missing from the prompt order: {unknown[:3]}")
    return sorted(range(len(keys)), key=lambda i: (position[parsed[i][0]], parsed[i][1], parsed[i][2]))


def order_batch(batch: Any, prompt_order: Sequence[str]) -> Any:
    """Reorder a ``KVBatchMeta`` (keys and tags together) into the canonical order, in place; returns it."""
    order = canonical_order(batch.keys, prompt_order)
    if order != list(range(len(order))):
        batch.reorder(order)
    return batch
