"""Benchmark: the CPU backend at world size 1 and 2 -- the same training work with one trainer rank, with two
(FSDP2 over gloo, two rollout replicas, two agent-loop workers) and, optionally, with two on two Ray nodes.

    python benchmarks/bench_scale.py [--steps 12] [--topologies 1x1,1x2[,2x1]] [--repeats 1] [--json FILE]

Each run is the quickstart's (``python -m verl.trainer.main_ppo`` in a child process, REC-OneSide-NoIS,
8 prompts x 4 responses per step, ``--steps`` steps) with only the topology changed (``NxG``: ``trainer.nnodes``
x ``trainer.n_gpus_per_node``): start-up (launch to the training loop; a two-node run also starts its local
cluster, counted separately), steady seconds per step and steps per second after the first step, the mean
time of the step's parts verl logs (generation, actor update, weight push), CPU-seconds and peak PSS of
every process of the run (:mod:`verl_ext.runs.monitor`). With ``--repeats`` > 1 the topologies alternate
and medians are reported.

On two cores the two ranks share the machine: the actor's update does not get faster (gloo's collectives
and a second worker process cost about what the halved per-rank batch saves), but generation does -- each
request is generated alone (exact seeding) and two replicas generate at once -- while start-up, CPU-seconds
and memory grow with the second set of worker processes. A figure to report, not a target.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import comma_list, positive_int, shape as shape_option  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STEP_PARTS = {"generation": "timing_s/gen", "actor update": "timing_s/update_actor", "weight push": "timing_s/update_weights"}


def machine() -> str:
    import psutil

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"{platform.machine()}, {psutil.cpu_count(logical=True)} logical CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; load average at start {load}"
    )


def parse_topology(text: str) -> tuple[int, int]:
    try:
        nodes, gpus = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--topologies: {text!r} is not NODESxGPUS_PER_NODE (e.g. 1x2)") from None
    if nodes < 1 or gpus < 1:
        raise SystemExit(f"--topologies: {text!r}: both counts must be >= 1")
    return nodes, gpus


def measure(topology: tuple[int, int], steps: int, assets: Path, out: Path) -> dict:
    from verl_ext.cpu.quickstart import run_quickstart
    from verl_ext.metrics_file import trained_steps

    nodes, gpus = topology
    started = time.perf_counter()
    result, summary = run_quickstart(
        steps=steps, out=out, assets=assets, echo=False,
        extra_overrides=(f"trainer.nnodes={nodes}", f"trainer.n_gpus_per_node={gpus}"),
    )
    if summary is None:
        raise SystemExit(f"{nodes}x{gpus}: the run failed: {result.error}; log {result.log_path}")
    steady = trained_steps(result.steps)[1:]
    parts = {name: statistics.mean(step[key] for step in steady if key in step) for name, key in STEP_PARTS.items()}
    total = time.perf_counter() - started
    return {
        "topology": f"{nodes}x{gpus}",
        "world_size": nodes * gpus,
        "startup_seconds": summary["startup_seconds"],
        "cluster_start_and_stop_seconds": total - summary["wall_seconds"] if nodes > 1 else 0.0,
        "first_step_seconds": summary["first_step_seconds"],
        "seconds_per_step": summary["seconds_per_step"],
        "steps_per_second": summary["steps_per_second"],
        "step_parts_seconds": parts,
        "wall_seconds": summary["wall_seconds"],
        "cpu_seconds": summary["cpu_seconds"],
        "peak_pss_gib": summary["peak_pss_gib"],
        "load_average": os.getloadavg()[0],
    }


def median_of(runs: list[dict]) -> dict:
    keys = ("startup_seconds", "cluster_start_and_stop_seconds", "first_step_seconds", "seconds_per_step",
            "steps_per_second", "wall_seconds", "cpu_seconds", "peak_pss_gib", "load_average")
    merged = {key: statistics.median(run[key] for run in runs) for key in keys}
    merged["step_parts_seconds"] = {
        name: statistics.median(run["step_parts_seconds"][name] for run in runs) for name in STEP_PARTS
    }
    return {"topology": runs[0]["topology"], "world_size": runs[0]["world_size"], "repeats": len(runs), **merged}


def report(rows: list[dict]) -> str:
    lines = [
        "| topology | ranks | start-up s | s/step | steps/s | gen s | update s | push s | wall s | CPU-s | peak PSS GiB | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        parts = row["step_parts_seconds"]
        cluster = f" (+{row['cluster_start_and_stop_seconds']:.0f} cluster)" if row["cluster_start_and_stop_seconds"] else ""
        lines.append(
            f"| {row['topology']} | {row['world_size']} | {row['startup_seconds']:.0f}{cluster} | {row['seconds_per_step']:.2f} | "
            f"{row['steps_per_second']:.2f} | {parts['generation']:.2f} | {parts['actor update']:.2f} | "
            f"{parts['weight push']:.3f} | {row['wall_seconds']:.0f} | {row['cpu_seconds']:.0f} | "
            f"{row['peak_pss_gib']:.1f} | {row['load_average']:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive_int, default=12, help="training steps per run (default 12)")
    parser.add_argument("--topologies", type=comma_list("topologies", item=shape_option), default="1x1,1x2",
                        help="NODESxGPUS_PER_NODE, comma-separated (default 1x1,1x2)")
    parser.add_argument("--repeats", type=positive_int, default=1, help="runs per topology, alternating (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be >= 2 (steady steps come after the first)")
    topologies = [parse_topology(text) for text in args.topologies]

    from verl_ext.tiny.assets import build_tiny_assets

    figures: dict = {"machine": machine(), "steps": args.steps}
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as scratch:
        scratch = Path(scratch)
        assets = scratch / "assets"
        build_tiny_assets(assets)
        for repeat in range(args.repeats):
            for nodes, gpus in topologies:
                row = measure((nodes, gpus), args.steps, assets, scratch / f"{nodes}x{gpus}_{repeat}")
                runs.setdefault(row["topology"], []).append(row)
                print(json.dumps(row), flush=True)
    rows = [median_of(measured) for measured in runs.values()]
    figures["rows"] = rows
    figures["load_average_at_end"] = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {figures['machine']}; load average at end {figures['load_average_at_end']}")
    print(f"{args.steps} steps of 8 prompts x 4 responses per run; medians of {args.repeats} run(s) per topology")
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print_headline(headline_figures(rows))
    return 0


def headline_figures(rows: list[dict]) -> dict[str, str]:
    headline = {}
    for row in rows:
        name = f"{row['topology']} ({row['world_size']} rank{'s' if row['world_size'] > 1 else ''})"
        headline[f"{name} s/step"] = f"{row['seconds_per_step']:.2f}"
        headline[f"{name} start-up s"] = f"{row['startup_seconds']:.0f}"
        headline[f"{name} CPU-s"] = f"{row['cpu_seconds']:.0f}"
        headline[f"{name} peak PSS GiB"] = f"{row['peak_pss_gib']:.1f}"
    by_topology = {row["topology"]: row for row in rows}
    if "1x1" in by_topology and "1x2" in by_topology:
        headline["1x2 / 1x1 time per step"] = f"{by_topology['1x2']['seconds_per_step'] / by_topology['1x1']['seconds_per_step']:.2f}"
    return headline


if __name__ == "__main__":
    sys.exit(main())
