"""The staleness schedule against the paper's formula (Appendix B.2) and against a simulation of the run."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl_ext.staleness.schedule import StalenessSchedule

GRID = [(m, n) for m in range(1, 7) for n in range(0, 9)]
STEPS = 60


def start_up_end(m: int, n: int) -> int:
    """First step at which the steady-state formula holds: the first interval starting after step n."""
    return next(start for start in range(0, 10 * (m + n) + 1, m) if start - n >= 1)


@pytest.mark.parametrize("m,n", GRID)
def test_steady_state_lag_is_l_mod_m_plus_n(m, n):
    schedule = StalenessSchedule(sync_interval=m, sync_offset=n)
    for step in range(start_up_end(m, n), STEPS):
        assert schedule.lag(step) == step % m + n, (m, n, step)


@pytest.mark.parametrize("m,n", GRID)
def test_start_up_batches_come_from_the_initial_policy(m, n):
    schedule = StalenessSchedule(sync_interval=m, sync_offset=n)
    for step in range(start_up_end(m, n)):
        assert schedule.behaviour_version(step) == 0
        assert schedule.lag(step) == step
        # never staler than the steady state would make it
        assert schedule.lag(step) <= step % m + n


@pytest.mark.parametrize("n", range(0, 9))
def test_sync_interval_one_start_up_is_the_first_n_plus_one_batches(n):
    schedule = StalenessSchedule(sync_interval=1, sync_offset=n)
    assert [schedule.lag(step) for step in range(n + 1)] == list(range(n + 1))
    assert all(schedule.lag(step) == n for step in range(n, STEPS))


def test_paper_examples():
    # Appendix B.2: (4, 0) yields 0, 1, 2, 3 within each interval; (1, 4) a constant 4.
    four_zero = StalenessSchedule(sync_interval=4, sync_offset=0)
    assert [four_zero.lag(step) for step in range(12)] == [0, 1, 2, 3] * 3
    one_four = StalenessSchedule(sync_interval=1, sync_offset=4)
    assert [one_four.lag(step) for step in range(4, 20)] == [4] * 16


def test_sync_interval_one_offset_zero_is_on_policy_with_a_push_after_every_step():
    schedule = StalenessSchedule()
    for step in range(STEPS):
        assert schedule.behaviour_version(step) == step
        assert schedule.synced_after(step)
    assert schedule.sync_count(STEPS) == STEPS
    assert schedule.pending_batches_peak(STEPS) == 1


def test_offline_never_syncs_and_uses_the_initial_policy():
    schedule = StalenessSchedule(offline=True)
    assert [schedule.behaviour_version(step) for step in range(STEPS)] == [0] * STEPS
    assert [schedule.lag(step) for step in range(STEPS)] == list(range(STEPS))
    assert schedule.sync_count(STEPS) == 0
    assert list(schedule.steps_generated_with(0, STEPS)) == list(range(STEPS))
    assert list(schedule.steps_generated_with(5, STEPS)) == []
    assert schedule.pending_batches_peak(STEPS) == STEPS


def simulate(schedule: StalenessSchedule, total_steps: int):
    """Run the trainer's protocol step by step: the engine generates with the version it was last pushed.

    Returns the version that generated each step's batch, the number of pushes after steps, and the most
    batches pending at once. Uses only synced_after and steps_generated_with, not behaviour_version.
    """
    generated_by: dict[int, int] = {}
    for step in schedule.steps_generated_with(0, total_steps):
        generated_by[step] = 0
    pushes, peak = 0, len(generated_by)
    for step in range(total_steps):
        assert step in generated_by, f"step {step} has no batch"
        if schedule.synced_after(step):
            pushes += 1
            for planned in schedule.steps_generated_with(step + 1, total_steps):
                assert planned > step, "a version generated a batch for a step already trained"
                assert planned not in generated_by, f"step {planned} generated twice"
                generated_by[planned] = step + 1
        peak = max(peak, sum(1 for planned in generated_by if planned > step))
    # a version that is never pushed generates nothing
    for version in range(1, total_steps + 1):
        if not schedule.synced_after(version - 1):
            assert list(schedule.steps_generated_with(version, total_steps)) == []
    return generated_by, pushes, peak


@given(
    m=st.integers(min_value=1, max_value=12),
    n=st.integers(min_value=0, max_value=15),
    total_steps=st.integers(min_value=0, max_value=50),
    offline=st.booleans(),
)
def test_simulated_run_matches_the_schedule(m, n, total_steps, offline):
    schedule = StalenessSchedule(offline=True) if offline else StalenessSchedule(sync_interval=m, sync_offset=n)
    generated_by, pushes, peak = simulate(schedule, total_steps)
    assert generated_by == {step: schedule.behaviour_version(step) for step in range(total_steps)}
    assert pushes == schedule.sync_count(total_steps) == sum(row.synced for row in schedule.preview(total_steps))
    assert peak == schedule.pending_batches_peak(total_steps)
    lags = [schedule.lag(step) for step in range(total_steps)]
    assert schedule.lag_range(total_steps) == ((min(lags), max(lags)) if lags else (0, 0))
    # a batch is never generated by weights newer than those being trained when it is consumed
    assert all(schedule.lag(step) >= 0 for step in range(total_steps))


def test_preview_rows_agree_with_the_functions():
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    rows = schedule.preview(7)
    assert [row.step for row in rows] == list(range(7))
    for row in rows:
        assert row.behaviour_version == schedule.behaviour_version(row.step)
        assert row.lag == row.step - row.behaviour_version
        assert row.synced == schedule.synced_after(row.step)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"sync_interval": 0}, "sync_interval=0 is invalid: allowed values are an integer >= 1"),
        ({"sync_interval": 2.0}, "sync_interval=2.0 is invalid: allowed values are an integer >= 1"),
        ({"sync_interval": True}, "sync_interval=True is invalid: allowed values are an integer >= 1"),
        ({"sync_offset": -1}, "sync_offset=-1 is invalid: allowed values are an integer >= 0"),
        ({"offline": "yes"}, "offline='yes' is invalid: allowed values are true or false"),
        # offline ignores both: a non-default value is a contradiction, not silently dropped
        ({"offline": True, "sync_interval": 20}, "sync_interval=20 is invalid: allowed values are 1 .the default. "
                                                 "with offline=true. Offline never pushes weights after the start, so "
                                                 "sync_interval and sync_offset would be silently ignored"),
        ({"offline": True, "sync_offset": 3}, "sync_offset=3 is invalid: allowed values are 0 .the default. with "
                                              "offline=true"),
    ],
)
def test_invalid_schedules_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StalenessSchedule(**kwargs)


def test_invalid_steps_are_rejected():
    schedule = StalenessSchedule()
    with pytest.raises(ValueError, match="0-based"):
        schedule.lag(-1)
    with pytest.raises(ValueError, match="number of steps"):
        schedule.preview(-2)


@given(m=st.integers(min_value=1, max_value=25), n=st.integers(min_value=0, max_value=30))
def test_host_memory_holds_at_most_m_plus_n_batches(m, n):
    # docs/staleness.md states this bound for the FIFO design
    schedule = StalenessSchedule(sync_interval=m, sync_offset=n)
    assert schedule.pending_batches_peak(3 * (m + n) + 5) == m + n


@pytest.mark.parametrize("schedule", [StalenessSchedule(20, 10), StalenessSchedule(1, 0), StalenessSchedule(offline=True)])
def test_summaries_of_any_run_length_are_constant_time(schedule):
    """A dry run of trainer.total_training_steps=1e12 summarises the schedule without listing its steps."""
    steps = 10**12
    assert schedule.sync_count(steps) == (0 if schedule.offline else (steps + schedule.sync_offset) // schedule.sync_interval
                                          - schedule.sync_offset // schedule.sync_interval)
    assert schedule.lag_range(steps)[1] == (steps - 1 if schedule.offline else schedule.sync_interval - 1 + schedule.sync_offset)
    assert schedule.pending_batches_peak(steps) == (steps if schedule.offline else schedule.sync_interval + schedule.sync_offset)
    rows = schedule.rows(steps - 2, steps)  # any window, one row at a time
    assert [row.step for row in rows] == [steps - 2, steps - 1]


def test_a_preview_list_is_capped_with_a_message():
    from verl_ext.staleness.schedule import MAX_PREVIEW_STEPS

    with pytest.raises(ValueError, match=f"at most {MAX_PREVIEW_STEPS} steps, got {MAX_PREVIEW_STEPS + 1}"):
        StalenessSchedule(3, 1).preview(MAX_PREVIEW_STEPS + 1)
