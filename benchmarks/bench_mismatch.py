"""Benchmark: what ``staleness/behaviour_minus_current_log_prob`` costs, measured in the actor update's own
forward pass (now) against a separate actor forward pass per step (before), on the CPU backend.

    python benchmarks/bench_mismatch.py [--pairs 3] [--steps 10] [--size cpu|scale-cpu] [--json FILE]

The same ``delayed_sync`` (3, 1) run of verl's ``main_ppo`` (REC-OneSide-NoIS in bypass mode, the CPU profile's
batch), ``--pairs`` times each way, interleaved A B A B ... so that the machine's load falls on both alike:

- A, the separate pass: ``trainer.v1.delayed_sync.mismatch_forward_pass=true`` makes the forward pass over the
  batch that every step made before (it also takes the metric from the update: two sums per micro-batch);
- B, in the update only (the default).

Per run, over the steps after the first: the median ``timing_s/old_log_prob`` (B: copying the rollout's
log-probs as pi_old; A: that and the forward pass), ``timing_s/update_actor`` and ``timing_s/step``; then the
median over the runs of each way. HEADLINE: both ways' figures and the saving per step. Every run is its own
child process (the one launcher), so start-up is not in the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path

WAYS = {"forward_pass": ("trainer.v1.delayed_sync.mismatch_forward_pass=true",), "in_update": ()}
SCHEDULE = ("trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=3",
            "trainer.v1.delayed_sync.sync_offset=1")
PHASES = ("old_log_prob", "update_actor", "step")


def run_figures(trained: list[dict]) -> dict[str, float]:
    """Median seconds per phase over the steps after the first, and that the metric was logged at each."""
    after_first = trained[1:]
    if not after_first:
        raise ValueError("a run needs at least 2 logged training steps")
    figures = {phase: statistics.median(record[metric_names.timing(phase)] for record in after_first) for phase in PHASES}
    figures["metric_logged"] = all(metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB in record for record in trained)
    return figures


def summarise(runs: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """Per way, the median over its runs of each figure."""
    return {way: {phase: statistics.median(run[phase] for run in way_runs) for phase in PHASES}
            for way, way_runs in runs.items() if way_runs}


def headline(summary: dict[str, dict[str, float]]) -> dict[str, str]:
    before, now = summary["forward_pass"], summary["in_update"]
    return {
        "old_log_prob s/step: separate pass -> in the update": f"{before['old_log_prob']:.3f} -> {now['old_log_prob']:.3f}",
        "s/step: separate pass -> in the update": f"{before['step']:.3f} -> {now['step']:.3f}",
        "saved per step": f"{before['step'] - now['step']:.3f} s ({1 - now['step'] / before['step']:.0%})",
        "old_log_prob / update_actor, in the update": f"{now['old_log_prob'] / now['update_actor']:.3f}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=positive_int, default=3, help="runs of each way, interleaved (default 3)")
    parser.add_argument("--steps", type=positive_int, default=10, help="training steps per run (default 10)")
    parser.add_argument("--size", choices=("cpu", "scale-cpu"), default="cpu", help="the assets (default cpu)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps >= 2")

    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.metrics_file import trained_steps
    from verl_ext.runs.launch import Outputs, launch
    from verl_ext.runs.run import Run
    from verl_ext.files import check_output_place
    from verl_ext.tiny.assets import AssetsFolderError, build_tiny_assets

    try:  # before anything is built: a link, a file, a path below a file; then the assets folder's own checks
        base = check_output_place(args.out, "run folder", AssetsFolderError) if args.out else \
            Path(tempfile.mkdtemp(prefix="bench_mismatch_"))
        assets = base / "assets"
        build_tiny_assets(assets, size=args.size)
    except AssetsFolderError as refused:
        parser.error(f"--out {refused}")
    backend, outputs = CPUBackend(assets), Outputs(base)
    runs: dict[str, list[dict]] = {way: [] for way in WAYS}
    for pair in range(args.pairs):
        for way, overrides in WAYS.items():
            name = f"{way}_{pair}"
            run = Run.from_preset(name, parse_algorithm("rec_oneside_nois"), overrides=(*SCHEDULE, *overrides),
                                  steps=args.steps)
            result = launch(run, backend, outputs, timeout=30 * 60)
            if not result.ok:
                raise SystemExit(f"{name}: {result.error}; log {result.log_path}")
            figures = run_figures(trained_steps(result.steps))
            runs[way].append(figures)
            print(f"{name}: " + ", ".join(f"{phase} {figures[phase]:.3f} s" for phase in PHASES), flush=True)
    summary = summarise(runs)
    print(f"\nmedians over {args.pairs} runs each ({args.size} assets, delayed_sync (3, 1), {args.steps} steps, "
          "seconds per step after the first):")
    for way, figures in summary.items():
        print(f"  {way:<13}" + "".join(f"{phase} {figures[phase]:.3f}  " for phase in PHASES))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1) + "\n")
    print_headline(headline(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
