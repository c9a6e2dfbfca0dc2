"""Benchmark: verl's own trainer modes next to verl-ext's ``delayed_sync``, colocated and split, on the CPU backend.

    python benchmarks/bench_async_modes.py [--steps 16] [--repeats 1] [--only NAME,...] [--json FILE]

One shared Ray session (:class:`verl_ext.cpu.ray_session.CPURaySession`, 2 logical GPUs: the trainer's and, for the
split modes, the engine's) runs verl's ``main_ppo`` on
the tiny model with the same data, batch sizes (the CPU profile's 8 prompts x 4 responses), algorithm (the
recipe's REC-OneSide-NoIS) and step count in every mode (:data:`MODES`):

- verl ``sync``; verl ``colocate_async`` (engine on the trainer's GPU, one batch generated ahead);
- verl ``separate_async`` with ``hybrid_engine=false`` (the engine alone on its own logical GPU, weights through
  verl-ext's ``gloo`` checkpoint engine, ``parameter_sync_step=1``: a push after every step);
- verl-ext ``delayed_sync`` at (m, n) = (1, 1) (lag exactly 1, the staleness verl's async modes aim at):
  colocated without and with ``overlap``, and with the engine on its own pool without and with ``overlap``.

Per mode, from verl's logged metrics and the CPU rollout's event log, over the steady steps (0-based steps 2 to
T - 3: the first two pay one-off start-up costs; under ``delayed_sync`` (1, 1) the last two generate nothing, as
the sync after step s generates step s + 2, and in every mode the last may push weights nobody uses):

- steps/s: steady steps / the sum of their ``timing_s/step``;
- lag: verl's ``training/off_policy/trajectory_staleness/mean`` averaged over the steady steps, and the largest
  ``.../trajectory_staleness_worst/max`` of the run (the oldest version behind any token); "exact" when
  ``delayed_sync`` logged the schedule's lag at every step, else verl's bound
  (``trainer.v1.sampler.max_off_policy_threshold``);
- weight pushes: the rollout's ``update_weights`` events over the whole run;
- final reward: ``critic/score/mean`` over the last quarter of the steps;
- share of the limit: steps/s x max(train, generation) s/step, both measured on the ``sync`` run (generation
  ``timing_s/gen``, training the rest of the step): the most a perfect overlap of the two could reach.

With ``--repeats N`` every mode runs N times, round-robin, and the repeat of median steps/s (the lower middle
one for an even N) is reported, with each repeat's steps/s and load: on a shared machine the load moves during the benchmark. ``delayed_sync`` runs
with ``measure_mismatch=false`` (its diagnostic forward pass is work verl's modes do not do).

**On this machine every "GPU" is logical**: the trainer, the engine and verl's workers share the same two cores,
so the split cannot give the engine hardware of its own; it shows the schedule, the weight path and the
overlap, not what disjoint GPUs would gain. **verl 0.9.1 bug worked around**: ``separate_async`` with
``actor_rollout_ref.hybrid_engine=false`` calls ``logger.info(..., flush=True)``
(``trainer_separate_async.py``, ``_setup``), which raises ``TypeError: Logger._log() got an unexpected keyword
argument 'flush'`` whenever verl's logger is at INFO, its default (``VERL_LOGGING_LEVEL``); this script runs
every mode with ``VERL_LOGGING_LEVEL=WARN`` (logging only: no metric changes).
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
from typing import Optional, Sequence

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import name_list, positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path
from verl_ext.checkpoint_backends import CPU_BACKEND  # noqa: E402
from verl_ext.staleness.config import engine_pool_overrides  # noqa: E402

LOGGING_WORKAROUND = {"VERL_LOGGING_LEVEL": "WARN"}  # see the module docstring
ENGINE_ON_OWN_POOL = tuple(engine_pool_overrides(1, 1, CPU_BACKEND))  # one logical GPU, weights over gloo
# measure_mismatch=false: its diagnostic forward pass (docs/staleness.md) is work verl's modes do not do
DELAYED_1_1 = ("trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=1",
               "trainer.v1.delayed_sync.sync_offset=1", "trainer.v1.delayed_sync.measure_mismatch=false")
OVERLAP = ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=false")
SYNC = "verl_sync"


@dataclass(frozen=True)
class Mode:
    name: str
    label: str  # the table's first column
    overrides: tuple[str, ...]
    schedule: Optional[tuple[int, int]] = None  # (m, n) of delayed_sync; None for verl's own modes


MODES = (
    Mode(SYNC, "verl sync", ("trainer.v1.trainer_mode=sync",)),
    Mode("verl_colocate_async", "verl colocate_async", ("trainer.v1.trainer_mode=colocate_async",)),
    Mode("verl_separate_async", "verl separate_async (own pool, gloo)",
         ("trainer.v1.trainer_mode=separate_async", "trainer.v1.separate_async.parameter_sync_step=1", *ENGINE_ON_OWN_POOL)),
    Mode("delayed_1_1", "verl-ext delayed_sync (1,1) colocated", DELAYED_1_1, (1, 1)),
    Mode("delayed_1_1_overlap", "verl-ext delayed_sync (1,1) colocated + overlap", (*DELAYED_1_1, *OVERLAP), (1, 1)),
    Mode("delayed_1_1_split", "verl-ext delayed_sync (1,1) own pool (gloo)", (*DELAYED_1_1, *ENGINE_ON_OWN_POOL), (1, 1)),
    Mode("delayed_1_1_split_overlap", "verl-ext delayed_sync (1,1) own pool (gloo) + overlap",
         (*DELAYED_1_1, *ENGINE_ON_OWN_POOL, *OVERLAP), (1, 1)),
)


def steady_steps(total_steps: int) -> range:
    """0-based steps compared across modes: 2 .. T - 3 (see the module docstring)."""
    return range(2, total_steps - 2)


def mode_figures(mode: Mode, steps: list[dict], events: list[dict], off_policy_threshold: Optional[int]) -> dict:
    """One run's figures from its logged step records (verl's file logger) and its rollout events."""
    total = max((record["step"] for record in steps), default=0)
    wanted = steady_steps(total)
    steady = [record for record in steps if record["step"] - 1 in wanted]
    if len(wanted) < 1 or len(steady) != len(wanted):
        raise ValueError(f"{mode.name}: steady steps {wanted} not all logged ({len(steps)} records); run more steps")
    trained = [record for record in steps if metric_names.STEP_SECONDS in record]
    step_seconds = [record[metric_names.STEP_SECONDS] for record in steady]
    last_quarter = trained[-max(1, len(trained) // 4):]
    figures = {
        "steady_steps": len(steady),
        "steps_per_second": len(steady) / sum(step_seconds),
        "seconds_per_step": statistics.mean(step_seconds),
        "lag_mean": statistics.mean(record[metric_names.TRAJECTORY_STALENESS_MEAN] for record in steady),
        "lag_max": max(record[metric_names.TRAJECTORY_STALENESS_WORST_MAX] for record in trained),
        "lag_kind": lag_kind(mode, trained, off_policy_threshold),
        "weight_pushes": sum(1 for event in events if event["event"] == "update_weights"),
        "final_reward": statistics.mean(record[metric_names.SCORE_MEAN] for record in last_quarter),
        "generation_seconds_per_step": None,
        "train_seconds_per_step": None,
    }
    if mode.name == SYNC:
        generation = [record[metric_names.timing("gen")] for record in steady]
        figures["generation_seconds_per_step"] = statistics.mean(generation)
        figures["train_seconds_per_step"] = statistics.mean(s - g for s, g in zip(step_seconds, generation))
    return figures


def lag_kind(mode: Mode, trained: list[dict], off_policy_threshold: Optional[int]) -> str:
    """"exact" when delayed_sync logged the schedule's lag at every step; verl's bound for its own modes."""
    if mode.schedule is None:
        return "uncapped" if off_policy_threshold is None else f"capped at {off_policy_threshold}"
    from verl_ext.staleness.schedule import StalenessSchedule

    schedule = StalenessSchedule(sync_interval=mode.schedule[0], sync_offset=mode.schedule[1])
    exact = all(record[metric_names.LAG] == schedule.lag(record["step"] - 1) for record in trained)
    return "exact" if exact else "NOT the schedule's"


def summarise(figures: dict[str, dict]) -> dict[str, dict]:
    """Each mode's share of the limit 1 / max(train, generation), both measured on the sync run."""
    sync = figures.get(SYNC)
    limit = None
    if sync is not None:
        limit = 1.0 / max(sync["train_seconds_per_step"], sync["generation_seconds_per_step"])
    summary = {}
    for name, row in figures.items():
        summary[name] = {
            **row,
            "limit_steps_per_second": limit,
            "share_of_limit": None if limit is None else row["steps_per_second"] / limit,
            "speed_up_over_sync": None if sync is None else row["steps_per_second"] / sync["steps_per_second"],
        }
    return summary


