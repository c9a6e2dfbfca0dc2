"""Benchmark: verl-ext on one GPU -- verl's ``sync`` mode against ``delayed_sync`` (1,0), (3,1), (8,0) and
offline, and every loss against verl's ``vanilla`` on CUDA.

    python benchmarks/bench_gpu.py [--steps 10] [--modes sync,delayed_3_1,...] [--skip-losses] [--json FILE]

1. Trainer modes: one real ``main_ppo`` run per mode (FSDP2 actor + colocated vLLM in bf16, the tiny GPU
   model, the GPU profile; REC-OneSide-NoIS), each a child process. Reported per mode: start-up (launch to
   the training loop), steps per second after the first step, the time per step split as verl logs it
   (``timing_s/*``: ``gen`` -- generation, with the engine's wake-up for generation and its sleep after it
   in ``sync`` mode; ``update_weights`` -- waking the engine's weights and pushing the actor's; ``old_log_prob``;
   ``update_actor``; averaged over every step after the first, so a push every m steps counts 1/m), peak
   GPU memory of all processes (``nvidia-smi``) and the actor's own peak (verl's
   ``actor/perf/max_memory_allocated_gb``). verl has no separate timer for wake/sleep: they are inside
   ``gen`` and ``update_weights``.
2. Losses: forward+backward of each loss on the same CUDA tensors in this process (float32), timed with CUDA
   events (median of ``--repeats`` after warm-up), and the peak CUDA memory the pass allocates beyond its
   inputs; as ratios to ``vanilla``. The loss set is ``benchmarks/bench_losses.py``'s.

Every figure is printed with the GPU model, driver and the verl / vLLM / torch versions. One run per mode
costs minutes of start-up on the GPU: ``--modes`` runs a subset, and ``--json FILE`` merges the results with
those already in FILE, so the five runs can be spread over several commands; the HEADLINE covers what FILE
holds. Without a CUDA GPU and vLLM it prints why and exits 0 (skipped).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path

MODES = {  # name -> the run's trainer overrides
    "sync": ("trainer.v1.trainer_mode=sync",),
    **{
        f"delayed_{m}_{n}": ("trainer.v1.trainer_mode=delayed_sync", f"trainer.v1.delayed_sync.sync_interval={m}",
                             f"trainer.v1.delayed_sync.sync_offset={n}")
        for m, n in ((1, 0), (3, 1), (8, 0))
    },
    "offline": ("trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.offline=true"),
}
PHASES = ("gen", "update_weights", "old_log_prob", "ref", "adv", "update_actor", "step")
LOSS_SHAPES = ("256x2048", "64x8192")


def run_mode(name: str, steps: int, base: Path, assets: Path) -> dict:
    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.metrics_file import trained_steps
    from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
    from verl_ext.runs.launch import Outputs, launch
    from verl_ext.runs.run import Run

    run = Run.from_preset(name, parse_algorithm("rec_oneside_nois"), overrides=MODES[name], steps=steps)
    result = launch(run, GPUBackend(assets), Outputs(base, project=GPU_PROJECT), timeout=20 * 60)
    if not result.ok:
        raise SystemExit(f"{name}: {result.error}; log {result.log_path}")
    figures = mode_figures(trained_steps(result.steps))
    figures.update(
        startup_seconds=result.measurements.startup_seconds(figures["first_step_seconds"]),
        peak_gpu_gib=None if result.peak_gpu_mib is None else result.peak_gpu_mib / 1024,
        wall_seconds=result.measurements.wall_seconds,
        log=str(result.log_path),
    )
    return figures


def mode_figures(trained: list[dict]) -> dict:
    """Step rate and time split of one run from verl's logged steps (the first step reported apart: it also
    waits for the workers' start)."""
    if len(trained) < 2:
        raise ValueError(f"a mode needs at least 2 logged training steps, got {len(trained)}")
    after_first = trained[1:]
    phases = {phase: statistics.fmean(record.get(metric_names.timing(phase), 0.0) for record in after_first) for phase in PHASES}
    return {
        "steps": len(trained),
        "first_step_seconds": trained[0][metric_names.STEP_SECONDS],
        "seconds_per_step": phases["step"],
        "steps_per_second": 1.0 / phases["step"],
        "phase_seconds": phases,
        "actor_peak_allocated_gib": max((r.get(metric_names.MAX_MEMORY_ALLOCATED_GB, 0.0) for r in trained), default=None),
    }


def time_losses(repeats: int) -> dict:
    """{shape: {loss: {"ms": median CUDA-event time, "peak_mib": allocation beyond the inputs}}}."""
    import torch

    from tests.gpu.loss_reference import aggregation, loss_inputs
    from tests.recipe_config import call_registered_loss, loss_config
    from verl_ext.algorithms.registry import POLICY_LOSSES

    names = ["vanilla", *POLICY_LOSSES]
    results: dict = {}
    for shape in LOSS_SHAPES:
        rows, columns = map(int, shape.split("x"))
        tensors = {key: value.to("cuda", torch.float32 if value.is_floating_point() else value.dtype)
                   for key, value in loss_inputs(rows, columns).items()}
        results[shape] = {}
        for name in names:
            config = loss_config(name)

            def one_pass():
                log_prob = tensors["log_prob"].clone().requires_grad_(True)
                loss, _ = call_registered_loss(name, log_prob, tensors["old_log_prob"], tensors["advantages"],
                                               tensors["response_mask"], aggregation(name), config=config,
                                               behaviour_ratio=tensors["behaviour_ratio"])
                loss.backward()

            for _ in range(3):
                one_pass()
            torch.cuda.synchronize()
            baseline = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            one_pass()
            torch.cuda.synchronize()
            peak_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                one_pass()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            results[shape][name] = {"ms": statistics.median(times), "peak_mib": peak_mib}
    return results


