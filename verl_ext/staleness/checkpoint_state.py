"""The delayed_sync trainer's own part of a checkpoint: ``delayed_sync_state.json`` in verl's
``<trainer.default_local_dir>/global_step_<g>/`` folder, beside verl's ``actor/``, ``data.pt`` and
``transfer_queue/``.

===================  =====================  =========================================================
field                type, range            meaning
===================  =====================  =========================================================
``sync_interval``    integer >= 1           the schedule the checkpoint was written with (m)
``sync_offset``      integer >= 0           (n)
``offline``          true or false          (with offline, m = 1 and n = 0)
``weight_syncs``     integer >= 0           pushes at the schedule's sync points so far (a redone one
                                            after a resume included): ``staleness/weight_syncs``
``weight_pushes``    integer >= 0           every push so far (start-up, syncs, validation):
                                            ``staleness/weight_pushes``
``schedule_since``   integer >= 0           the global step from which the run has followed this
                                            schedule: 0, or the step of the resume that changed it
===================  =====================  =========================================================

Written whole or not at all (:func:`write_state`, :func:`verl_ext.files.write_whole`): a temporary file in the
same folder, flushed and fsync'ed, renamed over the name, the folder fsync'ed. The trainer writes it *before* verl's ``_save_checkpoint``, whose
last act is ``latest_checkpointed_iteration.txt`` (the mark that the checkpoint is complete, which a resume
with ``resume_mode=auto`` follows): a checkpoint verl calls complete always has its state, and a save that
fails half-way leaves the mark on the previous checkpoint.

Read back with every field checked (:func:`read_state`): a regular file (not a FIFO or a link to a device) of at
most :data:`MAX_BYTES`, UTF-8
JSON, an object with exactly these fields, each of its type and range (JSON's ``true`` is not a count, ``2.0``
is not an integer), a schedule that exists (offline with m = 1, n = 0), and counts the schedule can give
(:func:`check_counts`). Anything else is a :class:`CheckpointStateError` naming the file and the field: a resume
from a damaged state stops -- in the driver before Ray starts (:func:`check_resumed_state`) and again in the
trainer. A missing file is not damage (a checkpoint written by another trainer mode, or before this file
existed): ``None``, and the trainer restarts the counts from the schedule with a warning.

**The counts a schedule can give.** The checkpoint of global step g is written inside step g - 1, before that
step's sync point. A run from scratch pushes once before step 0 (not a sync) and at most once per finished step
(a sync point, or else one push for validation); a resume pushes at most once before its first step (redoing
the sync of step g - 1 if it was a sync point, counted as a sync) and goes on from the checkpoint's counts, and
a chain of resumes goes through checkpoints of increasing steps. So, with S(T) = the schedule's sync points
after steps 0..T-1 (:meth:`~verl_ext.staleness.schedule.StalenessSchedule.sync_count`) and f = ``schedule_since``:

- ``weight_syncs + 1 <= weight_pushes <= g`` (every sync is a push, the first push is not a sync), f < g;
- the sync points of this schedule since f are all counted: L = S(g - 1) - S(max(f - 1, 0)) (steps
  max(f - 1, 0) .. g - 2), each possibly redone once by a resume, and at most f - 1 syncs come from before f:
  ``L <= weight_syncs <= max(f - 1, 0) + 2 L``.

1,000 syncs at step 5, fewer syncs than the schedule's sync points, more syncs than pushes: refused. g is read
from the folder's name as verl reads it (the text after its last ``global_step_``); a folder named otherwise
gets the checks that need no step.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional

from verl_ext.checks.resume import resumed_folder, step_of
from verl_ext.config_values import ConfigError
from verl_ext.files import parse_json, read_bounded, write_whole
from verl_ext.staleness.schedule import StalenessSchedule
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
    schedule_since: int = 0

    def schedule(self) -> tuple[int, int, bool]:
        return self.sync_interval, self.sync_offset, self.offline


# field -> (what it must be, minimum for a count or None for a bool)
_FIELDS: dict[str, tuple[str, Optional[int]]] = {
    "sync_interval": (f"an integer in 1..{MAX_COUNT}", 1),
    "sync_offset": (f"an integer in 0..{MAX_COUNT}", 0),
    "offline": ("true or false", None),
    "weight_syncs": (f"an integer in 0..{MAX_COUNT}", 0),
    "weight_pushes": (f"an integer in 0..{MAX_COUNT}", 0),
    "schedule_since": (f"an integer in 0..{MAX_COUNT}", 0),
}
# a file written before schedule_since existed: the counts cannot be checked against a schedule without it
OLDER_FILE = ("; written by an older verl-ext? Remove the file to resume with the schedule's counts (as for a "
              "checkpoint of another trainer mode)")
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
    state = DelayedSyncState(**_check(data, str(path)))
    check_counts(state, str(path), step_of(Path(folder).absolute()))
    return state


def check_resumed_state(config: Any) -> None:
    """In the driver, before Ray: the state of the checkpoint a ``delayed_sync`` run will resume from
    (:func:`verl_ext.checks.resume.resumed_folder`), read as the trainer reads it; a damaged one is a
    :class:`ConfigError` with the reader's message (the file and the field)."""
    folder = resumed_folder(config)
    if folder is None:
        return
    try:
        read_state(folder)
    except CheckpointStateError as error:
        raise ConfigError(str(error)) from error


