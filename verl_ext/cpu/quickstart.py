"""The quickstart: verl's real ``main_ppo`` on this machine's CPU, REC-OneSide-NoIS on the counting task.

    bash run_scripts/cpu/quickstart.sh            (or: python -m verl_ext.cpu.quickstart [options] [-- overrides])

Overrides after ``--`` are Hydra overrides of the run, the topology included, as a GPU user writes them:
``-- trainer.n_gpus_per_node=2`` trains with two FSDP2 ranks and two rollout replicas, ``-- trainer.nnodes=2``
on a local cluster of two Ray nodes (:mod:`verl_ext.cpu.local_cluster`, started and stopped by the run).

``--algorithm`` picks an algorithm preset (:mod:`verl_ext.algorithms.presets`, ``verl-ext list``; the same names
as ``verl-ext lab`` and the run scripts, ``NAME@EPS_LOW_EPS_HIGH`` for another clipping range); the run is named
for it (:func:`verl_ext.runs.names.run_name`) and trains in verl's own ``sync`` mode unless the overrides say
otherwise.

It composes the run and checks it as verl's driver will (:mod:`verl_ext.runs.compose`, in seconds: a bad override is
refused before anything is written or started, the key and what is allowed on the last lines), builds the tiny
assets if they are missing (:mod:`verl_ext.tiny.assets`), prints the exact ``python -m verl.trainer.main_ppo``
command, runs it through the one launcher (:func:`verl_ext.runs.launch.start` on the CPU backend) with verl's
output streamed, and ends with a summary: reward at the start and the end, steps per second, start-up time and
peak memory (:mod:`verl_ext.runs.monitor`), and a PNG of the curves the run logged (reward, clip fraction, lag,
log-prob mismatch, gradient norm: :func:`verl_ext.plotting.plot_runs`, the panels ``verl-ext plot`` draws) beside
its metrics file. The summary is also written to ``<out>/summary.json``. A run into an ``--out`` that holds an
earlier one keeps it: its metrics, log, events, summary and PNG move together into
``<out>/verl_ext_cpu/<name>/earlier/<N>/`` (:mod:`verl_ext.runs.outputs`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from verl_ext import metric_names
from verl_ext.algorithms.presets import algorithm_argument
from verl_ext.checks.arguments import split_at_double_dash
from verl_ext.cpu_runtime.topology import Topology
from verl_ext.metrics_file import run_summary, trained_steps
from verl_ext.runs.launch import RunResult

DEFAULT_STEPS = 60
DEFAULT_ALGORITHM = "rec_oneside_nois"
REWARD = metric_names.SCORE_MEAN


def default_output_dir() -> Path:
    from verl_ext.tiny.assets import default_assets_dir

    return default_assets_dir().parents[1] / "outputs" / "cpu_quickstart"


def reward_curve(steps: list[dict], buckets: int = 6) -> list[tuple[int, int, float]]:
    """Mean reward over ``buckets`` consecutive stretches of steps: ``[(first step, last step, mean)]``."""
    trained = [step for step in trained_steps(steps) if REWARD in step]
    if not trained:
        return []
    size = max(1, -(-len(trained) // buckets))
    curve = []
    for start in range(0, len(trained), size):
        stretch = trained[start : start + size]
        curve.append((stretch[0]["step"], stretch[-1]["step"], sum(s[REWARD] for s in stretch) / len(stretch)))
    return curve


def format_summary(summary: dict) -> str:
    lines = [
        "",
        "=" * 72,
        f"verl-ext CPU quickstart: {summary['algorithm']} on the tiny counting task",
        "=" * 72,
        f"  steps trained          {summary['steps']}",
        f"  trainer ranks          {summary['world_size']}   ({summary['nnodes']} Ray node(s) x {summary['n_gpus_per_node']}; "
        f"one rollout replica each)",
        f"  reward (score) start   {summary['reward_start']:.3f}   (mean of the first tenth of the steps)",
        f"  reward (score) end     {summary['reward_end']:.3f}   (mean of the last tenth)",
        "  reward by stretch      "
        + "  ".join(f"{first}-{last}: {mean:.2f}" for first, last, mean in summary["reward_curve"]),
        f"  steps per second       {summary['steps_per_second']:.2f}   ({summary['seconds_per_step']:.2f} s per step after the first)",
    ]
    if summary.get("startup_seconds") is not None:
        lines.append(f"  start-up               {summary['startup_seconds']:.0f} s   (launch to the training loop)")
    lines += [
        f"  first step             {summary['first_step_seconds']:.0f} s   (waits for verl's agent-loop and reward workers)",
        f"  wall time              {summary['wall_seconds']:.0f} s   ({summary['cpu_seconds']:.0f} CPU-seconds over all processes)",
        f"  peak memory            {summary['peak_pss_gib']:.1f} GiB PSS, {summary['peak_rss_gib']:.1f} GiB RSS"
        "   (driver, Ray and every worker)",
        f"  metrics (JSONL)        {summary['metrics_path']}",
        f"  log                    {summary['log_path']}   (all of verl's output)",
    ]
    if summary.get("plot_path"):
        lines.append(f"  curves (PNG)           {summary['plot_path']}   ({', '.join(summary['plot_panels'])})")
    else:
        lines.append(f"  curves (PNG)           not drawn: {summary.get('plot_error')}")
    lines.append("=" * 72)
    return "\n".join(lines)


def curves_path(metrics_path: Path) -> Path:
    """The PNG of a run's curves: ``<name>.png`` beside its metrics file ``<name>.jsonl``."""
    return metrics_path.with_suffix(".png")


