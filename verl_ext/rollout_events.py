"""The CPU rollout's event log: one JSON line per change of the weights it holds.

The rollout server appends a record whenever its weights change state, so a test (or the staleness
trainer's checks) can read back, after a run, exactly which weights generated which requests:

``{"event": "initialized" | "sleep" | "wake_up" | "update_weights" | "update_base_weights" | "update_aborted" |
   "generate_rejected",
   "time": unix seconds, "replica_rank": int,
   "weights": "dummy" | "checkpoint" | "pushed" | "discarded" | "allocated" | "incomplete",
   "weight_version": global step of the last push (or null), "weight_checksum": str or null,
   "requests_served": requests generated since the previous record, "batches_generated": the batched
   generate() calls that served them (each of the server's max_batch_size rows), ...event-specific fields}``

``update_weights`` records also carry ``previous_checksum``, ``transfer_checksum`` (of the tensors as
received, equal to the sender's) and ``num_tensors``; with LoRA adapter pushes (:mod:`verl_ext.cpu_runtime.lora`) also
``adapter_checksum`` (of the adapter's tensors the engine then holds) and ``adapter_version``, and verl's one-time
push of the base weights before the first adapter is an ``update_base_weights`` record (no new version); ``sleep`` records carry ``level``; ``update_aborted``
(a push that failed part-way) carries ``reason`` and ``tensors_loaded``; ``initialized`` records carry
``node_id`` (the Ray node of the replica, hence of its trainer rank) and ``pid``. Several replicas append to
one log, each record naming its ``replica_rank``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from verl_ext.jsonl import json_lines

EVENT_NAMES = ("initialized", "sleep", "wake_up", "update_weights", "update_base_weights", "update_aborted",
               "generate_rejected")


class RolloutEventLog:
    """Appends rollout events to a JSONL file (or keeps them only in memory when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike | None, replica_rank: int):
        self.path = Path(path) if path else None
        self.replica_rank = replica_rank
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENT_NAMES:
            raise ValueError(f"unknown rollout event {event!r}; allowed: {EVENT_NAMES}")
        record = {"event": event, "time": time.time(), "replica_rank": self.replica_rank, **fields}
        with self._lock:
            self.records.append(record)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")
        return record


def read_rollout_events(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of an event log, in the order written; a malformed line raises naming its number."""
    records = []
    for line_number, record in json_lines(path):
        if not isinstance(record, dict) or record.get("event") not in EVENT_NAMES:
            event = record.get("event") if isinstance(record, dict) else None
            raise ValueError(f"{path}: line {line_number}: field 'event' is {event!r}; allowed: {EVENT_NAMES}")
        records.append(record)
    return records


def weight_pushes(records: list[dict[str, Any]], replica_rank: int = 0) -> list[dict[str, Any]]:
    """The ``update_weights`` records of one replica, in order."""
    return [r for r in records if r["event"] == "update_weights" and r["replica_rank"] == replica_rank]


def pushes_per_replica(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each replica's ``update_weights`` records, in order, keyed by ``replica_rank`` (every replica that logged)."""
    replicas = sorted({record["replica_rank"] for record in records})
    return {rank: weight_pushes(records, rank) for rank in replicas}


class ReplicasDisagree(ValueError):
    """Two rollout replicas did not receive the same weights at the same push."""


def push_rounds(records: list[dict[str, Any]], replicas: int) -> list[dict[str, Any]]:
    """The weight pushes of a run with ``replicas`` rollout replicas, one entry per push to all of them.

    verl's checkpoint engine pushes every version to every replica (each trainer rank streams the gathered
    weights to its own replica). The k-th push of every replica must carry the same version, arrive intact
    (the server checks its ``transfer_checksum`` against the sender's) and leave the same weights
    (``weight_checksum``); otherwise :class:`ReplicasDisagree` names the push and the replicas. Returns
    ``[{"weight_version", "weight_checksum", "transfer_checksum", "replicas": [ranks]}]``.
    """
    per_replica = pushes_per_replica(records)
    if sorted(per_replica) != list(range(replicas)):
        raise ReplicasDisagree(f"expected the events of replicas 0..{replicas - 1}, found replicas {sorted(per_replica)}")
    counts = {rank: len(pushes) for rank, pushes in per_replica.items()}
    if len(set(counts.values())) != 1:
        raise ReplicasDisagree(f"the replicas received different numbers of pushes: {counts}")
    rounds = []
    for index, pushes in enumerate(zip(*per_replica.values())):
        fields = {key: {push[key] for push in pushes} for key in ("weight_version", "weight_checksum", "transfer_checksum")}
        different = {key: values for key, values in fields.items() if len(values) != 1}
        if different:
            raise ReplicasDisagree(
                f"push {index}: the replicas hold different weights: "
                + "; ".join(f"{key} {sorted(map(str, values))}" for key, values in different.items())
            )
        rounds.append({key: values.pop() for key, values in fields.items()} | {"replicas": sorted(per_replica)})
    return rounds


def replica_nodes(records: list[dict[str, Any]]) -> dict[int, str]:
    """The Ray node each replica's server ran on (its ``initialized`` record), by ``replica_rank``."""
    return {record["replica_rank"]: record.get("node_id") for record in records if record["event"] == "initialized"}