def print_modes(modes: dict) -> None:
    print(f"{'mode':<14}{'start-up s':>11}{'s/step':>8}{'steps/s':>9}" + "".join(f"{p:>15}" for p in PHASES[:-1])
          + f"{'peak GPU GiB':>14}{'actor GiB':>11}")
    for name in MODES:
        if name in modes:
            m = modes[name]
            print(f"{name:<14}{m['startup_seconds'] or float('nan'):>11.0f}{m['seconds_per_step']:>8.2f}{m['steps_per_second']:>9.2f}"
                  + "".join(f"{m['phase_seconds'][p]:>15.3f}" for p in PHASES[:-1])
                  + f"{m['peak_gpu_gib'] or float('nan'):>14.1f}{m['actor_peak_allocated_gib'] or float('nan'):>11.2f}")


def loss_ratios(losses: dict) -> tuple[list[float], list[float]]:
    time_ratios, memory_ratios = [], []
    for shape, rows in losses.items():
        base = rows["vanilla"]
        for name, row in rows.items():
            if name == "vanilla":
                continue
            time_ratios.append(row["ms"] / base["ms"])
            if base["peak_mib"] > 0:
                memory_ratios.append(row["peak_mib"] / base["peak_mib"])
    return time_ratios, memory_ratios


def print_losses(losses: dict) -> None:
    print(f"{'loss':<18}{'shape':>10}{'ms':>9}{'x vanilla':>11}{'peak MiB':>10}{'x vanilla':>11}")
    for shape, rows in losses.items():
        base = rows["vanilla"]
        for name, row in rows.items():
            memory = row["peak_mib"] / base["peak_mib"] if base["peak_mib"] > 0 else float("nan")
            print(f"{name:<18}{shape:>10}{row['ms']:>9.3f}{row['ms'] / base['ms']:>11.2f}{row['peak_mib']:>10.1f}{memory:>11.2f}")


def headline(record: dict) -> dict[str, str]:
    figures = {"device": record["device_line"]}
    modes = record.get("modes", {})
    for name in MODES:
        if name in modes:
            figures[f"{name} s/step"] = f"{modes[name]['seconds_per_step']:.2f}"
    if "sync" in modes and "delayed_3_1" in modes:
        figures["delayed_sync (3,1) speed-up over sync"] = f"{modes['sync']['seconds_per_step'] / modes['delayed_3_1']['seconds_per_step']:.2f}x"
    startups = [m["startup_seconds"] for m in modes.values() if m.get("startup_seconds") is not None]
    if startups:
        figures["start-up s (launch to step 1)"] = f"{min(startups):.0f}-{max(startups):.0f}"
    peaks = [m["peak_gpu_gib"] for m in modes.values() if m.get("peak_gpu_gib") is not None]
    if peaks:
        figures["peak GPU memory GiB"] = f"{max(peaks):.1f}"
    if record.get("losses"):
        time_ratios, memory_ratios = loss_ratios(record["losses"])
        figures["losses on CUDA, time x vanilla"] = f"{min(time_ratios):.2f}-{max(time_ratios):.2f}"
        if memory_ratios:
            figures["losses on CUDA, peak memory x vanilla"] = f"{min(memory_ratios):.2f}-{max(memory_ratios):.2f}"
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="training steps per mode (default 10)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)} ('' for none)")
    parser.add_argument("--skip-losses", action="store_true")
    parser.add_argument("--repeats", type=int, default=50, help="timed loss passes per loss and shape (median)")
    parser.add_argument("--json", type=Path, help="merge the figures into this JSON file (kept between commands)")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args()
    modes = [name.strip() for name in args.modes.split(",") if name.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; allowed: {', '.join(MODES)}")
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step is reported apart)")

    from verl_ext.gpu.device import describe_device, format_device, gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason is not None:
        print(f"bench_gpu: skipped -- needs a CUDA GPU and vLLM: {reason}")
        print_headline({"status": f"skipped: {reason}"})
        return 0
    record = json.loads(args.json.read_text()) if args.json and args.json.is_file() else {}
    device = describe_device()
    if record.get("device") not in (None, device):
        print(f"bench_gpu: {args.json} holds figures from another device ({record['device']}): starting afresh")
        record = {}
    record.update(device=device, device_line=format_device(device))
    print(f"device: {record['device_line']}", flush=True)

    if modes:
        from verl_ext.tiny.assets import build_tiny_assets, default_assets_dir

        assets = default_assets_dir("gpu")
        build_tiny_assets(assets, size="gpu")
        base = args.out or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
        for name in modes:
            print(f"  running {name} for {args.steps} steps ...", flush=True)
            record.setdefault("modes", {})[name] = {**run_mode(name, args.steps, base, assets), "steps_asked": args.steps}
            if args.json:
                args.json.write_text(json.dumps(record, indent=1) + "\n")
    if not args.skip_losses:
        record["losses"] = time_losses(args.repeats)
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")

    if record.get("modes"):
        print(f"\ntrainer modes (tiny GPU model, REC-OneSide-NoIS, {args.steps} steps each; phases: mean s per step after the first)")
        print_modes(record["modes"])
    if record.get("losses"):
        print("\nlosses on CUDA, float32, forward+backward (CUDA events, median)")
        print_losses(record["losses"])
    print(f"\nall figures on: {record['device_line']}")
    print_headline(headline(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