def table(summary: dict[str, dict]) -> str:
    labels = {mode.name: mode.label for mode in MODES}
    lines = ["| mode | steps/s | vs sync | share of the limit | lag mean / max | lag | weight pushes | final reward |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in summary.items():
        share = "-" if row["share_of_limit"] is None else f"{100 * row['share_of_limit']:.0f}%"
        versus = "-" if row["speed_up_over_sync"] is None else f"x{row['speed_up_over_sync']:.2f}"
        lines.append(
            f"| {labels.get(name, name)} | {row['steps_per_second']:.2f} | {versus} | {share} | "
            f"{row['lag_mean']:.2f} / {row['lag_max']:g} | {row['lag_kind']} | {row['weight_pushes']} | "
            f"{row['final_reward']:.3f} |"
        )
    return "\n".join(lines)


def headline_figures(summary: dict[str, dict]) -> dict[str, str]:
    headline = {}
    sync = summary.get(SYNC)
    if sync and sync["limit_steps_per_second"]:
        headline["limit 1/max(train, gen) steps/s (sync run)"] = (
            f"{sync['limit_steps_per_second']:.2f} (train {sync['train_seconds_per_step']:.2f} s, "
            f"gen {sync['generation_seconds_per_step']:.2f} s per step)")
    for name, row in summary.items():
        share = "" if row["share_of_limit"] is None else f", {100 * row['share_of_limit']:.0f}% of the limit"
        headline[f"{name} steps/s"] = (
            f"{row['steps_per_second']:.2f}{share}; lag {row['lag_mean']:.2f}/{row['lag_max']:g} ({row['lag_kind']}); "
            f"{row['weight_pushes']} pushes")
    return headline


def median_of_repeats(repeats: list[dict]) -> dict:
    """One mode's figures over its repeats: the run of median steps/s (the lower middle one for an even count),
    with every repeat's steps/s and load."""
    ordered = sorted(repeats, key=lambda figures: figures["steps_per_second"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["repeats_steps_per_second"] = [figures["steps_per_second"] for figures in repeats]
    chosen["repeats_load_average_at_start"] = [figures["load_average_at_start"] for figures in repeats]
    return chosen


def bench_cpu(modes: Sequence[Mode], steps: int, scratch: Path, repeats: int = 1) -> dict[str, dict]:
    """Every mode ``repeats`` times, round-robin (mode 1, 2, ..., then again), so that a change of the machine's
    load during the benchmark spreads over the modes; per mode the repeat of median steps/s."""
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.runs.compose import compose
    from verl_ext.runs.run import Run
    from verl_ext.cpu_runtime.topology import Topology
    from verl_ext.tiny.assets import build_tiny_assets

    assets = scratch / "assets"
    build_tiny_assets(assets)
    runs: dict[str, list[dict]] = {mode.name: [] for mode in modes}
    # 1 trainer GPU + 1 engine GPU (the split modes; the CPU profile sizes each run's Ray resources for its own)
    with CPURaySession(scratch / "runs", assets, topology=Topology(1, 1, engine_gpus=1)) as session:
        for repeat in range(repeats):
            for mode in modes:
                run = Run(f"{mode.name}_{repeat}", steps=steps, overrides=mode.overrides)
                config = compose(run, session.backend, session.outputs).config()
                threshold = config.trainer.v1.sampler.max_off_policy_threshold
                load = os.getloadavg()[0]
                result = session.run(run).raise_for_error()
                figures = mode_figures(mode, result.steps, result.events, threshold)
                figures.update(wall_seconds=result.wall_seconds, load_average_at_start=load)
                runs[mode.name].append(figures)
                print(json.dumps({run.name: figures}), flush=True)
    return {name: median_of_repeats(repeated) for name, repeated in runs.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive_int, default=16, help="training steps per run (default 16)")
    parser.add_argument("--repeats", type=positive_int, default=1, help="runs per mode, round-robin; the median is reported")
    parser.add_argument("--only", type=name_list([mode.name for mode in MODES], "mode names"),
                        help="comma-separated mode names: " + ", ".join(mode.name for mode in MODES))
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.steps < 4:
        parser.error("--steps must be >= 4 (steady steps are 2 .. T - 2)")
    modes = [mode for mode in MODES if mode.name in args.only] if args.only else list(MODES)
    os.environ.update(LOGGING_WORKAROUND)  # before Ray starts: its workers inherit it
    load_start = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench_async_modes_") as scratch:
        figures = bench_cpu(modes, args.steps, Path(scratch), args.repeats)
    summary = summarise(figures)
    load_end = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(table(summary))
    for name, row in summary.items():
        spread = ", ".join(f"{value:.2f} (load {load:.0f})" for value, load in
                           zip(row["repeats_steps_per_second"], row["repeats_load_average_at_start"]))
        print(f"{name}: steps/s of each repeat {spread}")
    print(f"{args.steps} steps per run, {args.repeats} repeat(s) per mode; {os.cpu_count()} CPUs; "
          f"load average at start {load_start}, at end {load_end}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "steps": args.steps, "load": [load_start, load_end]}, indent=2) + "\n")
    print_headline(headline_figures(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
