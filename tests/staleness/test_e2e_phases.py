"""A phased run (``trainer.v1.delayed_sync.phases``) against separate runs of its phases, real ``main_ppo`` on the
CPU backend: (1, 0) for 2 steps then (2, 0) for 2 steps in one start, and (1, 0) and (2, 0) each in a start of its
own, 4 steps each, the same seed.

With the learning rate at 0 every policy version holds the initial weights, so a step's batch depends only on its
seed and prompts (verl_ext.seeding: per-request seeds from the step) and not on which version generated it: then the
phased run's step l must equal, number for number, step l of the separate run of its phase (rewards, response
lengths, log-probs, losses, gradient norms), and its staleness metrics (behaviour version, lag) must be those of
that run at that step, since at an aligned boundary a phase with n = 0 runs exactly as its own run would there. The
pushes are the phased schedule's: after steps 1, 2, 3 of the run (the boundary after step 2 generates (2, 0)'s
first interval), not the separate runs'. What cannot be compared this way (timing) is left out.

``extended``: three starts cost the default suite far more than a minute of CPU; run with
``pytest -m extended tests/staleness/test_e2e_phases.py``.
"""

import pytest

from tests.background_runs import print_costs
from tests.staleness.e2e_runs import SMALL_BATCHES
from verl_ext.staleness.config import read_phases
from verl_ext.staleness.schedule import PhasedSchedule, StalenessSchedule

pytestmark = [pytest.mark.e2e, pytest.mark.extended]
BACKGROUND_MINUTES = 8  # three 4-step runs sharing one Ray start-up, beside another module's runs on two cores
BACKGROUND_PEAK_GIB = 6.0

STEPS = 4
PHASES = "[{start_step:0,sync_interval:1},{start_step:2,sync_interval:2}]"
SCHEDULE = PhasedSchedule(read_phases([dict(start_step=0, sync_interval=1), dict(start_step=2, sync_interval=2)]))
COMMON = ("trainer.v1.trainer_mode=delayed_sync", "actor_rollout_ref.actor.optim.lr=0.0", *SMALL_BATCHES)
RUNS = {
    "phased": (f"trainer.v1.delayed_sync.phases={PHASES}",),
    "on_policy": ("trainer.v1.delayed_sync.sync_interval=1",),
    "sync_interval_2": ("trainer.v1.delayed_sync.sync_interval=2",),
}
# the data a step trains on and what the update made of it (not timing, not the schedule's counters)
DATA_METRICS = ("critic/score/mean", "response_length/mean", "actor/grad_norm", "actor/pg_loss",
                "staleness/behaviour_minus_current_log_prob")
SCHEDULE_METRICS = ("staleness/behaviour_version", "staleness/lag")


def background_runs(root):
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.runs.run import Run
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    results = {}
    with CPURaySession(root / "phases", assets) as session:
        for name, overrides in RUNS.items():
            results[name] = session.run(Run(name, steps=STEPS, overrides=(*COMMON, *overrides))).raise_for_error()
        print_costs(results.values())
    return results


@pytest.fixture(scope="module")
def runs(background_results):
    return background_results


def by_step(result) -> dict[int, dict]:
    return {record["step"] - 1: record for record in result.steps}


def test_each_phase_equals_its_own_run_number_for_number(runs):
    phased = by_step(runs["phased"])
    separate = {0: by_step(runs["on_policy"]), 1: by_step(runs["sync_interval_2"])}
    assert sorted(phased) == list(range(STEPS))
    for step, record in phased.items():
        own = separate[SCHEDULE.phase_index(step)][step]
        for metric in (*DATA_METRICS, *SCHEDULE_METRICS):
            assert metric in record, (step, metric)
            assert record[metric] == pytest.approx(own[metric], rel=1e-6, abs=1e-9), (step, metric)
    # the phases differ where their schedules do: (2, 0) trains step 3 on the batch of version 2 (lag 1)
    assert [phased[step]["staleness/lag"] for step in range(STEPS)] == [0, 0, 0, 1]
    assert [by_step(runs["on_policy"])[step]["staleness/lag"] for step in range(STEPS)] == [0, 0, 0, 0]


def test_the_phased_run_pushes_where_its_schedule_says(runs):
    phased = by_step(runs["phased"])
    synced = [phased[step]["staleness/synced"] for step in range(STEPS)]
    assert synced == [float(SCHEDULE.synced_after(step)) for step in range(STEPS)] == [1.0, 1.0, 0.0, 1.0]
    # the start-up push, then one per sync point
    assert phased[STEPS - 1]["staleness/weight_pushes"] == 1 + SCHEDULE.sync_count(STEPS)
    for name, own in (("on_policy", StalenessSchedule(1, 0)), ("sync_interval_2", StalenessSchedule(2, 0))):
        record = by_step(runs[name])[STEPS - 1]
        assert record["staleness/weight_pushes"] == 1 + own.sync_count(STEPS), name
