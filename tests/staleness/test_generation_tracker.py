"""The overlap's waiting logic and timing (verl_ext/staleness/generation_tracker.py), without Ray: a
simulated clock, and prompt groups that finish at given simulated times."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.staleness.generation_tracker import (
    WAIT_FOR_BATCH,
    WAIT_FOR_GENERATION,
    GenerationTracker,
    Interval,
    window_timing,
)


class SimulatedEngine:
    """A clock that only ``sleep`` advances, and prompt groups that finish at set times."""

    def __init__(self):
        self.now = 0.0
        self.finish_at: dict[str, float] = {}
        self.polls = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def finished(self, uids: set[str]) -> set[str]:
        self.polls += 1
        return {uid for uid in uids if self.finish_at[uid] <= self.now}

    def submit(self, tracker, version: int, step: int, seconds: float, groups: int = 2) -> None:
        uids = [f"s{step}g{index}" for index in range(groups)]
        for uid in uids:
            self.finish_at[uid] = self.now + seconds
        tracker.submitted(version, {step: uids})


def make_tracker(engine: SimulatedEngine) -> GenerationTracker:
    return GenerationTracker(engine.finished, poll_seconds=0.01, clock=engine.clock, sleep=engine.sleep)


def train(engine: SimulatedEngine, tracker: GenerationTracker, seconds: float) -> None:
    """The trainer trains for ``seconds`` while the watcher thread polls every 0.01 s."""
    for _ in range(round(seconds / 0.01)):
        engine.sleep(0.01)
        tracker.poll()


def test_a_step_waits_only_for_its_own_batch():
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    engine.submit(tracker, version=2, step=3, seconds=1.0)
    engine.submit(tracker, version=2, step=4, seconds=5.0)
    waited = tracker.wait_for_step(3)
    assert waited == pytest.approx(1.0, abs=0.02)
    assert tracker.in_flight and tracker.in_flight_versions() == [2]  # step 4 still generating
    assert tracker.wait_for_step(3) == 0.0  # ready now: no wait
    assert tracker.wait_for_step(7) == 0.0  # not in flight (e.g. restored from a checkpoint)


def test_a_ready_batch_costs_one_look_and_no_wait():
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    engine.submit(tracker, version=0, step=0, seconds=0.5)
    engine.sleep(1.0)  # the trainer trained meanwhile
    polls = engine.polls
    assert tracker.wait_for_step(0) == 0.0
    assert engine.polls == polls + 1
    assert not tracker.waits


def test_a_push_waits_for_every_batch_in_flight():
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    engine.submit(tracker, version=5, step=6, seconds=0.3)
    engine.submit(tracker, version=5, step=7, seconds=2.0)
    assert tracker.wait_for_all() == pytest.approx(2.0, abs=0.02)
    assert not tracker.in_flight
    assert [kind for kind, _ in tracker.waits] == [WAIT_FOR_GENERATION]
    assert tracker.wait_for_all() == 0.0


def test_the_end_of_a_generation_nobody_waits_for_is_recorded_by_polling():
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    engine.submit(tracker, version=1, step=2, seconds=0.4)
    engine.sleep(0.4)
    assert tracker.poll()  # what the watcher thread does while the trainer trains
    engine.sleep(1.6)
    timing = tracker.timing(0.0, engine.now)
    assert timing.engine_busy == pytest.approx(0.4)
    assert timing.generation_hidden == pytest.approx(0.4)  # all of it ran while the trainer trained
    assert timing.wait_for_batch == timing.wait_for_generation == 0.0
    assert timing.engine_busy_fraction == pytest.approx(0.2)


def test_overlapped_pipeline_timing():
    """(1, 1)-like: each step's batch is generated during the previous step's training."""
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    engine.submit(tracker, version=0, step=0, seconds=1.0)
    engine.submit(tracker, version=0, step=1, seconds=1.0)
    window_start = engine.now
    tracker.wait_for_step(0)  # step 0: waits 1 s for its batch, then trains 1.5 s
    train(engine, tracker, 1.5)
    step_0 = tracker.timing(window_start, engine.now)
    assert step_0.wait_for_batch == pytest.approx(1.0, abs=0.02)
    assert step_0.generation_hidden == pytest.approx(0.0, abs=0.02)
    window_start = engine.now
    tracker.wait_for_all()  # the sync point: nothing left in flight (step 1's batch finished at 1.0 s)
    engine.submit(tracker, version=1, step=2, seconds=1.0)
    tracker.wait_for_step(1)
    train(engine, tracker, 1.5)  # step 1 trains while step 2's batch is generated
    step_1 = tracker.timing(window_start, engine.now)
    assert step_1.wait_for_batch == step_1.wait_for_generation == 0.0
    assert step_1.generation_hidden == pytest.approx(1.0, abs=0.02)
    assert step_1.engine_busy_fraction == pytest.approx(1.0 / 1.5, abs=0.02)
    # without the watcher the end is seen only at the next look: the busy time is an upper bound
    engine.submit(tracker, version=2, step=3, seconds=0.5)
    window_start = engine.now
    engine.sleep(1.5)
    assert tracker.timing(window_start, engine.now).engine_busy == pytest.approx(1.5)


def test_handing_a_batch_over_is_waiting_not_hidden_generation():
    """verl's agent loop returns once it has accepted the batch; the first call also waits for its
    workers to start (tens of seconds on a busy CPU): the trainer is idle then, nothing is hidden."""
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    with tracker.dispatching(0, {0: ["a", "b"]}):
        engine.finish_at.update({"a": 31.0, "b": 31.0})
        engine.sleep(30.0)  # blocked in generate_sequences
    assert tracker.in_flight
    tracker.wait_for_all()
    timing = tracker.timing(0.0, engine.now)
    assert timing.engine_busy == pytest.approx(31.0, abs=0.02)
    assert timing.wait_for_generation == pytest.approx(31.0, abs=0.02)
    assert timing.generation_hidden == pytest.approx(0.0, abs=0.02)


def test_without_overlap_preparing_the_next_batch_is_waiting_too():
    """Without overlap the trainer hands over the batches of one version one by one, then waits for all of
    them: the engine generates the first while the trainer prepares the second, and none of it is hidden
    (exactly zero, whatever the machine's load makes the preparation cost)."""

    def hand_over_three_and_wait(engine, tracker):
        for step in range(3):
            engine.sleep(0.7)  # reading the next prompts, putting them into TransferQueue
            with tracker.dispatching(0, {step: [f"s{step}"]}):
                engine.finish_at[f"s{step}"] = engine.now + 1.0
                engine.sleep(0.2)
        tracker.wait_for_all()

    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    with tracker.waiting():
        hand_over_three_and_wait(engine, tracker)
    timing = tracker.timing(0.0, engine.now)
    assert timing.engine_busy == pytest.approx(2.8, abs=0.02)
    assert timing.wait_for_generation == pytest.approx(engine.now)
    assert timing.generation_hidden == pytest.approx(0.0, abs=1e-9)
    # the same hand-overs outside the block: the preparations overlap generation and count as hidden
    engine = SimulatedEngine()
    tracker = make_tracker(engine)
    hand_over_three_and_wait(engine, tracker)
    assert tracker.timing(0.0, engine.now).generation_hidden == pytest.approx(1.4, abs=0.02)


def test_an_open_generation_counts_up_to_the_end_of_the_window():
    busy = [Interval(1.0)]
    timing = window_timing(busy, [], 0.0, 3.0)
    assert timing.engine_busy == pytest.approx(2.0) and timing.generation_hidden == pytest.approx(2.0)


intervals = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 10)).map(lambda pair: (pair[0], pair[0] + pair[1])), max_size=5
)


