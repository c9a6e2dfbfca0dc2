"""Every benchmark of the project, one after the other, in one command; each prints its own measured figures.

    python benchmarks/run_all.py                 # all of them (the CPU backend one starts Ray: minutes)
    python benchmarks/run_all.py --quick         # fewer repeats / shapes, same figures
    python benchmarks/run_all.py --only losses,rewards
    python benchmarks/run_all.py --out outputs/benchmarks/latest.txt   # also keep the whole report

==============  =========================  ======================================================
name            script                     what it measures
==============  =========================  ======================================================
losses          bench_losses.py            forward+backward CPU time and peak memory of every
                                           verl-ext loss next to verl's ``vanilla``
data_prep       bench_data_prep.py         preprocessing throughput (rows/s) of every data_prep
                                           command
rewards         bench_rewards.py           latency and throughput of every reward scorer
cpu_backend     bench_cpu_backend.py       the CPU backend: start-up time and training steps per
                                           second of verl's main_ppo on the tiny model
scale           bench_scale.py             the CPU backend at world size 1 vs 2 (and two Ray nodes):
                                           start-up, s/step, CPU-seconds, peak memory, same work
overlap         bench_overlap.py           delayed_sync steps/s with and without overlap at (1,1),
                                           (4,1), (4,4), sync mode, and the limit max(train, gen)
async_modes     bench_async_modes.py       verl's sync / colocate_async / separate_async next to
                                           delayed_sync (1,1) colocated and on its own pool, with
                                           and without overlap: steps/s, lag, pushes, reward
mismatch        bench_mismatch.py          the staleness mismatch metric taken in the actor update vs
                                           a separate actor forward pass: old_log_prob s, s/step
gpu             bench_gpu.py               one GPU with vLLM on the scale assets (Qwen2.5-0.5B's size,
                                           1,024-token responses): sync vs delayed_sync (4,0), (4,1)
                                           with and without overlap (steps/s, tokens/s, push time,
                                           time split, memory), losses on CUDA; skipped (exit 0, says
                                           why) without a CUDA GPU and vLLM
refusal         bench_refusal.py           how long the run scripts' launcher takes to refuse a bad
                                           argument or variable (whole process), next to import torch
plugin_import   bench_plugin_import.py     ``import verl`` with verl-ext's plugin vs without it
                                           (VERL_USE_EXTERNAL_PLUGINS=none): CPU-s, wall, peak RSS
==============  =========================  ======================================================

Each benchmark prints its full report, then one ``HEADLINE`` line (``headline.py``); at the end this
script prints every benchmark's headline figures side by side in one table (keep a run's figures as a record:
benchmarks/results/README.md; docs/results.md shows them).
Each benchmark runs in its own process, with this machine's load average printed before it (figures on
a busy machine are slower; compare runs taken on the same machine at similar load). A benchmark that is
missing or fails is reported and the others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from headline import parse_headline  # benchmarks/headline.py (this script's folder is on sys.path)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from verl_ext.checks.arguments import name_list  # noqa: E402 -- after the checkout is on sys.path
from verl_ext.files import check_output_place, write_whole  # noqa: E402


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    measures: str
    quick_args: tuple[str, ...] = ()


BENCHMARKS = (
    Benchmark("losses", "bench_losses.py", "loss overhead vs verl's vanilla (CPU time, peak memory)",
              ("--shapes", "256x2048", "--repeats", "3")),
    Benchmark("data_prep", "bench_data_prep.py", "preprocessing throughput", ("--repeats", "1")),
    Benchmark("rewards", "bench_rewards.py", "reward scorer latency and throughput"),
    Benchmark("cpu_backend", "bench_cpu_backend.py", "CPU backend start-up and steps per second",
              ("--steps", "20", "--session-runs", "2")),
    Benchmark("scale", "bench_scale.py", "CPU backend at world size 1 vs 2: start-up, s/step, CPU-s, memory",
              ("--steps", "6")),
    Benchmark("overlap", "bench_overlap.py", "delayed_sync with and without overlap vs sync mode, and the limit",
              ("--steps", "12", "--grid", "1,1", "4,1")),
    Benchmark("async_modes", "bench_async_modes.py", "verl's trainer modes vs delayed_sync colocated and split",
              ("--steps", "8")),
    Benchmark("mismatch", "bench_mismatch.py", "the mismatch metric in the actor update vs a separate forward pass",
              ("--pairs", "1", "--steps", "6")),
    Benchmark("gpu", "bench_gpu.py", "sync vs delayed_sync on one GPU with vLLM, losses on CUDA (skipped without a GPU)",
              ("--steps", "5", "--modes", "sync,delayed_4_0", "--repeats", "20")),
    Benchmark("refusal", "bench_refusal.py", "time to refuse a bad launcher argument or variable, next to import torch",
              ("--repeats", "2")),
    Benchmark("plugin_import", "bench_plugin_import.py", "import verl with verl-ext's plugin vs without (CPU-s, RSS)",
              ("--repeats", "3")),
)


def run_one(benchmark: Benchmark, quick: bool, sink) -> tuple[str, float, dict[str, str]]:
    """Run one benchmark script, streaming its output to stdout and ``sink``; (status, seconds, its headline
    figures: its ``HEADLINE`` line, see ``headline.py``)."""
    script = HERE / benchmark.script
    header = f"== {benchmark.name}: {benchmark.measures} ({benchmark.script}) — load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    _emit(header, sink)
    if not script.is_file():
        _emit(f"   not present: {script}", sink)
        return "missing", 0.0, {}
    command = [sys.executable, str(script), *(benchmark.quick_args if quick else ())]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    headline: dict[str, str] = {}
    for line in process.stdout:
        figures = parse_headline(line.rstrip("\n"))
        if figures is None:
            _emit(line.rstrip("\n"), sink)
        else:
            headline.update(figures)
    status = process.wait()
    seconds = time.perf_counter() - start
    _emit(f"   ({seconds:.0f} s, exit status {status})\n", sink)
    return ("ok" if status == 0 else f"failed ({status})"), seconds, headline


def _emit(line: str, sink) -> None:
    print(line, flush=True)
    if sink is not None:
        sink.append(line + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and shapes where a benchmark allows it")
    parser.add_argument("--only", type=name_list([b.name for b in BENCHMARKS], "benchmark names"),
                        help="comma-separated names: " + ", ".join(b.name for b in BENCHMARKS))
    parser.add_argument("--out", type=Path, help="also write the whole report to this file (written whole at the end; "
                        "never through a symbolic link)")
    args = parser.parse_args(argv)
    chosen = [b for b in BENCHMARKS if b.name in args.only] if args.only else list(BENCHMARKS)
    sink = None
    if args.out:
        try:  # before any benchmark runs: a link, a folder, a path below a file, a place that cannot be written
            args.out = check_output_place(args.out, "report", ValueError, folder=False)
        except ValueError as refused:
            parser.error(f"--out {refused}")
        sink = []
    outcomes = [(benchmark, *run_one(benchmark, args.quick, sink)) for benchmark in chosen]
    _emit(f"== headline figures, side by side (load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)", sink)
    _emit("| benchmark | figure | value |\n|---|---|---|", sink)
    for benchmark, status, seconds, headline in outcomes:
        if not headline:
            _emit(f"| {benchmark.name} | status | {status} ({seconds:.0f} s, no figures) |", sink)
        for figure, value in headline.items():
            _emit(f"| {benchmark.name} | {figure} | {value} |", sink)
    _emit("== status", sink)
    for benchmark, status, seconds, _ in outcomes:
        _emit(f"   {benchmark.name:<12} {status:<12} {seconds:6.0f} s", sink)
    if sink is not None:  # complete or absent: a temporary file beside it, renamed over it (a link is replaced)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        content = "".join(sink).encode("utf-8")
        write_whole(args.out, lambda file: file.write(content))
    return 0 if all(status in ("ok", "missing") for _, status, _, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
