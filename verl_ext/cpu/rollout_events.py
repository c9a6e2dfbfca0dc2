"""The CPU rollout's event log: one JSON line per change of the weights it holds.

The rollout server appends a record whenever its weights change state, so a test (or the staleness
trainer's checks) can read back, after a run, exactly which weights generated which requests:

``{"event": "initialized" | "sleep" | "wake_up" | "update_weights" | "update_aborted" | "generate_rejected",
   "time": unix seconds, "replica_rank": int,
   "weights": "dummy" | "checkpoint" | "pushed" | "discarded" | "allocated" | "incomplete",
   "weight_version": global step of the last push (or null), "weight_checksum": str or null,
   "requests_served": requests generated since the previous record, ...event-specific fields}``

``update_weights`` records also carry ``previous_checksum``, ``transfer_checksum`` (of the tensors as
received, equal to the sender's) and ``num_tensors``; ``sleep`` records carry ``level``; ``update_aborted``
(a push that failed part-way) carries ``reason`` and ``tensors_loaded``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from verl_ext.jsonl import json_lines

EVENT_NAMES = ("initialized", "sleep", "wake_up", "update_weights", "update_aborted", "generate_rejected")


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