def check_counts(state: DelayedSyncState, where: str, step: Optional[int]) -> None:
    """The counts of ``state`` against what its schedule can give by the checkpoint of global step ``step`` (None:
    unknown, only the checks that need no step); see the module docstring. CheckpointStateError naming the field."""

    def refuse(field: str, message: str) -> None:
        raise CheckpointStateError(f"{where}, field {field!r}: {message}")

    syncs, pushes, since = state.weight_syncs, state.weight_pushes, state.schedule_since
    if pushes < syncs + 1:
        refuse("weight_pushes", f"{pushes} pushes with {syncs} syncs: every sync is a push and the first push (before "
                                f"step 0) is not, so weight_pushes >= weight_syncs + 1 = {syncs + 1}")
    if step is None:
        return
    if step < 1:
        raise CheckpointStateError(f"{where}: in a checkpoint of global step {step}: the trainer saves inside a "
                                   "training step, the first checkpoint is global_step_1")
    if since > step - 1:
        refuse("schedule_since", f"{since} at global step {step}: the schedule was set at the start (0) or at a resume "
                                 f"from an earlier checkpoint (at most {step - 1})")
    if pushes > step:
        refuse("weight_pushes", f"{pushes} at global step {step}: at most one push before the first step and one per "
                                f"finished step, so at most {step}")
    schedule = StalenessSchedule(*state.schedule())
    least = schedule.sync_count(step - 1) - schedule.sync_count(max(since - 1, 0))
    most = max(since - 1, 0) + 2 * least
    if not least <= syncs <= most:
        before = (f"; the {since - 1} step(s) before step {since - 1}, under another schedule, add at most {since - 1}"
                  if since > 1 else "")
        refuse("weight_syncs", f"{syncs} at global step {step} cannot come from the schedule (sync_interval="
                               f"{state.sync_interval}, sync_offset={state.sync_offset}, offline="
                               f"{str(state.offline).lower()}, followed since step {since}): it has {least} sync "
                               f"point(s) by then, each redone at most once by a resume{before}: weight_syncs is in "
                               f"{least}..{most}")


def _check(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise CheckpointStateError(f"{where}: expected a JSON object with {', '.join(_FIELDS)}, got {type(data).__name__}")
    missing = [name for name in _FIELDS if name not in data]
    if missing:
        raise CheckpointStateError(f"{where}, field {missing[0]!r}: missing (expected {_FIELDS[missing[0]][0]})"
                                   + (OLDER_FILE if missing == ["schedule_since"] else ""))
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
