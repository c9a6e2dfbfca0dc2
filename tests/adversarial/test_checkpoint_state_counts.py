"""The counts of a delayed_sync checkpoint state against its schedule (verl_ext.staleness.checkpoint_state):
every state the trainer can write is read back, and a count no run can reach is refused naming the file and
the field -- 1,000 syncs at step 5 once resumed as if nothing were wrong.

The states the trainer can write come from a step-by-step simulation of its pushes (hypothesis draws the
schedules, the validation pushes, the crashes, which checkpoint each resume takes, schedule changes at a resume and
resumes from a checkpoint without a state), following the trainer's rules, not the closed forms the reader
checks: one push before step 0 at a fresh start; at a resume, the sync of step g - 1 redone if it was a sync point,
else at most one push; after each step its sync, else at most one push for validation; the checkpoint of global
step g written inside step g - 1, before that step's sync. The same reader inside the trainer's real save and
resume: tests/staleness/test_checkpoint_state.py; in the driver before Ray: test_resume_checks.py."""

import json
from dataclasses import asdict, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.staleness.checkpoint_state import (
    STATE_FILE,
    CheckpointStateError,
    DelayedSyncState,
    read_state,
)
from verl_ext.staleness.schedule import StalenessSchedule

settings_ = st.one_of(
    st.just((1, 0, True)),
    st.tuples(st.integers(1, 6), st.integers(0, 7), st.just(False)),
)


def write(folder, state: DelayedSyncState, **changes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STATE_FILE).write_text(json.dumps({**asdict(state), **changes}))
    return folder


@st.composite
def written_states(draw):
    """(global step, state) of every checkpoint a simulated chain of runs writes."""
    total = draw(st.integers(1, 30))
    written: dict[int, DelayedSyncState] = {}
    schedule = StalenessSchedule(*draw(settings_))
    syncs, pushes, since, step = 0, 1, 0, 0  # a fresh start: the start-up push (not a sync)
    for _segment in range(draw(st.integers(1, 4))):
        stop = draw(st.integers(step + 1, total)) if step < total else step  # crash or end after this step
        for current in range(step, stop):
            written[current + 1] = DelayedSyncState(*as_tuple(schedule), syncs, pushes, since)
            if schedule.synced_after(current):
                syncs, pushes = syncs + 1, pushes + 1
            elif draw(st.booleans()):  # a validation push
                pushes += 1
        if not written:
            break
        resume_at = draw(st.sampled_from(sorted(written)))  # any complete checkpoint of this chain
        old = written[resume_at]
        written = {g: state for g, state in written.items() if g <= resume_at}
        new = StalenessSchedule(*draw(settings_)) if draw(st.booleans()) else StalenessSchedule(*old.schedule())
        if draw(st.integers(0, 5)) == 0:  # a checkpoint of another trainer mode: the schedule's counts
            syncs = new.sync_count(resume_at - 1)
            pushes, since = syncs + 1, 0
        else:
            syncs, pushes = old.weight_syncs, old.weight_pushes
            since = old.schedule_since if as_tuple(new) == old.schedule() else resume_at
        schedule, step = new, resume_at
        if resume_at < total and schedule.synced_after(resume_at - 1):
            syncs, pushes = syncs + 1, pushes + 1  # the sync of step g - 1 redone
        elif draw(st.booleans()):  # batches to regenerate, or the validation before training
            pushes += 1
    return sorted(written.items())


def as_tuple(schedule: StalenessSchedule) -> tuple[int, int, bool]:
    return schedule.sync_interval, schedule.sync_offset, schedule.offline


@settings(max_examples=300, deadline=None)
@given(written_states())
def test_every_state_a_chain_of_runs_can_write_is_read_back(tmp_path_factory, states):
    root = tmp_path_factory.mktemp("checkpoints")
    for step, state in states:
        assert read_state(write(root / f"global_step_{step}", state)) == state


@settings(max_examples=200, deadline=None)
@given(written_states(), st.data())
def test_a_count_no_run_can_reach_is_refused_naming_the_field(tmp_path_factory, states, data):
    step, state = data.draw(st.sampled_from(states))
    schedule = StalenessSchedule(*state.schedule())
    impossible = {
        "weight_syncs": [state.weight_pushes, step, step + 1000, 10**6],  # a sync is a push, one per step at most
        "weight_pushes": [state.weight_syncs, step + 1, 2 * step + 7],
        "schedule_since": [step, step + 10],
    }
    if state.schedule_since == 0:  # this schedule from the start: each of its sync points happened, at most twice
        impossible["weight_syncs"] += [schedule.sync_count(step - 1) - 1, 2 * schedule.sync_count(step - 1) + 1]
    field = data.draw(st.sampled_from(sorted(impossible)))
    value = data.draw(st.sampled_from([v for v in impossible[field] if v >= 0] or [10**6]))
    folder = write(tmp_path_factory.mktemp("checkpoints") / f"global_step_{step}", state, **{field: value})
    with pytest.raises(CheckpointStateError) as raised:
        read_state(folder)
    message = str(raised.value)
    assert message.startswith(str(folder / STATE_FILE)), message
    assert "field '" in message, message


@pytest.mark.parametrize("changes,field", [
    ({"weight_syncs": 1000, "weight_pushes": 1001}, "weight_pushes"),  # the issue's case: 1,000 syncs at step 5
    ({"weight_syncs": 1000}, "weight_pushes"),
    ({"weight_syncs": 4, "weight_pushes": 5}, "weight_syncs"),  # m=4: one sync point by step 5, at most 2 syncs
    ({"weight_syncs": 0, "weight_pushes": 1}, "weight_syncs"),  # fewer syncs than the schedule's sync points
    ({"weight_pushes": 0}, "weight_pushes"),
    ({"schedule_since": 5}, "schedule_since"),
])
def test_the_issues_cases_at_step_5(tmp_path, changes, field):
    good = DelayedSyncState(sync_interval=4, sync_offset=0, offline=False, weight_syncs=1, weight_pushes=3)
    assert read_state(write(tmp_path / "ok" / "global_step_5", good)) == good
    folder = write(tmp_path / "bad" / "global_step_5", good, **changes)
    with pytest.raises(CheckpointStateError, match=f"field '{field}'"):
        read_state(folder)


def test_offline_has_no_sync_and_global_step_0_holds_no_state(tmp_path):
    offline = DelayedSyncState(sync_interval=1, sync_offset=0, offline=True, weight_syncs=0, weight_pushes=4)
    assert read_state(write(tmp_path / "global_step_6", offline)) == offline
    with pytest.raises(CheckpointStateError, match="field 'weight_syncs'"):
        read_state(write(tmp_path / "a" / "global_step_6", replace(offline, weight_syncs=1)))
    with pytest.raises(CheckpointStateError, match="global step 0"):
        read_state(write(tmp_path / "global_step_0", replace(offline, weight_pushes=1)))


def test_a_state_of_an_older_verl_ext_names_the_missing_field_and_the_way_out(tmp_path):
    older = {"sync_interval": 2, "sync_offset": 0, "offline": False, "weight_syncs": 1, "weight_pushes": 2}
    folder = tmp_path / "global_step_3"
    folder.mkdir()
    (folder / STATE_FILE).write_text(json.dumps(older))
    with pytest.raises(CheckpointStateError, match="field 'schedule_since': missing .*older verl-ext.*Remove the file"):
        read_state(folder)
