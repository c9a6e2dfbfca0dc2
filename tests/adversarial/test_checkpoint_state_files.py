"""The delayed_sync checkpoint state file (:mod:`verl_ext.staleness.checkpoint_state`) against generated and
hostile content: reading any bytes either gives a state whose every field is in range or a
CheckpointStateError naming the file (never another exception, a hang or an accepted impossible count); a write
that fails leaves the earlier file whole. The same reader and writer inside the trainer's real save and resume,
with verl's checkpoint layout: tests/staleness/test_checkpoint_state.py."""

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.run_scripts.scripts import REPO
from verl_ext.staleness.checkpoint_state import (
    MAX_COUNT,
    STATE_FILE,
    CheckpointStateError,
    DelayedSyncState,
    read_state,
    write_state,
)

GOOD = DelayedSyncState(sync_interval=4, sync_offset=2, offline=False, weight_syncs=7, weight_pushes=9)
FIELDS = ("sync_interval", "sync_offset", "offline", "weight_syncs", "weight_pushes")
values = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.lists(st.integers(), max_size=2))


def assert_valid(state: DelayedSyncState) -> None:
    for name in ("sync_interval", "sync_offset", "weight_syncs", "weight_pushes"):
        value = getattr(state, name)
        assert type(value) is int and (1 if name == "sync_interval" else 0) <= value <= MAX_COUNT, (name, value)
    assert type(state.offline) is bool
    assert not state.offline or (state.sync_interval, state.sync_offset) == (1, 0)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*FIELDS, "other"]), values, max_size=6) | st.just(None))
def test_any_json_object_is_a_valid_state_or_an_error_naming_the_file_and_field(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("state")
    fields = {**GOOD.__dict__, **(data or {})} if data is not None else {}
    (folder / STATE_FILE).write_text(json.dumps(fields))
    try:
        state = read_state(folder)
    except CheckpointStateError as error:
        assert str(error).startswith(str(folder / STATE_FILE))
        assert data is None or "field '" in str(error) or "not JSON" in str(error), str(error)
        return
    assert_valid(state)
    assert state == DelayedSyncState(**fields)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_valid_state_or_an_error_naming_the_file(tmp_path_factory, content):
    folder = tmp_path_factory.mktemp("state")
    (folder / STATE_FILE).write_bytes(content)
    try:
        state = read_state(folder)
    except CheckpointStateError as error:
        assert str(error).startswith(str(folder / STATE_FILE))
        return
    assert_valid(state)


def test_an_impossible_state_is_never_written(tmp_path):
    for bad in (GOOD.__dict__ | {"weight_syncs": -1}, GOOD.__dict__ | {"offline": True}, GOOD.__dict__ | {"sync_offset": 1.0}):
        try:
            write_state(tmp_path, DelayedSyncState(**bad))
        except CheckpointStateError:
            continue
        raise AssertionError(f"wrote {bad}")
    assert not (tmp_path / STATE_FILE).exists()


FAILING_WRITE = """
import resource, sys
from verl_ext.staleness.checkpoint_state import DelayedSyncState, write_state
resource.setrlimit(resource.RLIMIT_FSIZE, (40, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
write_state(sys.argv[1], DelayedSyncState(sync_interval=1, sync_offset=0, offline=False, weight_syncs=123456, weight_pushes=654321))
"""


def test_a_write_cut_short_by_a_file_size_limit_leaves_the_earlier_state_whole(tmp_path):
    """The new state (about 100 bytes) cannot be written whole under a 40-byte limit (EFBIG, as a full disk
    gives ENOSPC): the earlier state stays, readable, and no temporary file is left."""
    write_state(tmp_path, GOOD)
    earlier = (tmp_path / STATE_FILE).read_bytes()
    completed = subprocess.run([sys.executable, "-c", FAILING_WRITE, str(tmp_path)], cwd=REPO, capture_output=True,
                               text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert completed.returncode != 0 and "File too large" in completed.stderr, completed.stderr[-2000:]
    assert (tmp_path / STATE_FILE).read_bytes() == earlier and read_state(tmp_path) == GOOD
    assert [path.name for path in tmp_path.iterdir()] == [STATE_FILE]
