"""A user's check on a GPU node: one real ``main_ppo`` run under ``delayed_sync`` (m=3, n=1), ~10 steps.

    bash run_scripts/gpu/smoke.sh                   (or: verl-ext gpu-smoke [options] [-- overrides])

It builds the tiny GPU assets if missing (``python -m verl_ext.tiny.assets --size gpu``), runs verl's
trainer with the GPU profile (:mod:`verl_ext.gpu.profile`: FSDP2 actor, colocated vLLM in bf16), then prints
a summary -- start-up, seconds per step, weight pushes against the schedule, lags, the gap between
vLLM's and the actor's log-probs at lag 0, reward, peak GPU memory -- and exits 1 when a check fails
(:mod:`verl_ext.gpu.smoke_checks`). Without a CUDA GPU or vLLM it stops at once (exit 2) saying what is
missing. ``--backend cpu`` runs the same run and checks on the CPU backend (float32; how the checks were
tested without a GPU); ``--metrics FILE`` only checks an existing metrics file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from verl_ext import metric_names
from verl_ext.algorithms.presets import algorithm_argument
from verl_ext.checks.arguments import int_in, non_negative_int, positive_float, positive_int, split_at_double_dash
from verl_ext.gpu.smoke_checks import (
    BF16_LAG0_TOLERANCE, FLOAT32_LAG0_TOLERANCE, SmokeMetricsError, format_smoke, summarize_smoke,
)

DEFAULT_STEPS = 10
MAX_STEPS = 1000  # a smoke check is ~10 steps; 1,000 already take an hour of a GPU
DEFAULT_SYNC_INTERVAL, DEFAULT_SYNC_OFFSET = 3, 1
DEFAULT_ALGORITHM = "rec_oneside_nois"
TIMEOUT_SECONDS = 30 * 60
SUMMARY_FILE = "smoke_summary.json"  # in the output folder; moves with the run it describes when a later one starts


def default_output_dir(backend: str) -> Path:
    from verl_ext.tiny.assets import default_assets_dir

    return default_assets_dir().parents[1] / "outputs" / f"{backend}_smoke"


def smoke_run(steps: int, sync_interval: int, sync_offset: int, algorithm: str, extra: Sequence[str] = ()):
    """The smoke's run: the algorithm preset under delayed_sync (m, n), named in the one format
    (``rec_oneside_nois-sync_interval_3_offset_1``)."""
    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.runs.names import run_name
    from verl_ext.runs.run import Run
    from verl_ext.staleness.setting import Setting

    choice, setting = parse_algorithm(algorithm), Setting(sync_interval, sync_offset)
    return Run.from_preset(run_name(choice, setting), choice, setting, overrides=extra, steps=steps)


def read_logged_steps(path: Path, figures: dict[str, str]) -> list[dict]:
    """The run's logged steps (:func:`verl_ext.metrics_file.read_metrics_file`); a last line cut short is
    noted in ``figures``, so that the summary says so."""
    from verl_ext.metrics_file import read_metrics_file

    metrics = read_metrics_file(path)
    if metrics.skipped_lines:
        figures["metrics file"] = f"skipped {metrics.skipped_lines} last line cut short"
    return metrics.steps


def run_smoke(args, extra: Sequence[str]) -> tuple[Optional[dict], Optional[str], dict[str, str]]:
    """Build the assets, run, and return (the run's logged steps, an error, figures for the summary)."""
    from verl_ext.runs.launch import Outputs, launch
    from verl_ext.tiny.assets import build_tiny_assets, default_assets_dir

    size = "gpu" if args.backend == "gpu" else "cpu"
    assets = Path(args.assets or default_assets_dir(size)).resolve()
    out = Path(args.out or default_output_dir(args.backend)).resolve()
    print(f"[verl-ext] tiny {size} assets: {assets} (built if missing)", flush=True)
    build_tiny_assets(assets, size=size)
    run = smoke_run(args.steps, args.sync_interval, args.sync_offset, args.algorithm, extra)
    figures: dict[str, str] = {}
    if args.backend == "gpu":
        from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
        from verl_ext.gpu.device import describe_device, format_device

        figures["device"] = format_device(describe_device())
        backend, outputs = GPUBackend(assets), Outputs(out, project=GPU_PROJECT)
    else:
        from verl_ext.cpu.backend import CPUBackend

        figures["device"] = "CPU backend (verl_ext.cpu: transformers rollout, float32)"
        backend, outputs = CPUBackend(assets), Outputs(out)
    result = launch(run, backend, outputs, echo=not args.quiet, announce=True, timeout=TIMEOUT_SECONDS,
                    keep_with_run=(out / SUMMARY_FILE,))  # RunRefused before anything is written or started
    if result.peak_gpu_mib:
        figures["peak GPU memory"] = f"{result.peak_gpu_mib / 1024:.1f} GiB (all processes, nvidia-smi)"
    measurements = result.measurements
    steps = read_logged_steps(result.metrics_path, figures) if result.metrics_path.is_file() else []
    first_step = next((record[metric_names.STEP_SECONDS] for record in steps if metric_names.STEP_SECONDS in record), None)
    startup = measurements.startup_seconds(first_step) if measurements else None
    if startup is not None:
        figures["start-up"] = f"{startup:.0f} s (launch to the training loop)"
    if measurements:
        figures["wall time"] = f"{measurements.wall_seconds:.0f} s"
    figures["metrics"] = str(result.metrics_path)
    figures["log"] = str(result.log_path)
    error = None if result.ok else f"{result.error}; see {result.log_path}"
    return steps, error, figures


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv, extra = split_at_double_dash(argv)
    parser = argparse.ArgumentParser(prog="verl-ext gpu-smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int_in(1, MAX_STEPS), default=DEFAULT_STEPS,
                        help=f"training steps, 1..{MAX_STEPS} (default {DEFAULT_STEPS})")
    parser.add_argument("--sync-interval", type=positive_int, default=DEFAULT_SYNC_INTERVAL, help="m (default 3)")
    parser.add_argument("--sync-offset", type=non_negative_int, default=DEFAULT_SYNC_OFFSET, help="n (default 1)")
    parser.add_argument("--algorithm", type=algorithm_argument, default=DEFAULT_ALGORITHM,
                        help=f"an algorithm preset of verl-ext list, NAME@EPS_LOW_EPS_HIGH for another clipping range "
                             f"(default {DEFAULT_ALGORITHM})")
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu",
                        help="gpu: vLLM + FSDP2 on this node's GPU (default); cpu: the CPU backend, float32")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default <repo>/outputs/<backend>_smoke)")
    parser.add_argument("--assets", type=Path, default=None, help="tiny assets folder (default <repo>/assets/tiny-gpu)")
    parser.add_argument("--metrics", type=Path, default=None,
                        help="only check this metrics file (verl's file logger JSONL) of a finished run; runs nothing")
    parser.add_argument("--tolerance", type=positive_float, default=None,
                        help=f"lag-0 log-prob gap tolerance, nats/token (default {BF16_LAG0_TOLERANCE:g} on gpu, "
                             f"{FLOAT32_LAG0_TOLERANCE:g} on cpu)")
    parser.add_argument("--quiet", action="store_true", help="do not stream verl's output (it is in the log)")
    args = parser.parse_args(argv)
    tolerance = args.tolerance if args.tolerance is not None else (
        BF16_LAG0_TOLERANCE if args.backend == "gpu" else FLOAT32_LAG0_TOLERANCE)

    from verl_ext.staleness.schedule import StalenessSchedule

    schedule = StalenessSchedule(sync_interval=args.sync_interval, sync_offset=args.sync_offset)
    figures: dict[str, str] = {}
    if args.metrics is not None:
        if not args.metrics.is_file():
            parser.error(f"--metrics {args.metrics}: no such file")
        from verl_ext.metrics_file import MetricsFileError

        try:
            steps, error = read_logged_steps(args.metrics, figures), None
        except MetricsFileError as bad_file:
            parser.error(f"--metrics: {bad_file}")
        figures["metrics"] = str(args.metrics)
    else:
        if args.backend == "gpu":
            from verl_ext.gpu.device import NO_GPU_HELP, gpu_unavailable_reason

            reason = gpu_unavailable_reason()
            if reason is not None:
                print(f"[verl-ext] gpu-smoke needs a CUDA GPU and vLLM: {reason}. Nothing was started.\n{NO_GPU_HELP}",
                      file=sys.stderr)
                return 2
        from verl_ext.config_values import ConfigError
        from verl_ext.tiny.assets import AssetsFolderError

        try:
            steps, error, figures = run_smoke(args, extra)
        except ConfigError as refused:  # the driver's checks refused it (RunRefused), or a topology the CPU cannot size
            print(f"[verl-ext] error: {refused}", file=sys.stderr)  # the key and what is allowed, last
            return 2
        except AssetsFolderError as refused:  # --assets: a folder verl-ext did not write, a link, a file
            print(f"verl-ext gpu-smoke: error: {refused}. Nothing was started.", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the launcher stopped main_ppo on the way out
            print("[verl-ext] interrupted: verl's trainer was stopped", file=sys.stderr)
            return 130
    try:
        summary = summarize_smoke(steps, schedule, args.steps, tolerance)
    except SmokeMetricsError as unreadable:
        print(f"verl-ext gpu-smoke: error: {figures['metrics']}: {unreadable}", file=sys.stderr)
        return 2
    title = (f"verl-ext {args.backend} smoke: delayed_sync m={args.sync_interval} n={args.sync_offset}, "
             f"{args.algorithm}, {args.steps} steps, tiny counting task")
    print(format_smoke(summary, title, figures), flush=True)
    if args.metrics is None:
        out = Path(figures["metrics"]).parents[1]
        (out / SUMMARY_FILE).write_text(json.dumps({**summary.as_dict(), **figures, "error": error}, indent=2) + "\n")
    if error is not None:
        print(f"[verl-ext] the run failed: {error}", file=sys.stderr)
        return 1
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
