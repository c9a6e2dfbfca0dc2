"""benchmarks/bench_overlap.py: its runs pass the config checks, and its figures follow from the logged
metrics (steady steps only, the limit from the run without overlap)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_overlap  # noqa: E402

from tests.recipe_config import compose_recipe  # noqa: E402
from verl_ext.staleness.config import delayed_sync_config_from  # noqa: E402


def test_every_delayed_sync_run_of_the_grid_passes_the_config_check():
    runs = bench_overlap.overlap_grid()
    assert [run.name for run in runs] == [
        "sync", "delayed_1_1", "delayed_1_1_overlap", "delayed_4_1", "delayed_4_1_overlap", "delayed_4_4", "delayed_4_4_overlap"
    ]
    for run in runs[1:]:
        block = delayed_sync_config_from(compose_recipe(*run.overrides))
        assert (block.sync_interval, block.sync_offset, block.overlap) == (run.interval, run.offset, run.overlap)


def test_steady_steps_are_whole_cycles_with_their_generation():
    runs = {run.name: run for run in bench_overlap.overlap_grid()}
    assert runs["sync"].steady_steps(16) == range(1, 16)
    assert runs["delayed_1_1"].steady_steps(16) == range(1, 14)  # the sync after step 13 generates step 15, the last
    assert runs["delayed_4_1"].steady_steps(16) == range(2, 14)  # syncs after 2, 6, 10 generate steps 4-15
    assert runs["delayed_4_4"].steady_steps(16) == range(3, 11)  # syncs after 3, 7 generate steps 8-15
    assert runs["delayed_4_4"].steady_steps(14) == range(3, 7)


def test_every_steady_cycles_sync_generates_whole_batches_within_the_run_and_no_more_cycle_would():
    """Against the schedule itself (0-based steps; the sync after step s pushes version s + 1): each cycle of the
    window holds one sync whose version generates m steps, all before the run's end; one cycle more would not.
    A window one step too long counted, at (1, 1), a last step that generates nothing (a real 24-step run:
    steps 23 and 24 of 24, 1-based, had timing_s/gen 0.01 against 0.5-1.1 before)."""
    from verl_ext.staleness.schedule import StalenessSchedule

    for run in bench_overlap.overlap_grid([(1, 1), (4, 1), (4, 4), (2, 1), (3, 2)]):
        if run.interval is None:
            continue
        schedule = StalenessSchedule(sync_interval=run.interval, sync_offset=run.offset)
        for total in range(8, 30):
            window = run.steady_steps(total)
            syncs = [step for step in window if schedule.synced_after(step)]
            assert len(syncs) * run.interval == len(window), (run.name, total)
            for step in syncs:
                assert len(schedule.steps_generated_with(step + 1, total)) == run.interval, (run.name, total, step)
            next_sync = next(step for step in range(window.stop, window.stop + run.interval) if schedule.synced_after(step))
            assert len(schedule.steps_generated_with(next_sync + 1, total)) < run.interval, (run.name, total)


def records(count: int, step_seconds: float, wait: float, busy: float, hidden: float) -> list[dict]:
    return [
        {
            "step": index + 1,
            "timing_s/step": step_seconds,
            "staleness/wait_for_batch_s": wait / 2,
            "staleness/wait_for_generation_s": wait / 2,
            "staleness/engine_busy_s": busy,
            "staleness/generation_hidden_s": hidden,
            "staleness/engine_busy_fraction": busy / step_seconds,
        }
        for index in range(count)
    ]


def test_figures_and_the_limit():
    runs = {run.name: run for run in bench_overlap.overlap_grid([(1, 1)])}
    start_up = records(1, 100.0, 0.0, 0.0, 0.0)  # step 0: one-off costs, left out
    results = {
        "sync": bench_overlap.run_figures(runs["sync"], [{"step": 1, "timing_s/step": 100.0}] + [{"step": s, "timing_s/step": 2.0} for s in (2, 3)]),
        # without overlap: 1.0 s training + 0.6 s waiting for a 0.6 s generation
        "delayed_1_1": bench_overlap.run_figures(runs["delayed_1_1"], start_up + records(8, 1.6, 0.6, 0.6, 0.0)[1:]),
        # with overlap: 1.1 s per step, generation hidden
        "delayed_1_1_overlap": bench_overlap.run_figures(runs["delayed_1_1_overlap"], start_up + records(8, 1.1, 0.1, 0.6, 0.5)[1:]),
    }
    assert results["sync"]["steps_per_second"] == pytest.approx(0.5)
    assert results["delayed_1_1"]["steady_steps"] == 5  # steps 1-5 of 0-7 (the sync after step 6 would generate step 8)
    assert results["delayed_1_1"]["train_seconds_per_step"] == pytest.approx(1.0)
    row = bench_overlap.summarise(results)["delayed_1_1"]
    assert row["limit_steps_per_second"] == pytest.approx(1.0)  # 1 / max(1.0 train, 0.6 generation)
    assert row["steps_per_second_with_overlap"] == pytest.approx(1 / 1.1)
    assert row["speed_up_over_no_overlap"] == pytest.approx(1.6 / 1.1)
    assert row["speed_up_over_sync"] == pytest.approx((1 / 1.1) / 0.5)
    assert row["fraction_of_limit"] == pytest.approx(1 / 1.1)
    headline = bench_overlap.headline_figures(bench_overlap.summarise(results), results["sync"])
    assert headline["(1,1) steps/s no overlap -> overlap (limit)"].startswith("0.62 -> 0.91 (1.00; x1.45, 91% of the limit)")


def test_a_run_without_steady_steps_is_an_error():
    run = bench_overlap.overlap_grid([(4, 4)])[-1]
    with pytest.raises(ValueError, match="not all logged"):
        bench_overlap.run_figures(run, records(8, 1.0, 0.0, 0.0, 0.0))


def test_grid_values_are_checked():
    assert bench_overlap.parse_grid(["4,1"]) == [(4, 1)]
    with pytest.raises(SystemExit, match="nothing can overlap"):
        bench_overlap.parse_grid(["4,0"])
    with pytest.raises(SystemExit, match="m,n with integers"):
        bench_overlap.parse_grid(["4"])
