"""benchmarks/bench_against_commit.py: which steps a run's figures average, and the per-repeat ratios."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_against_commit as bench  # noqa: E402


def _run(total: int, tail_seconds: float = 0.1) -> list[dict]:
    """A (1, 1) run's logged steps: each step that generates a batch takes 1 s plus its number in ms, the last
    two (which generate nothing at (1, 1)) ``tail_seconds``."""
    records = []
    for step in range(1, total + 1):
        generates = step + 1 + bench.SYNC_OFFSET <= total
        seconds = 1 + step / 1000 if generates else tail_seconds
        records.append({"step": step, **{f"timing_s/{phase}": seconds for phase in bench.PHASES}})
    return records


def test_the_steady_window_ends_at_the_last_step_that_generates():
    assert bench.SYNC_OFFSET == 1  # read from RUN_OVERRIDES
    assert list(bench.steady_steps(16)) == list(range(3, 15))
    figures = bench.run_figures(_run(16))
    assert figures["step"] == pytest.approx(statistics.mean(1 + step / 1000 for step in range(3, 15)))
    assert figures["step_to_the_end"] == pytest.approx(
        statistics.mean([*(1 + step / 1000 for step in range(3, 15)), 0.1, 0.1]))
    with pytest.raises(ValueError, match="no steady step"):
        bench.run_figures(_run(4))


def test_the_summary_gives_each_repeats_own_speed_up():
    runs = []
    for repeat, (plain, overlapped) in enumerate(((1.0, 0.5), (1.2, 1.0), (0.9, 0.6))):
        for overlap, seconds in ((False, plain), (True, overlapped)):
            figures = {phase: seconds for phase in bench.PHASES}
            runs.append({"side": bench.THIS, "overlap": overlap, "repeat": repeat, **figures,
                         "step_to_the_end": seconds})
    row = bench.summarise(runs)[bench.THIS]
    assert row["overlap_speed_up_per_repeat"] == pytest.approx([2.0, 1.2, 1.5])
    assert row["overlap_speed_up"] == pytest.approx(1.0 / 0.6)  # medians: 1.0 without, 0.6 with