def draw_curves(result: RunResult, title: str) -> dict:
    """The run's curves as a PNG (:func:`curves_path`): ``{"plot_path", "plot_panels"}``, or ``{"plot_path": None,
    "plot_error"}`` when they cannot be drawn (the run itself succeeded)."""
    from verl_ext.metrics_file import MetricsFileError
    from verl_ext.plotting import plot_runs

    try:
        plotted = plot_runs([result.metrics_path], curves_path(result.metrics_path), title=title)
    except (MetricsFileError, OSError, ValueError) as error:
        return {"plot_path": None, "plot_error": str(error)}
    return {"plot_path": str(plotted.path), "plot_panels": plotted.panels}


def quickstart_run(steps: int = DEFAULT_STEPS, algorithm: str = DEFAULT_ALGORITHM, extra_overrides: Sequence[str] = ()):
    """The :class:`verl_ext.runs.run.Run` the quickstart makes: the algorithm's preset, the user's overrides last."""
    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.runs.names import run_name
    from verl_ext.runs.run import Run

    choice = parse_algorithm(algorithm)
    return Run.from_preset(run_name(choice), choice, overrides=extra_overrides, steps=steps)


def run_quickstart(
    steps: int = DEFAULT_STEPS,
    algorithm: str = DEFAULT_ALGORITHM,
    out: Optional[Path] = None,
    assets: Optional[Path] = None,
    echo: bool = True,
    extra_overrides: Sequence[str] = (),
) -> tuple[RunResult, Optional[dict]]:
    """Check the run, build the assets if needed, run ``main_ppo`` in a child process, summarise it (None if it
    failed). :class:`verl_ext.runs.run.RunRefused` before anything is written or started."""
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.files import write_whole
    from verl_ext.runs.compose import compose
    from verl_ext.runs.launch import ChildProcess, start
    from verl_ext.runs.outputs import Outputs, output_folder
    from verl_ext.tiny.assets import build_tiny_assets, check_replaceable, default_assets_dir

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    run = quickstart_run(steps, algorithm, extra_overrides)
    choice = run.algorithm
    assets = Path(assets or default_assets_dir()).resolve()
    check_replaceable(assets)  # a folder the build would refuse, refused in a second: before the checks import verl
    out = output_folder(out or default_output_dir())  # a file, below one, a link to nothing: refused, nothing done
    checked = compose(run, CPUBackend(assets), Outputs(out)).check()  # RunRefused: nothing written or started
    print(f"[verl-ext] tiny assets: {assets} (built if missing)", flush=True)
    build_tiny_assets(assets)
    summary_path = out / "summary.json"
    result = start(checked, ChildProcess(echo=echo), announce=True,
                   keep_with_run=(summary_path, curves_path(checked.composed.paths.metrics)))
    if not result.ok:
        return result, None
    measurements = result.measurements
    topology = Topology.from_overrides(run.overrides)
    summary = {
        "algorithm": f"{choice.label} (algorithm.adv_estimator={choice.estimator}, loss_mode={choice.loss_mode})",
        "nnodes": topology.nnodes,
        "n_gpus_per_node": topology.n_gpus_per_node,
        "world_size": topology.world_size,
        **run_summary(result.steps),
        "reward_curve": reward_curve(result.steps),
        "wall_seconds": measurements.wall_seconds,
        "cpu_seconds": measurements.cpu_seconds,
        "teardown_seconds": measurements.teardown_seconds,
        "peak_rss_gib": measurements.peak_rss_bytes / 2**30,
        "peak_pss_gib": measurements.peak_pss_bytes / 2**30,
        "metrics_path": str(result.metrics_path),
        "log_path": str(result.log_path),
        "command": list(result.command),
    }
    summary["startup_seconds"] = measurements.startup_seconds(summary["first_step_seconds"])
    summary.update(draw_curves(result, title=f"verl-ext CPU quickstart: {run.name}"))
    text = json.dumps(summary, indent=2) + "\n"
    write_whole(summary_path, lambda file: file.write(text.encode("utf-8")))  # never through a link
    return result, summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv, extra = split_at_double_dash(argv)
    parser = argparse.ArgumentParser(prog="python -m verl_ext.cpu.quickstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"training steps (default {DEFAULT_STEPS})")
    parser.add_argument("--algorithm", type=algorithm_argument, default=DEFAULT_ALGORITHM,
                        help=f"an algorithm preset of verl-ext list, NAME@EPS_LOW_EPS_HIGH for another clipping range "
                             f"(default {DEFAULT_ALGORITHM})")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default <repo>/outputs/cpu_quickstart)")
    parser.add_argument("--assets", type=Path, default=None, help="tiny assets folder (default <repo>/assets/tiny)")
    parser.add_argument("--quiet", action="store_true", help="do not stream verl's output (it is in the log)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    from verl_ext.config_values import ConfigError
    from verl_ext.cpu.local_cluster import ClusterStartError
    from verl_ext.tiny.assets import AssetsFolderError

    try:
        result, summary = run_quickstart(
            args.steps, args.algorithm, args.out, args.assets, echo=not args.quiet, extra_overrides=extra
        )
    except ConfigError as error:  # refused by the driver's checks, or a topology the CPU profile cannot size
        print(f"[verl-ext] error: {error}", file=sys.stderr, flush=True)  # the key and what is allowed, last
        return 2
    except AssetsFolderError as error:  # --assets is a folder verl-ext did not write, a link, a file: left as it is
        print(f"[verl-ext] error: {error}", file=sys.stderr)
        return 2
    except ClusterStartError as error:  # a node of the local cluster did not come up (stopped again)
        print(f"[verl-ext] {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: main_ppo (and a local cluster) were stopped on the way out
        print("[verl-ext] interrupted: verl's trainer was stopped", file=sys.stderr)
        return 130
    if summary is None:
        print(f"[verl-ext] {result.error}; see {result.log_path}", file=sys.stderr)
        return 1
    print(format_summary(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
