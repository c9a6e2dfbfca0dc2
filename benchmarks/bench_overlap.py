"""Benchmark: ``delayed_sync`` with and without ``overlap`` (generation behind training), next to verl's
``sync`` mode, on the CPU backend; and the limit max(train time, generation time) per step.

    python benchmarks/bench_overlap.py [--steps 16] [--grid 1,1 4,1 4,4] [--json FILE]

One shared Ray session (:class:`verl_ext.cpu.ray_session.CPURaySession`) runs verl's ``main_ppo`` on the tiny
model: ``sync`` mode, then for each (m, n) of ``--grid`` ``delayed_sync`` without overlap and with it (a
resident engine). The rollout server, the agent-loop and reward workers and the FSDP actor are separate
processes, so the overlap is real; on a 2-core machine they also compete for the same cores.

Figures per run, over its steady steps (:meth:`OverlapRun.steady_steps`: whole intervals from the first
sync point after step 0, each with its push and the generation of its m batches, ending before a sync
point whose generation the run would cut short; from step 1 on in ``sync`` mode), from verl's logged metrics:

- steps/s: steady steps / the sum of their ``timing_s/step``;
- generation s/step: ``staleness/engine_busy_s`` (the engine generating training batches, per step window);
- train s/step: ``timing_s/step`` less the time the trainer waited for generation
  (``staleness/wait_for_batch_s`` + ``staleness/wait_for_generation_s``): training, pushes, bookkeeping;
- the limit: 1 / max(train s/step, generation s/step) of the run *without* overlap (where neither hides
  the other), the most a perfect overlap could reach; the gap is how far the overlap run is from it.

:func:`measure_grid` takes the launcher as an argument: :func:`bench_cpu` passes a shared CPU Ray
session's, :func:`bench_gpu_overlap` (the GPU twin, for ``bench_gpu.py``) passes
``verl_ext.runs.launch.launch`` on ``verl_ext.gpu.backend.GPUBackend`` with the same engine memory share for every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from headline import load_average, print_headline, print_report  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path

DEFAULT_GRID = ((1, 1), (4, 1), (4, 4))
SYNC = "sync"
# overlap's overrides: a resident engine (its memory share is checked against the actor's by the config)
OVERLAP_OVERRIDES = ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=false")


@dataclass(frozen=True)
class OverlapRun:
    """One run of the grid: its name, (m, n) (None for verl's sync mode), overlap or not, its overrides."""

    name: str
    interval: int | None
    offset: int | None
    overlap: bool
    overrides: tuple[str, ...]

    def steady_steps(self, total_steps: int) -> range:
        """The steps whose time is compared: whole cycles of m steps, each holding one sync point (push and
        generation of m batches), from the first sync point after step 0 (step 0 and the start-up
        generation before it pay one-off costs) up to the last sync point whose m batches are all
        generated within ``total_steps``. In sync mode every step from step 1 on."""
        if self.interval is None:
            return range(1, total_steps)
        from verl_ext.staleness.schedule import StalenessSchedule

        schedule = StalenessSchedule(sync_interval=self.interval, sync_offset=self.offset)
        first = next(step for step in range(1, total_steps + self.interval) if schedule.synced_after(step))
        # the sync after (0-based) step s pushes version s + 1, which generates steps s + 1 + n .. s + n + m: the
        # last cycle's sync, after step first + (cycles - 1) * m, must generate only steps up to total_steps - 1
        cycles = max(0, (total_steps - 1 - first - self.offset) // self.interval)
        return range(first, first + cycles * self.interval)


def overlap_grid(grid: Sequence[tuple[int, int]] = DEFAULT_GRID) -> list[OverlapRun]:
    """verl's sync mode, then for each (m, n) delayed_sync without and with overlap (the overrides only;
    the launcher adds the model, the data, the step count and its platform's profile)."""
    runs = [OverlapRun(SYNC, None, None, False, ("trainer.v1.trainer_mode=sync",))]
    for m, n in grid:
        knobs = (
            "trainer.v1.trainer_mode=delayed_sync",
            f"trainer.v1.delayed_sync.sync_interval={m}",
            f"trainer.v1.delayed_sync.sync_offset={n}",
        )
        runs.append(OverlapRun(f"delayed_{m}_{n}", m, n, False, knobs))
        runs.append(OverlapRun(f"delayed_{m}_{n}_overlap", m, n, True, knobs + OVERLAP_OVERRIDES))
    return runs


def run_figures(run: OverlapRun, steps: list[dict]) -> dict:
    """Steady-state figures of one run from its logged step metrics (verl's file logger records)."""
    total = max((record["step"] for record in steps), default=0)
    wanted = run.steady_steps(total)
    steady = [record for record in steps if record["step"] - 1 in wanted]
    if not steady or len(steady) != len(wanted):
        raise ValueError(f"{run.name}: steady steps {wanted} not all logged ({len(steps)} steps logged); run more steps")
    step_seconds = [record[metric_names.STEP_SECONDS] for record in steady]
    figures = {"steady_steps": len(steady), "steps_per_second": len(steady) / sum(step_seconds),
               "seconds_per_step": statistics.mean(step_seconds)}
    if run.interval is not None:
        waits = [record[metric_names.WAIT_FOR_BATCH_S] + record[metric_names.WAIT_FOR_GENERATION_S] for record in steady]
        figures["generation_seconds_per_step"] = statistics.mean(record[metric_names.ENGINE_BUSY_S] for record in steady)
        figures["train_seconds_per_step"] = statistics.mean(s - w for s, w in zip(step_seconds, waits))
        figures["wait_seconds_per_step"] = statistics.mean(waits)
        figures["hidden_seconds_per_step"] = statistics.mean(record[metric_names.GENERATION_HIDDEN_S] for record in steady)
        figures["engine_busy_fraction"] = statistics.mean(record[metric_names.ENGINE_BUSY_FRACTION] for record in steady)
    return figures


def summarise(results: dict[str, dict]) -> dict[str, dict]:
    """Per (m, n): steps/s without and with overlap, the speed-up over both and over sync mode, and the
    limit 1 / max(train, generation) per step measured on the run without overlap, with the gap to it."""
    sync = results.get(SYNC)
    summary = {}
    for name, plain in results.items():
        if name == SYNC or name.endswith("_overlap") or f"{name}_overlap" not in results:
            continue
        overlapped = results[f"{name}_overlap"]
        limit = 1.0 / max(plain["train_seconds_per_step"], plain["generation_seconds_per_step"])
        summary[name] = {
            "steps_per_second_without_overlap": plain["steps_per_second"],
            "steps_per_second_with_overlap": overlapped["steps_per_second"],
            "speed_up_over_no_overlap": overlapped["steps_per_second"] / plain["steps_per_second"],
            "speed_up_over_sync": overlapped["steps_per_second"] / sync["steps_per_second"] if sync else None,
            "limit_steps_per_second": limit,
            "fraction_of_limit": overlapped["steps_per_second"] / limit,
            "train_seconds_per_step": plain["train_seconds_per_step"],
            "generation_seconds_per_step": plain["generation_seconds_per_step"],
            "hidden_seconds_per_step_with_overlap": overlapped["hidden_seconds_per_step"],
        }
    return summary


def headline_figures(summary: dict[str, dict], sync: dict | None) -> dict[str, str]:
    headline = {}
    if sync:
        headline["sync mode steps/s"] = f"{sync['steps_per_second']:.2f}"
    for name, row in summary.items():
        m_n = name.removeprefix("delayed_").replace("_", ",")
        headline[f"({m_n}) steps/s no overlap -> overlap (limit)"] = (
            f"{row['steps_per_second_without_overlap']:.2f} -> {row['steps_per_second_with_overlap']:.2f} "
            f"({row['limit_steps_per_second']:.2f}; x{row['speed_up_over_no_overlap']:.2f}, "
            f"{100 * row['fraction_of_limit']:.0f}% of the limit)"
        )
    return headline


def measure_grid(
    launch: Callable, grid: Sequence[tuple[int, int]], steps: int, extra_overrides: Sequence[str] = (),
    with_sync: bool = True,
) -> dict[str, dict]:
    """Run :func:`overlap_grid` with ``launch(Run) -> RunResult`` (the CPU session's, or the one launcher on the
    GPU backend); ``extra_overrides`` go to every run. The figures of each run, by name."""
    from verl_ext.runs.run import Run

    results = {}
    for run in overlap_grid(grid):
        if run.name == SYNC and not with_sync:
            continue
        load = os.getloadavg()[0]
        result = launch(Run(run.name, steps=steps, overrides=(*extra_overrides, *run.overrides))).raise_for_error()
        results[run.name] = run_figures(run, result.steps)
        results[run.name]["wall_seconds"] = result.wall_seconds
        results[run.name]["load_average_at_start"] = load
        print(json.dumps({run.name: results[run.name]}), flush=True)
    return results


def bench_cpu(grid: Sequence[tuple[int, int]], steps: int, scratch: Path, with_sync: bool = True) -> dict[str, dict]:
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.tiny.assets import build_tiny_assets

    assets = scratch / "assets"
    build_tiny_assets(assets)
    with CPURaySession(scratch / "runs", assets) as session:
        return measure_grid(session.run, grid, steps, with_sync=with_sync)


def bench_gpu_overlap(
    base_dir: Path, assets_dir: Path, grid: Sequence[tuple[int, int]] = DEFAULT_GRID, steps: int = 16,
    engine_memory_fraction: float = 0.4,
) -> dict:
    """The GPU twin (not run here: no GPU in this project's sessions so far): the same grid through verl_ext's
    GPU launcher, one ``main_ppo`` child process per run, every run with the same vLLM memory share (so the
    runs without overlap differ only by sleeping between generations). Returns ``{"runs", "summary",
    "headline"}``; ``bench_gpu.py`` prints the headline."""
    from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
    from verl_ext.runs.launch import Outputs, launch

    backend, outputs = GPUBackend(assets_dir), Outputs(base_dir, project=GPU_PROJECT)
    results = measure_grid(
        lambda run: launch(run, backend, outputs), grid, steps,
        extra_overrides=(f"actor_rollout_ref.rollout.gpu_memory_utilization={engine_memory_fraction}",),
    )
    summary = summarise(results)
    return {"runs": results, "summary": summary, "headline": headline_figures(summary, results.get(SYNC))}


def parse_grid(values: Sequence[str]) -> list[tuple[int, int]]:
    """``--grid``'s m,n pairs; SystemExit naming the value for one that is not two integers >= 1, or a pair given
    twice (its runs would be measured twice under one name)."""
    grid = []
    for value in values:
        try:
            m, n = (int(part) for part in value.split(","))
        except ValueError:
            raise SystemExit(f"--grid: each value is m,n with integers (e.g. 4,1), got {value!r}") from None
        if m < 1 or n < 1:
            raise SystemExit(f"--grid {value}: overlap needs m >= 1 and n >= 1 (with n = 0 nothing can overlap)")
        if (m, n) in grid:
            raise SystemExit(f"--grid {value}: ({m}, {n}) given twice; each pair runs once")
        grid.append((m, n))
    return grid


def check_steady_windows(grid: Sequence[tuple[int, int]], steps: int, with_sync: bool = True) -> None:
    """SystemExit, before any run, when a run of the grid (or sync mode) would have no steady step in ``steps``
    (:meth:`OverlapRun.steady_steps`): every run would train, then the figures could not be taken. Names the
    runs and the fewest steps that give each one a steady cycle."""
    empty = [run for run in overlap_grid(grid) if not run.steady_steps(steps) and (with_sync or run.name != SYNC)]
    if empty:
        needs = {run.name: next((total for total in range(steps, steps + 10_000) if run.steady_steps(total)), None)
                 for run in empty}
        raise SystemExit(f"--steps {steps}: no steady step for " + ", ".join(
            f"{name} (needs --steps >= {fewest})" for name, fewest in needs.items())
            + "; nothing was run")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive_int, default=16, help="training steps per run (default 16: two (4,4) cycles)")
    parser.add_argument("--grid", nargs="+", default=[f"{m},{n}" for m, n in DEFAULT_GRID], help="m,n pairs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--skip-sync", action="store_true", help="leave out verl's sync mode run")
    args = parser.parse_args(argv)
    try:
        grid = parse_grid(args.grid)
        check_steady_windows(grid, args.steps, with_sync=not args.skip_sync)
    except SystemExit as refused:
        parser.error(str(refused))
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="bench_overlap_") as scratch:
        results = bench_cpu(grid, args.steps, Path(scratch), with_sync=not args.skip_sync)
    summary = summarise(results)
    print_report(summary, {"runs": results}, load_start, args.json)
    print_headline(headline_figures(summary, results.get(SYNC)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
