"""benchmarks/bench_async_modes.py: every mode's overrides pass the driver's checks (before Ray), and its figures
follow from the logged metrics (steady steps, verl's staleness metrics, the rollout's pushes, the limit from the
sync run)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_async_modes as bench  # noqa: E402

from verl_ext import metric_names  # noqa: E402
from verl_ext.driver_checks import validate_run_config  # noqa: E402
from verl_ext.staleness.config import delayed_sync_config_from, engine_on_own_pool  # noqa: E402


def test_every_mode_passes_the_drivers_checks(tmp_path):
    """Composed as the benchmark's session composes them (the CPU profile, then the mode's overrides)."""
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.runs.compose import compose
    from verl_ext.runs.outputs import Outputs
    from verl_ext.runs.run import Run

    names = [mode.name for mode in bench.MODES]
    assert names == ["verl_sync", "verl_colocate_async", "verl_separate_async", "delayed_1_1", "delayed_1_1_overlap",
                     "delayed_1_1_split", "delayed_1_1_split_overlap"]
    for mode in bench.MODES:
        config = compose(Run(mode.name, overrides=mode.overrides), CPUBackend(tmp_path / "assets"), Outputs(tmp_path)).config()
        validate_run_config(config)
        if mode.schedule is not None:
            block = delayed_sync_config_from(config)
            assert (block.sync_interval, block.sync_offset) == mode.schedule
            assert block.overlap == mode.name.endswith("_overlap")
            assert engine_on_own_pool(config) == ("_split" in mode.name)


def records(count, step_seconds, lag, generation=None, reward=0.5):
    return [
        {
            "step": index + 1,
            metric_names.STEP_SECONDS: step_seconds,
            metric_names.TRAJECTORY_STALENESS_MEAN: float(min(index, lag)),
            metric_names.TRAJECTORY_STALENESS_WORST_MAX: min(index, lag),
            metric_names.LAG: float(min(index, lag)),
            metric_names.SCORE_MEAN: reward + index,
            **({} if generation is None else {metric_names.timing("gen"): generation}),
        }
        for index in range(count)
    ]


def test_figures_over_the_steady_steps_and_the_share_of_the_limit():
    modes = {mode.name: mode for mode in bench.MODES}
    events = [{"event": "initialized"}] + [{"event": "update_weights"}] * 9
    sync = records(8, 2.0, 0, generation=1.2)
    sync[0][metric_names.STEP_SECONDS] = 50.0  # start-up: not a steady step
    figures = {
        "verl_sync": bench.mode_figures(modes["verl_sync"], sync, events, 8),
        "delayed_1_1_split_overlap": bench.mode_figures(modes["delayed_1_1_split_overlap"], records(8, 1.25, 1), events, 8),
    }
    assert bench.steady_steps(8) == range(2, 6)
    from verl_ext.staleness.schedule import StalenessSchedule

    one_one = StalenessSchedule(sync_interval=1, sync_offset=1)  # every steady step generates a batch at (1, 1)
    for total in (8, 16):
        assert all(len(one_one.steps_generated_with(step + 1, total)) == 1 for step in bench.steady_steps(total))
        assert len(one_one.steps_generated_with(bench.steady_steps(total).stop + 1, total)) == 0
    assert figures["verl_sync"]["steps_per_second"] == pytest.approx(0.5)
    assert (figures["verl_sync"]["generation_seconds_per_step"], figures["verl_sync"]["train_seconds_per_step"]) == (
        pytest.approx(1.2), pytest.approx(0.8))
    assert figures["verl_sync"]["lag_kind"] == "capped at 8" and figures["verl_sync"]["weight_pushes"] == 9
    split = figures["delayed_1_1_split_overlap"]
    assert (split["lag_mean"], split["lag_max"], split["lag_kind"]) == (1.0, 1, "exact")
    assert split["final_reward"] == pytest.approx(0.5 + 6.5)  # the last quarter: steps 6 and 7
    summary = bench.summarise(figures)
    # limit 1 / max(0.8, 1.2) steps/s; the split makes 0.8 steps/s: 96% of it, x1.6 over sync
    assert summary["delayed_1_1_split_overlap"]["limit_steps_per_second"] == pytest.approx(1 / 1.2)
    assert summary["delayed_1_1_split_overlap"]["share_of_limit"] == pytest.approx(0.8 * 1.2)
    assert summary["delayed_1_1_split_overlap"]["speed_up_over_sync"] == pytest.approx(1.6)
    assert "| verl-ext delayed_sync (1,1) own pool (gloo) + overlap | 0.80 | x1.60 | 96% | 1.00 / 1 | exact | 9 |" in bench.table(summary)


def test_a_delayed_sync_run_off_its_schedule_is_not_called_exact():
    mode = next(mode for mode in bench.MODES if mode.name == "delayed_1_1")
    off = records(8, 1.0, 1)
    off[4][metric_names.LAG] = 2.0
    assert bench.mode_figures(mode, off, [], None)["lag_kind"] == "NOT the schedule's"
    sync = bench.mode_figures(bench.MODES[0], records(8, 1.0, 0, generation=0.5), [], None)
    assert sync["lag_kind"] == "uncapped"


def test_too_few_steps_are_refused():
    with pytest.raises(ValueError, match="steady steps .* not all logged"):
        bench.mode_figures(bench.MODES[0], records(3, 1.0, 0, generation=0.5), [], 8)


def test_repeats_report_the_median_run_and_every_repeat():
    repeats = [{"steps_per_second": value, "load_average_at_start": load, "lag_mean": value}
               for value, load in ((0.9, 3.0), (0.5, 20.0), (0.7, 8.0))]
    chosen = bench.median_of_repeats(repeats)
    assert chosen["steps_per_second"] == 0.7 and chosen["lag_mean"] == 0.7  # the whole median run, not a mix
    assert chosen["repeats_steps_per_second"] == [0.9, 0.5, 0.7]
    assert chosen["repeats_load_average_at_start"] == [3.0, 20.0, 8.0]
