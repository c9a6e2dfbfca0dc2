"""Several staleness settings in one run (``trainer.v1.delayed_sync.phases``): each phase step by step is its own
setting run from the phase's start, every batch is generated exactly once by the version the schedule names, the
pushes are the ones each step needs, and a bad phase list is refused before Ray naming the key and what it allows."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.recipe_config import compose_recipe
from verl_ext.config_values import ConfigError
from verl_ext.staleness.config import DelayedSyncConfig, check_staleness_keys, delayed_sync_config_from, read_phases
from verl_ext.staleness.schedule import PhasedSchedule, StalenessSchedule

MODE = "trainer.v1.trainer_mode=delayed_sync"
# the lease's phases: verl's sync (1, 0) for 4 steps, (4, 1) with overlap for 12, (4, 0) for 12
LEASE = [dict(start_step=0, sync_interval=1), dict(start_step=4, sync_interval=4, sync_offset=1, overlap=True),
         dict(start_step=16, sync_interval=4)]


def phased(entries) -> PhasedSchedule:
    return PhasedSchedule(read_phases(entries))


@st.composite
def phase_lists(draw):
    """Valid phase lists: each phase's length a multiple of its interval and at least its start-up."""
    entries, start = [], 0
    for index in range(draw(st.integers(2, 4))):
        m, n = draw(st.integers(1, 5)), draw(st.integers(0, 6))
        overlap = n >= 1 and draw(st.booleans())
        entries.append(dict(start_step=start, sync_interval=m, sync_offset=n, overlap=overlap))
        least = StalenessSchedule(m, n).startup_steps()
        start += least + m * draw(st.integers(0, 3))
    return entries, start + draw(st.integers(1, 20))  # the last phase's steps


def simulate(schedule, total: int) -> dict[int, int]:
    """Run the trainer's push/generate loop (DelayedSyncTrainer.on_init_end / on_step_end) on the pure schedule:
    {step: the version that generated its batch}; a batch generated twice fails."""
    generated: dict[int, int] = {}

    def generate(version):
        for step in schedule.steps_generated_with(version, total):
            assert step not in generated, f"step {step} generated twice"
            generated[step] = version

    generate(0)
    for step in range(total):
        assert step in generated, f"step {step}: its batch was never generated before it"
        if schedule.synced_after(step):
            generate(step + 1)
    return generated


@settings(max_examples=100, deadline=None)
@given(phase_lists())
def test_each_phase_is_its_own_setting_from_its_start_and_every_batch_comes_once(case):
    entries, total = case
    schedule = phased(entries)
    starts = [entry["start_step"] for entry in entries] + [None]
    generated = simulate(schedule, total)
    assert generated == {step: schedule.behaviour_version(step) for step in range(total)}
    for index, entry in enumerate(entries):
        own = StalenessSchedule(entry["sync_interval"], entry["sync_offset"])
        start, end = entry["start_step"], starts[index + 1] or total
        for step in range(start, min(end, total)):
            assert schedule.lag(step) == own.lag(step - start), (index, step)
            assert schedule.overlap_at(step) is entry["overlap"]
    for count in range(total + 1):
        assert schedule.sync_count(count) == sum(schedule.synced_after(step) for step in range(count))


def test_the_lease_phases_push_decision_step_by_step():
    schedule = phased(LEASE)
    pushed = [step for step in range(28) if schedule.synced_after(step)]
    # sync: after every step, the last push (step 3) generating (4, 1)'s start-up; (4, 1): its sync points 6 and 10
    # (versions 7 and 11 for steps 8-11 and 12-15), none at 14 (its batches would be (4, 0)'s), the boundary at 15;
    # (4, 0): every 4th step, the last phase as a run of its own
    assert pushed == [0, 1, 2, 3, 6, 10, 15, 19, 23, 27]
    assert [list(schedule.steps_generated_with(step + 1, 28)) for step in (3, 6, 15)] == [
        [4, 5, 6, 7], [8, 9, 10, 11], [16, 17, 18, 19]]
    assert [schedule.lag(step) for step in range(28)] == [0] * 4 + [0, 1, 2, 3, 1, 2, 3, 4, 1, 2, 3, 4] + [0, 1, 2, 3] * 3
    windows = schedule.windows(28)
    assert [(window.first, list(window.averaged)) for window in windows] == [
        (0, [1, 2]), (4, list(range(5, 13))), (16, list(range(17, 25)))]


def test_a_window_holds_whole_intervals_whose_generations_stay_in_the_phase():
    schedule = phased(LEASE)
    for window, entry in zip(schedule.windows(28), LEASE):
        m = entry["sync_interval"]
        assert len(window.averaged) % m == 0
        pushes = [step for step in window.averaged if schedule.synced_after(step)]
        assert len(pushes) == len(window.averaged) // m  # one generation per interval
        assert all(len(schedule.steps_generated_with(step + 1, 28)) == m for step in pushes)
    # a phase too short for one clean interval averages nothing
    short = phased([dict(start_step=0, sync_interval=1), dict(start_step=2, sync_interval=4)])
    assert list(short.windows(7)[0].averaged) == [] and list(short.windows(7)[1].averaged) == []