@settings(max_examples=200, deadline=None)
@given(busy=intervals, batch_waits=intervals, generation_waits=intervals, window=st.tuples(st.integers(0, 30), st.integers(1, 30)))
def test_window_timing_equals_a_tick_by_tick_count(busy, batch_waits, generation_waits, window):
    """Measured on a grid of half-second ticks: busy = ticks in some busy interval, hidden = busy ticks
    in no wait, each wait kind = ticks in one of its waits, all inside the window."""
    start, end = window[0], window[0] + window[1]
    waits = [(WAIT_FOR_BATCH, Interval(*pair)) for pair in batch_waits]
    waits += [(WAIT_FOR_GENERATION, Interval(*pair)) for pair in generation_waits]
    timing = window_timing([Interval(*pair) for pair in busy], waits, start, end)
    ticks = [start + 0.5 * index + 0.25 for index in range(2 * (end - start))]
    inside = lambda t, pairs: any(a <= t < b for a, b in pairs)  # noqa: E731
    all_waits = batch_waits + generation_waits
    assert timing.seconds == end - start
    assert timing.engine_busy == pytest.approx(0.5 * sum(inside(t, busy) for t in ticks))
    assert timing.generation_hidden == pytest.approx(0.5 * sum(inside(t, busy) and not inside(t, all_waits) for t in ticks))
    assert timing.wait_for_batch == pytest.approx(0.5 * sum(inside(t, batch_waits) for t in ticks))
    assert timing.wait_for_generation == pytest.approx(0.5 * sum(inside(t, generation_waits) for t in ticks))
    assert 0.0 <= timing.engine_busy_fraction <= 1.0
