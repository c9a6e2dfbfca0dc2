"""The delayed_sync trainer's own part of a checkpoint: ``delayed_sync_state.json`` in verl's
``<trainer.default_local_dir>/global_step_<g>/`` folder, beside verl's ``actor/``, ``data.pt`` and
``transfer_queue/``.

=================  =====================  ===========================================================
field              type, range            meaning
=================  =====================  ===========================================================
``sync_interval``  integer >= 1           the schedule the checkpoint was written with (m)
``sync_offset``    integer >= 0           (n)
``offline``        true or false          (with offline, m = 1 and n = 0)
``weight_syncs``   integer >= 0           pushes at the schedule's sync points so far (a redone one
                                          after a resume included): ``staleness/weight_syncs``
``weight_pushes``  integer >= 0           every push so far (start-up, syncs, validation):
                                          ``staleness/weight_pushes``
=================  =====================  ===========================================================

Written whole or not at all (:func:`write_state`, :func:`verl_ext.files.write_whole`): a temporary file in the
same folder, flushed and fsync'ed, renamed over the name, the folder fsync'ed. The trainer writes it *before* verl's ``_save_checkpoint``, whose
last act is ``latest_checkpointed_iteration.txt`` (the mark that the checkpoint is complete, which a resume
with ``resume_mode=auto`` follows): a checkpoint verl calls complete always has its state, and a save that
fails half-way leaves the mark on the previous checkpoint.

Read back with every field checked (:func:`read_state`): a regular file (not a FIFO or a link to a device) of at
most :data:`MAX_BYTES`, UTF-8
JSON, an object with exactly these fields, each of its type and range (JSON's ``true`` is not a count, ``2.0``
is not an integer), and a schedule that exists (offline with m = 1, n = 0). Anything else is a
:class:`CheckpointStateError` naming the file and the field: a resume from a damaged state stops. A missing
file is not damage (a checkpoint written by another trainer mode, or before this file existed): ``None``, and
the trainer restarts the counts from the schedule with a warning.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional

from verl_ext.checks.values import ConfigError
from verl_ext.files import parse_json, read_bounded, write_whole
from verl_ext.staleness.setting import check_setting

STATE_FILE = "delayed_sync_state.json"
MAX_BYTES = 64 * 1024  # the file is about 100 bytes
MAX_COUNT = 2**53  # counts are logged as floats: exact up to here


class CheckpointStateError(ValueError):
    """A damaged ``delayed_sync_state.json``: the message names the file and the field."""


@dataclass(frozen=True)
class DelayedSyncState:
    sync_interval: int
    sync_offset: int
    offline: bool
    weight_syncs: int
    weight_pushes: int

    def schedule(self) -> tuple[int, int, bool]:
        return self.sync_interval, self.sync_offset, self.offline


# field -> (what it must be, minimum for a count or None for a bool)
_FIELDS: dict[str, tuple[str, Optional[int]]] = {
    "sync_interval": (f"an integer in 1..{MAX_COUNT}", 1),
    "sync_offset": (f"an integer in 0..{MAX_COUNT}", 0),
    "offline": ("true or false", None),
    "weight_syncs": (f"an integer in 0..{MAX_COUNT}", 0),
    "weight_pushes": (f"an integer in 0..{MAX_COUNT}", 0),
}
assert list(_FIELDS) == [field.name for field in fields(DelayedSyncState)]


def state_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / STATE_FILE


def write_state(folder: str | os.PathLike, state: DelayedSyncState) -> Path:
    """Write ``state`` into ``folder`` (made when missing) as :data:`STATE_FILE`, whole or not at all
    (:func:`verl_ext.files.write_whole`): an earlier file stays as it was when anything fails."""
    data = _check(asdict(state), "the state to write")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, sort_keys=True) + "\n"
    return write_whole(state_path(folder), lambda file: file.write(text.encode("utf-8")))


def read_state(folder: str | os.PathLike) -> Optional[DelayedSyncState]:
    """The state in ``folder``; None when the checkpoint has no state file; CheckpointStateError (naming the
    file and the field) when it has one that is not a whole, valid state."""
    path = state_path(folder)
    if not os.path.exists(path):
        if os.path.lexists(path):
            raise CheckpointStateError(f"{path}: a symbolic link to nothing, not the delayed_sync state")
        return None
    content = read_bounded(path, MAX_BYTES, "delayed_sync state (about 100 bytes)", CheckpointStateError)
    if not content.strip():
        raise CheckpointStateError(f"{path}: empty (a save cut short?); the delayed_sync state is a JSON object "
                                   f"with {', '.join(_FIELDS)}")
    data = parse_json(content, path, CheckpointStateError, not_text=", not the delayed_sync state",
                      cut_short="; a save cut short?")
    return DelayedSyncState(**_check(data, str(path)))


def _check(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise CheckpointStateError(f"{where}: expected a JSON object with {', '.join(_FIELDS)}, got {type(data).__name__}")
    missing = [name for name in _FIELDS if name not in data]
    if missing:
        raise CheckpointStateError(f"{where}, field {missing[0]!r}: missing (expected {_FIELDS[missing[0]][0]})")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise CheckpointStateError(f"{where}, field {unknown[0]!r}: not a field of the delayed_sync state "
                                   f"(fields: {', '.join(_FIELDS)})")
    for name, (expected, minimum) in _FIELDS.items():
        value = data[name]
        if minimum is None:
            valid = isinstance(value, bool)
        else:
            valid = isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= MAX_COUNT
        if not valid:
            raise CheckpointStateError(f"{where}, field {name!r}: expected {expected}, got {value!r}")
    try:  # a schedule that exists: the setting's one rule (offline has 1 and 0)
        check_setting(data["sync_interval"], data["sync_offset"], data["offline"])
    except ConfigError as error:
        raise CheckpointStateError(f"{where}, field 'offline': {error}") from None
    return data