@pytest.mark.parametrize("entries,message", [
    ([dict(start_step=0, sync_interval=4), dict(start_step=6, sync_interval=1)],
     r"phases\[1\].start_step=6 is invalid: allowed values are 0 \+ a multiple of 4 \(phase 0's sync_interval\) that "
     r"is at least 4 \(its start-up\), e.g. 4, 8"),
    ([dict(start_step=0, sync_interval=4, sync_offset=5), dict(start_step=4, sync_interval=1)],
     r"phases\[1\].start_step=4 is invalid: allowed values are 0 \+ a multiple of 4 .* at least 8"),
    ([dict(start_step=1, sync_interval=1), dict(start_step=2, sync_interval=1)], r"phases\[0\].start_step=1 is invalid"),
    ([dict(start_step=0, sync_interval=1)], r"phases=.* allowed values are a list of two or more mappings"),
    ([dict(start_step=0, sync_interval=1), dict(start_step=2, sync_interval=0)],
     r"phases\[1\].sync_interval=0 is invalid: allowed values are an integer >= 1"),
    ([dict(start_step=0, sync_interval=1, overlap=True), dict(start_step=2, sync_interval=1)],
     r"phases\[0\].sync_offset=0 is invalid: allowed values are an integer >= 1 with .*phases\[0\].overlap=true"),
    ([dict(start_step=0, sync_interval=1, offset=1), dict(start_step=2, sync_interval=1)],
     r"phases\[0\] has unknown key\(s\) offset: allowed keys are start_step, sync_interval, sync_offset, overlap"),
    ([dict(start_step=0), dict(start_step=2, sync_interval=1)], r"phases\[0\] has no sync_interval"),
    ("sync", r"phases='sync' is invalid"),
])
def test_a_bad_phase_list_is_refused_naming_the_key(entries, message):
    with pytest.raises(ConfigError, match=message):
        read_phases(entries)


def test_phases_replace_the_single_setting_keys():
    with pytest.raises(ConfigError, match=r"delayed_sync.sync_interval=4 is invalid: allowed values are 1 \(its default\) "
                                          r"with trainer.v1.delayed_sync.phases set"):
        DelayedSyncConfig(sync_interval=4, phases=LEASE)
    block = DelayedSyncConfig(phases=LEASE)
    assert block.any_overlap and block.schedule() == phased(LEASE)
    assert [block.overlap_at(step) for step in (3, 4, 15, 16)] == [False, True, True, False]


PHASES_OVERRIDE = ("trainer.v1.delayed_sync.phases=[{start_step:0,sync_interval:1},"
                   "{start_step:4,sync_interval:4,sync_offset:1,overlap:true},{start_step:16,sync_interval:4}]")


def test_phases_compose_from_a_hydra_override_and_pass_the_drivers_checks():
    config = compose_recipe(MODE, PHASES_OVERRIDE, "actor_rollout_ref.rollout.free_cache_engine=false",
                            "trainer.total_training_steps=28", "trainer.save_freq=-1", "trainer.resume_mode=disable")
    check_staleness_keys(config)
    assert delayed_sync_config_from(config).schedule() == phased(LEASE)
    # the dry run's summary names the phases, not the single-setting keys (left at their defaults)
    from omegaconf import OmegaConf

    from verl_ext.preflight import summarize

    _, lines = summarize(OmegaConf.to_container(config, resolve=True))
    assert dict(lines)["staleness"] == ("delayed_sync phases on_policy from step 0, sync_interval_4_offset_1+overlap "
                                        "from step 4, sync_interval_4 from step 16; over 28 steps: 10 weight pushes")


@pytest.mark.parametrize("extra,message", [
    (("actor_rollout_ref.rollout.free_cache_engine=true",), r"free_cache_engine=True is invalid: allowed values are false"),
    (("trainer.total_training_steps=16",), r"trainer.total_training_steps=16 is invalid: allowed values are an integer > 16"),
    (("trainer.save_freq=5",), r"trainer.save_freq=5 is invalid: allowed values are -1 with trainer.v1.delayed_sync.phases"),
    (("trainer.v1.delayed_sync.overlap=true",), r"delayed_sync.overlap=True is invalid: allowed values are false \(its default\)"),
])
def test_a_phased_run_the_trainer_cannot_honour_is_refused_before_ray(extra, message):
    base = ("actor_rollout_ref.rollout.free_cache_engine=false", "trainer.total_training_steps=28",
            "trainer.save_freq=-1", "trainer.resume_mode=disable")
    config = compose_recipe(MODE, PHASES_OVERRIDE, *base, *extra)
    with pytest.raises(ConfigError, match=message):
        check_staleness_keys(config)


def test_phases_outside_delayed_sync_are_refused():
    config = compose_recipe("trainer.v1.trainer_mode=sync", PHASES_OVERRIDE)
    with pytest.raises(ConfigError, match=r"trainer.v1.delayed_sync.phases=.* outside trainer.v1.trainer_mode=delayed_sync"):
        check_staleness_keys(config)
