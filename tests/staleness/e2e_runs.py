"""What the delayed_sync end-to-end modules (test_e2e_cpu.py, test_e2e_split.py) share: their small batches and
schedule, and how they read a run's logged steps, its rollout dumps and its rollout event log."""

import json
from collections import Counter
from pathlib import Path
from typing import Optional

from verl_ext.staleness.schedule import StalenessSchedule

SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
# 4 prompts x 2 responses per step (the CPU profile's 8 x 4 is for learning; here the schedule and the
# numbers matter); the CPU profile sizes each rank's micro-batches for them
TRAIN_BATCH_SIZE, ROLLOUT_N = 4, 2
SMALL_BATCHES = (
    f"data.train_batch_size={TRAIN_BATCH_SIZE}",
    f"actor_rollout_ref.rollout.n={ROLLOUT_N}",
    f"actor_rollout_ref.actor.ppo_mini_batch_size={TRAIN_BATCH_SIZE}",
)


def per_step(result, key: str) -> dict[int, float]:
    """``{0-based step: value}`` of a logged metric (verl logs global_steps = step + 1)."""
    return {record["step"] - 1: record[key] for record in result.steps if key in record}


def rollout_dump(directory: Path, step: int) -> Counter:
    """The (prompt, response, score) triples verl dumped for 0-based ``step`` (file named by global step)."""
    with open(directory / f"{step + 1}.jsonl") as file:
        return Counter((row["input"], row["output"], row["score"]) for row in map(json.loads, file))


def replica_events(result, replica: Optional[int] = None) -> list[dict]:
    """The rollout events of one replica (every event when ``replica`` is None)."""
    return [event for event in result.events if replica is None or event["replica_rank"] == replica]


def served_after_each_push(result, replica: Optional[int] = None) -> list[int]:
    """Requests a replica served with the weights of each push (until the next push). An event records the
    requests served since the previous event, so a push's own record counts for the push before it; a resident
    engine (no sleep event) records the last push's requests nowhere."""
    served: list[int] = []
    for event in replica_events(result, replica):
        if served:
            served[-1] += event.get("requests_served", 0)
        if event["event"] == "update_weights":
            served.append(0)
    return served


def check_checksums_change_only_at_pushes(result, replicas: int) -> None:
    """On every replica, weights with a checksum appear only through a push; between pushes they stay or are
    discarded; no generation was refused."""
    assert not [event for event in result.events if event["event"] == "generate_rejected"]
    for replica in range(replicas):
        current = None
        for event in replica_events(result, replica):
            if event["event"] == "update_weights":
                assert event["weight_checksum"] and event["weight_checksum"] != current
                current = event["weight_checksum"]
            elif event["weight_checksum"] is not None:
                assert event["weight_checksum"] == current, event
